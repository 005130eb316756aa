/* Encryption of the GPU tier (vc_config.encrypt), seen from outside: what
 * the GPU tier's memory holds, byte for byte.
 *
 * Dump test: pages of marker blocks enter the GPU tier both ways a page
 * goes down (a prefetch into the GPU tier, and write-back pages the host
 * tier demotes), the whole tier is copied out (engine/debug.h) and
 * searched. With encryption off the markers are there (so the search can
 * find them); with it on there is no marker and no 16-byte quarter of the
 * key anywhere, every byte reads back right through the cache, and the
 * backing file ends right. With a key file, the ciphertext of a page in the
 * dump is exactly dm-crypt's aes-xts-plain64 of the page with the page
 * number as sector (OpenSSL computes it here): on CUDA, the move kernels
 * against OpenSSL through the whole engine. Two caches with random keys
 * hold different ciphertext for the same pages.
 *
 * Bad key files: wrong length, loose mode, equal halves, missing, and a
 * key file without encryption each fail vc_open with a message naming the
 * file, and no cache is made.
 */
#include <errno.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "device/xts.h"
#include "engine/debug.h"
#include "testutil.h"

#define PS 4096u
/* The file's pages (8 MiB) and those rewritten through the cache; a
 * tenth of both under VC_TEST_QUICK (compute-sanitizer's runs). */
static uint32_t FILE_PAGES = 2048, WRITTEN = 768;
#define MAGIC1 0x4d4b5631u
#define MAGIC2 0x4d4b5632u

static char dir[256];

/* Block b of page p: "VCMK", p, b, magic. */
static void marker_page(unsigned char *pg, uint32_t p, uint32_t magic)
{
	for (uint32_t b = 0; b < PS / 16; b++) {
		uint32_t w[4] = { 0x4b4d4356u, p, b, magic };
		memcpy(pg + 16 * b, w, 16);
	}
}

static uint64_t count_markers(const unsigned char *d, size_t len)
{
	uint64_t n = 0;
	for (size_t o = 0; o + 16 <= len; o += 16) {
		uint32_t w[4];
		memcpy(w, d + o, 16);
		n += w[0] == 0x4b4d4356u && (w[3] == MAGIC1 || w[3] == MAGIC2);
	}
	return n;
}

static bool has_key_bytes(const unsigned char *d, size_t len, const struct vc_xts_key *k)
{
	for (int q = 0; q < 4; q++)
		if (memmem(d, len, k->bytes + 16 * q, 16))
			return true;
	return false;
}

static void write_key(const char *path, const unsigned char *k, size_t n, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, k, n) == (ssize_t)n);
	CHECK(fchmod(fd, mode) == 0);
	close(fd);
}

struct result {
	unsigned char *dump;
	size_t len;
};

/* One cache over a fresh marker file: prefetch into the GPU tier,
 * rewrite WRITTEN pages through it (write-back: demotions carry them
 * down), check every byte, dump the tier, close, check the file. */
static struct result run(int kind, int encrypt, const char *key_file)
{
	char path[300];
	snprintf(path, sizeof path, "%s/backing", dir);
	const uint64_t size = (uint64_t)FILE_PAGES * PS;
	unsigned char *want = malloc(size);
	CHECK(want);
	for (uint32_t p = 0; p < FILE_PAGES; p++)
		marker_page(want + (uint64_t)p * PS, p, MAGIC1);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && pwrite(fd, want, size, 0) == (ssize_t)size);
	close(fd);

	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.device = kind;
	cfg.page_size = PS;
	cfg.host_bytes = (uint64_t)WRITTEN / 3 * PS; /* the rewritten pages must go down */
	cfg.gpu_bytes = 16u << 20; /* the whole file fits */
	cfg.write_mode = VC_WRITE_BACK;
	cfg.encrypt = encrypt;
	cfg.key_file = key_file;
	vc_cache *c = t_open(&cfg, "encryption test");
	CHECK_OK(vc_prefetch(c, 0, size, VC_TIER_GPU));
	unsigned char pg[PS];
	for (uint32_t p = 0; p < WRITTEN; p++) {
		marker_page(pg, p, MAGIC2);
		memcpy(want + (uint64_t)p * PS, pg, PS);
		CHECK(vc_write(c, pg, PS, (uint64_t)p * PS) == PS);
	}
	for (uint32_t p = 0; p < FILE_PAGES; p++) {
		CHECK(vc_read(c, pg, PS, (uint64_t)p * PS) == PS);
		CHECK(memcmp(pg, want + (uint64_t)p * PS, PS) == 0);
	}
	struct vc_stats st = { .size = sizeof st };
	CHECK_OK(vc_get_stats(c, &st));
	CHECK(st.pages_cached[VC_TIER_GPU] > FILE_PAGES / 2);
	struct result r;
	CHECK_OK(eng_debug_gpu_dump(c, &r.dump, &r.len));
	CHECK(r.len >= (size_t)st.pages_cached[VC_TIER_GPU] * PS);
	CHECK_OK(vc_close(c));
	t_check_file(path, want, size);
	free(want);
	return r;
}

/* The expected ciphertext of page p (marker contents as they ended) is in
 * the dump at some page boundary. */
static bool ciphertext_present(const struct result *r, const struct vc_xts_key *k, uint32_t p)
{
	unsigned char ct[PS];
	marker_page(ct, p, p < WRITTEN ? MAGIC2 : MAGIC1);
	uint64_t tw = p; /* volume 0, one unit per page */
	CHECK_OK(vc_emu_xts_pages(k, ct, &tw, 1, PS, 1));
	for (size_t o = 0; o + PS <= r->len; o += PS)
		if (memcmp(r->dump + o, ct, PS) == 0)
			return true;
	return false;
}

static void bad_key(int kind, const char *key_file, int encrypt, int want, const char *what)
{
	char path[300];
	snprintf(path, sizeof path, "%s/backing", dir);
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.device = kind;
	cfg.encrypt = encrypt;
	cfg.key_file = key_file;
	vc_cache *c = (vc_cache *)0;
	const int e = vc_open(&cfg, &c);
	fprintf(stderr, "  %s: %s\n", what, vc_last_error());
	CHECK(e == want);
	CHECK(c == NULL);
	CHECK(strstr(vc_last_error(), key_file) != NULL);
}

int main(void)
{
	const int kind = t_device_kind();
	if (getenv("VC_TEST_QUICK"))
		FILE_PAGES = 192, WRITTEN = 96;
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(dir, sizeof dir, "%s/vc-encrypt-XXXXXX", tmp);
	CHECK(mkdtemp(dir));
	char kpath[300];
	snprintf(kpath, sizeof kpath, "%s/key", dir);
	uint64_t seed = 0x5eed;
	struct vc_xts_key key;
	for (int i = 0; i < 64; i += 8) {
		uint64_t v = t_rand(&seed);
		memcpy(key.bytes + i, &v, 8);
	}
	write_key(kpath, key.bytes, sizeof key.bytes, 0600);

	/* Off: the markers are there to be found. */
	struct result off = run(kind, VC_ENCRYPT_OFF, NULL);
	const uint64_t m_off = count_markers(off.dump, off.len);
	fprintf(stderr, "encryption off: %llu marker blocks in %zu bytes of GPU tier\n",
		(unsigned long long)m_off, off.len);
	CHECK(m_off >= (uint64_t)FILE_PAGES / 2 * (PS / 16));
	free(off.dump);

	/* On, with the key file: no marker, no key, dm-crypt's ciphertext. */
	struct vc_xts_key probe = key;
	const int ssl = vc_emu_xts_pages(&probe, NULL, NULL, 0, PS, 1);
	if (kind == VC_DEVICE_EMU && ssl == -VC_ENOTBUILT) {
		fprintf(stderr, "SKIP: %s\n", vc_last_error());
		return T_SKIP;
	}
	struct result on = run(kind, VC_ENCRYPT_XTS, kpath);
	const uint64_t m_on = count_markers(on.dump, on.len);
	fprintf(stderr, "encryption on (key file): %llu marker blocks in %zu bytes, key bytes %s\n",
		(unsigned long long)m_on, on.len, has_key_bytes(on.dump, on.len, &key) ? "FOUND" : "none");
	CHECK(m_on == 0);
	CHECK(!has_key_bytes(on.dump, on.len, &key));
	if (ssl == 0) {
		const uint32_t pages[] = { 0, 1, 2, WRITTEN / 3, WRITTEN - 1, WRITTEN, FILE_PAGES * 3 / 4,
					   FILE_PAGES - 1 };
		uint32_t found = 0;
		for (size_t i = 0; i < sizeof pages / sizeof *pages; i++)
			found += ciphertext_present(&on, &key, pages[i]);
		fprintf(stderr, "  %u of %zu sampled pages found as aes-xts-plain64 ciphertext\n", found,
			sizeof pages / sizeof *pages);
		/* Pages still in the GPU tier at close: most; the prefetched
		 * ones that were not rewritten all are (nothing evicted them). */
		CHECK(ciphertext_present(&on, &key, FILE_PAGES * 3 / 4) &&
		      ciphertext_present(&on, &key, FILE_PAGES - 1));
		CHECK(found >= 4);
	} else {
		fprintf(stderr, "  (no OpenSSL in this build: ciphertext not compared)\n");
	}
	free(on.dump);

	/* Random keys: no marker, and two caches' ciphertexts of the same
	 * pages differ wherever both hold data. */
	struct result a = run(kind, VC_ENCRYPT_XTS, NULL), b = run(kind, VC_ENCRYPT_XTS, NULL);
	CHECK(count_markers(a.dump, a.len) == 0 && count_markers(b.dump, b.len) == 0);
	static const unsigned char zero[PS];
	uint64_t same = 0, both = 0;
	for (size_t o = 0; o + PS <= a.len && o + PS <= b.len; o += PS) {
		if (!memcmp(a.dump + o, zero, PS) || !memcmp(b.dump + o, zero, PS))
			continue;
		both++;
		same += memcmp(a.dump + o, b.dump + o, PS) == 0;
	}
	fprintf(stderr, "random keys: %llu of %llu slots alike\n", (unsigned long long)same,
		(unsigned long long)both);
	CHECK(both > FILE_PAGES / 2 && same == 0);
	free(a.dump);
	free(b.dump);

	/* Bad key files: clear errors, nothing opened. */
	unsigned char k2[64];
	memcpy(k2, key.bytes, 64);
	write_key(kpath, k2, 63, 0600);
	bad_key(kind, kpath, VC_ENCRYPT_XTS, -EINVAL, "63-byte key file");
	write_key(kpath, k2, 64, 0644);
	bad_key(kind, kpath, VC_ENCRYPT_XTS, -EACCES, "key file readable by others");
	memcpy(k2 + 32, k2, 32);
	write_key(kpath, k2, 64, 0600);
	bad_key(kind, kpath, VC_ENCRYPT_XTS, -EINVAL, "key file with equal halves");
	write_key(kpath, key.bytes, 64, 0600);
	bad_key(kind, kpath, VC_ENCRYPT_OFF, -EINVAL, "key file, encryption off");
	unlink(kpath);
	bad_key(kind, kpath, VC_ENCRYPT_XTS, -ENOENT, "missing key file");

	char path[300];
	snprintf(path, sizeof path, "%s/backing", dir);
	unlink(path);
	rmdir(dir);
	fprintf(stderr, "test_encrypt: ok\n");
	return 0;
}
