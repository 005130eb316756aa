/* The log-structured GPU store against a model: appends (batches land in
 * the head, rewrites orphan old slots), tail eviction, and cleaning with
 * both policies, where live pages move device-to-device through the
 * batcher in the order the caller gives. Every live page's bytes are
 * checked on the device named by VC_TEST_DEVICE. */
#include <errno.h>

#include "core/batcher.h"
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
static unsigned char *pin; /* PER_SEG * NSEG pages of pinned staging */
static uint64_t pin_dev;

static struct {
	int live;
	struct vc_lsloc loc;
	uint64_t seed; /* the page's bytes */
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
	for (int k = 0; k < NKEYS; k++) {
		if (!model[k].live)
			continue;
		live++;
		CHECK(vc_ls_meta(ls, model[k].loc)->key == (uint64_t)k);
		CHECK_OK(dev->ops->memcpy_sync(dev, pin_dev, vc_ls_addr(ls, model[k].loc), PS));
		fill(want, model[k].seed);
		CHECK(memcmp(pin, want, PS) == 0);
	}
	CHECK(st.slots_live == live);
	CHECK(st.fragmentation >= 0 && st.fragmentation <= 1);
	CHECK(st.segs_free + st.segs_live + st.segs_cleaning == st.segs_total);
}

/* Appends keys (rewriting those already live) and writes their data with
 * one batch: the slots of one head segment are contiguous. */
static int append(const uint64_t *keys, uint32_t n, uint64_t *seed)
{
	struct vc_lsloc loc[PER_SEG * 2];
	int r = vc_ls_append(ls, n, keys, loc);
	if (r < 0)
		return r;
	struct vc_move mv[PER_SEG * 2];
	for (uint32_t i = 0; i < n; i++) {
		uint64_t k = keys[i];
		if (model[k].live)
			vc_ls_orphan(ls, model[k].loc);
		model[k].live = 1;
		model[k].loc = loc[i];
		model[k].seed = t_rand(seed);
		fill(pin + (size_t)i * PS, model[k].seed);
		mv[i] = (struct vc_move){ .src = pin_dev + (uint64_t)i * PS,
					  .dst = vc_ls_addr(ls, loc[i]), .op = VC_MOVE_COPY };
		if (i && loc[i].seg == loc[i - 1].seg)
			CHECK(vc_ls_addr(ls, loc[i]) == vc_ls_addr(ls, loc[i - 1]) + PS);
	}
	run_moves(mv, n);
	return 0;
}

static void evict_tail(void)
{
	uint32_t seg;
	CHECK_OK(vc_ls_tail(ls, &seg));
	struct vc_lsloc live[PER_SEG];
	uint32_t n = vc_ls_live(ls, seg, live, PER_SEG);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t k = vc_ls_meta(ls, live[i])->key;
		CHECK(model[k].live && model[k].loc.seg == seg);
		model[k].live = 0;
	}
	vc_ls_release(ls, seg, true);
}

static void order_desc(void *arg, struct vc_lsloc *l, uint32_t n)
{
	(void)arg;
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t j = i + 1; j < n; j++)
			if (vc_ls_meta(ls, l[j])->key > vc_ls_meta(ls, l[i])->key) {
				struct vc_lsloc t = l[i];
				l[i] = l[j];
				l[j] = t;
			}
}

/* vc_ls_clean's report: the model follows the pages. */
static void moved(void *arg, const struct vc_lsloc *from, const struct vc_lsloc *to, uint32_t n)
{
	(void)arg;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t k = vc_ls_meta(ls, to[i])->key;
		CHECK(model[k].live && model[k].loc.seg == from[i].seg &&
		      model[k].loc.slot == from[i].slot);
		model[k].loc = to[i];
		if (i)
			CHECK(k < vc_ls_meta(ls, to[i - 1])->key); /* the order given */
	}
}

static void clean(int policy)
{
	uint32_t segs[2];
	uint32_t ns = vc_ls_pick(ls, policy, 2, segs);
	CHECK(ns > 0);
	struct vc_lsloc from[2 * PER_SEG], to[2 * PER_SEG];
	uint32_t n = 0;
	for (uint32_t i = 0; i < ns; i++)
		n += vc_ls_live(ls, segs[i], from + n, PER_SEG);
	/* The caller's order (here: by key, descending) decides the new order. */
	order_desc(NULL, from, n);
	struct vc_move mv[2 * PER_SEG];
	int r = vc_ls_relocate(ls, n, from, to, mv);
	if (r == -ENOSPC) { /* no room at the head: give the segments up instead */
		for (uint32_t i = 0; i < n; i++)
			model[vc_ls_meta(ls, from[i])->key].live = 0;
		for (uint32_t i = 0; i < ns; i++)
			vc_ls_release(ls, segs[i], true);
		return;
	}
	CHECK_OK(r);
	run_moves(mv, n);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t k = vc_ls_meta(ls, to[i])->key;
		model[k].loc = to[i];
		if (i)
			CHECK(vc_ls_meta(ls, to[i])->key < vc_ls_meta(ls, to[i - 1])->key);
	}
	for (uint32_t i = 0; i < ns; i++)
		vc_ls_release(ls, segs[i], false);
	vc_ls_note_gc(ls, n, 1);
}

/* Deterministic picks: cost-benefit prefers the emptiest old segment,
 * oldest prefers the lowest log sequence number. */
static void picks(void)
{
	struct vc_ls_config cfg = { .page_size = PS, .seg_bytes = PS * 4, .total_bytes = PS * 4 * 4,
				    .free_watermark = 0.25, .early_release = 0.1 };
	struct vc_ls *s;
	CHECK_OK(vc_ls_open(dev, &cfg, &s));
	uint64_t keys[12];
	struct vc_lsloc loc[12];
	for (int i = 0; i < 12; i++)
		keys[i] = (uint64_t)i;
	CHECK_OK(vc_ls_append(s, 12, keys, loc)); /* segments A(0-3) B(4-7) C(8-11) */
	CHECK(loc[0].seg == loc[3].seg && loc[4].seg != loc[3].seg);
	CHECK(!vc_ls_low(s)); /* 1 free of 4, watermark 1 */
	uint64_t k13 = 12;
	struct vc_lsloc l13;
	CHECK_OK(vc_ls_append(s, 1, &k13, &l13)); /* seals C, opens D */
	CHECK(vc_ls_low(s));
	uint64_t more[3] = { 13, 14, 15 };
	struct vc_lsloc lm[3];
	CHECK_OK(vc_ls_append(s, 3, more, lm));
	CHECK(vc_ls_append(s, 1, more, lm) == -ENOSPC);
	CHECK(vc_ls_early_budget(s) == 1); /* 10% of 16 live */
	for (int i = 4; i < 7; i++)
		vc_ls_orphan(s, loc[i]); /* B is 1/4 live */
	vc_ls_orphan(s, loc[4]);       /* twice is harmless */
	uint32_t tail, pick;
	CHECK_OK(vc_ls_tail(s, &tail));
	CHECK(tail == loc[0].seg);
	CHECK(vc_ls_pick(s, VC_LS_CLEAN_COST_BENEFIT, 1, &pick) == 1 && pick == loc[4].seg);
	CHECK(vc_ls_pick(s, VC_LS_CLEAN_OLDEST, 1, &pick) == 1 && pick == loc[0].seg);
	CHECK_OK(vc_ls_tail(s, &tail));
	CHECK(tail == loc[8].seg); /* cleaning segments are not the tail */
	struct vc_ls_stats st;
	vc_ls_get_stats(s, &st);
	CHECK(st.segs_cleaning == 2 && st.slots_live == 13 && st.slots_dead == 3);
	vc_ls_close(s);

	cfg.seg_bytes = 3000;
	CHECK(vc_ls_open(dev, &cfg, &s) == -EINVAL);
	cfg.seg_bytes = PS * 4;
	cfg.total_bytes = PS * 4;
	CHECK(vc_ls_open(dev, &cfg, &s) == -EINVAL);
}

int main(void)
{
	int r = vc_device_open(t_device_kind(), 0, &dev);
	t_skip_if_absent(r, "log store test on CUDA");
	CHECK_OK(r);
	picks();
	struct vc_ls_config cfg = { .page_size = PS, .seg_bytes = PS * PER_SEG,
				    .total_bytes = (uint64_t)PS * PER_SEG * NSEG,
				    .free_watermark = 0.2, .early_release = 0.1 };
	CHECK_OK(vc_ls_open(dev, &cfg, &ls));
	CHECK(vc_ls_slots_per_seg(ls) == PER_SEG);
	void *p;
	CHECK_OK(dev->ops->host_alloc(dev, (size_t)PS * PER_SEG * 2, &p, &pin_dev));
	pin = p;
	CHECK_OK(vc_batcher_create(dev, PS, 64, 50, &bat));

	uint64_t seed = 77;
	int evictions = 0, cleanings = 0;
	for (int round = 0; round < 600; round++) {
		uint32_t n = 1 + (uint32_t)(t_rand(&seed) % 20);
		uint64_t keys[20];
		for (uint32_t i = 0; i < n; i++) {
			/* distinct keys in one append */
			keys[i] = (t_rand(&seed) % (NKEYS / 20)) * 20 + i;
		}
		while (vc_ls_low(ls) || append(keys, n, &seed) == -ENOSPC) {
			if (t_rand(&seed) % 2) {
				evict_tail();
				evictions++;
			} else if (t_rand(&seed) % 2) {
				clean((int)(t_rand(&seed) % 2));
				cleanings++;
			} else {
				int n = vc_ls_clean(ls, bat, (int)(t_rand(&seed) % 2), 3, order_desc,
						    moved, NULL);
				if (n == -ENOSPC) {
					evict_tail();
					evictions++;
				} else {
					CHECK_OK(n);
					cleanings++;
				}
			}
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
	CHECK(st.segs_evicted > 0);

	vc_batcher_destroy(bat);
	dev->ops->host_free(dev, pin);
	vc_ls_close(ls);
	vc_device_close(dev);
	return 0;
}
