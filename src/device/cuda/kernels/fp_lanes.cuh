/* The lanes hash (device/fp_algo.h, VC_FP_LANES) inside a warp that moves
 * one piece: the move kernels' VC_MOVE_FP (server.cu's plain rounds,
 * move.cu's launched batches). Compiled for the host by
 * tests/test_fp_sim.cpp, which runs the 32 lanes' code and the shuffle
 * tree's arithmetic against the host reference where there is no GPU.
 *
 * Lane l of the warp holds the piece's 16-byte words l, l + 32, ...,
 * l + 32 (V - 1) in registers (piece.cuh's layout) on their way from src
 * to dst. It hashes them there, word i with its position i, into its own
 * state (2 x 64 bits); the 32 states are then added by a butterfly of
 * five shuffle-xor steps, after which every lane holds the block's whole
 * state and lane 0 finalizes and stores the digest. No memory is read
 * beyond what the move reads; extra registers: the state (4) and the
 * mix's temporaries. */
#ifndef VC_CUDA_FP_LANES_CUH
#define VC_CUDA_FP_LANES_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "device/fp_algo.h"

/* Word i of the block, as the uint4 a lane loaded (little-endian words). */
__device__ __forceinline__ void vc_fp_lanes_u4(struct vc_fp_lanes &s, uint4 w, uint32_t i)
{
	vc_fp_lanes_word(&s, (uint64_t)w.y << 32 | w.x, (uint64_t)w.w << 32 | w.z, i);
}

/* Lane `lane`'s share of a piece of V x 512 bytes: its words a[k], word
 * index lane + 32 k. */
template <int V>
__device__ __forceinline__ struct vc_fp_lanes vc_fp_lanes_lane(const uint4 (&a)[V], uint32_t lane)
{
	struct vc_fp_lanes s = { 0, 0 };
#pragma unroll
	for (int k = 0; k < V; k++)
		vc_fp_lanes_u4(s, a[k], lane + 32u * k);
	return s;
}

/* The lane's share as a tap on the cipher's piece (xts.cuh's
 * vc_xts_piece_run): word v of the lane is word base + 32 v of the block
 * (base: the lane, plus the piece's first word when a block is split into
 * pieces), hashed in the iteration of its AES. on: whether the move
 * fingerprints at all (warp-uniform, so one instantiation of the cipher
 * serves moves with and without VC_MOVE_FP); off, s stays zero. */
struct vc_fp_lanes_tap {
	struct vc_fp_lanes s;
	uint32_t base;
	bool on;
	__device__ __forceinline__ void operator()(int v, uint4 w)
	{
		if (on)
			vc_fp_lanes_u4(s, w, base + 32u * (uint32_t)v);
	}
};

/* The digest (struct vc_fp_digest's 16 bytes as a uint4) of a block of
 * len bytes from its whole state. */
__device__ __forceinline__ uint4 vc_fp_lanes_digest(struct vc_fp_lanes s, uint32_t len)
{
	const struct vc_fp_mm3 h = vc_fp_lanes_final(s, len);
	return make_uint4((uint32_t)h.h1, (uint32_t)(h.h1 >> 32), (uint32_t)h.h2,
			  (uint32_t)(h.h2 >> 32));
}

#ifdef __CUDACC__ /* not in the host simulation (tests/test_fp_sim.cpp) */
/* The warp's 32 states added (every lane gets the sum): five rounds of
 * shuffle-xor, two 64-bit shuffles a round. */
__device__ __forceinline__ struct vc_fp_lanes vc_fp_lanes_warp_sum(struct vc_fp_lanes s)
{
#pragma unroll
	for (int off = 16; off > 0; off /= 2)
		vc_fp_lanes_add(&s, __shfl_xor_sync(0xffffffffu, s.s1, off),
				__shfl_xor_sync(0xffffffffu, s.s2, off));
	return s;
}
#endif

#endif
