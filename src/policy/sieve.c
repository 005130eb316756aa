/* SIEVE (Zhang et al., "SIEVE is Simpler than LRU: an Efficient Turn-Key
 * Eviction Algorithm for Web Caches", NSDI 2024): one FIFO queue per tier,
 * a visited bit per page (aux bit 0) and a hand. New pages enter at the
 * head; a hit sets the bit; the hand moves from the tail toward the head,
 * clearing set bits, and stops at the first page whose bit is clear: the
 * victim. Unlike CLOCK, passed pages stay where they are, so new pages
 * near the head are judged sooner. The hand wraps from the head to the
 * tail; removing the page under the hand moves the hand one step newer.
 *
 * Cost: insert, hit, remove, count O(1); victim O(1) amortised, at most
 * 2n + 1 steps plus skipped pages. Metadata: the two pointers of vc_pnode,
 * one bit of aux, and one hand per tier.
 */
#include <errno.h>
#include <stdlib.h>

#include "base/error.h"
#include "policy/list.h"
#include "policy/policies.h"

struct sieve_tier {
	struct vc_pqueue q;
	struct vc_pnode *hand; /* NULL: start at the tail */
};

struct sieve {
	struct vc_policy base;
	int ntiers;
	struct sieve_tier t[];
};

#define SV(p) ((struct sieve *)(p))
#define VISITED 1u

static struct vc_policy *sieve_create(const uint64_t capacity[], int ntiers)
{
	(void)capacity;
	if (ntiers < 1 || ntiers >= VC_PNODE_NONE) {
		vc_err(-EINVAL, "sieve: %d tiers (must be 1..%d)", ntiers, VC_PNODE_NONE - 1);
		return NULL;
	}
	struct sieve *s = calloc(1, sizeof *s + (size_t)ntiers * sizeof s->t[0]);
	if (!s) {
		vc_err(-ENOMEM, "sieve: out of memory");
		return NULL;
	}
	s->base.ops = &vc_policy_sieve;
	s->ntiers = ntiers;
	for (int t = 0; t < ntiers; t++)
		vc_pq_init(&s->t[t].q);
	return &s->base;
}

static void sieve_destroy(struct vc_policy *p)
{
	free(p);
}

static void sieve_insert(struct vc_policy *p, struct vc_pnode *n, int tier)
{
	n->aux = 0;
	n->tier = (uint8_t)tier;
	vc_pq_push(&SV(p)->t[tier].q, n);
}

static void sieve_hit(struct vc_policy *p, struct vc_pnode *n)
{
	(void)p;
	n->aux |= VISITED;
}

static void sieve_remove(struct vc_policy *p, struct vc_pnode *n)
{
	struct sieve_tier *t = &SV(p)->t[n->tier];
	if (t->hand == n)
		t->hand = vc_pq_newer(&t->q, n);
	vc_pq_del(&t->q, n);
	n->tier = VC_PNODE_NONE;
}

static struct vc_pnode *sieve_victim(struct vc_policy *p, int tier, vc_skip_fn skip, void *arg)
{
	if (tier < 0 || tier >= SV(p)->ntiers)
		return NULL;
	struct sieve_tier *t = &SV(p)->t[tier];
	struct vc_pnode *n = t->hand;
	for (uint64_t steps = 0, limit = 2 * t->q.n + 1; steps < limit; steps++) {
		if (!n)
			n = vc_pq_tail(&t->q);
		if (!n)
			return NULL;
		if (skip && skip(n, arg)) {
			n = vc_pq_newer(&t->q, n);
			continue;
		}
		if (!(n->aux & VISITED)) {
			t->hand = n;
			return n;
		}
		n->aux &= ~VISITED;
		n = vc_pq_newer(&t->q, n);
	}
	return NULL;
}

static uint64_t sieve_count(const struct vc_policy *p, int tier)
{
	const struct sieve *s = (const struct sieve *)p;
	return tier >= 0 && tier < s->ntiers ? s->t[tier].q.n : 0;
}

const struct vc_policy_ops vc_policy_sieve = {
	.name = "sieve",
	.cost = "O(1) insert/hit/remove, victim O(1) amortised (<= 2n+1 steps) + skipped; "
		"2 pointers + 1 bit per page, 1 hand per tier",
	.create = sieve_create,
	.destroy = sieve_destroy,
	.insert = sieve_insert,
	.hit = sieve_hit,
	.remove = sieve_remove,
	.victim = sieve_victim,
	.count = sieve_count,
};
