/* base/gmac.h: AES-256-GMAC against NIST's GCM vectors (CAVP
 * gcmEncryptExtIV256.rsp, 96-bit IVs, no plaintext: the data as additional
 * authenticated data) and against itself: every one-bit change of data,
 * IV or key changes the tag, and tags from many threads at once equal
 * those of one thread. Skips where the build has no OpenSSL.
 */
#include <errno.h>
#include <pthread.h>

#include "base/gmac.h"
#include "testutil.h"

static void unhex(const char *h, unsigned char *out, size_t n)
{
	CHECK(strlen(h) == 2 * n);
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		CHECK(sscanf(h + 2 * i, "%2x", &v) == 1);
		out[i] = (unsigned char)v;
	}
}

static const struct vec {
	const char *key, *iv, *aad, *tag;
} vecs[] = {
	/* [PTlen=0][AADlen=0] Count=0 */
	{ "b52c505a37d78eda5dd34f20c22540ea1b58963cf8e5bf8ffa85f9f2492505b4",
	  "516c33929df5a3284ff463d7", "", "bdc1ac884d332457a1d2664f168c76f0" },
	/* [PTlen=0][AADlen=128] Count=0 and 1 */
	{ "78dc4e0aaf52d935c3c01eea57428f00ca1fd475f5da86a49c8dd73d68c8e223",
	  "d79cf22d504cc793c3fb6c8a", "b96baa8c1c75a671bfb2d08d06be5f36",
	  "3e5d486aa2e30b22e040b85723a06e76" },
	{ "4457ff33683cca6ca493878bdc00373893a9763412eef8cddb54f91318e0da88",
	  "699d1f29d7b8c55300bb1fd2", "6749daeea367d0e9809e2dc2f309e6e3",
	  "d60c74d2517fde4a74e0cd4709ed43a9" },
	/* [PTlen=0][AADlen=160] Count=0 */
	{ "886cff5f3e6b8d0e1ad0a38fcdb26de97e8acbe79f6bed66959a598fa5047d65",
	  "3a8efa1cd74bbab5448f9945", "519fee519d25c7a304d6c6aa1897ee1eb8c59655",
	  "f6d47505ec96c98a42dc3ae719877b87" },
};

static unsigned char page[4096], ref[64][16];
static struct vc_gmac *shared;

static void iv_n(unsigned n, unsigned char iv[12])
{
	memset(iv, 0, 12);
	memcpy(iv, &n, sizeof n);
}

static void *worker(void *arg)
{
	(void)arg;
	for (int round = 0; round < 200; round++)
		for (unsigned n = 0; n < 64; n++) {
			unsigned char iv[12], tag[16];
			iv_n(n, iv);
			CHECK_OK(vc_gmac_tag(shared, iv, page, sizeof page, tag));
			CHECK(memcmp(tag, ref[n], 16) == 0);
		}
	return NULL;
}

int main(void)
{
	unsigned char key[32] = { 0 }, iv[12], aad[64], want[16], tag[16];
	struct vc_gmac *g;
	int e = vc_gmac_open(key, &g);
	if (e == -VC_ENOTBUILT) {
		fprintf(stderr, "SKIP: %s\n", vc_last_error());
		return T_SKIP;
	}
	CHECK_OK(e);
	vc_gmac_close(g);
	for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++) {
		const struct vec *v = &vecs[i];
		size_t n = strlen(v->aad) / 2;
		unhex(v->key, key, 32);
		unhex(v->iv, iv, 12);
		unhex(v->aad, aad, n);
		unhex(v->tag, want, 16);
		CHECK_OK(vc_gmac_open(key, &g));
		CHECK_OK(vc_gmac_tag(g, iv, aad, n, tag));
		CHECK(memcmp(tag, want, 16) == 0);
		vc_gmac_close(g);
	}
	fprintf(stderr, "GMAC: %zu NIST vectors match\n", sizeof vecs / sizeof *vecs);

	/* One-bit changes of a page, its IV or the key change the tag. */
	uint64_t seed = 7;
	for (size_t i = 0; i < sizeof page; i += 8) {
		uint64_t r = t_rand(&seed);
		memcpy(page + i, &r, 8);
	}
	for (int i = 0; i < 32; i++)
		key[i] = (unsigned char)(i * 29 + 3);
	CHECK_OK(vc_gmac_open(key, &g));
	unsigned char base[16];
	iv_n(1, iv);
	CHECK_OK(vc_gmac_tag(g, iv, page, sizeof page, base));
	for (unsigned bit = 0; bit < sizeof page * 8; bit += 61) {
		page[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		CHECK_OK(vc_gmac_tag(g, iv, page, sizeof page, tag));
		CHECK(memcmp(tag, base, 16) != 0);
		page[bit / 8] ^= (unsigned char)(1u << (bit % 8));
	}
	iv_n(2, iv);
	CHECK_OK(vc_gmac_tag(g, iv, page, sizeof page, tag));
	CHECK(memcmp(tag, base, 16) != 0);
	struct vc_gmac *g2;
	key[31] ^= 1;
	CHECK_OK(vc_gmac_open(key, &g2));
	iv_n(1, iv);
	CHECK_OK(vc_gmac_tag(g2, iv, page, sizeof page, tag));
	CHECK(memcmp(tag, base, 16) != 0);
	vc_gmac_close(g2);
	key[31] ^= 1;

	/* Many threads on one context (more than its pool of contexts). */
	for (unsigned n = 0; n < 64; n++) {
		iv_n(n, iv);
		CHECK_OK(vc_gmac_tag(g, iv, page, sizeof page, ref[n]));
	}
	shared = g;
	pthread_t th[80];
	for (int i = 0; i < 80; i++)
		CHECK(pthread_create(&th[i], NULL, worker, NULL) == 0);
	for (int i = 0; i < 80; i++)
		pthread_join(th[i], NULL);
	vc_gmac_close(g);
	fprintf(stderr, "test_gmac: ok\n");
	return 0;
}
