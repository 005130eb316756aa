/* 2Q, the full version (Johnson & Shasha, "2Q: A Low Overhead High
 * Performance Buffer Management Replacement Algorithm", VLDB 1994), per
 * tier:
 *
 *   A1in   FIFO of pages seen once, Kin = 25 % of the tier
 *   A1out  ghost FIFO of keys evicted from A1in, Kout = 50 % of the tier
 *   Am     LRU of pages seen again after leaving A1in
 *
 * A hit in Am moves the page to Am's head; a hit in A1in changes nothing
 * (correlated references). A missing page whose key is in A1out enters Am,
 * any other enters A1in. Eviction takes A1in's tail (its key goes to A1out)
 * while A1in holds more than Kin pages, else Am's tail. Kin and Kout are
 * the paper's recommended 25 % and 50 %.
 *
 * aux: 0 A1in, 1 Am.
 *
 * Cost: insert O(1) expected (a ghost lookup), hit, remove, count O(1),
 * victim O(1 + skipped). Metadata: the two pointers of vc_pnode and one bit
 * of aux per page; the ghost is 0.5 x capacity keys at 24-32 bytes.
 */
#include <errno.h>
#include <stdlib.h>

#include "base/error.h"
#include "policy/ghost.h"
#include "policy/list.h"
#include "policy/policies.h"

#define KIN_PERCENT 25
#define KOUT_PERCENT 50

struct q2_tier {
	struct vc_pqueue in, am;
	struct vc_ghost *out;
	uint64_t kin;
	struct vc_pnode *last_victim;
};

struct q2 {
	struct vc_policy base;
	int ntiers;
	struct q2_tier t[];
};

#define Q2(p) ((struct q2 *)(p))
#define IN_AM 1u

static void q2_destroy(struct vc_policy *p)
{
	if (!p)
		return;
	for (int t = 0; t < Q2(p)->ntiers; t++)
		vc_ghost_destroy(Q2(p)->t[t].out);
	free(p);
}

static struct vc_policy *q2_create(const uint64_t capacity[], int ntiers)
{
	if (ntiers < 1 || ntiers >= VC_PNODE_NONE || !capacity) {
		vc_err(-EINVAL, "2q: needs 1..%d tiers and their capacities", VC_PNODE_NONE - 1);
		return NULL;
	}
	struct q2 *q = calloc(1, sizeof *q + (size_t)ntiers * sizeof q->t[0]);
	if (!q) {
		vc_err(-ENOMEM, "2q: out of memory");
		return NULL;
	}
	q->base.ops = &vc_policy_2q;
	q->ntiers = ntiers;
	for (int i = 0; i < ntiers; i++) {
		struct q2_tier *t = &q->t[i];
		vc_pq_init(&t->in);
		vc_pq_init(&t->am);
		t->kin = capacity[i] * KIN_PERCENT / 100;
		if (t->kin == 0)
			t->kin = 1;
		t->out = vc_ghost_create(capacity[i] * KOUT_PERCENT / 100);
		if (!t->out) {
			q2_destroy(&q->base);
			vc_err(-ENOMEM, "2q: out of memory for the ghost of tier %d", i);
			return NULL;
		}
	}
	return &q->base;
}

static void q2_insert(struct vc_policy *p, struct vc_pnode *n, int tier)
{
	struct q2_tier *t = &Q2(p)->t[tier];
	n->tier = (uint8_t)tier;
	bool back = vc_ghost_take(t->out, n->key);
	vc_ghost_trim(t->out);
	if (back) {
		n->aux = IN_AM;
		vc_pq_push(&t->am, n);
	} else {
		n->aux = 0;
		vc_pq_push(&t->in, n);
	}
}

static void q2_hit(struct vc_policy *p, struct vc_pnode *n)
{
	struct q2_tier *t = &Q2(p)->t[n->tier];
	if (n == t->last_victim)
		t->last_victim = NULL; /* used again: a later remove is no eviction */
	if (!(n->aux & IN_AM))
		return;
	struct vc_pqueue *am = &t->am;
	vc_pq_del(am, n);
	vc_pq_push(am, n);
}

static void q2_remove(struct vc_policy *p, struct vc_pnode *n)
{
	struct q2_tier *t = &Q2(p)->t[n->tier];
	if (n->aux & IN_AM) {
		vc_pq_del(&t->am, n);
	} else {
		vc_pq_del(&t->in, n);
		if (n == t->last_victim)
			vc_ghost_add(t->out, n->key);
	}
	if (n == t->last_victim)
		t->last_victim = NULL;
	n->tier = VC_PNODE_NONE;
}

static struct vc_pnode *q2_victim(struct vc_policy *p, int tier, vc_skip_fn skip, void *arg)
{
	if (tier < 0 || tier >= Q2(p)->ntiers)
		return NULL;
	struct q2_tier *t = &Q2(p)->t[tier];
	struct vc_pnode *v;
	if (t->in.n > t->kin || t->am.n == 0) {
		v = vc_pq_first(&t->in, skip, arg);
		if (!v)
			v = vc_pq_first(&t->am, skip, arg);
	} else {
		v = vc_pq_first(&t->am, skip, arg);
		if (!v)
			v = vc_pq_first(&t->in, skip, arg);
	}
	t->last_victim = v;
	return v;
}

static uint64_t q2_count(const struct vc_policy *p, int tier)
{
	const struct q2 *q = (const struct q2 *)p;
	return tier >= 0 && tier < q->ntiers ? q->t[tier].in.n + q->t[tier].am.n : 0;
}

const struct vc_policy_ops vc_policy_2q = {
	.name = "2q",
	.cost = "O(1) insert (a ghost lookup)/hit/remove, victim O(1 + skipped); 2 pointers + "
		"1 bit per page, ghost of 0.5 x capacity keys at <= 32 B",
	.create = q2_create,
	.destroy = q2_destroy,
	.insert = q2_insert,
	.hit = q2_hit,
	.remove = q2_remove,
	.victim = q2_victim,
	.count = q2_count,
};
