/* One block's fingerprint on one GPU thread (fp.cu's kernel; compiled for
 * the host by tests/test_fp_sim.cpp, which checks it against the host
 * reference where there is no GPU).
 *
 * The thread reads its block in steps of 64 bytes, four 16-byte loads,
 * and issues the next step's loads before hashing the current one: the
 * loads do not depend on the hash state, so one step's memory latency
 * hides behind the previous step's arithmetic, and each thread keeps 64
 * bytes in flight beyond the step it hashes. A step is one MD5 chunk or
 * four MurmurHash3 chunks; the state (4 words, or 2 x 64 bits), the
 * current and the next step (2 x 16 words) stay in registers: every array
 * index below is a constant after unrolling.
 *
 * Loads: Ld::ld(p) returns the 16 bytes at p as a uint4 (little-endian
 * words). vc_fp_ld16 reads p as one uint4 (16-byte aligned p only, with
 * the streaming hint: each byte is read once); vc_fp_ld_bytes reads bytes,
 * for blocks at other addresses (correct anywhere, about 16x the load
 * instructions; the engine's blocks are always aligned). */
#ifndef VC_CUDA_FP_CUH
#define VC_CUDA_FP_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "device/fp.h"

/* Bytes per step: one MD5 chunk. */
#define VC_FP_STEP 64u

struct vc_fp_ld16 {
	static __device__ __forceinline__ uint4 ld(const uint8_t *p)
	{
		return __ldcs(reinterpret_cast<const uint4 *>(p));
	}
};

struct vc_fp_ld_bytes {
	static __device__ __forceinline__ uint32_t w(const uint8_t *p)
	{
		return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		       (uint32_t)p[3] << 24;
	}
	static __device__ __forceinline__ uint4 ld(const uint8_t *p)
	{
		return make_uint4(w(p), w(p + 4), w(p + 8), w(p + 12));
	}
};

template <class Ld>
__device__ __forceinline__ void vc_fp_step_ld(uint4 v[4], const uint8_t *p)
{
#pragma unroll
	for (int k = 0; k < 4; k++)
		v[k] = Ld::ld(p + 16 * k);
}

/* MurmurHash3_x64_128, seed 0, of size bytes at p; size a multiple of 64.
 * Cost: size / 16 chunk rounds (~40 integer instructions each). */
template <class Ld>
__device__ __forceinline__ uint4 vc_fp_mm3_block(const uint8_t *p, uint32_t size)
{
	struct vc_fp_mm3 s = vc_fp_mm3_init(0);
	const uint32_t steps = size / VC_FP_STEP;
	uint4 cur[4], nxt[4];
	vc_fp_step_ld<Ld>(cur, p);
#pragma unroll 1
	for (uint32_t i = 0; i < steps; i++) {
		if (i + 1 < steps) /* uniform over a warp: every thread has the same size */
			vc_fp_step_ld<Ld>(nxt, p + (size_t)(i + 1) * VC_FP_STEP);
#pragma unroll
		for (int k = 0; k < 4; k++)
			vc_fp_mm3_chunk(&s, (uint64_t)cur[k].y << 32 | cur[k].x,
					(uint64_t)cur[k].w << 32 | cur[k].z);
#pragma unroll
		for (int k = 0; k < 4; k++)
			cur[k] = nxt[k];
	}
	vc_fp_mm3_final(&s, size);
	return make_uint4((uint32_t)s.h1, (uint32_t)(s.h1 >> 32), (uint32_t)s.h2,
			  (uint32_t)(s.h2 >> 32));
}

/* MD5 of size bytes at p; size a multiple of 64. Cost: size / 64 + 1
 * compressions (the last, the padding, is a constant chunk). */
template <class Ld>
__device__ __forceinline__ uint4 vc_fp_md5_block(const uint8_t *p, uint32_t size)
{
	struct vc_fp_md5 s = vc_fp_md5_init();
	const uint32_t steps = size / VC_FP_STEP;
	uint4 cur[4], nxt[4];
	vc_fp_step_ld<Ld>(cur, p);
#pragma unroll 1
	for (uint32_t i = 0; i < steps; i++) {
		if (i + 1 < steps)
			vc_fp_step_ld<Ld>(nxt, p + (size_t)(i + 1) * VC_FP_STEP);
		const uint32_t m[16] = { cur[0].x, cur[0].y, cur[0].z, cur[0].w,
					 cur[1].x, cur[1].y, cur[1].z, cur[1].w,
					 cur[2].x, cur[2].y, cur[2].z, cur[2].w,
					 cur[3].x, cur[3].y, cur[3].z, cur[3].w };
		vc_fp_md5_chunk(&s, m);
#pragma unroll
		for (int k = 0; k < 4; k++)
			cur[k] = nxt[k];
	}
	uint32_t pad[16];
	vc_fp_md5_pad_chunk(pad, size);
	vc_fp_md5_chunk(&s, pad);
	return make_uint4(s.a, s.b, s.c, s.d);
}

/* Algo's digest of the block at p (any address), as the 16 bytes of
 * struct vc_fp_digest. The alignment test is per thread; a warp whose
 * blocks mix alignments runs both paths one after the other. */
template <int Algo>
__device__ __forceinline__ uint4 vc_fp_block_dev(const uint8_t *p, uint32_t size)
{
	if (((uintptr_t)p & 15) == 0)
		return Algo == VC_FP_MD5 ? vc_fp_md5_block<vc_fp_ld16>(p, size)
				 : vc_fp_mm3_block<vc_fp_ld16>(p, size);
	return Algo == VC_FP_MD5 ? vc_fp_md5_block<vc_fp_ld_bytes>(p, size)
			 : vc_fp_mm3_block<vc_fp_ld_bytes>(p, size);
}

#endif
