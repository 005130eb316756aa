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

struct vc_stream_hint {
	static __device__ __forceinline__ uint4 ld(const uint4 *p) { return __ldcs(p); }
	static __device__ __forceinline__ void st(uint4 *p, uint4 v) { __stcs(p, v); }
};

struct vc_l2_hint {
	static __device__ __forceinline__ uint4 ld(const uint4 *p) { return __ldcg(p); }
	static __device__ __forceinline__ void st(uint4 *p, uint4 v) { __stcg(p, v); }
};

template <int V, class Hint>
__device__ __forceinline__ void vc_move_piece(uint4 *s, uint4 *t, bool swap)
{
	uint4 a[V];
#pragma unroll
	for (int k = 0; k < V; k++)
		a[k] = Hint::ld(s + 32 * k);
	if (swap) {
		uint4 b[V];
#pragma unroll
		for (int k = 0; k < V; k++)
			b[k] = Hint::ld(t + 32 * k);
#pragma unroll
		for (int k = 0; k < V; k++)
			Hint::st(s + 32 * k, b[k]);
	}
#pragma unroll
	for (int k = 0; k < V; k++)
		Hint::st(t + 32 * k, a[k]);
}

#endif
