/* Batcher: see batcher.h for when a batch closes.
 *
 * State of a slot: FREE -> OPEN (filling) -> INFLIGHT (submitted) -> FREE
 * once a thread has reaped it (waited on the device). At most one slot is
 * OPEN. A ticket names (slot, generation); opening a slot bumps its
 * generation, so a ticket whose generation is gone belongs to a batch that
 * completed, and its status is the batcher's sticky error (a device fault
 * breaks the device for good, so there is no per-batch status to lose).
 * Slots never wait for their adders: an adder that finds no free slot
 * reaps the oldest batch in flight itself, so adders holding unwaited
 * tickets can never block one another.
 *
 * All transitions happen under b->mu; device waits run unlocked, and
 * several threads may wait on one slot. Cost: add is O(1) under the mutex
 * (add_n takes it once for n moves); a submit (one kernel launch) also runs
 * under it.
 */
#include "engine/batcher.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/env.h"
#include "base/error.h"
#include "device/fp.h"
#include "device/queue.h"

/* Eight slots: one filling, the rest in flight or draining their waiters.
 * More only helps when many threads each hold a full batch outstanding. */
#define NSLOTS 8

enum { SLOT_FREE, SLOT_OPEN, SLOT_INFLIGHT };

struct slot {
	struct vc_dbatch db;
	int state;
	int status;   /* of the generation last completed */
	uint32_t gen;
	uint64_t seq; /* submission order, to reap the oldest first */
	uint64_t open_ns;
	uint64_t dev_addr; /* of db.moves */
};

struct vc_batcher {
	struct vc_dq *dq; /* the device-queue path, or NULL */
	_Atomic uint64_t q_wait_ns, q_hist[VC_BATCH_HIST]; /* its statistics */
	/* The queue path with a key: an add of at least launch_min pages
	 * sends all but launch_qpct percent of them (its tail) to launched
	 * batches on the slots below ("hybrid adds", dq_add_n); launch_min
	 * 0: never. */
	uint32_t launch_min, launch_qpct;
	uint32_t spread_pieces; /* a ring's least share of an add (DQ_SPREAD_PIECES) */
	/* Copy-engine mode (vc_batcher_set_dma): while nonzero, plain moves
	 * go to the slots below as dma batches (device.h), never to the
	 * rings' servers or a kernel. A count: modes nest. */
	_Atomic uint32_t dma;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC: slot state changed */
	struct vc_device *dev;
	uint32_t max_pages;
	uint64_t timeout_ns;
	int open; /* index of the OPEN slot, or -1 */
	uint32_t inflight;
	uint64_t seq;
	int error; /* sticky: the first failed batch's status */
	struct slot slots[NSLOTS];
	struct vc_batcher_stats st;
};

static int hist_bucket(uint32_t n)
{
	int b = 0;
	while (n > 1 && b < VC_BATCH_HIST - 1) {
		n >>= 1;
		b++;
	}
	return b;
}

/* The launched-batch slots, max_pages moves each. On failure frees what
 * it made. */
static int slots_init(struct vc_batcher *b, uint32_t page_size, uint32_t timeout_us,
		      const struct vc_xts_key *key)
{
	struct vc_device *dev = b->dev;
	b->timeout_ns = (uint64_t)timeout_us * 1000;
	b->open = -1;
	int i, r = 0;
	for (i = 0; i < NSLOTS; i++) {
		struct slot *s = &b->slots[i];
		void *mem;
		/* The moves, then their digests (VC_MOVE_FP): 32 + 16 bytes a move. */
		const size_t mlen = (size_t)b->max_pages * sizeof(struct vc_move);
		r = dev->ops->host_alloc(dev, mlen + (size_t)b->max_pages * sizeof(struct vc_fp_digest),
					 &mem, &s->dev_addr);
		if (r < 0)
			break;
		s->db.moves = mem;
		s->db.moves_dev = s->dev_addr;
		s->db.fp = (struct vc_fp_digest *)((char *)mem + mlen);
		s->db.fp_dev = s->dev_addr + mlen;
		s->db.cap = b->max_pages;
		s->db.page_size = page_size;
		s->db.key = key;
		r = dev->ops->batch_init(dev, &s->db);
		if (r < 0) {
			dev->ops->host_free(dev, mem);
			s->db.moves = NULL;
			break;
		}
	}
	if (r < 0) {
		while (i-- > 0) {
			dev->ops->batch_fini(dev, &b->slots[i].db);
			dev->ops->host_free(dev, b->slots[i].db.moves);
			b->slots[i].db.moves = NULL;
		}
	}
	return r;
}

static void slots_fini(struct vc_batcher *b)
{
	for (int i = 0; i < NSLOTS; i++) {
		struct slot *s = &b->slots[i];
		if (!s->db.moves)
			continue;
		if (s->state == SLOT_INFLIGHT)
			b->dev->ops->batch_wait(b->dev, &s->db);
		else if (s->state == SLOT_OPEN && s->db.n) {
			/* Adders broke the contract; run their moves anyway. */
			if (b->dev->ops->batch_submit(b->dev, &s->db) == 0)
				b->dev->ops->batch_wait(b->dev, &s->db);
		}
		b->dev->ops->batch_fini(b->dev, &s->db);
		b->dev->ops->host_free(b->dev, s->db.moves);
	}
}

/* A ring's server block takes up to this many pieces a round (the CUDA
 * server's window); a submission of more is spread over several rings
 * (VC_DQ_SPREAD_PIECES changes it, for measuring). */
#define DQ_SPREAD_PIECES 32u

/* Hybrid adds, defaults (measured on an H100 with bench/transfer, shares
 * of 0 to 60 % on the rings, docs/BENCHMARKS.md): from 512 pages, all of
 * it launched. A fifth on the rings did best while cipher batches had 2
 * streams (0.88-0.94 / 0.84-0.91 of plain at 512 pages, against
 * 0.88-0.93 / 0.80-0.86 for none); with 8 (device/cuda/internal.h) none
 * does (0.97-1.00 / 0.94-0.95, against 0.94-0.97 / 0.89-0.94). */
#define LAUNCH_MIN_PAGES 512u
#define LAUNCH_QUEUE_PCT 0u
/* A hybrid add's launched part goes out in batches of at most this many
 * moves (the slots' size on the queue path). */
#define LAUNCH_SLOT_PAGES 4096u

int vc_batcher_create(struct vc_device *dev, uint32_t page_size, uint32_t max_pages,
		      uint32_t timeout_us, const struct vc_xts_key *key, struct vc_batcher **out)
{
	if (max_pages == 0)
		return vc_err(-EINVAL, "batch size must be at least 1 page");
	struct vc_batcher *b = calloc(1, sizeof *b);
	if (!b)
		return vc_err(-ENOMEM, "out of memory");
	b->dev = dev;
	b->max_pages = max_pages;
	pthread_mutex_init(&b->mu, NULL);
	vc_cond_init_monotonic(&b->cv);
	const char *path = getenv("VC_MOVE_PATH");
	if (path && strcmp(path, "dma") == 0) /* copy engines, for measuring */
		atomic_store(&b->dma, 1);
	int r;
	if (dev->ops->dq_init && !(path && strcmp(path, "batch") == 0)) {
		struct vc_dq_config qc = { .page_size = page_size, .key = key };
		r = vc_dq_create(dev, &qc, &b->dq);
		if (r < 0)
			goto fail;
		/* With a key the rings' server blocks are few (one SM each)
		 * for a large add's AES: hybrid adds (dq_add_n). */
		b->launch_min = key ? vc_env_u32("VC_DQ_LAUNCH_MIN", LAUNCH_MIN_PAGES, 0, UINT32_MAX) : 0;
		b->launch_qpct = vc_env_u32("VC_DQ_LAUNCH_QPCT", LAUNCH_QUEUE_PCT, 0, 100);
		b->spread_pieces = vc_env_u32("VC_DQ_SPREAD_PIECES", DQ_SPREAD_PIECES, 1, UINT32_MAX);
		if (b->spread_pieces == 0)
			b->spread_pieces = 1;
		if (b->launch_qpct >= 100)
			b->launch_min = 0;
		/* The slots serve hybrid adds' launched parts and the
		 * copy-engine mode's batches. */
		if (b->launch_min)
			b->max_pages = LAUNCH_SLOT_PAGES;
		if ((r = slots_init(b, page_size, timeout_us, key)) < 0) {
			vc_dq_destroy(b->dq);
			goto fail;
		}
		*out = b;
		return 0;
	}
	if ((r = slots_init(b, page_size, timeout_us, key)) < 0)
		goto fail;
	*out = b;
	return 0;
fail:
	pthread_cond_destroy(&b->cv);
	pthread_mutex_destroy(&b->mu);
	free(b);
	return r;
}

const char *vc_batcher_path(const struct vc_batcher *b)
{
	return b->dq ? "queue" : "batch";
}

void vc_batcher_destroy(struct vc_batcher *b)
{
	if (!b)
		return;
	if (b->dq)
		vc_dq_destroy(b->dq);
	slots_fini(b);
	pthread_cond_destroy(&b->cv);
	pthread_mutex_destroy(&b->mu);
	free(b);
}

/* Moves a copy engine can do alone: no cipher, no fingerprint. */
static bool plain_moves(const struct vc_move *m, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (m[i].op & ~VC_MOVE_OP_MASK)
			return false;
	return true;
}

void vc_batcher_set_dma(struct vc_batcher *b, bool on)
{
	if (on)
		atomic_fetch_add(&b->dma, 1);
	else
		atomic_fetch_sub(&b->dma, 1);
}

/* The copy-engine mode takes these moves (to the slots, as dma batches). */
static bool dma_takes(struct vc_batcher *b, const struct vc_move *m, uint32_t n)
{
	return atomic_load_explicit(&b->dma, memory_order_relaxed) > 0 && plain_moves(m, n);
}

/* Under b->mu. */
static void submit(struct vc_batcher *b, int i)
{
	struct slot *s = &b->slots[i];
	if (b->open == i)
		b->open = -1;
	s->state = SLOT_INFLIGHT;
	s->seq = ++b->seq;
	s->db.dma = atomic_load(&b->dma) > 0 && plain_moves(s->db.moves, s->db.n);
	b->inflight++;
	b->st.batches++;
	b->st.pages += s->db.n;
	b->st.hist[hist_bucket(s->db.n)]++;
	int r = b->dev->ops->batch_submit(b->dev, &s->db);
	if (r < 0) {
		s->state = SLOT_FREE;
		s->status = r;
		if (!b->error)
			b->error = r;
		b->inflight--;
	}
	pthread_cond_broadcast(&b->cv);
}

/* Under b->mu, which it drops while waiting on the device: waits for the
 * in-flight slot i, then frees it. */
static void reap(struct vc_batcher *b, int i)
{
	struct slot *s = &b->slots[i];
	uint32_t gen = s->gen;
	pthread_mutex_unlock(&b->mu);
	int r = b->dev->ops->batch_wait(b->dev, &s->db);
	pthread_mutex_lock(&b->mu);
	if (s->state != SLOT_INFLIGHT || s->gen != gen)
		return; /* another waiter reaped it */
	s->state = SLOT_FREE;
	s->status = r;
	if (r < 0 && !b->error)
		b->error = r;
	b->inflight--;
	/* Work-conserving: the device just went idle and a batch is filling;
	 * start it instead of waiting for its timeout. */
	if (b->inflight == 0 && b->open >= 0 && b->slots[b->open].db.n > 0)
		submit(b, b->open);
	pthread_cond_broadcast(&b->cv);
}

/* Under b->mu: makes sure a slot is OPEN, reaping the oldest batch in
 * flight when every slot is taken. */
static void ensure_open(struct vc_batcher *b)
{
	while (b->open < 0) {
		int oldest = -1;
		for (int i = 0; i < NSLOTS; i++) {
			struct slot *s = &b->slots[i];
			if (s->state == SLOT_FREE) {
				s->state = SLOT_OPEN;
				s->gen++;
				s->db.n = 0;
				s->open_ns = vc_now_ns();
				b->open = i;
				return;
			}
			if (s->state == SLOT_INFLIGHT &&
			    (oldest < 0 || s->seq < b->slots[oldest].seq))
				oldest = i;
		}
		reap(b, oldest); /* NSLOTS > 1, so one is in flight */
	}
}

/* Adds n moves to launched batches: into the open slot, submitting each
 * slot that fills, and with `now` the last one too (a hybrid add's part:
 * nobody would wait on it before it ran). */
static void slots_add_n(struct vc_batcher *b, const struct vc_move *m, uint32_t n,
			struct vc_ticket *t, bool now)
{
	pthread_mutex_lock(&b->mu);
	for (uint32_t k = 0; k < n;) {
		ensure_open(b);
		int i = b->open;
		struct slot *s = &b->slots[i];
		uint32_t room = b->max_pages - s->db.n, take = n - k < room ? n - k : room;
		memcpy(&s->db.moves[s->db.n], &m[k], take * sizeof *m);
		s->db.n += take;
		for (uint32_t j = 0; j < take; j++)
			t[k + j] = (struct vc_ticket){ .slot = (uint32_t)i, .gen = s->gen,
						       .seq = s->db.n - take + j };
		k += take;
		if (s->db.n == b->max_pages || (now && k == n))
			submit(b, i);
	}
	pthread_mutex_unlock(&b->mu);
}

int vc_batcher_add(struct vc_batcher *b, const struct vc_move *m, struct vc_ticket *t)
{
	return vc_batcher_add_n(b, m, 1, t);
}

static int dq_wait_n(struct vc_batcher *b, const struct vc_ticket *t, uint32_t n);
static int slots_wait_n(struct vc_batcher *b, const struct vc_ticket *t, uint32_t n);


/* The rings' part of an add: the caller's home ring plus `ring` takes the
 * moves, or, when there are more than DQ_SPREAD_PIECES pieces, that ring
 * and the next ones take consecutive shares of at least DQ_SPREAD_PIECES
 * pieces each, one submission per ring. Why: one ring is one server block
 * on one SM, which moves about 9 GB/s plain and 2-3 GB/s through the
 * cipher (measured on an H100, bench/transfer); shares run on as many SMs
 * as there are rings. Other threads' moves on those rings wait at most the
 * share's rounds. A failed submission (a bad move: checked per share)
 * waits for the shares already submitted before it returns the error, so
 * a failed add leaves nothing in flight, as on one ring. */
static int dq_spread_n(struct vc_batcher *b, uint32_t ring, const struct vc_move *m, uint32_t n,
		       uint32_t min_pages, struct vc_ticket *t)
{
	const uint32_t ppp = b->dq->pieces_per_page, nr = b->dq->nrings;
	uint64_t per = ((uint64_t)n + nr - 1) / nr; /* pages a share */
	if (per < min_pages)
		per = min_pages;
	const uint32_t home = vc_dq_home(b->dq);
	for (uint32_t k = 0, j = 0; k < n; j++) {
		const uint32_t take = n - k < per ? n - k : (uint32_t)per;
		struct vc_dq_span sp;
		int r = vc_dq_submit(b->dq, (home + ring + j) % nr, m + k, take, &sp);
		if (r < 0) {
			dq_wait_n(b, t, k);
			return r;
		}
		for (uint32_t i = 0; i < take; i++)
			t[k + i] = (struct vc_ticket){ .slot = VC_TICKET_QUEUE | sp.ring,
						       .seq = sp.first + (uint64_t)(i + 1) * ppp - 1 };
		k += take;
	}
	return 0;
}

/* The queue path's add. A hybrid add (a key, and at least launch_min
 * pages): the rings' server blocks, 16 SMs, encrypt at 28-40 GB/s, below
 * the link, while launched batches use the other SMs but start only
 * after their blocks' setup (tables and key schedules, about 3-4 us:
 * measured on an H100, docs/BENCHMARKS.md), which batches in flight on
 * several streams hide. So the tail goes to launched batches, and the
 * head, launch_qpct percent of the pages (default none), to the rings,
 * which start at once, spread evenly over all of them (a ring's share of
 * a few pages takes about as long as the setup: in shares of 32 pages,
 * the rings' part outlasted the launched rest and halved the add's
 * rate); both share the link. The whole add is checked first, so a bad
 * move fails it with nothing submitted. */
static int dq_add_n(struct vc_batcher *b, uint32_t ring, const struct vc_move *m, uint32_t n,
		    struct vc_ticket *t)
{
	atomic_fetch_add_explicit(&b->q_hist[hist_bucket(n)], 1, memory_order_relaxed);
	const uint32_t ppp = b->dq->pieces_per_page;
	if (!b->launch_min || n < b->launch_min)
		return dq_spread_n(b, ring, m, n, (b->spread_pieces + ppp - 1) / ppp, t);
	int r = vc_dq_check(b->dq, m, n);
	if (r < 0)
		return r;
	const uint32_t q = (uint32_t)((uint64_t)n * b->launch_qpct / 100);
	slots_add_n(b, m + q, n - q, t + q, true);
	r = dq_spread_n(b, ring, m, q, 1, t);
	if (r < 0) /* checked above: not reached unless the queue broke */
		slots_wait_n(b, t + q, n - q);
	return r;
}

static bool dq_spans(struct vc_batcher *b, const struct vc_ticket *t, uint32_t n,
		     bool (*fn)(struct vc_batcher *b, const struct vc_dq_span *sp, int *err), int *err);

static bool span_wait(struct vc_batcher *b, const struct vc_dq_span *sp, int *err)
{
	int r = vc_dq_wait(b->dq, sp);
	if (r < 0 && !*err)
		*err = r;
	return true;
}

static bool is_queue(const struct vc_ticket *t)
{
	return (t->slot & VC_TICKET_QUEUE) != 0;
}

/* Waits for the queue path's tickets: runs of one ring's consecutive
 * tickets as one span each (the tickets of one add are), and a hybrid
 * add's launched tickets as the batch path does. */
static int dq_wait_n(struct vc_batcher *b, const struct vc_ticket *t, uint32_t n)
{
	uint64_t t0 = vc_now_ns();
	int err = 0;
	dq_spans(b, t, n, span_wait, &err);
	atomic_fetch_add_explicit(&b->q_wait_ns, vc_now_ns() - t0, memory_order_relaxed);
	return err;
}

/* Runs of tickets that are one ring's and consecutive, as spans: calls fn
 * on each until it returns false. Runs of launched tickets (hybrid adds)
 * are waited for, whatever fn: a launched batch has no cheaper test. */
static bool dq_spans(struct vc_batcher *b, const struct vc_ticket *t, uint32_t n,
		     bool (*fn)(struct vc_batcher *b, const struct vc_dq_span *sp, int *err), int *err)
{
	uint64_t ppp = b->dq->pieces_per_page;
	for (uint32_t i = 0, e; i < n; i = e) {
		if (!is_queue(&t[i])) {
			for (e = i + 1; e < n && !is_queue(&t[e]); e++)
				;
			int r = slots_wait_n(b, t + i, e - i);
			if (r < 0 && !*err)
				*err = r;
			continue;
		}
		for (e = i + 1; e < n && t[e].slot == t[i].slot && t[e].seq == t[e - 1].seq + ppp; e++)
			;
		struct vc_dq_span sp = { .ring = t[i].slot & ~VC_TICKET_QUEUE,
					 .first = t[i].seq + 1 - ppp,
					 .n = (uint32_t)(t[e - 1].seq - t[i].seq + ppp) };
		if (!fn(b, &sp, err))
			return false;
	}
	return true;
}

static bool span_done(struct vc_batcher *b, const struct vc_dq_span *sp, int *err)
{
	(void)err;
	return vc_dq_done(b->dq, sp);
}

bool vc_batcher_poll_n(struct vc_batcher *b, const struct vc_ticket *t, uint32_t n, bool ask,
		       int *err)
{
	*err = 0;
	if (!b->dq) {
		*err = vc_batcher_wait_n(b, t, n);
		return true;
	}
	if (dq_spans(b, t, n, span_done, err))
		return true;
	if (!ask)
		return false;
	int h = b->dq->ops->health(b->dq); /* a broken device completes nothing */
	if (h < 0)
		*err = h;
	return h < 0;
}

int vc_batcher_add_n_on(struct vc_batcher *b, uint32_t ring, const struct vc_move *m, uint32_t n,
			struct vc_ticket *t)
{
	if (b->dq && !dma_takes(b, m, n))
		return dq_add_n(b, ring, m, n, t);
	slots_add_n(b, m, n, t, false);
	return 0;
}

int vc_batcher_add_n(struct vc_batcher *b, const struct vc_move *m, uint32_t n,
		     struct vc_ticket *t)
{
	return vc_batcher_add_n_on(b, 0, m, n, t);
}

/* Under b->mu: waits for one ticket's batch; returns its status. */
static int wait_locked(struct vc_batcher *b, const struct vc_ticket *t)
{
	struct slot *s = &b->slots[t->slot];
	for (;;) {
		if (s->gen != t->gen)
			return b->error; /* completed, and the slot reused since */
		if (s->state == SLOT_OPEN) {
			uint64_t deadline = s->open_ns + b->timeout_ns;
			if (b->inflight == 0 || vc_now_ns() >= deadline) {
				submit(b, (int)t->slot);
				continue;
			}
			struct timespec ts = { (time_t)(deadline / 1000000000ull),
					       (long)(deadline % 1000000000ull) };
			pthread_cond_timedwait(&b->cv, &b->mu, &ts);
			continue;
		}
		if (s->state == SLOT_INFLIGHT) {
			reap(b, (int)t->slot);
			continue;
		}
		return s->status; /* FREE: completed, not yet reused */
	}
}

int vc_batcher_wait(struct vc_batcher *b, const struct vc_ticket *t)
{
	return vc_batcher_wait_n(b, t, 1);
}

int vc_batcher_wait_n(struct vc_batcher *b, const struct vc_ticket *t, uint32_t n)
{
	if (b->dq)
		return dq_wait_n(b, t, n);
	return slots_wait_n(b, t, n);
}

static int slots_wait_n(struct vc_batcher *b, const struct vc_ticket *t, uint32_t n)
{
	uint64_t t0 = vc_now_ns();
	int r = 0;
	pthread_mutex_lock(&b->mu);
	for (uint32_t k = 0; k < n; k++) {
		/* Tickets of one batch are adjacent when added together: wait
		 * once per (slot, generation). */
		if (k && t[k].slot == t[k - 1].slot && t[k].gen == t[k - 1].gen)
			continue;
		int e = wait_locked(b, &t[k]);
		if (e < 0 && r == 0)
			r = e;
	}
	b->st.wait_ns += vc_now_ns() - t0;
	pthread_mutex_unlock(&b->mu);
	return r;
}

void vc_batcher_fp_n(struct vc_batcher *b, const struct vc_ticket *t, uint32_t n,
		     struct vc_fp_digest *out, bool *ok)
{
	/* A batch's digests are there until its slot opens again (a new
	 * generation), which happens under b->mu. */
	pthread_mutex_lock(&b->mu);
	for (uint32_t i = 0; i < n; i++) {
		if (is_queue(&t[i])) {
			ok[i] = vc_dq_fp(b->dq, t[i].slot & ~VC_TICKET_QUEUE, t[i].seq, &out[i]);
			continue;
		}
		const struct slot *s = &b->slots[t[i].slot];
		ok[i] = s->gen == t[i].gen && s->state == SLOT_FREE;
		if (ok[i])
			out[i] = s->db.fp[t[i].seq];
	}
	pthread_mutex_unlock(&b->mu);
}

void vc_batcher_get_stats(struct vc_batcher *b, struct vc_batcher_stats *st)
{
	if (b->dq) {
		struct vc_dq_stats qs;
		vc_dq_get_stats(b->dq, &qs);
		pthread_mutex_lock(&b->mu); /* hybrid adds' launched batches */
		*st = (struct vc_batcher_stats){ .batches = qs.submits + b->st.batches,
						  .pages = qs.pieces / b->dq->pieces_per_page +
							   b->st.pages,
						  .wait_ns = atomic_load(&b->q_wait_ns) };
		pthread_mutex_unlock(&b->mu);
		for (int i = 0; i < VC_BATCH_HIST; i++)
			st->hist[i] = atomic_load_explicit(&b->q_hist[i], memory_order_relaxed);
		return;
	}
	pthread_mutex_lock(&b->mu);
	*st = b->st;
	pthread_mutex_unlock(&b->mu);
}
