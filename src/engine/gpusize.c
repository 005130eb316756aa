/* The GPU tier's size at run time: giving device memory back to other
 * programs and taking it again (BAG section 3.3.5).
 *
 * The tier's memory is chunks of whole log segments (vc_ls chunks, mapped
 * by the device's mem_map). A shrink chooses the chunks that hold the
 * fewest live pages, drains them (appends and cleaning no longer land
 * there), and empties them segment by segment, youngest first: while the
 * rest of the tier has room beyond its watermark, a segment's live pages
 * move there on the device (vc_ls_clean: the hottest pages stay cached);
 * after that, segments are evicted, dirty pages written back first. An
 * empty chunk's memory is overwritten and given back (mem_unmap) outside
 * the engine lock: nothing refers to it any more. A grow maps chunks
 * given back earlier, while the device has room, and their segments join
 * the free pool.
 *
 * Readers and writers keep going meanwhile: the work runs under c->mu in
 * the holds that eviction and cleaning already take (a segment at a
 * time, DROP_CHUNK pages per hold while dropping), and a page that is in
 * flight or pinned makes its segment wait for the next pass. Nothing
 * acknowledged is lost: a dirty page leaves only after its write-back
 * (a failed write-back keeps the page, its segment and so its chunk).
 *
 * With dedup (docs/DEDUP.md) the log's owners are blocks, a block may
 * have many pages and a page's D blocks may lie in several segments and
 * chunks, so the fast claim below (a segment's slot keys are its pages)
 * does not apply. A shrink of a dedup tier:
 *   - drains its chunks only once the slots promised to trips down in
 *     flight (dd.resv) fit in the room the rest of the tier keeps
 *     (dd_hold_drain), so no trip's append fails for the shrink;
 *   - moves segments as the cleaner does: eng_dd_claim claims every page
 *     of every block, each once, and refuses a segment with a pinned
 *     block (a trip compares against it unlocked); a shared block moves
 *     once and all its pages follow through where[];
 *   - empties the rest by eviction (eng_evict_seg), a segment at a time:
 *     the segment's blocks first leave the fingerprint table, so no trip
 *     shares them again and the emptying ends; every page using one of
 *     them is claimed, dirty ones written back (D moves up each, from
 *     wherever its blocks lie), then all dropped: a page releases its D
 *     uses, and a block left with none dies, out of the table, its slot
 *     orphaned. A page dropped with a block in another segment leaves
 *     that block one use fewer (the block lives on while it has uses).
 * The memory goes back only after the last page using it has left, so no
 * dropper runs and no block outlives its slot's memory. Serial: O(uses of
 * the chunks' blocks) claims and drops under c->mu, in holds of one
 * segment's claim (O(uses of its blocks)) and DROP_CHUNK drops, plus one
 * write-back batch per segment with dirty pages, where the fast path
 * writes every dirty page back in one pass and drops after the unmap.
 *
 * Several parts (vc_config.gpus): each part shrinks and grows on its own
 * (vc_gpu_shrink_on: its chunks, its log, its device), one at a time per
 * part, under that part's resize_mu; its hottest pages move within the
 * part, the others keep working meanwhile. With dedup there is one part.
 *
 * Lock rules: a part's resize_mu serialises its shrinks and grows (taken before
 * c->mu, never inside it); the counters are atomics, read by
 * vc_get_stats without either lock.
 * Cost: O(live pages of the chunks) host work (claims, drops, stamps) plus
 * one cleaning job per moved segment and one write-back batch per
 * evicted segment with dirty pages; per chunk a device memset and an
 * unmap. */
#include <stdio.h>
#include <unistd.h>

#include "base/workers.h"
#include "engine/engine.h"

/* Segments in a chunk: every chunk has as many but the last, which may
 * have fewer. */
static uint32_t chunk_seg_max(const struct vc_gpu *g)
{
	uint32_t first;
	return vc_ls_chunk_segs(g->ls, 0, &first);
}

/* Under c->mu: moves the live pages of sealed segment seg (in a draining
 * chunk) to the head, elsewhere in the tier; adds to *pages how many
 * (with dedup, every page using one of its blocks). False, with nothing
 * changed, when a page is in flight or pinned (with dedup, or a block is
 * pinned), or the room is gone. `held`: room for a segment's slots (with
 * dedup eng_dd_claim allocates its own). */
static bool move_seg(struct vc_cache *c, struct vc_gpu *g, uint32_t seg, struct vc_page **held,
		     uint64_t *pages)
{
	struct vc_ls *ls = g->ls;
	if (vc_ls_take(ls, seg) < 0)
		return false;
	uint32_t nh = 0;
	struct vc_page **h = held;
	if (eng_dd(c) ? !eng_dd_claim(c, 1, &seg, &h, &nh)
		      : !eng_segs_claim(c, g, 1, &seg, h, &nh)) {
		vc_ls_unpick(ls, 1, &seg);
		return false;
	}
	int r = vc_ls_clean(ls, 1, &seg);
	if (r < 0 && r != -ENOSPC) {
		/* The device failed mid-job (as in a cleaning step). */
		eng_clean_failed(c, g, h, nh, r);
		if (h != held)
			free(h);
		return true; /* the segment is released either way */
	}
	for (uint32_t i = 0; i < nh; i++)
		st_clear(c, h[i], VC_ST_BUSY);
	if (h != held)
		free(h);
	if (r == -ENOSPC) {
		vc_ls_unpick(ls, 1, &seg);
		return false;
	}
	*pages += nh;
	eng_wake(c);
	return true;
}

/* ON chunks by live pages, fewest first (insertion sort: a tier has few). */
static uint32_t chunks_by_live(struct vc_ls *ls, uint32_t *out)
{
	uint32_t n = 0;
	for (uint32_t ch = vc_ls_nchunks(ls); ch-- > 0;) {
		if (vc_ls_chunk_state(ls, ch) != VC_LS_CHUNK_ON)
			continue;
		uint64_t live = vc_ls_chunk_live(ls, ch);
		uint32_t j = n++;
		for (; j > 0 && vc_ls_chunk_live(ls, out[j - 1]) > live; j--)
			out[j] = out[j - 1];
		out[j] = ch;
	}
	return n;
}

static void stat_max(_Atomic uint64_t *m, uint64_t v)
{
	uint64_t o = atomic_load_explicit(m, memory_order_relaxed);
	while (v > o && !atomic_compare_exchange_weak(m, &o, v))
		;
}

/* Under c->mu, dedup: before chunks chs[0..n) are drained, the slots
 * promised to the trips down in flight (dd.resv) must fit in the room the
 * rest of the tier keeps, or a trip's append would find none (a demotion
 * retried, a prefetch failed with -ENOSPC). Meanwhile the chunks' room is
 * held back from new promises (dd.hold), so only the trips already in
 * flight must settle: the wait ends when they do (each a device round
 * trip or two). O(n x chunk) a check. */
static void dd_hold_drain(struct vc_cache *c, struct vc_gpu *g, const uint32_t *chs, uint32_t n)
{
	for (;;) {
		uint64_t in = 0;
		for (uint32_t i = 0; i < n; i++)
			in += vc_ls_chunk_room(g->ls, chs[i]);
		if (vc_ls_room(g->ls) - in >= c->dd.resv)
			break;
		c->dd.hold = in;
		eng_wait_cv(c);
	}
	c->dd.hold = 0;
}

/* Part `gpu` of c, if its size can change: *out. The old calls
 * (vc_gpu_shrink ...) name part 0 and need a tier of one part. */
static int resizable(struct vc_cache *c, unsigned gpu, const char *what, struct vc_gpu **out)
{
	int r = eng_part_arg(c, gpu, what);
	if (r < 0)
		return r;
	struct vc_gpu *g = &c->gpus[gpu];
	if (!vc_ls_resizable(g->ls))
		return vc_err(-EOPNOTSUPP, "%s: the device cannot map memory by chunks (no virtual "
					   "memory management), so the GPU tier has a fixed size", what);
	*out = g;
	return 0;
}

/* The calls without a part: part 0 of a tier of one part. */
static int only_part(struct vc_cache *c, const char *what)
{
	if (c && c->ngpus > 1 && c->gpus[0].ls)
		return vc_err(-EOPNOTSUPP, "%s: the GPU tier spans %u parts: name one (%s_on)", what,
			      c->ngpus, what);
	return 0;
}

/* --- the claim: every live page of the chunks' segments, in parallel ---
 *
 * A 10 GiB release is 2.6M pages of 4 KiB; claiming each (one CAS on its
 * entry, a cache miss) is the part of the work that must finish before the
 * memory goes back, so workers share it: each takes whole segments and
 * claims (BUSY) their live pages, prefetching entries ahead. The caller
 * holds c->mu meanwhile, so the slots' keys, the owners' places and the
 * pages' tiers cannot change under the workers (only lock holders change
 * them); pins come and go without the lock, so a claim can fail: that
 * segment's claims are undone and it goes the slow way (eviction with
 * waits). Dropping the claimed pages (index, policy, entry: the slow part,
 * ~200 ns a page) happens after the memory has gone back, on the dropper
 * thread. VC_GPU_SHRINK_PROFILE=1 (environment, read at open) prints each
 * shrink's phases to stderr. Not with dedup, whose slot keys are blocks
 * (the head comment). */

#define PREFETCH_AHEAD 48
/* Staging pages of a shrink's write-back: 4 MiB at 4 KiB pages a round. */
#define SHRINK_STAGE_PAGES 1024

struct claim {
	struct vc_cache *c;
	struct vc_gpu *g; /* the part being shrunk */
	const uint32_t *segs;
	uint32_t nseg, per;
	_Atomic uint32_t next;
	struct vc_page **held; /* per segment i: held[i * per ...] */
	uint32_t *nheld;       /* per segment: claimed, or UINT32_MAX: failed */
	uint32_t *ndirty;      /* per segment: of those, dirty (the first ones) */
};

static void claim_seg(struct claim *cl, uint32_t i)
{
	struct vc_cache *c = cl->c;
	struct vc_ls *ls = cl->g->ls;
	const uint32_t g0 = cl->segs[i] * cl->per;
	struct vc_page **out = cl->held + (size_t)i * cl->per;
	uint32_t n = 0, nd = 0;
	for (uint32_t s = 0; s < cl->per; s++) {
		if (s + PREFETCH_AHEAD < cl->per) {
			uint32_t ka = vc_ls_key(ls, g0 + s + PREFETCH_AHEAD);
			if (ka != VC_LS_DEAD)
				__builtin_prefetch(&c->ix.pool[ka], 1);
		}
		uint32_t k = vc_ls_key(ls, g0 + s);
		if (k == VC_LS_DEAD)
			continue;
		struct vc_page *p = &c->ix.pool[k];
		if (!vc_page_claim(p, VC_ST_BUSY, 0)) {
			/* A reader pins it: undo, the segment goes the slow way. */
			while (n > 0) {
				struct vc_page *q = out[--n];
				atomic_fetch_and_explicit(&q->st, ~VC_ST_BUSY, memory_order_acq_rel);
			}
			cl->nheld[i] = UINT32_MAX;
			return;
		}
		/* Dirty pages first (the caller holds c->mu: p->dirty is
		 * stable), so that nobody walks the entries again for them. */
		if (p->dirty) {
			out[n++] = out[nd];
			out[nd++] = p;
		} else {
			out[n++] = p;
		}
	}
	cl->nheld[i] = n;
	cl->ndirty[i] = nd;
}

static void *claim_main(void *arg)
{
	struct claim *cl = arg;
	for (uint32_t i; (i = atomic_fetch_add(&cl->next, 1)) < cl->nseg;)
		claim_seg(cl, i);
	return NULL;
}

/* Under c->mu: claims the live pages of segs[0..n) (taken) on up to
 * VC_WORKERS_MAX threads (one a core, less one), this one among them. */
static void claim_all(struct claim *cl)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint32_t nw = cpus > 1 ? (uint32_t)cpus - 1 : 1;
	nw = nw > cl->nseg / 4 ? cl->nseg / 4 : nw; /* a few segments each, at least */
	const uint32_t ran = vc_run_workers(claim_main, cl, nw ? nw : 1);
	if (cl->g->profile)
		fprintf(stderr, "vc_gpu_shrink: %u claim threads\n", ran);
}

/* What a shrink leaves for the dropper: the claimed pages of the segments
 * whose memory went back, then the segments and chunks to retire. */
struct drop_job {
	struct vc_cache *c;
	struct claim cl;
	uint32_t *chs; /* chunks given back */
	uint32_t nch;
};

/* Under c->mu, with pauses: drops the pages (their data is gone with the
 * memory; they are BUSY, so nobody has read them since), releases their
 * segments (OFF: the chunk is draining) and retires the chunks. Readers
 * of these pages wait on them meanwhile, then miss. */
static void drop_claimed(struct drop_job *j)
{
	struct vc_cache *c = j->c;
	struct claim *cl = &j->cl;
	struct vc_gpu *g = cl->g;
	const uint64_t t0 = vc_now_ns();
	eng_lock(c);
	vc_opq_drain(c->opq); /* once: page_drop_drained's precondition */
	uint64_t dropped = 0;
	for (uint32_t i = 0; i < cl->nseg; i++) {
		struct vc_page **h = cl->held + (size_t)i * cl->per;
		for (uint32_t k = 0; k < cl->nheld[i]; k++) {
			eng_page_drop_drained(c, h[k], true);
			if (++dropped % 256 == 0) {
				/* Nothing of these segments can change meanwhile:
				 * they are taken and their pages BUSY. A queued
				 * policy update made across the pause concerns other
				 * pages (these cannot be pinned), but drain again. */
				eng_lock_pause(c);
				vc_opq_drain(c->opq);
			}
		}
		vc_ls_release(g->ls, cl->segs[i], true);
	}
	for (uint32_t i = 0; i < j->nch; i++)
		vc_ls_chunk_gone(g->ls, j->chs[i]);
	c->st.evictions[GPU] += dropped;
	g->n_evicted += dropped;
	eng_wake(c);
	eng_unlock(c);
	atomic_fetch_add(&g->rs.drop_ns_total, vc_now_ns() - t0);
}

static void drop_job_free(struct drop_job *j)
{
	if (!j)
		return;
	free((void *)j->cl.segs);
	free(j->cl.held);
	free(j->cl.nheld);
	free(j->cl.ndirty);
	free(j->chs);
	free(j);
}

static void *dropper_main(void *arg)
{
	drop_claimed(arg);
	return NULL;
}

/* Under g->resize_mu: waits for the part's last shrink's dropper. */
static void dropper_join(struct vc_gpu *g)
{
	if (g->dropper_job) {
		pthread_join(g->dropper, NULL);
		drop_job_free(g->dropper_job);
		g->dropper_job = NULL;
	}
}

void eng_gpu_resize_fini(struct vc_cache *c, struct vc_gpu *g)
{
	(void)c;
	pthread_mutex_lock(&g->resize_mu);
	dropper_join(g);
	pthread_mutex_unlock(&g->resize_mu);
}

/* Under c->mu: moves live pages of the draining chunks' sealed segments,
 * youngest first, to the rest of the tier while it has room beyond one
 * segment (and the watermark) that nobody was promised (eng_gpu_free):
 * they stay cached. Returns the pages moved. */
static uint64_t move_hot(struct vc_cache *c, struct vc_gpu *g, const uint32_t *chs, uint32_t n,
			 uint32_t *segs, struct vc_page **held)
{
	struct vc_ls *ls = g->ls;
	const uint32_t per = vc_ls_slots_per_seg(ls);
	uint64_t moved = 0;
	/* Quiet mode: moving is a cleaning job (kernels); evict instead. */
	for (uint32_t i = 0; i < n && !atomic_load(&g->off) && !atomic_load(&g->quiet); i++) {
		int k = vc_ls_chunk_sealed(ls, chs[i], segs, chunk_seg_max(g));
		for (int j = 0; j < k; j++) {
			uint32_t live = vc_ls_seg_live(ls, segs[j]);
			uint64_t room = eng_gpu_free(c, g), keep = (uint64_t)per * (vc_ls_low(ls) ? 0 : 1);
			if (!live || room <= keep || room - keep < live)
				return moved;
			move_seg(c, g, segs[j], held, &moved);
		}
	}
	return moved;
}

/* Under c->mu: empties the draining chunks chs[0..n) the slow way, one
 * segment at a time with waits for busy pages (what the claim could not
 * take; with dedup, everything: the head comment). 0 once every one is
 * empty, or the first write-back error (the chunk holding that dirty page
 * stays). */
static int empty_slow(struct vc_cache *c, struct vc_gpu *g, const uint32_t *chs, uint32_t n,
		      uint32_t *segs)
{
	struct vc_ls *ls = g->ls;
	for (;;) {
		bool empty = true, progress = false;
		for (uint32_t i = 0; i < n; i++) {
			if (vc_ls_chunk_empty(ls, chs[i]))
				continue;
			empty = false;
			int k = vc_ls_chunk_sealed(ls, chs[i], segs, chunk_seg_max(g));
			for (int j = 0; j < k; j++) {
				if (vc_ls_take(ls, segs[j]) < 0)
					continue; /* a cleaner or evictor has it: it goes off when done */
				if (eng_dd(c))
					eng_dd_unindex_seg(c, segs[j]);
				uint64_t ev = 0;
				int err = 0, r = eng_evict_seg(c, g, segs[j], &ev, &err);
				if (r == -VC_EI_REFUSED)
					r = err; /* dirty pages stay: the store's error is the call's */
				if (r == 0)
					progress = true;
				else if (r != -EAGAIN)
					return r;
			}
		}
		if (empty)
			return 0;
		if (!progress)
			eng_wait_cv(c); /* pins, moves in flight, other threads' segments */
	}
}

/* Under c->mu: takes every sealed segment of the chunks and claims their
 * live pages (claim_all); segments whose claim failed are given back
 * (sealed) for empty_slow. Dirty claimed pages are written back; one whose
 * write-back fails is let go, and its segment with it. Fills cl with the
 * segments that are ready: every live page claimed and clean. */
static int claim_chunks(struct vc_cache *c, struct vc_gpu *g, const uint32_t *chs, uint32_t n,
			struct claim *cl)
{
	struct vc_ls *ls = g->ls;
	const uint32_t per = vc_ls_slots_per_seg(ls), max = chunk_seg_max(g);
	uint32_t *segs = malloc((size_t)n * max * sizeof *segs), ns = 0;
	if (!segs)
		return vc_err(-ENOMEM, "out of memory");
	for (uint32_t i = 0; i < n; i++) {
		int k = vc_ls_chunk_sealed(ls, chs[i], segs + ns, max);
		uint32_t got = 0;
		for (int j = 0; j < k; j++)
			if (vc_ls_take(ls, segs[ns + (uint32_t)j]) == 0)
				segs[ns + got++] = segs[ns + (uint32_t)j];
		ns += got;
	}
	*cl = (struct claim){ .c = c, .g = g, .segs = segs, .nseg = ns, .per = per };
	cl->held = malloc(((size_t)ns * per + 1) * sizeof *cl->held);
	cl->nheld = malloc(((size_t)ns + 1) * sizeof *cl->nheld);
	cl->ndirty = malloc(((size_t)ns + 1) * sizeof *cl->ndirty);
	if (!cl->held || !cl->nheld || !cl->ndirty) {
		vc_ls_unpick(ls, ns, segs);
		return vc_err(-ENOMEM, "out of memory");
	}
	const uint64_t t0 = vc_now_ns();
	claim_all(cl);
	if (g->profile)
		fprintf(stderr, "vc_gpu_shrink: claimed %u segments in %.2f ms\n", ns,
			(vc_now_ns() - t0) / 1e6);
	/* Dirty pages of the claimed segments: written back all together,
	 * through a staging area of the shrink's own (SHRINK_STAGE_PAGES a
	 * round: one device batch and one backing submission), while still
	 * claimed. A segment whose write-back failed stays, cached. */
	int err = 0;
	uint32_t nd = 0;
	for (uint32_t i = 0; i < ns; i++)
		if (cl->nheld[i] != UINT32_MAX)
			nd += cl->ndirty[i];
	bool *seg_ok = malloc(((size_t)ns + 1) * sizeof *seg_ok);
	struct vc_page **dirty = malloc(((size_t)nd + 1) * sizeof *dirty);
	uint32_t *dseg = malloc(((size_t)nd + 1) * sizeof *dseg);
	bool *done = malloc(((size_t)nd + 1) * sizeof *done);
	struct vc_tiermem *stage = NULL;
	if (!seg_ok || !dirty || !dseg || !done ||
	    (nd && vc_tier_open(g->dev, HOST, nd < SHRINK_STAGE_PAGES ? nd : SHRINK_STAGE_PAGES,
				c->page_size, &stage) < 0)) {
		err = vc_err(-ENOMEM, "out of memory for a shrink's write-back");
		for (uint32_t i = 0; i < ns; i++)
			if (seg_ok)
				seg_ok[i] = false;
	} else {
		uint32_t d = 0;
		for (uint32_t i = 0; i < ns; i++) {
			seg_ok[i] = cl->nheld[i] != UINT32_MAX;
			for (uint32_t k = 0; seg_ok[i] && k < cl->ndirty[i]; k++) {
				dseg[d] = i;
				dirty[d++] = cl->held[(size_t)i * per + k];
			}
		}
		if (nd) {
			err = eng_writeback_gpu_via(c, dirty, nd, done, stage,
						    nd < SHRINK_STAGE_PAGES ? nd : SHRINK_STAGE_PAGES);
			for (uint32_t k = 0; k < nd; k++)
				if (!done[k])
					seg_ok[dseg[k]] = false;
		}
	}
	vc_tier_close(stage);
	free(dirty);
	free(dseg);
	free(done);
	/* Failed segments: claims let go, back to sealed; the ready ones
	 * packed in front. */
	uint32_t keep = 0;
	for (uint32_t i = 0; i < ns; i++) {
		uint32_t seg = segs[i], nh = cl->nheld[i];
		struct vc_page **h = cl->held + (size_t)i * per;
		if (!seg_ok || !seg_ok[i]) {
			if (nh != UINT32_MAX)
				for (uint32_t k = 0; k < nh; k++)
					st_clear(c, h[k], VC_ST_BUSY);
			vc_ls_unpick(ls, 1, &seg);
			continue;
		}
		if (keep != i) {
			segs[keep] = seg;
			memmove(cl->held + (size_t)keep * per, h, (size_t)nh * sizeof *h);
		}
		cl->nheld[keep++] = nh;
	}
	free(seg_ok);
	cl->nseg = keep;
	return err;
}

int vc_gpu_shrink_on(vc_cache *c, unsigned gpu, uint64_t bytes, unsigned flags,
		     uint64_t *released)
{
	struct vc_gpu *g = NULL;
	int r = resizable(c, gpu, "vc_gpu_shrink", &g);
	if (released)
		*released = 0;
	if (r < 0)
		return r;
	if (flags & ~VC_SHRINK_REQUESTED)
		return vc_err(-EINVAL, "vc_gpu_shrink: unknown flags %#x", flags);
	if (bytes == 0)
		return 0;
	struct vc_ls *ls = g->ls;
	const uint32_t nch = vc_ls_nchunks(ls);
	struct drop_job *j = calloc(1, sizeof *j);
	uint32_t *chs = malloc(nch * sizeof *chs);
	uint32_t *segs = malloc(chunk_seg_max(g) * sizeof *segs);
	struct vc_page **held = malloc(vc_ls_slots_per_seg(ls) * sizeof *held);
	if (!j || !chs || !segs || !held) {
		free(j);
		free(chs);
		free(segs);
		free(held);
		return vc_err(-ENOMEM, "out of memory");
	}
	pthread_mutex_lock(&g->resize_mu);
	dropper_join(g);
	const uint64_t t0 = vc_now_ns();
	eng_lock(c);
	/* Chunks a failed write-back left drained come first: they hold
	 * memory and no capacity. */
	uint32_t take = 0;
	uint64_t plan = 0;
	for (uint32_t ch = 0; ch < nch; ch++)
		if (vc_ls_chunk_state(ls, ch) == VC_LS_CHUNK_DRAIN) {
			chs[take++] = ch;
			plan += vc_ls_chunk_bytes(ls, ch);
		}
	const uint32_t drained = take;
	uint32_t n = take + chunks_by_live(ls, chs + take);
	while (take < n && plan < bytes)
		plan += vc_ls_chunk_bytes(ls, chs[take++]);
	if (eng_dd(c))
		dd_hold_drain(c, g, chs + drained, take - drained);
	for (uint32_t i = drained; i < take; i++)
		vc_ls_chunk_drain(ls, chs[i]);
	uint64_t moved = move_hot(c, g, chs, take, segs, held);
	const uint64_t t_claim = vc_now_ns();
	j->c = c;
	j->cl.g = g;
	r = eng_dd(c) ? 0 : claim_chunks(c, g, chs, take, &j->cl); /* dedup: all in empty_slow */
	/* The claimed segments count as gone; what is left (claims that met
	 * a pin) goes the slow way, now, before the memory can go. */
	for (uint32_t i = 0; i < j->cl.nseg; i++)
		vc_ls_seg_condemn(ls, j->cl.segs[i]);
	int e = empty_slow(c, g, chs, take, segs);
	r = r ? r : e;
	eng_wake(c); /* capacity changed: waiters for GPU room re-check */
	/* Chunks whose every segment is off or condemned go back. */
	uint32_t nback = 0;
	for (uint32_t i = 0; i < take; i++)
		if (vc_ls_chunk_empty(ls, chs[i])) {
			vc_ls_chunk_unmapped(ls, chs[i]);
			chs[nback++] = chs[i];
		}
	eng_unlock(c);
	const uint64_t t1 = vc_now_ns();
	uint64_t gone = 0, *addr = malloc(((size_t)nback + 1) * 2 * sizeof *addr);
	if (!addr) {
		r = r ? r : vc_err(-ENOMEM, "out of memory");
	} else {
		for (uint32_t i = 0; i < nback; i++) {
			vc_ls_chunk_range(ls, chs[i], &addr[i], &addr[nback + i]);
			gone += addr[nback + i];
		}
		int e2 = nback ? g->dev->ops->mem_unmap_n(g->dev, addr, addr + nback, nback) : 0;
		r = r ? r : e2;
		free(addr);
	}
	const uint64_t ns = vc_now_ns() - t0;
	if (g->profile)
		fprintf(stderr, "vc_gpu_shrink: %u chunks, %.2f ms: choose and move %.2f, claim %.2f, "
				"unmap %.2f\n", nback, ns / 1e6, (t_claim - t0) / 1e6,
			(t1 - t_claim) / 1e6, (vc_now_ns() - t1) / 1e6);
	/* The memory is back; the pages' entries go on the dropper thread. */
	j->chs = chs;
	j->nch = nback;
	if (pthread_create(&g->dropper, NULL, dropper_main, j) == 0) {
		g->dropper_job = j;
	} else {
		drop_claimed(j);
		drop_job_free(j);
	}
	atomic_fetch_add(&g->rs.chunks_released, nback);
	atomic_fetch_add(&g->rs.bytes_released, gone);
	if (flags & VC_SHRINK_REQUESTED)
		atomic_fetch_add(&g->rs.bytes_released_req, gone);
	atomic_fetch_add(&g->rs.pages_moved, moved);
	atomic_fetch_add(&g->rs.shrinks, 1);
	atomic_fetch_add(&g->rs.shrink_ns_total, ns);
	atomic_store(&g->rs.shrink_ns_last, ns);
	stat_max(&g->rs.shrink_ns_max, ns);
	pthread_mutex_unlock(&g->resize_mu);
	free(segs);
	free(held);
	if (released)
		*released = gone;
	return r;
}

int vc_gpu_grow_on(vc_cache *c, unsigned gpu, uint64_t bytes, uint64_t *grown)
{
	struct vc_gpu *g = NULL;
	int r = resizable(c, gpu, "vc_gpu_grow", &g);
	if (grown)
		*grown = 0;
	if (r < 0)
		return r;
	if (atomic_load(&g->off))
		return vc_err(-VC_EDEVICE, "vc_gpu_grow: part %u failed", gpu);
	struct vc_ls *ls = g->ls;
	uint64_t got = 0;
	pthread_mutex_lock(&g->resize_mu);
	dropper_join(g); /* its chunks are gone once it is done */
	/* Chunks given back, lowest first. (A chunk that a failed write-back
	 * left drained is not one: the next shrink empties it.) */
	for (uint32_t ch = 0; ch < vc_ls_nchunks(ls) && got < bytes; ch++) {
		eng_lock(c);
		int st = vc_ls_chunk_state(ls, ch);
		eng_unlock(c);
		if (st != VC_LS_CHUNK_OFF)
			continue;
		uint64_t addr, len;
		vc_ls_chunk_range(ls, ch, &addr, &len);
		r = g->dev->ops->mem_map(g->dev, addr, len);
		if (r < 0)
			break;
		eng_lock(c);
		vc_ls_chunk_online(ls, ch);
		eng_wake(c);
		eng_unlock(c);
		got += len;
		atomic_fetch_add(&g->rs.chunks_regained, 1);
	}
	pthread_mutex_unlock(&g->resize_mu);
	if (grown)
		*grown = got;
	if (r == -ENOMEM && got > 0)
		r = 0; /* what fitted */
	return r;
}

int vc_gpu_mem_info_on(vc_cache *c, unsigned gpu, uint64_t *free_bytes, uint64_t *total_bytes)
{
	if (!c || !free_bytes || !total_bytes || gpu >= c->ngpus)
		return vc_err(-EINVAL, "vc_gpu_mem_info: NULL argument or no part %u", gpu);
	struct vc_device *d = c->gpus[gpu].dev;
	if (!d->ops->mem_info)
		return vc_err(-EOPNOTSUPP, "vc_gpu_mem_info: the device cannot say");
	return d->ops->mem_info(d, free_bytes, total_bytes);
}

int vc_gpu_uuid_on(vc_cache *c, unsigned gpu, unsigned char uuid[16])
{
	if (!c || !uuid || gpu >= c->ngpus)
		return vc_err(-EINVAL, "vc_gpu_uuid: NULL argument or no part %u", gpu);
	struct vc_device *d = c->gpus[gpu].dev;
	if (!d->ops->uuid)
		return vc_err(-EOPNOTSUPP, "vc_gpu_uuid: the device has none");
	return d->ops->uuid(d, uuid);
}

int vc_gpu_shrink(vc_cache *c, uint64_t bytes, unsigned flags, uint64_t *released)
{
	int r = only_part(c, "vc_gpu_shrink");
	if (r < 0 && released)
		*released = 0;
	return r < 0 ? r : vc_gpu_shrink_on(c, 0, bytes, flags, released);
}

int vc_gpu_grow(vc_cache *c, uint64_t bytes, uint64_t *grown)
{
	int r = only_part(c, "vc_gpu_grow");
	if (r < 0 && grown)
		*grown = 0;
	return r < 0 ? r : vc_gpu_grow_on(c, 0, bytes, grown);
}

int vc_gpu_mem_info(vc_cache *c, uint64_t *free_bytes, uint64_t *total_bytes)
{
	return vc_gpu_mem_info_on(c, 0, free_bytes, total_bytes);
}

int vc_gpu_uuid(vc_cache *c, unsigned char uuid[16])
{
	return vc_gpu_uuid_on(c, 0, uuid);
}
