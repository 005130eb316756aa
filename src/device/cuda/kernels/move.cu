/* The page-move kernel: one launch moves a whole batch of pages.
 *
 * Work unit: a piece of min(page_size, 4 KiB), one warp per piece. A page
 * of 4 KiB or less is one piece, so that is one warp per page; a larger page
 * is split into 4 KiB pieces handled by different warps, so that a batch of
 * a few 2 MiB pages still spreads over the whole GPU instead of leaving one
 * warp to walk 512 serial rounds. Pieces are numbered page-major, so the
 * warps of one block work on adjacent memory.
 *
 * Per piece, lane l moves the 16-byte words l, l+32, l+64, ...: each
 * instruction of the warp covers 512 contiguous bytes (fully coalesced), and
 * all V loads of the piece are issued before the first store, so a warp has
 * a whole piece (4 KiB at V = 8) in flight. A SWAP loads both sides of the
 * piece into registers and stores them crosswise; each lane only touches its
 * own words, so the exchange has no ordering hazard. Pages of one batch are
 * disjoint (device.h), so pieces are independent and need no ordering.
 *
 * The descriptors live in mapped host memory and are read in place; a
 * warp fetches the next piece's descriptor before moving the current one,
 * so the PCIe round trip of the descriptor read overlaps the data.
 *
 * Completion: each block, after a barrier, has thread 0 fence at system
 * scope and count itself in *counter; the block that counts last resets the
 * counter and writes gen to the host flag after another system fence. The
 * fences are cumulative (PTX memory model: the barrier orders the block's
 * stores before thread 0's fence, as in the cooperative-groups grid sync),
 * so a host that reads gen also sees every store of the batch.
 *
 * Fingerprints (VC_MOVE_FP, device.h: of the plaintext, on a plain or an
 * encrypting COPY of one piece): the warp hashes the piece from its
 * registers (piece.cuh's vc_move_piece_fp) and lane 0 stores the digest at
 * fp[i], before batch_done's fences. The cipher kernel hashes an
 * encrypting move's plaintext words beside their AES (a tap in xts.cuh's
 * vc_xts_piece_run), and splits a page into
 * sub-pieces moved by the warps of one block in one round; each warp adds
 * its lanes' states (the hash is a sum) and leaves its sub-piece's state
 * in shared memory, and after the barrier that ends every 32 rounds the
 * thread of a page's first sub-piece adds them and stores the digest.
 *
 * Cost: bytes moved once each way (twice for a SWAP), plus one 24-byte
 * descriptor read per piece and one atomic per block. Registers (ptxas,
 * V = 8/4/2/1): 64/48/32/32 on sm_90 with the VC_MOVE_FP branch (before
 * it 64/48/31/23; occupancy unchanged: V = 1 and 2 stay warp-limited),
 * 62/39/30/24 on sm_80 before it (not remeasured), no local
 * memory; at 64, 4 blocks (32 warps, 128 KiB of loads) per SM. ptxas
 * interleaves a SWAP's stores to one side with its remaining loads from
 * that side (same lane, other offsets), which keeps V = 8 at 64 registers.
 *
 * Measured on an H200 (PCIe gen5 x16), 4 KiB pages scattered at random:
 * 91-92% of a contiguous cudaMemcpyAsync of the same bytes host to device,
 * 93-95% device to host, from 512 pages per batch. Neither L2::256B load
 * hints nor Hopper bulk copies (cp.async.bulk through shared memory)
 * changed this: the SMs' PCIe requests are smaller than the copy engine's.
 */
#include <cuda_runtime.h>

#include "device/cuda/kernels/piece.cuh"
#include "device/cuda/kernels/xts.cuh"

#include "device/cuda/kernels/move.h"
#include "device/cuda/kernels/modules.h"

namespace {

constexpr uint32_t WARPS_PER_BLOCK = VC_CUDA_MOVE_THREADS / 32;
constexpr uint32_t MAX_V = 8; /* uint4 per lane per piece: 8 x 16 B x 32 = 4 KiB */
constexpr unsigned FULL = 0xffffffffu;

/* Lanes 0..2 load the first three 8-byte words of descriptor p (src, dst,
 * op|pad; the tweak is read where a cipher needs it):
 * one request instead of three; the others load nothing. */
__device__ __forceinline__ uint64_t desc_word(const struct vc_move *moves, uint32_t p,
					      uint32_t lane)
{
	const uint64_t *w = reinterpret_cast<const uint64_t *>(moves + p);
	return lane < 3 ? w[lane] : 0;
}

/* The batch's completion, by every thread of each block at its end: the
 * last block to count writes gen to the host flag (see the top). */
__device__ __forceinline__ void batch_done(volatile uint32_t *flag, uint32_t gen, uint32_t *counter)
{
	__syncthreads();
	if (threadIdx.x == 0) {
		__threadfence_system();
		if (atomicAdd(counter, 1u) == gridDim.x - 1) {
			/* Every other block has fenced and counted: the batch is done.
			 * The reset is seen by the next launch (stream order). */
			*counter = 0;
			__threadfence_system();
			*flag = gen;
		}
	}
}

/* A batch's shape: pages up to 4 KiB are one piece of v = page_size/512
 * words per lane; larger ones 2^shift pieces of 4 KiB. false for a batch
 * no kernel takes (bad sizes, more than 2^31 pieces). */
static bool batch_shape(uint32_t n, uint32_t page_size, uint32_t max_blocks, uint32_t *v,
			uint32_t *shift)
{
	if (n == 0 || max_blocks == 0 || page_size < 512 || page_size > (2u << 20) ||
	    (page_size & (page_size - 1)) != 0)
		return false;
	*v = MAX_V;
	*shift = 0;
	if (page_size < 4096)
		*v = page_size / 512;
	else
		*shift = (uint32_t)__builtin_ctz(page_size / 4096);
	return ((uint64_t)n << *shift) <= (1ull << 31);
}

/* nitems = n << shift pieces; piece i is part (i & mask) of page i >> shift.
 * Grid-stride over pieces, one warp each. */
template <int V>
__global__ void __launch_bounds__(VC_CUDA_MOVE_THREADS)
move_kernel(const struct vc_move *__restrict__ moves, uint4 *fp, uint32_t nitems, uint32_t shift,
	    volatile uint32_t *flag, uint32_t gen, uint32_t *counter)
{
	constexpr uint32_t PIECE = V * 32 * 16;
	const uint32_t lane = threadIdx.x & 31;
	const uint32_t nwarps = gridDim.x * WARPS_PER_BLOCK;
	const uint32_t mask = (1u << shift) - 1;
	uint32_t it = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32;

	if (it < nitems) {
		uint64_t w = desc_word(moves, it >> shift, lane);
		for (;;) {
			const uint32_t nx = it + nwarps; /* no wrap: nitems <= 2^31 */
			uint64_t wn = 0;
			if (nx < nitems)
				wn = desc_word(moves, nx >> shift, lane);
			const uint64_t src = __shfl_sync(FULL, w, 0);
			const uint64_t dst = __shfl_sync(FULL, w, 1);
			const uint32_t op = (uint32_t)__shfl_sync(FULL, w, 2);
			const uint64_t off = (uint64_t)(it & mask) * PIECE + lane * 16u;
			/* Like emu: anything but COPY exchanges. A fingerprint
			 * comes with one-piece pages only (shift 0: item it is
			 * move it), stored before batch_done's fences. */
			if (op & VC_MOVE_FP) {
				const uint4 dg = vc_move_piece_fp<V, vc_stream_hint>(
					reinterpret_cast<const uint4 *>(src + off),
					reinterpret_cast<uint4 *>(dst + off), lane);
				if (lane == 0)
					__stcs(fp + it, dg);
			} else {
				vc_move_piece<V, vc_stream_hint>(reinterpret_cast<uint4 *>(src + off),
					      reinterpret_cast<uint4 *>(dst + off),
					      (op & VC_MOVE_OP_MASK) != VC_MOVE_COPY);
			}
			if (nx >= nitems)
				break;
			it = nx;
			w = wn;
		}
	}

	batch_done(flag, gen, counter);
}

/* The same with the cipher on the way (device.h's VC_MOVE_ENCRYPT and
 * VC_MOVE_DECRYPT; xts.cuh's building blocks). Each block first sets up
 * its tables and round keys in shared memory (LayoutEnc: the encryption
 * layout, for batches that only encrypt; otherwise the decryption layout,
 * which does both). Tweaks as in xts.cu: every 32 pieces a warp encrypts
 * the tweaks of its next 32 pieces at once, lane l the one of its
 * (l+1)-th, and takes piece i's from lane i % 32 by shuffle: one AES per
 * lane per 32 pieces. Moves without a cipher flag move as above. Cost per
 * block: the setup (a few microseconds, overlapping the first piece's
 * loads only if the scheduler finds them), then per 4 KiB piece 8 AES per
 * lane beside the data's bytes; the grid is at most what is resident at
 * once (67 KiB of shared memory per block). */
template <int V, bool LayoutEnc>
__global__ void __launch_bounds__(VC_CUDA_MOVE_THREADS)
move_xts_kernel(const vc_xts_kparam key, const struct vc_move *__restrict__ moves, uint4 *fp,
		uint32_t nitems, uint32_t shift, uint32_t subshift, volatile uint32_t *flag,
		uint32_t gen, uint32_t *counter)
{
	constexpr uint32_t PIECE = V * 32 * 16;
	extern __shared__ uint4 move_xts_dyn[];
	vc_xts_smem &s = *reinterpret_cast<vc_xts_smem *>(move_xts_dyn);
	const uint32_t lane = threadIdx.x & 31;
	const uint32_t mask = (1u << shift) - 1;
	/* A warp's first piece, when the cipher moves it, is loaded before
	 * the setup: the load's latency (a PCIe read when encrypting) hides
	 * under the setup's. have: a[] holds the current piece's words. */
	uint4 a[V];
	bool have = false;
	if (const uint32_t it0 = blockIdx.x * WARPS_PER_BLOCK + threadIdx.x / 32; it0 < nitems) {
		const uint64_t w = desc_word(moves, it0 >> shift, lane);
		const uint64_t src = __shfl_sync(FULL, w, 0);
		if ((uint32_t)__shfl_sync(FULL, w, 2) & VC_MOVE_CIPHER) {
			vc_xts_piece_ld<V, vc_stream_hint>(
				reinterpret_cast<const uint4 *>(src + (uint64_t)(it0 & mask) * PIECE + lane * 16u), a);
			have = true;
		}
	}
	vc_xts_setup<LayoutEnc>(s, key);

	const vc_xts_lane L = vc_xts_lane_make(s);
	const vc_xts_keys_smem ke(s.rk), kd(s.rkd);
	/* Rounds: in round r the block's warp w moves item (blockIdx.x + r *
	 * gridDim.x) * WARPS_PER_BLOCK + w (a grid stride). Per 32 rounds the
	 * block first encrypts their units' tweaks, one AES per unit, not per
	 * piece: thread r * WARPS_PER_BLOCK + w takes the item of round r and
	 * warp w if it is its unit's first piece (a unit's P = 2^subshift
	 * pieces are consecutive items of one round), into tws; the piece's own
	 * tweak is then the unit's times alpha^(its first block). tws holds
	 * key-derived values: zeroed before exit with the round keys. */
	__shared__ uint4 tws[32][WARPS_PER_BLOCK];
	static_assert(32 * WARPS_PER_BLOCK == VC_CUDA_MOVE_THREADS, "a tweak a thread");
	/* VC_MOVE_FP: round r's warp w leaves its sub-piece's lanes state in
	 * fps[r][w] and whether its move fingerprints in fpf[r][w]; a page's
	 * 2^shift sub-pieces are consecutive warps of one round (shift <= 3 for
	 * pages of at most 4 KiB: a subshift split V = 8 at most three times). */
	__shared__ unsigned long long fps[32][WARPS_PER_BLOCK][2];
	__shared__ uint8_t fpf[32][WARPS_PER_BLOCK];
	static_assert(WARPS_PER_BLOCK % 8 == 0, "a page's sub-pieces in one round of one block");
	const uint32_t w = threadIdx.x / 32, P = 1u << subshift;
	for (uint64_t r0 = 0; ((uint64_t)blockIdx.x + r0 * gridDim.x) * WARPS_PER_BLOCK < nitems; r0 += 32) {
		{
			const uint32_t r = threadIdx.x / WARPS_PER_BLOCK, wq = threadIdx.x % WARPS_PER_BLOCK;
			const uint64_t q = ((uint64_t)blockIdx.x + (r0 + r) * gridDim.x) * WARPS_PER_BLOCK + wq;
			if (q < nitems && (q & (P - 1)) == 0) {
				const struct vc_move *m = moves + (q >> shift);
				if (m->op & VC_MOVE_CIPHER)
					tws[r][wq] = vc_xts_tweak_encrypt<LayoutEnc>(
						L, s, m->tweak + ((q & mask) >> subshift));
			}
		}
		__syncthreads();
		for (uint32_t r = 0; r < 32; r++) {
			const uint64_t it = ((uint64_t)blockIdx.x + (r0 + r) * gridDim.x) * WARPS_PER_BLOCK + w;
			if (it >= nitems)
				break;
			const uint64_t dw = desc_word(moves, it >> shift, lane);
			const uint64_t src = __shfl_sync(FULL, dw, 0);
			const uint64_t dst = __shfl_sync(FULL, dw, 1);
			const uint32_t op = (uint32_t)__shfl_sync(FULL, dw, 2);
			const uint64_t off = (uint64_t)(it & mask) * PIECE + lane * 16u;
			const uint4 *ps = reinterpret_cast<const uint4 *>(src + off);
			uint4 *pd = reinterpret_cast<uint4 *>(dst + off);
			const bool enc = op & VC_MOVE_ENCRYPT, dec = !LayoutEnc && (op & VC_MOVE_DECRYPT);
			if ((enc || dec) && !have)
				vc_xts_piece_ld<V, vc_stream_hint>(ps, a);
			have = false;
			if (lane == 0)
				fpf[r][w] = (op & VC_MOVE_FP) != 0;
			/* VC_MOVE_FP: the plaintext's (a plain or encrypting
			 * COPY); encrypting, each word beside its AES (the
			 * tap), not in a pass before the first. */
			vc_fp_lanes_tap tap = { { 0, 0 }, lane + (uint32_t)(it & mask) * V * 32,
						(op & VC_MOVE_FP) != 0 };
			if (enc || dec) {
				const uint4 T = vc_xts_to_u4(vc_xts_mul_alpha_any(
					vc_xts_from_u4(tws[r][w & ~(P - 1)]), (uint32_t)(it & (P - 1)) * V * 32));
				if (enc)
					vc_xts_piece_run<V, LayoutEnc, true, vc_stream_hint>(L, ke, T, a, pd, tap);
				else
					vc_xts_piece_run<V, false, false, vc_stream_hint>(L, kd, T, a, pd);
			} else if (op & VC_MOVE_FP) {
				vc_piece_ld<V, vc_stream_hint>(ps, a);
				vc_piece_st<V, vc_stream_hint>(pd, a);
				tap.s = vc_fp_lanes_lane<V>(a, tap.base);
			} else {
				vc_move_piece<V, vc_stream_hint>(const_cast<uint4 *>(ps), pd,
								 (op & VC_MOVE_OP_MASK) != VC_MOVE_COPY);
			}
			if (op & VC_MOVE_FP) {
				const struct vc_fp_lanes f = vc_fp_lanes_warp_sum(tap.s);
				if (lane == 0) {
					fps[r][w][0] = f.s1;
					fps[r][w][1] = f.s2;
				}
			}
		}
		__syncthreads(); /* tws and fps are rewritten next */
		{
			/* The digests of this 32 rounds' pages, by the thread of
			 * each page's first sub-piece (before the next rounds'
			 * barrier, after which fps is rewritten). */
			const uint32_t r = threadIdx.x / WARPS_PER_BLOCK, wq = threadIdx.x % WARPS_PER_BLOCK;
			const uint64_t q = ((uint64_t)blockIdx.x + (r0 + r) * gridDim.x) * WARPS_PER_BLOCK + wq;
			if (q < nitems && (q & mask) == 0 && fpf[r][wq]) {
				struct vc_fp_lanes f = { 0, 0 };
				for (uint32_t p = 0; p <= mask; p++)
					vc_fp_lanes_add(&f, fps[r][wq + p][0], fps[r][wq + p][1]);
				__stcs(fp + (q >> shift), vc_fp_lanes_digest(f, (mask + 1) * PIECE));
			}
		}
	}
	tws[threadIdx.x / WARPS_PER_BLOCK][threadIdx.x % WARPS_PER_BLOCK] = make_uint4(0, 0, 0, 0);
	vc_xts_wipe(s);
	batch_done(flag, gen, counter);
}

template <int V, bool LayoutEnc>
cudaError_t launch_xts(const vc_xts_kparam &kp, const struct vc_move *moves, uint4 *fp, uint32_t ni,
		       uint32_t shift, uint32_t subshift, uint32_t max_blocks, volatile uint32_t *flag,
		       uint32_t gen, uint32_t *counter, cudaStream_t s)
{
	uint64_t blocks = ((uint64_t)ni + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
	if (blocks > max_blocks)
		blocks = max_blocks;
	move_xts_kernel<V, LayoutEnc><<<(unsigned)blocks, VC_CUDA_MOVE_THREADS, sizeof(vc_xts_smem), s>>>(
		kp, moves, fp, ni, shift, subshift, flag, gen, counter);
	return cudaGetLastError();
}

/* Every instance of the cipher kernel, for setting attributes. */
template <bool LayoutEnc>
cudaError_t xts_attr(int *per_sm)
{
	const int smem = (int)sizeof(vc_xts_smem);
	cudaError_t e = cudaSuccess;
	void (*k[])(const vc_xts_kparam, const struct vc_move *, uint4 *, uint32_t, uint32_t, uint32_t,
		    volatile uint32_t *, uint32_t, uint32_t *) = { move_xts_kernel<1, LayoutEnc>, move_xts_kernel<2, LayoutEnc>,
					       move_xts_kernel<4, LayoutEnc>, move_xts_kernel<8, LayoutEnc> };
	for (auto f : k) {
		if (e == cudaSuccess)
			e = cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
		int b = 0;
		if (e == cudaSuccess)
			e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, f, VC_CUDA_MOVE_THREADS, smem);
		if (e == cudaSuccess && (*per_sm == 0 || b < *per_sm))
			*per_sm = b;
	}
	return e;
}

} // namespace

extern "C" int vc_cuda_moves_xts_init(int *blocks_per_sm)
{
	*blocks_per_sm = 0;
	cudaError_t e = xts_attr<true>(blocks_per_sm);
	if (e == cudaSuccess)
		e = xts_attr<false>(blocks_per_sm);
	return (int)e;
}

extern "C" int vc_cuda_launch_moves_xts(const struct vc_xts_key *key, int layout_enc,
					const struct vc_move *moves_dev, uint64_t fp_dev, uint32_t n,
					uint32_t page_size, uint32_t max_blocks, volatile uint32_t *flag_dev,
					uint32_t gen, uint32_t *counter_dev, void *stream)
{
	uint32_t v, shift;
	if (!key || !batch_shape(n, page_size, max_blocks, &v, &shift))
		return (int)cudaErrorInvalidValue;
	/* A cipher unit (a page up to 4 KiB, else 4 KiB) is v x 512 bytes;
	 * a small batch splits units into smaller pieces, 2^subshift a unit,
	 * until it has a piece for every warp the grid holds (or pieces of
	 * 512 bytes): each warp then pays fewer AES per lane in a row, and
	 * every SM takes part (512 pages of 4 KiB: 4096 pieces of 512 bytes,
	 * not 512 pieces of 4 KiB on 64 blocks). */
	uint32_t subshift = 0;
	while (v > 1 && ((uint64_t)n << shift) < (uint64_t)max_blocks * WARPS_PER_BLOCK &&
	       ((uint64_t)n << (shift + 1)) <= (1ull << 31)) {
		v /= 2;
		shift++;
		subshift++;
	}
	const uint64_t items = (uint64_t)n << shift;
	vc_xts_kparam kp = vc_xts_kparam_of(key);
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	const uint32_t ni = (uint32_t)items;
	uint4 *fp = reinterpret_cast<uint4 *>(fp_dev);
	cudaError_t e;
#define VC_XTS_LAUNCH(V)                                                                          \
	(layout_enc ? launch_xts<V, true>(kp, moves_dev, fp, ni, shift, subshift, max_blocks, flag_dev, gen, counter_dev, s) \
		    : launch_xts<V, false>(kp, moves_dev, fp, ni, shift, subshift, max_blocks, flag_dev, gen, counter_dev, s))
	switch (v) {
	case 1:
		e = VC_XTS_LAUNCH(1);
		break;
	case 2:
		e = VC_XTS_LAUNCH(2);
		break;
	case 4:
		e = VC_XTS_LAUNCH(4);
		break;
	default:
		e = VC_XTS_LAUNCH(8);
		break;
	}
#undef VC_XTS_LAUNCH
	vc_secret_zero(&kp, sizeof kp);
	return (int)e;
}

extern "C" int vc_cuda_moves_blocks_per_sm(int *out)
{
	/* V = 8 holds the most registers, so it bounds the others. */
	return (int)cudaOccupancyMaxActiveBlocksPerMultiprocessor(out, move_kernel<MAX_V>,
								  VC_CUDA_MOVE_THREADS, 0);
}

extern "C" int vc_cuda_launch_moves(const struct vc_move *moves_dev, uint64_t fp_dev, uint32_t n,
				    uint32_t page_size, uint32_t max_blocks, volatile uint32_t *flag_dev,
				    uint32_t gen, uint32_t *counter_dev, void *stream)
{
	uint32_t v, shift;
	if (!batch_shape(n, page_size, max_blocks, &v, &shift))
		return (int)cudaErrorInvalidValue;
	uint4 *fp = reinterpret_cast<uint4 *>(fp_dev);
	const uint64_t items = (uint64_t)n << shift;
	uint64_t blocks = (items + WARPS_PER_BLOCK - 1) / WARPS_PER_BLOCK;
	if (blocks > max_blocks)
		blocks = max_blocks;

	const dim3 grid((unsigned)blocks), block(VC_CUDA_MOVE_THREADS);
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	const uint32_t ni = (uint32_t)items;
	switch (v) {
	case 1:
		move_kernel<1><<<grid, block, 0, s>>>(moves_dev, fp, ni, shift, flag_dev, gen, counter_dev);
		break;
	case 2:
		move_kernel<2><<<grid, block, 0, s>>>(moves_dev, fp, ni, shift, flag_dev, gen, counter_dev);
		break;
	case 4:
		move_kernel<4><<<grid, block, 0, s>>>(moves_dev, fp, ni, shift, flag_dev, gen, counter_dev);
		break;
	default:
		move_kernel<8><<<grid, block, 0, s>>>(moves_dev, fp, ni, shift, flag_dev, gen, counter_dev);
		break;
	}
	/* Launch errors only; the kernel's own faults surface at the event. */
	return (int)cudaGetLastError();
}

extern "C" const void *vc_cuda_move_module(void)
{
	return reinterpret_cast<const void *>(&move_kernel<1>);
}
