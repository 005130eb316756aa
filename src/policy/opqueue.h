/* Queued policy updates (BAG, Chen et al., TPDS 2014, sections 3.3.3-3.3.4).
 *
 * A replacement policy (policy.h) is a serial structure: one LRU list per
 * tier. Taking a lock around it on every page access makes that lock the
 * point every thread meets. Here a thread instead records its policy calls
 * (insert, hit, remove) in a queue of its own, stamped from one global
 * counter, and the queues are applied to the policy in batches, in stamp
 * order, under the queue layer's lock: when a thread's queue is full, or
 * when someone needs the exact order (vc_opq_drain, vc_opq_victim, vc_opq_miss,
 * vc_opq_evict, vc_opq_lock: eviction and GC). Between drains the policy
 * lags the truth by at most max_threads * queue_len operations.
 *
 * Ordering guarantee. Every drain applies exactly the operations stamped
 * below a snapshot S of the counter, all of them, in stamp order, and
 * nothing at or above S. So the policy sees one global sequence: the stamp
 * order, which agrees with happens-before (if call A happens before call B,
 * A's stamp is smaller).
 *
 * Incarnations (the race of BAG section 3.3.4: eviction picks a page that
 * still has operations queued). Each node carries `gen`: odd while the page
 * is live (inserted and not yet removed), even while it is free. insert
 * moves gen from even e to e+1 and returns e+1, the incarnation; ending the
 * incarnation (vc_opq_remove, vc_opq_remove_now or vc_opq_evict) moves it
 * from odd g to g+1 by compare-and-swap, so exactly one of racing removers
 * wins and the others get false. Every queued operation records the
 * incarnation it is about; at apply time
 *   insert(g)  applies only if g is still the node's live incarnation
 *              (a link left from an older incarnation whose remove is not
 *              applied yet is taken out first),
 *   hit(g), remove(g)  apply only if the node is queued in the policy for
 *                      incarnation g (lgen == g),
 * and everything else is dropped as stale. So a hit queued before an
 * eviction and applied after it, or after the page was reinserted as a
 * new incarnation, does nothing; the policy's own preconditions (insert
 * only an unqueued node, hit or remove only a queued one) hold whatever the
 * interleaving. A node still queued in the policy whose incarnation has
 * ended (its remove is queued or in flight) is "dead": victim and evict
 * pass over it, since it is already leaving.
 *
 * Thread model. Each thread that records operations takes a handle once
 * (vc_opq_attach) and uses it alone; everything else may be called from
 * any thread. Nothing here blocks except on the queue layer's lock, taken
 * only to drain. The policy object is used only under that lock: callers
 * must not call it directly while the queue layer exists, except between
 * vc_opq_lock and vc_opq_unlock, and then only to read (victim with a skip
 * function, count).
 */
#ifndef VC_OPQUEUE_H
#define VC_OPQUEUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "policy/policy.h"

/* Per-page state: the policy node plus the incarnation. Embed it where the
 * engine embeds struct vc_pnode (first member, so policy nodes map back to
 * pages by cast). 32 bytes. */
struct vc_opq_node {
	struct vc_pnode pn;   /* first: pn maps back by cast; touched only under the lock */
	_Atomic uint32_t gen; /* incarnation: odd = live, even = free; see above */
	uint32_t lgen;        /* incarnation pn is queued for in the policy; under the lock */
};

/* A free node: not queued, gen even. */
void vc_opq_node_init(struct vc_opq_node *n);

static inline struct vc_opq_node *vc_opq_node_of(const struct vc_pnode *p)
{
	return (struct vc_opq_node *)p;
}

/* The node's current incarnation: odd while live. A reader that finds a
 * page through an index and hits it later should read this when it finds
 * the page (or keep it in the index value) and pass it to vc_opq_hit, so
 * that a hit racing with eviction and reuse of the node is dropped. */
static inline uint32_t vc_opq_gen(const struct vc_opq_node *n)
{
	return atomic_load_explicit(&n->gen, memory_order_acquire);
}

static inline bool vc_opq_gen_live(uint32_t gen)
{
	return gen & 1;
}

struct vc_opq;
struct vc_opq_local;

/* Default queue length: see opqueue.c ("Queue length"). */
#define VC_OPQ_QUEUE_LEN 1024u

/* Wraps `pol` (of `ops`; the caller keeps ownership and destroys it after
 * vc_opq_destroy). max_threads handles of queue_len operations each
 * (queue_len: 0 means VC_OPQ_QUEUE_LEN; rounded up to a power of two;
 * max_threads * queue_len at most 2^26). 0 or -errno. */
int vc_opq_create(const struct vc_policy_ops *ops, struct vc_policy *pol, unsigned max_threads,
		  unsigned queue_len, struct vc_opq **out);
/* Applies what is still queued, then frees. No other call may run. */
void vc_opq_destroy(struct vc_opq *q);

/* A handle for the calling thread, or NULL (with vc_err) when max_threads
 * handles are taken. One thread at a time uses a handle. */
struct vc_opq_local *vc_opq_attach(struct vc_opq *q);
/* Applies the handle's queued operations (a drain) and gives it back. */
void vc_opq_detach(struct vc_opq_local *l);

/* Queued operations. Cost: one atomic add on the shared stamp counter and
 * a 24-byte record in the caller's own queue; insert and remove also do
 * one compare-and-swap on the node. When the caller's queue is full the
 * call first drains every queue (under the lock), which costs
 * O(handles + queued operations).
 *
 * insert: starts a new incarnation of a free node (the caller owns it: no
 * other insert or remove of n runs at the same time) and queues its
 * insertion in `tier`. Returns the incarnation (odd), or 0 when n was
 * live, in which case nothing is queued (a caller bug). */
uint32_t vc_opq_insert(struct vc_opq_local *l, struct vc_opq_node *n, int tier);
/* A use of incarnation `gen` of n (from vc_opq_gen or vc_opq_insert). A
 * stale gen is fine: the hit is dropped. Does not read or write n. */
void vc_opq_hit(struct vc_opq_local *l, struct vc_opq_node *n, uint32_t gen);
/* Ends incarnation `gen` of n and queues its removal from the policy. True
 * if this call ended it; false if it had already ended (another remover or
 * an eviction won), and then nothing is queued. After a true return the
 * node may be reused (vc_opq_insert) at once. */
bool vc_opq_remove(struct vc_opq_local *l, struct vc_opq_node *n, uint32_t gen);
/* As vc_opq_remove, but takes the node out of the policy now, under the
 * lock, without draining: for callers with no handle, or that must see the
 * policy without n at once. O(1) plus the lock. */
bool vc_opq_remove_now(struct vc_opq *q, struct vc_opq_node *n, uint32_t gen);

/* Applies every operation stamped so far, in stamp order. Returns how many
 * were applied (stale ones included). O(handles + queued operations). */
unsigned vc_opq_drain(struct vc_opq *q);

/* Drains, then asks the policy for `tier`'s victim, passing over dead
 * nodes and those `skip` rejects (skip runs under the lock and must not
 * call into this queue). NULL if none. The node is not removed and may be
 * removed by others once this returns: prefer vc_opq_evict. */
struct vc_opq_node *vc_opq_victim(struct vc_opq *q, int tier, vc_skip_fn skip, void *arg);
/* A batch of victims with one drain: drains, then offers `tier`'s victims
 * (as vc_opq_victim picks them) to take() one by one, up to max. take
 * returns true to take the node, and must then make skip reject it (the
 * engine claims the page), or false to stop. Returns how many were taken.
 * All under the lock: take, like skip, must not call into this queue.
 * O(handles + queued operations) once, plus the policy's victim calls. */
typedef bool (*vc_take_fn)(struct vc_opq_node *n, void *arg);
unsigned vc_opq_victims(struct vc_opq *q, int tier, vc_skip_fn skip, void *arg, vc_take_fn take,
			void *targ, unsigned max);
/* Drains, picks the victim as vc_opq_victim does and ends its incarnation
 * and removes it from the policy, all under the lock. *gen (if not NULL)
 * gets the incarnation that was ended. The node is free on return. */
struct vc_opq_node *vc_opq_evict(struct vc_opq *q, int tier, vc_skip_fn skip, void *arg,
				 uint32_t *gen);
/* Tells the policy that the page `key` missed and will enter `tier`
 * (vc_policy_ops.miss), after draining, so that it sees the state the
 * next victim choice sees; nothing when the policy has no miss().
 * O(handles + queued operations) plus the lock. */
void vc_opq_miss(struct vc_opq *q, uint64_t key, int tier);
/* Drains and returns the number of pages queued in `tier` (dead ones
 * included until their removal is applied). */
uint64_t vc_opq_count(struct vc_opq *q, int tier);

/* Takes the lock and drains: the policy is exact and stays still until
 * vc_opq_unlock (GC walks it in LRU order). Returns the policy, for reads
 * only. Recording threads keep running; one whose queue fills waits. */
struct vc_policy *vc_opq_lock(struct vc_opq *q);
void vc_opq_unlock(struct vc_opq *q);

/* The stamp of the last operation recorded through l (by l's thread, with
 * no recording call since). Stamps are 32-bit and wrap; for tests that
 * check the applied order against their own record. */
uint32_t vc_opq_last_stamp(const struct vc_opq_local *l);

struct vc_opq_stats {
	uint64_t drains;      /* all drains */
	uint64_t full_drains; /* drains because a recording thread's queue was full */
	uint64_t applied;     /* operations applied to the policy */
	uint64_t stale;       /* operations dropped by the incarnation check */
	uint64_t max_batch;   /* largest number of operations in one drain */
};
void vc_opq_get_stats(struct vc_opq *q, struct vc_opq_stats *s);

#endif
