/* The host reference of the fingerprints (device/fp.h): MD5 and
 * MurmurHash3_x64_128 over any length, the lanes hash over multiples of
 * 16 bytes, from fp_algo.h's building blocks,
 * which the CUDA kernel shares; and the job checks and dispatch both
 * backends share.
 *
 * Words are assembled from bytes, so the reference is right on any host
 * and at any alignment; compilers turn the assembly into one load on
 * little-endian machines. Cost: MD5 about 0.6 GB/s and MurmurHash3 a few
 * GB/s per core (bench/fingerprint measures both). */
#include "device/fp.h"

#include <errno.h>
#include <string.h>

#include "base/error.h"
#include "device/device.h"
#include "vramcache.h"

static uint32_t ld32le(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t ld64le(const uint8_t *p)
{
	return (uint64_t)ld32le(p) | (uint64_t)ld32le(p + 4) << 32;
}

static void st64le(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void md5_chunk_bytes(struct vc_fp_md5 *s, const uint8_t *p)
{
	uint32_t m[16];
	for (int i = 0; i < 16; i++)
		m[i] = ld32le(p + 4 * i);
	vc_fp_md5_chunk(s, m);
}

void vc_fp_md5(const void *data, size_t len, struct vc_fp_digest *out)
{
	const uint8_t *p = data;
	struct vc_fp_md5 s = vc_fp_md5_init();
	size_t i = 0;
	for (; len - i >= 64; i += 64)
		md5_chunk_bytes(&s, p + i);
	/* RFC 1321 3.1-3.2: the rest, 0x80, zeros up to 56 mod 64, then the
	 * length in bits, 64-bit little-endian: one chunk, or two when the
	 * rest is 56 bytes or more. */
	uint8_t last[128] = { 0 };
	const size_t rest = len - i;
	memcpy(last, p + i, rest);
	last[rest] = 0x80;
	const size_t tail = rest < 56 ? 64 : 128;
	st64le(last + tail - 8, (uint64_t)len << 3);
	for (size_t j = 0; j < tail; j += 64)
		md5_chunk_bytes(&s, last + j);
	st64le(out->b, (uint64_t)s.a | (uint64_t)s.b << 32);
	st64le(out->b + 8, (uint64_t)s.c | (uint64_t)s.d << 32);
}

void vc_fp_murmur3(const void *data, size_t len, uint32_t seed, struct vc_fp_digest *out)
{
	const uint8_t *p = data;
	struct vc_fp_mm3 s = vc_fp_mm3_init(seed);
	size_t i = 0;
	for (; len - i >= 16; i += 16)
		vc_fp_mm3_chunk(&s, ld64le(p + i), ld64le(p + i + 8));
	/* The tail, 0..15 bytes: little-endian into k1 (bytes 0..7) and k2
	 * (8..15), each mixed into its half alone when present. */
	const size_t rest = len - i;
	uint64_t k1 = 0, k2 = 0;
	for (size_t j = 0; j < rest; j++) {
		if (j < 8)
			k1 |= (uint64_t)p[i + j] << (8 * j);
		else
			k2 |= (uint64_t)p[i + j] << (8 * (j - 8));
	}
	if (rest > 8)
		s.h2 ^= vc_fp_mm3_mix_k2(k2);
	if (rest > 0)
		s.h1 ^= vc_fp_mm3_mix_k1(k1);
	vc_fp_mm3_final(&s, len);
	st64le(out->b, s.h1);
	st64le(out->b + 8, s.h2);
}

void vc_fp_lanes(const void *data, size_t len, struct vc_fp_digest *out)
{
	if (vc_fp_lanes_avx512_ok())
		vc_fp_lanes_avx512(data, len, out);
	else
		vc_fp_lanes_scalar(data, len, out);
}

void vc_fp_lanes_scalar(const void *data, size_t len, struct vc_fp_digest *out)
{
	const uint8_t *p = data;
	struct vc_fp_lanes s = { 0, 0 };
	uint64_t key = VC_FP_LANES_P; /* word i's: (i + 1) x P */
	for (size_t i = 0; i + 16 <= len; i += 16, key += VC_FP_LANES_P)
		vc_fp_lanes_word_key(&s, ld64le(p + i), ld64le(p + i + 8), key);
	const struct vc_fp_mm3 h = vc_fp_lanes_final(s, len);
	st64le(out->b, h.h1);
	st64le(out->b + 8, h.h2);
}

void vc_fp_block(uint32_t algo, const void *p, size_t size, struct vc_fp_digest *out)
{
	if (algo == VC_FP_MD5)
		vc_fp_md5(p, size, out);
	else if (algo == VC_FP_LANES)
		vc_fp_lanes(p, size, out);
	else
		vc_fp_murmur3(p, size, 0, out);
}

int vc_fp_check(const struct vc_fp_job *j)
{
	if (!j)
		return vc_err(-EINVAL, "fingerprint: no job");
	if (j->algo >= VC_FP_ALGOS)
		return vc_err(-EINVAL, "fingerprint: unknown algorithm %u", j->algo);
	const uint32_t bs = j->block_size;
	if (bs < VC_FP_BLOCK_MIN || bs > VC_FP_BLOCK_MAX || (bs & (bs - 1)) != 0)
		return vc_err(-EINVAL, "fingerprint: block size %u is not a power of two in %u..%u",
			      bs, VC_FP_BLOCK_MIN, VC_FP_BLOCK_MAX);
	if (j->n == 0)
		return 0;
	if (!j->blocks_dev || j->blocks_dev % 8 != 0)
		return vc_err(-EINVAL, "fingerprint: block address array %#llx is absent or not "
				       "8-byte aligned", (unsigned long long)j->blocks_dev);
	if (!j->out_dev || j->out_dev % 16 != 0)
		return vc_err(-EINVAL, "fingerprint: digest array %#llx is absent or not 16-byte "
				       "aligned", (unsigned long long)j->out_dev);
	return 0;
}

int vc_fp_run(struct vc_device *d, const struct vc_fp_job *job)
{
	int r = vc_fp_check(job);
	if (r < 0 || job->n == 0)
		return r;
	if (!d->ops->fp_run)
		return vc_err(-VC_ENOTBUILT, "fingerprint: backend %s has none", d->ops->name);
	return d->ops->fp_run(d, job);
}
