/* The LRU policy and the registry: hand-worked sequences with known victims
 * (GRAM's Figure 2 among them) and randomized runs against reference models.
 * Host only: no device, no backing store. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "policy/policy.h"
#include "testutil.h"

struct page {
	struct vc_pnode pn;
	int id;
	int pinned;
};

#define PAGE(n) ((struct page *)((char *)(n) - offsetof(struct page, pn)))

static struct page pages[256];

static void init_pages(void)
{
	memset(pages, 0, sizeof pages);
	for (int i = 0; i < 256; i++) {
		pages[i].id = i;
		pages[i].pn.tier = VC_PNODE_NONE;
	}
}

/* Letters name pages in the hand-worked cases. */
static struct page *L(char c)
{
	return &pages[(unsigned char)c];
}

/* Records every node the walk offers and rejects it, so victim() visits the
 * whole queue: the record is the queue from LRU tail to MRU head. */
struct walk {
	int ids[256];
	int n;
};

static bool walk_all(const struct vc_pnode *n, void *arg)
{
	struct walk *w = arg;
	CHECK(w->n < 256);
	w->ids[w->n++] = PAGE(n)->id;
	return true;
}

/* Checks tier's queue against `mru_to_lru` (page letters, MRU first). */
static void check_queue(struct vc_policy *p, int tier, const char *mru_to_lru)
{
	struct walk w = { .n = 0 };
	CHECK(p->ops->victim(p, tier, walk_all, &w) == NULL);
	int len = (int)strlen(mru_to_lru);
	if (w.n != len || p->ops->count(p, tier) != (uint64_t)len) {
		fprintf(stderr, "tier %d: expected %s, have %d nodes (count %llu)\n", tier,
			mru_to_lru, w.n, (unsigned long long)p->ops->count(p, tier));
		exit(1);
	}
	for (int i = 0; i < len; i++) {
		if (w.ids[len - 1 - i] != mru_to_lru[i]) {
			fprintf(stderr, "tier %d: expected %s, position %d is %c\n", tier,
				mru_to_lru, i, w.ids[len - 1 - i]);
			exit(1);
		}
	}
}

/* --- the GRAM two-tier flow, driven through the policy calls ------------ */

enum { HOST = 0, GPU = 1 };

struct twotier {
	struct vc_policy *p;
	uint64_t cap[2];
	/* What the last access did: the host victim that went to the GPU tier
	 * (or -1) and the page evicted from the GPU tier (or -1). */
	int to_gpu, evicted;
	int host_hit, gpu_hit;
};

static struct vc_pnode *victim_of(struct twotier *t, int tier)
{
	struct vc_pnode *v = t->p->ops->victim(t->p, tier, NULL, NULL);
	CHECK(v != NULL);
	CHECK(v->tier == tier);
	return v;
}

/* One page access. A host hit refreshes the page. A GPU hit brings the page
 * to the host head and, when the host tier is full, sends the host victim to
 * the GPU head (an exchange). A miss loads the page into the host head; a
 * full host tier sends its victim to the GPU head, first evicting the GPU
 * victim when the GPU tier is full. */
static void access_page(struct twotier *t, struct page *pg)
{
	const struct vc_policy_ops *o = t->p->ops;
	t->to_gpu = t->evicted = -1;
	t->host_hit = t->gpu_hit = 0;
	if (pg->pn.tier == HOST) {
		t->host_hit = 1;
		o->hit(t->p, &pg->pn);
		return;
	}
	int miss = pg->pn.tier == VC_PNODE_NONE;
	if (!miss) {
		CHECK(pg->pn.tier == GPU);
		t->gpu_hit = 1;
		o->remove(t->p, &pg->pn);
		CHECK(pg->pn.tier == VC_PNODE_NONE);
	}
	if (o->count(t->p, HOST) == t->cap[HOST]) {
		struct vc_pnode *hv = victim_of(t, HOST);
		o->remove(t->p, hv);
		if (o->count(t->p, GPU) == t->cap[GPU]) {
			struct vc_pnode *gv = victim_of(t, GPU);
			o->remove(t->p, gv);
			t->evicted = PAGE(gv)->id;
		}
		o->insert(t->p, hv, GPU);
		CHECK(hv->tier == GPU);
		t->to_gpu = PAGE(hv)->id;
	}
	o->insert(t->p, &pg->pn, HOST);
	CHECK(pg->pn.tier == HOST);
}

/* GRAM, Figure 2: host and GPU tiers of 3 pages each. */
static void test_gram_figure2(void)
{
	init_pages();
	struct twotier t = { .cap = { 3, 3 } };
	t.p = vc_policy_find("lru")->create(t.cap, 2);
	CHECK(t.p);

	/* Build host D E F, GPU A B C (MRU first) by cold misses C B A F E D. */
	access_page(&t, L('C'));
	access_page(&t, L('B'));
	access_page(&t, L('A'));
	CHECK(t.to_gpu == -1 && t.evicted == -1);
	check_queue(t.p, HOST, "ABC");
	check_queue(t.p, GPU, "");
	access_page(&t, L('F'));
	CHECK(t.to_gpu == 'C' && t.evicted == -1);
	access_page(&t, L('E'));
	CHECK(t.to_gpu == 'B' && t.evicted == -1);
	access_page(&t, L('D'));
	CHECK(t.to_gpu == 'A' && t.evicted == -1);
	check_queue(t.p, HOST, "DEF");
	check_queue(t.p, GPU, "ABC");

	/* Access A, in the GPU tier: A and the host victim F exchange. */
	access_page(&t, L('A'));
	CHECK(t.gpu_hit && t.to_gpu == 'F' && t.evicted == -1);
	check_queue(t.p, HOST, "ADE");
	check_queue(t.p, GPU, "FBC");

	/* Access G, in neither: E goes from the host to the GPU head, C leaves. */
	access_page(&t, L('G'));
	CHECK(!t.gpu_hit && !t.host_hit && t.to_gpu == 'E' && t.evicted == 'C');
	check_queue(t.p, HOST, "GAD");
	check_queue(t.p, GPU, "EFB");

	/* A host hit reorders the host tier only. */
	access_page(&t, L('D'));
	CHECK(t.host_hit && t.to_gpu == -1 && t.evicted == -1);
	check_queue(t.p, HOST, "DGA");
	check_queue(t.p, GPU, "EFB");

	/* B, the GPU tail, comes back: exchange with host victim A. */
	access_page(&t, L('B'));
	CHECK(t.gpu_hit && t.to_gpu == 'A' && t.evicted == -1);
	check_queue(t.p, HOST, "BDG");
	check_queue(t.p, GPU, "AEF");

	/* C again misses: G to the GPU head, F (GPU tail) evicted. */
	access_page(&t, L('C'));
	CHECK(t.to_gpu == 'G' && t.evicted == 'F');
	check_queue(t.p, HOST, "CBD");
	check_queue(t.p, GPU, "GAE");
	CHECK(L('F')->pn.tier == VC_PNODE_NONE);

	t.p->ops->destroy(t.p);
}

/* --- single-queue behaviour -------------------------------------------- */

static bool skip_pinned(const struct vc_pnode *n, void *arg)
{
	int *calls = arg;
	(*calls)++;
	return PAGE(n)->pinned;
}

static void test_skip(void)
{
	init_pages();
	uint64_t cap[1] = { 8 };
	struct vc_policy *p = vc_policy_find("lru")->create(cap, 1); /* the order below is LRU's */
	CHECK(p);
	const struct vc_policy_ops *o = p->ops;
	int calls = 0;
	CHECK(o->victim(p, 0, NULL, NULL) == NULL);
	CHECK(o->victim(p, 0, skip_pinned, &calls) == NULL);
	CHECK(calls == 0);

	for (const char *s = "abcde"; *s; s++)
		o->insert(p, &L(*s)->pn, 0);
	check_queue(p, 0, "edcba");
	CHECK(o->victim(p, 0, skip_pinned, &calls) == &L('a')->pn);
	CHECK(calls == 1);

	L('a')->pinned = L('b')->pinned = 1;
	calls = 0;
	CHECK(o->victim(p, 0, skip_pinned, &calls) == &L('c')->pn);
	CHECK(calls == 3); /* a, b skipped; c taken: O(1 + skipped) */

	for (const char *s = "abcde"; *s; s++)
		L(*s)->pinned = 1;
	calls = 0;
	CHECK(o->victim(p, 0, skip_pinned, &calls) == NULL);
	CHECK(calls == 5);

	L('e')->pinned = 0;
	CHECK(o->victim(p, 0, skip_pinned, &calls) == &L('e')->pn);
	/* victim() does not remove: the queue is unchanged. */
	check_queue(p, 0, "edcba");
	/* Out-of-range tiers are empty. */
	CHECK(o->victim(p, 1, NULL, NULL) == NULL);
	CHECK(o->victim(p, -1, NULL, NULL) == NULL);
	CHECK(o->count(p, 1) == 0);
	o->destroy(p);
}

static void test_remove_and_hit(void)
{
	init_pages();
	uint64_t cap[2] = { 8, 8 };
	struct vc_policy *p = vc_policy_find("lru")->create(cap, 2);
	CHECK(p);
	const struct vc_policy_ops *o = p->ops;
	for (const char *s = "abcdef"; *s; s++)
		o->insert(p, &L(*s)->pn, 0);
	o->insert(p, &L('x')->pn, 1);
	check_queue(p, 0, "fedcba");
	check_queue(p, 1, "x");

	o->remove(p, &L('c')->pn); /* middle */
	CHECK(L('c')->pn.tier == VC_PNODE_NONE);
	check_queue(p, 0, "fedba");
	o->remove(p, &L('f')->pn); /* head (MRU) */
	check_queue(p, 0, "edba");
	o->remove(p, &L('a')->pn); /* tail (LRU) */
	check_queue(p, 0, "edb");
	CHECK(o->victim(p, 0, NULL, NULL) == &L('b')->pn);
	check_queue(p, 1, "x");

	o->hit(p, &L('b')->pn); /* tail to head */
	check_queue(p, 0, "bed");
	o->hit(p, &L('b')->pn); /* head stays */
	check_queue(p, 0, "bed");
	o->hit(p, &L('e')->pn); /* middle to head */
	check_queue(p, 0, "ebd");
	o->hit(p, &L('x')->pn); /* hit stays within its own tier */
	check_queue(p, 1, "x");
	check_queue(p, 0, "ebd");

	/* A removed node can come back, in either tier. */
	o->insert(p, &L('c')->pn, 1);
	check_queue(p, 1, "cx");
	o->remove(p, &L('x')->pn);
	o->remove(p, &L('c')->pn);
	check_queue(p, 1, "");
	/* Drain by victim + remove: LRU order. */
	o->remove(p, o->victim(p, 0, NULL, NULL));
	check_queue(p, 0, "eb");
	o->remove(p, o->victim(p, 0, NULL, NULL));
	o->remove(p, o->victim(p, 0, NULL, NULL));
	check_queue(p, 0, "");
	CHECK(o->victim(p, 0, NULL, NULL) == NULL);
	o->insert(p, &L('z')->pn, 0); /* empty queue works again */
	check_queue(p, 0, "z");
	o->destroy(p);
}

static void test_registry(void)
{
	CHECK(vc_policies[0] != NULL);
	for (int i = 0; vc_policies[i]; i++) {
		const struct vc_policy_ops *o = vc_policies[i];
		CHECK(o->name && o->cost && o->create && o->destroy && o->insert && o->hit &&
		      o->remove && o->victim && o->count);
		CHECK(vc_policy_find(o->name) == o);
	}
	/* The default: S3-FIFO in the host tier, LRU in the GPU tier. */
	CHECK(vc_policy_find(NULL) == vc_policy_find("s3fifo+lru"));
	CHECK(strcmp(vc_policy_find(NULL)->name, VC_POLICY_DEFAULT) == 0);
	CHECK(vc_policy_find("no-such-policy") == NULL);
	CHECK(vc_policy_find("") == NULL);

	uint64_t cap[1] = { 1 };
	CHECK(vc_policy_find("lru")->create(cap, 0) == NULL);
	CHECK(vc_policy_find("lru")->create(NULL, VC_PNODE_NONE) == NULL);
	struct vc_policy *p = vc_policy_find("lru")->create(NULL, 3); /* capacities optional */
	CHECK(p && p->ops == vc_policy_find("lru"));
	for (int t = 0; t < 3; t++)
		CHECK(p->ops->count(p, t) == 0);
	p->ops->destroy(p);
}

/* --- randomized: per-tier queues against arrays ------------------------- */

#define RN 64 /* pages: small, so that queues fill and hits are frequent */
#define RT 3  /* tiers: more than GRAM's two, to exercise independence */

struct ref {
	int q[RT][RN]; /* q[t][0] is the MRU page */
	int n[RT];
	int tier[RN]; /* -1 when not queued */
};

static void ref_del(struct ref *r, int id)
{
	int t = r->tier[id];
	int i = 0;
	while (r->q[t][i] != id)
		i++;
	memmove(&r->q[t][i], &r->q[t][i + 1], (size_t)(r->n[t] - i - 1) * sizeof(int));
	r->n[t]--;
	r->tier[id] = -1;
}

static void ref_push(struct ref *r, int id, int t)
{
	memmove(&r->q[t][1], &r->q[t][0], (size_t)r->n[t] * sizeof(int));
	r->q[t][0] = id;
	r->n[t]++;
	r->tier[id] = t;
}

static int ref_victim(const struct ref *r, int t)
{
	for (int i = r->n[t] - 1; i >= 0; i--)
		if (!pages[r->q[t][i]].pinned)
			return r->q[t][i];
	return -1;
}

static bool skip_flag(const struct vc_pnode *n, void *arg)
{
	(void)arg;
	return PAGE(n)->pinned;
}

static void test_random_queues(void)
{
	init_pages();
	uint64_t cap[RT] = { RN, RN, RN };
	struct vc_policy *p = vc_policy_find("lru")->create(cap, RT);
	CHECK(p);
	const struct vc_policy_ops *o = p->ops;
	struct ref r;
	memset(&r, 0, sizeof r);
	for (int i = 0; i < RN; i++)
		r.tier[i] = -1;
	uint64_t seed = 0x5eed1234abcdull;
	long victims = 0, nulls = 0;
	for (int op = 0; op < 100000; op++) {
		int id = (int)(t_rand(&seed) % RN);
		struct page *pg = &pages[id];
		switch (t_rand(&seed) % 5) {
		case 0: /* insert, or remove when queued */
		case 1:
			if (r.tier[id] < 0) {
				int t = (int)(t_rand(&seed) % RT);
				o->insert(p, &pg->pn, t);
				ref_push(&r, id, t);
			} else {
				o->remove(p, &pg->pn);
				ref_del(&r, id);
			}
			break;
		case 2: /* hit */
			if (r.tier[id] >= 0) {
				int t = r.tier[id];
				o->hit(p, &pg->pn);
				ref_del(&r, id);
				ref_push(&r, id, t);
			}
			break;
		case 3: /* toggle a pin */
			pg->pinned = !pg->pinned;
			break;
		case 4: { /* victim, then usually evict it */
			int t = (int)(t_rand(&seed) % RT);
			struct vc_pnode *v = o->victim(p, t, skip_flag, NULL);
			int want = ref_victim(&r, t);
			if (want < 0) {
				CHECK(v == NULL);
				nulls++;
			} else {
				CHECK(v != NULL);
				if (PAGE(v)->id != want) {
					fprintf(stderr, "op %d tier %d: victim %d, want %d\n", op, t,
						PAGE(v)->id, want);
					exit(1);
				}
				CHECK(v->tier == t);
				victims++;
				if (t_rand(&seed) % 2) {
					o->remove(p, v);
					ref_del(&r, want);
				}
			}
			break;
		}
		}
		for (int t = 0; t < RT; t++)
			CHECK(o->count(p, t) == (uint64_t)r.n[t]);
		CHECK(pg->pn.tier == (r.tier[id] < 0 ? VC_PNODE_NONE : r.tier[id]));
	}
	/* Full order check at the end, every tier. */
	for (int t = 0; t < RT; t++) {
		struct walk w = { .n = 0 };
		CHECK(o->victim(p, t, walk_all, &w) == NULL);
		CHECK(w.n == r.n[t]);
		for (int i = 0; i < w.n; i++)
			CHECK(w.ids[i] == r.q[t][r.n[t] - 1 - i]);
	}
	CHECK(victims > 1000 && nulls > 0);
	o->destroy(p);
}

/* --- randomized: GRAM's two tiers are one virtual LRU queue ------------- */

/* With host capacity H and GPU capacity G, the two-tier flow must keep the
 * host tier equal to the H most recent pages of one LRU queue of H + G
 * pages, the GPU tier equal to the next G, and evict exactly the page that
 * falls off that queue. */
static void test_random_virtual_queue(void)
{
	enum { H = 5, G = 11, NP = 40 };
	init_pages();
	struct twotier t = { .cap = { H, G } };
	t.p = vc_policy_find("lru")->create(t.cap, 2);
	CHECK(t.p);
	int vq[H + G + 1], vn = 0; /* vq[0] is MRU */
	uint64_t seed = 42;
	long exchanges = 0, evictions = 0;
	for (int op = 0; op < 100000; op++) {
		/* Skewed: half the accesses go to a hot quarter, so all three
		 * outcomes (host hit, GPU hit, miss) are common. */
		int id = (int)(t_rand(&seed) % (t_rand(&seed) % 2 ? NP / 4 : NP));
		int pos = -1;
		for (int i = 0; i < vn; i++)
			if (vq[i] == id)
				pos = i;
		int want_to_gpu = -1, want_evicted = -1;
		if (pos >= H || pos < 0) {
			if (vn >= H)
				want_to_gpu = vq[H - 1];
			if (pos < 0 && vn == H + G)
				want_evicted = vq[H + G - 1];
		}
		if (pos < 0)
			pos = vn++;
		memmove(&vq[1], &vq[0], (size_t)pos * sizeof(int));
		vq[0] = id;
		if (vn > H + G)
			vn = H + G;

		access_page(&t, &pages[id]);
		CHECK(t.to_gpu == want_to_gpu);
		CHECK(t.evicted == want_evicted);
		exchanges += t.gpu_hit;
		evictions += t.evicted >= 0;

		uint64_t nh = t.p->ops->count(t.p, HOST), ng = t.p->ops->count(t.p, GPU);
		CHECK(nh == (uint64_t)(vn < H ? vn : H));
		CHECK(nh + ng == (uint64_t)vn);
		if (op % 97 == 0) { /* full order check, now and then */
			struct walk w = { .n = 0 };
			t.p->ops->victim(t.p, HOST, walk_all, &w);
			t.p->ops->victim(t.p, GPU, walk_all, &w);
			/* walk order: host LRU..MRU, then GPU LRU..MRU */
			for (int i = 0; i < (int)nh; i++)
				CHECK(w.ids[i] == vq[nh - 1 - i]);
			for (int i = 0; i < (int)ng; i++)
				CHECK(w.ids[nh + i] == vq[vn - 1 - i]);
		}
	}
	CHECK(exchanges > 1000 && evictions > 1000);
	t.p->ops->destroy(t.p);
}

int main(void)
{
	test_registry();
	test_gram_figure2();
	test_skip();
	test_remove_and_hit();
	test_random_queues();
	test_random_virtual_queue();
	printf("test_policy: ok\n");
	return 0;
}
