/* The device-queue server: a persistent kernel that consumes the rings of
 * device/queue.h while moves flow.
 *
 * Block r serves ring r in rounds. In a round, warp 0 polls: it reads the
 * descriptors at the ring's head and takes the longest prefix whose three
 * words all carry their ticket's tag (published whole), at most WIN; it
 * stages them in shared memory; then every warp moves its share of them
 * (piece i goes to warp i % WARPS), fences at system scope (each lane, its
 * own stores), and lane 0 writes done[t % depth] = t + 1 to host memory:
 * a host thread that reads it sees every byte of the piece.
 *
 * Why one poller per ring: polls are PCIe reads, and measured on an H100
 * (bench/dqueue, 2026-11-24) 64 warps each polling their own slot took a
 * lone move from 4 us to 70 us, while 8 pollers kept it at 4 us. So the
 * idle poll is one 32-byte read of the head descriptor per ring; a busy
 * round reads the whole window (WIN descriptors, 1 KiB) in four coalesced
 * loads issued together, one round trip.
 *
 * Caching: the data loads use ld.global.cg (L2, not L1). A persistent
 * kernel keeps its L1 across rounds, and a slot that another block or a
 * cleaning kernel rewrote since this SM last read it must not be served
 * from a stale L1 line. Descriptor and stop words are read volatile.
 *
 * Stopping: the host sets *stop; warp 0 checks it every STOP_EVERY polls,
 * idle or busy; the block then saves its head in pos[r * lanes + l] for
 * every l (the host reads "pending" as any pos < tail) and exits. A round
 * in progress finishes first; descriptors seen but not started stay in the
 * ring for the next launch.
 *
 * Fingerprints (VC_MOVE_FP, device.h: of the plaintext, on a plain or an
 * encrypting COPY): the digest of piece t goes to fp[t % depth] before the
 * fence that precedes its done word. Plain rounds and a cipher round's
 * full rounds: the warp that moves the piece hashes it from its registers
 * (piece.cuh's vc_move_piece_fp; encrypting, each plaintext word beside
 * its AES, a tap in xts.cuh's vc_xts_piece_run) and lane 0 stores the
 * digest. A cipher round's short rounds spread a piece's words over the
 * block: each warp adds its 32 words' shares (the lanes hash is a sum) by
 * shuffles, and lane 0 adds them into the piece's two 64-bit sums in
 * shared memory (fp_short_add: two atomics a warp); after the round's
 * barrier thread d finalizes piece d's, stores it, and fences before its
 * done word.
 *
 * Cost per piece: its bytes once each way (twice for a SWAP), 32 bytes of
 * descriptor read, one 8-byte completion write (and a 16-byte digest with
 * VC_MOVE_FP); per round one PCIe round
 * trip and two block barriers. Idle: one 32-byte read per ring per poll,
 * polls spaced by naps of up to v.nap_ns.
 */
#include <cuda_runtime.h>

#include "device/cuda/kernels/piece.cuh"
#include "device/cuda/kernels/xts.cuh"

#include "device/cuda/kernels/server.h"
#include "device/cuda/kernels/modules.h"
#include "device/device.h"

namespace {

constexpr unsigned FULL = 0xffffffffu;
constexpr uint32_t WARPS = VC_CUDA_DQ_WARPS;
/* Descriptors per round: four 256-byte loads of one warp (8 descriptors
 * each), issued together. */
constexpr uint32_t WIN = 32;
constexpr unsigned STOP_EVERY = 16;
/* Idle polls before napping; the longest nap (v.nap_ns) delays the first
 * piece after a pause by at most that, against PCIe reads saved while idle. */
constexpr unsigned IDLE_POLLS = 64;


/* Warp 0: waits for published descriptors at head h and stages up to WIN
 * of them in sw; returns how many (0: asked to stop). `busy`: the last
 * round found work, so read the whole window at once. */
__device__ uint32_t poll(const struct vc_cuda_dq_view &v, const volatile uint64_t *desc,
			 uint64_t h, bool busy, uint64_t (*sw)[4], unsigned &polls)
{
	const uint32_t lane = threadIdx.x & 31, j = lane % 4;
	const uint64_t mask = (1ull << v.depth_shift) - 1;
	const volatile uint32_t *stop = reinterpret_cast<const volatile uint32_t *>(v.stop);
	for (unsigned idle = 0;; idle++) {
		if (++polls % STOP_EVERY == 0 && __shfl_sync(FULL, lane == 0 ? *stop : 0u, 0))
			return 0;
		const uint32_t chunks = busy ? WIN / 8 : 1;
		uint64_t wd[WIN / 8];
#pragma unroll
		for (uint32_t k = 0; k < WIN / 8; k++) {
			const uint64_t d = 8 * k + lane / 4;
			const bool want = k < chunks && (busy || d == 0);
			wd[k] = want ? desc[((h + d) & mask) * VC_DQ_DESC_WORDS + j] : 0;
		}
		/* valid bit d: descriptor h + d is published whole. */
		uint32_t valid = 0;
#pragma unroll
		for (uint32_t k = 0; k < WIN / 8; k++) {
			const uint64_t t = h + 8 * k + lane / 4;
			const uint64_t tag = ((t >> v.depth_shift) + 1) & 0xffff;
			const uint32_t b = __ballot_sync(FULL, (wd[k] >> VC_DQ_ADDR_BITS) == tag);
#pragma unroll
			for (uint32_t dd = 0; dd < 8; dd++)
				if (((b >> (4 * dd)) & 0xf) == 0xf)
					valid |= 1u << (8 * k + dd);
		}
		if (!busy)
			valid &= 1; /* only the head was read */
		const uint32_t n = valid == FULL ? WIN : (uint32_t)(__ffs(~valid) - 1);
		if (n > 0) {
#pragma unroll
			for (uint32_t k = 0; k < WIN / 8; k++) {
				const uint32_t d = 8 * k + lane / 4;
				if (d < n)
					sw[d][j] = wd[k] & VC_DQ_ADDR_MASK;
			}
			return n;
		}
		if (busy) { /* the window ran dry: poll the head alone from now */
			busy = false;
			continue;
		}
		if (idle > IDLE_POLLS && !(v.mode & VC_CUDA_DQ_NO_NAP))
			__nanosleep(idle - IDLE_POLLS < v.nap_ns / 8 ? (idle - IDLE_POLLS) * 8 : v.nap_ns);
	}
}

/* A round with the cipher (Ciph servers). A short round (fewer pieces
 * than warps) by the whole block: the n pieces' 16-byte blocks are spread
 * over every thread (piece d's block j
 * is item d * NB + j; thread i takes items i, i + blockDim.x, ...), so a
 * lone piece costs each thread one AES after one tweak AES, not a warp
 * its V AES per lane in a row: measured on an H100, a warp per piece
 * added 8 us to a lone 4 KiB move, half the IOPS of 16 synchronous
 * readers. The tweaks first: thread d < n encrypts piece d's (warp 0, one
 * AES per lane), into shared memory. A short round's threads load their
 * first item before the tweaks, and each its next item before it works on
 * this one, so a load (a PCIe read when encrypting: the source is host
 * memory) overlaps the AES. Copies and swaps without a cipher go the same
 * way, 16 bytes a thread. Ends with every store fenced at system scope
 * (by the warps that stored) and a block barrier: the caller then writes
 * the completions. */
/* Where a round's digests go (VC_MOVE_FP): piece d's to fp[(h + d) & mask];
 * sums: a short round's per-piece lanes-hash sums (shared). */
struct fp_out {
	uint4 *fp;
	uint64_t h, mask;
	unsigned long long (*sums)[2];
};

/* A short round's share of a piece's fingerprint: word j (x) of the
 * piece, hashed by every lane of a warp at once, the 32 states added by
 * shuffles and lane 0 adding the sum into the piece's two shared sums:
 * two atomics a warp, where one a word made 2 x NB atomics on one address
 * a piece, in series (512 for a 4 KiB piece). The whole warp calls it:
 * NB and blockDim.x are multiples of 32 and a warp's threads take
 * consecutive items, so its 32 items of an iteration are 32 blocks of one
 * piece (one op, converged). */
__device__ __forceinline__ void fp_short_add(unsigned long long (&sum)[2], uint4 x, uint32_t j)
{
	struct vc_fp_lanes f = { 0, 0 };
	vc_fp_lanes_u4(f, x, j);
	f = vc_fp_lanes_warp_sum(f);
	if ((threadIdx.x & 31) == 0) {
		atomicAdd(&sum[0], (unsigned long long)f.s1);
		atomicAdd(&sum[1], (unsigned long long)f.s2);
	}
}

template <int V>
__device__ __forceinline__ void cipher_round(const vc_xts_lane &L, const vc_xts_smem &xs,
					     const uint64_t (*sw)[4], uint32_t n, uint4 *tws, uint4 *one,
					     const fp_out &fo)
{
	constexpr uint32_t NB = V * 32; /* 16-byte blocks per piece */
	const vc_xts_keys_smem ke(xs.rk), kd(xs.rkd);
	const uint32_t tid = threadIdx.x;
	const uint32_t total = n < WARPS ? n * NB : 0; /* a short round's items */
	uint32_t b = tid;
	uint4 x = make_uint4(0, 0, 0, 0);
	if (b < total)
		x = vc_l2_hint::ld(reinterpret_cast<const uint4 *>(sw[b / NB][0]) + b % NB);
	if (tid < n && (sw[tid][2] & VC_MOVE_CIPHER)) {
		const uint64_t tw = (sw[tid][2] >> VC_DQ_OP_BITS & 0xffff) << VC_DQ_ADDR_BITS | sw[tid][3];
		tws[tid] = vc_xts_tweak_encrypt<false>(L, xs, tw);
	}
	if (tid < n && total) {
		fo.sums[tid][0] = 0;
		fo.sums[tid][1] = 0;
	}
	__syncthreads();
	if (n >= WARPS) {
		/* A full round: a piece per warp, its V AES per lane
		 * independent work (measured: spreading 32 pieces' blocks over
		 * the block left 128 KiB reads at 0.78 of plain; a warp per
		 * piece kept them at 0.98). */
		const uint32_t w = tid / 32, lane = tid & 31;
		for (uint32_t d = w; d < n; d += WARPS) {
			uint4 *ps = reinterpret_cast<uint4 *>(sw[d][0]) + lane;
			uint4 *pd = reinterpret_cast<uint4 *>(sw[d][1]) + lane;
			const uint32_t op = (uint32_t)(sw[d][2] & 0xff);
			uint4 *fpd = fo.fp + ((fo.h + d) & fo.mask);
			if (op & VC_MOVE_ENCRYPT) {
				/* The plaintext's fingerprint, each word hashed
				 * beside its AES (the tap), not in a pass before
				 * the first AES. */
				uint4 a[V];
				vc_xts_piece_ld<V, vc_l2_hint>(ps, a);
				vc_fp_lanes_tap tap = { { 0, 0 }, lane, (op & VC_MOVE_FP) != 0 };
				vc_xts_piece_run<V, false, true, vc_l2_hint>(L, ke, tws[d], a, pd, tap);
				if (op & VC_MOVE_FP) {
					const uint4 dg = vc_fp_lanes_digest(vc_fp_lanes_warp_sum(tap.s), V * 512u);
					if (lane == 0)
						__stcg(fpd, dg);
				}
			} else if (op & VC_MOVE_DECRYPT) {
				vc_xts_piece<V, false, false, vc_l2_hint>(L, kd, tws[d], ps, pd);
			} else if (op & VC_MOVE_FP) {
				const uint4 dg = vc_move_piece_fp<V, vc_l2_hint>(ps, pd, lane);
				if (lane == 0)
					__stcg(fpd, dg);
			} else {
				vc_move_piece<V, vc_l2_hint>(ps, pd, (op & VC_MOVE_OP_MASK) != VC_MOVE_COPY);
			}
		}
		__threadfence_system();
		__syncthreads();
		return;
	}
	while (b < total) {
		const uint32_t d = b / NB, j = b % NB, bn = b + blockDim.x;
		uint4 xn = x;
		if (bn < total)
			xn = vc_l2_hint::ld(reinterpret_cast<const uint4 *>(sw[bn / NB][0]) + bn % NB);
		uint4 *src = reinterpret_cast<uint4 *>(sw[d][0]) + j;
		uint4 *dst = reinterpret_cast<uint4 *>(sw[d][1]) + j;
		const uint32_t op = (uint32_t)(sw[d][2] & 0xff);
		if (op & VC_MOVE_CIPHER) {
			const uint4 tt = vc_xts_to_u4(vc_xts_mul_alpha_any(vc_xts_from_u4(tws[d]), j));
			const uint4 y = (op & VC_MOVE_ENCRYPT) ? vc_xts_block_in<false, true>(L, ke, x, tt)
							       : vc_xts_block_in<false, false>(L, kd, x, tt);
			if (n == 1)
				one[j] = y;
			else
				vc_l2_hint::st(dst, y);
		} else if ((op & VC_MOVE_OP_MASK) != VC_MOVE_COPY) {
			const uint4 y = vc_l2_hint::ld(dst);
			vc_l2_hint::st(src, y);
			vc_l2_hint::st(dst, x);
		} else {
			vc_l2_hint::st(dst, x);
		}
		if (op & VC_MOVE_FP) /* word j of the plaintext (x), in its AES's iteration */
			fp_short_add(fo.sums[d], x, j);
		x = xn;
		b = bn;
	}
	if (n == 1 && (sw[0][2] & VC_MOVE_CIPHER)) {
		/* A lone piece: its blocks were worked by NB / 32 warps, and
		 * each would fence its stores at system scope; they go through
		 * shared memory to warp 0, which stores the piece and fences
		 * once (a fence per warp of the piece measured as part of the
		 * lone hit's latency). */
		__syncthreads();
		if (tid < 32) {
			uint4 *dst = reinterpret_cast<uint4 *>(sw[0][1]);
#pragma unroll
			for (int k = 0; k < V; k++)
				vc_l2_hint::st(dst + tid + 32 * k, one[tid + 32 * k]);
			__threadfence_system();
		}
	} else if ((tid & ~31u) < total) { /* the warp stored */
		__threadfence_system();
	}
	__syncthreads();
	if (tid < n && (sw[tid][2] & VC_MOVE_FP)) { /* a short round's sums are whole */
		const struct vc_fp_lanes f = { fo.sums[tid][0], fo.sums[tid][1] };
		__stcg(fo.fp + ((fo.h + tid) & fo.mask), vc_fp_lanes_digest(f, V * 512u));
		__threadfence_system(); /* before this thread's done word */
	}
}

/* Ciph: the variant for queues with a key (v.cipher): each block sets up
 * the decryption layout (xts.cuh: both directions) in its dynamic shared
 * memory at launch, once per run of the server, and wipes it at exit. */
template <int V, bool Ciph>
__global__ void __launch_bounds__(WARPS * 32)
server_kernel(const struct vc_cuda_dq_view v)
{
	__shared__ uint64_t sw[WIN][4];
	__shared__ uint32_t sn;
	extern __shared__ uint4 server_dyn[];
	vc_xts_smem &xs = *reinterpret_cast<vc_xts_smem *>(server_dyn);
	if (Ciph) {
		vc_xts_kparam kp;
#pragma unroll
		for (int q = 0; q < 4; q++) {
			const uint64_t a = v.key.w[2 * q], b = v.key.w[2 * q + 1];
			kp.w[q] = make_uint4((uint32_t)a, (uint32_t)(a >> 32), (uint32_t)b, (uint32_t)(b >> 32));
		}
		vc_xts_setup<false>(xs, kp);
	}
	__shared__ uint4 tws[WIN]; /* Ciph: the round's encrypted tweaks */
	__shared__ uint4 one[Ciph ? V * 32 : 1]; /* Ciph: a lone piece's result (cipher_round) */
	__shared__ unsigned long long sums[Ciph ? WIN : 1][2]; /* Ciph: short rounds' hash sums */
	const vc_xts_lane L = vc_xts_lane_make(xs);
	const uint32_t lane = threadIdx.x & 31, w = threadIdx.x / 32, r = blockIdx.x;
	const volatile uint64_t *desc = reinterpret_cast<const volatile uint64_t *>(v.desc[r]);
	volatile uint64_t *done = reinterpret_cast<volatile uint64_t *>(v.done[r]);
	volatile uint64_t *pos = reinterpret_cast<volatile uint64_t *>(v.pos) + r * v.lanes;
	const uint64_t mask = (1ull << v.depth_shift) - 1;
	uint64_t h = pos[0];
	unsigned polls = 0;
	bool busy = false;
	for (;;) {
		if (w == 0) {
			const uint32_t n = poll(v, desc, h, busy, sw, polls);
			if (lane == 0)
				sn = n;
		}
		__syncthreads();
		const uint32_t n = sn;
		if (n == 0)
			break;
		__threadfence(); /* acquire: data other blocks and kernels wrote */
		if (Ciph) {
			const fp_out fo = { reinterpret_cast<uint4 *>(v.fp[r]), h, mask, sums };
			cipher_round<V>(L, xs, sw, n, tws, one, fo);
			if (threadIdx.x < n)
				done[(h + threadIdx.x) & mask] = h + threadIdx.x + 1;
		}
		for (uint32_t d = w; !Ciph && d < n; d += WARPS) {
			const uint64_t off = lane * 16u;
			uint4 *ps = reinterpret_cast<uint4 *>(sw[d][0] + off);
			uint4 *pd = reinterpret_cast<uint4 *>(sw[d][1] + off);
			const uint32_t op = (uint32_t)(sw[d][2] & 0xff);
			if (op & VC_MOVE_FP) {
				/* The digest before the fence that precedes done
				 * (lane 0 stores both): a waiter that saw done
				 * reads it (queue.h). */
				const uint4 dg = vc_move_piece_fp<V, vc_l2_hint>(ps, pd, lane);
				if (lane == 0)
					__stcg(reinterpret_cast<uint4 *>(v.fp[r]) + ((h + d) & mask), dg);
			} else {
				vc_move_piece<V, vc_l2_hint>(ps, pd, (op & VC_MOVE_OP_MASK) != VC_MOVE_COPY);
			}
			__threadfence_system();
			__syncwarp();
			if (lane == 0)
				done[(h + d) & mask] = h + d + 1;
		}
		h += n;
		busy = true; /* read the whole window next round */
		__syncthreads(); /* sw is rewritten by the next poll */
	}
	if (threadIdx.x < v.lanes)
		pos[threadIdx.x] = h;
	__threadfence_system();
	if (Ciph) {
		/* The last round's tweaks and lone result: key-derived and
		 * plaintext (a decryption's) left in shared memory. */
		for (uint32_t i = threadIdx.x; i < WIN; i += blockDim.x)
			tws[i] = make_uint4(0, 0, 0, 0);
		for (uint32_t i = threadIdx.x; i < V * 32; i += blockDim.x)
			one[i] = make_uint4(0, 0, 0, 0);
		vc_xts_wipe(xs);
	}
}

template <int V>
cudaError_t launch(const struct vc_cuda_dq_view *v, cudaStream_t s)
{
	const dim3 grid(v->nrings), block(VC_CUDA_DQ_WARPS * 32);
	if (!v->cipher) {
		server_kernel<V, false><<<grid, block, 0, s>>>(*v);
		return cudaGetLastError();
	}
	const int smem = (int)sizeof(vc_xts_smem);
	cudaError_t e = cudaFuncSetAttribute(server_kernel<V, true>,
					     cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
	if (e != cudaSuccess)
		return e;
	server_kernel<V, true><<<grid, block, smem, s>>>(*v);
	return cudaGetLastError();
}

} // namespace

extern "C" int vc_cuda_dq_launch(const struct vc_cuda_dq_view *v, void *stream)
{
	if (v->nrings == 0 || v->nrings > VC_DQ_MAX_RINGS || v->lanes == 0 ||
	    v->lanes > VC_DQ_MAX_LANES || v->lanes > VC_CUDA_DQ_WARPS * 32)
		return (int)cudaErrorInvalidValue;
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	switch (v->piece) {
	case 512:
		return (int)launch<1>(v, s);
	case 1024:
		return (int)launch<2>(v, s);
	case 2048:
		return (int)launch<4>(v, s);
	case 4096:
		return (int)launch<8>(v, s);
	default:
		return (int)cudaErrorInvalidValue;
	}
}

extern "C" const void *vc_cuda_server_module(void)
{
	return reinterpret_cast<const void *>(&server_kernel<1, false>);
}
