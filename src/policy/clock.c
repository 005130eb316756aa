/* CLOCK, as FIFO-reinsertion: one FIFO queue per tier and a reference bit
 * per page (aux bit 0). A hit sets the bit; the victim search takes the
 * oldest page whose bit is clear, and moves each page it passes with the
 * bit set to the new end with the bit cleared (the hand of CLOCK sweeping
 * over it). Corbató, "A paging experiment with the Multics system", 1968.
 *
 * Cost: insert, hit, remove, count O(1); victim O(1) amortised, at most
 * 2n + 1 steps (each set bit is cleared once) plus O(1) per skipped page.
 * Metadata: the two pointers of vc_pnode and one bit of aux.
 */
#include <errno.h>
#include <stdlib.h>

#include "base/error.h"
#include "policy/list.h"
#include "policy/policies.h"

struct clock {
	struct vc_policy base;
	int ntiers;
	struct vc_pqueue q[];
};

#define CL(p) ((struct clock *)(p))
#define REF 1u

static struct vc_policy *clock_create(const uint64_t capacity[], int ntiers)
{
	(void)capacity;
	if (ntiers < 1 || ntiers >= VC_PNODE_NONE) {
		vc_err(-EINVAL, "clock: %d tiers (must be 1..%d)", ntiers, VC_PNODE_NONE - 1);
		return NULL;
	}
	struct clock *c = calloc(1, sizeof *c + (size_t)ntiers * sizeof c->q[0]);
	if (!c) {
		vc_err(-ENOMEM, "clock: out of memory");
		return NULL;
	}
	c->base.ops = &vc_policy_clock;
	c->ntiers = ntiers;
	for (int t = 0; t < ntiers; t++)
		vc_pq_init(&c->q[t]);
	return &c->base;
}

static void clock_destroy(struct vc_policy *p)
{
	free(p);
}

static void clock_insert(struct vc_policy *p, struct vc_pnode *n, int tier)
{
	n->aux = 0;
	n->tier = (uint8_t)tier;
	vc_pq_push(&CL(p)->q[tier], n);
}

static void clock_hit(struct vc_policy *p, struct vc_pnode *n)
{
	(void)p;
	n->aux |= REF;
}

static void clock_remove(struct vc_policy *p, struct vc_pnode *n)
{
	vc_pq_del(&CL(p)->q[n->tier], n);
	n->tier = VC_PNODE_NONE;
}

static struct vc_pnode *clock_victim(struct vc_policy *p, int tier, vc_skip_fn skip, void *arg)
{
	if (tier < 0 || tier >= CL(p)->ntiers)
		return NULL;
	struct vc_pqueue *q = &CL(p)->q[tier];
	struct vc_pnode *n = vc_pq_tail(q);
	for (uint64_t steps = 0, limit = 2 * q->n + 1; n && steps < limit; steps++) {
		struct vc_pnode *newer = vc_pq_newer(q, n);
		if (skip && skip(n, arg)) {
			n = newer;
			continue;
		}
		if (!(n->aux & REF))
			return n;
		n->aux &= ~REF;
		vc_pq_del(q, n);
		vc_pq_push(q, n);
		n = newer ? newer : n; /* the head itself was passed: it is next again */
	}
	return NULL;
}

static uint64_t clock_count(const struct vc_policy *p, int tier)
{
	const struct clock *c = (const struct clock *)p;
	return tier >= 0 && tier < c->ntiers ? c->q[tier].n : 0;
}

const struct vc_policy_ops vc_policy_clock = {
	.name = "clock",
	.cost = "O(1) insert/hit/remove, victim O(1) amortised (<= 2n+1 steps) + skipped; "
		"2 pointers + 1 bit per page",
	.create = clock_create,
	.destroy = clock_destroy,
	.insert = clock_insert,
	.hit = clock_hit,
	.remove = clock_remove,
	.victim = clock_victim,
	.count = clock_count,
};
