/* Emulated device: "device memory" is host memory and a worker thread runs
 * submitted batches in order, like a CUDA stream. Completion therefore
 * arrives later and from another thread, so the engine's waiting and
 * batching code runs exactly as it does over a GPU.
 *
 * Cost: a batch of n pages costs one queue hand-off plus n page copies
 * (2n for swaps) on the worker thread. A cleaning job (gc_run) runs on the
 * calling thread: O(S log S) for S source slots, plus its page copies.
 *
 * Several devices: each vc_emu_open is one emulated device, numbered by
 * the ordinal it is opened as (device.h); its memory is host memory of
 * its own allocations, its UUID carries the ordinal, and since all of it
 * is one address space a batch on one device may move another's pages
 * (peer access needs nothing: device.h's peer_enable is absent).
 *
 * Faults (device.h's fault op): `faulted` is a sticky flag, set once and
 * never cleared, that every entry point that would touch device memory
 * or run work checks first. The worker still takes queued batches, so
 * their waiters are released, but completes them with -VC_EDEVICE without
 * moving a byte; queue lanes stop taking descriptors and the queues'
 * health reports -VC_EDEVICE, which is what releases their waiters
 * (device/queue.c checks it between bounded waits). What frees or closes
 * keeps working, so a failed device can be torn down. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "device/device.h"
#include "device/emu/internal.h"
#include "device/fp.h"
#include "device/xts.h"
#include "device/queue.h"
#include "vramcache.h"

struct emu_batch {
	struct vc_dbatch *owner;
	struct emu_batch *next; /* FIFO link while queued */
	uint64_t submitted, completed; /* generations: done when equal */
	int err; /* the last run's status */
};

struct emu {
	struct vc_device dev;
	_Atomic bool faulted; /* sticky: see the top */
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	struct emu_batch *head, *tail;
	bool stop;
	pthread_t worker;
};

#define EMU(d) ((struct emu *)(d))

int vc_emu_health(struct vc_device *d)
{
	if (!atomic_load_explicit(&EMU(d)->faulted, memory_order_acquire))
		return 0;
	return vc_err(-VC_EDEVICE, "emu: device %d has failed (a fault was injected)", d->ordinal);
}

/* One move of len bytes (a page, or a queue's piece): a copy, with its
 * cipher (device.h: units of min(len, 4 KiB), tweaks from m->tweak up),
 * or an exchange. The cipher runs in place at dst after the copy: dst is
 * this move's alone. 0, or the cipher's error. */
static int emu_move(const struct vc_xts_key *key, uint64_t src, uint64_t dst, uint32_t op,
		    uint64_t tweak, uint32_t len)
{
	unsigned char *s = (unsigned char *)(uintptr_t)src;
	unsigned char *t = (unsigned char *)(uintptr_t)dst;
	if ((op & VC_MOVE_OP_MASK) == VC_MOVE_COPY) {
		memcpy(t, s, len);
		if (!(op & VC_MOVE_CIPHER))
			return 0;
		const uint32_t unit = len < VC_XTS_UNIT_MAX ? len : VC_XTS_UNIT_MAX;
		uint64_t tw[(2u << 20) / VC_XTS_UNIT_MAX];
		for (uint32_t k = 0; k < len / unit; k++)
			tw[k] = tweak + k;
		return vc_emu_xts_pages(key, t, tw, len / unit, unit, (op & VC_MOVE_ENCRYPT) != 0);
	}
	unsigned char tmp[4096];
	for (uint32_t off = 0; off < len; off += sizeof tmp) {
		size_t k = len - off < sizeof tmp ? len - off : sizeof tmp;
		memcpy(tmp, s + off, k);
		memcpy(s + off, t + off, k);
		memcpy(t + off, tmp, k);
	}
	return 0;
}

/* The bytes a VC_MOVE_FP move hashes (device.h: the plaintext): the
 * source of an encrypting move, else the copy at dst. */
static uint64_t fp_src(uint64_t src, uint64_t dst, uint32_t op)
{
	return (op & VC_MOVE_ENCRYPT) ? src : dst;
}

static int run_moves(const struct vc_dbatch *b)
{
	int err = 0;
	for (uint32_t i = 0; i < b->n; i++) {
		const struct vc_move *m = &b->moves[i];
		int r = emu_move(b->key, m->src, m->dst, m->op, m->tweak, b->page_size);
		if (r < 0 && err == 0)
			err = r;
		if (r == 0 && (m->op & VC_MOVE_FP)) /* the same function as the kernels' */
			vc_fp_lanes((const void *)(uintptr_t)fp_src(m->src, m->dst, m->op), b->page_size,
				    &b->fp[i]);
	}
	return err;
}

static void *worker_main(void *arg)
{
	struct emu *e = arg;
	pthread_mutex_lock(&e->mu);
	for (;;) {
		while (!e->head && !e->stop)
			pthread_cond_wait(&e->work, &e->mu);
		if (!e->head)
			break;
		struct emu_batch *eb = e->head;
		e->head = eb->next;
		if (!e->head)
			e->tail = NULL;
		uint64_t gen = eb->submitted;
		pthread_mutex_unlock(&e->mu);
		/* A batch the fault caught queued completes failed, unmoved. */
		int err = atomic_load(&e->faulted) ? -VC_EDEVICE : run_moves(eb->owner);
		pthread_mutex_lock(&e->mu);
		eb->err = err < 0 ? -VC_EDEVICE : 0;
		eb->completed = gen;
		pthread_cond_broadcast(&e->done);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

static void emu_close(struct vc_device *d)
{
	struct emu *e = EMU(d);
	pthread_mutex_lock(&e->mu);
	e->stop = true;
	pthread_cond_broadcast(&e->work);
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->worker, NULL);
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->work);
	pthread_cond_destroy(&e->done);
	free(e);
}

static int emu_alloc(size_t len, void **p)
{
	size_t align = 4096;
	len = (len + align - 1) & ~(align - 1);
	if (len == 0)
		len = align;
	void *m = aligned_alloc(align, len);
	if (!m)
		return vc_err(-ENOMEM, "emu: cannot allocate %zu bytes", len);
	*p = m;
	return 0;
}

static int emu_host_alloc(struct vc_device *d, size_t len, void **host, uint64_t *dev_addr)
{
	(void)d;
	int r = emu_alloc(len, host);
	if (r == 0)
		*dev_addr = (uint64_t)(uintptr_t)*host;
	return r;
}

static void emu_host_free(struct vc_device *d, void *host)
{
	(void)d;
	free(host);
}

/* Warps are CPU threads: the mapping is readable as it is. */
static int emu_host_register(struct vc_device *d, void *host, size_t len, uint64_t *dev_addr)
{
	(void)d;
	(void)len;
	*dev_addr = (uint64_t)(uintptr_t)host;
	return 0;
}

static void emu_host_unregister(struct vc_device *d, void *host)
{
	(void)d;
	(void)host;
}

static int emu_mem_alloc(struct vc_device *d, size_t len, uint64_t *dev_addr)
{
	void *p = NULL;
	int r = vc_emu_health(d);
	if (r == 0)
		r = emu_alloc(len, &p);
	if (r == 0)
		*dev_addr = (uint64_t)(uintptr_t)p;
	return r;
}

static void emu_mem_free(struct vc_device *d, uint64_t dev_addr)
{
	(void)d;
	free((void *)(uintptr_t)dev_addr);
}

static int emu_batch_init(struct vc_device *d, struct vc_dbatch *b)
{
	(void)d;
	struct emu_batch *eb = calloc(1, sizeof *eb);
	if (!eb)
		return vc_err(-ENOMEM, "emu: out of memory");
	eb->owner = b;
	b->priv = eb;
	return 0;
}

static void emu_batch_fini(struct vc_device *d, struct vc_dbatch *b)
{
	(void)d;
	free(b->priv);
	b->priv = NULL;
}

static int emu_batch_submit(struct vc_device *d, struct vc_dbatch *b)
{
	struct emu *e = EMU(d);
	struct emu_batch *eb = b->priv;
	for (uint32_t i = 0; i < b->n; i++) {
		int r = vc_move_check(&b->moves[i], b->key);
		if (r < 0)
			return r;
		if (b->dma && (b->moves[i].op & ~VC_MOVE_OP_MASK))
			return vc_err(-EINVAL, "emu: a copy-engine batch moves plain pages only");
		if ((b->moves[i].op & VC_MOVE_FP) && (!b->fp || b->page_size > VC_FP_BLOCK_MAX))
			return vc_err(-EINVAL, "emu: a fingerprint needs the batch's digests and pages "
					       "of at most %u bytes", VC_FP_BLOCK_MAX);
	}
	pthread_mutex_lock(&e->mu);
	if (atomic_load(&e->faulted)) {
		/* Completed at once, failed, as a launch on a dead context
		 * fails: waiters see it (and the caller may not resubmit
		 * before they have). */
		eb->completed = ++eb->submitted;
		eb->err = -VC_EDEVICE;
		pthread_cond_broadcast(&e->done);
		pthread_mutex_unlock(&e->mu);
		return vc_emu_health(d);
	}
	eb->submitted++;
	eb->next = NULL;
	if (e->tail)
		e->tail->next = eb;
	else
		e->head = eb;
	e->tail = eb;
	pthread_cond_signal(&e->work);
	pthread_mutex_unlock(&e->mu);
	return 0;
}

static int emu_batch_wait(struct vc_device *d, struct vc_dbatch *b)
{
	struct emu *e = EMU(d);
	struct emu_batch *eb = b->priv;
	pthread_mutex_lock(&e->mu);
	while (eb->completed != eb->submitted)
		pthread_cond_wait(&e->done, &e->mu);
	int r = eb->err;
	pthread_mutex_unlock(&e->mu);
	return r < 0 ? vc_err(r, "emu: device %d: a batch failed", d->ordinal) : 0;
}

static int emu_memcpy_sync(struct vc_device *d, uint64_t dst, uint64_t src, size_t len)
{
	int r = vc_emu_health(d);
	if (r < 0)
		return r;
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, len);
	return 0;
}

/* A live source slot: its stamp and source position (rank * per_seg + slot). */
struct emu_live {
	uint64_t stamp;
	uint32_t pos;
};

static int cmp_live(const void *a, const void *b)
{
	const struct emu_live *x = a, *y = b;
	if (x->stamp != y->stamp)
		return x->stamp < y->stamp ? -1 : 1;
	return (x->pos > y->pos) - (x->pos < y->pos);
}

/* struct vc_gc_job on the CPU. Positions are unique, so ordering by
 * (stamp, position) is the job's stable order. The caller keeps batches
 * off these pages (device.h), so the worker thread needs no say. The
 * caller's statement is checked before anything changes, as on CUDA. */
static int emu_gc_run(struct vc_device *d, struct vc_gc_job *j)
{
	int r = vc_emu_health(d);
	if (r == 0)
		r = vc_gc_check(j);
	if (r < 0)
		return r;
	const uint64_t per = j->per_seg, S = (uint64_t)j->nsrc * per;
	struct emu_live *lv = NULL;
	if (S && !(lv = malloc(S * sizeof *lv)))
		return vc_err(-ENOMEM, "emu: gc: cannot allocate %llu slots", (unsigned long long)S);
	uint32_t n = 0;
	bool in_bounds = true;
	for (uint64_t p = 0; p < S; p++) {
		uint64_t g = j->src[p / per] * per + p % per;
		if (j->key[g] == VC_GC_DEAD)
			continue;
		lv[n++] = (struct emu_live){ j->stamp[g], (uint32_t)p };
		in_bounds &= j->stamp[g] >= j->stamp_min && j->stamp[g] <= j->stamp_max;
	}
	if (n != j->live || !in_bounds) {
		free(lv);
		return vc_err(-EINVAL, "emu: gc: the job states %u live pages in stamps [%llu, %llu]; "
				       "%u are live%s", j->live, (unsigned long long)j->stamp_min,
			      (unsigned long long)j->stamp_max, n, in_bounds ? "" : ", some outside");
	}
	if (n > 1)
		qsort(lv, n, sizeof *lv, cmp_live);
	unsigned char *base = (unsigned char *)(uintptr_t)j->base;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t p = lv[i].pos, q = j->dst_first + (uint64_t)i;
		uint64_t gs = j->src[p / per] * per + p % per;
		uint64_t gd = j->dst[q / per] * per + q % per;
		memcpy(base + gd * j->page_size, base + gs * j->page_size, j->page_size);
		uint32_t owner = j->key[gs];
		j->key[gd] = owner;
		j->stamp[gd] = lv[i].stamp;
		if (j->where && owner < j->nowners)
			j->where[owner] = (uint32_t)gd;
	}
	free(lv);
	j->moved = n;
	return 0;
}


/* --- device queues -----------------------------------------------------
 *
 * One thread per ring lane takes its tickets in order (lane l of ring r:
 * tickets t = l mod lanes), so completions come out of order across lanes,
 * as on CUDA. An idle lane sleeps on its ring's `work` after announcing
 * itself in `sleepers`; producers publish (seq_cst) and then wake sleepers.
 * Waiters sleep on `done` the same way. Both sleeps are also bounded
 * (EMU_NAP_NS), so nothing hangs on a wakeup that a bug lost. */

/* Two rings of two lanes: enough to run completions out of order, few
 * enough for the 2-core CI machine. */
#define EMU_DQ_RINGS 2
#define EMU_DQ_LANES 2
#define EMU_NAP_NS 1000000ull

struct emu_ring {
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	_Atomic int sleepers, waiters;
};

struct emu_lane {
	struct vc_dq *q;
	uint32_t ring, lane;
	pthread_t tid;
	bool started;
};

struct emu_dq {
	struct emu *e; /* the device: its fault flag */
	_Atomic bool closing;
	_Atomic int err; /* sticky: a piece's cipher failed */
	/* Lanes between taking a descriptor and finishing its move: while
	 * any is, health does not fail (emu_dq_health), so no waiter is
	 * released, and frees or reuses the move's memory, while a lane
	 * still copies it (as a real device's copies in flight end, done
	 * or failed, before its error reaches the host). */
	_Atomic uint32_t moving;
	struct emu_ring rings[VC_DQ_MAX_RINGS];
	struct emu_lane *lanes;
	uint32_t nlanes;
};

static void nap(pthread_cond_t *cv, pthread_mutex_t *mu)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)EMU_NAP_NS;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(cv, mu, &ts);
}

static void *emu_lane_main(void *arg)
{
	struct emu_lane *ln = arg;
	struct vc_dq *q = ln->q;
	struct emu_dq *ed = q->priv;
	struct vc_dq_ring *rg = &q->rings[ln->ring];
	struct emu_ring *er = &ed->rings[ln->ring];
	const uint64_t mask = q->depth - 1;
	uint64_t t = ln->lane;
	unsigned idle = 0;
	for (;;) {
		struct vc_dq_desc *d = &rg->desc[t & mask];
		uint64_t tag = vc_dq_tag(t, q->dshift);
		uint64_t op = atomic_load(&d->op);
		/* A failed device takes nothing more: its tickets never
		 * complete, and health releases their waiters once no lane
		 * is moving. Counted before the flag's load, both seq_cst
		 * (as emu_dq_health's two loads and emu_fault's store): a
		 * lane that misses the fault is counted where health looks. */
		bool take = op >> VC_DQ_ADDR_BITS == tag;
		if (take) {
			atomic_fetch_add(&ed->moving, 1);
			take = !atomic_load(&ed->e->faulted);
			if (!take)
				atomic_fetch_sub(&ed->moving, 1);
		}
		if (take) {
			uint64_t src = atomic_load_explicit(&d->src, memory_order_relaxed);
			uint64_t dst = atomic_load_explicit(&d->dst, memory_order_relaxed);
			uint64_t tw = atomic_load_explicit(&d->tweak, memory_order_relaxed);
			int r = emu_move(q->key, src & VC_DQ_ADDR_MASK, dst & VC_DQ_ADDR_MASK,
					 (uint32_t)(op & 0xff), vc_dq_desc_tweak(op, tw), q->piece);
			if (r == 0 && (op & VC_MOVE_FP)) {
				/* Before done; release: vc_dq_fp's reader, had it
				 * read this, sees the descriptor read above. */
				struct vc_fp_digest f;
				uint64_t w[2];
				vc_fp_lanes((const void *)(uintptr_t)fp_src(src & VC_DQ_ADDR_MASK,
									 dst & VC_DQ_ADDR_MASK,
									 (uint32_t)op),
					    q->piece, &f);
				memcpy(w, f.b, sizeof w);
				atomic_store_explicit(&rg->fp[t & mask].w[0], w[0], memory_order_release);
				atomic_store_explicit(&rg->fp[t & mask].w[1], w[1], memory_order_release);
			}
			if (r < 0) /* sticky, and never done: health fails the waiters */
				atomic_store(&ed->err, -VC_EDEVICE);
			else
				atomic_store(&rg->done[t & mask], t + 1); /* seq_cst: see above */
			atomic_fetch_sub(&ed->moving, 1);
			if (atomic_load(&er->waiters)) {
				pthread_mutex_lock(&er->mu);
				pthread_cond_broadcast(&er->done);
				pthread_mutex_unlock(&er->mu);
			}
			t += q->lanes;
			idle = 0;
			continue;
		}
		if (atomic_load(&ed->closing))
			break;
		if (++idle < 32) {
			sched_yield();
			continue;
		}
		pthread_mutex_lock(&er->mu);
		atomic_fetch_add(&er->sleepers, 1);
		if ((atomic_load(&ed->e->faulted) || atomic_load(&d->op) >> VC_DQ_ADDR_BITS != tag) &&
		    !atomic_load(&ed->closing))
			nap(&er->work, &er->mu);
		atomic_fetch_sub(&er->sleepers, 1);
		pthread_mutex_unlock(&er->mu);
	}
	return NULL;
}

static void emu_dq_notify(struct vc_dq *q, uint32_t r)
{
	struct emu_dq *ed = q->priv;
	struct emu_ring *er = &ed->rings[r];
	if (atomic_load(&er->sleepers)) {
		pthread_mutex_lock(&er->mu);
		pthread_cond_broadcast(&er->work);
		pthread_mutex_unlock(&er->mu);
	}
}

static void emu_dq_block(struct vc_dq *q, uint32_t r, uint64_t t)
{
	struct emu_dq *ed = q->priv;
	struct emu_ring *er = &ed->rings[r];
	pthread_mutex_lock(&er->mu);
	atomic_fetch_add(&er->waiters, 1);
	if (atomic_load(&q->rings[r].done[t & (q->depth - 1)]) < t + 1)
		nap(&er->done, &er->mu);
	atomic_fetch_sub(&er->waiters, 1);
	pthread_mutex_unlock(&er->mu);
}

static int emu_dq_health(struct vc_dq *q)
{
	struct emu_dq *ed = q->priv;
	if (atomic_load(&ed->e->faulted) && atomic_load(&ed->moving))
		return 0; /* not yet: a lane still moves (struct emu_dq) */
	int r = vc_emu_health(&ed->e->dev);
	return r < 0 ? r : atomic_load(&ed->err);
}

static void emu_dq_fini(struct vc_dq *q)
{
	struct emu_dq *ed = q->priv;
	if (!ed)
		return;
	atomic_store(&ed->closing, true);
	for (uint32_t r = 0; r < q->nrings; r++) {
		pthread_mutex_lock(&ed->rings[r].mu);
		pthread_cond_broadcast(&ed->rings[r].work);
		pthread_mutex_unlock(&ed->rings[r].mu);
	}
	for (uint32_t i = 0; i < ed->nlanes; i++)
		if (ed->lanes[i].started)
			pthread_join(ed->lanes[i].tid, NULL);
	for (uint32_t r = 0; r < VC_DQ_MAX_RINGS; r++) {
		pthread_mutex_destroy(&ed->rings[r].mu);
		pthread_cond_destroy(&ed->rings[r].work);
		pthread_cond_destroy(&ed->rings[r].done);
	}
	free(ed->lanes);
	free(ed);
	q->priv = NULL;
}

/* Called once the rings exist. */
static int emu_dq_ready(struct vc_dq *q)
{
	struct emu_dq *ed = q->priv;
	for (uint32_t i = 0; i < ed->nlanes; i++) {
		struct emu_lane *ln = &ed->lanes[i];
		*ln = (struct emu_lane){ .q = q, .ring = i / q->lanes, .lane = i % q->lanes };
		int r = pthread_create(&ln->tid, NULL, emu_lane_main, ln);
		if (r)
			return vc_err(-r, "emu: cannot start a device-queue lane");
		ln->started = true;
	}
	return 0;
}

static const struct vc_dq_ops emu_dq_ops = {
	.health = emu_dq_health,
	.ready = emu_dq_ready,
	.notify = emu_dq_notify,
	.block = emu_dq_block,
	.fini = emu_dq_fini,
};

static int emu_dq_init(struct vc_device *d, struct vc_dq *q)
{
	if (q->nrings == 0)
		q->nrings = EMU_DQ_RINGS;
	if (q->nrings > VC_DQ_MAX_RINGS)
		return vc_err(-EINVAL, "emu: %u device-queue rings (at most %d)", q->nrings,
			      VC_DQ_MAX_RINGS);
	q->lanes = EMU_DQ_LANES;
	q->spin_ns = 2000;
	struct emu_dq *ed = calloc(1, sizeof *ed);
	if (!ed || !(ed->lanes = calloc((size_t)q->nrings * q->lanes, sizeof *ed->lanes))) {
		free(ed);
		return vc_err(-ENOMEM, "emu: out of memory");
	}
	ed->e = EMU(d);
	ed->nlanes = q->nrings * q->lanes;
	for (uint32_t r = 0; r < VC_DQ_MAX_RINGS; r++) {
		pthread_mutex_init(&ed->rings[r].mu, NULL);
		pthread_cond_init(&ed->rings[r].work, NULL);
		pthread_cond_init(&ed->rings[r].done, NULL);
	}
	q->priv = ed;
	q->ops = &emu_dq_ops;
	return 0;
}

/* Lanes and batch waiters notice within a nap (EMU_NAP_NS); the worker
 * is woken to drain what is queued. */
static int emu_fault(struct vc_device *d)
{
	struct emu *e = EMU(d);
	atomic_store(&e->faulted, true); /* seq_cst: see emu_lane_main */
	pthread_mutex_lock(&e->mu);
	pthread_cond_broadcast(&e->work);
	pthread_mutex_unlock(&e->mu);
	return 0;
}

static const struct vc_device_ops emu_ops = {
	.name = "emu",
	.close = emu_close,
	.host_alloc = emu_host_alloc,
	.host_free = emu_host_free,
	.host_register = emu_host_register,
	.host_unregister = emu_host_unregister,
	.mem_alloc = emu_mem_alloc,
	.mem_free = emu_mem_free,
	.batch_init = emu_batch_init,
	.batch_fini = emu_batch_fini,
	.batch_submit = emu_batch_submit,
	.batch_wait = emu_batch_wait,
	.memcpy_sync = emu_memcpy_sync,
	.gc_run = emu_gc_run,
	.fp_run = vc_emu_fp_run,
	.cmp_start = vc_emu_cmp_start,
	.cmp_wait = vc_emu_cmp_wait,
	.dq_init = emu_dq_init,
	.mem_reserve = vc_emu_mem_reserve,
	.mem_unreserve = vc_emu_mem_unreserve,
	.mem_map = vc_emu_mem_map,
	.mem_unmap = vc_emu_mem_unmap,
	.mem_unmap_n = vc_emu_mem_unmap_n,
	.mem_info = vc_emu_mem_info,
	.uuid = vc_emu_uuid,
	.fault = emu_fault,
};

int vc_emu_open(int ordinal, struct vc_device **out)
{
	struct emu *e = calloc(1, sizeof *e);
	if (!e)
		return vc_err(-ENOMEM, "emu: out of memory");
	e->dev.ops = &emu_ops;
	e->dev.ordinal = ordinal;
	strcpy(e->dev.desc, "emulated (host memory)");
	e->dev.map_granularity = vc_emu_granularity();
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->work, NULL);
	pthread_cond_init(&e->done, NULL);
	int r = pthread_create(&e->worker, NULL, worker_main, e);
	if (r) {
		free(e);
		return vc_err(-r, "emu: cannot start worker thread");
	}
	*out = &e->dev;
	return 0;
}
