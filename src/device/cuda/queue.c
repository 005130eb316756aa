/* CUDA backend: device-queue servers (device/queue.h), the kernel in
 * kernels/server.cu. A queue's server runs on a stream of its own; the
 * generic code starts and stops it, and waiters poll their completion
 * words, then the stream, for a device fault. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomics.h"
#include "base/clock.h"
#include "base/env.h"
#include "base/error.h"
#include "base/secret.h"
#include "device/cuda/internal.h"
#include "device/cuda/kernels/server.h"
#include "device/queue.h"
#include "device/xts.h"
#include "vramcache.h"

/* Rings of the server: 16 blocks hold 16 SMs (of 132 on an H100) while
 * moves flow. Measured on an H100 (bench/dqueue): 16 synchronous callers
 * move 2.5M pages/s over 16 rings, 1.8M over 8 (two callers per ring wait
 * for each other's rounds), 1.0M over 4. VC_CUDA_DQ_RINGS overrides it at
 * queue creation, for measuring. */
#define DQ_RINGS_DEFAULT 16
/* Waiters spin this long: a lone 4 KiB move takes a few microseconds, a
 * ring with hundreds of pieces ahead a few tens. */
#define DQ_SPIN_NS 50000ull
/* One bounded wait after the spin: yield-polling, then the caller checks
 * the device's health. */
#define DQ_BLOCK_NS 100000ull

static int cu_dq_start(struct vc_dq *q)
{
	struct cu_dq *cq = q->priv;
	int r = vc_cu_enter(cq->c);
	if (r < 0)
		return r;
	struct vc_cuda_dq_view v = {
		.pos = q->pos_dev,
		.stop = q->stop_dev,
		.nrings = q->nrings,
		.lanes = q->lanes,
		.depth_shift = q->dshift,
		.piece = q->piece,
		.mode = vc_env_u32("VC_CUDA_DQ_MODE", 0, 0, UINT32_MAX),
		.nap_ns = vc_env_u32("VC_CUDA_DQ_NAP_NS", 1000, 1, UINT32_MAX),
	};
	for (uint32_t i = 0; i < q->nrings; i++) {
		v.desc[i] = q->rings[i].desc_dev;
		v.done[i] = q->rings[i].done_dev;
		v.fp[i] = q->rings[i].fp_dev;
	}
	if (q->key) {
		_Static_assert(sizeof v.key == sizeof *q->key, "the view holds the key");
		v.cipher = 1;
		memcpy(&v.key, q->key->bytes, sizeof v.key);
	}
	*q->stopw = 0;
	r = CU((cudaError_t)vc_cuda_dq_launch(&v, cq->stream));
	vc_secret_zero(&v.key, sizeof v.key); /* the launch took its copy */
	return r;
}

static int cu_dq_stop(struct vc_dq *q)
{
	struct cu_dq *cq = q->priv;
	int r = vc_cu_enter(cq->c);
	if (r < 0)
		return r;
	__atomic_store_n(q->stopw, 1u, __ATOMIC_SEQ_CST);
	r = CU(cudaStreamSynchronize(cq->stream));
	__atomic_store_n(q->stopw, 0u, __ATOMIC_SEQ_CST);
	return r;
}

/* The server's stream: busy while it runs, idle once stopped, and the
 * device's sticky error after a fault. */
static int cu_dq_health(struct vc_dq *q)
{
	struct cu_dq *cq = q->priv;
	int r = vc_cu_enter(cq->c);
	if (r < 0)
		return r;
	cudaError_t e = cudaStreamQuery(cq->stream);
	if (e == cudaErrorNotReady) {
		(void)cudaGetLastError();
		return 0;
	}
	return CU(e);
}

static void cu_dq_block(struct vc_dq *q, uint32_t r, uint64_t t)
{
	const _Atomic uint64_t *d = &q->rings[r].done[t & (q->depth - 1)];
	uint64_t t0 = vc_now_ns();
	while (atomic_load_explicit(d, memory_order_acquire) < t + 1 &&
	       vc_now_ns() - t0 < DQ_BLOCK_NS)
		sched_yield();
}

static int cu_dq_ready(struct vc_dq *q)
{
	struct cu_dq *cq = q->priv;
	pthread_mutex_lock(&cq->c->dq_mu);
	cq->next = cq->c->dqs;
	cq->c->dqs = cq;
	__atomic_fetch_add(&cq->c->dq_sms, q->nrings, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&cq->c->dq_mu);
	return 0;
}

/* The generic code has stopped the server. */
static void cu_dq_fini(struct vc_dq *q)
{
	struct cu_dq *cq = q->priv;
	if (!cq)
		return;
	struct cu_dev *c = cq->c;
	pthread_mutex_lock(&c->dq_mu);
	for (struct cu_dq **pp = &c->dqs; *pp; pp = &(*pp)->next)
		if (*pp == cq) {
			*pp = cq->next;
			__atomic_fetch_sub(&c->dq_sms, q->nrings, __ATOMIC_RELAXED);
			break;
		}
	pthread_mutex_unlock(&c->dq_mu);
	if (vc_cu_enter(c) == 0) {
		(void)CU(cudaStreamSynchronize(cq->stream));
		(void)CU(cudaStreamDestroy(cq->stream));
	}
	free(cq);
	q->priv = NULL;
}

static const struct vc_dq_ops cu_dq_ops = {
	.ready = cu_dq_ready,
	.start = cu_dq_start,
	.stop = cu_dq_stop,
	.health = cu_dq_health,
	.block = cu_dq_block,
	.fini = cu_dq_fini,
};

int vc_cu_dq_init(struct vc_device *d, struct vc_dq *q)
{
	struct cu_dev *c = CUD(d);
	int r = vc_cu_enter(c);
	if (r < 0)
		return r;
	if (q->nrings == 0)
		q->nrings = vc_env_u32("VC_CUDA_DQ_RINGS", DQ_RINGS_DEFAULT, 1, UINT32_MAX);
	q->lanes = VC_CUDA_DQ_LANES;
	if (q->nrings > c->sms)
		return vc_err(-EINVAL, "cuda: %u device-queue rings, but the GPU has %u SMs",
			      q->nrings, c->sms);
	q->spin_ns = DQ_SPIN_NS;
	struct cu_dq *cq = calloc(1, sizeof *cq);
	if (!cq)
		return vc_err(-ENOMEM, "cuda: out of memory");
	cq->c = c;
	cq->q = q;
	r = CU(cudaStreamCreateWithFlags(&cq->stream, cudaStreamNonBlocking));
	if (r < 0) {
		free(cq);
		return r;
	}
	q->priv = cq;
	q->ops = &cu_dq_ops;
	return 0;
}

