/* Queued policy updates: per-thread stamped queues, merged by stamp and
 * applied in batches under one lock (BAG, TPDS 2014, 3.3.3-3.3.4). The
 * contract is in opqueue.h; this comment is about how it holds.
 *
 * Queues. Each handle owns a ring of `len` slots (a power of two) with a
 * tail written only by its thread and a head written only by the drainer
 * (under q->lock). Slots [head, tail) are queued operations; a thread never
 * has more than len of them. Indices are 32-bit and wrap: tail - head is
 * always the fill. The producing thread's fields and the drainer's field
 * sit on separate cache lines, handles on separate lines from each other,
 * and each ring is its own allocation aligned to a line, so recording an
 * operation writes only lines its thread owns plus the stamp counter.
 *
 * Recording an operation, in this order:
 *   1. reserve: if the ring is full, drain (the only place a recording
 *      thread blocks; it is not inside steps 2-3 then); insert and remove
 *      then do their compare-and-swap on the node's gen;
 *   2. stamp = fetch_add(seq, 1);
 *   3. fill the slot, then publish tail + 1 (release).
 * Steps 2-3 never block, so a stamp taken is published within a few
 * instructions unless the thread is preempted there.
 *
 * Draining (under q->lock). base is the first stamp not yet applied; every
 * operation stamped below base has been applied and every one stamped at or
 * above it is still in a ring (published, or between steps 2 and 3). The
 * drainer reads S = seq and must apply exactly the S - base operations with
 * stamps in [base, S). It collects each ring's published prefix with
 * stamps below S (a ring's stamps increase, since one thread took them in
 * order) and, while fewer than S - base have turned up, rescans: the rest
 * are between steps 2 and 3 and appear without anyone needing the lock.
 * The stamps found are exactly base..S-1, each once, so the merge is a
 * counting sort whose counts are all one: slot (stamp - base) of the batch
 * array. Then it applies the batch in order and sets base = S.
 *
 * Why placement and not a k-way merge (both were measured: k queues of
 * 1000 randomly interleaved hits, merge into the batch then apply): with a
 * no-op policy placement cost 5-10 ns/op for k = 1..64, a binary-heap merge
 * 6 ns at k = 1 but 21, 44, 76, 105 ns at k = 2, 4, 16, 64 (a heap step
 * per op, with branches that follow the random interleaving). With LRU over
 * 4M nodes the list updates dominate and placement stayed 38-48 ns/op
 * against 33-141. Placement also frees the rings before the apply pass, so
 * recording threads can refill them meanwhile.
 *
 * Counter overflow. The counter is 32-bit and wraps; it is never reset (a
 * reset would race with threads between steps 2 and 3). Stamps are only
 * compared relative to base, modulo 2^32: everything stamped at or above
 * base sits in a reserved ring slot, so seq - base <= max_threads * len
 * <= 2^26, far below 2^31, and (stamp - base) is exact. That is the "range
 * restarts after a drain" of BAG, without a store that could lose a stamp.
 *
 * Stale operations: see opqueue.h (incarnations). The apply rules make the
 * policy's preconditions hold for any interleaving; the ordering guarantee
 * is what makes LRU order exact, not what keeps the lists intact.
 *
 * Queue length (VC_OPQ_QUEUE_LEN = 1024). A drain costs a lock round trip,
 * a scan of every handle and a batch of up to max_threads * len policy
 * calls. Longer queues amortise the first two over more operations and
 * make full-queue drains rarer; shorter ones bound how far the policy lags
 * (max_threads * len operations) and the pause of the thread that drains
 * (len * threads * ~30 ns of list updates, about 0.5 ms at 16 x 1024). The
 * ring is 24 KiB at 1024, within the recording core's L2. bag_fig4
 * --queue-len measures the trade: MQ-OPT, 2^23 keys, write-heavy, 2
 * threads on a shared 2-core VM (noisy, +-30%), ops/ms for queues of 16,
 * 64, 256, 1024, 4096: 3722, 3296, 5052, 9901, 6939; write-light 5285,
 * 5395, 6148, 11426, 9465. To be re-measured at 16 threads.
 */
#include "policy/opqueue.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/atomics.h"

#define LINE 64

enum { OP_INSERT = 1, OP_HIT = 2, OP_REMOVE = 3 };

/* One queued operation: 24 bytes. gen is the incarnation it is about. */
struct opq_slot {
	struct vc_opq_node *node;
	uint32_t stamp;
	uint32_t gen;
	uint8_t op;
	uint8_t tier;
};

struct vc_opq_local {
	/* The recording thread's line. */
	alignas(LINE) _Atomic uint32_t tail; /* next slot to fill; published with release */
	uint32_t head_seen;                   /* last head read: the ring has room below it */
	uint32_t len, mask;
	struct opq_slot *ring;
	struct vc_opq *q;
	/* The drainer's line. */
	alignas(LINE) _Atomic uint32_t head; /* first queued slot; written under q->lock */
	_Atomic int in_use;                  /* handle taken (attach/detach only) */
};

struct vc_opq {
	const struct vc_policy_ops *ops;
	struct vc_policy *pol;
	unsigned max_threads;
	uint32_t len;
	struct vc_opq_local *locals; /* max_threads of them, one line apart at least */
	_Atomic unsigned nused;       /* handles [0, nused) have ever been taken */

	alignas(LINE) _Atomic uint32_t seq; /* the stamp counter: its own line */

	alignas(LINE) pthread_mutex_t lock; /* guards everything below and the policy */
	uint32_t base;                       /* first stamp not yet applied */
	struct opq_slot *batch;              /* max_threads * len: the drain's sort buffer */
	struct vc_opq_stats st;
};


void vc_opq_node_init(struct vc_opq_node *n)
{
	n->pn.prev = n->pn.next = NULL;
	n->pn.aux = 0;
	n->pn.tier = VC_PNODE_NONE;
	atomic_init(&n->gen, 0);
	n->lgen = 0;
}

int vc_opq_create(const struct vc_policy_ops *ops, struct vc_policy *pol, unsigned max_threads,
		  unsigned queue_len, struct vc_opq **out)
{
	*out = NULL;
	if (!ops || !pol || max_threads < 1)
		return vc_err(-EINVAL, "opqueue: need a policy and at least one thread");
	uint64_t len = queue_len ? queue_len : VC_OPQ_QUEUE_LEN;
	uint64_t p2 = 1;
	while (p2 < len)
		p2 <<= 1;
	if (p2 * max_threads > (1u << 26))
		return vc_err(-EINVAL, "opqueue: %u threads x %llu ops exceeds 2^26", max_threads,
			      (unsigned long long)p2);
	struct vc_opq *q = aligned_alloc(LINE, sizeof *q);
	if (!q)
		return vc_err(-ENOMEM, "opqueue: out of memory");
	memset(q, 0, sizeof *q);
	q->ops = ops;
	q->pol = pol;
	q->max_threads = max_threads;
	q->len = (uint32_t)p2;
	atomic_init(&q->nused, 0);
	atomic_init(&q->seq, 0);
	q->base = 0;
	int r = pthread_mutex_init(&q->lock, NULL);
	if (r) {
		free(q);
		return vc_err(-r, "opqueue: mutex init failed");
	}
	size_t ring_bytes = ((size_t)p2 * sizeof(struct opq_slot) + LINE - 1) / LINE * LINE;
	q->locals = aligned_alloc(LINE, (size_t)max_threads * sizeof *q->locals);
	q->batch = malloc((size_t)p2 * max_threads * sizeof *q->batch);
	if (!q->locals || !q->batch)
		goto nomem;
	memset(q->locals, 0, (size_t)max_threads * sizeof *q->locals);
	for (unsigned i = 0; i < max_threads; i++) {
		struct vc_opq_local *l = &q->locals[i];
		atomic_init(&l->tail, 0);
		atomic_init(&l->head, 0);
		atomic_init(&l->in_use, 0);
		l->len = (uint32_t)p2;
		l->mask = (uint32_t)p2 - 1;
		l->q = q;
		l->ring = aligned_alloc(LINE, ring_bytes);
		if (!l->ring)
			goto nomem;
	}
	*out = q;
	return 0;
nomem:
	if (q->locals)
		for (unsigned i = 0; i < max_threads; i++)
			free(q->locals[i].ring);
	free(q->locals);
	free(q->batch);
	pthread_mutex_destroy(&q->lock);
	free(q);
	return vc_err(-ENOMEM, "opqueue: out of memory for %u queues of %llu", max_threads,
		      (unsigned long long)p2);
}

/* --- applying ------------------------------------------------------------ */

/* Applies one operation if it is about the node's current state (opqueue.h,
 * incarnations). Returns false when dropped as stale. */
static bool apply_one(struct vc_opq *q, const struct opq_slot *s)
{
	struct vc_opq_node *n = s->node;
	bool queued = n->pn.tier != VC_PNODE_NONE;
	switch (s->op) {
	case OP_HIT:
		if (!queued || n->lgen != s->gen)
			return false;
		q->ops->hit(q->pol, &n->pn);
		return true;
	case OP_REMOVE:
		if (!queued || n->lgen != s->gen)
			return false;
		q->ops->remove(q->pol, &n->pn);
		return true;
	default: /* OP_INSERT */
		if (atomic_load_explicit(&n->gen, memory_order_relaxed) != s->gen)
			return false; /* ended before we got here; its remove drops too */
		if (queued) {
			/* Still queued for an older incarnation: its remover took
			 * the stamp after its compare-and-swap, and this insert
			 * (whose compare-and-swap followed that one) got a stamp in
			 * between, so it overtook the remove. Unlink the dead link
			 * now; the remove, when applied, finds lgen moved on and
			 * drops. Parity makes lgen == gen impossible here. */
			q->ops->remove(q->pol, &n->pn);
		}
		q->ops->insert(q->pol, &n->pn, s->tier);
		n->lgen = s->gen;
		return true;
	}
}

/* Prefetch distance in operations: the list updates of one operation touch
 * three scattered lines (the node and its two neighbours), so the pass
 * keeps several operations' lines in flight: nodes at i + PF, neighbours at
 * i + PF/2 (by then the node's line has arrived). The neighbours read then
 * may change before use; a prefetch is only a hint. Measured on LRU hits
 * over 4M nodes (x86, 2 cores): no prefetch ~50 ns/op, PF 8 ~36, PF 16
 * ~32, PF 32 ~30; 16 takes most of the gain with a short window. */
#define PF 16

static void apply_batch(struct vc_opq *q, const struct opq_slot *b, uint32_t n)
{
	uint64_t stale = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (i + PF < n)
			__builtin_prefetch(b[i + PF].node, 1);
		if (i + PF / 2 < n) {
			const struct vc_pnode *p = &b[i + PF / 2].node->pn;
			__builtin_prefetch(p->prev, 1);
			__builtin_prefetch(p->next, 1);
		}
		stale += !apply_one(q, &b[i]);
	}
	q->st.applied += n - stale;
	q->st.stale += stale;
}

/* Collects every operation stamped in [base, S) into q->batch at
 * (stamp - base), frees their ring slots, applies them in order and
 * advances base to S. Caller holds q->lock. O(handles x passes + ops);
 * more than one pass only while a thread is between taking a stamp and
 * publishing it. */
static uint32_t drain_locked(struct vc_opq *q)
{
	const uint32_t base = q->base;
	const uint32_t want = atomic_load_explicit(&q->seq, memory_order_relaxed) - base;
	uint32_t got = 0;
	for (unsigned pass = 0; got < want; pass++) {
		/* Re-read each pass: a thread that attached after the last read
		 * may hold one of the stamps still missing. */
		unsigned nused = atomic_load_explicit(&q->nused, memory_order_acquire);
		for (unsigned i = 0; i < nused; i++) {
			struct vc_opq_local *l = &q->locals[i];
			uint32_t h = atomic_load_explicit(&l->head, memory_order_relaxed);
			uint32_t t = atomic_load_explicit(&l->tail, memory_order_acquire);
			uint32_t h0 = h;
			for (; h != t; h++) {
				const struct opq_slot *s = &l->ring[h & l->mask];
				uint32_t k = s->stamp - base;
				if (k >= want)
					break; /* this and later slots belong to the next drain */
				q->batch[k] = *s;
				got++;
			}
			if (h != h0)
				atomic_store_explicit(&l->head, h, memory_order_release);
		}
		if (got < want) {
			if (pass < 64)
				vc_cpu_relax();
			else
				sched_yield(); /* the missing stamp's thread was preempted */
		}
	}
	apply_batch(q, q->batch, want);
	q->base = base + want;
	q->st.drains++;
	if (want > q->st.max_batch)
		q->st.max_batch = want;
	return want;
}


/* --- recording ----------------------------------------------------------- */

static void lock_q(struct vc_opq *q)
{
	pthread_mutex_lock(&q->lock);
}

static void unlock_q(struct vc_opq *q)
{
	pthread_mutex_unlock(&q->lock);
}

/* Returns the slot for the next operation; drains first when the ring is
 * full. Ensures tail - head_seen < len. */
static inline struct opq_slot *reserve(struct vc_opq_local *l, uint32_t t)
{
	if (__builtin_expect(t - l->head_seen >= l->len, 0)) {
		l->head_seen = atomic_load_explicit(&l->head, memory_order_acquire);
		if (t - l->head_seen >= l->len) {
			struct vc_opq *q = l->q;
			lock_q(q);
			/* Another drainer may have emptied this ring while we waited. */
			if (t - atomic_load_explicit(&l->head, memory_order_relaxed) >= l->len) {
				drain_locked(q);
				q->st.full_drains++;
			}
			unlock_q(q);
			l->head_seen = atomic_load_explicit(&l->head, memory_order_acquire);
		}
	}
	return &l->ring[t & l->mask];
}

static inline void publish(struct vc_opq_local *l, struct opq_slot *s, uint32_t t, int op,
			   struct vc_opq_node *n, uint32_t gen, int tier)
{
	s->stamp = atomic_fetch_add_explicit(&l->q->seq, 1, memory_order_relaxed);
	s->node = n;
	s->gen = gen;
	s->op = (uint8_t)op;
	s->tier = (uint8_t)tier;
	atomic_store_explicit(&l->tail, t + 1, memory_order_release);
}

uint32_t vc_opq_insert(struct vc_opq_local *l, struct vc_opq_node *n, int tier)
{
	if (tier < 0 || tier >= VC_PNODE_NONE)
		return 0;
	uint32_t t = atomic_load_explicit(&l->tail, memory_order_relaxed);
	struct opq_slot *s = reserve(l, t);
	uint32_t g = atomic_load_explicit(&n->gen, memory_order_relaxed);
	if (vc_opq_gen_live(g) ||
	    !atomic_compare_exchange_strong_explicit(&n->gen, &g, g + 1, memory_order_acq_rel,
						     memory_order_relaxed))
		return 0;
	publish(l, s, t, OP_INSERT, n, g + 1, tier);
	return g + 1;
}

void vc_opq_hit(struct vc_opq_local *l, struct vc_opq_node *n, uint32_t gen)
{
	uint32_t t = atomic_load_explicit(&l->tail, memory_order_relaxed);
	struct opq_slot *s = reserve(l, t);
	publish(l, s, t, OP_HIT, n, gen, 0);
}

/* Ends incarnation gen: true for the one caller whose CAS moves it on. */
static bool end_incarnation(struct vc_opq_node *n, uint32_t gen)
{
	return vc_opq_gen_live(gen) &&
	       atomic_compare_exchange_strong_explicit(&n->gen, &gen, gen + 1, memory_order_acq_rel,
						       memory_order_relaxed);
}

bool vc_opq_remove(struct vc_opq_local *l, struct vc_opq_node *n, uint32_t gen)
{
	uint32_t t = atomic_load_explicit(&l->tail, memory_order_relaxed);
	struct opq_slot *s = reserve(l, t);
	if (!end_incarnation(n, gen))
		return false;
	publish(l, s, t, OP_REMOVE, n, gen, 0);
	return true;
}

bool vc_opq_remove_now(struct vc_opq *q, struct vc_opq_node *n, uint32_t gen)
{
	lock_q(q);
	bool won = end_incarnation(n, gen);
	/* If its insert is still queued, that insert is now stale and will be
	 * dropped; ops stamped for gen likewise. */
	if (won && n->pn.tier != VC_PNODE_NONE && n->lgen == gen) {
		q->ops->remove(q->pol, &n->pn);
		q->st.applied++;
	}
	unlock_q(q);
	return won;
}

uint32_t vc_opq_last_stamp(const struct vc_opq_local *l)
{
	/* The slot stays as the owner wrote it until the owner reuses it; the
	 * drainer only reads it. */
	uint32_t t = atomic_load_explicit(&l->tail, memory_order_relaxed);
	return l->ring[(t - 1) & l->mask].stamp;
}

/* --- handles --------------------------------------------------------------- */

struct vc_opq_local *vc_opq_attach(struct vc_opq *q)
{
	for (unsigned i = 0; i < q->max_threads; i++) {
		struct vc_opq_local *l = &q->locals[i];
		int free_ = 0;
		if (atomic_load_explicit(&l->in_use, memory_order_relaxed) ||
		    !atomic_compare_exchange_strong_explicit(&l->in_use, &free_, 1,
							     memory_order_acquire,
							     memory_order_relaxed))
			continue;
		unsigned u = atomic_load_explicit(&q->nused, memory_order_relaxed);
		while (u < i + 1 &&
		       !atomic_compare_exchange_weak_explicit(&q->nused, &u, i + 1,
							      memory_order_release,
							      memory_order_relaxed))
			;
		l->head_seen = atomic_load_explicit(&l->head, memory_order_acquire);
		return l;
	}
	vc_err(-EBUSY, "opqueue: all %u handles are taken", q->max_threads);
	return NULL;
}

void vc_opq_detach(struct vc_opq_local *l)
{
	struct vc_opq *q = l->q;
	lock_q(q);
	drain_locked(q); /* takes all of l's operations: l is not mid-record */
	unlock_q(q);
	atomic_store_explicit(&l->in_use, 0, memory_order_release);
}

/* --- exact-order users ----------------------------------------------------- */

unsigned vc_opq_drain(struct vc_opq *q)
{
	lock_q(q);
	uint32_t n = drain_locked(q);
	unlock_q(q);
	return n;
}

struct skip_dead {
	vc_skip_fn skip;
	void *arg;
};

/* A node whose incarnation has ended is leaving (its removal is queued or
 * in flight): not a victim. */
static bool skip_dead(const struct vc_pnode *p, void *arg)
{
	const struct vc_opq_node *n = (const struct vc_opq_node *)p;
	const struct skip_dead *w = arg;
	if (atomic_load_explicit(&n->gen, memory_order_relaxed) != n->lgen)
		return true;
	return w->skip && w->skip(p, w->arg);
}

struct vc_opq_node *vc_opq_victim(struct vc_opq *q, int tier, vc_skip_fn skip, void *arg)
{
	struct skip_dead w = { skip, arg };
	lock_q(q);
	drain_locked(q);
	struct vc_pnode *p = q->ops->victim(q->pol, tier, skip_dead, &w);
	unlock_q(q);
	return p ? vc_opq_node_of(p) : NULL;
}

unsigned vc_opq_victims(struct vc_opq *q, int tier, vc_skip_fn skip, void *arg, vc_take_fn take,
			void *targ, unsigned max)
{
	struct skip_dead w = { skip, arg };
	unsigned n = 0;
	lock_q(q);
	drain_locked(q);
	while (n < max) {
		struct vc_pnode *p = q->ops->victim(q->pol, tier, skip_dead, &w);
		if (!p || !take(vc_opq_node_of(p), targ))
			break;
		n++;
	}
	unlock_q(q);
	return n;
}

struct vc_opq_node *vc_opq_evict(struct vc_opq *q, int tier, vc_skip_fn skip, void *arg,
				 uint32_t *gen)
{
	struct skip_dead w = { skip, arg };
	struct vc_opq_node *n = NULL;
	lock_q(q);
	drain_locked(q);
	for (;;) {
		struct vc_pnode *p = q->ops->victim(q->pol, tier, skip_dead, &w);
		if (!p)
			break;
		n = vc_opq_node_of(p);
		uint32_t g = n->lgen;
		if (end_incarnation(n, g)) {
			q->ops->remove(q->pol, p);
			q->st.applied++;
			if (gen)
				*gen = g;
			break;
		}
		/* A concurrent vc_opq_remove ended it first: it is dead now and
		 * the next victim() passes over it. At most one retry per
		 * concurrent remover. */
		n = NULL;
	}
	unlock_q(q);
	return n;
}

void vc_opq_miss(struct vc_opq *q, uint64_t key, int tier)
{
	if (!q->ops->miss)
		return;
	lock_q(q);
	drain_locked(q);
	q->ops->miss(q->pol, key, tier);
	unlock_q(q);
}

uint64_t vc_opq_count(struct vc_opq *q, int tier)
{
	lock_q(q);
	drain_locked(q);
	uint64_t c = q->ops->count(q->pol, tier);
	unlock_q(q);
	return c;
}

struct vc_policy *vc_opq_lock(struct vc_opq *q)
{
	lock_q(q);
	drain_locked(q);
	return q->pol;
}

void vc_opq_unlock(struct vc_opq *q)
{
	unlock_q(q);
}

void vc_opq_get_stats(struct vc_opq *q, struct vc_opq_stats *s)
{
	lock_q(q);
	*s = q->st;
	unlock_q(q);
}

void vc_opq_destroy(struct vc_opq *q)
{
	if (!q)
		return;
	drain_locked(q);
	for (unsigned i = 0; i < q->max_threads; i++)
		free(q->locals[i].ring);
	free(q->locals);
	free(q->batch);
	pthread_mutex_destroy(&q->lock);
	free(q);
}
