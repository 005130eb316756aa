/* AES-256-XTS (device/xts.h) on a backend: the emulated device's OpenSSL
 * cipher, or the CUDA kernel (device/cuda/kernels/xts.cu).
 *
 *   tweak math  vc_xts_mul_alpha_pow against IEEE 1619's byte-wise
 *               multiplication by alpha, k times (no backend needed)
 *   KAT         IEEE 1619-2007 vectors 10-14 (tests/data/xts_ieee1619.txt),
 *               both directions
 *   golden      pages of 1, 2 and 4 KiB whose ciphertext OpenSSL gave (its
 *               FNV-1a digest, below): blocks past the 32nd of a page, which
 *               the 512-byte vectors never reach, checked even where this
 *               build has no OpenSSL
 *   random      random keys, tweaks and pages of 16 B .. 4 KiB: the backend's
 *               ciphertext equals OpenSSL's byte for byte, and decrypting
 *               gives the plaintext back; on CUDA a batch large enough that
 *               every warp takes more than 32 pages (its tweaks in rounds)
 *   no MAC      a flipped ciphertext bit garbles exactly its 16-byte block
 *   refusals    equal key halves, page sizes that are no power of two in
 *               16 .. 4096, a misaligned page (CUDA)
 *
 * VC_TEST_DEVICE=emu|cuda picks the backend; cuda skips without a GPU, emu
 * without OpenSSL (the reason on stderr). VC_TEST_QUICK shrinks the CUDA
 * batch.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "device/xts.h"
#include "testutil.h"
#include "xts_kat.h"
#include "vramcache.h"

#ifdef VC_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "device/cuda/kernels/xts_launch.h"
#endif

static bool have_openssl;
static struct vc_device *dev; /* CUDA runs: device memory and copies */

/* --- the backend under test ------------------------------------------ */

/* Encrypts or decrypts pages[0 .. n * ps) in place on the backend under
 * test; returns 0 or the backend's error (-EINVAL for a refusal). */
static int run(const struct vc_xts_key *key, unsigned char *pages, const uint64_t *tweaks,
	       uint32_t n, uint32_t ps, int enc)
{
	if (t_device_kind() == VC_DEVICE_EMU)
		return vc_emu_xts_pages(key, pages, tweaks, n, ps, enc);
#ifdef VC_HAVE_CUDA
	const size_t bytes = (size_t)n * ps, tbytes = (size_t)n * 8;
	uint64_t dp = 0, dt = 0;
	CHECK_OK(dev->ops->mem_alloc(dev, bytes ? bytes : 16, &dp));
	CHECK_OK(dev->ops->mem_alloc(dev, tbytes ? tbytes : 16, &dt));
	CHECK_OK(dev->ops->memcpy_sync(dev, dp, (uint64_t)(uintptr_t)pages, bytes));
	CHECK_OK(dev->ops->memcpy_sync(dev, dt, (uint64_t)(uintptr_t)tweaks, tbytes));
	/* On the stream memcpy_sync uses, so the copy back waits for it. */
	const int e = vc_cuda_xts_pages(key, (void *)(uintptr_t)dp, (const uint64_t *)(uintptr_t)dt, n, ps,
					enc, cudaStreamPerThread);
	int r = 0;
	if (e == cudaErrorInvalidValue) {
		r = -EINVAL;
	} else if (e != 0) {
		fprintf(stderr, "vc_cuda_xts_pages: %s\n", cudaGetErrorString((cudaError_t)e));
		exit(1);
	} else {
		CHECK_OK(dev->ops->memcpy_sync(dev, (uint64_t)(uintptr_t)pages, dp, bytes));
	}
	dev->ops->mem_free(dev, dp);
	dev->ops->mem_free(dev, dt);
	return r;
#else
	(void)key, (void)pages, (void)tweaks, (void)n, (void)ps, (void)enc;
	return -VC_ENOTBUILT;
#endif
}

/* --- helpers ----------------------------------------------------------- */

static void fill_rand(unsigned char *p, size_t len, uint64_t *seed)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = t_rand(seed);
		memcpy(p + i, &v, len - i < 8 ? len - i : 8);
	}
}

static void rand_key(struct vc_xts_key *k, uint64_t *seed)
{
	fill_rand(k->bytes, sizeof k->bytes, seed);
}

static uint64_t fnv1a(const unsigned char *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static void expect_same(const unsigned char *got, const unsigned char *want, size_t len, const char *what)
{
	for (size_t i = 0; i < len; i++)
		if (got[i] != want[i]) {
			fprintf(stderr, "%s: byte %zu (page byte %zu) is %02x, want %02x\n", what, i,
				i % 4096, got[i], want[i]);
			exit(1);
		}
}

/* --- tweak arithmetic ------------------------------------------------ */

/* IEEE 1619-2018 5.2's multiplication by alpha, byte by byte. */
static void mul_alpha_bytes(unsigned char t[16])
{
	unsigned carry = 0;
	for (int j = 0; j < 16; j++) {
		const unsigned next = t[j] >> 7;
		t[j] = (unsigned char)((t[j] << 1) | carry);
		carry = next;
	}
	if (carry)
		t[0] ^= 0x87;
}

static void test_tweak_math(void)
{
	uint64_t seed = 0x5eed;
	for (int it = 0; it < 200; it++) {
		struct vc_xts_u128 t = { t_rand(&seed), t_rand(&seed) };
		if (it == 0)
			t.lo = t.hi = ~0ull; /* every carry at once */
		unsigned char b[16];
		memcpy(b, &t.lo, 8);
		memcpy(b + 8, &t.hi, 8);
		for (unsigned k = 0; k <= 57; k++) {
			const struct vc_xts_u128 r = vc_xts_mul_alpha_pow(t, k);
			unsigned char rb[16];
			memcpy(rb, &r.lo, 8);
			memcpy(rb + 8, &r.hi, 8);
			if (memcmp(rb, b, 16) != 0) {
				fprintf(stderr, "vc_xts_mul_alpha_pow(%016llx%016llx, %u) is wrong\n",
					(unsigned long long)t.hi, (unsigned long long)t.lo, k);
				exit(1);
			}
			mul_alpha_bytes(b);
		}
	}
	const struct vc_xts_u128 tb = vc_xts_tweak_block(0x0123456789abcdefull);
	CHECK(tb.lo == 0x0123456789abcdefull && tb.hi == 0);
}

/* --- known answers ------------------------------------------------------ */

static void test_kat(void)
{
	static struct t_xts_kat v[T_XTS_KAT_N];
	t_xts_kat_load(v);
	unsigned char pt[T_XTS_KAT_LEN], buf[T_XTS_KAT_LEN];
	t_xts_kat_plain(pt);
	for (int i = 0; i < T_XTS_KAT_N; i++) {
		memcpy(buf, pt, sizeof buf);
		CHECK_OK(run(&v[i].key, buf, &v[i].tweak, 1, T_XTS_KAT_LEN, 1));
		expect_same(buf, v[i].ct, T_XTS_KAT_LEN, "IEEE 1619 vector, encrypted");
		CHECK_OK(run(&v[i].key, buf, &v[i].tweak, 1, T_XTS_KAT_LEN, 0));
		expect_same(buf, pt, T_XTS_KAT_LEN, "IEEE 1619 vector, decrypted");
	}
}

/* --- golden digests ------------------------------------------------- */

/* Key: the first 64 bytes of the xorshift64* stream seeded 1 (testutil's
 * t_rand, little-endian words); then 3 pages of that stream continued;
 * tweaks below. FNV-1a 64 of OpenSSL's EVP_aes_256_xts ciphertext (and of
 * Python cryptography's, which agrees). */
static const struct {
	uint32_t ps;
	uint64_t digest;
} golden[] = {
	{ 1024, 0xaf340aa678349d95ull },
	{ 2048, 0xeac59a40b9c9febcull },
	{ 4096, 0xcbc5d5517e845e29ull },
};

static void test_golden(void)
{
	static const uint64_t tweaks[3] = { 0, 0x0123456789abcdefull, ~0ull };
	for (size_t g = 0; g < sizeof golden / sizeof golden[0]; g++) {
		const uint32_t ps = golden[g].ps;
		uint64_t seed = 1;
		struct vc_xts_key key;
		rand_key(&key, &seed);
		unsigned char *p = malloc(3 * ps), *pt = malloc(3 * ps);
		fill_rand(pt, 3 * ps, &seed);
		memcpy(p, pt, 3 * ps);
		CHECK_OK(run(&key, p, tweaks, 3, ps, 1));
		const uint64_t d = fnv1a(p, 3 * ps);
		if (d != golden[g].digest) {
			fprintf(stderr, "golden %u-byte pages: digest %016llx, OpenSSL's %016llx\n", ps,
				(unsigned long long)d, (unsigned long long)golden[g].digest);
			exit(1);
		}
		CHECK_OK(run(&key, p, tweaks, 3, ps, 0));
		expect_same(p, pt, 3 * ps, "golden pages, decrypted");
		free(p);
		free(pt);
	}
}

/* --- random pages against OpenSSL -------------------------------------- */

static void check_random(uint32_t ps, uint32_t n, uint64_t *seed)
{
	struct vc_xts_key key;
	rand_key(&key, seed);
	const size_t bytes = (size_t)n * ps;
	unsigned char *pt = malloc(bytes), *p = malloc(bytes), *ref = malloc(bytes);
	uint64_t *tw = malloc((size_t)n * 8);
	CHECK(pt && p && ref && tw);
	fill_rand(pt, bytes, seed);
	for (uint32_t i = 0; i < n; i++) /* small numbers, as pages have, and any */
		tw[i] = i % 3 == 0 ? i : t_rand(seed);
	memcpy(p, pt, bytes);
	CHECK_OK(run(&key, p, tw, n, ps, 1));
	if (have_openssl) {
		memcpy(ref, pt, bytes);
		CHECK_OK(vc_emu_xts_pages(&key, ref, tw, n, ps, 1));
		expect_same(p, ref, bytes, "ciphertext against OpenSSL's");
	}
	CHECK(n == 0 || memcmp(p, pt, bytes) != 0);
	CHECK_OK(run(&key, p, tw, n, ps, 0));
	expect_same(p, pt, bytes, "decrypt(encrypt(x))");
	free(pt);
	free(p);
	free(ref);
	free(tw);
}

static void test_random(void)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	for (uint32_t ps = VC_XTS_UNIT_MIN; ps <= VC_XTS_UNIT_MAX; ps *= 2)
		for (int rep = 0; rep < 3; rep++)
			check_random(ps, rep == 0 ? 1 : 37 + 64 * (uint32_t)rep, &seed);
	if (t_device_kind() == VC_DEVICE_CUDA) {
		/* More than 32 pages per warp (132 SMs x 16 warps on an H100):
		 * every warp encrypts tweaks in two rounds or more. */
		const bool quick = getenv("VC_TEST_QUICK") != NULL;
		check_random(512, quick ? 20000 : 100000, &seed);
		check_random(4096, quick ? 5000 : 80000, &seed);
	}
}

/* --- XTS has no integrity ---------------------------------------------- */

static void test_bit_flip(void)
{
	uint64_t seed = 42;
	struct vc_xts_key key;
	rand_key(&key, &seed);
	unsigned char pt[4096], p[4096];
	fill_rand(pt, sizeof pt, &seed);
	memcpy(p, pt, sizeof p);
	const uint64_t tw = 7;
	CHECK_OK(run(&key, p, &tw, 1, 4096, 1));
	p[1000] ^= 0x10; /* block 62 */
	CHECK_OK(run(&key, p, &tw, 1, 4096, 0));
	for (int b = 0; b < 256; b++) {
		const bool same = memcmp(p + 16 * b, pt + 16 * b, 16) == 0;
		CHECK(same == (b != 1000 / 16));
	}
}

/* --- refusals ------------------------------------------------------------- */

static void test_refusals(void)
{
	uint64_t seed = 3;
	struct vc_xts_key key;
	rand_key(&key, &seed);
	unsigned char page[4096] = { 0 };
	const uint64_t tw = 1;
	static const uint32_t bad_ps[] = { 0, 8, 48, 1000, 8192 };
	for (size_t i = 0; i < sizeof bad_ps / sizeof bad_ps[0]; i++) {
		CHECK(run(&key, page, &tw, 1, bad_ps[i], 1) == -EINVAL);
		CHECK(vc_xts_check(&key, bad_ps[i]) == -EINVAL);
		CHECK(strstr(vc_last_error(), "power of two") != NULL);
	}
	struct vc_xts_key same = key;
	memcpy(same.bytes + 32, same.bytes, 32);
	CHECK(run(&same, page, &tw, 1, 512, 1) == -EINVAL);
	CHECK(strstr(vc_last_error(), "halves are equal") != NULL);
	CHECK(vc_xts_check(NULL, 512) == -EINVAL);
#ifdef VC_HAVE_CUDA
	if (t_device_kind() == VC_DEVICE_CUDA) {
		uint64_t dp = 0;
		CHECK_OK(dev->ops->mem_alloc(dev, 8192, &dp));
		CHECK(vc_cuda_xts_pages(&key, (void *)(uintptr_t)(dp + 8), &tw, 1, 512, 1, NULL) ==
		      cudaErrorInvalidValue);
		CHECK(strstr(vc_last_error(), "aligned") != NULL);
		CHECK(vc_cuda_xts_pages(&key, (void *)(uintptr_t)dp, NULL, 0, 512, 1, NULL) == 0);
		dev->ops->mem_free(dev, dp);
	}
#endif
}

int main(void)
{
	test_tweak_math();
	const int kind = t_device_kind();
	unsigned char probe[16] = { 0 };
	const uint64_t tw = 0;
	struct vc_xts_key k;
	uint64_t seed = 11;
	rand_key(&k, &seed);
	const int pr = vc_emu_xts_pages(&k, probe, &tw, 1, 16, 1);
	have_openssl = pr != -VC_ENOTBUILT;
	if (kind == VC_DEVICE_EMU && !have_openssl) {
		fprintf(stderr, "SKIP XTS on the emulated device: %s\n", vc_last_error());
		return T_SKIP;
	}
	if (kind == VC_DEVICE_CUDA) {
		const int r = vc_device_open(VC_DEVICE_CUDA, 0, &dev);
		t_skip_if_absent(r, "XTS kernel on CUDA");
		CHECK_OK(r);
		if (!have_openssl)
			fprintf(stderr, "note: no OpenSSL in this build: random pages are checked by "
					"round trip and the golden digests only\n");
	}
	test_kat();
	test_golden();
	test_random();
	test_bit_flip();
	test_refusals();
	if (dev)
		vc_device_close(dev);
	printf("test_xts (%s): IEEE 1619 vectors 10-14, golden pages, random pages 16 B .. 4 KiB%s: ok\n",
	       kind == VC_DEVICE_CUDA ? "cuda" : "emu", have_openssl ? " against OpenSSL" : "");
	return 0;
}
