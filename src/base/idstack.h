/* A lock-free LIFO stack of 32-bit ids below a fixed bound: the free lists
 * of the host tier's slots and of the page entries, which misses pop and
 * evictions push from many threads without a common lock.
 *
 * The head word packs the top id (+1, 0 = empty) with a tag that every
 * successful pop or push bumps, so a pop that read a stale `next` fails
 * its compare-and-swap instead of linking a taken id back in (ABA). next[]
 * entries are read racily by poppers and are only trusted after the CAS on
 * the head confirms nothing changed, hence atomic relaxed cells. LIFO
 * order reuses the most recently freed id first (warm memory).
 *
 * Ordering: a push is a release and a pop an acquire, so what the pusher
 * wrote for the id (a freed slot's data, a freed entry's reset fields)
 * happens before what the popper does with it.
 * Cost: O(1) per call, one CAS plus retries under contention. Memory:
 * 4 bytes per id.
 */
#ifndef VC_BASE_IDSTACK_H
#define VC_BASE_IDSTACK_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

struct vc_idstack {
	_Atomic uint64_t head;   /* tag << 32 | (top id + 1) */
	_Atomic int64_t count;   /* ids on the stack (exact when no call runs) */
	_Atomic uint32_t *next;  /* next[id]: the id below it, + 1 */
	uint32_t n;
};

/* Room for ids 0..n-1, all on the stack with 0 on top when `full`, else
 * empty. 0 or -ENOMEM. */
static inline int vc_idstack_init(struct vc_idstack *s, uint32_t n, bool full)
{
	s->n = n;
	s->next = calloc(n ? n : 1, sizeof *s->next);
	if (!s->next)
		return -ENOMEM;
	uint64_t top = 0;
	if (full) {
		for (uint32_t i = n; i-- > 0;) {
			atomic_init(&s->next[i], (uint32_t)top);
			top = (uint64_t)i + 1;
		}
	}
	atomic_init(&s->head, top);
	atomic_init(&s->count, full ? (int64_t)n : 0);
	return 0;
}

static inline void vc_idstack_fini(struct vc_idstack *s)
{
	free(s->next);
	s->next = NULL;
}

static inline void vc_idstack_push(struct vc_idstack *s, uint32_t id)
{
	uint64_t h = atomic_load_explicit(&s->head, memory_order_relaxed), nh;
	do {
		atomic_store_explicit(&s->next[id], (uint32_t)h, memory_order_relaxed);
		nh = ((h >> 32) + 1) << 32 | ((uint64_t)id + 1);
	} while (!atomic_compare_exchange_weak_explicit(&s->head, &h, nh, memory_order_release,
							memory_order_relaxed));
	atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
}

/* True and *id, or false when the stack is empty. */
static inline bool vc_idstack_pop(struct vc_idstack *s, uint32_t *id)
{
	uint64_t h = atomic_load_explicit(&s->head, memory_order_acquire), nh;
	do {
		uint32_t top = (uint32_t)h;
		if (top == 0)
			return false;
		uint32_t below = atomic_load_explicit(&s->next[top - 1], memory_order_relaxed);
		nh = ((h >> 32) + 1) << 32 | below;
	} while (!atomic_compare_exchange_weak_explicit(&s->head, &h, nh, memory_order_acquire,
							memory_order_acquire));
	*id = (uint32_t)h - 1;
	atomic_fetch_sub_explicit(&s->count, 1, memory_order_relaxed);
	return true;
}

static inline uint64_t vc_idstack_count(const struct vc_idstack *s)
{
	int64_t n = atomic_load_explicit(&s->count, memory_order_relaxed);
	return n > 0 ? (uint64_t)n : 0; /* a pop may count before its push did */
}

#endif
