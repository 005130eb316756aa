/* Several GPUs (docs/MULTIGPU.md): a part that fails, pages moved between
 * parts (rebalance, evacuation), weights and each part's figures.
 *
 * A part fails when a move, cleaning job or copy on its device returns a
 * device error. From then on it takes no pages (eng_part_usable), lock-free
 * readers do not pin its pages (eng_pin_fast), and its pages leave the
 * tier: those nobody holds at once (eng_gpu_fail's sweep), the others by
 * whoever holds them when their own move fails, or by the next locked
 * access (eng_acquire). Clean pages come back from the store on the next
 * read; dirty ones exist in a part only with VC_GPU_DIRTY_KEEP and are the
 * loss that mode accepts (counted, and a flush that meets one fails with
 * -EIO). The device itself stays open until vc_close: threads may be
 * inside calls on it.
 *
 * Moves between parts run in rounds of batch_pages pages of one source
 * part: the pages are claimed (BUSY), get slots in their destinations
 * (eng_gpu_append, which makes p->gpu the destination while the source
 * slot stays live in the source's log), move, and then their source slots
 * die. Where the two devices reach each other (vc_gpu.peers: P2P, or one
 * device) a page is one COPY on the source part's queue, GPU to GPU; else
 * it travels through the source part's staging pages (up, then down).
 * Ciphertext moves as it is (its tweak names the page), and integrity
 * seals belong to the page id: neither changes. Costs: a round holds
 * c->mu for a bounded scan (SCAN_MAX entries) and its bookkeeping; the
 * data moves unlocked.
 */
#include <math.h>
#include <stdio.h>

#include "engine/engine.h"

/* Pool entries a round of a move between parts scans under one hold. */
#define SCAN_MAX 65536u
/* Pool entries the failure sweep visits per hold of c->mu. */
#define SWEEP_CHUNK 8192u

void eng_gpu_lost(struct vc_cache *c, struct vc_page *p)
{
	eng_assert_locked(c);
	if (p->dirty)
		c->gt.dirty_lost++;
	eng_page_drop(c, p);
}

void eng_gpu_fail(struct vc_cache *c, struct vc_gpu *g, int err)
{
	eng_assert_locked(c);
	(void)err;
	if (!g->ls || atomic_load(&g->off))
		return;
	atomic_store_explicit(&g->off, true, memory_order_release);
	c->gt.failed++;
	/* The sweep: every settled page of the part that nobody holds. An
	 * entry that shows GPU (acquire) is live and its fields hold still
	 * under c->mu (page.h); the pause lets the engine go on between
	 * pieces, and what it misses meanwhile its holders or the next
	 * access drop. */
	vc_opq_drain(c->opq);
	for (uint64_t i = 0; i < c->ix.npool; i++) {
		struct vc_page *p = &c->ix.pool[i];
		if ((st_of(p) & VC_ST_GPU) && p->gpu == g->idx && p->tier == GPU &&
		    vc_page_claim(p, VC_ST_BUSY, 0))
			eng_gpu_lost(c, p);
		if ((i + 1) % SWEEP_CHUNK == 0)
			eng_lock_pause(c);
	}
	eng_wake(c);
}

int eng_gpu_fail_unlocked(struct vc_cache *c, struct vc_gpu *g, int err)
{
	eng_lock(c);
	eng_gpu_fail(c, g, err);
	eng_unlock(c);
	return err;
}

unsigned vc_gpu_count(const vc_cache *c)
{
	return c && c->gpus[0].ls ? c->ngpus : 0;
}

int eng_part_arg(struct vc_cache *c, unsigned gpu, const char *what)
{
	if (!c)
		return vc_err(-EINVAL, "%s: NULL cache", what);
	if (!c->gpus[0].ls)
		return vc_err(-EINVAL, "%s: the cache has no GPU tier", what);
	if (gpu >= c->ngpus)
		return vc_err(-EINVAL, "%s: part %u of %u", what, gpu, c->ngpus);
	return 0;
}

int vc_get_gpu_stats(vc_cache *c, unsigned gpu, struct vc_gpu_stats *out)
{
	int r = eng_part_arg(c, gpu, "vc_get_gpu_stats");
	if (r < 0)
		return r;
	if (!out || out->size < offsetof(struct vc_gpu_stats, ordinal))
		return vc_err(-EINVAL, "vc_get_gpu_stats: NULL argument or size not set");
	struct vc_gpu *g = &c->gpus[gpu];
	struct vc_gpu_stats st;
	memset(&st, 0, sizeof st);
	st.size = out->size < sizeof st ? out->size : (uint32_t)sizeof st;
	st.version = VC_GPU_STATS_VERSION;
	st.ordinal = g->dev->ordinal;
	snprintf(st.desc, sizeof st.desc, "%s", g->dev->desc);
	eng_lock(c);
	struct vc_ls_stats ls;
	vc_ls_get_stats(g->ls, &ls);
	st.failed = atomic_load(&g->off);
	st.weight = g->weight;
	st.pages_cached = eng_dd(c) ? c->dd.pages : ls.slots_live;
	st.pages_capacity = vc_ls_capacity(g->ls) / eng_mpp(c);
	st.bytes = vc_ls_bytes(g->ls);
	st.hits = g->n_hits;
	st.evictions = g->n_evicted;
	st.gc_runs = ls.gc_runs;
	st.gc_pages_moved = ls.gc_pages_moved;
	st.peer_in = g->n_peer_in;
	st.peer_out = g->n_peer_out;
	st.peer_direct = g->n_peer_direct;
	eng_unlock(c);
	for (uint32_t i = 0; i < MAX_QUEUE_THREADS; i++)
		st.hits += atomic_load_explicit(&c->ts[i].gpu_hits[gpu], memory_order_relaxed);
	st.h2d_bytes = atomic_load(&g->n_h2d) * c->page_size;
	st.d2h_bytes = (atomic_load(&g->n_d2h) + st.hits) * c->page_size;
	memcpy(out, &st, st.size);
	return 0;
}

int vc_gpu_set_weight(vc_cache *c, unsigned gpu, double weight)
{
	int r = eng_part_arg(c, gpu, "vc_gpu_set_weight");
	if (r < 0)
		return r;
	if (!(weight >= 0) || !isfinite(weight))
		return vc_err(-EINVAL, "vc_gpu_set_weight: weight %g: a finite number >= 0", weight);
	eng_lock(c);
	bool other = false;
	for (uint32_t i = 0; i < c->ngpus; i++)
		other |= i != gpu && eng_part_usable(&c->gpus[i]);
	if (atomic_load(&c->gpus[gpu].off))
		r = vc_err(-EINVAL, "vc_gpu_set_weight: part %u failed", gpu);
	else if (weight == 0 && !other)
		r = vc_err(-EINVAL, "vc_gpu_set_weight: part %u is the last that takes pages", gpu);
	else
		c->gpus[gpu].weight = weight;
	eng_unlock(c);
	return r;
}

/* One round's page: where it was and is going. */
struct xmove {
	struct vc_page *p;
	uint32_t old_slot;   /* its live slot in the source part */
	uint64_t src, dst;   /* device addresses */
	uint8_t to;          /* its destination part */
	uint32_t stage;      /* staging page (through host memory) */
	bool direct;         /* GPU to GPU */
};

/* Under c->mu: claims up to `max` pages of part s whose home is another
 * part, scanning the pool from *pos (at most SCAN_MAX entries), and gives
 * each a slot in its home (room made there without sleeping; a page whose
 * home has none stays, counted in *left). Returns how many, in xm[]. */
static uint32_t round_take(struct vc_cache *c, struct vc_gpu *s, uint64_t *pos, uint32_t max,
			   struct xmove *xm, uint64_t *left)
{
	uint32_t n = 0;
	const uint64_t end = *pos + SCAN_MAX < c->ix.npool ? *pos + SCAN_MAX : c->ix.npool;
	for (; *pos < end && n < max; (*pos)++) {
		struct vc_page *p = &c->ix.pool[*pos];
		if (!(st_of(p) & VC_ST_GPU) || p->tier != GPU || p->gpu != s->idx)
			continue;
		int h = eng_home(c, p->pno);
		if (h < 0 || h == (int)s->idx)
			continue;
		if (!vc_page_claim(p, VC_ST_BUSY, 0)) {
			(*left)++;
			continue;
		}
		xm[n++] = (struct xmove){ .p = p, .to = (uint8_t)h, .old_slot = gpu_slot(c, p),
					  .src = slot_addr_gpu(c, p) };
	}
	/* Slots in the destinations, a part at a time (the pages stay ours:
	 * BUSY, so reclaiming there passes over them). */
	uint32_t k = 0;
	for (uint32_t d = 0; d < c->ngpus; d++) {
		struct vc_gpu *g = &c->gpus[d];
		uint32_t want = 0;
		for (uint32_t i = 0; i < n; i++)
			want += xm[i].to == d;
		if (!want)
			continue;
		int r = eng_part_usable(g) ? eng_gpu_room(c, g, want, true) : -ENOSPC;
		for (uint32_t i = 0; i < n; i++) {
			if (xm[i].to != d)
				continue;
			struct vc_page *p = xm[i].p;
			if (r == 0 && eng_gpu_append(c, g, 1, &p) == 0) {
				xm[i].dst = slot_addr_gpu(c, p); /* p->gpu is d now */
				xm[i].direct = (s->peers >> d) & 1;
				xm[k++] = xm[i];
			} else {
				st_clear(c, p, VC_ST_BUSY); /* no room there now */
				(*left)++;
			}
		}
	}
	return k;
}

/* Unlocked: the round's data, P2P where it can, else through s's
 * staging pages. perr[] by part: the source's failures under s->idx, a
 * destination's under its own. Staging pages come from s->stage_bulk
 * (batch_pages of them: a round is at most that). */
static void round_move(struct vc_cache *c, struct vc_gpu *s, struct xmove *xm, uint32_t n,
		       int *perr)
{
	struct vc_move *mv = malloc((size_t)n * 2 * sizeof *mv);
	struct vc_ticket *tk = malloc((size_t)n * 2 * sizeof *tk);
	uint8_t *mp = malloc((size_t)n * 2);
	for (uint32_t k = 0; k < c->ngpus; k++)
		perr[k] = 0;
	if (!mv || !tk || !mp) {
		perr[s->idx] = vc_err(-ENOMEM, "out of memory");
		free(mv);
		free(tk);
		free(mp);
		return;
	}
	/* Direct moves and the way up of the others: on the source's queue. */
	uint32_t m = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t to = xm[i].direct ? xm[i].dst : vc_tier_addr(s->stage_bulk, xm[i].stage);
		mv[m] = (struct vc_move){ .src = xm[i].src, .dst = to, .op = VC_MOVE_COPY };
		mp[m++] = (uint8_t)s->idx;
	}
	int r = m ? eng_fan(c, mv, mp, m, tk, perr) : 0;
	/* The way down, on each destination's queue. */
	int perr2[VC_GPUS_MAX];
	m = 0;
	for (uint32_t i = 0; r == 0 && i < n; i++)
		if (!xm[i].direct) {
			mv[m] = (struct vc_move){ .src = vc_tier_addr(s->stage_bulk, xm[i].stage),
						  .dst = xm[i].dst, .op = VC_MOVE_COPY };
			mp[m++] = xm[i].to;
		}
	if (m && eng_fan(c, mv, mp, m, tk, perr2) < 0)
		for (uint32_t k = 0; k < c->ngpus; k++)
			if (perr2[k] && !perr[k])
				perr[k] = perr2[k];
	free(mv);
	free(tk);
	free(mp);
}

/* Under c->mu: a round's pages settle in their destinations, or (when the
 * source or their destination failed) go back to the source's slot, or,
 * when the source failed, are lost with it. */
static uint64_t round_settle(struct vc_cache *c, struct vc_gpu *s, struct xmove *xm, uint32_t n,
			     const int *perr)
{
	uint64_t moved = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct vc_page *p = xm[i].p;
		struct vc_gpu *d = &c->gpus[xm[i].to];
		if (!xm[i].direct)
			vc_tier_free(s->stage_bulk, xm[i].stage);
		if (perr[s->idx] == 0 && perr[d->idx] == 0) {
			vc_ls_orphan(s->ls, xm[i].old_slot);
			s->n_peer_out++;
			d->n_peer_in++;
			d->n_peer_direct += xm[i].direct;
			st_clear(c, p, VC_ST_BUSY);
			moved++;
			continue;
		}
		eng_gpu_release(c, p); /* the destination slot */
		p->gpu = (uint8_t)s->idx; /* its source slot is still live there */
		if (perr[s->idx] && eng_dev_err(perr[s->idx]))
			eng_gpu_lost(c, p);
		else
			st_clear(c, p, VC_ST_BUSY);
	}
	eng_fail_parts(c, perr);
	eng_wake(c);
	return moved;
}

/* Moves every page of part s whose home is elsewhere, round by round over
 * the pool. *left: pages that stayed (busy, pinned, or no room at home). */
static int part_move_out(struct vc_cache *c, struct vc_gpu *s, uint64_t *moved, uint64_t *left)
{
	struct xmove *xm = malloc((size_t)c->batch_pages * sizeof *xm);
	if (!xm)
		return vc_err(-ENOMEM, "out of memory");
	int r = 0;
	uint64_t pos = 0;
	eng_lock(c);
	while (pos < c->ix.npool && r == 0 && !atomic_load(&s->off)) {
		uint32_t n = round_take(c, s, &pos, c->batch_pages, xm, left);
		/* Staging pages for the pages without a direct path. */
		uint32_t k = 0;
		for (uint32_t i = 0; i < n; i++) {
			if (xm[i].direct || vc_tier_alloc(s->stage_bulk, &xm[i].stage) == 0) {
				xm[k++] = xm[i];
				continue;
			}
			eng_gpu_release(c, xm[i].p); /* no staging now: it stays */
			xm[i].p->gpu = (uint8_t)s->idx;
			st_clear(c, xm[i].p, VC_ST_BUSY);
			(*left)++;
		}
		if (k == 0) {
			eng_lock_pause(c);
			continue;
		}
		eng_unlock(c);
		int perr[VC_GPUS_MAX];
		round_move(c, s, xm, k, perr);
		eng_lock(c);
		*moved += round_settle(c, s, xm, k, perr);
		for (uint32_t d = 0; d < c->ngpus; d++)
			if (perr[d] && !eng_dev_err(perr[d]) && r == 0)
				r = perr[d];
	}
	eng_unlock(c);
	free(xm);
	return r;
}

int vc_gpu_rebalance(vc_cache *c, uint64_t *moved)
{
	uint64_t mv = 0, left = 0;
	int r = eng_part_arg(c, 0, "vc_gpu_rebalance");
	for (uint32_t s = 0; r == 0 && c->ngpus > 1 && s < c->ngpus; s++)
		if (!atomic_load(&c->gpus[s].off))
			r = part_move_out(c, &c->gpus[s], &mv, &left);
	if (moved)
		*moved = mv;
	return r;
}

/* Under c->mu: evicts part s's segments that still hold pages (what could
 * not move): dirty pages written back, the rest dropped. -EAGAIN while a
 * page is held (the caller waits and tries again). */
static int part_evict_rest(struct vc_cache *c, struct vc_gpu *s)
{
	const uint32_t per = vc_ls_slots_per_seg(s->ls);
	const uint32_t nseg = (uint32_t)(vc_ls_capacity_max(s->ls) / per);
	int r = 0;
	for (uint32_t seg = 0; seg < nseg && !atomic_load(&s->off); seg++) {
		if (vc_ls_seg_live(s->ls, seg) == 0 || vc_ls_take(s->ls, seg) < 0)
			continue;
		uint64_t ev = 0;
		int err = 0, e = eng_evict_seg(c, s, seg, &ev, &err);
		if (e == -VC_EI_REFUSED)
			e = err; /* dirty pages stay: the store's error is the call's */
		if (e < 0 && r == 0)
			r = e;
	}
	return r;
}

/* How long vc_gpu_evacuate waits while no page leaves the part before it
 * gives up: pages held by readers, or moves in flight, leave within
 * milliseconds; 10 s without one means a move that does not end. A count
 * of waits would not do: the engine's wakeups are many (each wait ends in
 * microseconds under load, so 1000 of them can pass while one demotion,
 * aimed at the part before its weight went to 0, is still in flight). */
#define EVAC_STALL_NS (10ull * 1000000000ull)

int vc_gpu_evacuate(vc_cache *c, unsigned gpu, uint64_t *moved)
{
	int r = eng_part_arg(c, gpu, "vc_gpu_evacuate");
	if (r < 0)
		return r;
	if (eng_dd(c))
		return vc_err(-EOPNOTSUPP, "vc_gpu_evacuate: not with dedup (one part)");
	if ((r = vc_gpu_set_weight(c, gpu, 0)) < 0)
		return r;
	struct vc_gpu *s = &c->gpus[gpu];
	uint64_t mv = 0, fewest = UINT64_MAX, since = vc_now_ns();
	/* Moves, then evictions of what could not move, until the part is
	 * empty: pages held by readers or in flight are waited for. */
	while (r == 0 || r == -EAGAIN) {
		uint64_t left = 0;
		r = part_move_out(c, s, &mv, &left);
		eng_lock(c);
		if (r == 0 && vc_ls_live_total(s->ls) > 0)
			r = part_evict_rest(c, s);
		const uint64_t live = vc_ls_live_total(s->ls);
		bool empty = live == 0 || atomic_load(&s->off);
		if (!empty && (r == 0 || r == -EAGAIN)) {
			eng_wait_cv(c);
			r = -EAGAIN;
		}
		eng_unlock(c);
		if (empty) {
			r = 0;
			break;
		}
		const uint64_t now = vc_now_ns();
		if (live < fewest) {
			fewest = live;
			since = now;
		} else if (now - since > EVAC_STALL_NS) {
			r = vc_err(-EBUSY, "vc_gpu_evacuate: part %u still holds %llu pages, none of "
					   "which left in %llu s (held by readers or moves that do not end)",
				   gpu, (unsigned long long)live, EVAC_STALL_NS / 1000000000ull);
		}
	}
	if (moved)
		*moved = mv;
	return r;
}
