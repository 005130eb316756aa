/* Block compares (device/cmp.h) on a backend, above all the compare with a
 * key that dedup uses on an encrypted GPU tier: pair i is a plaintext
 * block and a stored ciphertext block, which the backend decrypts with
 * the pair's tweak (emu: OpenSSL; CUDA: cmp_xts_kernel, in registers) and
 * compares with the plaintext.
 *
 *   KAT        IEEE 1619-2007 vectors 10-14 (xts_kat.h): each vector's
 *              ciphertext against its plaintext is equal; a byte flipped
 *              in the plaintext or in the ciphertext (first, middle, last
 *              byte), or the tweak one off, is different
 *   sizes      random keys and blocks of 512 B .. 8 KiB (8 KiB: two data
 *              units, tweaks t and t + 1), ciphertext by OpenSSL: many
 *              pairs over a small pool of blocks (on CUDA enough that
 *              every warp takes more than 32 pairs: its tweaks in rounds),
 *              a third of them broken (a flipped byte on either side, a
 *              wrong tweak): each result equals the host's verdict
 *   plain      without a key: equal and one flipped byte; and two jobs
 *              started (vc_cmp_start), then one wait for both
 *   refusals   -EINVAL for a bad length, a key whose halves are equal,
 *              missing or misaligned arrays; the result bytes untouched
 * Results are checked to be exactly 0 or 1, and the byte after the last
 * result untouched.
 *
 * VC_TEST_DEVICE=emu|cuda picks the backend; cuda skips without a GPU, emu
 * without OpenSSL (the reason on stderr). VC_TEST_QUICK shrinks the CUDA
 * job.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cmp.h"
#include "device/device.h"
#include "device/xts.h"
#include "testutil.h"
#include "vramcache.h"
#include "xts_kat.h"

static struct vc_device *dev;

/* Device-visible memory for a job: pairs, tweaks and results in mapped
 * host memory (as dedup's scratch), plaintext blocks in mapped host
 * memory (the host tier), ciphertext blocks in device memory (the GPU
 * tier). */
struct arena {
	uint64_t *pairs, pairs_dev;
	uint64_t *tweaks, tweaks_dev;
	uint8_t *out;
	uint64_t out_dev;
	unsigned char *plain;
	uint64_t plain_dev;
	uint64_t cipher_dev;
	size_t npairs, blocks_bytes;
};

static struct arena arena_new(size_t npairs, size_t blocks_bytes)
{
	struct arena a = { .npairs = npairs, .blocks_bytes = blocks_bytes };
	void *p;
	CHECK_OK(dev->ops->host_alloc(dev, npairs * 16, &p, &a.pairs_dev));
	a.pairs = p;
	CHECK_OK(dev->ops->host_alloc(dev, npairs * 8, &p, &a.tweaks_dev));
	a.tweaks = p;
	CHECK_OK(dev->ops->host_alloc(dev, npairs + 1, &p, &a.out_dev));
	a.out = p;
	CHECK_OK(dev->ops->host_alloc(dev, blocks_bytes, &p, &a.plain_dev));
	a.plain = p;
	CHECK_OK(dev->ops->mem_alloc(dev, blocks_bytes, &a.cipher_dev));
	return a;
}

static void arena_free(struct arena *a)
{
	dev->ops->host_free(dev, a->pairs);
	dev->ops->host_free(dev, a->tweaks);
	dev->ops->host_free(dev, a->out);
	dev->ops->host_free(dev, a->plain);
	dev->ops->mem_free(dev, a->cipher_dev);
}

static void put_cipher(const struct arena *a, size_t off, const unsigned char *ct, size_t len)
{
	CHECK_OK(dev->ops->memcpy_sync(dev, a->cipher_dev + off, (uint64_t)(uintptr_t)ct, len));
}

/* Runs the job of n pairs (a's arrays, key, len) and checks each result
 * against want[i] (exactly 0 or 1) and the byte after them untouched. */
static void run_expect(const struct arena *a, const struct vc_xts_key *key, uint32_t n, uint32_t len,
		       const uint8_t *want, const char *what)
{
	memset(a->out, 0xa5, n + 1);
	const struct vc_cmp_job job = { .pairs_dev = a->pairs_dev, .out_dev = a->out_dev, .n = n,
					.len = len, .key = key, .tweaks_dev = a->tweaks_dev };
	CHECK_OK(vc_cmp_run(dev, &job));
	for (uint32_t i = 0; i < n; i++)
		if (a->out[i] != want[i]) {
			fprintf(stderr, "%s, %u-byte blocks: pair %u of %u is %u, want %u\n", what, len, i, n,
				a->out[i], want[i]);
			exit(1);
		}
	CHECK(a->out[n] == 0xa5);
}

/* --- known answers ----------------------------------------------------- */

static void test_kat(void)
{
	static struct t_xts_kat v[T_XTS_KAT_N];
	t_xts_kat_load(v);
	const uint32_t L = T_XTS_KAT_LEN;
	/* Per vector: pair 0 equal; 1-3 a plaintext byte flipped (first,
	 * middle, last); 4-6 a ciphertext byte flipped there; 7 the tweak
	 * one off; 8 equal again (the same blocks after the others). */
	enum { PER = 9 };
	static const size_t at[3] = { 0, 300, T_XTS_KAT_LEN - 1 };
	struct arena a = arena_new(PER, (size_t)7 * L);
	uint8_t want[PER];
	for (int k = 0; k < T_XTS_KAT_N; k++) {
		/* Blocks: 0 plaintext, 1-3 flipped plaintexts; ciphertext 0
		 * the vector's, 1-3 flipped. */
		unsigned char ct[T_XTS_KAT_LEN];
		for (int b = 0; b < 4; b++) {
			unsigned char *p = a.plain + (size_t)b * L;
			t_xts_kat_plain(p);
			memcpy(ct, v[k].ct, L);
			if (b > 0) {
				p[at[b - 1]] ^= 0x01;
				ct[at[b - 1]] ^= 0x80;
			}
			put_cipher(&a, (size_t)b * L, ct, L);
		}
		for (int q = 0; q < PER; q++) {
			const int pb = q >= 1 && q <= 3 ? q : 0, cb = q >= 4 && q <= 6 ? q - 3 : 0;
			a.pairs[2 * q] = a.plain_dev + (uint64_t)pb * L;
			a.pairs[2 * q + 1] = a.cipher_dev + (uint64_t)cb * L;
			a.tweaks[q] = v[k].tweak + (q == 7);
			want[q] = q == 0 || q == 8;
		}
		run_expect(&a, &v[k].key, PER, L, want, "IEEE 1619 vector");
		/* Each pair alone too (a job of one: one warp, one block). */
		for (int q = 1; q < PER; q++) { /* pair q into slot 0 (pair 8 is pair 0's twin) */
			a.pairs[0] = a.pairs[2 * q], a.pairs[1] = a.pairs[2 * q + 1];
			a.tweaks[0] = a.tweaks[q];
			run_expect(&a, &v[k].key, 1, L, &want[q], "IEEE 1619 vector, a pair alone");
		}
	}
	arena_free(&a);
}

/* --- sizes ----------------------------------------------------------------- */

static void fill_rand(unsigned char *p, size_t len, uint64_t *seed)
{
	for (size_t i = 0; i < len; i += 8) {
		const uint64_t x = t_rand(seed);
		memcpy(p + i, &x, len - i < 8 ? len - i : 8);
	}
}

/* n pairs over a pool of P blocks of len bytes: pair i is block i % P's
 * plaintext against its ciphertext (by OpenSSL), broken for i % 3 == 1 in
 * one of three ways (plaintext byte, ciphertext byte, tweak). */
static void test_size(uint32_t len, uint32_t n, uint64_t *seed)
{
	enum { P = 24 };
	const uint32_t unit = len < VC_XTS_UNIT_MAX ? len : VC_XTS_UNIT_MAX, units = len / unit;
	struct vc_xts_key key;
	do
		fill_rand(key.bytes, sizeof key.bytes, seed);
	while (vc_xts_check(&key, unit) < 0);
	/* Blocks 0..P-1 intact; P..2P-1 the same with a byte flipped (the
	 * plaintext's copy in plain, the ciphertext's in cipher). */
	struct arena a = arena_new(n, (size_t)2 * P * len);
	unsigned char *ct = malloc((size_t)2 * P * len);
	uint64_t tw[P], *ut = malloc((size_t)P * units * sizeof *ut);
	uint8_t *want = malloc(n);
	CHECK(ct && ut && want);
	fill_rand(a.plain, (size_t)P * len, seed);
	for (uint32_t b = 0; b < P; b++) {
		tw[b] = t_rand(seed) >> 16;
		for (uint32_t k = 0; k < units; k++)
			ut[(size_t)b * units + k] = tw[b] + k;
	}
	memcpy(ct, a.plain, (size_t)P * len);
	CHECK_OK(vc_emu_xts_pages(&key, ct, ut, P * units, unit, 1));
	for (uint32_t b = 0; b < P; b++) {
		const size_t flip = (size_t)(t_rand(seed) % len);
		memcpy(a.plain + (size_t)(P + b) * len, a.plain + (size_t)b * len, len);
		memcpy(ct + (size_t)(P + b) * len, ct + (size_t)b * len, len);
		a.plain[(size_t)(P + b) * len + flip] ^= 0x10;
		ct[(size_t)(P + b) * len + flip] ^= 0x01;
	}
	put_cipher(&a, 0, ct, (size_t)2 * P * len);
	for (uint32_t i = 0; i < n; i++) {
		const uint32_t b = i % P, how = (i / 3) % 3;
		const bool broken = i % 3 == 1;
		a.pairs[2 * i] = a.plain_dev + (uint64_t)(broken && how == 0 ? P + b : b) * len;
		a.pairs[2 * i + 1] = a.cipher_dev + (uint64_t)(broken && how == 1 ? P + b : b) * len;
		a.tweaks[i] = tw[b] + (broken && how == 2 ? (i & 1 ? 1 : units) : 0);
		want[i] = !broken;
	}
	run_expect(&a, &key, n, len, want, "random blocks");
	arena_free(&a);
	free(ct);
	free(ut);
	free(want);
}

/* --- without a key ------------------------------------------------------ */

static void test_plain(uint64_t *seed)
{
	const uint32_t len = 4096;
	struct arena a = arena_new(4, (size_t)2 * len);
	unsigned char *blk = malloc(len);
	CHECK(blk);
	fill_rand(a.plain, len, seed);
	memcpy(a.plain + len, a.plain, len);
	a.plain[len + 4000] ^= 4;
	memcpy(blk, a.plain, len);
	put_cipher(&a, 0, blk, len); /* "stored" blocks, compared as bytes */
	for (int q = 0; q < 2; q++) {
		a.pairs[2 * q] = a.plain_dev + (uint64_t)q * len;
		a.pairs[2 * q + 1] = a.cipher_dev;
	}
	static const uint8_t want[2] = { 1, 0 };
	run_expect(&a, NULL, 2, len, want, "no key");
	/* In halves: two jobs started (the pairs the other way round in the
	 * second, its results after the first's), one wait for both. */
	a.pairs[4] = a.plain_dev + len;
	a.pairs[6] = a.plain_dev;
	a.pairs[5] = a.pairs[7] = a.cipher_dev;
	memset(a.out, 0xa5, 5);
	const struct vc_cmp_job j1 = { .pairs_dev = a.pairs_dev, .out_dev = a.out_dev, .n = 2,
				       .len = len };
	const struct vc_cmp_job j2 = { .pairs_dev = a.pairs_dev + 32, .out_dev = a.out_dev + 2,
				       .n = 2, .len = len };
	CHECK_OK(vc_cmp_start(dev, &j1));
	CHECK_OK(vc_cmp_start(dev, &j2));
	CHECK_OK(vc_cmp_wait(dev));
	CHECK(a.out[0] == 1 && a.out[1] == 0 && a.out[2] == 0 && a.out[3] == 1);
	CHECK(a.out[4] == 0xa5);
	arena_free(&a);
	free(blk);
}

/* --- refusals --------------------------------------------------------------- */

static void expect_einval(const struct vc_cmp_job *j, const uint8_t *out, const char *what)
{
	const int r = vc_cmp_run(dev, j);
	if (r != -EINVAL) {
		fprintf(stderr, "%s: vc_cmp_run gave %d, want -EINVAL\n", what, r);
		exit(1);
	}
	CHECK(out[0] == 0xa5);
}

static void test_refusals(void)
{
	static struct t_xts_kat v[T_XTS_KAT_N];
	t_xts_kat_load(v);
	struct arena a = arena_new(1, 4096);
	memset(a.out, 0xa5, 2);
	a.pairs[0] = a.plain_dev, a.pairs[1] = a.cipher_dev;
	const struct vc_cmp_job ok = { .pairs_dev = a.pairs_dev, .out_dev = a.out_dev, .n = 1,
				       .len = 512, .key = &v[0].key, .tweaks_dev = a.tweaks_dev };
	CHECK_OK(vc_cmp_check(&ok));
	struct vc_cmp_job j;
	static const uint32_t bad_len[] = { 0, 16, 256, 511, 1536, 3000, VC_CMP_LEN_MAX * 2 };
	for (size_t i = 0; i < sizeof bad_len / sizeof bad_len[0]; i++) {
		j = ok, j.len = bad_len[i];
		expect_einval(&j, a.out, "a length a key's compare cannot take");
		j.n = 0;
		expect_einval(&j, a.out, "the same, no pairs");
	}
	struct vc_xts_key same = v[0].key;
	memcpy(same.bytes + 32, same.bytes, 32);
	j = ok, j.key = &same;
	expect_einval(&j, a.out, "a key whose halves are equal");
	j = ok, j.tweaks_dev = 0;
	expect_einval(&j, a.out, "no tweaks");
	j = ok, j.tweaks_dev += 4;
	expect_einval(&j, a.out, "misaligned tweaks");
	j = ok, j.pairs_dev = 0;
	expect_einval(&j, a.out, "no pairs");
	j = ok, j.pairs_dev += 4;
	expect_einval(&j, a.out, "misaligned pairs");
	j = ok, j.out_dev = 0;
	expect_einval(&j, a.out, "no results");
	j = ok, j.len = VC_CMP_LEN_MAX + 1, j.key = NULL;
	expect_einval(&j, a.out, "no key, too long");
	CHECK(vc_cmp_check(NULL) == -EINVAL);
	/* Accepted: no pairs; without a key, lengths the cipher refuses. */
	j = ok, j.n = 0, j.tweaks_dev = 0, j.pairs_dev = 0;
	CHECK_OK(vc_cmp_run(dev, &j));
	j = ok, j.key = NULL, j.len = 3000, j.tweaks_dev = 0;
	CHECK_OK(vc_cmp_check(&j));
	CHECK(a.out[0] == 0xa5);
	arena_free(&a);
}

int main(void)
{
	const int kind = t_device_kind();
	const int r = vc_device_open(kind, 0, &dev);
	if (kind == VC_DEVICE_CUDA)
		t_skip_if_absent(r, "compare kernels on CUDA");
	CHECK_OK(r);
	uint64_t seed = 0xc0ffee;
	test_plain(&seed);
	test_refusals();
	struct vc_xts_key k;
	memset(k.bytes, 1, 32);
	memset(k.bytes + 32, 2, 32);
	unsigned char probe[512] = { 0 };
	const uint64_t t0 = 0;
	const int have = vc_emu_xts_pages(&k, probe, &t0, 1, 512, 1);
	if (have == -VC_ENOTBUILT) {
		fprintf(stderr, "SKIP compares with a key: %s\n", vc_last_error());
		vc_device_close(dev);
		return T_SKIP;
	}
	CHECK_OK(have);
	test_kat();
	/* On CUDA, more pairs than its grid has warps times 32 (a warp's
	 * tweaks come 32 pairs at a time); 132 SMs x 2 blocks x 8 warps. */
	const bool big = kind == VC_DEVICE_CUDA && !getenv("VC_TEST_QUICK");
	for (uint32_t len = 512; len <= 8192; len *= 2)
		test_size(len, big && len == 512 ? 80000 : 300, &seed);
	vc_device_close(dev);
	printf("test_cmp (%s): IEEE 1619 vectors 10-14, random blocks of 512 B .. 8 KiB with flipped "
	       "bytes and wrong tweaks, plain pairs, refusals: ok\n",
	       kind == VC_DEVICE_CUDA ? "cuda" : "emu");
	return 0;
}
