/* A policy per tier: one policy for the host tier and another for the tiers
 * below it (the GPU tier), behind one vc_policy.
 *
 * Why: the GPU tier is a victim cache. It only ever receives pages the host
 * tier has let go, so a filter for one-hit wonders there (S3-FIFO's small
 * queue, ARC's T1) throws out pages the host tier has already judged, while
 * the host tier, which sees every access, profits from one. The two-tier
 * table in docs/TRACES.md measures it.
 *
 * Each part is created over all the tiers with zero capacity for the tiers
 * it does not serve (so its per-tier state there stays empty), and every
 * call goes to the part that serves the node's or the asked-for tier, so
 * vc_pnode.tier keeps meaning the real tier.
 *
 * Cost and metadata: those of the part serving the tier, plus one
 * dispatch per call.
 */
#include <errno.h>
#include <stdlib.h>

#include "base/error.h"
#include "policy/policies.h"

struct pertier {
	struct vc_policy base;
	int ntiers;
	struct vc_policy *part[2]; /* [0] the host tier, [1] the tiers below */
};

#define PT(p) ((struct pertier *)(p))
#define PART(p, tier) (PT(p)->part[(tier) > 0])

static void pt_destroy(struct vc_policy *p)
{
	if (!p)
		return;
	for (int i = 0; i < 2; i++)
		if (PT(p)->part[i])
			PT(p)->part[i]->ops->destroy(PT(p)->part[i]);
	free(p);
}

static struct vc_policy *pt_create(const struct vc_policy_ops *self,
				   const struct vc_policy_ops *host,
				   const struct vc_policy_ops *below, const uint64_t capacity[],
				   int ntiers)
{
	if (ntiers < 1 || ntiers >= VC_PNODE_NONE || !capacity) {
		vc_err(-EINVAL, "%s: needs 1..%d tiers and their capacities", self->name,
		       VC_PNODE_NONE - 1);
		return NULL;
	}
	struct pertier *t = calloc(1, sizeof *t);
	uint64_t *cap = calloc((size_t)ntiers, sizeof *cap);
	if (!t || !cap) {
		free(t);
		free(cap);
		vc_err(-ENOMEM, "%s: out of memory", self->name);
		return NULL;
	}
	t->base.ops = self;
	t->ntiers = ntiers;
	cap[0] = capacity[0];
	t->part[0] = host->create(cap, ntiers);
	if (t->part[0] && ntiers > 1) {
		cap[0] = 0;
		for (int i = 1; i < ntiers; i++)
			cap[i] = capacity[i];
		t->part[1] = below->create(cap, ntiers);
	}
	free(cap);
	if (!t->part[0] || (ntiers > 1 && !t->part[1])) {
		pt_destroy(&t->base);
		return NULL;
	}
	return &t->base;
}

static void pt_insert(struct vc_policy *p, struct vc_pnode *n, int tier)
{
	struct vc_policy *q = PART(p, tier);
	q->ops->insert(q, n, tier);
}

static void pt_hit(struct vc_policy *p, struct vc_pnode *n)
{
	struct vc_policy *q = PART(p, n->tier);
	q->ops->hit(q, n);
}

static void pt_remove(struct vc_policy *p, struct vc_pnode *n)
{
	struct vc_policy *q = PART(p, n->tier);
	q->ops->remove(q, n);
}

static struct vc_pnode *pt_victim(struct vc_policy *p, int tier, vc_skip_fn skip, void *arg)
{
	if (tier < 0 || tier >= PT(p)->ntiers)
		return NULL;
	struct vc_policy *q = PART(p, tier);
	return q->ops->victim(q, tier, skip, arg);
}

static void pt_miss(struct vc_policy *p, uint64_t key, int tier)
{
	if (tier < 0 || tier >= PT(p)->ntiers)
		return;
	struct vc_policy *q = PART(p, tier);
	if (q->ops->miss)
		q->ops->miss(q, key, tier);
}

static uint64_t pt_count(const struct vc_policy *p, int tier)
{
	const struct pertier *t = (const struct pertier *)p;
	if (tier < 0 || tier >= t->ntiers)
		return 0;
	const struct vc_policy *q = t->part[tier > 0];
	return q->ops->count(q, tier);
}

#define PAIR(id, hname, bname, host, below)                                                 \
	static struct vc_policy *id##_create(const uint64_t capacity[], int ntiers)         \
	{                                                                                   \
		return pt_create(&vc_policy_##id, &host, &below, capacity, ntiers);         \
	}                                                                                   \
	const struct vc_policy_ops vc_policy_##id = {                                       \
		.name = hname "+" bname,                                                    \
		.cost = "host tier as " hname ", GPU tier as " bname ": their costs and "   \
			"metadata, plus one dispatch per call",                             \
		.create = id##_create,                                                      \
		.destroy = pt_destroy,                                                      \
		.insert = pt_insert,                                                        \
		.hit = pt_hit,                                                              \
		.remove = pt_remove,                                                        \
		.victim = pt_victim,                                                        \
		.count = pt_count,                                                          \
		.miss = pt_miss,                                                            \
	}

/* Only S3-FIFO is paired: in a victim tier no page is hit in place (a GPU
 * hit moves the page up), so LRU, CLOCK and SIEVE all act as FIFO there and
 * "sieve+lru" would be "sieve"; the policies that differ in that tier are
 * the ones with ghosts and admission queues. */
PAIR(s3fifo_lru, "s3fifo", "lru", vc_policy_s3fifo, vc_policy_lru);
