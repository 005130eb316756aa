/* S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction",
 * SOSP 2023), per tier:
 *
 *   S  small FIFO, 10 % of the tier: new pages enter here
 *   M  main FIFO, the rest, evicted as CLOCK with a 2-bit counter
 *   G  ghost FIFO of keys evicted from S, 90 % of the tier's size
 *
 * A hit adds 1 to the page's counter (at most 3). Eviction takes from S
 * while S holds pages and M is within its share, else from M. From S: a
 * page hit at least twice since it entered (the "promotion at 2 hits") moves
 * to M with its counter at 0, any other page is evicted and its key goes to
 * G. From M: a page with a counter > 0 goes back to M's head with the
 * counter one less, the first with 0 is evicted. A missing page whose key
 * is in G enters M directly, any other enters S. These rules and constants
 * are the paper's, as in libCacheSim's S3FIFOv0.c (small-size-ratio 0.10,
 * ghost-size-ratio 0.90, move-to-main-threshold 2), whose numbers
 * `vramcache sim` is checked against (docs/POLICIES.md). libCacheSim's
 * later S3FIFO.c also sends new pages to M while the cache is still
 * filling and S is full; on cloudPhysicsIO at 5 % that variant misses
 * .8130 against .8027 here and the published .8026.
 *
 * aux: bit 0 the queue (0 S, 1 M), bits 1-2 the counter.
 *
 * Cost: insert, hit, remove, count O(1) expected (a ghost lookup on
 * insert); victim O(1) amortised: each step either promotes a page, lowers
 * a counter or returns, so at most 4n + 1 steps, plus skipped pages.
 * Metadata: the two pointers of vc_pnode and 3 bits of aux per page; the
 * ghost is 0.9 x capacity keys at 24-32 bytes (ghost.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "base/error.h"
#include "policy/ghost.h"
#include "policy/list.h"
#include "policy/policies.h"

/* The paper's and libCacheSim's defaults: 10 % of the cache filters
 * one-hit wonders; a ghost of 90 % of the cache remembers them long enough
 * to admit the ones that return. */
#define SMALL_PERMILLE 100
#define GHOST_PERMILLE 900
#define PROMOTE_HITS 2

struct s3_tier {
	struct vc_pqueue s, m;
	struct vc_ghost *g;
	uint64_t small_cap, main_cap;
	struct vc_pnode *last_victim;
};

struct s3 {
	struct vc_policy base;
	int ntiers;
	struct s3_tier t[];
};

#define S3(p) ((struct s3 *)(p))
#define IN_M 1u
#define FREQ(n) (((n)->aux >> 1) & 3u)
#define SET_FREQ(n, f) ((n)->aux = ((n)->aux & IN_M) | ((uint32_t)(f) << 1))

static void s3_destroy(struct vc_policy *p)
{
	if (!p)
		return;
	for (int t = 0; t < S3(p)->ntiers; t++)
		vc_ghost_destroy(S3(p)->t[t].g);
	free(p);
}

static struct vc_policy *s3_create(const uint64_t capacity[], int ntiers)
{
	if (ntiers < 1 || ntiers >= VC_PNODE_NONE || !capacity) {
		vc_err(-EINVAL, "s3fifo: needs 1..%d tiers and their capacities", VC_PNODE_NONE - 1);
		return NULL;
	}
	struct s3 *s = calloc(1, sizeof *s + (size_t)ntiers * sizeof s->t[0]);
	if (!s) {
		vc_err(-ENOMEM, "s3fifo: out of memory");
		return NULL;
	}
	s->base.ops = &vc_policy_s3fifo;
	s->ntiers = ntiers;
	for (int i = 0; i < ntiers; i++) {
		struct s3_tier *t = &s->t[i];
		uint64_t c = capacity[i];
		vc_pq_init(&t->s);
		vc_pq_init(&t->m);
		/* At least one page of S once the tier holds two: with none,
		 * nothing could enter S (libCacheSim then caches nothing new). */
		t->small_cap = c * SMALL_PERMILLE / 1000;
		if (t->small_cap == 0 && c >= 2)
			t->small_cap = 1;
		t->main_cap = c - t->small_cap;
		t->g = vc_ghost_create(c * GHOST_PERMILLE / 1000);
		if (!t->g) {
			s3_destroy(&s->base);
			vc_err(-ENOMEM, "s3fifo: out of memory for the ghost of tier %d", i);
			return NULL;
		}
	}
	return &s->base;
}

static void s3_insert(struct vc_policy *p, struct vc_pnode *n, int tier)
{
	struct s3_tier *t = &S3(p)->t[tier];
	t->last_victim = NULL;
	n->tier = (uint8_t)tier;
	bool to_m = vc_ghost_take(t->g, n->key);
	vc_ghost_trim(t->g);
	n->aux = to_m ? IN_M : 0;
	vc_pq_push(to_m ? &t->m : &t->s, n);
}

static void s3_hit(struct vc_policy *p, struct vc_pnode *n)
{
	struct s3_tier *t = &S3(p)->t[n->tier];
	if (n == t->last_victim)
		t->last_victim = NULL; /* used again: no longer the answer */
	if (FREQ(n) < 3)
		SET_FREQ(n, FREQ(n) + 1);
}

static void s3_remove(struct vc_policy *p, struct vc_pnode *n)
{
	struct s3_tier *t = &S3(p)->t[n->tier];
	if (n->aux & IN_M) {
		vc_pq_del(&t->m, n);
	} else {
		vc_pq_del(&t->s, n);
		if (n == t->last_victim)
			vc_ghost_add(t->g, n->key);
	}
	if (n == t->last_victim)
		t->last_victim = NULL;
	n->tier = VC_PNODE_NONE;
}

/* S's side: promotes pages hit twice, returns the first other page. */
static struct vc_pnode *from_small(struct s3_tier *t, vc_skip_fn skip, void *arg)
{
	struct vc_pnode *n = vc_pq_tail(&t->s);
	while (n) {
		struct vc_pnode *newer = vc_pq_newer(&t->s, n);
		if (skip && skip(n, arg)) {
			n = newer;
			continue;
		}
		if (FREQ(n) < PROMOTE_HITS)
			return n;
		vc_pq_del(&t->s, n);
		n->aux = IN_M; /* counter 0 */
		vc_pq_push(&t->m, n);
		n = newer;
	}
	return NULL;
}

/* M's side: CLOCK with a 2-bit counter. */
static struct vc_pnode *from_main(struct s3_tier *t, vc_skip_fn skip, void *arg)
{
	struct vc_pnode *n = vc_pq_tail(&t->m);
	for (uint64_t steps = 0, limit = 4 * t->m.n + 1; n && steps < limit; steps++) {
		struct vc_pnode *newer = vc_pq_newer(&t->m, n);
		if (skip && skip(n, arg)) {
			n = newer;
			continue;
		}
		if (FREQ(n) == 0)
			return n;
		SET_FREQ(n, FREQ(n) - 1);
		vc_pq_del(&t->m, n);
		vc_pq_push(&t->m, n);
		n = newer ? newer : n;
	}
	return NULL;
}

static struct vc_pnode *s3_victim(struct vc_policy *p, int tier, vc_skip_fn skip, void *arg)
{
	if (tier < 0 || tier >= S3(p)->ntiers)
		return NULL;
	struct s3_tier *t = &S3(p)->t[tier];
	/* A search may promote pages from S to M and so change which side the
	 * next search starts on: answer a repeated call from the last search. */
	if (t->last_victim && (!skip || !skip(t->last_victim, arg)))
		return t->last_victim;
	struct vc_pnode *v = NULL;
	if (t->m.n > t->main_cap || t->s.n == 0) {
		v = from_main(t, skip, arg);
		if (!v)
			v = from_small(t, skip, arg);
	} else {
		v = from_small(t, skip, arg);
		if (!v)
			v = from_main(t, skip, arg);
	}
	t->last_victim = v;
	return v;
}

static uint64_t s3_count(const struct vc_policy *p, int tier)
{
	const struct s3 *s = (const struct s3 *)p;
	return tier >= 0 && tier < s->ntiers ? s->t[tier].s.n + s->t[tier].m.n : 0;
}

const struct vc_policy_ops vc_policy_s3fifo = {
	.name = "s3fifo",
	.cost = "O(1) insert/hit/remove (a ghost lookup), victim O(1) amortised (<= 4n+1 steps) "
		"+ skipped; 2 pointers + 3 bits per page, ghost of 0.9 x capacity keys at <= 32 B",
	.create = s3_create,
	.destroy = s3_destroy,
	.insert = s3_insert,
	.hit = s3_hit,
	.remove = s3_remove,
	.victim = s3_victim,
	.count = s3_count,
};
