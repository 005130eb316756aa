/* Block fingerprints (device/fp.h) on a backend: the emulated device's host
 * path, or the CUDA kernel (device/cuda/kernels/fp.cu).
 *
 *   MD5 KAT       RFC 1321 appendix A.5's seven vectors (host reference)
 *   MD5 OpenSSL   every length 0 .. 300 and the four block sizes, random
 *                 bytes: our MD5 equals OpenSSL's (where this build has it)
 *   Murmur3       SMHasher's verification value for MurmurHash3_x64_128,
 *                 0x6384BA69 (keys {}, {0}, {0,1}, ... of 0..255 bytes
 *                 with seed 256 - length, their digests hashed with seed
 *                 0, the first 4 bytes little-endian): every tail length
 *                 and, in the last hash, a 4096-byte block
 *   device        random blocks of every block size and both algorithms,
 *                 at shuffled, repeated and unaligned addresses in device
 *                 memory and in mapped host memory, SM caps 1, 13 and all:
 *                 the backend's digests equal the host reference's byte
 *                 for byte, and nothing past the n digests is written
 *   refusals      unknown algorithm, bad block sizes, misaligned or absent
 *                 arrays, a backend without fingerprints
 *   lanes KAT     the lanes hash of zeros and of bytes i % 251, every block
 *                 size, against digests from an independent implementation
 *                 (Python, written from fp_algo.h's definition): the
 *                 dispatching vc_fp_lanes, the scalar form, and the AVX-512
 *                 form where the CPU has it (said when it has not)
 *   lanes forms   the AVX-512 form equals the scalar one on random bytes
 *                 of every multiple of 16 up to 4096 at eight alignments
 *                 (whole vectors, the words after them, none)
 *   lanes sums    the state of a block equals the sum of the states of any
 *                 split of its words (what lets lanes and threads hash
 *                 their own words); moved words and flipped bits change it
 *   moves         VC_MOVE_FP: moves of every block size (D = 8, 4, 2, 1 of
 *                 a 4 KiB page) on both move paths (device queue, launched
 *                 batches), host memory to device memory and back, mixed
 *                 with moves without the flag: each digest the move wrote
 *                 equals the host reference of the bytes it moved; the
 *                 refusals (SWAP, a decryption, pages of two pieces);
 *                 with a key, encrypting moves (the cipher kernels: the
 *                 queue server's lone, short and full rounds, launched
 *                 batches split into sub-pieces): the digest is the
 *                 plaintext's
 *
 * VC_TEST_DEVICE=emu|cuda picks the backend; cuda skips without a GPU
 * (the reason on stderr). VC_TEST_QUICK shrinks the CUDA jobs. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "device/fp.h"
#include "device/queue.h"
#include "device/xts.h"
#include "engine/batcher.h"
#include "testutil.h"
#include "vramcache.h"

static int hexval(int c)
{
	return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

static void expect_hex(const struct vc_fp_digest *d, const char *hex, const char *what)
{
	for (int i = 0; i < 16; i++) {
		const int want = hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]);
		if (d->b[i] != want) {
			fprintf(stderr, "%s: byte %d is %02x, want %02x (digest %s)\n", what, i, d->b[i],
				want, hex);
			exit(1);
		}
	}
}

static void fill_rand(unsigned char *p, size_t len, uint64_t *seed)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = t_rand(seed);
		memcpy(p + i, &v, len - i < 8 ? len - i : 8);
	}
}

/* --- known answers ------------------------------------------------------ */

static void test_md5_rfc1321(void)
{
	static const struct {
		const char *msg, *md5;
	} v[] = {
		{ "", "d41d8cd98f00b204e9800998ecf8427e" },
		{ "a", "0cc175b9c0f1b6a831c399e269772661" },
		{ "abc", "900150983cd24fb0d6963f7d28e17f72" },
		{ "message digest", "f96b697d7cb7938d525a2f31aaf161d0" },
		{ "abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b" },
		{ "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
		  "d174ab98d277d9f5a5611c2c9f419d9f" },
		{ "1234567890123456789012345678901234567890"
		  "1234567890123456789012345678901234567890",
		  "57edf4a22be3c955ac49da2e2107b67a" },
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		struct vc_fp_digest d;
		vc_fp_md5(v[i].msg, strlen(v[i].msg), &d);
		char what[128];
		snprintf(what, sizeof what, "MD5(\"%.40s\")", v[i].msg);
		expect_hex(&d, v[i].md5, what);
	}
}

/* Returns false where this build has no OpenSSL (or it refuses MD5). */
static bool test_md5_openssl(void)
{
	uint64_t seed = 0x3d5;
	static unsigned char buf[VC_FP_BLOCK_MAX];
	fill_rand(buf, sizeof buf, &seed);
	struct vc_fp_digest ours, theirs;
	int r = vc_fp_md5_openssl(buf, 1, 0, &theirs);
	if (r < 0) {
		fprintf(stderr, "note: MD5 not checked against OpenSSL: %s\n", vc_last_error());
		return false;
	}
	for (size_t len = 0; len <= VC_FP_BLOCK_MAX; len = len < 300 ? len + 1 : len * 2) {
		vc_fp_md5(buf, len, &ours);
		CHECK_OK(vc_fp_md5_openssl(buf, 1, len, &theirs));
		if (memcmp(ours.b, theirs.b, 16) != 0) {
			fprintf(stderr, "MD5 of %zu random bytes differs from OpenSSL's\n", len);
			exit(1);
		}
	}
	return true;
}

static void test_murmur3_verification(void)
{
	uint8_t key[256], hashes[256 * 16];
	for (int i = 0; i < 256; i++) {
		key[i] = (uint8_t)i; /* key i is bytes 0 .. i-1 */
		struct vc_fp_digest d;
		vc_fp_murmur3(key, (size_t)i, 256u - (uint32_t)i, &d);
		memcpy(hashes + 16 * i, d.b, 16);
	}
	struct vc_fp_digest f;
	vc_fp_murmur3(hashes, sizeof hashes, 0, &f);
	const uint32_t v = (uint32_t)f.b[0] | (uint32_t)f.b[1] << 8 | (uint32_t)f.b[2] << 16 |
			   (uint32_t)f.b[3] << 24;
	if (v != 0x6384BA69u) {
		fprintf(stderr, "MurmurHash3_x64_128 verification value %#010x, SMHasher's 0x6384ba69\n",
			v);
		exit(1);
	}
	/* The job's hash of a block is MurmurHash3 with seed 0. */
	struct vc_fp_digest b;
	vc_fp_block(VC_FP_MURMUR3, hashes, sizeof hashes, &b);
	CHECK(memcmp(b.b, f.b, 16) == 0);
}

/* --- the lanes hash ------------------------------------------------------ */

static void test_lanes_kat(void)
{
	/* From an independent implementation (Python's integers, mod 2^64),
	 * written from fp_algo.h's definition. */
	static const struct {
		uint32_t len;
		const char *zeros, *iota;
	} kat[] = {
		{ 512, "fd690f6f310608e4b25ee593cae0f85e", "41412193c3974ff3d1c91705f3a18a94" },
		{ 1024, "f8c2ca2adb3f26dfbbc8297251c6ece1", "0f0aa3e2e99dd70af6e39a79568a28c4" },
		{ 2048, "60ee07a9b72be90c51d5273880571d39", "83272c67a6dc2120e43b42986881379c" },
		{ 4096, "101057334b58a93d690a39b2cee96e74", "25f86cbbb3a474546669b6905ac7a46c" },
	};
	static unsigned char buf[4096 + 1];
	void (*const form[])(const void *, size_t, struct vc_fp_digest *) = {
		vc_fp_lanes, vc_fp_lanes_scalar, vc_fp_lanes_avx512
	};
	const int nform = vc_fp_lanes_avx512_ok() ? 3 : 2;
	for (int f = 0; f < nform; f++)
		for (size_t k = 0; k < sizeof kat / sizeof kat[0]; k++) {
			struct vc_fp_digest d;
			memset(buf, 0, sizeof buf);
			if (f == 0)
				vc_fp_block(VC_FP_LANES, buf, kat[k].len, &d);
			else
				form[f](buf, kat[k].len, &d);
			expect_hex(&d, kat[k].zeros, "lanes hash of zeros");
			for (uint32_t i = 0; i < kat[k].len; i++)
				buf[i + 1] = (unsigned char)(i % 251);
			form[f](buf + 1, kat[k].len, &d); /* at an odd address */
			expect_hex(&d, kat[k].iota, "lanes hash of i % 251");
		}
}

/* The AVX-512 form against the scalar one: every length that is a
 * multiple of 16 up to 4096 (so every count of words after the last
 * whole vector), at eight alignments. */
static void test_lanes_forms(void)
{
	if (!vc_fp_lanes_avx512_ok()) {
		fprintf(stderr, "test_fp: lanes hash's AVX-512 form not checked: this CPU lacks "
				"AVX-512 F/DQ, or VC_FP_AVX512=0 (the scalar form is the one used)\n");
		return;
	}
	static unsigned char buf[4096 + 8];
	uint64_t seed = 0xa5f0ull;
	for (uint32_t len = 0; len <= 4096; len += 16)
		for (uint32_t off = 0; off < 8; off++) {
			fill_rand(buf, sizeof buf, &seed);
			struct vc_fp_digest want, got;
			vc_fp_lanes_scalar(buf + off, len, &want);
			vc_fp_lanes_avx512(buf + off, len, &got);
			CHECK(memcmp(got.b, want.b, 16) == 0);
		}
}

static void lanes_digest(struct vc_fp_lanes s, uint32_t len, struct vc_fp_digest *out)
{
	const struct vc_fp_mm3 h = vc_fp_lanes_final(s, len);
	memcpy(out->b, &h.h1, 8); /* little-endian host */
	memcpy(out->b + 8, &h.h2, 8);
}

static void test_lanes_sums(void)
{
	uint64_t seed = 0x1a2e5ull;
	static unsigned char buf[4096];
	for (int rep = 0; rep < 50; rep++)
		for (uint32_t len = 512; len <= 4096; len *= 2) {
			fill_rand(buf, len, &seed);
			struct vc_fp_digest want, got;
			vc_fp_lanes(buf, len, &want);
			/* Any split: words dealt to 1 + rep % 40 partial states
			 * at random, summed in reverse. */
			struct vc_fp_lanes part[40] = { { 0, 0 } }, all = { 0, 0 };
			const uint32_t np = 1 + (uint32_t)rep % 40;
			for (uint32_t i = 0; i < len / 16; i++) {
				uint64_t lo, hi;
				memcpy(&lo, buf + 16 * i, 8);
				memcpy(&hi, buf + 16 * i + 8, 8);
				vc_fp_lanes_word(&part[t_rand(&seed) % np], lo, hi, i);
			}
			for (uint32_t k = np; k-- > 0;)
				vc_fp_lanes_add(&all, part[k].s1, part[k].s2);
			lanes_digest(all, len, &got);
			CHECK(memcmp(got.b, want.b, 16) == 0);
			/* Two different words exchanged: another digest. */
			uint32_t a = (uint32_t)(t_rand(&seed) % (len / 16)), b = (a + 1 + (uint32_t)(t_rand(&seed) % (len / 16 - 1))) % (len / 16);
			unsigned char tmp[16];
			memcpy(tmp, buf + 16 * a, 16);
			memcpy(buf + 16 * a, buf + 16 * b, 16);
			memcpy(buf + 16 * b, tmp, 16);
			vc_fp_lanes(buf, len, &got);
			CHECK(memcmp(got.b, want.b, 16) != 0);
			memcpy(buf + 16 * b, buf + 16 * a, 16);
			memcpy(buf + 16 * a, tmp, 16);
			/* One bit flipped anywhere: another digest, both halves. */
			const uint32_t bit = (uint32_t)(t_rand(&seed) % (len * 8));
			buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
			vc_fp_lanes(buf, len, &got);
			CHECK(memcmp(got.b, want.b, 8) != 0 && memcmp(got.b + 8, want.b + 8, 8) != 0);
		}
}

/* --- the backend --------------------------------------------------------- */

static struct vc_device *dev;

/* Fingerprints n random blocks of bs bytes with algo on the backend and
 * compares every digest with the host reference's. The blocks sit in one
 * region (device memory, or mapped host memory with host_mem) at
 * addresses in random order, some repeated, and every 7th at an offset
 * that is no multiple of 16. The address array is in the other kind of
 * memory, so both are read by the device from each. */
static void check_device(uint32_t algo, uint32_t bs, uint32_t n, uint32_t max_sms, bool host_mem,
			 uint64_t *seed)
{
	const size_t region = (size_t)n * bs + 64;
	unsigned char *data = malloc(region);
	uint64_t *addr = malloc((size_t)n * 8);
	uint64_t *offs = malloc((size_t)n * 8);
	struct vc_fp_digest *got = malloc((size_t)(n + 1) * 16), *want = malloc((size_t)n * 16);
	CHECK(data && addr && offs && got && want);
	fill_rand(data, region, seed);

	void *host_data = NULL, *host_addr = NULL;
	uint64_t data_dev, addr_dev, out_dev;
	if (host_mem) {
		CHECK_OK(dev->ops->host_alloc(dev, region, &host_data, &data_dev));
		memcpy(host_data, data, region);
		CHECK_OK(dev->ops->mem_alloc(dev, (size_t)n * 8, &addr_dev));
	} else {
		CHECK_OK(dev->ops->mem_alloc(dev, region, &data_dev));
		CHECK_OK(dev->ops->memcpy_sync(dev, data_dev, (uint64_t)(uintptr_t)data, region));
		CHECK_OK(dev->ops->host_alloc(dev, (size_t)n * 8, &host_addr, &addr_dev));
	}
	CHECK_OK(dev->ops->mem_alloc(dev, (size_t)(n + 1) * 16, &out_dev));

	for (uint32_t i = 0; i < n; i++) {
		uint64_t off = (t_rand(seed) % n) * bs; /* random order, repeats */
		if (i % 7 == 3)
			off += 1 + t_rand(seed) % 63; /* unaligned: the byte-load path */
		else if (i % 7 == 5)
			off += 16 * (1 + t_rand(seed) % 3); /* 16-aligned, not block-aligned */
		offs[i] = off;
		addr[i] = data_dev + off;
		vc_fp_block(algo, data + off, bs, &want[i]);
	}
	if (host_mem)
		CHECK_OK(dev->ops->memcpy_sync(dev, addr_dev, (uint64_t)(uintptr_t)addr, (size_t)n * 8));
	else
		memcpy(host_addr, addr, (size_t)n * 8);
	/* A canary past the last digest. */
	memset(got, 0xa5, (size_t)(n + 1) * 16);
	CHECK_OK(dev->ops->memcpy_sync(dev, out_dev, (uint64_t)(uintptr_t)got, (size_t)(n + 1) * 16));

	const struct vc_fp_job job = { .blocks_dev = addr_dev, .out_dev = out_dev, .n = n,
				       .block_size = bs, .algo = algo, .max_sms = max_sms };
	CHECK_OK(vc_fp_run(dev, &job));
	CHECK_OK(dev->ops->memcpy_sync(dev, (uint64_t)(uintptr_t)got, out_dev, (size_t)(n + 1) * 16));
	for (uint32_t i = 0; i < n; i++)
		if (memcmp(got[i].b, want[i].b, 16) != 0) {
			fprintf(stderr, "%s, %u-byte blocks, %u SMs, data in %s memory: digest %u "
					"(block at offset %llu) differs from the host reference\n",
				algo == VC_FP_MD5 ? "MD5" : "MurmurHash3", bs, max_sms,
				host_mem ? "host" : "device", i, (unsigned long long)offs[i]);
			exit(1);
		}
	for (int b = 0; b < 16; b++)
		CHECK(got[n].b[b] == 0xa5);

	if (host_mem) {
		dev->ops->host_free(dev, host_data);
		dev->ops->mem_free(dev, addr_dev);
	} else {
		dev->ops->mem_free(dev, data_dev);
		dev->ops->host_free(dev, host_addr);
	}
	dev->ops->mem_free(dev, out_dev);
	free(data);
	free(addr);
	free(offs);
	free(got);
	free(want);
}

static void test_device(void)
{
	const bool cuda = t_device_kind() == VC_DEVICE_CUDA;
	const bool quick = getenv("VC_TEST_QUICK") != NULL;
	uint64_t seed = 0xf1f2f3f4ull;
	for (uint32_t algo = 0; algo < VC_FP_ALGOS; algo++)
		for (uint32_t bs = VC_FP_BLOCK_MIN; bs <= VC_FP_BLOCK_MAX; bs *= 2) {
			check_device(algo, bs, 1, 0, false, &seed);
			check_device(algo, bs, 33, 13, true, &seed);
			check_device(algo, bs, 777, 0, false, &seed);
			if (cuda) {
				/* One SM: a 1024-thread block looping over n. */
				check_device(algo, bs, quick ? 3000 : 20000, 1, false, &seed);
				/* More blocks than 132 SMs x 1024 threads. */
				if (bs == 512 && !quick)
					check_device(algo, bs, 300000, 0, false, &seed);
			}
		}
}

/* --- fingerprints computed by moves (VC_MOVE_FP) ------------------------- */

/* n moves of bs-byte blocks from mapped host memory into device memory
 * (as a demotion), every third without the flag, then the same blocks
 * back to host memory with it; on `path` ("queue" or "batch"). Each
 * flagged move's digest equals the host reference of the bytes moved.
 * With a key (the cipher kernels), the moves down encrypt (every fifth a
 * plain COPY) and the moves up decrypt without the flag: each flagged
 * move's digest is the host reference of the plaintext, and the bytes
 * come back whole. */
static void check_move_fp(const char *path, uint32_t bs, uint32_t n, uint64_t *seed,
			  const struct vc_xts_key *key)
{
	setenv("VC_MOVE_PATH", path, 1);
	struct vc_batcher *b;
	CHECK_OK(vc_batcher_create(dev, bs, 64, 50, key, &b));
	CHECK(strcmp(vc_batcher_path(b), path) == 0 || !dev->ops->dq_init);
	void *host;
	uint64_t host_dev, gpu, back_dev;
	void *back;
	CHECK_OK(dev->ops->host_alloc(dev, (size_t)n * bs, &host, &host_dev));
	CHECK_OK(dev->ops->host_alloc(dev, (size_t)n * bs, &back, &back_dev));
	CHECK_OK(dev->ops->mem_alloc(dev, (size_t)n * bs, &gpu));
	fill_rand(host, (size_t)n * bs, seed);
	struct vc_move *mv = calloc(n, sizeof *mv);
	struct vc_ticket *tk = calloc(n, sizeof *tk);
	struct vc_fp_digest *got = calloc(n, sizeof *got);
	bool *ok = calloc(n, 1);
	CHECK(mv && tk && got && ok);
	for (int dir = 0; dir < 2; dir++) {
		for (uint32_t i = 0; i < n; i++) {
			/* Scattered: block i goes to slot (i * 7) % n. */
			const uint64_t g = gpu + (uint64_t)((i * 7u) % n) * bs;
			const uint64_t h = (dir ? back_dev : host_dev) + (uint64_t)i * bs;
			mv[i] = (struct vc_move){ .src = dir ? g : h, .dst = dir ? h : g,
						  .op = VC_MOVE_COPY | (dir || i % 3 ? VC_MOVE_FP : 0) };
			if (key && i % 5 != 4) { /* the rest plain, both ways */
				mv[i].op = dir ? VC_MOVE_COPY | VC_MOVE_DECRYPT
					       : VC_MOVE_COPY | VC_MOVE_ENCRYPT | (i % 3 ? VC_MOVE_FP : 0);
				mv[i].tweak = 1000 + 3ull * i;
			}
		}
		CHECK_OK(vc_batcher_add_n(b, mv, n, tk));
		CHECK_OK(vc_batcher_wait_n(b, tk, n));
		vc_batcher_fp_n(b, tk, n, got, ok);
		for (uint32_t i = 0; i < n; i++) {
			if (!(mv[i].op & VC_MOVE_FP))
				continue;
			struct vc_fp_digest want;
			vc_fp_lanes((unsigned char *)host + (size_t)i * bs, bs, &want);
			CHECK(ok[i]); /* nothing reused the slots: one thread, ring deep enough */
			if (memcmp(got[i].b, want.b, 16) != 0) {
				fprintf(stderr, "%s path%s, %u-byte blocks, %s, %u moves: move %u's "
						"digest differs from the host reference\n", path,
					key ? " with a key" : "", bs,
					dir ? "device to host" : "host to device", n, i);
				exit(1);
			}
		}
	}
	CHECK(memcmp(host, back, (size_t)n * bs) == 0);
	vc_batcher_destroy(b);
	dev->ops->host_free(dev, host);
	dev->ops->host_free(dev, back);
	dev->ops->mem_free(dev, gpu);
	free(mv);
	free(tk);
	free(got);
	free(ok);
	unsetenv("VC_MOVE_PATH");
}

static void test_move_fp(void)
{
	uint64_t seed = 0xfeedull;
	static const uint32_t ns[] = { 1, 31, 200 };
	struct vc_xts_key key;
	for (size_t i = 0; i < sizeof key.bytes; i++)
		key.bytes[i] = (unsigned char)(i * 37 + 11);
	for (uint32_t bs = 512; bs <= 4096; bs *= 2) /* D = 8, 4, 2, 1 */
		for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
			check_move_fp("queue", bs, ns[k], &seed, NULL);
			check_move_fp("batch", bs, ns[k], &seed, NULL);
		}
	/* The cipher kernels: the queue server's lone, short (fewer pieces
	 * than warps) and full rounds, a hybrid add's launched part (from 512
	 * pages), and launched batches whose pages split into sub-pieces. */
	static const uint32_t nk[] = { 1, 9, 31, 200, 600 }; /* coprime to 7 (the scatter) */
	for (uint32_t bs = 512; bs <= 4096; bs *= 2)
		for (size_t k = 0; k < sizeof nk / sizeof nk[0]; k++) {
			check_move_fp("queue", bs, nk[k], &seed, &key);
			if (nk[k] <= 8 * 64) /* the digests of 8 slots of 64 moves */
				check_move_fp("batch", bs, nk[k], &seed, &key);
		}
	/* Refusals: a SWAP, a decryption, a page of two pieces. */
	struct vc_move m = { .src = 4096, .dst = 8192, .op = VC_MOVE_SWAP | VC_MOVE_FP };
	CHECK(vc_move_check(&m, NULL) == -EINVAL && strstr(vc_last_error(), "fingerprint"));
	m.op = VC_MOVE_COPY | VC_MOVE_DECRYPT | VC_MOVE_FP;
	CHECK(vc_move_check(&m, &key) == -EINVAL && strstr(vc_last_error(), "fingerprint"));
	m.op = VC_MOVE_COPY | VC_MOVE_ENCRYPT | VC_MOVE_FP;
	CHECK(vc_move_check(&m, &key) == 0);
	m.op = VC_MOVE_COPY | VC_MOVE_FP;
	CHECK(vc_move_check(&m, &key) == 0);
	CHECK(vc_move_check(&m, NULL) == 0);
	struct vc_dq *q;
	struct vc_dq_config qc = { .page_size = 8192 };
	CHECK_OK(vc_dq_create(dev, &qc, &q));
	uint64_t a, h;
	void *hv;
	CHECK_OK(dev->ops->mem_alloc(dev, 8192, &a));
	CHECK_OK(dev->ops->host_alloc(dev, 8192, &hv, &h));
	m = (struct vc_move){ .src = h, .dst = a, .op = VC_MOVE_COPY | VC_MOVE_FP };
	struct vc_dq_span sp;
	CHECK(vc_dq_submit(q, 0, &m, 1, &sp) == -EINVAL && strstr(vc_last_error(), "fingerprint"));
	vc_dq_destroy(q);
	setenv("VC_MOVE_PATH", "batch", 1);
	struct vc_batcher *b;
	CHECK_OK(vc_batcher_create(dev, 8192, 4, 50, NULL, &b));
	struct vc_ticket t;
	CHECK_OK(vc_batcher_add(b, &m, &t));
	CHECK(vc_batcher_wait(b, &t) == -EINVAL);
	vc_batcher_destroy(b);
	unsetenv("VC_MOVE_PATH");
	dev->ops->mem_free(dev, a);
	dev->ops->host_free(dev, hv);
}

/* --- refusals ------------------------------------------------------------ */

static void test_refusals(void)
{
	uint64_t out_dev = 0, addr_dev = 0;
	CHECK_OK(dev->ops->mem_alloc(dev, 4096, &out_dev));
	CHECK_OK(dev->ops->mem_alloc(dev, 4096, &addr_dev));
	struct vc_fp_job ok = { .blocks_dev = addr_dev, .out_dev = out_dev, .n = 1, .block_size = 4096,
				.algo = VC_FP_MURMUR3 };
	CHECK(vc_fp_check(&ok) == 0);
	struct vc_fp_job j = ok;
	j.algo = 2;
	CHECK(vc_fp_run(dev, &j) == -EINVAL && strstr(vc_last_error(), "algorithm"));
	static const uint32_t bad_bs[] = { 0, 256, 1000, 3072, 8192 };
	for (size_t i = 0; i < sizeof bad_bs / sizeof bad_bs[0]; i++) {
		j = ok;
		j.block_size = bad_bs[i];
		CHECK(vc_fp_run(dev, &j) == -EINVAL && strstr(vc_last_error(), "power of two"));
	}
	j = ok;
	j.out_dev += 8;
	CHECK(vc_fp_run(dev, &j) == -EINVAL && strstr(vc_last_error(), "16-byte"));
	j = ok;
	j.blocks_dev += 4;
	CHECK(vc_fp_run(dev, &j) == -EINVAL && strstr(vc_last_error(), "8-byte"));
	j = ok;
	j.out_dev = 0;
	CHECK(vc_fp_run(dev, &j) == -EINVAL);
	j = (struct vc_fp_job){ .block_size = 512 }; /* n = 0: nothing to read or write */
	CHECK(vc_fp_run(dev, &j) == 0);
	CHECK(vc_fp_check(NULL) == -EINVAL);
	/* A backend without the op says so. */
	struct vc_device_ops none = *dev->ops;
	none.fp_run = NULL;
	struct vc_device fake = *dev;
	fake.ops = &none;
	CHECK(vc_fp_run(&fake, &ok) == -VC_ENOTBUILT);
	dev->ops->mem_free(dev, out_dev);
	dev->ops->mem_free(dev, addr_dev);
}

int main(void)
{
	test_md5_rfc1321();
	const bool openssl = test_md5_openssl();
	test_murmur3_verification();
	test_lanes_kat();
	test_lanes_forms();
	test_lanes_sums();
	const int kind = t_device_kind();
	const int r = vc_device_open(kind, 0, &dev);
	if (kind == VC_DEVICE_CUDA)
		t_skip_if_absent(r, "fingerprint kernel on CUDA");
	CHECK_OK(r);
	test_device();
	test_move_fp();
	test_refusals();
	vc_device_close(dev);
	printf("test_fp (%s): MD5 RFC 1321 A.5%s, MurmurHash3 verification 0x6384BA69, lanes "
	       "KAT and sums, device digests of 512..4096-byte blocks (jobs and moves) equal the "
	       "host reference: ok\n",
	       kind == VC_DEVICE_CUDA ? "cuda" : "emu", openssl ? " and OpenSSL" : "");
	return 0;
}
