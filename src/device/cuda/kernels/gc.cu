/* The log store's garbage collector: gather, compaction, sort and moves of
 * one cleaning job (host view and the job's two steps in gc.h).
 *
 * gather: block b takes chunks of CHUNK source positions (grid-stride).
 * It first loads the chunk's few segment numbers into shared memory (one
 * PCIe read per segment, not per slot); each thread then issues its 4 key
 * loads, then the stamp loads of its live slots, all before using any, so
 * a thread has its PCIe round trips in flight together. Consecutive
 * threads read consecutive slots of a segment: a warp's 32 keys are one
 * 128-byte request. A live slot's chunk rank comes from warp ballots and a
 * one-warp scan of the 32 (iteration, warp) counts, so within a chunk the
 * live slots keep source order; the chunk's count and stamp range go to
 * per-chunk arrays. The last block to finish (a fenced atomic count, as in
 * move.cu) scans the chunk counts into offsets, compares the live count
 * and range with the job's statement and writes the verdict (go) to device
 * memory and, with the count, to the host. The gather also copies the
 * segment lists from mapped memory to device memory for the later kernels.
 *
 * finish: enqueued right behind the gather, sized by the statement (the
 * host does not wait for the gather). The compaction writes chunk c's
 * live slots at offset coff[c] as (stamp - stated min, position): source
 * order, so CUB's stable LSD radix sort,
 * run on bits [0, bit length of max - min) only, yields exactly the job's
 * order (stamp, then source position). With 8-bit digits a job whose
 * stamps span less than 2^16 sorts in 2 passes; ranges under 2^32 use
 * 32-bit keys (a third less traffic per pass). Up to 4864 items CUB sorts in
 * one single-tile launch, above that in onesweep passes (2 launches and 3
 * memsets of setup, then a memset and a launch per digit). A range of 0 or a
 * single item needs no sort.
 *
 * moves: one launch, nothing unless go, two kinds of warp-sized work item,
 * one meta item ahead of its 32 ranks' pieces:
 *   meta   32 consecutive ranks: key[] and stamp[] of their destination
 *          slots (consecutive within a segment: 128 + 256-byte writes) and
 *          where[] of their owners (4 B each, scattered; posted writes
 *          that overlap the pieces' device-memory traffic);
 *   piece  min(page_size, 4 KiB) of one page: the move kernel's style (one
 *          warp, 16-byte words, all V loads of the piece before its
 *          stores), so pages of 512 B .. 2 MiB all spread over the GPU.
 * The page's source comes from the sorted positions and the lists in
 * device memory; the owner from owner[] (device memory), not key[] over
 * PCIe. Source keys are not touched: the caller releases the segments.
 *
 * Cost per job: key[] read once over PCIe (4 B per source slot) and stamp[]
 * once per live slot (8 B); 12 B of PCIe writes per moved page, 16 with
 * where[]; the pages once each way in device memory; the sort's passes
 * over 8 or 12 bytes per live page. Host: 4 to 5 launches and memsets plus
 * 2 per sort pass, enqueued while the gather runs; one synchronization.
 */
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include "device/cuda/kernels/gc.h"
#include "device/cuda/kernels/modules.h"

namespace {

constexpr uint32_t CHUNK = VC_CUDA_GC_CHUNK;
constexpr uint32_t THREADS = VC_CUDA_GC_THREADS;
constexpr uint32_t WARPS = THREADS / 32;
constexpr uint32_t PER_T = CHUNK / THREADS; /* positions per gather thread */
constexpr uint32_t MAX_V = 8;               /* uint4 per lane per piece: 4 KiB */
constexpr unsigned FULL = 0xffffffffu;
static_assert(PER_T * WARPS == 32, "one warp scans the (iteration, warp) counts");

__device__ __forceinline__ uint64_t umin64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

__device__ __forceinline__ uint64_t umax64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

__device__ __forceinline__ uint64_t warp_min(uint64_t v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v = umin64(v, __shfl_xor_sync(FULL, v, o));
	return v;
}

__device__ __forceinline__ uint64_t warp_max(uint64_t v)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v = umax64(v, __shfl_xor_sync(FULL, v, o));
	return v;
}

/* Inclusive prefix sum over the warp. */
__device__ __forceinline__ uint32_t warp_scan(uint32_t v, uint32_t lane)
{
#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		uint32_t y = __shfl_up_sync(FULL, v, o);
		if (lane >= (uint32_t)o)
			v += y;
	}
	return v;
}

__global__ void __launch_bounds__(THREADS)
gather_kernel(const struct vc_cuda_gc_job j, const struct vc_cuda_gc_scratch s,
	      struct vc_cuda_gc_count *out)
{
	__shared__ uint32_t seg[CHUNK + 1]; /* segment numbers of the chunk */
	__shared__ uint32_t part[32];      /* live per (iteration, warp), then prefixes */
	__shared__ uint64_t wmin[WARPS], wmax[WARPS];
	__shared__ uint32_t is_last;
	const uint32_t t = threadIdx.x, lane = t & 31, w = t / 32;
	const uint32_t per = j.per_seg;
	const uint32_t S = j.nsrc * per; /* <= VC_GC_MAX_SLOTS (vc_gc_check) */
	const uint32_t nchunks = (S + CHUNK - 1) / CHUNK;

	for (uint32_t i = blockIdx.x * THREADS + t; i < j.nsrc + j.ndst; i += gridDim.x * THREADS) {
		uint32_t v = j.lists[i];
		if (i < j.nsrc)
			s.src[i] = v;
		else
			s.dst[i - j.nsrc] = v;
	}

	for (uint32_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
		const uint32_t p0 = c * CHUNK;
		const uint32_t pn = S - p0 < CHUNK ? S - p0 : CHUNK;
		const uint32_t i0 = p0 / per, i1 = (p0 + pn - 1) / per;
		for (uint32_t i = i0 + t; i <= i1; i += THREADS)
			seg[i - i0] = j.lists[i];
		__syncthreads();

		uint32_t k[PER_T];
		uint64_t g[PER_T], st[PER_T];
#pragma unroll
		for (uint32_t x = 0; x < PER_T; x++) {
			const uint32_t q = x * THREADS + t;
			k[x] = VC_GC_DEAD;
			g[x] = 0;
			if (q < pn) {
				const uint32_t p = p0 + q, i = p / per;
				g[x] = (uint64_t)seg[i - i0] * per + (p - i * per);
				k[x] = j.key[g[x]];
			}
		}
#pragma unroll
		for (uint32_t x = 0; x < PER_T; x++)
			st[x] = k[x] != VC_GC_DEAD ? j.stamp[g[x]] : 0;

		uint32_t bal[PER_T];
		uint64_t lo = ~0ull, hi = 0;
#pragma unroll
		for (uint32_t x = 0; x < PER_T; x++) {
			const bool live = k[x] != VC_GC_DEAD;
			bal[x] = __ballot_sync(FULL, live);
			if (lane == 0)
				part[x * WARPS + w] = __popc(bal[x]);
			if (live) {
				lo = umin64(lo, st[x]);
				hi = umax64(hi, st[x]);
			}
			const uint32_t q = x * THREADS + t;
			if (q < pn)
				s.owner[p0 + q] = k[x];
		}
		lo = warp_min(lo);
		hi = warp_max(hi);
		if (lane == 0) {
			wmin[w] = lo;
			wmax[w] = hi;
		}
		__syncthreads();
		if (w == 0) {
			const uint32_t v = part[lane], incl = warp_scan(v, lane);
			part[lane] = incl - v;
			if (lane == 31)
				s.ccount[c] = incl;
			lo = lane < WARPS ? wmin[lane] : ~0ull;
			hi = lane < WARPS ? wmax[lane] : 0;
			lo = warp_min(lo);
			hi = warp_max(hi);
			if (lane == 0) {
				s.cmin[c] = lo;
				s.cmax[c] = hi;
			}
		}
		__syncthreads();
		const uint32_t below = (1u << lane) - 1;
#pragma unroll
		for (uint32_t x = 0; x < PER_T; x++) {
			if ((bal[x] >> lane) & 1) {
				const uint32_t r = part[x * WARPS + w] + __popc(bal[x] & below);
				s.key_a[p0 + r] = st[x];
				s.val_a[p0 + r] = p0 + x * THREADS + t;
			}
		}
		__syncthreads(); /* seg, part and wmin are reused by the next chunk */
	}

	/* Every block's chunk results, then its count: the last block sees all. */
	if (t == 0) {
		__threadfence();
		is_last = atomicAdd(s.done, 1u) == gridDim.x - 1;
	}
	__syncthreads();
	if (!is_last)
		return;
	__threadfence();
	uint32_t carry = 0;
	uint64_t lo = ~0ull, hi = 0;
	for (uint32_t b = 0; b < nchunks; b += THREADS) {
		const uint32_t c = b + t;
		uint32_t v = 0;
		if (c < nchunks) {
			v = __ldcg(s.ccount + c);
			lo = umin64(lo, __ldcg(s.cmin + c));
			hi = umax64(hi, __ldcg(s.cmax + c));
		}
		const uint32_t incl = warp_scan(v, lane);
		if (lane == 31)
			part[w] = incl;
		__syncthreads();
		uint32_t before = 0, total = 0;
#pragma unroll
		for (uint32_t u = 0; u < WARPS; u++) {
			before += u < w ? part[u] : 0;
			total += part[u];
		}
		if (c < nchunks)
			s.coff[c] = carry + before + incl - v;
		carry += total;
		__syncthreads();
	}
	lo = warp_min(lo);
	hi = warp_max(hi);
	if (lane == 0) {
		wmin[w] = lo;
		wmax[w] = hi;
	}
	__syncthreads();
	if (t == 0) {
		for (uint32_t u = 1; u < WARPS; u++) {
			lo = umin64(lo, wmin[u]);
			hi = umax64(hi, wmax[u]);
		}
		const uint32_t go = carry == j.live && (carry == 0 || (lo >= j.smin && hi <= j.smax));
		*s.go = go; /* read by the move kernel (stream order) */
		out->live = carry;
		out->go = go;
		out->min = lo;
		out->max = hi;
		*s.done = 0; /* seen by the next launch (stream order) */
	}
}

/* Chunk c's live slots to [coff[c], coff[c] + ccount[c]) as (stamp - min,
 * position). Device memory only; coalesced. */
template <typename K>
__global__ void __launch_bounds__(THREADS)
compact_kernel(const struct vc_cuda_gc_scratch s, uint32_t nchunks, uint64_t min, K *keys,
	       uint32_t *vals)
{
	for (uint32_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
		const uint32_t cnt = s.ccount[c], off = s.coff[c], p0 = c * CHUNK;
		for (uint32_t q = threadIdx.x; q < cnt; q += THREADS) {
			keys[off + q] = (K)(s.key_a[p0 + q] - min);
			vals[off + q] = s.val_a[p0 + q];
		}
	}
}

/* Global slot of destination rank r: position dst_first + r of the dst list. */
__device__ __forceinline__ uint64_t dst_slot(const struct vc_cuda_gc_job &j,
					     const struct vc_cuda_gc_scratch &s, uint32_t r)
{
	const uint32_t q = j.dst_first + r, i = q / j.per_seg;
	return (uint64_t)s.dst[i] * j.per_seg + (q - i * j.per_seg);
}

__device__ __forceinline__ uint64_t src_slot(const struct vc_cuda_gc_job &j,
					     const struct vc_cuda_gc_scratch &s, uint32_t p)
{
	const uint32_t i = p / j.per_seg;
	return (uint64_t)s.src[i] * j.per_seg + (p - i * j.per_seg);
}

/* One piece of V*512 bytes; s and t include this lane's offset. Streaming
 * hints: the data is touched once. */
template <int V>
__device__ __forceinline__ void copy_piece(const uint4 *src, uint4 *dst)
{
	uint4 a[V];
#pragma unroll
	for (int k = 0; k < V; k++)
		a[k] = __ldcs(src + 32 * k);
#pragma unroll
	for (int k = 0; k < V; k++)
		__stcs(dst + 32 * k, a[k]);
}

/* Items in groups of G = 1 + (32 << shift), one group per 32 ranks: the
 * group's meta item, then its pieces (a short last group has idle ones);
 * nitems = groups * G. Interleaved, the table writes over PCIe spread over
 * the whole copy instead of queueing ahead of it. Grid-stride, one warp
 * per item. */
template <int V>
__global__ void __launch_bounds__(THREADS)
move_kernel(const struct vc_cuda_gc_job j, const struct vc_cuda_gc_scratch s, const void *keys,
	    uint32_t key64, const uint32_t *__restrict__ vals, uint32_t n, uint64_t min,
	    uint32_t nitems, uint32_t shift)
{
	constexpr uint32_t PIECE = V * 32 * 16;
	const uint32_t lane = threadIdx.x & 31;
	const uint32_t nwarps = gridDim.x * WARPS;
	const uint32_t mask = (1u << shift) - 1;
	const uint32_t G = 1 + (32u << shift);
	if (!*s.go)
		return; /* the statement was wrong: nothing moves */

	for (uint32_t it = blockIdx.x * WARPS + threadIdx.x / 32; it < nitems; it += nwarps) {
		const uint32_t grp = it / G, k = it - grp * G;
		if (k == 0) {
			const uint32_t r = grp * 32 + lane;
			if (r < n) {
				const uint64_t key = key64 ? static_cast<const uint64_t *>(keys)[r]
							   : static_cast<const uint32_t *>(keys)[r];
				const uint64_t g = dst_slot(j, s, r);
				const uint32_t o = s.owner[vals[r]];
				j.key[g] = o;
				j.stamp[g] = min + key;
				if (j.where && o < j.nowners)
					j.where[o] = (uint32_t)g;
			}
		} else {
			const uint32_t x = (grp << (5 + shift)) + (k - 1), r = x >> shift;
			if (r >= n)
				continue;
			const uint32_t p = vals[r]; /* one address: a broadcast */
			const uint64_t off = (uint64_t)(x & mask) * PIECE + lane * 16u;
			const uint64_t from = j.base + src_slot(j, s, p) * j.page_size + off;
			const uint64_t to = j.base + dst_slot(j, s, r) * j.page_size + off;
			copy_piece<V>(reinterpret_cast<const uint4 *>(from), reinterpret_cast<uint4 *>(to));
		}
	}
}

uint32_t grid_of(uint64_t items_per_block_units, uint32_t max_blocks)
{
	uint64_t b = items_per_block_units;
	if (b > max_blocks)
		b = max_blocks;
	return b ? (uint32_t)b : 1;
}

int bit_length(uint64_t x)
{
	return x ? 64 - __builtin_clzll(x) : 0;
}

/* Compaction and sort with keys of type K; *keys_out and *vals_out: where
 * the ordered items are. */
template <typename K>
cudaError_t order(const struct vc_cuda_gc_scratch &s, uint32_t nchunks, uint32_t n, uint64_t min,
		  uint64_t range, uint32_t blocks, cudaStream_t st, const void **keys_out,
		  const uint32_t **vals_out)
{
	K *kb = reinterpret_cast<K *>(s.key_b), *ka = reinterpret_cast<K *>(s.key_a);
	compact_kernel<K><<<grid_of(nchunks, blocks), THREADS, 0, st>>>(s, nchunks, min, kb, s.val_b);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		return e;
	cub::DoubleBuffer<K> dk(kb, ka);
	cub::DoubleBuffer<uint32_t> dv(s.val_b, s.val_a);
	if (n > 1 && range > 0) {
		size_t bytes = s.sort_bytes;
		e = cub::DeviceRadixSort::SortPairs(s.sort_tmp, bytes, dk, dv, n, 0, bit_length(range),
						    st);
		if (e != cudaSuccess)
			return e;
	}
	*keys_out = dk.Current();
	*vals_out = dv.Current();
	return cudaSuccess;
}

template <typename K>
cudaError_t sort_bytes(uint32_t cap, size_t *bytes)
{
	cub::DoubleBuffer<K> dk(nullptr, nullptr);
	cub::DoubleBuffer<uint32_t> dv(nullptr, nullptr);
	*bytes = 0;
	return cub::DeviceRadixSort::SortPairs(nullptr, *bytes, dk, dv, cap, 0, (int)(8 * sizeof(K)),
					       (cudaStream_t)0);
}

} // namespace

/* Per-position arrays: key_a, key_b (8 B), val_a, val_b, owner (4 B); per
 * chunk: ccount, coff (4 B), cmin, cmax (8 B); then the done and go words. */
static size_t part_bytes(size_t n)
{
	return (n + 255) & ~(size_t)255;
}

extern "C" size_t vc_cuda_gc_slot_bytes(uint32_t cap)
{
	const size_t nch = (cap + CHUNK - 1) / CHUNK;
	return 2 * part_bytes(8ull * cap) + 3 * part_bytes(4ull * cap) + 2 * part_bytes(4 * nch) +
	       2 * part_bytes(8 * nch) + 2 * part_bytes(4);
}

extern "C" void vc_cuda_gc_carve(void *mem, uint32_t cap, struct vc_cuda_gc_scratch *s)
{
	const size_t nch = (cap + CHUNK - 1) / CHUNK;
	char *p = static_cast<char *>(mem);
	s->key_a = reinterpret_cast<uint64_t *>(p), p += part_bytes(8ull * cap);
	s->key_b = reinterpret_cast<uint64_t *>(p), p += part_bytes(8ull * cap);
	s->val_a = reinterpret_cast<uint32_t *>(p), p += part_bytes(4ull * cap);
	s->val_b = reinterpret_cast<uint32_t *>(p), p += part_bytes(4ull * cap);
	s->owner = reinterpret_cast<uint32_t *>(p), p += part_bytes(4ull * cap);
	s->ccount = reinterpret_cast<uint32_t *>(p), p += part_bytes(4 * nch);
	s->coff = reinterpret_cast<uint32_t *>(p), p += part_bytes(4 * nch);
	s->cmin = reinterpret_cast<uint64_t *>(p), p += part_bytes(8 * nch);
	s->cmax = reinterpret_cast<uint64_t *>(p), p += part_bytes(8 * nch);
	s->done = reinterpret_cast<uint32_t *>(p), p += part_bytes(4);
	s->go = reinterpret_cast<uint32_t *>(p);
}

extern "C" int vc_cuda_gc_sort_bytes(uint32_t cap, size_t *bytes)
{
	size_t b32 = 0, b64 = 0;
	cudaError_t e = sort_bytes<uint32_t>(cap, &b32);
	if (e == cudaSuccess)
		e = sort_bytes<uint64_t>(cap, &b64);
	*bytes = b32 > b64 ? b32 : b64;
	return (int)e;
}

extern "C" int vc_cuda_gc_blocks_per_sm(int *gather, int *move)
{
	cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(gather, gather_kernel, THREADS, 0);
	if (e == cudaSuccess) /* V = 8 holds the most registers, so it bounds the others */
		e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(move, move_kernel<MAX_V>, THREADS, 0);
	return (int)e;
}

extern "C" int vc_cuda_gc_gather(const struct vc_cuda_gc_job *j, const struct vc_cuda_gc_scratch *s,
				 struct vc_cuda_gc_count *count, uint32_t max_blocks, void *stream)
{
	const uint64_t S = (uint64_t)j->nsrc * j->per_seg;
	if (S == 0 || S > VC_GC_MAX_SLOTS || max_blocks == 0)
		return (int)cudaErrorInvalidValue;
	const uint32_t nchunks = (uint32_t)((S + CHUNK - 1) / CHUNK);
	gather_kernel<<<grid_of(nchunks, max_blocks), THREADS, 0, static_cast<cudaStream_t>(stream)>>>(
		*j, *s, count);
	return (int)cudaGetLastError();
}

extern "C" int vc_cuda_gc_finish(const struct vc_cuda_gc_job *j, const struct vc_cuda_gc_scratch *s,
				 uint32_t gather_blocks, uint32_t move_blocks, void *stream)
{
	const uint32_t ps = j->page_size, n = j->live;
	const uint64_t S = (uint64_t)j->nsrc * j->per_seg;
	if (n == 0 || n > S || S > VC_GC_MAX_SLOTS || j->smin > j->smax || ps < 512 ||
	    ps > (2u << 20) || (ps & (ps - 1)) != 0 || gather_blocks == 0 || move_blocks == 0)
		return (int)cudaErrorInvalidValue;
	cudaStream_t st = static_cast<cudaStream_t>(stream);
	const uint32_t nchunks = (uint32_t)((S + CHUNK - 1) / CHUNK);
	const uint64_t range = j->smax - j->smin;
	const void *keys;
	const uint32_t *vals;
	const uint32_t key64 = range > UINT32_MAX;
	cudaError_t e = key64 ? order<uint64_t>(*s, nchunks, n, j->smin, range, gather_blocks, st,
						&keys, &vals)
			      : order<uint32_t>(*s, nchunks, n, j->smin, range, gather_blocks, st,
						&keys, &vals);
	if (e != cudaSuccess)
		return (int)e;

	/* Pages up to 4 KiB: one piece of V = page_size/512 words per lane.
	 * Larger: 2^shift pieces of 4 KiB. vc_gc_check bounds the item count. */
	uint32_t v = MAX_V, shift = 0;
	if (ps < 4096)
		v = ps / 512;
	else
		shift = (uint32_t)__builtin_ctz(ps / 4096);
	const uint64_t groups = (n + 31) / 32;
	const uint64_t items = groups * (1 + (32ull << shift));
	if (items > (1ull << 31) + (1ull << 28))
		return (int)cudaErrorInvalidValue;
	const dim3 grid(grid_of((items + WARPS - 1) / WARPS, move_blocks)), block(THREADS);
	const uint32_t ni = (uint32_t)items;
	switch (v) {
	case 1:
		move_kernel<1><<<grid, block, 0, st>>>(*j, *s, keys, key64, vals, n, j->smin,
						      ni, shift);
		break;
	case 2:
		move_kernel<2><<<grid, block, 0, st>>>(*j, *s, keys, key64, vals, n, j->smin,
						      ni, shift);
		break;
	case 4:
		move_kernel<4><<<grid, block, 0, st>>>(*j, *s, keys, key64, vals, n, j->smin,
						      ni, shift);
		break;
	default:
		move_kernel<8><<<grid, block, 0, st>>>(*j, *s, keys, key64, vals, n, j->smin,
						      ni, shift);
		break;
	}
	return (int)cudaGetLastError();
}

extern "C" const void *vc_cuda_gc_module(void)
{
	return reinterpret_cast<const void *>(&gather_kernel);
}
