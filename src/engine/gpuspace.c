/* GPU space: making room at the head of the GPU tier's log (BAG).
 *
 * Space comes back by eng_gpu_room -> reclaim(): cleaning (the device moves
 * the live pages of fragmented segments to the head in stamp order, i.e. LRU
 * order) when the log is fragmented enough for it to gain, else eviction of
 * the whole tail segment, dirty pages written back first. Below the
 * watermark, the thread that notices releases up to early_release of the
 * live pages at once, so that later demotions find room. Both claim every
 * live page of their segments first (BUSY), so none is in flight or being
 * read in place while it moves or goes. Under c->mu; a cleaning step holds
 * it for one device job over at most gc_segments segments, an eviction for
 * DROP_CHUNK pages at a time, an early release for one segment at a time.
 */
#include "engine/engine.h"

/* Pages a segment's eviction claims, or drops, per hold of c->mu: a 4 MiB
 * segment of 4 KiB pages held it for 100-300 us in one piece (each page
 * is a few cache misses: entry, policy links, index bucket), 128 at a time
 * for 43 us on average on the H100. The segment is taken, so nothing is
 * appended to it or cleaned out of it across the pauses; the pages claimed
 * (BUSY) so far stay untouched, and nothing about them can be queued to
 * the policy meanwhile (nobody can pin them). */
#define DROP_CHUNK 32

/* The GPU tier's victim walk: eng_unevictable, and with several parts
 * the victim must be in part g (one policy orders the whole tier; each
 * part makes its own room; placement spreads pages evenly, so the walk
 * passes over about ngpus - 1 pages per victim). It counts the pages of
 * g it passes over, and of those the dirty ones of refusing stores, so
 * that a walk that finds nothing tells "wait for pins" from "nothing can
 * go while the stores refuse" at no cost of its own. */
struct gpu_walk {
	struct vc_cache *c;
	const struct vc_gpu *g;
	uint64_t skipped, refused;
};

static bool gpu_skip(const struct vc_pnode *n, void *arg)
{
	struct gpu_walk *w = arg;
	const struct vc_page *p = (const struct vc_page *)n;
	if (w->c->ngpus > 1 && p->gpu != w->g->idx)
		return true;
	if (!eng_unevictable(n, w->c))
		return false;
	w->skipped++;
	w->refused += !(st_of(p) & (VC_ST_PINS | VC_ST_BUSY | VC_ST_EXCL));
	return true;
}

/* Evicts a whole segment of the GPU log: the one that holds the policy's
 * GPU victim. Pages reach the GPU tier only as demotions and leave it on
 * a hit, so under LRU the victim is the oldest demotion and its segment
 * the log's tail; other policies choose by their own order, and with
 * one-page segments the tier is exactly the policy's victim cache (what
 * `vramcache sim` models). Clean pages are dropped at once, dirty ones
 * written back in batches first. -EAGAIN when there is no victim, its
 * segment is taken, or one of its pages is in flight (the caller waits,
 * or, holding busy pages of its own, gives up); -VC_EI_REFUSED when the
 * segment stays for dirty pages whose store refuses them, or when no
 * victim is left but such pages; *evicted counts pages. */
static int evict_tail(struct vc_cache *c, struct vc_gpu *g, uint64_t *evicted)
{
	struct gpu_walk w = { c, g, 0, 0 };
	struct vc_opq_node *n = vc_opq_victim(c->opq, GPU, gpu_skip, &w);
	if (!n) /* all refused: -VC_EI_REFUSED; some pinned or moving: they settle */
		return w.refused && w.refused == w.skipped ? -VC_EI_REFUSED : -EAGAIN;
	uint32_t seg = gpu_slot0(c, vc_page_of(&n->pn)) / vc_ls_slots_per_seg(g->ls);
	/* With dedup the victim's block can sit in the open head, and taking
	 * it kills the head's unwritten slots: not while the room left would
	 * fall short of what trips down in flight were promised (dd.resv), or
	 * one's append would find none. They settle and wake the caller. */
	if (eng_dd(c) && vc_ls_room(g->ls) - vc_ls_take_loss(g->ls, seg) < c->dd.resv)
		return -EAGAIN;
	if (vc_ls_take(g->ls, seg) < 0)
		return -EAGAIN;
	int err;
	return eng_evict_seg(c, g, seg, evicted, &err);
}

/* Evicts taken segment seg (see evict_tail; a shrink's too). Every live
 * page is claimed (BUSY) first, so no reader is copying one out in place;
 * a page that cannot be claimed makes it -EAGAIN with nothing changed.
 * Clean pages go; dirty ones are written back first, but for those of a
 * refusing store (engine/dirty.h, "Store errors"), which stay, as do those
 * whose write-back fails: then the segment stays too, sealed, and the
 * result is -VC_EI_REFUSED with *err the store's error. */
int eng_evict_seg(struct vc_cache *c, struct vc_gpu *g, uint32_t seg, uint64_t *evicted, int *err)
{
	uint32_t per = vc_ls_slots_per_seg(g->ls), n = 0, nh = 0, nd = 0;
	struct vc_page **held = NULL;
	if (eng_dd(c)) {
		/* Every page of every block here, each once, in one hold:
		 * O(uses of the segment's blocks). */
		if (!eng_dd_claim(c, 1, &seg, &held, &nh)) {
			vc_ls_unpick(g->ls, 1, &seg);
			return -EAGAIN;
		}
		per = nh > per ? nh : per;
	}
	uint32_t *sl = malloc(per * sizeof *sl);
	struct vc_page **dirty = malloc(per * sizeof *dirty);
	if (!held)
		held = malloc(per * sizeof *held);
	bool *done = malloc(per * sizeof *done);
	if (!sl || !dirty || !held || !done) {
		while (eng_dd(c) && nh > 0)
			st_clear(c, held[--nh], VC_ST_BUSY);
		vc_ls_unpick(g->ls, 1, &seg);
		free(sl);
		free(dirty);
		free(held);
		free(done);
		return vc_err(-ENOMEM, "out of memory");
	}
	if (!eng_dd(c))
		n = vc_ls_live(g->ls, seg, sl, per);
	int r = 0;
	for (uint32_t i = 0; i < n && r == 0; i++) {
		/* Read now, not when listed: across a pause the page may have
		 * left (a drop orphans its slot) or been swapped for another
		 * (a GRAM swap rekeys the slot); a live key names a live page. */
		uint32_t k = vc_ls_key(g->ls, sl[i]);
		if (k == VC_LS_DEAD)
			continue;
		struct vc_page *p = &c->ix.pool[k];
		if (vc_page_claim(p, VC_ST_BUSY, 0))
			held[nh++] = p;
		else
			r = -EAGAIN; /* in flight, or a reader holds it */
		if ((i + 1) % DROP_CHUNK == 0)
			eng_lock_pause(c);
	}
	if (r < 0) {
		while (nh > 0)
			st_clear(c, held[--nh], VC_ST_BUSY);
	} else {
		vc_opq_drain(c->opq); /* once for the segment (page_drop_drained) */
	}
	int refused = 0; /* a store's error for pages that stay */
	for (uint32_t i = 0; i < nh; i++) {
		struct vc_page *p = held[i];
		if (p->dirty && eng_refusing(vol_of(c, p->pno))) {
			refused = atomic_load_explicit(&vol_of(c, p->pno)->refused_err,
						       memory_order_relaxed);
			st_clear(c, p, VC_ST_BUSY);
		} else if (p->dirty) {
			dirty[nd++] = p;
		} else {
			eng_page_drop_drained(c, p, true);
			(*evicted)++;
			c->st.evictions[GPU]++;
			g->n_evicted++;
		}
		if ((i + 1) % DROP_CHUNK == 0)
			eng_lock_pause(c);
	}
	if (r == 0 && nd) {
		int w = eng_writeback_gpu(c, dirty, nd, done);
		if (w < 0 && !eng_dev_err(w) && w != -ENOMEM)
			refused = w; /* the store's: those pages stay */
		else
			r = w;
		vc_opq_drain(c->opq);
		for (uint32_t i = 0; i < nd; i++) {
			if (done[i]) { /* dropped while still BUSY: nobody pins it meanwhile */
				eng_page_drop_drained(c, dirty[i], true);
				(*evicted)++;
				c->st.evictions[GPU]++;
				g->n_evicted++;
			} else {
				st_clear(c, dirty[i], VC_ST_BUSY);
			}
		}
	}
	/* Pages whose write-back failed keep the segment. */
	if (vc_ls_seg_live(g->ls, seg) == 0) {
		vc_ls_release(g->ls, seg, true);
	} else {
		vc_ls_unpick(g->ls, 1, &seg);
	}
	free(sl);
	free(dirty);
	free(held);
	free(done);
	eng_wake(c);
	if (r == 0 && refused) {
		*err = vc_err(refused, "GPU segment %u keeps dirty pages: their store refuses "
				       "write-backs (%s)", seg, strerror(-refused));
		return -VC_EI_REFUSED;
	}
	return r;
}

/* Claims (BUSY) every live page of the segments, so that none is in
 * flight or being read in place while the device moves it; on the first
 * that cannot be claimed, gives back those claimed and returns false.
 * held[] gets the claimed pages (room: n x slots per segment). O(live). */
bool eng_segs_claim(struct vc_cache *c, struct vc_gpu *g, uint32_t n, const uint32_t *segs,
		    struct vc_page **held, uint32_t *nheld)
{
	const uint32_t per = vc_ls_slots_per_seg(g->ls);
	uint32_t nh = 0;
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t s = 0; s < per; s++) {
			uint32_t k = vc_ls_key(g->ls, segs[i] * per + s);
			if (k == VC_LS_DEAD)
				continue;
			struct vc_page *p = &c->ix.pool[k];
			if (!vc_page_claim(p, VC_ST_BUSY, 0)) {
				while (nh > 0)
					st_clear(c, held[--nh], VC_ST_BUSY);
				return false;
			}
			held[nh++] = p;
		}
	*nheld = nh;
	return true;
}

void eng_clean_failed(struct vc_cache *c, struct vc_gpu *g, struct vc_page *const *held,
		      uint32_t n, int err)
{
	vc_opq_drain(c->opq);
	for (uint32_t i = 0; i < n; i++) {
		if (eng_dd(c)) /* their blocks die with them: no block lives past the device's fault */
			eng_gpu_release(c, held[i]);
		if (held[i]->dirty)
			c->gt.dirty_lost++;
		eng_page_forget(c, held[i], true);
	}
	eng_gpu_fail(c, g, err);
	eng_wake(c);
}

/* One cleaning step: up to gc_segments segments chosen by the policy, if
 * cleaning them frees space (else -EAGAIN) and none of their pages is in
 * flight (else -EBUSY). Runs under c->mu: the pause is one device job over those
 * segments' live pages, plus the check that none is in flight. */
static int gc_step_locked(struct vc_cache *c, struct vc_gpu *g)
{
	uint32_t segs[64];
	uint32_t max = c->gt.gc_segments < 64 ? c->gt.gc_segments : 64;
	uint32_t n = vc_ls_pick(g->ls, c->gt.gc_policy == VC_GC_OLDEST ? VC_LS_CLEAN_OLDEST
								   : VC_LS_CLEAN_COST_BENEFIT,
				max, segs);
	/* The best segments first: drop the worst ones until cleaning the
	 * rest fits the free space and frees some. */
	while (n > 0 && vc_ls_clean_gain(g->ls, n, segs) <= 0)
		vc_ls_unpick(g->ls, 1, &segs[--n]);
	if (n == 0)
		return -EAGAIN;
	uint32_t nheld = 0;
	struct vc_page **held = g->gc_held;
	if (eng_dd(c) ? !eng_dd_claim(c, n, segs, &held, &nheld)
		      : !eng_segs_claim(c, g, n, segs, held, &nheld)) {
		vc_ls_unpick(g->ls, n, segs);
		return -EBUSY; /* a page in flight: cleaning them will gain once it settles */
	}
	int r = vc_ls_clean(g->ls, n, segs);
	if (r == -ENOSPC) {
		for (uint32_t i = 0; i < nheld; i++)
			st_clear(c, held[i], VC_ST_BUSY);
		vc_ls_unpick(g->ls, n, segs);
		if (held != g->gc_held)
			free(held);
		return -EAGAIN;
	}
	if (r < 0) {
		eng_clean_failed(c, g, held, nheld, r);
		if (held != g->gc_held)
			free(held);
		return r;
	}
	for (uint32_t i = 0; i < nheld; i++)
		st_clear(c, held[i], VC_ST_BUSY); /* moved: where[] has their new slots */
	if (held != g->gc_held)
		free(held);
	eng_wake(c);
	return 0;
}

/* The step's time, whatever its outcome, is GC time (vc_stats.gc_ns). */
static int gc_step(struct vc_cache *c, struct vc_gpu *g)
{
	uint64_t t0 = vc_now_ns();
	int r = gc_step_locked(c, g);
	g->gc_ns += vc_now_ns() - t0;
	return r;
}

/* With dedup, a tail eviction drops every page that uses a block of the
 * segment (a shared block's many), where cleaning keeps them all. While
 * dead slots are at least this share of the used ones, a cleaning step
 * that meets a page in flight waits for it (the caller sleeps and tries
 * again) instead of evicting: half, where cleaning a segment frees at
 * least as much as it moves. */
#define DD_CLEAN_FIRST 0.5

/* Frees GPU log space once: a cleaning step when the log is fragmented
 * past gc_fragmentation and cleaning gains (never in quiet mode: a
 * cleaning job is kernels), else the tail segment's eviction. -EAGAIN:
 * nothing can be freed now. */
static int reclaim(struct vc_cache *c, struct vc_gpu *g, uint64_t *evicted)
{
	const double frag = vc_ls_fragmentation(g->ls);
	if (c->gt.gc_policy != VC_GC_OFF && !atomic_load(&g->quiet) && frag >= c->gt.gc_frag) {
		int r = gc_step(c, g);
		if (r == -EBUSY && eng_dd(c) && frag >= DD_CLEAN_FIRST)
			return -EAGAIN;
		if (r != -EAGAIN && r != -EBUSY)
			return r;
	}
	return evict_tail(c, g, evicted);
}

/* Makes room for `need` slots at the GPU log's head; may sleep and drop
 * the lock. Below the watermark, one thread at a time releases early: up
 * to early_release of the live pages, or until the watermark is met.
 * `holding`: the caller has busy pages of its own in flight, so it must
 * not sleep for pages to settle: -EAGAIN instead. -VC_EI_SHRUNK: the part
 * is smaller than `need`; -VC_EI_REFUSED: a reclaim met only dirty pages
 * whose store refuses them (one segment's worth a call: the caller makes
 * its room elsewhere). Never a store's error. */
int eng_gpu_room(struct vc_cache *c, struct vc_gpu *g, uint32_t need, bool holding)
{
	eng_assert_locked(c);
	if (vc_ls_low(g->ls) && !g->reclaiming) {
		g->reclaiming = true;
		uint64_t budget = vc_ls_early_budget(g->ls), released = 0;
		int r = 0;
		while (vc_ls_low(g->ls) && released <= budget && r == 0) {
			uint64_t ev = 0;
			r = reclaim(c, g, &ev);
			released += ev;
			eng_lock_pause(c); /* a segment per hold, not a tenth of the tier */
		}
		vc_ls_note_early_release(g->ls, released);
		g->reclaiming = false;
		if (r < 0 && r != -EAGAIN && r != -VC_EI_REFUSED) /* ahead of need: not this call's */
			return r;
	}
	/* With dedup: need pages of D slots each beyond those promised to
	 * pages on their way down (a duplicate gives its slot back), and
	 * page entries. */
	const uint64_t slots = (uint64_t)need * eng_mpp(c);
	while (eng_gpu_free(c, g) < slots ||
	       (eng_dd(c) && c->dd.pages + need > c->dd.page_cap)) {
		if (vc_ls_capacity(g->ls) < slots)
			return -VC_EI_SHRUNK; /* nothing to wait for */
		uint64_t ev = 0;
		/* Short only of slots promised to trips down in flight (dedup):
		 * those give back every slot a duplicate does not take, and wake
		 * us; evicting now would drop pages for room that is coming. */
		bool promised = eng_dd(c) && vc_ls_room(g->ls) >= slots &&
				c->dd.pages + need <= c->dd.page_cap;
		int r = promised ? -EAGAIN : reclaim(c, g, &ev);
		if (r == -EAGAIN) {
			if (holding)
				return r;
			if (!promised)
				atomic_fetch_add_explicit(&c->pin_stalls, 1, memory_order_relaxed);
			eng_wait_cv(c);
		} else if (r < 0) {
			return r;
		}
	}
	return 0;
}
