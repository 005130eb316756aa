/* LRU replacement for GRAM's two-tier cache.
 *
 * Each tier has its own LRU queue. The engine moves a host-tier victim to the
 * GPU tier by remove() then insert(n, gpu), which puts it at the MRU head of
 * the GPU queue; so the host queue followed by the GPU queue reads as one
 * virtual LRU queue of capacity host + gpu, with the GPU tier holding its
 * colder end. The policy itself never moves pages between tiers.
 *
 * Structure: per tier, an intrusive circular doubly linked list through
 * vc_pnode.prev/next with a sentinel node. sentinel.next is the MRU head,
 * sentinel.prev the LRU tail; an empty queue has both pointing at the
 * sentinel, so no operation tests for NULL or for the ends.
 *
 * Cost: insert, hit, remove and count are O(1); victim is O(1 + pages
 * skipped). Metadata: the two pointers of vc_pnode; aux is unused.
 * No call allocates after create().
 *
 * Not thread safe: the caller serialises calls on one policy.
 */
#include "policy/lru.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "base/error.h"

struct lru_queue {
	struct vc_pnode head; /* sentinel: head.next is MRU, head.prev is LRU */
	uint64_t n;
};

struct lru {
	struct vc_policy base;
	int ntiers;
	struct lru_queue q[];
};

#define LRU(p) ((struct lru *)(p))

static void link_head(struct lru_queue *q, struct vc_pnode *n)
{
	n->prev = &q->head;
	n->next = q->head.next;
	q->head.next->prev = n;
	q->head.next = n;
}

static void unlink_node(struct vc_pnode *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
}

static struct vc_policy *lru_create(const uint64_t capacity[], int ntiers)
{
	(void)capacity; /* LRU needs no sizes: a tier is as large as the engine fills it */
	/* Tier ids must fit vc_pnode.tier and stay below VC_PNODE_NONE. */
	if (ntiers < 1 || ntiers >= VC_PNODE_NONE) {
		vc_err(-EINVAL, "lru: %d tiers (must be 1..%d)", ntiers, VC_PNODE_NONE - 1);
		return NULL;
	}
	struct lru *l = calloc(1, sizeof *l + (size_t)ntiers * sizeof l->q[0]);
	if (!l) {
		vc_err(-ENOMEM, "lru: out of memory for %d tiers", ntiers);
		return NULL;
	}
	l->base.ops = &vc_policy_lru;
	l->ntiers = ntiers;
	for (int t = 0; t < ntiers; t++) {
		struct vc_pnode *h = &l->q[t].head;
		h->prev = h->next = h;
		h->tier = (uint8_t)t;
	}
	return &l->base;
}

static void lru_destroy(struct vc_policy *p)
{
	free(p);
}

/* Precondition: n is not queued (its prev/next/tier need not be initialised)
 * and 0 <= tier < ntiers. */
static void lru_insert(struct vc_policy *p, struct vc_pnode *n, int tier)
{
	assert(tier >= 0 && tier < LRU(p)->ntiers);
	struct lru_queue *q = &LRU(p)->q[tier];
	link_head(q, n);
	n->tier = (uint8_t)tier;
	q->n++;
}

/* Precondition: n is queued. */
static void lru_hit(struct vc_policy *p, struct vc_pnode *n)
{
	assert(n->tier < LRU(p)->ntiers && n->prev && n->next);
	struct lru_queue *q = &LRU(p)->q[n->tier];
	if (q->head.next == n)
		return;
	unlink_node(n);
	link_head(q, n);
}

/* Precondition: n is queued. Leaves n->prev/next NULL so that a stale use
 * faults instead of corrupting a queue. */
static void lru_remove(struct vc_policy *p, struct vc_pnode *n)
{
	assert(n->tier < LRU(p)->ntiers && n->prev && n->next);
	struct lru_queue *q = &LRU(p)->q[n->tier];
	unlink_node(n);
	n->prev = n->next = NULL;
	n->tier = VC_PNODE_NONE;
	q->n--;
}

static struct vc_pnode *lru_victim(struct vc_policy *p, int tier, vc_skip_fn skip, void *arg)
{
	struct lru *l = LRU(p);
	if (tier < 0 || tier >= l->ntiers)
		return NULL;
	struct vc_pnode *h = &l->q[tier].head;
	for (struct vc_pnode *n = h->prev; n != h; n = n->prev)
		if (!skip || !skip(n, arg))
			return n;
	return NULL;
}

static uint64_t lru_count(const struct vc_policy *p, int tier)
{
	const struct lru *l = (const struct lru *)p;
	if (tier < 0 || tier >= l->ntiers)
		return 0;
	return l->q[tier].n;
}

const struct vc_policy_ops vc_policy_lru = {
	.name = "lru",
	.cost = "O(1) insert/hit/remove/count, victim O(1 + skipped); 2 pointers per page",
	.create = lru_create,
	.destroy = lru_destroy,
	.insert = lru_insert,
	.hit = lru_hit,
	.remove = lru_remove,
	.victim = lru_victim,
	.count = lru_count,
};
