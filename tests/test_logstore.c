/* The log-structured GPU store against a model: appends (batches land in
 * the head, rewrites orphan old slots), tail eviction, and cleaning with
 * both policies, where the device moves live pages to the head in stamp
 * order. Every live page's bytes, owner and place (where[], which the
 * cleaner updates on the device) are checked on the device named by
 * VC_TEST_DEVICE. */
#include <errno.h>

#include "engine/batcher.h"
#include "device/device.h"
#include "testutil.h"
#include "tier/logstore.h"

#define PS 4096
#define PER_SEG 16
#define NSEG 16
#define NKEYS 400

static struct vc_device *dev;
static struct vc_batcher *bat;
static struct vc_ls *ls;
static unsigned char *pin; /* PER_SEG * 2 pages of pinned staging */
static uint64_t pin_dev;
static uint64_t clock_now; /* stamps */

static struct mpage {
	int live;
	uint32_t g;     /* global slot */
	uint64_t stamp; /* LRU stamp given at append */
	uint64_t seed;  /* the page's bytes */
} model[NKEYS];

static void fill(unsigned char *p, uint64_t seed)
{
	for (int i = 0; i < PS; i += 8) {
		uint64_t v = t_rand(&seed);
		memcpy(p + i, &v, 8);
	}
}

static void run_moves(struct vc_move *mv, uint32_t n)
{
	struct vc_ticket *t = malloc(n * sizeof *t);
	CHECK_OK(vc_batcher_add_n(bat, mv, n, t));
	CHECK_OK(vc_batcher_wait_n(bat, t, n));
	free(t);
}

static void verify(void)
{
	unsigned char want[PS];
	struct vc_ls_stats st;
	vc_ls_get_stats(ls, &st);
	uint64_t live = 0;
	for (uint32_t k = 0; k < NKEYS; k++) {
		if (!model[k].live)
			continue;
		live++;
		CHECK(vc_ls_key(ls, model[k].g) == k);
		CHECK(vc_ls_where(ls, k) == model[k].g);
		CHECK_OK(dev->ops->memcpy_sync(dev, pin_dev, vc_ls_addr(ls, model[k].g), PS));
		fill(want, model[k].seed);
		CHECK(memcmp(pin, want, PS) == 0);
	}
	CHECK(st.slots_live == live && vc_ls_live_total(ls) == live);
	CHECK(st.fragmentation >= 0 && st.fragmentation <= 1);
	CHECK(st.segs_free + st.segs_live + st.segs_cleaning == st.segs_total);
}

/* Appends keys (rewriting those already live) and writes their data with
 * one batch: the slots of one head segment are contiguous. */
static int append(const uint32_t *keys, uint32_t n, uint64_t *seed)
{
	uint32_t g[PER_SEG * 2];
	uint64_t stamp = ++clock_now;
	int r = vc_ls_append(ls, n, keys, stamp, g);
	if (r < 0)
		return r;
	struct vc_move mv[PER_SEG * 2];
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = keys[i];
		if (model[k].live)
			vc_ls_orphan(ls, model[k].g);
		model[k] = (struct mpage){ .live = 1, .g = g[i], .stamp = stamp,
					       .seed = t_rand(seed) };
		fill(pin + (size_t)i * PS, model[k].seed);
		mv[i] = (struct vc_move){ .src = pin_dev + (uint64_t)i * PS,
					  .dst = vc_ls_addr(ls, g[i]), .op = VC_MOVE_COPY };
		if (i && g[i] / PER_SEG == g[i - 1] / PER_SEG)
			CHECK(vc_ls_addr(ls, g[i]) == vc_ls_addr(ls, g[i - 1]) + PS);
	}
	run_moves(mv, n);
	return 0;
}

static void evict_tail(void)
{
	uint32_t seg;
	CHECK_OK(vc_ls_take_tail(ls, &seg));
	uint32_t live[PER_SEG];
	uint32_t n = vc_ls_live(ls, seg, live, PER_SEG);
	CHECK(n == vc_ls_seg_live(ls, seg));
	for (uint32_t i = 0; i < n; i++) {
		uint32_t k = vc_ls_key(ls, live[i]);
		CHECK(k < NKEYS && model[k].live && model[k].g == live[i]);
		model[k].live = 0;
	}
	vc_ls_release(ls, seg, true);
}

static int by_slot(const void *a, const void *b)
{
	uint32_t x = model[*(const uint32_t *)a].g, y = model[*(const uint32_t *)b].g;
	return (x > y) - (x < y);
}

/* After a clean the model follows its pages through where[]: they arrive
 * in stamp order (oldest first) in consecutive slots. */
static void clean(int policy)
{
	uint32_t segs[3] = { UINT32_MAX, UINT32_MAX, UINT32_MAX };
	uint32_t ns = vc_ls_pick(ls, policy, 1 + (uint32_t)(clock_now % 3), segs);
	if (ns == 0)
		return;
	int64_t gain = vc_ls_clean_gain(ls, ns, segs);
	uint32_t keys[3 * PER_SEG], nk = 0;
	for (uint32_t k = 0; k < NKEYS; k++) {
		uint32_t sg = model[k].g / PER_SEG;
		if (model[k].live && (sg == segs[0] || sg == segs[1] || sg == segs[2]))
			keys[nk++] = k;
	}
	int n = vc_ls_clean(ls, ns, segs);
	if (n == -ENOSPC) { /* no room at the head: give the segments up instead */
		CHECK(gain < 0);
		vc_ls_unpick(ls, ns, segs);
		return;
	}
	CHECK_OK(n);
	CHECK((uint32_t)n == nk);
	for (uint32_t i = 0; i < nk; i++) {
		uint32_t g = vc_ls_where(ls, keys[i]);
		CHECK(vc_ls_key(ls, g) == keys[i] && g / PER_SEG != segs[0] &&
		      g / PER_SEG != segs[1] && g / PER_SEG != segs[2]);
		model[keys[i]].g = g;
	}
	/* In each destination segment: consecutive slots, stamps in order;
	 * the segments' stamp ranges in some order (the head's, then fresh
	 * ones, whose numbers say nothing of their order). */
	qsort(keys, nk, sizeof *keys, by_slot);
	uint64_t lo[4], hi[4];
	uint32_t nr = 0;
	for (uint32_t i = 0; i < nk; i++) {
		const struct mpage *b = &model[keys[i]];
		if (i == 0 || b->g / PER_SEG != model[keys[i - 1]].g / PER_SEG) {
			CHECK(nr < 4);
			lo[nr] = hi[nr] = b->stamp;
			nr++;
			continue;
		}
		const struct mpage *a = &model[keys[i - 1]];
		CHECK(a->stamp <= b->stamp && b->g == a->g + 1);
		hi[nr - 1] = b->stamp;
	}
	for (uint32_t i = 0; i < nr; i++) /* each range meets every other in order */
		for (uint32_t j = 0; j < nr; j++)
			CHECK(i == j || hi[i] <= lo[j] || hi[j] <= lo[i]);
}

/* Deterministic picks: cost-benefit prefers the emptiest old segment,
 * oldest prefers the lowest log sequence number; gains and -ENOSPC. */
static void picks(void)
{
	struct vc_ls_config cfg = { .page_size = PS, .seg_bytes = PS * 4, .total_bytes = PS * 4 * 4,
				    .free_watermark = 0.25, .early_release = 0.1 };
	struct vc_ls *s;
	CHECK_OK(vc_ls_open(dev, &cfg, &s));
	uint32_t keys[16], g[16];
	for (uint32_t i = 0; i < 16; i++)
		keys[i] = i;
	CHECK_OK(vc_ls_append(s, 12, keys, 5, g)); /* segments A(0-3) B(4-7) C(8-11) */
	CHECK(g[0] / 4 == g[3] / 4 && g[4] / 4 != g[3] / 4 && g[1] == g[0] + 1);
	CHECK(!vc_ls_low(s)); /* 1 free of 4, watermark 1 */
	CHECK_OK(vc_ls_append(s, 1, keys + 12, 6, g + 12)); /* seals C, opens D */
	CHECK(vc_ls_low(s));
	CHECK(vc_ls_take_loss(s, g[12] / 4) == 3 && vc_ls_take_loss(s, g[8] / 4) == 0);
	CHECK_OK(vc_ls_append(s, 3, keys + 13, 7, g + 13));
	CHECK(vc_ls_append(s, 1, keys, 8, g) == -ENOSPC);
	CHECK(vc_ls_early_budget(s) == 1); /* 10% of 16 live */
	CHECK(vc_ls_key(s, g[5]) == 5);
	for (int i = 4; i < 7; i++)
		vc_ls_orphan(s, g[i]); /* B is 1/4 live */
	vc_ls_orphan(s, g[4]);         /* twice is harmless */
	CHECK(vc_ls_key(s, g[5]) == VC_LS_DEAD);
	CHECK(vc_ls_fragmentation(s) == 3.0 / 16);
	uint32_t pick[2];
	CHECK(vc_ls_pick(s, VC_LS_CLEAN_COST_BENEFIT, 1, pick) == 1 && pick[0] == g[4] / 4);
	CHECK(vc_ls_clean_gain(s, 1, pick) == -1); /* no free segment, full head */
	CHECK(vc_ls_clean(s, 1, pick) == -ENOSPC);
	vc_ls_unpick(s, 1, pick);
	for (int i = 0; i < 3; i++)
		vc_ls_orphan(s, g[i]); /* A is 1/4 live too */
	/* Full segments are never picked; the oldest policy takes A first. */
	CHECK(vc_ls_pick(s, VC_LS_CLEAN_OLDEST, 2, pick) == 2 && pick[0] == g[0] / 4 &&
	      pick[1] == g[4] / 4);
	uint32_t tail;
	CHECK_OK(vc_ls_take_tail(s, &tail));
	CHECK(tail == g[8] / 4); /* segments being cleaned are not the tail */
	struct vc_ls_stats st;
	vc_ls_get_stats(s, &st);
	CHECK(st.segs_cleaning == 3 && st.slots_live == 10 && st.slots_dead == 6);
	vc_ls_release(s, tail, true);
	CHECK(vc_ls_clean_gain(s, 2, pick) == 1); /* 2 live pages fill one segment */
	vc_ls_close(s);

	cfg.seg_bytes = 3000;
	CHECK(vc_ls_open(dev, &cfg, &s) == -EINVAL);
	cfg.seg_bytes = PS * 4;
	cfg.total_bytes = PS * 4;
	CHECK(vc_ls_open(dev, &cfg, &s) == -EINVAL);
}

/* A cleaned segment keeps its old keys until appends overwrite them; one
 * reopened, filled part-way and sealed short by eviction's take (then
 * given back) must not let the cleaner see the stale keys past its used
 * slots. */
static void recycled(void)
{
	struct vc_ls_config cfg = { .page_size = PS, .seg_bytes = PS * 4, .total_bytes = PS * 4 * 3,
				    .free_watermark = 0, .early_release = 0, .owners = 16 };
	struct vc_ls *s;
	CHECK_OK(vc_ls_open(dev, &cfg, &s));
	uint32_t keys[4] = { 1, 2, 3, 4 }, g[4], seg;
	CHECK_OK(vc_ls_append(s, 4, keys, 1, g)); /* A: full, sealed */
	const uint32_t a = g[0] / 4;
	vc_ls_orphan(s, g[0]);
	CHECK(vc_ls_pick(s, VC_LS_CLEAN_OLDEST, 1, &seg) == 1 && seg == a);
	CHECK(vc_ls_clean(s, 1, &seg) == 3); /* to B; A is free with keys 2, 3, 4 left */
	CHECK(vc_ls_where(s, 2) / 4 != a && vc_ls_key(s, vc_ls_where(s, 4)) == 4);
	uint32_t more[2] = { 5, 6 };
	CHECK_OK(vc_ls_append(s, 1, more, 2, g)); /* fills B */
	CHECK_OK(vc_ls_append(s, 1, more + 1, 3, g)); /* reopens A (the free stack's top) */
	CHECK(g[0] / 4 == a && g[0] % 4 == 0 && vc_ls_where(s, 6) == g[0]);
	CHECK_OK(vc_ls_take(s, a)); /* sealed short */
	for (uint32_t k = 1; k < 4; k++)
		CHECK(vc_ls_key(s, a * 4 + k) == VC_LS_DEAD);
	vc_ls_unpick(s, 1, &seg);
	CHECK(vc_ls_pick(s, VC_LS_CLEAN_OLDEST, 1, &seg) == 1);
	CHECK(seg == a || vc_ls_seg_live(s, seg) < 4);
	if (seg != a) { /* B was older: clean it, then A */
		vc_ls_unpick(s, 1, &seg);
		CHECK_OK(vc_ls_take(s, seg)); /* keep B out of the way */
		CHECK(vc_ls_pick(s, VC_LS_CLEAN_OLDEST, 1, &seg) == 1 && seg == a);
	}
	CHECK(vc_ls_clean(s, 1, &seg) == 1); /* only key 6, not the stale 2, 3, 4 */
	CHECK(vc_ls_where(s, 6) / 4 != a && vc_ls_key(s, vc_ls_where(s, 6)) == 6);
	vc_ls_close(s);
}

int main(void)
{
	int r = vc_device_open(t_device_kind(), 0, &dev);
	t_skip_if_absent(r, "log store test on CUDA");
	CHECK_OK(r);
	picks();
	recycled();
	struct vc_ls_config cfg = { .page_size = PS, .seg_bytes = PS * PER_SEG,
				    .total_bytes = (uint64_t)PS * PER_SEG * NSEG,
				    .free_watermark = 0.2, .early_release = 0.1, .owners = NKEYS };
	CHECK_OK(vc_ls_open(dev, &cfg, &ls));
	CHECK(vc_ls_slots_per_seg(ls) == PER_SEG);
	CHECK(vc_ls_capacity(ls) == PER_SEG * NSEG);
	void *p;
	CHECK_OK(dev->ops->host_alloc(dev, (size_t)PS * PER_SEG * 2, &p, &pin_dev));
	pin = p;
	CHECK_OK(vc_batcher_create(dev, PS, 64, 50, NULL, &bat));

	uint64_t seed = 77;
	int evictions = 0, cleanings = 0;
	for (int round = 0; round < 600; round++) {
		uint32_t n = 1 + (uint32_t)(t_rand(&seed) % 20);
		uint32_t keys[20];
		for (uint32_t i = 0; i < n; i++) /* distinct keys in one append */
			keys[i] = (uint32_t)(t_rand(&seed) % (NKEYS / 20)) * 20 + i;
		while (vc_ls_low(ls) || append(keys, n, &seed) == -ENOSPC) {
			uint64_t before = vc_ls_capacity(ls);
			struct vc_ls_stats s0, s1;
			vc_ls_get_stats(ls, &s0);
			if (t_rand(&seed) % 2) {
				evict_tail();
				evictions++;
			} else {
				clean((int)(t_rand(&seed) % 2));
				vc_ls_get_stats(ls, &s1);
				if (s1.gc_runs > s0.gc_runs)
					cleanings++;
				else if (s1.segs_free == s0.segs_free) {
					evict_tail();
					evictions++;
				}
			}
			CHECK(vc_ls_capacity(ls) == before);
			if (!vc_ls_low(ls) && append(keys, n, &seed) == 0)
				break;
		}
		if (round % 50 == 0)
			verify();
	}
	verify();
	struct vc_ls_stats st;
	vc_ls_get_stats(ls, &st);
	fprintf(stderr, "log store: %d evictions, %d cleanings, %llu pages moved, %u free of %u, "
			"fragmentation %.2f\n",
		evictions, cleanings, (unsigned long long)st.gc_pages_moved, st.segs_free,
		st.segs_total, st.fragmentation);
	CHECK(evictions > 0 && cleanings > 0 && st.gc_pages_moved > 0);
	CHECK(st.segs_evicted > 0 && st.gc_runs == (uint64_t)cleanings);

	vc_batcher_destroy(bat);
	dev->ops->host_free(dev, pin);
	vc_ls_close(ls);
	vc_device_close(dev);
	return 0;
}
