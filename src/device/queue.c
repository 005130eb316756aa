/* Device queues: the producer side and the consumers' lifetime (queue.h).
 *
 * Starting and stopping. Producers never take a lock: after publishing
 * they read `running`, and only when it is false take q->mu to start the
 * consumers. The idler (a thread, for backends that can stop) stops them
 * when no ticket was claimed for idle_ns and all are done. The race
 * between a producer and a stop is Dekker's: the producer claims a ticket
 * (seq_cst add on the tail) and then reads `running`; the stopper clears
 * `running` (seq_cst) and then reads the tails against the lanes' saved
 * positions. One of them sees the other: the producer starts the
 * consumers, or the stopper finds a claimed ticket and restarts them.
 *
 * Waiting: spin q->spin_ns (the backend's choice: on CUDA a lone 4 KiB move
 * is a few microseconds, so a waiter spins), then the backend's bounded waits, with a health check between them, so a device
 * fault ends the wait with the device's error instead of hanging.
 */
#include "device/queue.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/atomics.h"
#include "base/clock.h"
#include "base/error.h"
#include "device/fp.h"
#include "vramcache.h"

static _Atomic uint32_t next_home;
static _Thread_local uint32_t my_home = UINT32_MAX;

uint32_t vc_dq_home(const struct vc_dq *q)
{
	if (my_home == UINT32_MAX)
		my_home = atomic_fetch_add_explicit(&next_home, 1, memory_order_relaxed);
	return my_home % q->nrings;
}

static bool ticket_done(const struct vc_dq *q, const struct vc_dq_ring *rg, uint64_t t)
{
	uint64_t d = atomic_load_explicit(&rg->done[t & (q->depth - 1)], memory_order_acquire);
	return d >= t + 1;
}

bool vc_dq_done(const struct vc_dq *q, const struct vc_dq_span *sp)
{
	const struct vc_dq_ring *rg = &q->rings[sp->ring];
	uint32_t k = sp->n < q->lanes ? sp->n : q->lanes;
	for (uint32_t i = 0; i < k; i++)
		if (!ticket_done(q, rg, sp->first + sp->n - 1 - i))
			return false;
	return true;
}

/* Under q->mu: whether a claimed ticket is not yet consumed, judged from
 * the lanes' saved positions (consumers stopped). */
static bool pending_locked(const struct vc_dq *q)
{
	for (uint32_t r = 0; r < q->nrings; r++) {
		uint64_t tail = atomic_load(&q->rings[r].tail); /* seq_cst: see file comment */
		for (uint32_t l = 0; l < q->lanes; l++)
			if (__atomic_load_n(&q->pos[r * q->lanes + l], __ATOMIC_ACQUIRE) < tail)
				return true;
	}
	return false;
}

static int start_locked(struct vc_dq *q)
{
	if (atomic_load(&q->running) || q->paused || q->closing)
		return 0;
	int r = q->ops->start(q);
	if (r == 0) {
		atomic_store(&q->running, true);
		atomic_fetch_add_explicit(&q->starts, 1, memory_order_relaxed);
		pthread_cond_signal(&q->cv);
	}
	return r;
}

/* Stops the consumers; restarts them if a producer slipped a ticket in
 * (unless paused or closing). */
static int stop_locked(struct vc_dq *q)
{
	if (!atomic_load(&q->running))
		return 0;
	int r = q->ops->stop(q);
	atomic_store(&q->running, false); /* seq_cst: before reading the tails */
	atomic_fetch_add_explicit(&q->stops, 1, memory_order_relaxed);
	if (r == 0 && pending_locked(q))
		r = start_locked(q);
	return r;
}

static int kick(struct vc_dq *q)
{
	pthread_mutex_lock(&q->mu);
	int r = start_locked(q);
	pthread_mutex_unlock(&q->mu);
	return r;
}

/* Whether any claimed ticket is not yet done: the last ticket of each
 * lane's class per ring. O(rings x lanes) loads. */
static bool busy(const struct vc_dq *q)
{
	for (uint32_t r = 0; r < q->nrings; r++) {
		const struct vc_dq_ring *rg = &q->rings[r];
		uint64_t tail = atomic_load_explicit(&rg->tail, memory_order_acquire);
		uint32_t k = tail < q->lanes ? (uint32_t)tail : q->lanes;
		for (uint32_t i = 0; i < k; i++)
			if (!ticket_done(q, rg, tail - 1 - i))
				return true;
	}
	return false;
}

static uint64_t tails_sum(const struct vc_dq *q)
{
	uint64_t s = 0;
	for (uint32_t r = 0; r < q->nrings; r++)
		s += atomic_load_explicit(&q->rings[r].tail, memory_order_relaxed);
	return s;
}

static void deadline_in(struct timespec *ts, uint64_t ns)
{
	uint64_t t = vc_now_ns() + ns;
	ts->tv_sec = (time_t)(t / 1000000000ull);
	ts->tv_nsec = (long)(t % 1000000000ull);
}

/* Stops the consumers once a whole idle period saw no new ticket and
 * nothing in flight. Checks twice per period: O(rings x lanes) loads. */
static void *idler_main(void *arg)
{
	struct vc_dq *q = arg;
	uint64_t seen = UINT64_MAX;
	pthread_mutex_lock(&q->mu);
	while (!q->closing) {
		if (!atomic_load(&q->running)) {
			seen = UINT64_MAX;
			pthread_cond_wait(&q->cv, &q->mu);
			continue;
		}
		struct timespec ts;
		deadline_in(&ts, q->idle_ns / 2);
		pthread_cond_timedwait(&q->cv, &q->mu, &ts);
		if (q->closing || !atomic_load(&q->running))
			continue;
		uint64_t now = tails_sum(q);
		if (now == seen && !busy(q))
			(void)stop_locked(q); /* an error shows to the waiters (health) */
		seen = now;
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

int vc_dq_create(struct vc_device *d, const struct vc_dq_config *cfg, struct vc_dq **out)
{
	uint32_t ps = cfg->page_size;
	if (ps < 512 || ps > (2u << 20) || (ps & (ps - 1)))
		return vc_err(-EINVAL, "device queue: page size %u is not a power of two in 512 B .. "
				       "2 MiB", ps);
	uint32_t depth = cfg->depth ? cfg->depth : 4096;
	if (depth < 64 || depth > (1u << 24) || (depth & (depth - 1)))
		return vc_err(-EINVAL, "device queue: depth %u is not a power of two in 64 .. 2^24",
			      depth);
	if (!d->ops->dq_init)
		return vc_err(-VC_ENOTBUILT, "device queue: backend %s has none", d->ops->name);
	struct vc_dq *q = calloc(1, sizeof *q);
	if (!q)
		return vc_err(-ENOMEM, "out of memory");
	q->dev = d;
	q->page_size = ps;
	q->piece = ps < VC_DQ_PIECE_MAX ? ps : VC_DQ_PIECE_MAX;
	q->pieces_per_page = ps / q->piece;
	q->depth = depth;
	q->dshift = (unsigned)__builtin_ctz(depth);
	q->nrings = cfg->nrings;
	q->key = cfg->key;
	q->idle_ns = (uint64_t)(cfg->idle_us ? cfg->idle_us : VC_DQ_IDLE_US) * 1000;
	pthread_mutex_init(&q->mu, NULL);
	vc_cond_init_monotonic(&q->cv);
	/* The backend fixes lanes and, where cfg leaves it 0, nrings; it may
	 * not allocate device-visible memory yet (the rings come next). */
	int r = d->ops->dq_init(d, q);
	if (r < 0) {
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->mu);
		free(q);
		return r;
	}
	if (q->nrings == 0 || q->nrings > VC_DQ_MAX_RINGS || q->lanes == 0 ||
	    q->lanes > VC_DQ_MAX_LANES) {
		r = vc_err(-EINVAL, "device queue: %u rings of %u lanes (at most %d of %d)", q->nrings,
			   q->lanes, VC_DQ_MAX_RINGS, VC_DQ_MAX_LANES);
		goto fail;
	}
	size_t per_ring = (size_t)depth * (sizeof(struct vc_dq_desc) + sizeof(uint64_t) +
					   sizeof(struct vc_dq_fp));
	size_t pos_bytes = (size_t)q->nrings * q->lanes * sizeof(uint64_t);
	size_t len = per_ring * q->nrings + pos_bytes + 64;
	uint64_t base_dev;
	r = d->ops->host_alloc(d, len, &q->mem, &base_dev);
	if (r < 0)
		goto fail;
	memset(q->mem, 0, len);
	char *h = q->mem;
	uint64_t off = 0;
	for (uint32_t i = 0; i < q->nrings; i++) {
		struct vc_dq_ring *rg = &q->rings[i];
		rg->desc = (struct vc_dq_desc *)(h + off);
		rg->desc_dev = base_dev + off;
		off += (size_t)depth * sizeof(struct vc_dq_desc);
		rg->done = (_Atomic uint64_t *)(h + off);
		rg->done_dev = base_dev + off;
		off += (size_t)depth * sizeof(uint64_t);
		rg->fp = (struct vc_dq_fp *)(h + off); /* 16-byte aligned: depth >= 64 */
		rg->fp_dev = base_dev + off;
		off += (size_t)depth * sizeof(struct vc_dq_fp);
	}
	q->pos = (uint64_t *)(h + off);
	q->pos_dev = base_dev + off;
	for (uint32_t i = 0; i < q->nrings * q->lanes; i++)
		q->pos[i] = i % q->lanes; /* lane l starts at ticket l */
	off += pos_bytes;
	q->stopw = (volatile uint32_t *)(h + off);
	q->stop_dev = base_dev + off;
	if (q->ops->ready && (r = q->ops->ready(q)) < 0)
		goto fail_mem;
	if (!q->ops->start) {
		atomic_store(&q->running, true);
	} else {
		r = pthread_create(&q->idler, NULL, idler_main, q);
		if (r) {
			r = vc_err(-r, "device queue: cannot start the idler thread");
			goto fail_mem;
		}
		q->has_idler = true;
	}
	*out = q;
	return 0;
fail_mem:
	if (q->ops->fini) /* before the rings go: consumers may read them */
		q->ops->fini(q);
	d->ops->host_free(d, q->mem);
	goto out;
fail:
	if (q->ops && q->ops->fini)
		q->ops->fini(q);
out:
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
	return r;
}

void vc_dq_destroy(struct vc_dq *q)
{
	if (!q)
		return;
	/* Everything submitted completes first (or the device is broken). */
	for (uint32_t r = 0; r < q->nrings; r++) {
		uint64_t tail = atomic_load(&q->rings[r].tail);
		struct vc_dq_span sp = { .ring = r, .first = 0, .n = (uint32_t)(tail < q->lanes ? tail : q->lanes) };
		sp.first = tail - sp.n;
		if (sp.n)
			(void)vc_dq_wait(q, &sp);
	}
	pthread_mutex_lock(&q->mu);
	q->closing = true;
	if (q->ops->stop)
		(void)stop_locked(q);
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	if (q->has_idler)
		pthread_join(q->idler, NULL);
	if (q->ops->fini)
		q->ops->fini(q);
	q->dev->ops->host_free(q->dev, q->mem);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

void vc_dq_pause(struct vc_dq *q)
{
	if (!q->ops->stop)
		return;
	pthread_mutex_lock(&q->mu);
	q->paused++;
	(void)stop_locked(q);
	pthread_mutex_unlock(&q->mu);
}

void vc_dq_resume(struct vc_dq *q)
{
	if (!q->ops->stop)
		return;
	pthread_mutex_lock(&q->mu);
	q->paused--;
	if (!atomic_load(&q->running) && pending_locked(q))
		(void)start_locked(q);
	pthread_mutex_unlock(&q->mu);
}

/* Waits until slot of ticket t is free: its previous use completed. 0,
 * or the device's error: a failed device completes nothing, so a
 * producer that found the ring full would wait for ever. The health
 * check runs only once the wait blocks (one query per bounded wait). */
static int wait_slot(struct vc_dq *q, struct vc_dq_ring *rg, uint32_t r, uint64_t t)
{
	if (t < q->depth)
		return 0;
	uint64_t prev = t - q->depth;
	for (unsigned i = 0; !ticket_done(q, rg, prev); i++) {
		if (!atomic_load(&q->running))
			(void)kick(q);
		if (i < 64) {
			vc_cpu_relax();
			continue;
		}
		int e = q->ops->health(q);
		if (e < 0)
			return e;
		if (q->ops->block)
			q->ops->block(q, r, prev);
		else
			sched_yield();
	}
	return 0;
}

int vc_dq_check(const struct vc_dq *q, const struct vc_move *m, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (((m[i].src + q->page_size - 1) | (m[i].dst + q->page_size - 1)) >> VC_DQ_ADDR_BITS)
			return vc_err(-EINVAL, "device queue: address %#llx or %#llx is past 2^%d",
				      (unsigned long long)m[i].src, (unsigned long long)m[i].dst,
				      VC_DQ_ADDR_BITS);
		int e = vc_move_check(&m[i], q->key);
		if (e < 0)
			return e;
		if ((m[i].op & VC_MOVE_FP) && q->pieces_per_page != 1)
			return vc_err(-EINVAL, "device queue: a fingerprint of a %u-byte page (one "
					       "piece at most)", q->page_size);
	}
	return 0;
}

int vc_dq_submit(struct vc_dq *q, uint32_t r, const struct vc_move *m, uint32_t n,
		 struct vc_dq_span *sp)
{
	if (r >= q->nrings)
		return vc_err(-EINVAL, "device queue: ring %u of %u", r, q->nrings);
	uint64_t npieces = (uint64_t)n * q->pieces_per_page;
	if (npieces > UINT32_MAX)
		return vc_err(-EINVAL, "device queue: %u pages in one submission", n);
	int e = vc_dq_check(q, m, n);
	if (e < 0)
		return e;
	struct vc_dq_ring *rg = &q->rings[r];
	*sp = (struct vc_dq_span){ .ring = r, .n = (uint32_t)npieces };
	if (n == 0) {
		sp->first = atomic_load_explicit(&rg->tail, memory_order_relaxed);
		return 0;
	}
	/* seq_cst: ordered before the read of `running` below (Dekker). */
	uint64_t t = atomic_fetch_add(&rg->tail, npieces);
	sp->first = t;
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t k = 0; k < q->pieces_per_page; k++, t++) {
			/* On an error the span's later tickets stay unpublished:
			 * the device is dead, and their waiters get its error. */
			if ((e = wait_slot(q, rg, r, t)) < 0)
				return e;
			struct vc_dq_desc *d = &rg->desc[t & (q->depth - 1)];
			uint64_t tag = vc_dq_tag(t, q->dshift) << VC_DQ_ADDR_BITS;
			uint64_t off = (uint64_t)k * q->piece;
			const uint64_t tw = m[i].tweak + k;
			atomic_store_explicit(&d->src, (m[i].src + off) | tag, memory_order_relaxed);
			atomic_store_explicit(&d->dst, (m[i].dst + off) | tag, memory_order_relaxed);
			atomic_store_explicit(&d->tweak, (tw & VC_DQ_ADDR_MASK) | tag,
					      memory_order_relaxed);
			/* Release for host consumers; seq_cst so that a consumer
			 * going to sleep and this store cannot miss each other
			 * (emu: the sleeper announces itself, then re-reads). */
			atomic_store(&d->op, (uint64_t)(m[i].op & 0xff) |
						     (tw >> VC_DQ_ADDR_BITS) << VC_DQ_OP_BITS | tag);
		}
	atomic_fetch_add_explicit(&rg->submits, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&rg->pieces, npieces, memory_order_relaxed);
	if (q->ops->notify)
		q->ops->notify(q, r);
	if (!atomic_load(&q->running)) /* seq_cst */
		return kick(q);
	return 0;
}

bool vc_dq_fp(const struct vc_dq *q, uint32_t r, uint64_t t, struct vc_fp_digest *out)
{
	const struct vc_dq_ring *rg = &q->rings[r];
	const struct vc_dq_fp *f = &rg->fp[t & (q->depth - 1)];
	uint64_t w[2] = { atomic_load_explicit(&f->w[0], memory_order_relaxed),
			  atomic_load_explicit(&f->w[1], memory_order_relaxed) };
	/* Acquire: had a later move's digest been read, its descriptor (which
	 * its consumer read before writing the digest) is seen below. */
	atomic_thread_fence(memory_order_acquire);
	uint64_t op = atomic_load_explicit(&rg->desc[t & (q->depth - 1)].op, memory_order_relaxed);
	if (op >> VC_DQ_ADDR_BITS != vc_dq_tag(t, q->dshift))
		return false;
	memcpy(out, w, sizeof w);
	return true;
}

int vc_dq_wait(struct vc_dq *q, const struct vc_dq_span *sp)
{
	if (sp->n == 0 || vc_dq_done(q, sp))
		return 0;
	uint64_t t0 = vc_now_ns();
	while (vc_now_ns() - t0 < q->spin_ns) {
		for (int i = 0; i < 16; i++)
			vc_cpu_relax();
		if (vc_dq_done(q, sp))
			return 0;
	}
	uint64_t last = sp->first + sp->n - 1;
	for (;;) {
		int r = q->ops->health(q);
		if (r < 0)
			return r;
		if (!atomic_load(&q->running))
			(void)kick(q); /* stopped while our tickets were claimed */
		if (q->ops->block)
			q->ops->block(q, sp->ring, last);
		else
			sched_yield();
		if (vc_dq_done(q, sp))
			return 0;
	}
}

void vc_dq_get_stats(const struct vc_dq *q, struct vc_dq_stats *st)
{
	memset(st, 0, sizeof *st);
	for (uint32_t r = 0; r < q->nrings; r++) {
		st->submits += atomic_load_explicit(&q->rings[r].submits, memory_order_relaxed);
		st->pieces += atomic_load_explicit(&q->rings[r].pieces, memory_order_relaxed);
	}
	st->starts = atomic_load_explicit(&q->starts, memory_order_relaxed);
	st->stops = atomic_load_explicit(&q->stops, memory_order_relaxed);
}
