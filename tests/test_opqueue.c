/* Queued policy updates (src/policy/opqueue.h) over the LRU policy: ops
 * from several queues are applied in stamp order; a full queue drains; the
 * stale-op race of BAG 3.3.4 (a hit queued for a page that eviction takes,
 * then the page reinserted) leaves the lists intact and the page where its
 * new incarnation puts it; many threads recording at once, with drains
 * running, end in exactly the order of their ops sorted by stamp.
 * Host only. */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/lru.h"
#include "policy/opqueue.h"
#include "testutil.h"

#define NTIERS 2

static struct vc_policy *new_lru(void)
{
	uint64_t cap[NTIERS] = { 0, 0 };
	struct vc_policy *p = vc_policy_lru.create(cap, NTIERS);
	CHECK(p);
	return p;
}

/* The queue of `tier`, LRU tail first, through the policy interface only:
 * a skip function that records and rejects every node walks the queue. */
struct walk {
	struct vc_opq_node *base;
	int *ids;
	int n, max;
};

static bool walk_all(const struct vc_pnode *n, void *arg)
{
	struct walk *w = arg;
	CHECK(w->n < w->max);
	w->ids[w->n++] = (int)(vc_opq_node_of(n) - w->base);
	return true;
}

static int walk(struct vc_policy *p, int tier, struct vc_opq_node *base, int *ids, int max)
{
	struct walk w = { base, ids, 0, max };
	CHECK(p->ops->victim(p, tier, walk_all, &w) == NULL);
	CHECK(p->ops->count(p, tier) == (uint64_t)w.n);
	return w.n;
}

/* Checks `tier` against ids given MRU first, -1 terminated. */
static void check_order(struct vc_policy *p, int tier, struct vc_opq_node *base,
			const int *mru_first)
{
	int ids[64], want = 0;
	while (mru_first[want] >= 0)
		want++;
	int n = walk(p, tier, base, ids, 64);
	int ok = n == want;
	for (int i = 0; ok && i < n; i++)
		ok = ids[n - 1 - i] == mru_first[i];
	if (!ok) {
		fprintf(stderr, "tier %d: want", tier);
		for (int i = 0; i < want; i++)
			fprintf(stderr, " %d", mru_first[i]);
		fprintf(stderr, "; have");
		for (int i = n - 1; i >= 0; i--)
			fprintf(stderr, " %d", ids[i]);
		fprintf(stderr, " (MRU first)\n");
		exit(1);
	}
}

/* Structural check after a full drain: every queued node is live and
 * queued for its live incarnation, every free node is out of the policy,
 * and the walks agree with the counts. */
static void check_consistent(struct vc_policy *p, struct vc_opq_node *nodes, int nn)
{
	uint64_t queued[NTIERS] = { 0 };
	for (int i = 0; i < nn; i++) {
		struct vc_opq_node *x = &nodes[i];
		uint32_t g = vc_opq_gen(x);
		if (x->pn.tier == VC_PNODE_NONE)
			continue;
		CHECK(x->pn.tier < NTIERS);
		CHECK(vc_opq_gen_live(g) && x->lgen == g);
		queued[x->pn.tier]++;
	}
	for (int t = 0; t < NTIERS; t++) {
		int *ids = malloc(sizeof(int) * (size_t)(nn + 1));
		CHECK(ids);
		CHECK((uint64_t)walk(p, t, nodes, ids, nn + 1) == queued[t]);
		free(ids);
	}
}

static void init_nodes(struct vc_opq_node *n, int nn)
{
	for (int i = 0; i < nn; i++)
		vc_opq_node_init(&n[i]);
}

/* --- merge ordering --------------------------------------------------- */

/* One thread records through four handles in a random interleaving, so the
 * stamp order is the call order and every queue holds a sparse subset of
 * it. The result must equal the same calls made directly on a reference
 * LRU in call order. */
static void test_merge_order(void)
{
	enum { NN = 40, H = 4, STEPS = 3000 };
	static struct vc_opq_node a[NN];
	static struct vc_pnode ref[NN];
	init_nodes(a, NN);
	for (int i = 0; i < NN; i++)
		ref[i] = (struct vc_pnode){ .tier = VC_PNODE_NONE };
	struct vc_policy *p = new_lru(), *rp = new_lru();
	struct vc_opq *q;
	CHECK_OK(vc_opq_create(&vc_policy_lru, p, H, 64, &q));
	struct vc_opq_local *l[H];
	for (int i = 0; i < H; i++)
		CHECK((l[i] = vc_opq_attach(q)) != NULL);
	uint32_t gen[NN] = { 0 };
	uint64_t s = 7;
	for (int step = 0; step < STEPS; step++) {
		struct vc_opq_local *h = l[t_rand(&s) % H];
		int i = (int)(t_rand(&s) % NN);
		if (ref[i].tier == VC_PNODE_NONE) {
			int tier = (int)(t_rand(&s) % NTIERS);
			gen[i] = vc_opq_insert(h, &a[i], tier);
			CHECK(vc_opq_gen_live(gen[i]));
			vc_policy_lru.insert(rp, &ref[i], tier);
		} else if (t_rand(&s) % 4) {
			vc_opq_hit(h, &a[i], gen[i]);
			vc_policy_lru.hit(rp, &ref[i]);
		} else {
			CHECK(vc_opq_remove(h, &a[i], gen[i]));
			CHECK(!vc_opq_remove(h, &a[i], gen[i])); /* ended once only */
			vc_policy_lru.remove(rp, &ref[i]);
		}
		if (step % 500 == 499)
			vc_opq_drain(q); /* also mid-sequence, not only at the end */
	}
	vc_opq_drain(q);
	for (int t = 0; t < NTIERS; t++) {
		/* The reference order, read by removing its victims one by one. */
		int want[NN + 1], n = 0, rev[NN], rn = 0;
		struct vc_pnode *v;
		while ((v = rp->ops->victim(rp, t, NULL, NULL)) != NULL) {
			rev[rn++] = (int)(v - ref);
			rp->ops->remove(rp, v);
		}
		for (int k = rn - 1; k >= 0; k--)
			want[n++] = rev[k];
		want[n] = -1;
		check_order(p, t, a, want);
	}
	struct vc_opq_stats st;
	vc_opq_get_stats(q, &st);
	/* Only insert+remove pairs of one incarnation within one batch drop
	 * (the insert finds its incarnation ended, then the remove finds
	 * nothing queued); nothing else here is stale. */
	CHECK(st.applied + st.stale == STEPS && st.stale % 2 == 0);
	check_consistent(p, a, NN);
	for (int i = 0; i < H; i++)
		vc_opq_detach(l[i]);
	vc_opq_destroy(q);
	p->ops->destroy(p);
	rp->ops->destroy(rp);
}

/* --- drain on a full queue ---------------------------------------------- */

static void test_full_queue(void)
{
	enum { NN = 16 };
	static struct vc_opq_node a[NN];
	init_nodes(a, NN);
	struct vc_policy *p = new_lru();
	struct vc_opq *q;
	CHECK_OK(vc_opq_create(&vc_policy_lru, p, 2, 3, &q)); /* rounds 3 up to 4 */
	struct vc_opq_local *l = vc_opq_attach(q), *m = vc_opq_attach(q);
	CHECK(l && m);
	/* Another queue's ops ride along with the drain a full one triggers. */
	CHECK(vc_opq_insert(m, &a[10], 1));
	for (int i = 0; i < 4; i++)
		CHECK(vc_opq_insert(l, &a[i], 0));
	/* Four queued, nothing applied yet: the policy is read directly here,
	 * with no other thread running. */
	CHECK(p->ops->count(p, 0) == 0 && p->ops->count(p, 1) == 0);
	CHECK(vc_opq_insert(l, &a[4], 0)); /* full: drains the first five */
	CHECK(p->ops->count(p, 0) == 4 && p->ops->count(p, 1) == 1);
	struct vc_opq_stats st;
	vc_opq_get_stats(q, &st);
	CHECK(st.full_drains == 1 && st.drains == 1 && st.applied == 5 && st.max_batch == 5);
	check_order(p, 0, a, (int[]){ 3, 2, 1, 0, -1 });
	CHECK(vc_opq_count(q, 0) == 5);
	check_order(p, 0, a, (int[]){ 4, 3, 2, 1, 0, -1 });
	/* A handle cannot be had past max_threads; detach gives one back. */
	CHECK(vc_opq_attach(q) == NULL);
	vc_opq_detach(m);
	CHECK((m = vc_opq_attach(q)) != NULL);
	/* Eviction takes the exact LRU page after the drain: 0, unless hit. */
	vc_opq_hit(m, &a[0], vc_opq_gen(&a[0]));
	uint32_t g;
	CHECK(vc_opq_evict(q, 0, NULL, NULL, &g) == &a[1]);
	CHECK(!vc_opq_gen_live(vc_opq_gen(&a[1])) && g + 1 == vc_opq_gen(&a[1]));
	check_order(p, 0, a, (int[]){ 0, 4, 3, 2, -1 });
	check_consistent(p, a, NN);
	vc_opq_detach(l);
	vc_opq_detach(m);
	vc_opq_destroy(q);
	p->ops->destroy(p);
	/* Bad arguments. */
	CHECK(vc_opq_create(&vc_policy_lru, NULL, 1, 4, &q) < 0 && q == NULL);
	p = new_lru();
	CHECK(vc_opq_create(&vc_policy_lru, p, 0, 4, &q) < 0);
	CHECK(vc_opq_create(&vc_policy_lru, p, 1u << 16, 1u << 16, &q) < 0);
	p->ops->destroy(p);
}

/* --- the stale-op race --------------------------------------------------- */

static void test_stale_race(void)
{
	enum { X = 0, Y = 1, Z = 2, W = 3, NN = 8 };
	static struct vc_opq_node a[NN];
	init_nodes(a, NN);
	struct vc_policy *p = new_lru();
	struct vc_opq *q;
	CHECK_OK(vc_opq_create(&vc_policy_lru, p, 2, 16, &q));
	struct vc_opq_local *A = vc_opq_attach(q), *B = vc_opq_attach(q);
	struct vc_opq_stats st;

	/* 1. Eviction wins, then the reader's hit lands: X, Y, Z inserted in
	 * that order, so X is the LRU. B found X (read its incarnation), the
	 * evictor takes X, and only then does B record its hit. X comes back
	 * as a new incarnation, then W. B's hit is for the dead incarnation
	 * and must not move the new X. */
	uint32_t gx = vc_opq_insert(A, &a[X], 0);
	vc_opq_insert(A, &a[Y], 0);
	vc_opq_insert(A, &a[Z], 0);
	vc_opq_drain(q);
	CHECK(vc_opq_gen(&a[X]) == gx);
	uint32_t ge;
	CHECK(vc_opq_evict(q, 0, NULL, NULL, &ge) == &a[X] && ge == gx);
	CHECK(!vc_opq_remove(A, &a[X], gx)); /* a late remover loses */
	vc_opq_hit(B, &a[X], gx);
	uint32_t gx2 = vc_opq_insert(A, &a[X], 0);
	CHECK(gx2 == gx + 2);
	vc_opq_insert(A, &a[W], 0);
	vc_opq_hit(B, &a[X], gx); /* stamped after the reinsert: still stale */
	vc_opq_drain(q);
	check_order(p, 0, a, (int[]){ W, X, Z, Y, -1 });
	vc_opq_get_stats(q, &st);
	CHECK(st.stale == 2);
	check_consistent(p, a, NN);

	/* 2. The drain-less path: B's hit on Y is queued (not applied) when Y
	 * is removed at once; Y is reinserted in the other tier and Z is hit
	 * after. Applied in stamp order, B's hit meets Y not queued and is
	 * dropped; Y sits in tier 1 alone. */
	uint32_t gy = vc_opq_gen(&a[Y]);
	vc_opq_hit(B, &a[Y], gy);
	CHECK(vc_opq_remove_now(q, &a[Y], gy));
	CHECK(p->ops->count(p, 0) == 3 && a[Y].pn.tier == VC_PNODE_NONE);
	CHECK(!vc_opq_remove_now(q, &a[Y], gy));
	uint32_t gy2 = vc_opq_insert(A, &a[Y], 1);
	vc_opq_hit(A, &a[Z], vc_opq_gen(&a[Z]));
	vc_opq_drain(q);
	check_order(p, 0, a, (int[]){ Z, W, X, -1 });
	check_order(p, 1, a, (int[]){ Y, -1 });
	vc_opq_get_stats(q, &st);
	CHECK(st.stale == 3);

	/* 3. Insert, hit, remove and reinsert all queued in one batch, with
	 * hits for the dead incarnation in between and after: only the last
	 * incarnation's insert and hit count. The first insert is dropped too:
	 * by the time it is applied its incarnation has ended. */
	CHECK(vc_opq_remove(A, &a[Y], gy2));
	uint32_t g5 = vc_opq_insert(A, &a[5], 1);
	vc_opq_hit(B, &a[5], g5);
	CHECK(vc_opq_remove(A, &a[5], g5));
	vc_opq_hit(B, &a[5], g5);
	uint32_t g5b = vc_opq_insert(B, &a[5], 1);
	CHECK(g5b == g5 + 2);
	vc_opq_insert(A, &a[6], 1);
	vc_opq_hit(B, &a[5], g5);
	vc_opq_hit(B, &a[5], g5b);
	vc_opq_drain(q);
	check_order(p, 1, a, (int[]){ 5, 6, -1 });
	check_consistent(p, a, NN);

	/* 4. A remover between its compare-and-swap and its stamp: the node's
	 * incarnation has ended but its removal is not queued yet. Eviction
	 * must pass over it (it is leaving) and take the next one. Emulated by
	 * moving gen by hand, then putting it back and removing properly. */
	check_order(p, 0, a, (int[]){ Z, W, X, -1 });
	atomic_fetch_add(&a[X].gen, 1);
	CHECK(vc_opq_victim(q, 0, NULL, NULL) == &a[W]);
	atomic_fetch_sub(&a[X].gen, 1);
	CHECK(vc_opq_victim(q, 0, NULL, NULL) == &a[X]);
	CHECK(vc_opq_remove(A, &a[X], gx2));
	CHECK(vc_opq_victim(q, 0, NULL, NULL) == &a[W]); /* the remove drained */
	check_order(p, 0, a, (int[]){ Z, W, -1 });
	check_consistent(p, a, NN);
	CHECK(vc_opq_insert(A, &a[Z], 0) == 0); /* Z is live: refused */

	/* 5. An insert that overtakes the remove it follows: a remover has
	 * done its compare-and-swap on W but not yet taken its stamp, and
	 * another thread, seeing W free, inserts it as a new incarnation
	 * (stamped first). The insert must take out the dead link left by the
	 * old incarnation and queue W afresh at the MRU end; the late remove
	 * then finds nothing of its incarnation and drops. Emulated by doing
	 * the remover's compare-and-swap by hand. */
	uint32_t gw = vc_opq_gen(&a[W]);
	CHECK(atomic_compare_exchange_strong(&a[W].gen, &gw, gw + 1));
	uint32_t gw2 = vc_opq_insert(B, &a[W], 0);
	CHECK(gw2 == gw + 2);
	vc_opq_drain(q);
	check_order(p, 0, a, (int[]){ W, Z, -1 });
	check_consistent(p, a, NN);
	CHECK(a[W].lgen == gw2);

	vc_opq_detach(A);
	vc_opq_detach(B);
	vc_opq_destroy(q);
	p->ops->destroy(p);
}

/* The same race, run for real: readers hit pages whose incarnation they
 * read a moment before, while an evictor takes LRU pages and reinserts
 * them and a remover drops its own pages. Checks only that the structure
 * stays consistent (the order is timing dependent); the sanitizers watch
 * the memory accesses. */
#define RN 64
static struct vc_opq_node race_nodes[RN];
static struct vc_opq *race_q;
static atomic_int race_stop;

static void *race_reader(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg;
	struct vc_opq_local *l = vc_opq_attach(race_q);
	CHECK(l);
	while (!atomic_load(&race_stop)) {
		struct vc_opq_node *n = &race_nodes[t_rand(&s) % RN];
		vc_opq_hit(l, n, vc_opq_gen(n));
	}
	vc_opq_detach(l);
	return NULL;
}

static bool skip_odd(const struct vc_pnode *n, void *arg)
{
	(void)arg;
	return (vc_opq_node_of(n) - race_nodes) % 2; /* odd nodes belong to the remover */
}

static void *race_evictor(void *arg)
{
	(void)arg;
	struct vc_opq_local *l = vc_opq_attach(race_q);
	CHECK(l);
	for (int i = 0; i < 20000; i++) {
		struct vc_opq_node *n = vc_opq_evict(race_q, i % NTIERS, skip_odd, NULL, NULL);
		if (n)
			CHECK(vc_opq_gen_live(vc_opq_insert(l, n, (i + 1) % NTIERS)));
	}
	vc_opq_detach(l);
	return NULL;
}

static void *race_remover(void *arg)
{
	(void)arg;
	struct vc_opq_local *l = vc_opq_attach(race_q);
	CHECK(l);
	for (int i = 0; i < 20000; i++) {
		struct vc_opq_node *n = &race_nodes[1 + 2 * (i % (RN / 2))];
		uint32_t g = vc_opq_gen(n);
		if (vc_opq_gen_live(g)) {
			bool now = i & 4;
			CHECK(now ? vc_opq_remove_now(race_q, n, g) : vc_opq_remove(l, n, g));
		} else {
			CHECK(vc_opq_insert(l, n, i % NTIERS));
		}
	}
	vc_opq_detach(l);
	return NULL;
}

static void test_race_threads(void)
{
	init_nodes(race_nodes, RN);
	struct vc_policy *p = new_lru();
	CHECK_OK(vc_opq_create(&vc_policy_lru, p, 4, 32, &race_q));
	struct vc_opq_local *l = vc_opq_attach(race_q);
	for (int i = 0; i < RN; i++)
		vc_opq_insert(l, &race_nodes[i], i % NTIERS);
	vc_opq_detach(l);
	atomic_store(&race_stop, 0);
	pthread_t r[2], e, m;
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&r[i], NULL, race_reader, (void *)(uintptr_t)(i + 11)) == 0);
	CHECK(pthread_create(&e, NULL, race_evictor, NULL) == 0);
	CHECK(pthread_create(&m, NULL, race_remover, NULL) == 0);
	pthread_join(e, NULL);
	pthread_join(m, NULL);
	atomic_store(&race_stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(r[i], NULL);
	vc_opq_drain(race_q);
	check_consistent(p, race_nodes, RN);
	/* Every even node is live (the evictor reinserts what it takes). */
	for (int i = 0; i < RN; i += 2)
		CHECK(race_nodes[i].pn.tier != VC_PNODE_NONE);
	struct vc_opq_stats st;
	vc_opq_get_stats(race_q, &st);
	/* How often the race happened (timing dependent, so not checked). */
	fprintf(stderr, "race: %llu ops applied, %llu dropped as stale\n",
		(unsigned long long)st.applied, (unsigned long long)st.stale);
	vc_opq_destroy(race_q);
	p->ops->destroy(p);
}

/* --- many threads against a stamp-sorted reference ------------------------ */

/* Each thread owns a range of nodes (only it inserts and removes them, as
 * the engine serialises a page's insert and remove) and hits any node with
 * whatever incarnation it reads. Every op is logged with its stamp. With
 * short queues full-queue drains run all the time, and one more thread
 * drains and counts on its own. After a final drain each tier must
 * list, MRU first, the queued nodes by the stamp of their last applied
 * insert or hit, computed from the log sorted by stamp with the apply
 * rules of opqueue.h. */
enum { MT = 4, PER = 64, MN = MT * PER, OPS = 40000 };

struct logrec {
	uint32_t stamp, gen;
	uint16_t node;
	uint8_t op, tier; /* op: 1 insert, 2 hit, 3 remove */
};

static struct vc_opq_node mt_nodes[MN];
static struct vc_opq *mt_q;
static struct logrec *mt_log[MT];
static atomic_int mt_done;

static void *mt_worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(t + 1);
	struct vc_opq_local *l = vc_opq_attach(mt_q);
	CHECK(l);
	uint32_t gen[PER] = { 0 };
	for (int i = 0; i < OPS; i++) {
		struct logrec *r = &mt_log[t][i];
		uint64_t x = t_rand(&s);
		if (x % 8 < 5) {
			int k = (int)((x >> 8) % MN);
			r->gen = vc_opq_gen(&mt_nodes[k]);
			vc_opq_hit(l, &mt_nodes[k], r->gen);
			r->op = 2;
			r->node = (uint16_t)k;
		} else {
			int k = (int)((x >> 8) % PER);
			struct vc_opq_node *n = &mt_nodes[t * PER + k];
			r->node = (uint16_t)(t * PER + k);
			if (!vc_opq_gen_live(gen[k])) {
				r->tier = (uint8_t)((x >> 20) % NTIERS);
				gen[k] = vc_opq_insert(l, n, r->tier);
				CHECK(vc_opq_gen_live(gen[k]));
				r->op = 1;
			} else if (x % 8 < 7) {
				vc_opq_hit(l, n, gen[k]);
				r->op = 2;
			} else {
				CHECK(vc_opq_remove(l, n, gen[k]));
				r->op = 3;
				gen[k]++;
			}
			r->gen = r->op == 3 ? gen[k] - 1 : gen[k];
		}
		r->stamp = vc_opq_last_stamp(l);
	}
	vc_opq_detach(l);
	atomic_fetch_add(&mt_done, 1);
	return NULL;
}

static void *mt_drainer(void *arg)
{
	(void)arg;
	for (unsigned i = 0; atomic_load(&mt_done) < MT; i++) {
		if (i % 2)
			vc_opq_drain(mt_q);
		else
			(void)vc_opq_count(mt_q, (int)(i / 2) % NTIERS);
	}
	return NULL;
}

static int cmp_stamp(const void *a, const void *b)
{
	uint32_t x = ((const struct logrec *)a)->stamp, y = ((const struct logrec *)b)->stamp;
	return (x > y) - (x < y);
}

static struct {
	bool queued;
	uint8_t tier;
	uint32_t lgen;
	uint64_t touch; /* position in stamp order of the last applied insert or hit */
} ref[MN];

static int cmp_touch_desc(const void *a, const void *b)
{
	uint64_t x = ref[*(const int *)a].touch, y = ref[*(const int *)b].touch;
	return (x < y) - (x > y);
}

static void test_many_threads(unsigned qlen)
{
	init_nodes(mt_nodes, MN);
	struct vc_policy *p = new_lru();
	CHECK_OK(vc_opq_create(&vc_policy_lru, p, MT + 1, qlen, &mt_q));
	for (int t = 0; t < MT; t++)
		CHECK((mt_log[t] = calloc(OPS, sizeof *mt_log[t])) != NULL);
	atomic_store(&mt_done, 0);
	pthread_t w[MT], d;
	CHECK(pthread_create(&d, NULL, mt_drainer, NULL) == 0);
	for (int t = 0; t < MT; t++)
		CHECK(pthread_create(&w[t], NULL, mt_worker, (void *)(intptr_t)t) == 0);
	for (int t = 0; t < MT; t++)
		pthread_join(w[t], NULL);
	pthread_join(d, NULL);
	vc_opq_drain(mt_q);

	/* Stamps start at 0 on a fresh queue and stay far below 2^32. */
	struct logrec *all = malloc(sizeof *all * MT * OPS);
	CHECK(all);
	for (int t = 0; t < MT; t++)
		memcpy(all + (size_t)t * OPS, mt_log[t], sizeof *all * OPS);
	qsort(all, (size_t)MT * OPS, sizeof *all, cmp_stamp);
	for (int i = 0; i < MT * OPS; i++)
		CHECK(all[i].stamp == (uint32_t)i); /* one stamp per op, none lost */
	uint64_t stale = 0;
	memset(ref, 0, sizeof ref);
	for (uint64_t i = 0; i < (uint64_t)MT * OPS; i++) {
		struct logrec *r = &all[i];
		int k = r->node;
		bool same = ref[k].queued && ref[k].lgen == r->gen;
		if (r->op == 1) {
			CHECK(!ref[k].queued);
			ref[k].queued = true;
			ref[k].tier = r->tier;
			ref[k].lgen = r->gen;
			ref[k].touch = i;
		} else if (r->op == 2) {
			if (same)
				ref[k].touch = i;
			stale += !same;
		} else {
			CHECK(same);
			ref[k].queued = false;
		}
	}
	for (int t = 0; t < NTIERS; t++) {
		int want[MN + 1], n = 0;
		for (int k = 0; k < MN; k++)
			if (ref[k].queued && ref[k].tier == t)
				want[n++] = k;
		qsort(want, (size_t)n, sizeof *want, cmp_touch_desc);
		want[n] = -1;
		int ids[MN];
		int have = walk(p, t, mt_nodes, ids, MN);
		CHECK(have == n);
		for (int i = 0; i < n; i++)
			if (ids[n - 1 - i] != want[i]) {
				fprintf(stderr, "tier %d position %d: node %d, reference %d\n", t, i,
					ids[n - 1 - i], want[i]);
				exit(1);
			}
	}
	check_consistent(p, mt_nodes, MN);
	struct vc_opq_stats st;
	vc_opq_get_stats(mt_q, &st);
	/* Every op was applied or dropped exactly once. The real drops are the
	 * reference's stale hits plus, for each insert whose incarnation had
	 * already ended when its drain came (timing dependent; the reference
	 * applies those), that insert, its remove and the hits between. */
	CHECK(st.applied + st.stale == (uint64_t)MT * OPS);
	CHECK(st.stale >= stale);
	fprintf(stderr, "many threads, queues of %u: %d ops, %llu drains (%llu on a full queue), "
			"largest batch %llu, %llu stale\n",
		qlen, MT * OPS, (unsigned long long)st.drains, (unsigned long long)st.full_drains,
		(unsigned long long)st.max_batch, (unsigned long long)st.stale);
	free(all);
	for (int t = 0; t < MT; t++)
		free(mt_log[t]);
	vc_opq_destroy(mt_q);
	p->ops->destroy(p);
}

/* vc_opq_victims: one drain for a batch, victims offered in LRU order,
 * dead nodes and those skip rejects passed over, take() stopping it. */
struct takes {
	struct vc_opq_node *base;
	bool taken[16];
	int order[16], n, stop_at;
};

static bool skip_taken(const struct vc_pnode *n, void *arg)
{
	const struct takes *t = arg;
	int i = (int)(vc_opq_node_of(n) - t->base);
	return t->taken[i] || i == 5; /* 5: pinned, say */
}

static bool take_one(struct vc_opq_node *n, void *arg)
{
	struct takes *t = arg;
	if (t->n == t->stop_at)
		return false;
	int i = (int)(n - t->base);
	t->taken[i] = true;
	t->order[t->n++] = i;
	return true;
}

static void test_victims(void)
{
	enum { NN = 10 };
	static struct vc_opq_node a[NN];
	init_nodes(a, NN);
	struct vc_policy *p = new_lru();
	struct vc_opq *q;
	CHECK_OK(vc_opq_create(&vc_policy_lru, p, 2, 64, &q));
	struct vc_opq_local *l = vc_opq_attach(q);
	CHECK(l);
	uint32_t g[NN];
	for (int i = 0; i < NN; i++)
		g[i] = vc_opq_insert(l, &a[i], 0); /* queued, not applied: the call drains */
	CHECK(vc_opq_remove(l, &a[3], g[3]));     /* dead before the batch */
	vc_opq_hit(l, &a[0], g[0]);                /* 0 goes to the MRU end */
	struct takes t = { .base = a, .stop_at = -1 };
	CHECK(vc_opq_victims(q, 0, skip_taken, &t, take_one, &t, 4) == 4);
	const int want[] = { 1, 2, 4, 6 };
	for (int i = 0; i < 4; i++)
		CHECK(t.order[i] == want[i]);
	struct vc_opq_stats st;
	vc_opq_get_stats(q, &st);
	CHECK(st.drains == 1);
	/* take() refusing the second offer ends the batch at one. */
	t.n = 0;
	t.stop_at = 1;
	CHECK(vc_opq_victims(q, 0, skip_taken, &t, take_one, &t, 4) == 1);
	CHECK(t.order[0] == 7);
	/* Past the last candidate: 8, 9, 0 remain (5 skipped). */
	t.n = 0;
	t.stop_at = -1;
	CHECK(vc_opq_victims(q, 0, skip_taken, &t, take_one, &t, 16) == 3);
	CHECK(t.order[0] == 8 && t.order[1] == 9 && t.order[2] == 0);
	vc_opq_detach(l);
	vc_opq_destroy(q);
	p->ops->destroy(p);
	fprintf(stderr, "victims: a batch in LRU order, one drain\n");
}

int main(void)
{
	test_merge_order();
	test_full_queue();
	test_victims();
	test_stale_race();
	test_race_threads();
	/* Queues of 2 drain on nearly every op; of 64, often; of 1024, mostly
	 * through the drainer thread. */
	test_many_threads(2);
	test_many_threads(64);
	test_many_threads(1024);
	return 0;
}
