/* Moving one piece of a page, shared by the batch kernel (move.cu) and the
 * queue server (server.cu).
 *
 * A warp moves V x 512 bytes: lane l the 16-byte words l, l + 32, ...,
 * each instruction covering 512 contiguous bytes (fully coalesced), all V
 * loads issued before the first store. A SWAP loads both sides and stores
 * them crosswise; each lane touches only its own words, so the exchange has
 * no ordering hazard. s and t already include the lane's offset.
 *
 * Hint: the cache policy. StreamHint (ld/st.cs) suits a kernel launched per
 * batch, whose L1 starts clean; L2Hint (ld/st.cg, L2 only) suits a
 * persistent kernel, whose L1 would otherwise keep lines that other blocks
 * and kernels rewrite. */
#ifndef VC_CUDA_PIECE_CUH
#define VC_CUDA_PIECE_CUH

#include <cuda_runtime.h>

#include "device/cuda/kernels/fp_lanes.cuh"

struct vc_stream_hint {
	static __device__ __forceinline__ uint4 ld(const uint4 *p) { return __ldcs(p); }
	static __device__ __forceinline__ void st(uint4 *p, uint4 v) { __stcs(p, v); }
};

struct vc_l2_hint {
	static __device__ __forceinline__ uint4 ld(const uint4 *p) { return __ldcg(p); }
	static __device__ __forceinline__ void st(uint4 *p, uint4 v) { __stcg(p, v); }
};

/* A lane's V words of a piece, loaded all before any is used, and stored. */
template <int V, class Hint>
__device__ __forceinline__ void vc_piece_ld(const uint4 *s, uint4 (&a)[V])
{
#pragma unroll
	for (int k = 0; k < V; k++)
		a[k] = Hint::ld(s + 32 * k);
}

template <int V, class Hint>
__device__ __forceinline__ void vc_piece_st(uint4 *t, const uint4 (&a)[V])
{
#pragma unroll
	for (int k = 0; k < V; k++)
		Hint::st(t + 32 * k, a[k]);
}

template <int V, class Hint>
__device__ __forceinline__ void vc_move_piece(uint4 *s, uint4 *t, bool swap)
{
	uint4 a[V];
	vc_piece_ld<V, Hint>(s, a);
	if (swap) {
		uint4 b[V];
		vc_piece_ld<V, Hint>(t, b);
		vc_piece_st<V, Hint>(s, b);
	}
	vc_piece_st<V, Hint>(t, a);
}

#ifdef __CUDACC__ /* not in the host simulation (tests/test_fp_sim.cpp) */
/* A COPY that also fingerprints (VC_MOVE_FP): the lanes hash of the V x
 * 512 bytes, from the registers the data passes through (fp_lanes.cuh);
 * every lane returns the digest. The stores are issued before the hash,
 * so they drain while the lanes compute. */
template <int V, class Hint>
__device__ __forceinline__ uint4 vc_move_piece_fp(const uint4 *s, uint4 *t, uint32_t lane)
{
	uint4 a[V];
	vc_piece_ld<V, Hint>(s, a);
	vc_piece_st<V, Hint>(t, a);
	return vc_fp_lanes_digest(vc_fp_lanes_warp_sum(vc_fp_lanes_lane<V>(a, lane)), V * 512u);
}
#endif

#endif
