/* Block deduplication, the pairs (docs/DEDUP.md): what every trip down
 * does once a block's fingerprint is known (dedup_down.c's trips): the
 * lookups that pair it with a stored block or with an earlier block of
 * its trip, the fresh blocks and slots of the leaders, the compare of
 * each pair's bytes (a fingerprint match is a hint, never proof: only
 * equal bytes share), and the settle that shares, indexes and unpins.
 * Each function says which locks it runs under; the lock rules and the
 * block store's invariants are dedup.c's (its head comment).
 */
#include <string.h>

#include "device/cmp.h"
#include "engine/dedup.h"
#include "engine/dedup_trip.h"
#include "engine/engine.h"

/* Under dd.mu (alone or inside c->mu): dd_blk_unpin, but a last unpin that
 * would free the block (its slot's orphaning needs c->mu) keeps the pin
 * for late_unpins(), so nothing claims or frees the block before. */
static void blk_unpin_soft(struct eng_dedup *d, struct down *g, uint32_t b)
{
	if (d->blk[b].pins == 1 && !dd_blk_live(&d->blk[b]))
		g->late[g->nlate++] = b;
	else
		d->blk[b].pins--;
}

/* Under c->mu and dd.mu: the unpins blk_unpin_soft() left. */
static void late_unpins(struct vc_cache *c, struct down *g)
{
	for (uint32_t t = 0; t < g->nlate; t++)
		dd_blk_unpin(c, g->late[t]);
	g->nlate = 0;
}

void dd_give_back(struct vc_cache *c, struct down *g)
{
	c->dd.resv -= g->placed;
	g->placed = 0;
}

/* Under c->mu and dd.mu: staged blocks k = g->uk[0..nu) get fresh blocks (their
 * uses placed; encrypted and staged, the block takes its staging tweak)
 * and slots, appended together from the reservation, and the moves that
 * place them into g->mv[0..nu): a device copy from staging (encrypted or
 * not), or with encryption and no staging the encrypting move from the
 * plaintext. 0, or -VC_EI_NOROOM with every use given back its reserved slot
 * (the reservation makes that impossible). O(nu). */
static int fresh(struct vc_cache *c, struct down *g, struct vc_page *const *pages,
		 const uint64_t *src)
{
	struct eng_dedup *d = &c->dd;
	for (uint32_t t = 0; t < g->nu; t++) {
		const uint32_t k = g->uk[t], b = dd_blk_new(d);
		d->blk[b].fp = g->fp[k];
		if (c->gt.cipher && dd_stage_moves(c) && !g->nknown)
			d->blk[b].tweak = g->tw[k]; /* its staged ciphertext's */
		dd_use_place(d, dd_use_of(c, g, pages, k), b);
		g->blk[k] = g->key[t] = b;
	}
	int r = g->nu ? vc_ls_append(c->gpus[0].ls, g->nu, g->key, ++c->gpus[0].clock, g->slot) : 0;
	for (uint32_t t = 0; r < 0 && t < g->nu; t++)
		dd_use_unplace(c, dd_use_of(c, g, pages, g->uk[t]));
	if (r < 0)
		return vc_err(-VC_EI_NOROOM, "dedup: no room for %u reserved blocks", g->nu);
	for (uint32_t t = 0; t < g->nu; t++) {
		const uint32_t k = g->uk[t], i = g->sel[k] / d->D, j = g->sel[k] % d->D;
		const uint64_t dst = vc_ls_addr(c->gpus[0].ls, g->slot[t]);
		if (!dd_stage_moves(c) || g->nknown) { /* from the plaintext (the known trip stages nothing) */
			g->mv[t] = eng_mv_down(c, src[i] + (uint64_t)j * d->bsize, dst, pages[i]->pno);
			g->mv[t].tweak = d->blk[g->key[t]].tweak; /* the stored block's */
		} else {
			g->mv[t] = (struct vc_move){ .src = g->s.stage + (uint64_t)k * d->bsize,
						     .dst = dst, .op = VC_MOVE_COPY };
		}
	}
	return 0;
}

void dd_lookup_prefetch(const struct vc_cache *c, const struct vc_fp_digest *fp, uint32_t m)
{
	const struct eng_dedup *d = &c->dd;
	for (uint32_t k = 0; k < m; k++)
		__builtin_prefetch(&d->tab[dd_tab_home(d, &fp[k])]);
	for (uint32_t k = 0; k < m; k++) {
		const uint32_t o = d->tab[dd_tab_home(d, &fp[k])];
		if (o == DD_NIL)
			continue;
		__builtin_prefetch(&d->blk[o]);
		vc_ls_where_prefetch(c->gpus[0].ls, o);
	}
}

uint32_t dd_trip_leader(const struct eng_dedup *d, struct down *g, uint32_t k)
{
	uint32_t h = dd_tab_home(d, &g->fp[k]) & g->lmask;
	while (g->ltab[h] && memcmp(&g->fp[g->ltab[h] - 1], &g->fp[k], sizeof g->fp[k]))
		h = (h + 1) & g->lmask;
	if (g->ltab[h])
		return g->ltab[h] - 1;
	g->ltab[h] = k + 1;
	g->lead[k] = true;
	return DD_NIL;
}

void dd_trip_leaders_clear(const struct eng_dedup *d, struct down *g, bool uk)
{
	if (uk)
		g->nu = 0;
	for (uint32_t k = 0; k < g->m; k++) {
		if (!g->lead[k])
			continue;
		uint32_t h = dd_tab_home(d, &g->fp[k]) & g->lmask;
		while (g->ltab[h] != k + 1)
			h = (h + 1) & g->lmask;
		g->ltab[h] = 0;
		if (uk)
			g->uk[g->nu++] = k;
	}
}

int dd_lookup(struct vc_cache *c, struct down *g, struct vc_page *const *pages,
	      const uint64_t *src)
{
	struct eng_dedup *d = &c->dd;
	if (d->fp_same)
		memset(g->fp, 0, (size_t)g->m * sizeof *g->fp);
	dd_lookup_prefetch(c, g->fp, g->m);
	g->np = 0;
	for (uint32_t k = 0; k < g->m; k++) {
		uint32_t o = dd_tab_find(d, &g->fp[k]);
		if (g->dir[k]) {
			d->blk[g->blk[k]].fp = g->fp[k];
			d->blk[g->blk[k]].later = false; /* looked up here after all */
		}
		if (o != DD_NIL) {
			d->blk[o].pins++;
			g->local[g->np] = false;
			g->s.pair[2 * g->np] = c->gt.cipher ? d->blk[o].tweak
					     : g->dir[k]     ? dd_blk_addr(c, g->blk[k]) /* ours: BUSY */
							     : g->s.stage + (uint64_t)k * d->bsize;
			g->s.pair[2 * g->np + 1] = dd_blk_addr(c, o); /* stays: pinned */
		} else if (g->dir[k]) {
			dd_tab_insert(d, g->blk[k]);
			continue;
		} else {
			if ((o = dd_trip_leader(d, g, k)) == DD_NIL)
				continue;
			g->local[g->np] = true;
			g->s.pair[2 * g->np] = g->s.stage + (uint64_t)k * d->bsize;
			g->s.pair[2 * g->np + 1] = g->s.stage + (uint64_t)o * d->bsize;
		}
		g->pk[g->np] = k;
		g->cand[g->np++] = o;
	}
	/* The leaders are unique whatever the compare says: their fresh
	 * blocks and slots now, so that their placement runs beside the
	 * compare. */
	dd_trip_leaders_clear(d, g, true);
	return fresh(c, g, pages, src);
}

int dd_compare_dev(struct vc_cache *c, struct down *g, const unsigned char *const *plain,
		   const uint64_t *src)
{
	const struct eng_dedup *d = &c->dd;
	const struct scratch *s = &g->s;
	uint32_t nx = 0;
	for (uint32_t q = 0; q < g->np; q++) {
		const uint32_t k = g->pk[q];
		if (g->local[q]) {
			s->eq[q] = memcmp(dd_plain_of(d, g, plain, k), dd_plain_of(d, g, plain, g->cand[q]),
					  d->bsize) == 0;
			continue;
		}
		const uint32_t i = g->sel[k] / d->D, j = g->sel[k] % d->D;
		s->xpair[2 * nx] = src[i] + (uint64_t)j * d->bsize;
		s->xpair[2 * nx + 1] = s->pair[2 * q + 1]; /* the slot (pinned) */
		s->xtw[nx] = s->pair[2 * q];               /* the stored block's tweak */
		g->xq[nx++] = q;
	}
	const struct vc_cmp_job job = { .pairs_dev = s->xpair_dev, .out_dev = s->xeq_dev, .n = nx,
					.len = d->bsize, .key = c->gt.xkey, .tweaks_dev = s->xtw_dev };
	int r = nx ? vc_cmp_run(c->gpus[0].dev, &job) : 0;
	for (uint32_t t = 0; r == 0 && t < nx; t++)
		s->eq[g->xq[t]] = s->xeq[t];
	return r;
}

int dd_compare(struct vc_cache *c, struct down *g, const unsigned char *const *plain,
	       const uint64_t *src, uint32_t busy)
{
	const struct eng_dedup *d = &c->dd;
	const struct scratch *s = &g->s;
	struct vc_move *mv = g->mv + busy; /* the first `busy` moves are in flight */
	struct vc_ticket *tk = g->tk + busy;
	if (!c->gt.cipher) {
		struct vc_cmp_job job = { .pairs_dev = s->pair_dev, .out_dev = s->eq_dev, .n = g->np,
					  .len = d->bsize };
		return vc_cmp_run(c->gpus[0].dev, &job);
	}
	if (d->dev_cmp)
		return dd_compare_dev(c, g, plain, src);
	uint32_t nm = 0;
	for (uint32_t q = 0; q < g->np; q++) /* pair[2q]: the stored block's tweak, [2q + 1] slot */
		if (!g->local[q])
			mv[nm++] = (struct vc_move){ .src = s->pair[2 * q + 1],
							.dst = s->buf_dev + (uint64_t)q * d->bsize,
							.op = VC_MOVE_COPY | VC_MOVE_DECRYPT,
							.tweak = s->pair[2 * q] };
	int r = nm ? vc_batcher_add_n(c->gpus[0].bat, mv, nm, tk) : 0;
	if (r == 0 && nm)
		r = vc_batcher_wait_n(c->gpus[0].bat, tk, nm);
	for (uint32_t q = 0; r == 0 && q < g->np; q++) {
		const unsigned char *o = g->local[q] ? dd_plain_of(d, g, plain, g->cand[q])
						     : s->buf + (uint64_t)q * d->bsize;
		s->eq[q] = memcmp(dd_plain_of(d, g, plain, g->pk[q]), o, d->bsize) == 0;
	}
	return r;
}

int dd_settle(struct vc_cache *c, struct down *g, struct vc_page *const *pages, int rc)
{
	struct eng_dedup *d = &c->dd;
	g->nu = 0;
	for (uint32_t q = 0; q < g->np; q++) {
		const uint32_t k = g->pk[q], o = g->cand[q];
		const bool eq = rc == 0 && g->s.eq[q];
		d->collisions += rc == 0 && !eq;
		g->hit[k] = eq && (g->local[q] || dd_blk_live(&d->blk[o]));
		if (g->hit[k]) {
			const uint64_t u = dd_use_of(c, g, pages, k);
			const uint32_t b = g->local[q] ? g->blk[o] : o;
			if (g->dir[k]) {
				dd_use_unlink(c, u, true);
				dd_use_link(d, u, b);
				d->merged_late++;
			} else {
				dd_use_link(d, u, b);
				g->placed++;
				g->blk[k] = b;
			}
			d->hits++;
		}
		if (!g->local[q])
			blk_unpin_soft(d, g, o);
	}
	if (rc < 0)
		return rc;
	for (uint32_t k = 0; k < g->m; k++)
		if (g->lead[k] && dd_tab_find(d, &g->fp[k]) == DD_NIL)
			dd_tab_insert(d, g->blk[k]);
	for (uint32_t q = 0; q < g->np; q++)
		if (!g->hit[g->pk[q]] && !g->dir[g->pk[q]])
			g->uk[g->nu++] = g->pk[q];
	return 0;
}

int dd_settle_end(struct vc_cache *c, struct down *g, struct vc_page *const *pages,
		  const uint64_t *src, int r, uint32_t *nmv)
{
	dd_give_back(c, g);
	late_unpins(c, g);
	*nmv = 0;
	if (r < 0 || g->nu == 0)
		return r;
	r = fresh(c, g, pages, src);
	*nmv = r == 0 ? g->nu : 0;
	return r;
}
