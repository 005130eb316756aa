/* CUDA backend: the device interface over the CUDA runtime.
 *
 * A batch is one launch of the move kernel (kernels/move.cu), or one
 * cudaMemcpyAsync when it is a single contiguous run, followed by an event,
 * on one of the device's nstreams non-blocking streams. The kernel's last
 * block writes the batch's generation into a flag in mapped host memory, so
 * a waiter usually learns of completion by reading host memory (tens of
 * nanoseconds) instead of a driver call; the event is the fallback for long
 * batches, the signal of the memcpy path, and the authority on errors.
 *
 * Streams: batches in flight touch disjoint pages (device.h), so they need
 * no order among themselves. Submissions alternate over nstreams streams, so
 * the next batch's blocks start while the previous one drains, instead of
 * each launch paying its ramp-up and tail in turn; completion stays close
 * to FIFO, which keeps the oldest batch (the one waited on first) early.
 * Batches may complete out of submission order (emu completes them in
 * order).
 *
 * Cleaning jobs are in gc.c, device-queue servers in queue.c, peer access
 * and the fault hook (several GPUs) in peer.c; the state they share with
 * this file, and the CU() check, in internal.h.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "base/clock.h"
#include "base/env.h"
#include "base/error.h"
#include "base/atomics.h"
#include "device/cuda/internal.h"
#include "device/cuda/kernels/move.h"
#include "device/device.h"
#include "device/queue.h"
#include "vramcache.h"

/* Waiting has three phases, so that a waiter sees completion within about
 * a microsecond for any batch of ordinary length, and sleeps only when the
 * wait is long:
 *   spin   pause between polls, up to SPIN_NS: covers a launch plus a few
 *          MiB over PCIe, the batches a latency-bound caller waits on;
 *   yield  sched_yield between polls, up to YIELD_NS: a full batch of 4096
 *          pages with a few more in flight ahead of it, so the pipelined
 *          throughput path never sleeps; the core is offered to others;
 *   block  cudaEventSynchronize on a blocking-sync event: the driver sleeps
 *          until its interrupt.
 * Measured on an H200 (bench/transfer, kernel column): sleeping right after
 * the spin instead of yielding cost 7% at 4096 pages per batch, 10% at
 * 512 and 15-30% at 64-128 (the wake-up leaves the GPU idle).
 * A poll is one load of the host flag, or cudaEventQuery for a batch that
 * has no flag (the memcpy path). */
#define SPIN_NS 100000ull
#define YIELD_NS 5000000ull

/* Contiguous fast path: a batch of COPY moves only, whose pages form one
 * run on both sides (a single page always does), of at least this many
 * bytes, goes out as one cudaMemcpyAsync (a copy-engine DMA) instead of a
 * kernel. Measured on an H200 (bench/transfer, "contiguous runs"): over
 * PCIe the copy engine wins at every size, 1.3-1.6x for one 4 KiB page (no
 * launch, no descriptor round trip) and 1.06-1.09x at 16 MiB (the engine
 * makes larger PCIe requests than SM loads do). Device to device the kernel
 * wins from 1024 pages (up to 1.8x), but runs inside the GPU tier are rare
 * and telling device memory from host memory costs a lookup, so: always.
 * The variable VC_CUDA_MEMCPY_MIN overrides it at open (bytes; "off"
 * disables the path), for measuring. */
#define MEMCPY_MIN_DEFAULT 0


/* How the last submission of a batch signals completion. */
enum { SIG_NONE, SIG_FLAG, SIG_EVENT };

/* A waiter may read gen, sig and submit_err while the batcher's next use
 * of the batch rewrites them (a waiter of an earlier generation still
 * polling): they are read and written atomically, and a waiter that sees
 * a newer generation's fields at worst waits for that one too. */
struct cu_batch {
	cudaStream_t stream; /* of the last submission */
	cudaEvent_t ev; /* recorded after the batch's work; errors surface here */
	volatile uint32_t *flag; /* mapped host word; the kernel writes gen here */
	uint32_t *flag_dev;
	uint32_t *counter; /* device word: blocks done; 0 between launches */
	uint32_t gen;      /* generation of the last kernel launch */
	int sig;           /* SIG_* of the last submission */
	int submit_err;    /* nonzero: the last submission failed to start */
	/* Device address of b->moves when b->moves_dev is not filled in. */
	const struct vc_move *moves_host;
	const struct vc_move *moves_dev;
	/* The copy-engine path (vc_dbatch.dma): a page of device memory that
	 * SWAPs pass through, and the runs of the submission being built
	 * (host memory, grown by submit, used under the batch's owner). */
	void *scratch;
	void **dsts;
	const void **srcs;
	size_t *sizes;
	uint32_t runs_cap;
};

static bool absent_error(cudaError_t e)
{
	switch (e) {
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
	case cudaErrorStubLibrary:
	case cudaErrorDevicesUnavailable:
	case cudaErrorSystemNotReady:
	case cudaErrorSystemDriverMismatch:
	case cudaErrorCompatNotSupportedOnDevice:
		return true;
	default:
		return false;
	}
}

/* The one check for CUDA results. Out of memory maps to -ENOMEM, as emu
 * reports it; "no usable device" to -VC_ENODEVICE; the rest to -VC_EDEVICE.
 * cudaGetLastError clears the runtime's non-sticky error so that it is not
 * reported again by an unrelated call; a sticky one (a kernel fault) stays
 * and every later call reports it. */
int vc_cu_check(cudaError_t e, const char *call, const char *func)
{
	if (e == cudaSuccess)
		return 0;
	(void)cudaGetLastError();
	int code = -VC_EDEVICE;
	if (e == cudaErrorMemoryAllocation)
		code = -ENOMEM;
	else if (absent_error(e))
		code = -VC_ENODEVICE;
	return vc_err(code, "cuda: %s: %s: %s (%s)", func, call, cudaGetErrorString(e),
		      cudaGetErrorName(e));
}

int vc_cu_enter(struct cu_dev *c)
{
	return CU(cudaSetDevice(c->ordinal));
}

/* Allocating and freeing may wait for all device work, which a running
 * queue server never finishes: every queue's server stops around them
 * (vc_dq_pause; producers meanwhile wait for their slots). Lock order:
 * dq_mu, then a queue's mu. */
static _Thread_local int quiesced; /* nesting depth in this thread */

void vc_cu_quiesce(struct cu_dev *c)
{
	if (quiesced++)
		return;
	pthread_mutex_lock(&c->dq_mu);
	for (struct cu_dq *d = c->dqs; d; d = d->next)
		vc_dq_pause(d->q);
}

void vc_cu_unquiesce(struct cu_dev *c)
{
	if (--quiesced)
		return;
	for (struct cu_dq *d = c->dqs; d; d = d->next)
		vc_dq_resume(d->q);
	pthread_mutex_unlock(&c->dq_mu);
}

/* --- memory ------------------------------------------------------------- */

int vc_cu_host_alloc(struct vc_device *d, size_t len, void **host, uint64_t *dev_addr)
{
	struct cu_dev *c = CUD(d);
	int r = vc_cu_enter(c);
	if (r < 0)
		return r;
	len = len ? (len + 4095) & ~(size_t)4095 : 4096;
	void *p = NULL, *dp = NULL;
	/* Pinned and page aligned; Portable: usable from any context. */
	vc_cu_quiesce(c);
	r = CU(cudaHostAlloc(&p, len, cudaHostAllocMapped | cudaHostAllocPortable));
	vc_cu_unquiesce(c);
	if (r < 0)
		return r;
	r = CU(cudaHostGetDevicePointer(&dp, p, 0));
	if (r < 0) {
		if (!c->host_ptr_ok) {
			(void)CU(cudaFreeHost(p));
			return r;
		}
		vc_err_clear();
		dp = p;
	}
	*host = p;
	*dev_addr = (uint64_t)(uintptr_t)dp;
	return 0;
}

void vc_cu_host_free(struct vc_device *d, void *host)
{
	struct cu_dev *c = CUD(d);
	if (!host || vc_cu_enter(c) < 0)
		return;
	vc_cu_quiesce(c);
	(void)CU(cudaFreeHost(host));
	vc_cu_unquiesce(c);
}

static int cu_host_register(struct vc_device *d, void *host, size_t len, uint64_t *dev_addr)
{
	struct cu_dev *c = CUD(d);
	int r = vc_cu_enter(c), ro = 0;
	if (r < 0)
		return r;
	r = CU(cudaDeviceGetAttribute(&ro, cudaDevAttrHostRegisterReadOnlySupported, c->ordinal));
	if (r < 0)
		return r;
	if (!ro)
		return vc_err(-ENOTSUP, "cuda: the device cannot register read-only host memory");
	void *dp = NULL;
	vc_cu_quiesce(c);
	r = CU(cudaHostRegister(host, len, cudaHostRegisterMapped | cudaHostRegisterPortable |
						    cudaHostRegisterReadOnly));
	vc_cu_unquiesce(c);
	if (r < 0)
		return r;
	r = CU(cudaHostGetDevicePointer(&dp, host, 0));
	if (r < 0) {
		(void)CU(cudaHostUnregister(host));
		return r;
	}
	*dev_addr = (uint64_t)(uintptr_t)dp;
	return 0;
}

static void cu_host_unregister(struct vc_device *d, void *host)
{
	struct cu_dev *c = CUD(d);
	if (!host || vc_cu_enter(c) < 0)
		return;
	vc_cu_quiesce(c);
	(void)CU(cudaHostUnregister(host));
	vc_cu_unquiesce(c);
}

/* cudaMalloc promises 256-byte alignment only (large sizes come at 2 MiB
 * boundaries, small ones may not). An allocation that is not 4 KiB aligned
 * is redone 4 KiB larger and its start moved up; the list remembers those
 * (few: the engine allocates a handful of large regions), for the free. */
struct cu_mem {
	struct cu_mem *next;
	uint64_t aligned;
	void *raw;
};

static int cu_mem_alloc(struct vc_device *d, size_t len, uint64_t *dev_addr)
{
	struct cu_dev *c = CUD(d);
	int r = vc_cu_enter(c);
	if (r < 0)
		return r;
	len = len ? (len + 4095) & ~(size_t)4095 : 4096;
	void *p = NULL;
	vc_cu_quiesce(c);
	r = CU(cudaMalloc(&p, len));
	if (r == 0 && ((uintptr_t)p & 4095) != 0) {
		(void)CU(cudaFree(p));
		r = CU(cudaMalloc(&p, len + 4096));
		if (r == 0) {
			struct cu_mem *m = malloc(sizeof *m);
			if (!m) {
				(void)CU(cudaFree(p));
				r = vc_err(-ENOMEM, "out of memory");
			} else {
				m->raw = p;
				m->aligned = ((uint64_t)(uintptr_t)p + 4095) & ~(uint64_t)4095;
				pthread_mutex_lock(&c->mem_mu);
				m->next = c->mem;
				c->mem = m;
				pthread_mutex_unlock(&c->mem_mu);
				p = (void *)(uintptr_t)m->aligned;
			}
		}
	}
	vc_cu_unquiesce(c);
	if (r < 0)
		return r;
	*dev_addr = (uint64_t)(uintptr_t)p;
	return 0;
}
static void cu_mem_free(struct vc_device *d, uint64_t dev_addr)
{
	struct cu_dev *c = CUD(d);
	if (!dev_addr || vc_cu_enter(c) < 0)
		return;
	void *raw = (void *)(uintptr_t)dev_addr;
	pthread_mutex_lock(&c->mem_mu);
	for (struct cu_mem **pp = &c->mem; *pp; pp = &(*pp)->next)
		if ((*pp)->aligned == dev_addr) {
			struct cu_mem *m = *pp;
			*pp = m->next;
			raw = m->raw;
			free(m);
			break;
		}
	pthread_mutex_unlock(&c->mem_mu);
	vc_cu_quiesce(c);
	(void)CU(cudaFree(raw));
	vc_cu_unquiesce(c);
}

/* A copy on the calling thread's own default stream: it does not wait for
 * batches in flight on their streams, and the synchronize covers the
 * DMA itself even from pageable memory (plain cudaMemcpy may return once a
 * pageable source is staged). */
static int cu_memcpy_sync(struct vc_device *d, uint64_t dst, uint64_t src, size_t len)
{
	int r = vc_cu_enter(CUD(d));
	if (r < 0 || len == 0)
		return r;
	r = CU(cudaMemcpyAsync((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, len,
			       cudaMemcpyDefault, cudaStreamPerThread));
	if (r < 0)
		return r;
	return CU(cudaStreamSynchronize(cudaStreamPerThread));
}

/* --- batches ------------------------------------------------------------ */

static int cu_batch_init(struct vc_device *d, struct vc_dbatch *b)
{
	struct cu_dev *c = CUD(d);
	int r = vc_cu_enter(c);
	if (r < 0)
		return r;
	struct cu_batch *cb = calloc(1, sizeof *cb);
	if (!cb)
		return vc_err(-ENOMEM, "cuda: out of memory");
	void *flag = NULL, *flag_dev = NULL, *counter = NULL;
	/* BlockingSync: a waiter that outlasts the spin sleeps in the driver
	 * instead of spinning a core for the rest of a long batch. */
	r = CU(cudaEventCreateWithFlags(&cb->ev, cudaEventDisableTiming | cudaEventBlockingSync));
	if (r < 0)
		goto fail_free;
	vc_cu_quiesce(c);
	r = CU(cudaHostAlloc(&flag, sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable));
	vc_cu_unquiesce(c);
	if (r < 0)
		goto fail_event;
	r = CU(cudaHostGetDevicePointer(&flag_dev, flag, 0));
	if (r < 0) {
		if (!c->host_ptr_ok)
			goto fail_flag;
		vc_err_clear();
		flag_dev = flag;
	}
	vc_cu_quiesce(c);
	r = CU(cudaMalloc(&counter, sizeof(uint32_t)));
	if (r == 0 && (r = CU(cudaMemset(counter, 0, sizeof(uint32_t)))) < 0)
		(void)CU(cudaFree(counter));
	/* Allocated here, not at a dma submit: allocations may synchronize
	 * the device, and dma batches exist for when that must not happen.
	 * In pinned host memory: a SWAP's copies are then device-to-host,
	 * host-to-device and host-to-host, all copy engine (or CPU) work. A
	 * device scratch page made the first a device-to-device copy, which
	 * the driver may run as a kernel on an SM: with a user's grid on every
	 * SM (4096 GPUfs warps on an H100) it never ran, and every engine
	 * thread waiting for a batch behind it waited for the kernel's end
	 * (docs/GPUFS.md, step 3). */
	if (r == 0 && b->page_size && (r = CU(cudaMallocHost(&cb->scratch, b->page_size))) < 0) {
		(void)CU(cudaFree(counter));
		cb->scratch = NULL;
	}
	vc_cu_unquiesce(c);
	if (r < 0)
		goto fail_flag;
	cb->flag = flag;
	*cb->flag = 0;
	cb->flag_dev = flag_dev;
	cb->counter = counter;
	cb->sig = SIG_NONE;
	b->priv = cb;
	return 0;

fail_flag:
	(void)CU(cudaFreeHost(flag));
fail_event:
	(void)CU(cudaEventDestroy(cb->ev));
fail_free:
	free(cb);
	return r;
}

static void cu_batch_fini(struct vc_device *d, struct vc_dbatch *b)
{
	struct cu_batch *cb = b->priv;
	if (!cb)
		return;
	if (vc_cu_enter(CUD(d)) == 0) {
		/* The kernel may still be between its flag store and its exit. */
		(void)CU(cudaEventSynchronize(cb->ev));
		(void)CU(cudaEventDestroy(cb->ev));
		vc_cu_quiesce(CUD(d));
		if (cb->scratch)
			(void)CU(cudaFreeHost(cb->scratch));
		(void)CU(cudaFree(cb->counter));
		(void)CU(cudaFreeHost((void *)cb->flag));
		vc_cu_unquiesce(CUD(d));
	}
	free(cb->dsts);
	free(cb->srcs);
	free(cb->sizes);
	free(cb);
	b->priv = NULL;
}

/* Device address of the descriptors: b->moves_dev when the owner filled
 * it, else looked up once per moves array. */
static int moves_dev_addr(struct cu_dev *c, struct cu_batch *cb, const struct vc_dbatch *b,
			  const struct vc_move **out)
{
	const struct vc_move *moves = b->moves;
	if (b->moves_dev) {
		*out = (const struct vc_move *)(uintptr_t)b->moves_dev;
		return 0;
	}
	if (cb->moves_host != moves) {
		void *dp = NULL;
		int r = CU(cudaHostGetDevicePointer(&dp, (void *)moves, 0));
		if (r < 0) {
			if (!c->host_ptr_ok)
				return r;
			vc_err_clear();
			dp = (void *)moves;
		}
		cb->moves_host = moves;
		cb->moves_dev = dp;
	}
	*out = cb->moves_dev;
	return 0;
}

/* True when the batch is one contiguous run of COPY moves: then it is a
 * single memcpy of n * page_size bytes. O(n), stops at the first break. */
static bool contiguous_copy(const struct vc_dbatch *b)
{
	const struct vc_move *m = b->moves;
	if (m[0].op != VC_MOVE_COPY)
		return false;
	for (uint32_t i = 1; i < b->n; i++) {
		if (m[i].op != VC_MOVE_COPY || /* a cipher flag breaks the run too */ m[i].src != m[i - 1].src + b->page_size ||
		    m[i].dst != m[i - 1].dst + b->page_size)
			return false;
	}
	return true;
}

/* A launched batch's grid cap: per_sm blocks on every SM that no
 * device-queue server holds (while a queue exists, its servers may be
 * resident: a server block takes a whole SM's registers). The kernels
 * split their work statically over the grid (a grid stride), so a grid
 * larger than what can be resident would run a second wave of blocks,
 * each with its full share and, for the cipher, its own setup. */
static uint32_t grid_cap(struct cu_dev *c, uint32_t per_sm)
{
	uint32_t held = __atomic_load_n(&c->dq_sms, __ATOMIC_RELAXED);
	if (held >= c->sms)
		held = c->sms - 1;
	return (c->sms - held) * per_sm;
}

/* The copy-engine path (vc_dbatch.dma): the contiguous runs of COPY
 * moves (pages adjacent on both sides merge: a round of log appends from
 * staging pages is often one run) go out as one cudaMemcpyBatchAsync
 * (CUDA 13; one cudaMemcpyAsync a run before), each SWAP as three copies
 * in stream order through cb->scratch. Nothing runs on an SM, so the
 * moves progress while other programs' kernels hold every SM. Cost: O(n)
 * host work, one driver call for the runs and three per SWAP. */
static int dma_submit(struct cu_batch *cb, const struct vc_dbatch *b)
{
	const size_t ps = b->page_size;
	if (b->n > cb->runs_cap) {
		void **d = realloc(cb->dsts, b->n * sizeof *d);
		if (d)
			cb->dsts = d;
		const void **s = realloc(cb->srcs, b->n * sizeof *s);
		if (s)
			cb->srcs = s;
		size_t *z = realloc(cb->sizes, b->n * sizeof *z);
		if (z)
			cb->sizes = z;
		if (!d || !s || !z)
			return vc_err(-ENOMEM, "cuda: out of memory");
		cb->runs_cap = b->n;
	}
	uint32_t nr = 0;
	int r = 0;
	for (uint32_t i = 0; i < b->n && r == 0; i++) {
		const struct vc_move *m = &b->moves[i];
		void *dst = (void *)(uintptr_t)m->dst, *src = (void *)(uintptr_t)m->src;
		if (m->op == VC_MOVE_SWAP) {
			if (!cb->scratch)
				return vc_err(-EINVAL, "cuda: a SWAP in a batch without a page size");
			r = CU(cudaMemcpyAsync(cb->scratch, dst, ps, cudaMemcpyDefault, cb->stream));
			if (r == 0)
				r = CU(cudaMemcpyAsync(dst, src, ps, cudaMemcpyDefault, cb->stream));
			if (r == 0)
				r = CU(cudaMemcpyAsync(src, cb->scratch, ps, cudaMemcpyDefault, cb->stream));
			continue;
		}
		if (m->op != VC_MOVE_COPY)
			return vc_err(-EINVAL, "cuda: a copy-engine batch moves plain pages only");
		if (nr && (const char *)cb->srcs[nr - 1] + cb->sizes[nr - 1] == (const char *)src &&
		    (char *)cb->dsts[nr - 1] + cb->sizes[nr - 1] == (char *)dst) {
			cb->sizes[nr - 1] += ps;
			continue;
		}
		cb->dsts[nr] = dst;
		cb->srcs[nr] = src;
		cb->sizes[nr++] = ps;
	}
	if (r < 0 || nr == 0)
		return r;
#if CUDART_VERSION >= 13000
	/* One run too: the batch call carries the hint to keep off the SMs
	 * (a plain cudaMemcpyAsync carries none). */
	struct cudaMemcpyAttributes a;
	memset(&a, 0, sizeof a);
	a.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
	a.flags = cudaMemcpyFlagPreferOverlapWithCompute;
	size_t first = 0;
	return CU(cudaMemcpyBatchAsync(cb->dsts, cb->srcs, cb->sizes, nr, &a, &first, 1, cb->stream));
#else
	for (uint32_t i = 0; i < nr && r == 0; i++)
		r = CU(cudaMemcpyAsync(cb->dsts[i], cb->srcs[i], cb->sizes[i], cudaMemcpyDefault,
				       cb->stream));
	return r;
#endif
}

static int cu_batch_submit(struct vc_device *d, struct vc_dbatch *b)
{
	struct cu_dev *c = CUD(d);
	struct cu_batch *cb = b->priv;
	int r = vc_cu_enter(c);
	if (r < 0)
		goto out;
	uint64_t bytes = (uint64_t)b->n * b->page_size;
	/* The cipher moves decide the kernel: none, encryption only (the
	 * encryption layout's tables), or any mix. */
	uint32_t ciph = 0;
	for (uint32_t i = 0; i < b->n; i++) {
		if ((r = vc_move_check(&b->moves[i], b->key)) < 0)
			goto out;
		if ((b->moves[i].op & VC_MOVE_FP) && (!b->fp_dev || b->page_size > 4096)) {
			r = vc_err(-EINVAL, "cuda: a fingerprint needs the batch's digests and pages "
					    "of at most 4 KiB");
			goto out;
		}
		ciph |= b->moves[i].op & VC_MOVE_CIPHER;
	}
	if (ciph)
		cb->stream = c->streams[__atomic_fetch_add(&c->next_xstream, 1, __ATOMIC_RELAXED) %
					c->xts_nstreams];
	else
		cb->stream = c->streams[__atomic_fetch_add(&c->next_stream, 1, __ATOMIC_RELAXED) %
					c->nstreams];
	if (b->n == 0) {
		__atomic_store_n(&cb->sig, SIG_EVENT, __ATOMIC_RELAXED);
	} else if (b->dma) {
		if ((r = dma_submit(cb, b)) < 0)
			goto out;
		__atomic_store_n(&cb->sig, SIG_EVENT, __ATOMIC_RELAXED);
	} else if (bytes >= c->memcpy_min && contiguous_copy(b)) {
		r = CU(cudaMemcpyAsync((void *)(uintptr_t)b->moves[0].dst,
				       (const void *)(uintptr_t)b->moves[0].src, bytes,
				       cudaMemcpyDefault, cb->stream));
		if (r < 0)
			goto out;
		__atomic_store_n(&cb->sig, SIG_EVENT, __ATOMIC_RELAXED);
	} else {
		const struct vc_move *mdev;
		r = moves_dev_addr(c, cb, b, &mdev);
		if (r < 0)
			goto out;
		uint32_t gen = cb->gen + 1;
		if (ciph)
			r = CU((cudaError_t)vc_cuda_launch_moves_xts(
				b->key, ciph == VC_MOVE_ENCRYPT, mdev, b->fp_dev, b->n, b->page_size,
				grid_cap(c, c->xts_per_sm), cb->flag_dev, gen, cb->counter, cb->stream));
		else
			r = CU((cudaError_t)vc_cuda_launch_moves(mdev, b->fp_dev, b->n, b->page_size,
								 grid_cap(c, c->mv_per_sm),
								 cb->flag_dev, gen, cb->counter,
								 cb->stream));
		if (r < 0)
			goto out;
		__atomic_store_n(&cb->gen, gen, __ATOMIC_RELAXED);
		__atomic_store_n(&cb->sig, SIG_FLAG, __ATOMIC_RELAXED);
	}
	r = CU(cudaEventRecord(cb->ev, cb->stream));
	if (r < 0) {
		/* Nothing would track what was just enqueued: let it finish
		 * before the caller may reuse the batch. */
		(void)CU(cudaStreamSynchronize(cb->stream));
		goto out;
	}
	__atomic_store_n(&cb->submit_err, 0, __ATOMIC_RELEASE);
	return 0;
out:
	__atomic_store_n(&cb->submit_err, r, __ATOMIC_RELEASE);
	return r;
}

/* After the flag: the kernel has done all its work, but the launch may
 * still be retiring, so "not ready" is fine; any other result of the event
 * is the batch's error. */
static int check_event_done(struct cu_batch *cb)
{
	cudaError_t e = cudaEventQuery(cb->ev);
	if (e == cudaErrorNotReady) {
		(void)cudaGetLastError();
		return 0;
	}
	return CU(e);
}

/* One poll: 1 when the submission is complete (*status set), else 0. */
static int poll_done(struct cu_batch *cb, uint32_t gen, bool check_event, int *status)
{
	if (__atomic_load_n(&cb->sig, __ATOMIC_RELAXED) == SIG_FLAG) {
		/* Acquire: the GPU orders the batch's stores before the flag
		 * (move.cu), and this load orders our later reads after it. */
		uint32_t f = __atomic_load_n(cb->flag, __ATOMIC_ACQUIRE);
		if ((int32_t)(f - gen) >= 0) {
			*status = check_event_done(cb);
			return 1;
		}
		if (!check_event)
			return 0;
		/* A kernel that faulted never writes the flag: ask the event. */
	}
	cudaError_t e = cudaEventQuery(cb->ev);
	if (e == cudaErrorNotReady) {
		(void)cudaGetLastError();
		return 0;
	}
	*status = CU(e);
	return 1;
}

static int cu_batch_wait(struct vc_device *d, struct vc_dbatch *b)
{
	struct cu_batch *cb = b->priv;
	int err = __atomic_load_n(&cb->submit_err, __ATOMIC_ACQUIRE);
	if (err)
		return err;
	if (__atomic_load_n(&cb->sig, __ATOMIC_RELAXED) == SIG_NONE)
		return 0; /* never submitted */
	int r = vc_cu_enter(CUD(d));
	if (r < 0)
		return r;
	const uint32_t gen = __atomic_load_n(&cb->gen, __ATOMIC_RELAXED);
	const uint64_t t0 = vc_now_ns();
	for (uint32_t i = 1;; i++) {
		/* In the yield phase, every 64th poll also asks the event. */
		uint64_t t = vc_now_ns() - t0;
		if (poll_done(cb, gen, t > SPIN_NS && i % 64 == 0, &r))
			return r;
		if (t > YIELD_NS)
			break;
		if (t > SPIN_NS)
			sched_yield();
		else
			vc_cpu_relax();
	}
	return CU(cudaEventSynchronize(cb->ev));
}

/* --- open and close ----------------------------------------------------- */

/* Batches are the owner's to finish (batch_fini) before close. */
static void cu_close(struct vc_device *d)
{
	struct cu_dev *c = CUD(d);
	if (vc_cu_enter(c) == 0) {
		for (int i = 0; i < NSTREAMS; i++) {
			(void)CU(cudaStreamSynchronize(c->streams[i]));
			(void)CU(cudaStreamDestroy(c->streams[i]));
		}
		vc_cu_gc_release(c);
	}
	pthread_mutex_destroy(&c->gc_mu);
	pthread_mutex_destroy(&c->mem_mu);
	pthread_mutex_destroy(&c->dq_mu);
	while (c->mem) { /* leaked by a caller: freed with the context */
		struct cu_mem *m = c->mem;
		c->mem = m->next;
		free(m);
	}
	free(c);
}

static const struct vc_device_ops cu_ops = {
	.name = "cuda",
	.close = cu_close,
	.host_alloc = vc_cu_host_alloc,
	.host_free = vc_cu_host_free,
	.host_register = cu_host_register,
	.host_unregister = cu_host_unregister,
	.mem_alloc = cu_mem_alloc,
	.mem_free = cu_mem_free,
	.batch_init = cu_batch_init,
	.batch_fini = cu_batch_fini,
	.batch_submit = cu_batch_submit,
	.batch_wait = cu_batch_wait,
	.memcpy_sync = cu_memcpy_sync,
	.gc_run = vc_cu_gc_run,
	.fp_run = vc_cu_fp_run,
	.cmp_start = vc_cu_cmp_start,
	.cmp_wait = vc_cu_cmp_wait,
	.dq_init = vc_cu_dq_init,
	.mem_reserve = vc_cu_mem_reserve,
	.mem_unreserve = vc_cu_mem_unreserve,
	.mem_map = vc_cu_mem_map,
	.mem_unmap = vc_cu_mem_unmap,
	.mem_unmap_n = vc_cu_mem_unmap_n,
	.mem_info = vc_cu_mem_info,
	.uuid = vc_cu_uuid,
	.peer_enable = vc_cu_peer_enable,
	.fault = vc_cu_fault,
};

/* " PCIe genG xW" from sysfs for the device's PCI address, or "" where
 * sysfs does not say. The link may be trained down while the GPU idles. */
static void pcie_desc(int ordinal, char *out, size_t len)
{
	char bus[32], path[128], speed[32] = "", width[16] = "";
	out[0] = '\0';
	if (cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) != cudaSuccess) {
		(void)cudaGetLastError();
		return;
	}
	for (char *p = bus; *p; p++)
		if (*p >= 'A' && *p <= 'F')
			*p = (char)(*p - 'A' + 'a');
	const char *names[2] = { "current_link_speed", "current_link_width" };
	char *vals[2] = { speed, width };
	size_t sizes[2] = { sizeof speed, sizeof width };
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/%s", bus, names[i]);
		FILE *f = fopen(path, "r");
		if (!f)
			return;
		if (!fgets(vals[i], (int)sizes[i], f))
			vals[i][0] = '\0';
		fclose(f);
	}
	double gts = atof(speed);
	int gen = gts >= 60 ? 6 : gts >= 30 ? 5 : gts >= 15 ? 4 : gts >= 7 ? 3 : gts >= 4 ? 2 : 1;
	int w = atoi(width);
	if (gts > 0 && w > 0)
		snprintf(out, len, ", PCIe gen%d x%d", gen, w);
}

static uint64_t memcpy_min_config(void)
{
	const char *s = getenv("VC_CUDA_MEMCPY_MIN");
	if (!s || !*s)
		return MEMCPY_MIN_DEFAULT;
	if (strcmp(s, "off") == 0)
		return UINT64_MAX;
	return strtoull(s, NULL, 0);
}

int vc_cuda_open(int ordinal, struct vc_device **out)
{
	int count = 0, r = CU(cudaGetDeviceCount(&count));
	if (r == -VC_ENODEVICE) {
		char why[256];
		snprintf(why, sizeof why, "%s", vc_last_error());
		return vc_err(r, "cuda: no GPU, or no driver for CUDA runtime %d.%d: %s",
			      CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, why);
	}
	if (r < 0)
		return r;
	if (count == 0)
		return vc_err(-VC_ENODEVICE, "cuda: the driver reports no CUDA device");
	if (ordinal < 0 || ordinal >= count)
		return vc_err(-VC_ENODEVICE, "cuda: device %d asked for, but only %d present", ordinal,
			      count);
	r = CU(cudaSetDevice(ordinal));
	if (r < 0)
		return r;
	struct cudaDeviceProp p;
	int uva = 0, host_ptr = 0, per_sm = 0, xts_per_sm = 0;
	if ((r = CU(cudaGetDeviceProperties(&p, ordinal))) < 0 ||
	    (r = CU(cudaDeviceGetAttribute(&uva, cudaDevAttrUnifiedAddressing, ordinal))) < 0 ||
	    (r = CU(cudaDeviceGetAttribute(&host_ptr, cudaDevAttrCanUseHostPointerForRegisteredMem,
					   ordinal))) < 0 ||
	    (r = CU((cudaError_t)vc_cuda_moves_blocks_per_sm(&per_sm))) < 0 ||
	    (r = CU((cudaError_t)vc_cuda_moves_xts_init(&xts_per_sm))) < 0)
		return r;
	if (!p.canMapHostMemory)
		return vc_err(-VC_ENODEVICE, "cuda: %s cannot map host memory", p.name);

	struct cu_dev *c = calloc(1, sizeof *c);
	if (!c)
		return vc_err(-ENOMEM, "cuda: out of memory");
	c->ordinal = ordinal;
	c->host_ptr_ok = uva && host_ptr;
	c->mv_per_sm = (uint32_t)(per_sm > 0 ? per_sm : 1);
	/* Cipher batches: one block per SM and 8 streams (internal.h says
	 * why); the environment may change both, for measuring. */
	const uint32_t xts_max = (uint32_t)(xts_per_sm > 0 ? xts_per_sm : 1);
	c->xts_per_sm = vc_env_u32("VC_CUDA_XTS_PER_SM",
				   XTS_BATCH_PER_SM < xts_max ? XTS_BATCH_PER_SM : xts_max, 1, xts_max);
	c->nstreams = vc_env_u32("VC_CUDA_NSTREAMS", VC_CUDA_STREAMS, 1, NSTREAMS);
	c->xts_nstreams = vc_env_u32("VC_CUDA_XTS_NSTREAMS", NSTREAMS, 1, NSTREAMS);
	c->memcpy_min = memcpy_min_config();
	c->sms = (uint32_t)p.multiProcessorCount;
	/* Before anything can run: a lazy load during a user's kernel that
	 * waits for the engine's kernels never completes (preload.c). */
	if ((r = vc_cu_preload(c)) < 0) {
		free(c);
		return r;
	}
	pthread_mutex_init(&c->gc_mu, NULL);
	pthread_mutex_init(&c->mem_mu, NULL);
	pthread_mutex_init(&c->dq_mu, NULL);
	for (int i = 0; i < NSTREAMS; i++) {
		r = CU(cudaStreamCreateWithFlags(&c->streams[i], cudaStreamNonBlocking));
		if (r < 0) {
			while (i-- > 0)
				(void)CU(cudaStreamDestroy(c->streams[i]));
			pthread_mutex_destroy(&c->gc_mu);
			pthread_mutex_destroy(&c->mem_mu);
			free(c);
			return r;
		}
	}
	char pcie[48];
	pcie_desc(ordinal, pcie, sizeof pcie);
	snprintf(c->dev.desc, sizeof c->dev.desc, "%.60s (sm_%d%d, %d SMs, %zu GiB%s)", p.name,
		 p.major, p.minor, p.multiProcessorCount, p.totalGlobalMem >> 30, pcie);
	c->dev.ops = &cu_ops;
	c->dev.ordinal = ordinal;
	/* Without virtual memory management (an old driver) the GPU tier is
	 * one allocation that cannot shrink: granularity 0 says so. */
	if (vc_cu_vmem_granularity(ordinal, &c->dev.map_granularity) < 0)
		c->dev.map_granularity = 0;
	*out = &c->dev;
	return 0;
}
