/* Tier moves: bringing pages into the host tier and pushing its victims
 * down, one page at a time, through the batcher (the device queue).
 *
 *   miss                  load into a host slot; the host victim moves to the
 *                         head of the GPU tier, in batches (demote_batch)
 *   GPU hit, swap mode    bring the page to the host tier; if the host tier
 *                         is full, its victim takes the page's GPU slot in
 *                         the same move (a SWAP: no GPU eviction)
 *
 * All under c->mu, which they drop while data moves (the pages BUSY).
 */
#include "engine/engine.h"

bool eng_unevictable(const struct vc_pnode *n, void *arg)
{
	const struct vc_page *p = (const struct vc_page *)n;
	if (st_of(p) & (VC_ST_PINS | VC_ST_BUSY | VC_ST_EXCL))
		return true;
	/* Its store refuses write-backs: it stays (engine/dirty.h, "Store errors"). */
	return p->dirty && eng_refusing(vol_of(arg, p->pno));
}

/* The host tier's victim (the GPU tier evicts by segment, not by page).
 * Exact LRU: the queue layer drains first. */
static struct vc_page *host_victim(struct vc_cache *c)
{
	struct vc_opq_node *n = vc_opq_victim(c->opq, HOST, eng_unevictable, c);
	return n ? vc_page_of(&n->pn) : NULL;
}

/* Forgets a page's entry: policy, dirty count, index; the entry is free
 * for reuse on return. The policy hears of it at once, after what is
 * queued (the order the policy sees is the order of events), not through
 * the queue: the entry may be reused for another page before a queued
 * operation would be applied, and policies with ghost lists read the key
 * when they apply a removal. So every operation queued about the entry is
 * applied first, a removal that a mover queued (promote, demotion)
 * included, whether or not the incarnation is still live. `drained`: the
 * caller drained the queues since anything about p was queued (evict_seg
 * and a failed cleaning step drop many pages after one drain). */
void eng_page_forget(struct vc_cache *c, struct vc_page *p, bool drained)
{
	eng_assert_locked(c);
	if (!drained)
		vc_opq_drain(c->opq);
	uint32_t g = vc_opq_gen(&p->qn);
	if (vc_opq_gen_live(g))
		vc_opq_remove_now(c->opq, &p->qn, g);
	if (p->dirty)
		dirty_clear(c, p);
	uint64_t pno = p->pno;
	vc_index_remove(&c->ix, p);
	eng_wake_page(c, pno); /* its waiters look it up again */
}

/* Forgets a page and frees its slot (eng_page_forget). Its data is gone. */
void eng_page_drop_drained(struct vc_cache *c, struct vc_page *p, bool drained)
{
	if (p->tier == GPU) {
		eng_gpu_release(c, p);
	} else {
		eng_dd_back_clear(c, p->slot);
		vc_tier_free(c->host, p->slot);
	}
	eng_page_forget(c, p, drained);
}

void eng_page_drop(struct vc_cache *c, struct vc_page *p)
{
	eng_page_drop_drained(c, p, false);
}

/* One page move on part g, unlocked: add to the open batch and wait for it. */
int eng_move1(struct vc_cache *c, struct vc_gpu *g, struct vc_move m)
{
	(void)c;
	struct vc_ticket t;
	int r = vc_batcher_add(g->bat, &m, &t);
	return r < 0 ? r : vc_batcher_wait(g->bat, &t);
}

int eng_move_up(struct vc_cache *c, const struct vc_page *p, uint64_t host)
{
	struct vc_move mv[DD_DEGREE_MAX];
	struct vc_ticket tk[DD_DEGREE_MAX];
	struct vc_gpu *g = gpu_of(c, p);
	uint32_t k = eng_mv_page(c, p, host, true, mv);
	int r = vc_batcher_add_n(g->bat, mv, k, tk);
	if (r == 0)
		r = vc_batcher_wait_n(g->bat, tk, k);
	atomic_fetch_add_explicit(&g->n_d2h, 1, memory_order_relaxed);
	return r;
}

int eng_fan_via(struct vc_cache *c, const struct vc_move *mv, const uint8_t *part, uint32_t n,
		struct vc_move *sm, struct vc_ticket *st, int *perr)
{
	/* Grouped by part into sm: every part's add before the first wait. */
	uint32_t at[VC_GPUS_MAX], cnt[VC_GPUS_MAX], m = 0;
	for (uint32_t k = 0; k < c->ngpus; k++) {
		at[k] = m;
		cnt[k] = 0;
		perr[k] = 0;
		for (uint32_t i = 0; i < n; i++)
			if (part[i] == k)
				sm[m + cnt[k]++] = mv[i];
		m += cnt[k];
		if (cnt[k])
			perr[k] = vc_batcher_add_n(c->gpus[k].bat, sm + at[k], cnt[k], st + at[k]);
	}
	int err = 0;
	for (uint32_t k = 0; k < c->ngpus; k++) {
		if (cnt[k] && perr[k] == 0)
			perr[k] = vc_batcher_wait_n(c->gpus[k].bat, st + at[k], cnt[k]);
		if (perr[k] && !err)
			err = perr[k];
	}
	return err;
}

int eng_fan(struct vc_cache *c, const struct vc_move *mv, const uint8_t *part, uint32_t n,
	    struct vc_ticket *tk, int *perr)
{
	for (uint32_t k = 0; k < c->ngpus; k++)
		perr[k] = 0;
	uint32_t used = 0; /* parts with moves: bit k */
	for (uint32_t i = 0; i < n; i++)
		used |= 1u << part[i];
	if (used == 0)
		return 0;
	/* One part: the moves as they are, one add. */
	if ((used & (used - 1)) == 0) {
		struct vc_gpu *g = &c->gpus[part[0]];
		int r = vc_batcher_add_n(g->bat, mv, n, tk);
		if (r == 0)
			r = vc_batcher_wait_n(g->bat, tk, n);
		return perr[part[0]] = r;
	}
	struct vc_move *sm = malloc((size_t)n * sizeof *sm);
	if (!sm)
		return vc_err(-ENOMEM, "out of memory");
	int err = eng_fan_via(c, mv, part, n, sm, tk, perr);
	free(sm);
	return err;
}

void eng_fail_parts(struct vc_cache *c, const int *perr)
{
	for (uint32_t k = 0; k < c->ngpus; k++)
		if (eng_dev_err(perr[k]))
			eng_gpu_fail(c, &c->gpus[k], perr[k]);
}

/* Loads page pno from the backing store into buf (unlocked); the part past
 * the end of the store reads as zeros. */
int eng_load_page(struct vc_cache *c, uint64_t pno, unsigned char *buf)
{
	uint32_t len = page_len(c, pno);
	int r = vc_backing_read(vol_of(c, pno)->bk, buf, len, page_off(c, pno));
	if (len < c->page_size)
		memset(buf + len, 0, c->page_size - len);
	return r;
}

/* Host victims are demoted c->demote_batch at a time (vc_config): one
 * device round trip for the batch instead of one per page, leaving that
 * many free host slots for the misses that follow. At most c->demoters_max
 * batches are in flight at once (8; VC_DEMOTERS), so threads that find no
 * free slot while batches are moving wait for their slots instead of
 * demoting more. A batch's round trip, not the link, is the bound: on the
 * H200 8 readers missing into a 64 MiB host tier demoted 1.3x (plain) and
 * 1.5x (XTS) faster at 4 than at 2 (docs/DEDUP.md step 8); with the
 * engine's locks spinning (step 14), 8 demoted encrypted pages 1.25x
 * faster than 4 and plain ones no slower (step 15). */
#define DEMOTE_BATCH_MAX 256

/* A host slot without a demotion (no GPU tier, or one that can make no
 * room): the host victim is dropped, after a write-back if dirty. A
 * write-back the store refuses leaves the victim dirty and its volume
 * refusing (eng_writeback_page), so that the next choice passes over it:
 * 0, look again. -EAGAIN: no victim now (pins, moves in flight). */
static int drop_host_one(struct vc_cache *c)
{
	struct vc_page *v = host_victim(c);
	if (!v)
		return -EAGAIN;
	uint64_t pno = v->pno;
	if (v->dirty && eng_writeback_page(c, v) < 0)
		return 0; /* refused (or pinned meanwhile): the next choice passes over it */
	/* Unlocked meanwhile: drop it only if it is still that page, clean,
	 * in the host tier and unused (the entry may have been dropped and
	 * reused for another page; page.h: read its fields only once its st
	 * shows it settled). */
	if (!(st_of(v) & VC_ST_HOST) || v->pno != pno || v->tier != HOST || v->dirty ||
	    !vc_page_claim(v, 0, VC_ST_HOST))
		return 0;
	eng_page_drop(c, v);
	c->st.evictions[HOST]++;
	return 0;
}

/* Host victims of a demotion, claimed (BUSY) as the policy offers them,
 * which makes eng_unevictable pass over them for the next choice. Each
 * goes to its home part (eng_home), which must have room left in this
 * batch (room[]: pages); a page that cannot be claimed (a lock-free reader
 * pinned it since) or whose part is full ends the batch. */
struct victims {
	struct vc_cache *c;
	struct vc_page **v;
	uint8_t *part;
	uint64_t *room;
	uint32_t n;
};

static bool take_victim(struct vc_opq_node *n, void *arg)
{
	struct victims *vs = arg;
	struct vc_page *p = vc_page_of(&n->pn);
	int h = vs->c->ngpus > 1 ? eng_home(vs->c, p->pno) : 0;
	if (h < 0 || vs->room[h] == 0 || !vc_page_claim(p, VC_ST_BUSY, 0))
		return false;
	vs->room[h]--;
	vs->part[vs->n] = (uint8_t)h;
	vs->v[vs->n++] = p;
	return true;
}

/* Room for a demotion batch on every usable part, in pages (room[k]).
 * One part: eng_gpu_room may sleep until there is room, as ever. Several:
 * no part's reclaim sleeps (one part's pinned tail must not stall the
 * others): parts without room now get none, and when none has any the
 * caller waits (-EAGAIN). A part whose device failed meanwhile gets none.
 * -VC_EI_SHRUNK or -VC_EI_REFUSED when no part can make room for a reason
 * waiting does not end (shrunk to nothing, refusing stores): the caller
 * frees a host slot without a demotion. Under c->mu. */
static int demote_room(struct vc_cache *c, uint64_t *room)
{
	bool any = false;
	int stuck = 0; /* a part's -VC_EI_SHRUNK or -VC_EI_REFUSED */
	uint32_t waits = 0; /* parts that may have room once pages settle */
	for (uint32_t k = 0; k < c->ngpus; k++) {
		struct vc_gpu *g = &c->gpus[k];
		room[k] = 0;
		if (!eng_part_usable(g))
			continue;
		int r = eng_gpu_room(c, g, 1, c->ngpus > 1); /* the rest of the batch: what room there is */
		if (r == -VC_EI_SHRUNK || r == -VC_EI_REFUSED) {
			stuck = r;
			continue;
		}
		if (r == -EAGAIN || (r < 0 && atomic_load(&g->off))) {
			waits += r == -EAGAIN;
			continue;
		}
		if (r < 0)
			return r;
		if (!eng_part_usable(g)) /* the reclaim found its device failed */
			continue;
		room[k] = eng_gpu_free(c, g) / eng_mpp(c);
		if (eng_dd(c) && room[k] > c->dd.page_cap - c->dd.pages)
			room[k] = c->dd.page_cap - c->dd.pages;
		any |= room[k] > 0;
	}
	return any ? 0 : stuck && !waits ? stuck : -EAGAIN;
}

/* Whether this demotion writes its dirty victims back on their way down:
 * always with VC_GPU_DIRTY_CLEAN; in write-back with background
 * write-back on (dirty_bg < dirty_max) also while the dirty pages are past
 * half its mark. The flusher is busy then and would write them soon; from
 * the host slot the write needs no move back up (a dirty page of the GPU
 * tier goes back through the staging pages: a device move more, and a
 * writer's wait where its eviction meets it). Below that, dirty pages go
 * down dirty, and a page written again and again costs no store writes. */
static bool demote_cleans(struct vc_cache *c)
{
	return c->gt.clean_down ||
	       (c->write_mode == VC_WRITE_BACK && c->dirty_bg < c->dirty_max &&
		atomic_load_explicit(&c->dirty_charged, memory_order_relaxed) > c->dirty_bg / 2);
}

/* Unlocked, when the demotion cleans (demote_cleans): the dirty victims
 * among v[0..n) (BUSY: their data and dirty flags hold still) are written
 * to their stores from their host slots while their moves down run.
 * wr[i]: 1 written, 0 clean already or not cleaned, -errno the store's
 * final error (the victim then stays in the host tier, dirty, and its
 * volume refuses: demote_batch). */
static void demote_writeback(struct vc_cache *c, struct vc_page *const *v, uint32_t n, bool clean,
			     int *wr)
{
	struct vc_bio io[DEMOTE_BATCH_MAX];
	uint32_t at[DEMOTE_BATCH_MAX], k = 0;
	for (uint32_t i = 0; i < n; i++) {
		wr[i] = 0;
		if (!clean || !v[i]->dirty)
			continue;
		uint64_t pno = v[i]->pno;
		io[k] = (struct vc_bio){ .buf = host_data(c, v[i]), .off = page_off(c, pno),
					 .len = page_len(c, pno), .write = 1 };
		at[k++] = i;
	}
	/* One submission per run of a volume's pages (distinct pages: no
	 * overlap); each request's result is its own. */
	for (uint32_t j = 0, e; j < k; j = e) {
		struct vc_volume *vol = vol_of(c, v[at[j]]->pno);
		for (e = j + 1; e < k && vol_of(c, v[at[e]]->pno) == vol; e++)
			;
		(void)vc_backing_submit(vol->bk, io + j, e - j);
	}
	for (uint32_t j = 0; j < k; j++)
		wr[at[j]] = io[j].result < 0 ? io[j].result : 1;
}

/* Frees host slots: up to c->demote_batch host victims move to the GPU
 * tier in one device submission per part, each to its home part (with one
 * part: all of them, their slots appended together, contiguous in the
 * log). Drains the policy queues once (vc_opq_victims: not once per
 * victim, 128 handles' scan each); the victims are claimed (BUSY) as they
 * are chosen, so each next choice passes over them. Dirty victims are
 * written back on the way when demote_cleans says so. -EAGAIN when no
 * victim could be claimed (the caller waits). A part whose moves fail
 * with a device error is failed (eng_gpu_fail) and its victims stay in
 * the host tier: 0, so the caller tries again without it. */
static int demote_batch(struct vc_cache *c)
{
	uint64_t room[VC_GPUS_MAX], total = 0;
	int r = demote_room(c, room);
	if (r < 0)
		return r;
	for (uint32_t k = 0; k < c->ngpus; k++)
		total += room[k];
	struct vc_page *v[DEMOTE_BATCH_MAX];
	uint8_t part[DEMOTE_BATCH_MAX];
	struct victims vs = { c, v, part, room, 0 };
	uint32_t n = vc_opq_victims(c->opq, HOST, eng_unevictable, c, take_victim, &vs,
				    (unsigned)(total < c->demote_batch ? total : c->demote_batch));
	if (n == 0)
		return -EAGAIN;
	/* Grouped by part (stable): each part's victims appended together. */
	if (c->ngpus > 1) {
		struct vc_page *tv[DEMOTE_BATCH_MAX];
		uint8_t tp[DEMOTE_BATCH_MAX];
		uint32_t m = 0;
		for (uint32_t k = 0; k < c->ngpus; k++)
			for (uint32_t i = 0; i < n; i++)
				if (part[i] == k) {
					tv[m] = v[i];
					tp[m++] = (uint8_t)k;
				}
		memcpy(v, tv, n * sizeof *v);
		memcpy(part, tp, n);
	}
	const uint32_t mpp = eng_mpp(c);
	struct vc_move *mv = malloc((size_t)n * mpp * sizeof *mv);
	struct vc_ticket *tk = malloc((size_t)n * mpp * sizeof *tk);
	uint8_t *mpart = malloc((size_t)n * mpp);
	bool ok = mv && tk && mpart;
	for (uint32_t i = 0, e; ok && i < n; i = e) {
		for (e = i + 1; e < n && part[e] == part[i]; e++)
			;
		/* The room was there under this hold. */
		ok = eng_gpu_append(c, &c->gpus[part[i]], e - i, v + i) == 0;
		for (uint32_t j = i; !ok && j-- > 0;) /* the earlier parts' appends */
			eng_gpu_release(c, v[j]);
	}
	if (!ok) {
		free(mv);
		free(tk);
		free(mpart);
		while (n > 0)
			st_clear(c, v[--n], VC_ST_BUSY);
		return -EAGAIN;
	}
	/* GPU residence recorded (with dedup: reserved), tier still HOST:
	 * its data is the host slot's. */
	const unsigned char *plain[DEMOTE_BATCH_MAX];
	uint64_t src[DEMOTE_BATCH_MAX];
	for (uint32_t i = 0; i < n; i++) {
		pol_remove(c, v[i]);
		src[i] = slot_addr(c, v[i]);
		if (!eng_dd(c))
			eng_mv_page(c, v[i], src[i], false, mv + (size_t)i * mpp);
		memset(mpart + (size_t)i * mpp, part[i], mpp);
		plain[i] = host_data(c, v[i]);
	}
	c->demoters++;
	/* Sealed and written back unlocked: the victims are ours (BUSY) and
	 * their data holds still. With dedup and nothing to seal or write
	 * back, this hold and the next are the trip's first and last
	 * (eng_dd_down is entered and left under c->mu). */
	int perr[VC_GPUS_MAX] = { 0 }, wr[DEMOTE_BATCH_MAX];
	const bool clean = demote_cleans(c);
	bool locked = eng_dd(c) && !eng_integ(c) && !clean;
	if (!locked)
		eng_unlock(c);
	r = 0;
	for (uint32_t i = 0; eng_integ(c) && r == 0 && i < n; i++)
		r = eng_seal(c, v[i], host_data(c, v[i]));
	demote_writeback(c, v, n, clean, wr);
	if (r == 0 && eng_dd(c)) { /* before the host slots go */
		if (!locked)
			eng_lock(c);
		locked = true;
		r = perr[0] = eng_dd_down(c, n, v, plain, src);
	} else if (r == 0) {
		r = eng_fan(c, mv, mpart, n * mpp, tk, perr);
	}
	free(mv);
	free(tk);
	free(mpart);
	if (!locked)
		eng_lock(c);
	c->demoters--;
	uint32_t down = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct vc_gpu *g = &c->gpus[part[i]];
		int e = r < 0 && !eng_dev_err(r) ? r : perr[part[i]];
		if (e == 0 && wr[i] < 0) {
			e = wr[i];
			eng_store_refused(vol_of(c, v[i]->pno), wr[i]);
			atomic_fetch_add_explicit(&c->refusals, 1, memory_order_relaxed);
		}
		if (wr[i] > 0) /* the store has it, whether or not it went down */
			eng_note_written(c, v[i], page_len(c, v[i]->pno));
		if (e < 0) {
			eng_gpu_release(c, v[i]);
			pol_insert(c, v[i], HOST);
			st_clear(c, v[i], VC_ST_BUSY);
			continue;
		}
		eng_dd_back_clear(c, v[i]->slot);
		vc_tier_free(c->host, v[i]->slot);
		v[i]->tier = GPU; /* eng_gpu_append recorded where */
		/* Published last (ours till now: BUSY, no pins). */
		st_settle(c, v[i], VC_ST_GPU);
		pol_insert(c, v[i], GPU);
		atomic_fetch_add_explicit(&g->n_h2d, 1, memory_order_relaxed);
		down++;
	}
	c->st.evictions[HOST] += down;
	c->st.h2d += (uint64_t)down * c->page_size;
	eng_fail_parts(c, perr);
	eng_wake(c);
	if (down)
		return 0;
	if (r == -VC_EI_NOROOM) /* with dedup, room promised and gone (not reached) */
		return -EAGAIN;
	if (r < 0 && !eng_dev_err(r))
		return r;
	/* 0 after a device's failure (the caller tries the others), or after
	 * refused write-backs (the next choice passes over their victims). */
	return 0;
}

/* A free host slot, evicting as needed; may sleep. A host victim goes
 * down to the GPU tier, or, without one or where it can make no room
 * (shrunk to nothing, or refusing stores: demote_room), is dropped. Never
 * fails for a store's refusal (engine/dirty.h, "Store errors"): the dirty limit
 * leaves clean host victims. */
int eng_host_slot_get(struct vc_cache *c, uint32_t *s)
{
	eng_assert_locked(c);
	for (;;) {
		if (vc_tier_alloc(c->host, s) == 0)
			return 0;
		int r;
		if (!eng_gpu_usable(c))
			r = drop_host_one(c);
		else if (c->demoters < c->demoters_max)
			r = demote_batch(c);
		else
			r = 1; /* batches in flight will free slots */
		if (r == -VC_EI_SHRUNK || r == -VC_EI_REFUSED)
			r = drop_host_one(c);
		if (r == 1)
			eng_wait_slot(c);
		else if (r == -EAGAIN) {
			atomic_fetch_add_explicit(&c->pin_stalls, 1, memory_order_relaxed);
			eng_wait_cv(c); /* no victim now: pins or moves must end */
		}
		else if (r < 0)
			return r;
	}
}

/* Brings a GPU-tier page (not busy) to the host tier: 0, -EAGAIN (wait
 * and look again), 1 (look again now: encryption made room first), or
 * -errno. */
int eng_promote(struct vc_cache *c, struct vc_page *p)
{
	eng_assert_locked(c);
	uint32_t s = 0;
	struct vc_page *v = NULL;
	if (!vc_page_claim(p, VC_ST_BUSY, 0))
		return -EAGAIN; /* a reader is copying it out in place */
	const bool slot_free = vc_tier_alloc(c->host, &s) == 0;
	if (!slot_free)
		pol_miss(c, p->pno);
	if (!slot_free && (c->gt.cipher || eng_dd(c) || c->gt.clean_down || c->ngpus > 1)) {
		/* No SWAP under encryption: the victim's plaintext would go
		 * down and p's ciphertext up in one move, two tweaks in one
		 * descriptor; nor with dedup, where p's blocks may be shared;
		 * nor where dirty pages are written back as they go down
		 * (the victim may be dirty) or with several parts (the victim
		 * belongs on its own home part, not on p's). Room comes the
		 * way a miss makes it (a demotion batch), and the caller looks
		 * p up again. */
		st_clear(c, p, VC_ST_BUSY);
		int r = eng_host_slot_get(c, &s);
		if (r < 0)
			return r;
		vc_tier_free(c->host, s);
		return 1;
	} else if (!slot_free) {
		v = host_victim(c);
		if (!v || !vc_page_claim(v, VC_ST_BUSY, 0)) {
			st_clear(c, p, VC_ST_BUSY);
			return -EAGAIN;
		}
		pol_remove(c, v);
	}
	pol_remove(c, p);
	uint64_t gaddr = v ? slot_addr(c, p) : 0;
	uint64_t haddr = v ? slot_addr(c, v) : vc_tier_addr(c->host, s);
	eng_unlock(c);
	struct vc_gpu *g = gpu_of(c, p);
	int r = v ? eng_move1(c, g, (struct vc_move){ .src = haddr, .dst = gaddr, .op = VC_MOVE_SWAP })
		  : eng_move_up(c, p, haddr);
	uint64_t nonce = 0;
	bool bad = false; /* failed its integrity check (no SWAP then: encrypted) */
	if (r == 0 && !v && eng_integ(c))
		bad = (r = eng_check(c, p, vc_tier_host(c->host, s), &nonce)) < 0;
	if (eng_dd(c))
		eng_dd_up_prefetch(c, p, s);
	eng_lock(c);
	if (r < 0) {
		/* The device failed mid-move: the slots' contents are unknown, so
		 * neither page can be trusted. Dirty data in them is lost. The
		 * same for a page whose content fails its check. */
		if (!v)
			vc_tier_free(c->host, s);
		if (bad)
			eng_integ_drop(c, p, p->pno, nonce, true);
		else
			eng_gpu_lost(c, p);
		if (v)
			eng_gpu_lost(c, v);
		eng_wake(c);
		if (!eng_dev_err(r))
			return r;
		/* The part failed: p is gone from the tier, and the caller
		 * looks it up again (a miss now, read from the store). */
		eng_gpu_fail(c, g, r);
		return 1;
	}
	if (v) {
		/* The host victim took p's GPU slot: it owns it from now, with
		 * a fresh stamp (its place in the log is p's, an approximation
		 * that cleaning corrects: it orders by stamp). */
		uint32_t hs = v->slot;
		v->tier = GPU;
		vc_ls_rekey(g->ls, gpu_slot(c, p), page_id(c, v), ++g->clock);
		v->gpu = p->gpu;
		/* Published last: a reader that pins it reads where[] next. */
		st_settle(c, v, VC_ST_GPU);
		pol_insert(c, v, GPU);
		c->st.evictions[HOST]++;
		c->st.h2d += c->page_size;
		s = hs;
	} else {
		if (eng_dd(c))
			eng_dd_up(c, p, s);
		else
			eng_gpu_release(c, p);
	}
	p->tier = HOST;
	p->slot = s;
	pol_insert(c, p, HOST);
	st_settle(c, p, VC_ST_HOST); /* not busy */
	c->st.d2h += c->page_size;
	eng_wake(c);
	return 0;
}
