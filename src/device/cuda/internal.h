/* The CUDA backend's internals, shared by its files (device/cuda/):
 *
 *   cuda.c   the checks, memory, launched batches, open and close
 *   gc.c     cleaning jobs (kernels/gc.cu)
 *   queue.c  device-queue servers (kernels/server.cu)
 *   vmem.c   memory that shrinks and grows (virtual memory management)
 *   peer.c   several GPUs: peer access, the fault hook, the device count
 *   fp.c     block fingerprints (kernels/fp.cu)
 *   cmp.c    byte compares of block pairs (kernels/cmp.cu)
 *   preload.c every kernel loaded at open (lazy loading would deadlock)
 *
 * Every CUDA call goes through CU(), which records a message naming the
 * call and maps the result to our codes. The runtime keeps the current
 * device per thread and engine threads are arbitrary, so every entry point
 * first makes this device current (vc_cu_enter). */
#ifndef VC_CUDA_INTERNAL_H
#define VC_CUDA_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "device/cuda/kernels/gc.h"
#include "device/device.h"

/* Streams per device. More streams overlap more batches, which helps small
 * latency-bound batches, but every batch in flight then shares the link,
 * so each one, the oldest too, finishes later. Measured on an H200
 * (bench/transfer, kernel column, 6 batches in flight, 4 KiB pages),
 * against one stream: 2 streams 1.31x at 64 pages per batch, 1.08x at 512,
 * 1.02x at 4096; a stream per batch 1.4x at 64 but 0.85x at 512 to 1024. */
#ifndef VC_CUDA_STREAMS
#define VC_CUDA_STREAMS 2
#endif
/* Streams created. Plain batches use the first nstreams of them
 * (VC_CUDA_STREAMS), cipher batches all (xts_nstreams): a cipher block
 * spends 3-4 us on its setup before its first store, and with 2 streams
 * a batch's setup waited for the batch two before it to end, leaving the
 * link idle; measured on an H100 (bench/transfer, 6 batches of 512 pages
 * in flight, docs/BENCHMARKS.md), encrypted against plain went from
 * 0.83-0.91 to 0.92-1.01 with 4 or 8 streams, and one cipher block per
 * SM instead of two (XTS_BATCH_PER_SM), so that blocks of several
 * batches set up and drain side by side, helped GPU to host by 0.02-0.03.
 * VC_CUDA_NSTREAMS, VC_CUDA_XTS_NSTREAMS, VC_CUDA_XTS_PER_SM change them,
 * for measuring. */
#define NSTREAMS 8
#define XTS_BATCH_PER_SM 1

/* Cleaning-job state, set up by the first job. Scratch capacities only
 * grow, so a steady engine allocates nothing per job. */
struct cu_gc {
	bool ready;
	cudaStream_t stream;
	uint32_t gather_blocks, move_blocks; /* grid caps: SMs x resident blocks */
	uint32_t slot_cap;  /* source positions the scratch holds */
	uint32_t list_cap;  /* segment numbers (src + dst) the lists hold */
	void *slot_mem;     /* device: vc_cuda_gc_carve's arrays */
	void *sort_mem;     /* device: CUB's temporary storage */
	uint32_t *list_dev; /* device: the lists, filled by the gather */
	uint32_t *list_host; /* pinned, mapped: the lists staged by the host */
	uint32_t *list_host_dev;
	struct vc_cuda_gc_count *count; /* pinned, mapped: the gather's report */
	struct vc_cuda_gc_count *count_dev;
	struct vc_cuda_gc_scratch s;
};

struct cu_dev {
	struct vc_device dev;
	int ordinal;
	cudaStream_t streams[NSTREAMS];
	uint32_t nstreams;
	uint32_t next_stream; /* round robin; atomic: submitters run in parallel */
	uint32_t next_xstream; /* the same for cipher batches */
	uint32_t xts_nstreams;
	uint32_t mv_per_sm;  /* resident blocks per SM: the move kernel */
	uint32_t xts_per_sm; /* the same for the cipher move kernel */
	/* SMs that device-queue servers hold (one block per ring, a whole
	 * SM's registers each), while their queues exist: launched batches
	 * size their grids to the rest (cu_batch_submit). Atomic. */
	uint32_t dq_sms;
	uint64_t memcpy_min; /* fast-path threshold in bytes; UINT64_MAX = off */
	bool host_ptr_ok;    /* the GPU reaches host memory at the CPU's address */
	uint32_t sms;
	pthread_mutex_t gc_mu; /* one cleaning job at a time; guards gc */
	struct cu_gc gc;
	pthread_mutex_t mem_mu; /* guards mem */
	struct cu_mem *mem;     /* allocations whose start was moved to align them */
	pthread_mutex_t dq_mu;  /* guards dqs */
	struct cu_dq *dqs;      /* device queues, paused around allocations */
};

/* A device queue's CUDA state: the server kernel's stream. */
struct cu_dq {
	struct cu_dq *next;
	struct cu_dev *c;
	struct vc_dq *q;
	cudaStream_t stream;
};

#define CUD(d) ((struct cu_dev *)(d))

/* cuda.c */
int vc_cu_check(cudaError_t e, const char *call, const char *func);
#define CU(call) vc_cu_check((call), #call, __func__)
int vc_cu_enter(struct cu_dev *c);
/* Around calls that may wait for all device work: every queue's server
 * stops meanwhile. Nests within a thread. */
void vc_cu_quiesce(struct cu_dev *c);
void vc_cu_unquiesce(struct cu_dev *c);
int vc_cu_host_alloc(struct vc_device *d, size_t len, void **host, uint64_t *dev_addr);
void vc_cu_host_free(struct vc_device *d, void *host);

/* gc.c */
int vc_cu_gc_run(struct vc_device *d, struct vc_gc_job *job);
/* Frees the cleaning state (close). */
void vc_cu_gc_release(struct cu_dev *c);

/* vmem.c: memory that shrinks and grows (device.h, mem_reserve .. uuid). */
int vc_cu_vmem_granularity(int ordinal, uint64_t *out);
int vc_cu_mem_reserve(struct vc_device *d, size_t len, uint64_t *dev_addr);
void vc_cu_mem_unreserve(struct vc_device *d, uint64_t dev_addr, size_t len);
int vc_cu_mem_map(struct vc_device *d, uint64_t dev_addr, size_t len);
int vc_cu_mem_unmap(struct vc_device *d, uint64_t dev_addr, size_t len);
int vc_cu_mem_unmap_n(struct vc_device *d, const uint64_t *dev_addr, const uint64_t *len,
		      uint32_t n);
int vc_cu_mem_info(struct vc_device *d, uint64_t *free_bytes, uint64_t *total_bytes);
int vc_cu_uuid(struct vc_device *d, unsigned char out[16]);
/* Lets ordinal `peer` read and write every part of ordinal `owner`'s
 * chunked memory, mapped now or later (peer_enable, both ways). 0, or
 * the driver's error (some parts may have been granted: a retry grants
 * the rest). The caller has checked that the two reach each other. */
int vc_cu_vmem_grant(int owner, int peer);

/* peer.c: several GPUs (device.h's peer_enable and fault). */
int vc_cu_peer_enable(struct vc_device *d, struct vc_device *peer);
int vc_cu_fault(struct vc_device *d);

/* fp.c: fingerprints (device/fp.h). */
int vc_cu_fp_run(struct vc_device *d, const struct vc_fp_job *job);

/* cmp.c: byte compares (device/cmp.h). */
struct vc_cmp_job;
int vc_cu_cmp_start(struct vc_device *d, const struct vc_cmp_job *job);
int vc_cu_cmp_wait(struct vc_device *d);

/* preload.c: loads every kernel of the library into c's context, so that
 * no launch waits for a lazy load (which waits for running kernels).
 * 0; 1 when the driver cannot (before CUDA 12.4: best effort, the kernels
 * load at first launch); or -VC_EDEVICE. */
int vc_cu_preload(struct cu_dev *c);

/* queue.c */
int vc_cu_dq_init(struct vc_device *d, struct vc_dq *q);

#endif
