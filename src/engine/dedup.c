/* Block deduplication of the GPU tier (issue 14, DEDU; docs/DEDUP.md).
 *
 * The GPU tier stores blocks of page / D bytes. A block is the log store's
 * owner: its id names its slot through the store's where[] (which the
 * device cleaner keeps current), and the block table here holds what must
 * not move with the data: its fingerprint, reference count, cipher tweak,
 * and the list of its uses. A GPU page is D uses, use u = page id x D + j
 * naming block res[u]; uses of one block are a doubly linked list through
 * next[u] and prev[u], so a page leaves a block in O(1).
 *
 * Locks (engine.h): the block store is dd.mu's, the page counts and
 * promises c->mu's, c->mu first where both are held. A block's death
 * orphans its slot, which needs c->mu: under dd.mu alone (the known
 * trip's settle, the indexer's lookups) nothing dies; a trip keeps its
 * pin on a stored block that lost its last use meanwhile until its last
 * hold of c->mu. So blocks die under both locks, and are born under
 * both (but the known trip's fresh blocks, under dd.mu alone, against
 * slots its caller reserved, and slotless until its append under c->mu;
 * no walk of slots finds them before); the
 * indexer names a queued block by id and generation (gen[], bumped at
 * each death) and reads nothing of an id whose generation moved on.
 * Pins are taken under both locks, but for the known trip's (dd.mu
 * alone): that pin can come after a claim checked for pins in a
 * hold of c->mu still running. Cleaning in that hold copies the block
 * (the trip reads the block's address after its next hold of c->mu: the
 * new one); an eviction drops its pages, and a pinned block that lost
 * its last use keeps its slot, and so its segment, until the last unpin.
 * Sanitizer builds check dd.mu where the table and the uses change
 * (dd_assert_locked).
 *
 * Invariants (under those locks):
 *   - a block id is live iff refs > 0 or keeps > 0 (or pinned after
 *     losing both), and then it owns exactly one live slot of the log
 *     (where[id]); refs is the length of its use list; a freed block's
 *     serial (tweak) is 0
 *   - keeps counts the back notes (GRAM swap) holding the block: a page
 *     that came up from it, in the host tier; a block with keeps and no
 *     use is kept (dd.kept of them), indexed when kept, and freed when
 *     the last note lets go or a claim takes its segment
 *   - a block's bytes never change while it is live: writes never touch
 *     GPU memory (a write to a GPU page promotes or drops it first), so a
 *     shared block is immutable and copy-on-write costs nothing
 *   - the fingerprint table names only live blocks whose bytes are in
 *     their slots, one per fingerprint (the first placed); a block leaves
 *     it when it dies
 *   - the tweak of a block (encryption) is a serial given out once per
 *     cache, never reused, so no two ciphertexts ever share one
 *   - logical GPU pages (dd.pages, resident or on their way down) stay at
 *     most page_cap (dedup_max_factor x the tier's pages), so the pool of
 *     page entries (host pages + page_cap) always suffices
 *   - a page counted in dd.pages has each use either linked (res[u] !=
 *     DD_NIL) or holding one reserved slot: dd.resv is the number of the
 *     latter, and eng_gpu_free = room - resv is what others may take
 *
 * This file is the block store: the table, blocks and uses, the slot
 * reservations, claims for cleaning and eviction, open and close. The trip
 * down (eng_dd_down) and the adaptive switch are in dedup_down.c and
 * dedup_pair.c; what they share, in dedup.h.
 *
 * Going down (demotion batch, GPU prefetch round): eng_gpu_append only
 * reserves D slots a page; eng_dd_down then (dedup_down.c) moves the
 * blocks chosen for dedup into staging in device memory, fingerprinting
 * them on the way (VC_MOVE_FP; with encryption on the host from the
 * plaintext, and they do not move yet), looks them up, compares the
 * matches' bytes, shares what is equal, and only then gives the rest
 * fresh blocks, appends their slots and places them (a device copy from
 * staging, or the encrypting move). So a duplicate never takes a slot:
 * capacity is what the distinct blocks need. The blocks not chosen
 * (adaptive: volumes switched off, outside the sample) go straight to
 * fresh slots, as before dedup. A volume whose blocks rarely share goes
 * the direct trip: its blocks go straight to fresh slots too, and are
 * looked up after, by the indexer (dedup_later.c), which merges the
 * rare duplicate late. Cost per page chosen: D table probes
 * (O(1) expected), D list links; per trip a compare job if anything
 * matched and a copy job if anything was unique.
 *
 * Which pages: mode ON, all; ADAPTIVE, those of volumes whose dd_on is
 * set, plus, always, a spatial sample (page index hash below a threshold,
 * 1 in DD_SAMPLE), so that every volume feeds the factor estimate
 * (dedup_est.c: the data's factor, sampled by content) and reads and
 * writes of sampled pages give its update ratio (eng_dd_note). Every
 * DD_WINDOW blocks fed the volume switches with hysteresis (dd_decide).
 *
 * Leaving (drop, promote, eviction): eng_gpu_release unlinks the page's D
 * uses; a block left with none dies, unless the page came up (GRAM swap)
 * and its note keeps the block, so that the page, unwritten, goes back to
 * it by reference: no move, as for shared blocks. A kept block costs its
 * slot while the page is up, so notes keep only while a quarter of the
 * tier is free, and cleaning, eviction and shrinks free the kept blocks
 * of the segments they claim rather than move them. Cleaning moves a block once, and all
 * its pages follow through res[] and where[]; eviction and cleaning claim
 * every page of every block in their segments (eng_dd_claim).
 *
 * Memory: 12 x D bytes per page entry (res, next, prev), 4 per entry
 * (mark), 40 per block, 8 per table slot (two per block); per trip
 * running at once a scratch (41 bytes a block of a batch, pinned) and, in
 * plain mode, a block of device memory per block of a batch (1 MiB for
 * 256 pages of 4 KiB: outside the tier's gpu_bytes); the estimate 320 KiB.
 */
#include <stdio.h>

#include "base/env.h"
#include "device/cmp.h"
#include "engine/dedup.h"
#include "engine/engine.h"


/* One page in DD_SAMPLE is sampled (dedup_est.c: a window is DD_WINDOW
 * sampled blocks). */
#define DD_SAMPLE 16
/* Logical GPU pages per physical page, at most (vc_config.dedup_max_factor
 * 0): DEDU's figures reach factors of 10, and "the data fit" from 5 at a
 * GPU buffer of 4/5 of the buffers; 8 covers that while costing twice the
 * page entries that the former bound (D x the tier's pages) did at D = 4. */
#define DD_MAX_FACTOR 8
/* The fingerprint job's SM cap: a tenth of an H100's (issue 14's goal). */
#define DD_MAX_SMS 13

bool dd_sampled(uint64_t pno)
{
	return (vc_mix64(vc_pno_index(pno) ^ 0x6a09e667f3bcc908ull) & (DD_SAMPLE - 1)) == 0;
}

/* --- the fingerprint table: linear probing, backward-shift deletion --- */

uint32_t dd_tab_home(const struct eng_dedup *d, const struct vc_fp_digest *fp)
{
	uint64_t h;
	memcpy(&h, fp->b, sizeof h);
	return (uint32_t)(vc_mix64(h) & d->tab_mask);
}

uint32_t dd_tab_find(const struct eng_dedup *d, const struct vc_fp_digest *fp)
{
	dd_assert_locked(d);
	for (uint32_t i = dd_tab_home(d, fp);; i = (i + 1) & d->tab_mask) {
		uint32_t b = d->tab[i];
		if (b == DD_NIL || memcmp(&d->blk[b].fp, fp, sizeof *fp) == 0)
			return b;
	}
}

void dd_tab_insert(struct eng_dedup *d, uint32_t b)
{
	dd_assert_locked(d);
	uint32_t i = dd_tab_home(d, &d->blk[b].fp);
	while (d->tab[i] != DD_NIL)
		i = (i + 1) & d->tab_mask;
	d->tab[i] = b;
	d->blk[b].indexed = true;
}

static void tab_remove(struct eng_dedup *d, uint32_t b)
{
	dd_assert_locked(d);
	uint32_t i = dd_tab_home(d, &d->blk[b].fp);
	while (d->tab[i] != b)
		i = (i + 1) & d->tab_mask;
	for (uint32_t j = i;;) {
		j = (j + 1) & d->tab_mask;
		if (d->tab[j] == DD_NIL)
			break;
		uint32_t k = dd_tab_home(d, &d->blk[d->tab[j]].fp);
		/* Entry j may fill hole i unless its home lies cyclically in (i, j]. */
		bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
		if (!stays) {
			d->tab[i] = d->tab[j];
			i = j;
		}
	}
	d->tab[i] = DD_NIL;
	d->blk[b].indexed = false;
}

/* --- blocks and uses --- */

void dd_use_link(struct eng_dedup *d, uint64_t u, uint32_t b)
{
	struct eng_blk *k = &d->blk[b];
	dd_assert_locked(d);
	d->res[u] = b;
	d->prev[u] = DD_NIL;
	d->next[u] = k->head;
	if (k->head != DD_NIL)
		d->prev[k->head] = (uint32_t)u;
	k->head = (uint32_t)u;
	if (k->refs++ == 0 && k->keeps > 0)
		d->kept--; /* a kept block in use again */
}

void dd_blk_unpin(struct vc_cache *c, uint32_t b)
{
	struct eng_dedup *d = &c->dd;
	if (--d->blk[b].pins > 0 || dd_blk_live(&d->blk[b]))
		return;
	dd_blk_free(c, b, true);
}

void dd_blk_free(struct vc_cache *c, uint32_t b, bool slotted)
{
	struct eng_dedup *d = &c->dd;
	if (slotted)
		vc_ls_orphan(c->gpus[0].ls, vc_ls_where(c->gpus[0].ls, b));
	d->blk[b].tweak = 0; /* serials start at 1: no note names it now */
	d->gen[b]++;
	d->free_ids[d->nfree++] = b;
}

/* Block b lost its last use and keep: out of the table; its slot
 * orphaned and its id free, unless a trip has it pinned (the last unpin
 * frees it) or it was never placed (!slotted: its id alone). */
static void blk_gone(struct vc_cache *c, uint32_t b, bool slotted)
{
	struct eng_dedup *d = &c->dd;
	struct eng_blk *k = &d->blk[b];
	if (k->indexed)
		tab_remove(d, b);
	if (k->pins == 0)
		dd_blk_free(c, b, slotted);
}

/* Under c->mu and dd.mu: a note lets go of its keep on block b, serial
 * tw (a block freed by a claim, or its id reused since, has another). */
static void blk_unkeep(struct vc_cache *c, uint32_t b, uint64_t tw)
{
	struct eng_dedup *d = &c->dd;
	dd_assert_locked(d);
	struct eng_blk *k = &d->blk[b];
	if (k->tweak != tw || k->keeps == 0 || --k->keeps > 0 || k->refs > 0)
		return;
	d->kept--;
	blk_gone(c, b, true);
}

void dd_note_unkeep(struct vc_cache *c, uint32_t s)
{
	struct eng_dedup *d = &c->dd;
	if (!d->note[s].keep)
		return;
	d->note[s].keep = false;
	for (uint32_t j = 0; j < d->D; j++) {
		const uint64_t x = (uint64_t)s * d->D + j;
		blk_unkeep(c, d->back_blk[x], d->back_tw[x]);
	}
}

/* Unlinks use u; a block left with no use and no keep dies: out of the
 * table, its slot orphaned (if it has one: `slotted`), its id free. */
void dd_use_unlink(struct vc_cache *c, uint64_t u, bool slotted)
{
	struct eng_dedup *d = &c->dd;
	dd_assert_locked(d);
	uint32_t b = d->res[u];
	struct eng_blk *k = &d->blk[b];
	if (d->prev[u] != DD_NIL)
		d->next[d->prev[u]] = d->next[u];
	else
		k->head = d->next[u];
	if (d->next[u] != DD_NIL)
		d->prev[d->next[u]] = d->prev[u];
	d->res[u] = DD_NIL;
	if (--k->refs > 0)
		return;
	if (k->keeps > 0) {
		d->kept++; /* its page is up, and may come back to it */
		return;
	}
	blk_gone(c, b, slotted);
}

/* Takes a free block id for a block about to be stored: fresh state, a
 * new tweak. There is one: ids in use are at most the live slots (a
 * pinned block that lost its last use keeps its slot), and a block is
 * created only against a reserved slot, so nfree >= dd.resv. */
uint32_t dd_blk_new(struct eng_dedup *d)
{
	uint32_t b = d->free_ids[--d->nfree];
	d->blk[b] = (struct eng_blk){ .tweak = ++d->tweak_next, .head = DD_NIL };
	return b;
}

/* Use u (a page going down, its slot reserved) now names block b. */
void dd_use_place(struct eng_dedup *d, uint64_t u, uint32_t b)
{
	dd_use_link(d, u, b);
	d->resv--;
}

/* Undoes use_place of a fresh block whose append failed: it dies unslotted
 * and u holds its reserved slot again. */
void dd_use_unplace(struct vc_cache *c, uint64_t u)
{
	dd_use_unlink(c, u, false);
	c->dd.resv++;
}

int eng_gpu_append(struct vc_cache *c, struct vc_gpu *g, uint32_t n,
		   struct vc_page *const *pages)
{
	eng_assert_locked(c);
	struct eng_dedup *d = &c->dd;
	if (eng_dd(c)) {
		/* Nothing is appended yet: eng_dd_down appends only the blocks
		 * that are not duplicates. The room is the caller's (made under
		 * this hold), so the reservation holds it for them. */
		if (d->pages + n > d->page_cap || eng_gpu_free(c, g) < (uint64_t)n * d->D)
			return -VC_EI_NOROOM;
		d->pages += n;
		d->resv += (uint64_t)n * d->D;
		for (uint32_t i = 0; i < n; i++)
			pages[i]->gpu = (uint8_t)g->idx;
		return 0;
	}
	uint32_t *key = calloc((size_t)(n ? n : 1) * 2, sizeof *key);
	if (!key)
		return vc_err(-ENOMEM, "out of memory");
	uint32_t *slots = key + n;
	for (uint32_t i = 0; i < n; i++)
		key[i] = page_id(c, pages[i]);
	int r = vc_ls_append(g->ls, n, key, ++g->clock, slots);
	free(key);
	if (r < 0)
		return -VC_EI_NOROOM;
	for (uint32_t i = 0; i < n; i++)
		pages[i]->gpu = (uint8_t)g->idx;
	return 0;
}

/* Under c->mu and dd.mu: eng_gpu_release's part for dedup (above
 * d->pages, which is c->mu's). */
static void release_uses(struct vc_cache *c, const struct vc_page *p)
{
	struct eng_dedup *d = &c->dd;
	for (uint32_t j = 0; j < d->D; j++) {
		const uint64_t u = (uint64_t)page_id(c, p) * d->D + j;
		if (d->res[u] == DD_NIL)
			d->resv--; /* on its way down, not placed: its reserved slot */
		else
			dd_use_unlink(c, u, true);
	}
}

void eng_gpu_release(struct vc_cache *c, struct vc_page *p)
{
	eng_assert_locked(c);
	if (!eng_dd(c)) {
		vc_ls_orphan(gpu_of(c, p)->ls, gpu_slot(c, p));
		return;
	}
	struct eng_dedup *d = &c->dd;
	dd_lock(d);
	release_uses(c, p);
	dd_unlock(d);
	d->pages--;
}

uint32_t eng_mv_page(const struct vc_cache *c, const struct vc_page *p, uint64_t host, bool up,
		     struct vc_move *mv)
{
	if (!eng_dd(c)) {
		mv[0] = up ? eng_mv_up(c, slot_addr_gpu(c, p), host, p->pno)
			   : eng_mv_down(c, host, slot_addr_gpu(c, p), p->pno);
		return 1;
	}
	const struct eng_dedup *d = &c->dd;
	for (uint32_t j = 0; j < d->D; j++) {
		uint32_t b = d->res[(uint64_t)page_id(c, p) * d->D + j];
		const struct vc_ls *ls = c->gpus[0].ls; /* dedup: one part */
		uint64_t g = vc_ls_addr(ls, vc_ls_where(ls, b));
		uint64_t h = host + (uint64_t)j * d->bsize;
		mv[j] = up ? eng_mv_up(c, g, h, p->pno) : eng_mv_down(c, h, g, p->pno);
		mv[j].tweak = d->blk[b].tweak; /* the stored block's, not the page's */
	}
	return d->D;
}

void eng_dd_note(struct vc_volume *v, uint64_t pno, uint64_t pages, bool write)
{
	if (!eng_dd(v->c))
		return;
	uint64_t k = 0;
	for (uint64_t i = 0; i < pages; i++)
		k += dd_sampled(pno + i);
	if (k)
		atomic_fetch_add_explicit(write ? &v->dd_writes : &v->dd_reads, k,
					  memory_order_relaxed);
}

bool eng_dd_claim(struct vc_cache *c, uint32_t n, const uint32_t *segs, struct vc_page ***held,
		  uint32_t *nheld)
{
	eng_assert_locked(c);
	struct eng_dedup *d = &c->dd;
	const uint32_t per = vc_ls_slots_per_seg(c->gpus[0].ls);
	uint32_t nh = 0, cap = per;
	struct vc_page **h = malloc(cap * sizeof *h);
	bool ok = h != NULL;
	if (++d->mark_gen == 0) { /* wrapped: no mark may look current */
		memset(d->mark, 0, c->ix.npool * sizeof *d->mark);
		d->mark_gen = 1;
	}
	dd_lock(d);
	for (uint32_t i = 0; ok && i < n; i++)
		for (uint32_t s = 0; ok && s < per; s++) {
			uint32_t b = vc_ls_key(c->gpus[0].ls, segs[i] * per + s);
			if (b == VC_LS_DEAD)
				continue;
			if (d->blk[b].pins) { /* a trip reads it unlocked: no moving it now */
				ok = false;
				break;
			}
			for (uint32_t u = d->blk[b].head; ok && u != DD_NIL; u = d->next[u]) {
				uint32_t id = u / d->D;
				if (d->mark[id] == d->mark_gen)
					continue; /* claimed through another of its blocks */
				struct vc_page *p = &c->ix.pool[id];
				if (nh == cap) {
					struct vc_page **g = realloc(h, 2 * (size_t)cap * sizeof *h);
					if (!g) {
						ok = false;
						break;
					}
					h = g;
					cap *= 2;
				}
				if (!vc_page_claim(p, VC_ST_BUSY, 0)) {
					ok = false;
					break;
				}
				d->mark[id] = d->mark_gen;
				h[nh++] = p;
			}
		}
	/* Claimed: the kept blocks here go (their pages are up; the notes
	 * find another serial), so the segments' space is the pages'. */
	for (uint32_t i = 0; ok && i < n; i++)
		for (uint32_t s = 0; s < per; s++) {
			uint32_t b = vc_ls_key(c->gpus[0].ls, segs[i] * per + s);
			if (b == VC_LS_DEAD || d->blk[b].refs > 0 || d->blk[b].keeps == 0)
				continue;
			d->blk[b].keeps = 0;
			d->kept--;
			d->kept_freed++;
			blk_gone(c, b, true);
		}
	dd_unlock(d);
	if (!ok) {
		while (nh > 0)
			st_clear(c, h[--nh], VC_ST_BUSY);
		free(h);
		h = NULL;
	}
	*held = h;
	*nheld = nh;
	return ok;
}

void eng_dd_unindex_seg(struct vc_cache *c, uint32_t seg)
{
	eng_assert_locked(c);
	struct eng_dedup *d = &c->dd;
	const uint32_t per = vc_ls_slots_per_seg(c->gpus[0].ls);
	dd_lock(d);
	for (uint32_t s = 0; s < per; s++) {
		uint32_t b = vc_ls_key(c->gpus[0].ls, seg * per + s);
		if (b == VC_LS_DEAD)
			continue;
		if (d->blk[b].indexed)
			tab_remove(d, b);
		d->blk[b].later = false; /* nor will the indexer index it */
	}
	dd_unlock(d);
}

/* --- the invariants, checked (tests) --- */

static int broken(const char *what, uint64_t at, uint64_t got, uint64_t want)
{
	fprintf(stderr, "dedup check: %s (at %llu: %llu, want %llu)\n", what,
		(unsigned long long)at, (unsigned long long)got, (unsigned long long)want);
	return -EPROTO;
}

int eng_dd_check(struct vc_cache *c)
{
	eng_assert_locked(c);
	struct eng_dedup *d = &c->dd;
	const struct vc_ls *ls = c->gpus[0].ls;
	const uint64_t nuse = c->ix.npool * d->D;
	int r = d->resv ? broken("slots promised, no trip in flight", 0, d->resv, 0) : 0;
	uint8_t *seen = calloc(d->nblocks, 1);
	if (!seen)
		return vc_err(-ENOMEM, "out of memory");
	dd_lock(d);
	uint64_t live = 0, uses = 0, refs = 0, pages = 0, keeps = 0, kept = 0, held = 0;
	for (uint32_t b = 0; r == 0 && b < d->nblocks; b++) {
		const struct eng_blk *k = &d->blk[b];
		if (k->pins)
			r = broken("block pinned, no trip in flight", b, k->pins, 0);
		if (r || !dd_blk_live(k))
			continue;
		live++;
		refs += k->refs;
		keeps += k->keeps;
		kept += k->refs == 0;
		seen[b] = 1;
		uint32_t n = 0;
		for (uint32_t u = k->head; u != DD_NIL && n <= k->refs; u = d->next[u], n++)
			if (d->res[u] != b)
				r = broken("a use on the list names another block", u, d->res[u], b);
		if (r == 0 && n != k->refs)
			r = broken("use list length", b, n, k->refs);
		if (r == 0 && vc_ls_key(ls, vc_ls_where(ls, b)) != b)
			r = broken("block's slot keyed by another", b, vc_ls_key(ls, vc_ls_where(ls, b)), b);
	}
	for (uint32_t t = 0; r == 0 && t < d->nfree; t++) {
		const uint32_t b = d->free_ids[t];
		if (seen[b])
			r = broken(seen[b] == 1 ? "live block on the free list" : "free twice", b, seen[b], 0);
		seen[b] = 2;
	}
	if (r == 0 && live + d->nfree != d->nblocks)
		r = broken("blocks neither live nor free", 0, live + d->nfree, d->nblocks);
	for (uint64_t i = 0; r == 0 && i <= d->tab_mask; i++) {
		const uint32_t b = d->tab[i];
		if (b == DD_NIL)
			continue;
		if (seen[b] != 1 || !d->blk[b].indexed)
			r = broken("table names a dead or unindexed block", i, b, 0);
		else if (dd_tab_find(d, &d->blk[b].fp) != b)
			r = broken("table entry not found by its fingerprint", i, b, b);
	}
	for (uint64_t u = 0; r == 0 && u < nuse; u += d->D) {
		uint32_t linked = 0;
		for (uint32_t j = 0; j < d->D; j++)
			linked += d->res[u + j] != DD_NIL;
		if (linked && linked != d->D)
			r = broken("page partly linked", u / d->D, linked, d->D);
		uses += linked;
		pages += linked != 0;
	}
	if (r == 0 && uses != refs)
		r = broken("uses linked against the blocks' counts", 0, uses, refs);
	if (r == 0 && pages != d->pages)
		r = broken("pages counted", 0, d->pages, pages);
	if (r == 0 && kept != d->kept)
		r = broken("kept blocks counted", 0, d->kept, kept);
	/* Every keep is a note's, on a block of the serial it names. */
	for (uint64_t s = 0; r == 0 && d->back_blk && s < vc_tier_capacity(c->host); s++) {
		if (!d->note[s].keep)
			continue;
		for (uint32_t j = 0; r == 0 && j < d->D; j++) {
			const uint64_t x = s * d->D + j;
			held += d->blk[d->back_blk[x]].tweak == d->back_tw[x];
		}
	}
	if (r == 0 && held != keeps)
		r = broken("keeps held by notes against the blocks' counts", 0, held, keeps);
	dd_unlock(d);
	free(seen);
	return r;
}

/* --- notes for the way down (host slots) --- */

/* Under c->mu and dd.mu, with notes: host slot s's note for page p, which
 * came up from its blocks (eng_dd_up). */
static void back_note(struct vc_cache *c, const struct vc_page *p, uint32_t s)
{
	struct eng_dedup *d = &c->dd;
	const uint32_t id = page_id(c, p), b0 = d->res[(uint64_t)id * d->D];
	/* Keeping costs the blocks' slots while p is up, so only while the
	 * tier has room to spare (a quarter of it free and unpromised), and
	 * only blocks p can come back to (indexed: note_class). */
	const struct vc_gpu *g = &c->gpus[0];
	bool keep = d->keep && !atomic_load_explicit(&g->off, memory_order_relaxed) &&
		    eng_gpu_free(c, g) > vc_ls_capacity(g->ls) / 4;
	for (uint32_t j = 0; keep && j < d->D; j++)
		keep = d->blk[d->res[(uint64_t)id * d->D + j]].indexed;
	/* An indexed block's fingerprint is its bytes'; others' may be unset. */
	d->note[s] = (struct dd_note){ .pno = p->pno, .id = id, .ver = p->version,
				       .back = d->back_blk != NULL, .keep = keep,
				       .hfp = d->hostfp && d->blk[b0].indexed, .fp = d->blk[b0].fp };
	for (uint32_t j = 0; d->back_blk && j < d->D; j++) {
		const uint32_t b = d->res[(uint64_t)id * d->D + j];
		d->back_blk[(uint64_t)s * d->D + j] = b;
		d->back_tw[(uint64_t)s * d->D + j] = d->blk[b].tweak;
		d->blk[b].keeps += keep;
	}
}

void eng_dd_up(struct vc_cache *c, const struct vc_page *p, uint32_t s)
{
	eng_assert_locked(c);
	struct eng_dedup *d = &c->dd;
	/* One hold of dd.mu for the note and the release: a promotion is
	 * a short hold of c->mu, and each acquisition of dd.mu inside it
	 * may wait for a trip's settle or the indexer. */
	dd_lock(d);
	if (d->note)
		back_note(c, p, s);
	release_uses(c, p);
	dd_unlock(d);
	d->pages--;
}

void eng_dd_up_prefetch(const struct vc_cache *c, const struct vc_page *p, uint32_t s)
{
	const struct eng_dedup *d = &c->dd;
	const uint64_t u0 = (uint64_t)page_id(c, p) * d->D;
	if (d->note)
		__builtin_prefetch(&d->note[s], 1);
	if (d->back_blk) {
		__builtin_prefetch(&d->back_blk[(uint64_t)s * d->D], 1);
		__builtin_prefetch(&d->back_tw[(uint64_t)s * d->D], 1);
	}
	for (uint32_t j = 0; j < d->D; j++) {
		const uint32_t b = d->res[u0 + j];
		__builtin_prefetch(&d->next[u0 + j], 1);
		__builtin_prefetch(&d->prev[u0 + j], 1);
		if (b != DD_NIL)
			__builtin_prefetch(&d->blk[b], 1);
	}
}

void eng_dd_note_load(struct vc_cache *c, const struct vc_page *p)
{
	struct eng_dedup *d = &c->dd;
	if (!d->hostfp)
		return;
	/* Only where it saves a device round trip: the page will be selected
	 * and its volume's blocks share often enough to be staged (a direct
	 * volume's trip fingerprints in its moves, for free). */
	struct vc_volume *v = vol_of(c, p->pno);
	if (atomic_load_explicit(&v->dd_direct, memory_order_relaxed) ||
	    (d->mode != VC_DEDUP_ON && !atomic_load_explicit(&v->dd_on, memory_order_relaxed) &&
	     !dd_sampled(p->pno)))
		return;
	struct dd_note n = { .pno = p->pno, .id = page_id(c, p), .ver = p->version, .hfp = true };
	vc_fp_block(d->algo, host_data(c, p), d->bsize, &n.fp);
	d->note[p->slot] = n;
}

void eng_dd_back_clear(struct vc_cache *c, uint32_t s)
{
	eng_assert_locked(c);
	struct eng_dedup *d = &c->dd;
	if (!eng_dd(c) || !d->note)
		return;
	/* The slot's page leaves it: the note's keeps go, unless a trip
	 * that took the note let go of them already (note_class). */
	d->note[s].pno = UINT64_MAX;
	if (!d->note[s].keep)
		return;
	dd_lock(d);
	dd_note_unkeep(c, s);
	dd_unlock(d);
}

/* --- open and close --- */

int eng_dd_open(struct vc_cache *c, const struct vc_config *cfg, uint64_t host_pages)
{
	struct eng_dedup *d = &c->dd;
	d->mode = cfg->dedup;
	if (!eng_dd(c))
		return 0;
	if (vc_mutex_init_spin(&d->mu) != 0)
		return vc_err(-ENOMEM, "dedup: cannot create the block store's lock");
	d->mu_ok = true;
	d->mu_spin_ns = c->mu_spin_ns;
	d->D = eng_dd_degree(c->page_size, cfg->dedup_degree);
	d->bsize = c->page_size / d->D;
	static const uint32_t algo[] = { [VC_DEDUP_LANES] = VC_FP_LANES, [VC_DEDUP_MD5] = VC_FP_MD5,
					 [VC_DEDUP_MURMUR3] = VC_FP_MURMUR3 };
	d->algo = algo[cfg->dedup_algo];
	/* The move kernels, the cipher's too, hash the plaintext they move
	 * (VC_MOVE_FP); MurmurHash3 and MD5 are a job after the move, or
	 * with encryption a host hash of the plaintext (fingerprint()).
	 * VC_DD_CIPHER_FP=0 (for measuring) takes the encrypted path back to
	 * step 5's: the host hashes, unique blocks move once. */
	d->fp_move = d->algo == VC_FP_LANES &&
		     (!c->gt.cipher || vc_env_u32("VC_DD_CIPHER_FP", 1, 0, 1) != 0);
	d->prof = vc_env_u32("VC_DD_PROF", 0, 0, 1) != 0;
	/* Encrypted compares on the device (step 7): every block size the
	 * compare with a key takes (a power of two from 512 B); 0 (for an
	 * A/B) keeps step 6's decryption into the host bounce. */
	d->dev_cmp = c->gt.cipher && d->bsize >= VC_CMP_XTS_LEN_MIN &&
		     (d->bsize & (d->bsize - 1)) == 0 && vc_env_u32("VC_DD_DEV_CMP", 1, 0, 1) != 0;
	d->max_sms = DD_MAX_SMS;
	d->nblocks = (uint32_t)vc_ls_capacity_max(c->gpus[0].ls);
	/* Logical pages: up to max_factor x the tier's pages, so the tier
	 * can hold as many pages as the data's repetition allows up to that
	 * bound; the page entries are allocated for it up front (the pool
	 * cannot grow: lock-free readers hold pointers into it). */
	const uint64_t factor = cfg->dedup_max_factor ? cfg->dedup_max_factor : DD_MAX_FACTOR;
	d->page_cap = d->nblocks / d->D * factor;
	if (d->page_cap == 0)
		d->page_cap = 1;
	const uint64_t npool = host_pages + d->page_cap, nuse = npool * d->D;
	if (nuse >= UINT32_MAX)
		return vc_err(-EINVAL, "dedup: %llu page entries of %u blocks each (host pages + %llu "
				       "x the GPU tier's pages): at most 2^32 - 2 block uses; lower "
				       "dedup_max_factor or the tiers", (unsigned long long)npool,
			      d->D, (unsigned long long)factor);
	uint64_t tab = 2;
	while (tab < 2ull * d->nblocks)
		tab <<= 1;
	d->tab_mask = (uint32_t)(tab - 1);
	d->blk = calloc(d->nblocks, sizeof *d->blk);
	d->free_ids = malloc(d->nblocks * sizeof *d->free_ids);
	d->res = malloc(nuse * sizeof *d->res);
	d->next = malloc(nuse * sizeof *d->next);
	d->prev = malloc(nuse * sizeof *d->prev);
	d->tab = malloc(tab * sizeof *d->tab);
	d->mark = calloc(npool, sizeof *d->mark);
	d->gen = calloc(d->nblocks, sizeof *d->gen);
	if (!d->blk || !d->free_ids || !d->res || !d->next || !d->prev || !d->tab || !d->mark ||
	    !d->gen)
		return vc_err(-ENOMEM, "out of memory for the dedup tables (%u blocks)", d->nblocks);
	/* Notes for the way down (engine.h). VC_DD_BACK=0 and VC_DD_HOSTFP=0
	 * (for A/Bs): neither kind; every page goes the trips of step 7. */
	d->hostfp = d->D == 1 && d->algo == VC_FP_LANES && (!c->gt.cipher || d->dev_cmp) &&
		    vc_env_u32("VC_DD_HOSTFP", 1, 0, 1);
	const bool back = cfg->gpu_hits == VC_GPU_HITS_SWAP && vc_env_u32("VC_DD_BACK", 1, 0, 1);
	if (back || d->hostfp) {
		d->note = malloc(host_pages * sizeof *d->note);
		if (!d->note)
			return vc_err(-ENOMEM, "out of memory for the dedup notes (%llu host pages)",
				      (unsigned long long)host_pages);
		for (uint64_t i = 0; i < host_pages; i++)
			d->note[i] = (struct dd_note){ .pno = UINT64_MAX };
	}
	if (back) {
		d->keep = vc_env_u32("VC_DD_KEEP", 1, 0, 1) != 0;
		d->back_blk = malloc(host_pages * d->D * sizeof *d->back_blk);
		d->back_tw = malloc(host_pages * d->D * sizeof *d->back_tw);
		if (!d->back_blk || !d->back_tw)
			return vc_err(-ENOMEM, "out of memory for the dedup swap notes (%llu host pages)",
				      (unsigned long long)host_pages);
	}
	memset(d->res, 0xff, nuse * sizeof *d->res);
	memset(d->tab, 0xff, tab * sizeof *d->tab);
	for (uint32_t b = 0; b < d->nblocks; b++)
		d->free_ids[b] = d->nblocks - 1 - b; /* 0 on top */
	d->nfree = d->nblocks;
	/* A trip's scratch: a demotion batch or a prefetch round of blocks.
	 * One now, more as trips run at once (scratch_get); a trip is at most
	 * scr_blocks (eng_dd_down splits larger ones). */
	uint32_t pages = cfg->batch_pages > 256 ? cfg->batch_pages : 256;
	d->scr_blocks = pages * d->D;
	int r = eng_est_open(c);
	if (r == 0)
		r = dd_scratch_open(c);
	return r == 0 ? dd_later_open(c) : r;
}

void eng_dd_close(struct vc_cache *c)
{
	struct eng_dedup *d = &c->dd;
	eng_dd_later_close(c); /* vc_close stopped it already, but for a failed open */
	dd_scratch_close(c);
	eng_est_close(c);
	free(d->blk);
	free(d->free_ids);
	free(d->res);
	free(d->next);
	free(d->prev);
	free(d->tab);
	free(d->mark);
	free(d->gen);
	free(d->note);
	free(d->back_blk);
	free(d->back_tw);
	if (d->mu_ok)
		pthread_mutex_destroy(&d->mu);
	memset(d, 0, sizeof *d);
}
