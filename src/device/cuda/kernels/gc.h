/* The log store's garbage collector on the GPU, as host code sees it
 * (device code in gc.cu; the job's semantics are struct vc_gc_job's, in
 * device/device.h).
 *
 * A job is two steps enqueued back to back on one stream, with no host
 * round trip between them: the caller states the live count and stamp
 * bounds (struct vc_gc_job), so CUB's sort gets its item count and bit
 * range from the host up front, and the device verifies the statement:
 *
 *   gather  one launch: reads key[] of every source slot and stamp[] of the
 *           live ones in place (mapped host memory, coalesced), keeps the
 *           live ones per chunk of VC_CUDA_GC_CHUNK source positions in
 *           source order, and its last block scans the chunk counts and
 *           reports the live count and the stamps' range (to the host,
 *           and as a go/no-go word in device memory);
 *   finish  compacts the chunks (stamps minus the stated minimum, 32-bit
 *           keys when the stated range fits), sorts them with
 *           cub::DeviceRadixSort (stable, only the bits of the range), then
 *           one launch moves the pages and writes key[], stamp[] and
 *           where[] of the moved pages, unless the gather said no-go.
 *
 * Functions return a cudaError_t as int, so that this header needs no CUDA
 * header and host code passes the result through its one checking macro.
 */
#ifndef VC_CUDA_GC_H
#define VC_CUDA_GC_H

#include <stddef.h>
#include <stdint.h>

#include "device/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Source positions per gather block (its threads take 4 each) and threads
 * per block of every gc kernel. */
#define VC_CUDA_GC_CHUNK 1024
#define VC_CUDA_GC_THREADS 256

/* A job as the kernels see it; trivially copyable, passed by value. Source
 * position p (0 <= p < nsrc * per_seg) is slot p % per_seg of segment
 * lists[p / per_seg]; `lists` holds src[0..nsrc) then dst[0..ndst) in
 * mapped pinned host memory, read by the gather only. */
struct vc_cuda_gc_job {
	uint64_t base;
	uint32_t *key;   /* device-visible key[] */
	uint64_t *stamp; /* device-visible stamp[] */
	uint32_t *where; /* device-visible where[], or null */
	const uint32_t *lists;
	uint32_t nsrc, ndst, per_seg, page_size, dst_first;
	uint32_t nowners, live; /* where[] entries; the stated live count */
	uint64_t smin, smax;    /* the stated stamp bounds */
};

/* Device scratch of a job, for up to `cap` source positions: owned by the
 * host side (one allocation, laid out by vc_cuda_gc_carve), passed to the
 * kernels by value. */
struct vc_cuda_gc_scratch {
	uint64_t *key_a, *key_b; /* cap each: chunked stamps, then sort buffers */
	uint32_t *val_a, *val_b; /* cap each: source positions */
	uint32_t *owner;         /* cap: key[] of source position p */
	uint32_t *ccount, *coff; /* per chunk: live count, exclusive prefix */
	uint64_t *cmin, *cmax;   /* per chunk: live stamp range */
	uint32_t *done;          /* gather blocks finished; 0 between launches */
	uint32_t *go;            /* 1: the gather confirmed the stated count and bounds */
	uint32_t *src, *dst;     /* device copies of the lists (filled by the gather) */
	void *sort_tmp;          /* CUB's temporary storage */
	size_t sort_bytes;
};

/* What the gather reports, in mapped host memory: the live count and the
 * live stamps' range (min > max when none is live). The job went ahead
 * iff they match the statement (go). */
struct vc_cuda_gc_count {
	uint32_t live;
	uint32_t go;
	uint64_t min, max;
};

/* Bytes of the per-position and per-chunk arrays for `cap` positions, and
 * their layout in `mem` (256-byte aligned parts). src, dst and the sort
 * storage are the caller's to set. */
size_t vc_cuda_gc_slot_bytes(uint32_t cap);
void vc_cuda_gc_carve(void *mem, uint32_t cap, struct vc_cuda_gc_scratch *s);

/* CUB's temporary storage for sorting up to `cap` items, 32- or 64-bit keys. */
int vc_cuda_gc_sort_bytes(uint32_t cap, size_t *bytes);

/* Resident blocks per multiprocessor of the gather and move kernels; the
 * host caps their grids at SMs times these. */
int vc_cuda_gc_blocks_per_sm(int *gather, int *move);

/* Enqueues the gather on `stream`. *count (device-visible address of
 * mapped host memory) is final once the stream has synchronized. Requires
 * 1 <= nsrc * per_seg <= cap of s, and *s->done == 0. */
int vc_cuda_gc_gather(const struct vc_cuda_gc_job *j, const struct vc_cuda_gc_scratch *s,
		      struct vc_cuda_gc_count *count, uint32_t max_blocks, void *stream);

/* Enqueues the rest of the job right behind the gather, from the job's
 * statement (live >= 1; ndst segments hold dst_first + live): compaction,
 * sort, moves. The moves happen only if the gather confirmed it. */
int vc_cuda_gc_finish(const struct vc_cuda_gc_job *j, const struct vc_cuda_gc_scratch *s,
		      uint32_t gather_blocks, uint32_t move_blocks, void *stream);

#ifdef __cplusplus
}
#endif
#endif
