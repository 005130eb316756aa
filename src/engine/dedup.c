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
 * Invariants (all under c->mu):
 *   - a block id is live iff refs > 0, and then it owns exactly one live
 *     slot of the log (where[id]); refs is the length of its use list
 *   - a block's bytes never change while it is live: writes never touch
 *     GPU memory (a write to a GPU page promotes or drops it first), so a
 *     shared block is immutable and copy-on-write costs nothing
 *   - the fingerprint table names only live, merged blocks, one per
 *     fingerprint (the first stored); a block leaves it when it dies
 *   - the tweak of a block (encryption) is a serial given out once per
 *     cache, never reused, so no two ciphertexts ever share one
 *   - logical GPU pages (dd.pages) stay at most page_cap, so the pool of
 *     page entries (host pages + page_cap) always suffices
 *
 * Going down (demotion, GPU prefetch): eng_gpu_append gives each page D
 * fresh blocks (one log append for the batch), the batch moves down as D
 * moves a page, then eng_dd_merge, under c->mu:
 *   1. fingerprints the new blocks: on the device (vc_fp_run, SM-capped)
 *      from their slots; with encryption, which keeps plaintext out of GPU
 *      memory, on the host from the pages' plaintext (the fallback: the
 *      cipher kernels do not fingerprint on their way yet)
 *   2. looks each up in the table; a miss enters the table (so a later
 *      block of the same batch can match it)
 *   3. compares the bytes of every match: on the device (vc_cmp_run over
 *      the two slots); with encryption the stored block comes up through
 *      the decrypting move into a host bounce and is compared with the
 *      page's plaintext. Equal: the use moves to the stored block and the
 *      fresh one dies (its slot orphaned, for cleaning). Unequal: a
 *      collision, counted; the fresh block stays, unique and unindexed
 * Both device jobs run under c->mu (a launch and a wait each, tens of
 * microseconds on CUDA), which keeps the stored blocks from being freed,
 * cleaned or evicted meanwhile; the encrypted compare waits for a batch of
 * moves under it too. Cost per page: D table probes (O(1) expected), D
 * list links; per batch two device jobs.
 *
 * Which pages: mode ON, all; ADAPTIVE, those of volumes whose dd_on is
 * set, plus, always, a spatial sample (SHARDS: page index hash below a
 * threshold, 1 in DD_SAMPLE), whose blocks in and blocks shared give the
 * volume's dedup factor estimate, and whose reads and writes give its
 * update ratio (eng_dd_note). Every DD_WINDOW sampled blocks the volume
 * switches with hysteresis (see dd_decide) and the window's counts halve.
 *
 * Leaving (drop, promote, eviction): eng_gpu_release unlinks the page's D
 * uses; a block left with none dies. Cleaning moves a block once, and all
 * its pages follow through res[] and where[]; eviction and cleaning claim
 * every page of every block in their segments (eng_dd_claim).
 *
 * Memory: 12 x D bytes per page entry (res, next, prev), 4 per entry
 * (mark), 40 per block, 8 per table slot (two per block).
 */
#include <stdio.h>

#include "device/cmp.h"
#include "engine/engine.h"


/* One page in DD_SAMPLE is sampled; a window is DD_WINDOW sampled blocks. */
#define DD_SAMPLE 16
#define DD_WINDOW 256
/* The adaptive switch (hysteresis): off below DD_OFF_FACTOR or above
 * DD_OFF_UPD, on again above DD_ON_FACTOR and below DD_ON_UPD. DEDU's
 * crossover is 32-64 % updates; ours is to be measured (docs/DEDUP.md). */
#define DD_ON_FACTOR 1.15
#define DD_OFF_FACTOR 1.05
#define DD_ON_UPD 0.35
#define DD_OFF_UPD 0.50
/* The fingerprint job's SM cap: a tenth of an H100's (issue 14's goal). */
#define DD_MAX_SMS 13

static bool sampled(uint64_t pno)
{
	return (vc_mix64(vc_pno_index(pno) ^ 0x6a09e667f3bcc908ull) & (DD_SAMPLE - 1)) == 0;
}

/* --- the fingerprint table: linear probing, backward-shift deletion --- */

static uint32_t tab_home(const struct eng_dedup *d, const struct vc_fp_digest *fp)
{
	uint64_t h;
	memcpy(&h, fp->b, sizeof h);
	return (uint32_t)(vc_mix64(h) & d->tab_mask);
}

static uint32_t tab_find(const struct eng_dedup *d, const struct vc_fp_digest *fp)
{
	for (uint32_t i = tab_home(d, fp);; i = (i + 1) & d->tab_mask) {
		uint32_t b = d->tab[i];
		if (b == DD_NIL || memcmp(&d->blk[b].fp, fp, sizeof *fp) == 0)
			return b;
	}
}

static void tab_insert(struct eng_dedup *d, uint32_t b)
{
	uint32_t i = tab_home(d, &d->blk[b].fp);
	while (d->tab[i] != DD_NIL)
		i = (i + 1) & d->tab_mask;
	d->tab[i] = b;
	d->blk[b].indexed = true;
}

static void tab_remove(struct eng_dedup *d, uint32_t b)
{
	uint32_t i = tab_home(d, &d->blk[b].fp);
	while (d->tab[i] != b)
		i = (i + 1) & d->tab_mask;
	for (uint32_t j = i;;) {
		j = (j + 1) & d->tab_mask;
		if (d->tab[j] == DD_NIL)
			break;
		uint32_t k = tab_home(d, &d->blk[d->tab[j]].fp);
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

static void use_link(struct eng_dedup *d, uint64_t u, uint32_t b)
{
	struct eng_blk *k = &d->blk[b];
	d->res[u] = b;
	d->prev[u] = DD_NIL;
	d->next[u] = k->head;
	if (k->head != DD_NIL)
		d->prev[k->head] = (uint32_t)u;
	k->head = (uint32_t)u;
	k->refs++;
}

/* Unlinks use u; a block left with no use dies: out of the table, its
 * slot orphaned (if it has one: `slotted`), its id free. */
static void use_unlink(struct vc_cache *c, uint64_t u, bool slotted)
{
	struct eng_dedup *d = &c->dd;
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
	if (k->indexed)
		tab_remove(d, b);
	if (k->pins > 0)
		return; /* a merge compares against it: its last unpin frees it */
	if (slotted)
		vc_ls_orphan(c->gpu.ls, vc_ls_where(c->gpu.ls, b));
	d->free_ids[d->nfree++] = b;
}

int eng_gpu_append(struct vc_cache *c, uint32_t n, struct vc_page *const *pages)
{
	eng_assert_locked(c);
	struct eng_dedup *d = &c->dd;
	const uint32_t m = n * eng_mpp(c);
	if (eng_dd(c) && (d->nfree < m || d->pages + n > d->page_cap))
		return -ENOSPC;
	uint32_t *key = malloc((m ? m : 1) * 2 * sizeof *key);
	if (!key)
		return vc_err(-ENOMEM, "out of memory");
	uint32_t *g = key + m;
	for (uint32_t i = 0; i < n; i++) {
		if (!eng_dd(c)) {
			key[i] = page_id(c, pages[i]);
			continue;
		}
		for (uint32_t j = 0; j < d->D; j++) {
			uint32_t b = d->free_ids[--d->nfree];
			d->blk[b] = (struct eng_blk){ .tweak = ++d->tweak_next, .head = DD_NIL };
			use_link(d, (uint64_t)page_id(c, pages[i]) * d->D + j, b);
			key[i * d->D + j] = b;
		}
	}
	int r = vc_ls_append(c->gpu.ls, m, key, ++c->gpu.clock, g);
	if (r < 0 && eng_dd(c)) {
		for (uint32_t i = 0; i < n; i++)
			for (uint32_t j = 0; j < d->D; j++)
				use_unlink(c, (uint64_t)page_id(c, pages[i]) * d->D + j, false);
	} else if (eng_dd(c)) {
		d->pages += n;
	}
	free(key);
	return r < 0 ? -ENOSPC : 0;
}

void eng_gpu_release(struct vc_cache *c, struct vc_page *p)
{
	eng_assert_locked(c);
	if (!eng_dd(c)) {
		vc_ls_orphan(c->gpu.ls, gpu_slot(c, p));
		return;
	}
	for (uint32_t j = 0; j < c->dd.D; j++)
		use_unlink(c, (uint64_t)page_id(c, p) * c->dd.D + j, true);
	c->dd.pages--;
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
		uint64_t g = vc_ls_addr(c->gpu.ls, vc_ls_where(c->gpu.ls, b));
		uint64_t h = host + (uint64_t)j * d->bsize;
		mv[j] = up ? eng_mv_up(c, g, h, p->pno) : eng_mv_down(c, h, g, p->pno);
		mv[j].tweak = d->blk[b].tweak; /* the stored block's, not the page's */
		if (!up && d->fp_move)
			mv[j].op |= VC_MOVE_FP;
	}
	return d->D;
}

/* --- the merge --- */

/* A merge's device-visible scratch for up to scr_blocks blocks (one
 * host_alloc): addresses (8 B a block), digests (16), pairs (16), results
 * (1), then with encryption the plaintext bounce (a block each). */
struct dd_scratch {
	struct dd_scratch *next; /* on d->scr_free */
	void *mem;
	uint64_t dev;
};

struct scratch {
	uint64_t *addr, addr_dev;
	struct vc_fp_digest *fp;
	uint64_t fp_dev;
	uint64_t *pair, pair_dev;
	uint8_t *eq;
	uint64_t eq_dev;
	unsigned char *buf;
	uint64_t buf_dev;
};

static uint64_t scratch_len(const struct vc_cache *c)
{
	const uint64_t m = c->dd.scr_blocks;
	return m * 41 + 64 + (c->gpu.cipher ? m * c->dd.bsize : 0);
}

static struct scratch scratch_of(const struct eng_dedup *d, const struct dd_scratch *sc)
{
	const uint64_t m = d->scr_blocks;
	unsigned char *h = sc->mem;
	uint64_t o_fp = m * 8, o_pair = o_fp + m * 16, o_eq = o_pair + m * 16;
	uint64_t o_buf = (o_eq + m + 63) / 64 * 64;
	return (struct scratch){ .addr = (uint64_t *)h, .addr_dev = sc->dev,
				 .fp = (struct vc_fp_digest *)(h + o_fp), .fp_dev = sc->dev + o_fp,
				 .pair = (uint64_t *)(h + o_pair), .pair_dev = sc->dev + o_pair,
				 .eq = h + o_eq, .eq_dev = sc->dev + o_eq,
				 .buf = h + o_buf, .buf_dev = sc->dev + o_buf };
}

/* Unlocked: a new scratch (a merge found the free list empty: as many
 * exist as merges ever ran at once). NULL on failure. */
static struct dd_scratch *scratch_new(struct vc_cache *c)
{
	struct dd_scratch *sc = calloc(1, sizeof *sc);
	if (sc && c->gpu.dev->ops->host_alloc(c->gpu.dev, scratch_len(c), &sc->mem, &sc->dev) < 0) {
		free(sc);
		sc = NULL;
	}
	return sc;
}

static uint64_t blk_addr(const struct vc_cache *c, uint32_t b)
{
	return vc_ls_addr(c->gpu.ls, vc_ls_where(c->gpu.ls, b));
}

/* Under c->mu: a merge is done comparing against block b. The last unpin
 * of a block that lost its last use meanwhile frees it (use_unlink left
 * that to us). */
static void blk_unpin(struct vc_cache *c, uint32_t b)
{
	struct eng_dedup *d = &c->dd;
	if (--d->blk[b].pins > 0 || d->blk[b].refs > 0)
		return;
	vc_ls_orphan(c->gpu.ls, vc_ls_where(c->gpu.ls, b));
	d->free_ids[d->nfree++] = b;
}

/* Every DD_WINDOW sampled blocks: the volume's estimates, and (adaptive)
 * its switch, with hysteresis; then the window's counts halve, so the
 * estimate follows change with a half-life of a window. */
static void dd_decide(struct vc_cache *c, struct vc_volume *v)
{
	if (v->dd_in < DD_WINDOW)
		return;
	uint64_t rd = atomic_load_explicit(&v->dd_reads, memory_order_relaxed);
	uint64_t wr = atomic_load_explicit(&v->dd_writes, memory_order_relaxed);
	v->dd_est_factor = v->dd_in > v->dd_dup ? (double)v->dd_in / (double)(v->dd_in - v->dd_dup)
						: (double)v->dd_in;
	v->dd_est_upd = rd + wr ? (double)wr / (double)(rd + wr) : 0;
	if (c->dd.mode == VC_DEDUP_ADAPTIVE) {
		bool on = v->dd_on;
		if (on && (v->dd_est_factor < DD_OFF_FACTOR || v->dd_est_upd > DD_OFF_UPD))
			on = false;
		else if (!on && v->dd_est_factor > DD_ON_FACTOR && v->dd_est_upd < DD_ON_UPD)
			on = true;
		if (on != v->dd_on) {
			v->dd_on = on;
			c->dd.switches++;
		}
	}
	v->dd_in /= 2;
	v->dd_dup /= 2;
	atomic_fetch_sub_explicit(&v->dd_reads, rd / 2, memory_order_relaxed);
	atomic_fetch_sub_explicit(&v->dd_writes, wr / 2, memory_order_relaxed);
}

/* What one merge works on: the m blocks chosen, block k being block j =
 * sel[k] % D of page sel[k] / D (and move sel[k] of the caller's). */
struct merge {
	uint32_t m, np;
	uint32_t *sel;
	struct vc_fp_digest *fp; /* [m] */
	uint32_t *pk, *cand;     /* pair q: block pk[q] against stored block cand[q] */
	bool *hit;               /* [m]: shared */
	struct scratch s;
};

/* Unlocked: the fingerprints of the m blocks, into g->fp. From the moves
 * (VC_MOVE_FP; one whose digest can no longer be read is hashed here from
 * the plaintext), from the plaintext (encryption: no plaintext rests in
 * GPU memory, and the cipher kernels do not fingerprint), or by a device
 * job over the blocks' slots (MurmurHash3, MD5). 0 or the device's error. */
static int fingerprint(struct vc_cache *c, struct merge *g, const unsigned char *const *plain,
		       const struct vc_move *mv, const struct vc_ticket *tk)
{
	const struct eng_dedup *d = &c->dd;
	bool *ok = NULL;
	if (d->fp_move) {
		struct vc_ticket *t = malloc((size_t)g->m * sizeof *t);
		ok = malloc(g->m);
		if (t && ok) {
			for (uint32_t k = 0; k < g->m; k++)
				t[k] = tk[g->sel[k]];
			vc_batcher_fp_n(c->gpu.bat, t, g->m, g->fp, ok);
		} else {
			free(ok);
			ok = NULL; /* every block hashed here */
		}
		free(t);
	}
	if (d->fp_move || c->gpu.cipher) {
		for (uint32_t k = 0; k < g->m; k++)
			if (!ok || !ok[k])
				vc_fp_block(d->algo, plain[g->sel[k] / d->D] + (g->sel[k] % d->D) * d->bsize,
					    d->bsize, &g->fp[k]);
		free(ok);
		return 0;
	}
	for (uint32_t k = 0; k < g->m; k++)
		g->s.addr[k] = mv[g->sel[k]].dst; /* the fresh block's slot: ours (BUSY pages) */
	struct vc_fp_job job = { .blocks_dev = g->s.addr_dev, .out_dev = g->s.fp_dev, .n = g->m,
				 .block_size = d->bsize, .algo = d->algo, .max_sms = d->max_sms };
	int r = vc_fp_run(c->gpu.dev, &job);
	if (r == 0)
		memcpy(g->fp, g->s.fp, (size_t)g->m * sizeof *g->fp);
	return r;
}

/* Unlocked: compares the np pairs (g->s.pair, set under c->mu, the stored
 * blocks pinned): g->s.eq[q]. One device job for the batch; with
 * encryption the stored blocks come up decrypted into the bounce (one
 * batch of moves) and are compared with the pages' plaintext on the host.
 * 0 or the device's error (then nothing is shared). */
static int compare(struct vc_cache *c, struct merge *g, const unsigned char *const *plain)
{
	const struct eng_dedup *d = &c->dd;
	const struct scratch *s = &g->s;
	if (!c->gpu.cipher) {
		struct vc_cmp_job job = { .pairs_dev = s->pair_dev, .out_dev = s->eq_dev, .n = g->np,
					  .len = d->bsize };
		return vc_cmp_run(c->gpu.dev, &job);
	}
	struct vc_move *mv = malloc((size_t)g->np * sizeof *mv);
	struct vc_ticket *tk = malloc((size_t)g->np * sizeof *tk);
	int r = mv && tk ? 0 : vc_err(-ENOMEM, "out of memory");
	for (uint32_t q = 0; r == 0 && q < g->np; q++) /* pair[2q + 1]: the stored block's slot */
		mv[q] = (struct vc_move){ .src = s->pair[2 * q + 1],
					  .dst = s->buf_dev + (uint64_t)q * d->bsize,
					  .op = VC_MOVE_COPY | VC_MOVE_DECRYPT,
					  .tweak = s->pair[2 * q] }; /* the stored block's tweak */
	if (r == 0)
		r = vc_batcher_add_n(c->gpu.bat, mv, g->np, tk);
	if (r == 0)
		r = vc_batcher_wait_n(c->gpu.bat, tk, g->np);
	for (uint32_t q = 0; r == 0 && q < g->np; q++) {
		const uint32_t b = g->sel[g->pk[q]];
		s->eq[q] = memcmp(plain[b / d->D] + (b % d->D) * d->bsize,
				  s->buf + (uint64_t)q * d->bsize, d->bsize) == 0;
	}
	free(mv);
	free(tk);
	return r;
}

/* Under c->mu: the table's verdict on the m fingerprinted blocks. A miss
 * enters the table (so a later block, of this batch or another, can
 * match it); a match becomes a pair to compare, its stored block pinned
 * and its slot's address (and, encrypted, its tweak) noted for the
 * unlocked compare. */
static void lookup(struct vc_cache *c, struct merge *g, struct vc_page *const *pages,
		   const struct vc_move *mv)
{
	struct eng_dedup *d = &c->dd;
	if (d->fp_same)
		memset(g->fp, 0, (size_t)g->m * sizeof *g->fp);
	g->np = 0;
	for (uint32_t k = 0; k < g->m; k++) {
		const uint32_t i = g->sel[k] / d->D, j = g->sel[k] % d->D;
		const uint32_t b = d->res[(uint64_t)page_id(c, pages[i]) * d->D + j];
		d->blk[b].fp = g->fp[k];
		uint32_t o = tab_find(d, &g->fp[k]);
		if (o == DD_NIL) {
			tab_insert(d, b);
			continue;
		}
		d->blk[o].pins++;
		g->pk[g->np] = k;
		g->cand[g->np] = o;
		g->s.pair[2 * g->np] = c->gpu.cipher ? d->blk[o].tweak : mv[g->sel[k]].dst;
		g->s.pair[2 * g->np + 1] = blk_addr(c, o); /* stays: pinned */
		g->np++;
	}
}

/* Under c->mu: shares what compared equal, if the stored block still
 * lives (it may have lost its last use while we compared: then the fresh
 * block stays, unique), unpins, and counts. */
static void link_equal(struct vc_cache *c, struct merge *g, struct vc_page *const *pages, int r)
{
	struct eng_dedup *d = &c->dd;
	for (uint32_t q = 0; q < g->np; q++) {
		const uint32_t k = g->pk[q], o = g->cand[q];
		const uint64_t u = (uint64_t)page_id(c, pages[g->sel[k] / d->D]) * d->D + g->sel[k] % d->D;
		if (r == 0 && !g->s.eq[q]) {
			d->collisions++;
		} else if (r == 0 && d->blk[o].refs > 0) {
			use_unlink(c, u, true); /* the fresh block dies: its slot is for cleaning */
			use_link(d, u, o);
			d->hits++;
			g->hit[k] = true;
		}
		blk_unpin(c, o);
	}
	d->blocks_in += g->m;
	/* The sample's counts, per volume (pages of several may mix). */
	for (uint32_t k = 0; k < g->m; k++) {
		struct vc_page *p = pages[g->sel[k] / d->D];
		if (!sampled(p->pno))
			continue;
		struct vc_volume *v = vol_of(c, p->pno);
		v->dd_in++;
		v->dd_dup += g->hit[k];
		if (g->sel[k] % d->D == d->D - 1)
			dd_decide(c, v);
	}
}

/* The merge in three short holds of c->mu, the device work between them
 * unlocked:
 *   lock    which pages (mode, volume switch, sample), a scratch
 *   unlocked  fingerprints (fingerprint())
 *   lock    table lookups and inserts, stored blocks pinned (lookup())
 *   unlocked  one compare job for the batch's matches (compare())
 *   lock    links, unpins, counts (link_equal())
 * What the unlocked phases read cannot change under them: the batch's
 * pages are BUSY (nobody else moves, drops, cleans or evicts their fresh
 * blocks, whose slots are the moves' destinations), and a pinned stored
 * block is not moved, evicted or freed. What can change is whether the
 * stored block still has a use; link_equal checks it. */
void eng_dd_merge(struct vc_cache *c, uint32_t n, struct vc_page *const *pages,
		  const unsigned char *const *plain, const struct vc_move *mv,
		  const struct vc_ticket *tk)
{
	struct eng_dedup *d = &c->dd;
	if (!eng_dd(c) || n == 0)
		return;
	const uint32_t cap = n * d->D < d->scr_blocks ? n * d->D : d->scr_blocks;
	struct merge g = { .sel = malloc((size_t)cap * 3 * sizeof *g.sel),
			   .fp = malloc((size_t)cap * sizeof *g.fp),
			   .hit = calloc(cap, sizeof *g.hit) };
	if (!g.sel || !g.fp || !g.hit)
		goto out; /* the blocks stay unique: correct, unshared */
	g.pk = g.sel + cap;
	g.cand = g.pk + cap;
	eng_lock(c);
	for (uint32_t i = 0; i < n && g.m + d->D <= cap; i++) {
		struct vc_volume *v = vol_of(c, pages[i]->pno);
		if (d->mode != VC_DEDUP_ON && !v->dd_on && !sampled(pages[i]->pno))
			continue;
		for (uint32_t j = 0; j < d->D; j++)
			g.sel[g.m++] = i * d->D + j;
	}
	struct dd_scratch *sc = d->scr_free;
	if (sc)
		d->scr_free = sc->next;
	eng_unlock(c);
	if (g.m == 0 || (!sc && !(sc = scratch_new(c))))
		goto out_scratch;
	g.s = scratch_of(d, sc);
	if (fingerprint(c, &g, plain, mv, tk) < 0)
		goto out_scratch;
	eng_lock(c);
	lookup(c, &g, pages, mv);
	eng_unlock(c);
	int r = g.np ? compare(c, &g, plain) : 0;
	eng_lock(c);
	link_equal(c, &g, pages, r);
	if (g.np)
		eng_wake(c); /* claims that met a pin wait for it */
	sc->next = d->scr_free;
	d->scr_free = sc;
	sc = NULL;
	eng_unlock(c);
out_scratch:
	if (sc) {
		eng_lock(c);
		sc->next = d->scr_free;
		d->scr_free = sc;
		eng_unlock(c);
	}
out:
	free(g.sel);
	free(g.fp);
	free(g.hit);
}

void eng_dd_note(struct vc_volume *v, uint64_t pno, uint64_t pages, bool write)
{
	if (!eng_dd(v->c))
		return;
	uint64_t k = 0;
	for (uint64_t i = 0; i < pages; i++)
		k += sampled(pno + i);
	if (k)
		atomic_fetch_add_explicit(write ? &v->dd_writes : &v->dd_reads, k,
					  memory_order_relaxed);
}

bool eng_dd_claim(struct vc_cache *c, uint32_t n, const uint32_t *segs, struct vc_page ***held,
		  uint32_t *nheld)
{
	eng_assert_locked(c);
	struct eng_dedup *d = &c->dd;
	const uint32_t per = vc_ls_slots_per_seg(c->gpu.ls);
	uint32_t nh = 0, cap = per;
	struct vc_page **h = malloc(cap * sizeof *h);
	bool ok = h != NULL;
	if (++d->mark_gen == 0) { /* wrapped: no mark may look current */
		memset(d->mark, 0, c->ix.npool * sizeof *d->mark);
		d->mark_gen = 1;
	}
	for (uint32_t i = 0; ok && i < n; i++)
		for (uint32_t s = 0; ok && s < per; s++) {
			uint32_t b = vc_ls_key(c->gpu.ls, segs[i] * per + s);
			if (b == VC_LS_DEAD)
				continue;
			if (d->blk[b].pins) { /* a merge reads it unlocked: no moving it now */
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

/* --- open and close --- */

int eng_dd_open(struct vc_cache *c, const struct vc_config *cfg, uint64_t host_pages)
{
	struct eng_dedup *d = &c->dd;
	d->mode = cfg->dedup;
	if (!eng_dd(c))
		return 0;
	d->D = cfg->dedup_degree ? cfg->dedup_degree : 4;
	d->bsize = c->page_size / d->D;
	static const uint32_t algo[] = { [VC_DEDUP_LANES] = VC_FP_LANES, [VC_DEDUP_MD5] = VC_FP_MD5,
					 [VC_DEDUP_MURMUR3] = VC_FP_MURMUR3 };
	d->algo = algo[cfg->dedup_algo];
	/* The cipher kernels do not fingerprint: encrypted, the lanes hash
	 * is taken on the host from the plaintext (fingerprint()). */
	d->fp_move = d->algo == VC_FP_LANES && !c->gpu.cipher;
	d->max_sms = DD_MAX_SMS;
	d->nblocks = (uint32_t)vc_ls_capacity_max(c->gpu.ls);
	d->page_cap = d->nblocks;
	const uint64_t npool = host_pages + d->page_cap, nuse = npool * d->D;
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
	if (!d->blk || !d->free_ids || !d->res || !d->next || !d->prev || !d->tab || !d->mark)
		return vc_err(-ENOMEM, "out of memory for the dedup tables (%u blocks)", d->nblocks);
	memset(d->res, 0xff, nuse * sizeof *d->res);
	memset(d->tab, 0xff, tab * sizeof *d->tab);
	for (uint32_t b = 0; b < d->nblocks; b++)
		d->free_ids[b] = d->nblocks - 1 - b; /* 0 on top */
	d->nfree = d->nblocks;
	/* A merge's scratch: a demotion batch or a prefetch round of blocks.
	 * One now, more as merges run at once (scratch_new). */
	uint32_t pages = cfg->batch_pages > 256 ? cfg->batch_pages : 256;
	d->scr_blocks = pages * d->D;
	if (!(d->scr_free = scratch_new(c)))
		return vc_err(-ENOMEM, "out of pinned memory for the dedup scratch");
	return 0;
}

void eng_dd_close(struct vc_cache *c)
{
	struct eng_dedup *d = &c->dd;
	while (d->scr_free) {
		struct dd_scratch *sc = d->scr_free;
		d->scr_free = sc->next;
		c->gpu.dev->ops->host_free(c->gpu.dev, sc->mem);
		free(sc);
	}
	free(d->blk);
	free(d->free_ids);
	free(d->res);
	free(d->next);
	free(d->prev);
	free(d->tab);
	free(d->mark);
	memset(d, 0, sizeof *d);
}
