/* ARC (Megiddo & Modha, "ARC: A Self-Tuning, Low Overhead Replacement
 * Cache", FAST 2003, Fig. 4), per tier of c pages:
 *
 *   T1  LRU of pages seen once recently      B1  ghost keys evicted from T1
 *   T2  LRU of pages seen at least twice     B2  ghost keys evicted from T2
 *   p   target size of T1, a real in [0, c], adapted by ghost hits
 *
 * A hit moves the page to T2's head. A miss whose key is in B1 raises p by
 * max(|B2|/|B1|, 1) (a real ratio, as in the paper) and the page enters
 * T2; one in B2 lowers p by max(|B1|/|B2|, 1) and enters T2; any other
 * enters T1. REPLACE (victim) takes T1's tail when T1 is not empty and
 * |T1| > p, or |T1| = p and the missing key is in B2; else T2's tail; the
 * key goes to B1 or B2.
 *
 * The paper adapts p before REPLACE. Here that is miss(), which the caller
 * makes before the victim() calls that make room for the page (the
 * simulator and the engine's host tier do); it marks the ghost entry so
 * that the insert() after the eviction does not count the hit again. A
 * tier whose room is made before its incoming page is known (the engine's
 * GPU tier) gets no miss(): insert() then adapts p, after the eviction,
 * and the tie goes to T2.
 *
 * The directory bounds (|T1| + |B1| <= c, |T1| + |T2| + |B1| + |B2| <= 2c)
 * are restored at each insert into T1 by trimming B1, then B2, from their
 * old ends. After REPLACE that drops the keys that case IV of Fig. 4
 * deletes before it (B1's LRU when |L1| = c, B2's when the directory holds
 * 2c), and when |T1| = c it drops the key REPLACE just moved to B1, which
 * is the paper's "delete T1's LRU page" with no ghost. test_arc checks
 * the miss counts and the victims against a reference written from Fig. 4.
 *
 * aux: 0 T1, 1 T2.
 *
 * Cost: miss and insert O(1) expected (ghost lookups), hit, remove, count
 * O(1), victim O(1 + skipped). Metadata: the two pointers of vc_pnode and
 * one bit per page; ghosts of up to c keys each at 24-32 bytes (2 x c pool).
 */
#include <errno.h>
#include <stdlib.h>

#include "base/error.h"
#include "policy/ghost.h"
#include "policy/list.h"
#include "policy/policies.h"

struct arc_tier {
	struct vc_pqueue t1, t2;
	struct vc_ghost *b1, *b2;
	uint64_t c;
	double p;          /* in [0, c]; a sum of ratios, so a real as in the paper */
	bool miss_in_b2;   /* miss() since the last insert found its key in B2 */
	struct vc_pnode *last_victim;
};

struct arc {
	struct vc_policy base;
	int ntiers;
	struct arc_tier t[];
};

#define ARC(p) ((struct arc *)(p))
#define IN_T2 1u

static void arc_destroy(struct vc_policy *p)
{
	if (!p)
		return;
	for (int t = 0; t < ARC(p)->ntiers; t++) {
		vc_ghost_destroy(ARC(p)->t[t].b1);
		vc_ghost_destroy(ARC(p)->t[t].b2);
	}
	free(p);
}

static struct vc_policy *arc_create(const uint64_t capacity[], int ntiers)
{
	if (ntiers < 1 || ntiers >= VC_PNODE_NONE || !capacity) {
		vc_err(-EINVAL, "arc: needs 1..%d tiers and their capacities", VC_PNODE_NONE - 1);
		return NULL;
	}
	struct arc *a = calloc(1, sizeof *a + (size_t)ntiers * sizeof a->t[0]);
	if (!a) {
		vc_err(-ENOMEM, "arc: out of memory");
		return NULL;
	}
	a->base.ops = &vc_policy_arc;
	a->ntiers = ntiers;
	for (int i = 0; i < ntiers; i++) {
		struct arc_tier *t = &a->t[i];
		vc_pq_init(&t->t1);
		vc_pq_init(&t->t2);
		t->c = capacity[i];
		t->b1 = vc_ghost_create(t->c);
		t->b2 = vc_ghost_create(t->c);
		if (!t->b1 || !t->b2) {
			arc_destroy(&a->base);
			vc_err(-ENOMEM, "arc: out of memory for the ghosts of tier %d", i);
			return NULL;
		}
	}
	return &a->base;
}

/* The adaptation of Fig. 4's cases II and III, with the ghost sizes as
 * they are at the miss (the key still in its list). */
static void adapt(struct arc_tier *t, bool up)
{
	double n1 = (double)vc_ghost_count(t->b1), n2 = (double)vc_ghost_count(t->b2);
	double c = (double)t->c;
	if (up) {
		double d = n2 > n1 ? n2 / n1 : 1.0;
		t->p = t->p + d < c ? t->p + d : c;
	} else {
		double d = n1 > n2 ? n1 / n2 : 1.0;
		t->p = t->p - d > 0.0 ? t->p - d : 0.0;
	}
}

/* Adapts p for a key found in a ghost list, once per return: the mark says
 * it was counted already. Returns whether the key is in `g`. */
static bool ghost_hit(struct arc_tier *t, struct vc_ghost *g, uint64_t key)
{
	int m = vc_ghost_mark(g, key);
	if (m < 0)
		return false;
	if (m == 0)
		adapt(t, g == t->b1);
	return true;
}

static void arc_miss(struct vc_policy *p, uint64_t key, int tier)
{
	if (tier < 0 || tier >= ARC(p)->ntiers)
		return;
	struct arc_tier *t = &ARC(p)->t[tier];
	t->miss_in_b2 = !ghost_hit(t, t->b1, key) && ghost_hit(t, t->b2, key);
}

static void arc_insert(struct vc_policy *p, struct vc_pnode *n, int tier)
{
	struct arc_tier *t = &ARC(p)->t[tier];
	n->tier = (uint8_t)tier;
	t->miss_in_b2 = false;
	struct vc_ghost *g = ghost_hit(t, t->b1, n->key) ? t->b1
			     : ghost_hit(t, t->b2, n->key) ? t->b2 : NULL;
	if (g) {
		vc_ghost_take(g, n->key);
		n->aux = IN_T2;
		vc_pq_push(&t->t2, n);
		return;
	}
	n->aux = 0;
	vc_pq_push(&t->t1, n);
	while (t->t1.n + vc_ghost_count(t->b1) > t->c && vc_ghost_count(t->b1))
		vc_ghost_pop(t->b1);
	while (t->t1.n + t->t2.n + vc_ghost_count(t->b1) + vc_ghost_count(t->b2) > 2 * t->c &&
	       vc_ghost_count(t->b2))
		vc_ghost_pop(t->b2);
}

static void arc_hit(struct vc_policy *p, struct vc_pnode *n)
{
	struct arc_tier *t = &ARC(p)->t[n->tier];
	if (n == t->last_victim)
		t->last_victim = NULL; /* used again: a later remove is no eviction */
	vc_pq_del(n->aux & IN_T2 ? &t->t2 : &t->t1, n);
	n->aux = IN_T2;
	vc_pq_push(&t->t2, n);
}

static void arc_remove(struct vc_policy *p, struct vc_pnode *n)
{
	struct arc_tier *t = &ARC(p)->t[n->tier];
	bool in_t2 = n->aux & IN_T2;
	vc_pq_del(in_t2 ? &t->t2 : &t->t1, n);
	if (n == t->last_victim) {
		vc_ghost_add(in_t2 ? t->b2 : t->b1, n->key);
		t->last_victim = NULL;
	}
	n->tier = VC_PNODE_NONE;
}

static struct vc_pnode *arc_victim(struct vc_policy *p, int tier, vc_skip_fn skip, void *arg)
{
	if (tier < 0 || tier >= ARC(p)->ntiers)
		return NULL;
	struct arc_tier *t = &ARC(p)->t[tier];
	struct vc_pnode *v;
	double n1 = (double)t->t1.n;
	/* REPLACE; the other list when the chosen one has no evictable page. */
	if (t->t1.n && (n1 > t->p || (t->miss_in_b2 && n1 == t->p))) {
		v = vc_pq_first(&t->t1, skip, arg);
		if (!v)
			v = vc_pq_first(&t->t2, skip, arg);
	} else {
		v = vc_pq_first(&t->t2, skip, arg);
		if (!v)
			v = vc_pq_first(&t->t1, skip, arg);
	}
	t->last_victim = v;
	return v;
}

static uint64_t arc_count(const struct vc_policy *p, int tier)
{
	const struct arc *a = (const struct arc *)p;
	return tier >= 0 && tier < a->ntiers ? a->t[tier].t1.n + a->t[tier].t2.n : 0;
}

const struct vc_policy_ops vc_policy_arc = {
	.name = "arc",
	.cost = "O(1) miss/insert (ghost lookups)/hit/remove, victim O(1 + skipped); 2 pointers + "
		"1 bit per page, ghosts of up to 2 x capacity keys at <= 32 B",
	.create = arc_create,
	.destroy = arc_destroy,
	.insert = arc_insert,
	.hit = arc_hit,
	.remove = arc_remove,
	.victim = arc_victim,
	.count = arc_count,
	.miss = arc_miss,
};
