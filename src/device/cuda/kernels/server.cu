/* The device-queue server: a persistent kernel that consumes the rings of
 * device/queue.h while moves flow.
 *
 * Warp l of block r owns lane l of ring r and takes tickets l, l + lanes,
 * ... in order. For ticket t it reads the descriptor's three words in one
 * request (lanes 0..2 of the warp, 8 bytes each: one 32-byte sector) and
 * accepts it when all three carry t's tag; otherwise the descriptor is not
 * (wholly) published yet and the warp polls again, napping up to NAP_MAX_NS
 * between polls once it has been idle a while. Then it moves the piece,
 * fences at system scope (every lane, its own stores), and lane 0 writes
 * done[t % depth] = t + 1 to host memory: a host thread that reads it sees
 * every byte of the piece.
 *
 * Caching: the data loads use ld.global.cg (L2, not L1). A persistent
 * kernel keeps its L1 across tickets, and a slot that another block or a
 * cleaning kernel rewrote since this SM last read it must not be served
 * from a stale L1 line. The descriptor and stop words are read volatile.
 *
 * Stopping: the host sets *stop; a warp checks it every STOP_EVERY polls
 * while idle and every STOP_EVERY pieces while busy, finishes its piece,
 * saves its next ticket in pos[r * lanes + l] and exits.
 *
 * Cost per piece: one descriptor read (a PCIe round trip), the piece's
 * bytes once each way (twice for a SWAP), one 8-byte completion write.
 * While idle each warp polls about once per microsecond plus its nap: a
 * 32-byte PCIe read each time.
 */
#include <cuda_runtime.h>

#include "device/cuda/kernels/server.h"
#include "device/device.h"

namespace {

constexpr unsigned FULL = 0xffffffffu;
constexpr unsigned STOP_EVERY = 16;
/* Idle polls before napping; the longest nap (v.nap_ns) delays the first
 * piece after a pause by at most that, against PCIe reads saved while idle. */
constexpr unsigned IDLE_POLLS = 64;

template <int V>
__device__ __forceinline__ void move_piece(uint4 *s, uint4 *t, bool swap)
{
	uint4 a[V];
#pragma unroll
	for (int k = 0; k < V; k++)
		a[k] = __ldcg(s + 32 * k);
	if (swap) {
		uint4 b[V];
#pragma unroll
		for (int k = 0; k < V; k++)
			b[k] = __ldcg(t + 32 * k);
#pragma unroll
		for (int k = 0; k < V; k++)
			__stcg(s + 32 * k, b[k]);
	}
#pragma unroll
	for (int k = 0; k < V; k++)
		__stcg(t + 32 * k, a[k]);
}

__device__ __forceinline__ uint64_t ld_relaxed_sys(const volatile uint64_t *p)
{
	uint64_t v;
	asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
}

__device__ __forceinline__ void fence_sys(uint32_t mode)
{
	if (mode & VC_CUDA_DQ_FENCE_ACQREL)
		asm volatile("fence.acq_rel.sys;" ::: "memory");
	else
		__threadfence_system();
}

template <int V>
__global__ void __launch_bounds__(VC_DQ_MAX_LANES * 32)
server_kernel(const struct vc_cuda_dq_view v)
{
	const uint32_t lane = threadIdx.x & 31, w = threadIdx.x / 32, r = blockIdx.x;
	const volatile uint64_t *desc = reinterpret_cast<const volatile uint64_t *>(v.desc[r]);
	volatile uint64_t *done = reinterpret_cast<volatile uint64_t *>(v.done[r]);
	volatile uint64_t *pos = reinterpret_cast<volatile uint64_t *>(v.pos) + r * v.lanes + w;
	const volatile uint32_t *stop = reinterpret_cast<const volatile uint32_t *>(v.stop);
	const uint64_t mask = (1ull << v.depth_shift) - 1;
	uint64_t t = *pos;
	unsigned idle = 0, served = 0;
	for (;;) {
		const uint64_t slot = t & mask;
		const volatile uint64_t *dw = desc + slot * VC_DQ_DESC_WORDS + lane;
		const uint64_t word = lane >= 3 ? 0 : (v.mode & VC_CUDA_DQ_LD_RELAXED) ? ld_relaxed_sys(dw) : *dw;
		const uint64_t src = __shfl_sync(FULL, word, 0);
		const uint64_t dst = __shfl_sync(FULL, word, 1);
		const uint64_t op = __shfl_sync(FULL, word, 2);
		const uint64_t tag = ((t >> v.depth_shift) + 1) & 0xffff;
		if ((src >> VC_DQ_ADDR_BITS) == tag && (dst >> VC_DQ_ADDR_BITS) == tag &&
		    (op >> VC_DQ_ADDR_BITS) == tag) {
			__threadfence();
			const uint64_t off = lane * 16u;
			move_piece<V>(reinterpret_cast<uint4 *>((src & VC_DQ_ADDR_MASK) + off),
				      reinterpret_cast<uint4 *>((dst & VC_DQ_ADDR_MASK) + off),
				      (op & 0xff) != VC_MOVE_COPY);
			if (v.mode & VC_CUDA_DQ_FENCE_LANE0) {
				__syncwarp();
				if (lane == 0)
					fence_sys(v.mode);
			} else {
				fence_sys(v.mode);
				__syncwarp();
			}
			if (lane == 0)
				done[slot] = t + 1;
			t += v.lanes;
			idle = 0;
			if (++served % STOP_EVERY == 0 && __shfl_sync(FULL, lane == 0 ? *stop : 0u, 0))
				break;
			continue;
		}
		++idle;
		if (idle % STOP_EVERY == 0 && __shfl_sync(FULL, lane == 0 ? *stop : 0u, 0))
			break;
		if (idle > IDLE_POLLS && !(v.mode & VC_CUDA_DQ_NO_NAP))
			__nanosleep(idle - IDLE_POLLS < v.nap_ns / 8 ? (idle - IDLE_POLLS) * 8 : v.nap_ns);
	}
	if (lane == 0) {
		*pos = t;
		__threadfence_system();
	}
}

} // namespace

extern "C" int vc_cuda_dq_launch(const struct vc_cuda_dq_view *v, void *stream)
{
	if (v->nrings == 0 || v->nrings > VC_DQ_MAX_RINGS || v->lanes == 0 ||
	    v->lanes > VC_DQ_MAX_LANES)
		return (int)cudaErrorInvalidValue;
	const dim3 grid(v->nrings), block(v->lanes * 32);
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	switch (v->piece) {
	case 512:
		server_kernel<1><<<grid, block, 0, s>>>(*v);
		break;
	case 1024:
		server_kernel<2><<<grid, block, 0, s>>>(*v);
		break;
	case 2048:
		server_kernel<4><<<grid, block, 0, s>>>(*v);
		break;
	case 4096:
		server_kernel<8><<<grid, block, 0, s>>>(*v);
		break;
	default:
		return (int)cudaErrorInvalidValue;
	}
	return (int)cudaGetLastError();
}
