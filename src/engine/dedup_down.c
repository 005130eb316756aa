/* Block deduplication, the trip down (docs/DEDUP.md): eng_dd_down's
 * trips (staged, direct, known, and pages back by reference) and each
 * volume's choice of trip by its share rate: which pages take which trip,
 * and each trip's phases and holds. The lookups, compares and settle that
 * every trip shares are dedup_pair.c's; the trip's state and scratch
 * are dedup_trip.h's and dedup_scratch.c's, the on/off switch of adaptive
 * mode dedup_est.c's, the phase profile dedup_prof.c's. The block table,
 * its invariants and lock rules are dedup.c's (its head comment) and
 * engine.h's (struct eng_dedup); each function here says which locks it
 * runs under.
 */
#include <stdio.h>

#include "base/clock.h"
#include "device/cmp.h"
#include "engine/debug.h"
#include "engine/dedup.h"
#include "engine/dedup_trip.h"
#include "engine/engine.h"

/* Which trip a page going down takes (eng_dd_down). PG_BACK: back to
 * the stored blocks it came up from (begin(): no move). PG_KNOWN: its
 * fingerprint noted on the host (the known trip: known_begin()). */
enum { PG_PLAIN, PG_DIRECT, PG_STAGED, PG_BACK, PG_KNOWN };

/* Whether a page of class cls gets fresh blocks and moves straight to
 * them in begin(). */
static bool straight(uint8_t cls)
{
	return cls == PG_PLAIN || cls == PG_DIRECT;
}

/* The direct trip's switch (per volume, hysteresis): a volume whose
 * recent blocks shared less than 1 in DD_DIRECT_AT goes direct, one whose
 * blocks shared more than 1 in DD_STAGE_AT goes back to staging. Recent:
 * the blocks looked up since the count last restarted, decided on at the
 * end of every trip once DD_RATE_MIN are counted, restarted every
 * DD_RATE_WINDOW; so a volume turns after at most a window and a trip
 * (1024 + 256 blocks at D = 1, two trips of 256 pages at D = 4).
 * Costs: the staged trip adds a device copy per unique block and two lock
 * holds a trip; the direct trip a dead slot per duplicate (its write, a
 * cleaning step's share of it later, and the slot's capacity until then).
 * At a share rate below 1/16 the dead slots cost under 1/15 of the copies
 * that staging would, and at most 1/16 of the blocks written is capacity
 * lost; above 1/8 staging keeps the capacity that Fig. 5(a) measures. A
 * volume starts staged: capacity first, until its rate is known. */
#define DD_RATE_MIN 256
#define DD_RATE_WINDOW 1024
#define DD_DIRECT_AT 16
#define DD_STAGE_AT 8

/* Under dd.mu: the trip's pages' blocks whose fingerprints are known
 * (page i's block j has pfp[i x D + j] where have[i]) to the estimate,
 * then each volume's decision if due. */
static void feed(struct vc_cache *c, const struct down *g, struct vc_page *const *pages)
{
	const uint32_t D = c->dd.D;
	for (uint32_t i = 0; i < g->n; i++)
		for (uint32_t j = 0; g->have[i] && j < D; j++)
			eng_est_feed(c, pages[i]->pno, j, &g->pfp[(size_t)i * D + j]);
	for (uint32_t i = 0; i < g->n; i++)
		if (g->have[i])
			dd_decide(c, vol_of(c, pages[i]->pno));
}

/* Under dd.mu: the trip's selected blocks count towards their volumes'
 * recent share rate, and each volume chooses the trip its next pages take
 * (DD_DIRECT_AT, DD_STAGE_AT, DD_RATE_MIN, DD_RATE_WINDOW). O(m). */
static void trip_rate(struct vc_cache *c, const struct down *g, struct vc_page *const *pages)
{
	const uint32_t D = c->dd.D;
	for (uint32_t k = 0; k < g->m; k++) {
		struct vc_volume *v = vol_of(c, pages[g->sel[k] / D]->pno);
		v->dd_look++;
		v->dd_match += g->hit[k];
	}
	for (uint32_t i = 0; i < g->n; i++) /* each volume of the trip, once or more */
		if (g->cls[i] != PG_PLAIN && g->cls[i] != PG_BACK)
			dd_vol_switch(vol_of(c, pages[i]->pno));
}

void dd_vol_switch(struct vc_volume *v)
{
	if (v->dd_look < DD_RATE_MIN)
		return;
	if (v->dd_direct && (uint64_t)v->dd_match * DD_STAGE_AT > v->dd_look)
		v->dd_direct = false;
	else if (!v->dd_direct && (uint64_t)v->dd_match * DD_DIRECT_AT < v->dd_look)
		v->dd_direct = true;
	if (v->dd_look >= DD_RATE_WINDOW)
		v->dd_look = v->dd_match = 0;
}

/* Unlocked, after the first moves: the fingerprints of the m selected
 * blocks, into g->fp, where the host did not hash them already
 * (encryption with MurmurHash3/MD5: hashed from the plaintext while the
 * moves ran, since no plaintext rests in GPU memory). From their moves (VC_MOVE_FP, g->tix; one whose digest can
 * no longer be read is hashed here from the plaintext; the unselected
 * pages' digests land in g->dfp too, for the estimate), or by a device
 * job over their blocks (direct: the slots; staged: the staging blocks;
 * MurmurHash3, MD5). 0 or the device's error. */
static int fingerprint(struct vc_cache *c, struct down *g, const unsigned char *const *plain,
		       uint32_t nmv)
{
	const struct eng_dedup *d = &c->dd;
	if (c->gt.cipher && !d->fp_move)
		return 0;
	if (d->fp_move) {
		if (nmv)
			vc_batcher_fp_n(c->gpus[0].bat, g->tk, nmv, g->dfp, g->ok);
		for (uint32_t k = 0; k < g->m; k++) {
			const uint32_t t = g->tix[k];
			if (g->ok[t])
				g->fp[k] = g->dfp[t];
			else
				vc_fp_block(d->algo, dd_plain_of(d, g, plain, k), d->bsize, &g->fp[k]);
		}
		return 0;
	}
	if (g->m == 0)
		return 0;
	struct vc_fp_job job = { .blocks_dev = g->s.addr_dev, .out_dev = g->s.fp_dev, .n = g->m,
				 .block_size = d->bsize, .algo = d->algo, .max_sms = d->max_sms };
	int r = vc_fp_run(c->gpus[0].dev, &job);
	if (r == 0)
		memcpy(g->fp, g->s.fp, (size_t)g->m * sizeof *g->fp);
	return r;
}

/* Unlocked: the fingerprints by page for the estimate (g->pfp, g->have):
 * the selected blocks', and the unselected pages' where their moves carry
 * VC_MOVE_FP (those not staged move first, D a page in page order). */
static void collect(const struct vc_cache *c, struct down *g)
{
	const struct eng_dedup *d = &c->dd;
	for (uint32_t k = 0; k < g->m; k++)
		g->pfp[g->sel[k]] = g->fp[k];
	for (uint32_t i = 0, t = 0; i < g->n; i++) {
		g->have[i] = g->cls[i] == PG_DIRECT || g->cls[i] == PG_STAGED;
		if (!straight(g->cls[i]))
			continue;
		if (g->cls[i] == PG_PLAIN && d->fp_move) {
			g->have[i] = true;
			for (uint32_t j = 0; j < d->D; j++)
				g->pfp[(size_t)i * d->D + j] = g->dfp[t + j];
			for (uint32_t j = 0; j < d->D; j++)
				g->have[i] = g->have[i] && g->ok[t + j];
		}
		t += d->D;
	}
}

/* Under c->mu and dd.mu: what host page p's note (BUSY, going down;
 * dd.note by its slot) offers its trip: PG_BACK, and its uses named the
 * blocks it came up from (refs + 1 each; their reserved slots counted in
 * g->placed); PG_KNOWN, and *fp its fingerprint; else PG_PLAIN
 * (nothing). The note must be p's (entry, number) and p unwritten since
 * (version: every write bumps it, under EXCL, which a BUSY page
 * excludes). Back, each block must be the same one (its serial: ids are
 * reused, serials never, a freed block's is 0) still stored and indexed
 * (dd_blk_live: its slot live and its bytes those p came up with, blocks
 * being immutable; a unique one kept for p by the note, dd_note.keep;
 * indexed: placed, and not being emptied by a shrink, gpusize.c). The
 * note goes either way, p leaving its host slot, and its keeps with it
 * (after p's links): a kept block p did not come back to dies, which
 * needs c->mu. The note and p's fields are p's owner's (BUSY). O(D).
 * PG_PLAIN here means only: no note. */
static int note_class(struct vc_cache *c, struct down *g, struct vc_page *p,
		      struct vc_fp_digest *fp)
{
	struct eng_dedup *d = &c->dd;
	if (!d->note || p->tier != HOST)
		return PG_PLAIN;
	struct dd_note *n = &d->note[p->slot];
	const uint32_t id = page_id(c, p);
	const bool mine = n->pno == p->pno && n->id == id && n->ver == p->version;
	n->pno = UINT64_MAX;
	bool ok = mine && n->back;
	for (uint32_t j = 0; ok && j < d->D; j++) {
		const uint64_t x = (uint64_t)p->slot * d->D + j;
		const struct eng_blk *k = &d->blk[d->back_blk[x]];
		ok = dd_blk_live(k) && k->indexed && k->tweak == d->back_tw[x];
	}
	for (uint32_t j = 0; ok && j < d->D; j++) {
		const uint32_t b = d->back_blk[(uint64_t)p->slot * d->D + j];
		d->kept_back += d->blk[b].refs == 0;
		dd_use_link(d, (uint64_t)id * d->D + j, b);
	}
	/* Here, where dd.mu is held and the blocks' lines are hot, rather
	 * than at the slot's free (eng_dd_back_clear), which would take
	 * dd.mu a page in the demotion's last hold of c->mu. */
	dd_note_unkeep(c, p->slot);
	if (ok) {
		g->placed += d->D;
		d->hits += d->D;
		d->back_in += d->D;
		return PG_BACK;
	}
	*fp = n->fp;
	return mine && n->hfp ? PG_KNOWN : PG_PLAIN;
}

/* The lines note_class() reads and writes are cold ones of megabyte
 * arrays (a host slot's note, a page's uses, a block's entry), each
 * page's dependent on the one before: asked for ahead in two rounds, the
 * notes and uses, then the blocks that notes name, so that a trip's misses
 * overlap in the caller's hold of c->mu (as dd_lookup_prefetch()'s). */
static void classify_prefetch(const struct vc_cache *c, const struct down *g,
			      struct vc_page *const *pages)
{
	const struct eng_dedup *d = &c->dd;
	for (uint32_t i = 0; d->note && i < g->n; i++) {
		if (pages[i]->tier != HOST)
			continue; /* a prefetch round's: no note */
		const uint64_t s = pages[i]->slot, u = (uint64_t)page_id(c, pages[i]) * d->D;
		__builtin_prefetch(&d->note[s], 1);
		if (!d->back_blk)
			continue;
		__builtin_prefetch(&d->back_blk[s * d->D]);
		__builtin_prefetch(&d->back_tw[s * d->D]);
		__builtin_prefetch(&d->res[u], 1);
		__builtin_prefetch(&d->next[u], 1);
		__builtin_prefetch(&d->prev[u], 1);
	}
	for (uint32_t i = 0; d->back_blk && i < g->n; i++) {
		if (pages[i]->tier != HOST)
			continue;
		const struct dd_note *n = &d->note[pages[i]->slot];
		if (n->pno != pages[i]->pno || !n->back)
			continue;
		for (uint32_t j = 0; j < d->D; j++)
			__builtin_prefetch(&d->blk[d->back_blk[(uint64_t)pages[i]->slot * d->D + j]], 1);
	}
}

/* Under c->mu and dd.mu: the trip's pages by class (g->cls; notes, mode,
 * volume switch, sample): g->pfp[i] a known page's fingerprint. Whether
 * it is the known trip: every selected page PG_KNOWN. The notes' lines
 * were asked for (classify_prefetch). */
static bool classify(struct vc_cache *c, struct down *g, struct vc_page *const *pages)
{
	const struct eng_dedup *d = &c->dd;
	uint32_t nother = 0;
	g->nknown = 0;
	for (uint32_t i = 0; i < g->n; i++) {
		const struct vc_volume *v = vol_of(c, pages[i]->pno);
		const int nc = note_class(c, g, pages[i], &g->pfp[i]);
		g->cls[i] = (uint8_t)nc;
		if (nc == PG_BACK)
			continue;
		if (d->mode != VC_DEDUP_ON && !v->dd_on && !dd_sampled(pages[i]->pno)) {
			g->cls[i] = PG_PLAIN;
			continue;
		}
		if (nc != PG_KNOWN)
			g->cls[i] = PG_DIRECT; /* selected, no note: its trip chosen by staged_begin() */
		g->nknown += nc == PG_KNOWN;
		nother += nc != PG_KNOWN;
	}
	/* A trip of both kinds takes the trips of staged_begin() (rare: the
	 * notes' pages come from loads into the host tier, or up from the
	 * GPU tier). */
	if (g->nknown && !nother)
		return true;
	g->nknown = 0;
	return false;
}

/* Under dd.mu alone (the caller's first hold of c->mu dropped after
 * classify(), and taken again for known_append()): the known trip's
 * blocks. Every selected page is PG_KNOWN (D = 1, its fingerprint in
 * g->pfp[i]), the others PG_PLAIN or PG_BACK. Each known block k (page
 * g->sel[k]) is looked up now: a match pins the stored block and pairs
 * with it (the compare reads the page's plaintext where its move would:
 * src; with encryption against the stored ciphertext, with the stored
 * block's tweak; its slot's address is known_trip()'s, after the hold:
 * pinned, it stays);
 * else an earlier known block of the trip with that fingerprint is its
 * pair (a local pair), else it leads: a fresh block, indexed after its
 * move (dd_settle()). The leaders and the plain pages get fresh blocks, their
 * uses linked (g->placed), listed in g->key[0..nkey) for known_append(). */
static void known_lookup(struct vc_cache *c, struct down *g, struct vc_page *const *pages,
			 const uint64_t *src)
{
	struct eng_dedup *d = &c->dd;
	g->m = g->nstage = g->np = 0;
	for (uint32_t i = 0; i < g->n; i++) {
		g->have[i] = g->cls[i] == PG_KNOWN;
		if (g->have[i]) {
			g->sel[g->m] = i;
			g->dir[g->m] = false;
			g->fp[g->m++] = g->pfp[i];
		}
	}
	if (d->fp_same)
		memset(g->fp, 0, (size_t)g->m * sizeof *g->fp);
	memset(g->lead, 0, g->m * sizeof *g->lead);
	memset(g->hit, 0, g->m * sizeof *g->hit);
	dd_lookup_prefetch(c, g->fp, g->m);
	for (uint32_t k = 0; k < g->m; k++) {
		uint32_t o = dd_tab_find(d, &g->fp[k]);
		const uint32_t i = g->sel[k];
		if (o != DD_NIL) {
			d->blk[o].pins++;
			g->local[g->np] = false;
			g->s.pair[2 * g->np] = c->gt.cipher ? d->blk[o].tweak : src[i];
		} else {
			if ((o = dd_trip_leader(d, g, k)) == DD_NIL)
				continue;
			g->local[g->np] = true; /* plaintext against plaintext (the plain job reads both) */
			g->s.pair[2 * g->np] = src[i];
			g->s.pair[2 * g->np + 1] = src[g->sel[o]];
		}
		g->pk[g->np] = k;
		g->cand[g->np++] = o;
	}
	dd_trip_leaders_clear(d, g, false);
	uint32_t nk = 0;
	for (uint32_t i = 0, k = 0; i < g->n; i++) {
		const bool known = g->cls[i] == PG_KNOWN, lead = known && g->lead[k];
		k += known;
		if (g->cls[i] == PG_BACK || (known && !lead))
			continue;
		const uint32_t b = dd_blk_new(d);
		if (lead) {
			d->blk[b].fp = g->fp[k - 1];
			g->blk[k - 1] = b;
		}
		dd_use_link(d, page_id(c, pages[i]), b);
		g->key[nk++] = b;
	}
	g->placed += nk;
	g->nkey = nk;
}

/* Under c->mu, after known_lookup(): the reserved slots back, the fresh
 * blocks' slots appended together, and their moves (g->mv[0..*nmv): the
 * leaders and plain pages). Pairs move nothing unless their compare fails. So the
 * trip is its caller's hold, one device phase (moves beside one compare
 * job), a hold of dd.mu alone and the caller's last hold, whatever the
 * data.
 * 0 or -VC_EI_NOROOM (nothing taken: unpinned, the uses given back, under
 * dd.mu). */
static int known_append(struct vc_cache *c, struct down *g, struct vc_page *const *pages,
			const uint64_t *src, uint32_t *nmv)
{
	struct eng_dedup *d = &c->dd;
	const uint32_t nk = g->nkey;
	dd_give_back(c, g);
	if (nk && vc_ls_append(c->gpus[0].ls, nk, g->key, ++c->gpus[0].clock, g->slot) < 0) {
		dd_lock(d);
		for (uint32_t i = 0, k = 0; i < g->n; i++) {
			const bool known = g->cls[i] == PG_KNOWN, lead = known && g->lead[k];
			k += known;
			if (g->cls[i] == PG_PLAIN || lead)
				dd_use_unplace(c, page_id(c, pages[i]));
		}
		for (uint32_t q = 0; q < g->np; q++)
			if (!g->local[q])
				dd_blk_unpin(c, g->cand[q]);
		dd_unlock(d);
		g->np = g->m = 0;
		return vc_err(-VC_EI_NOROOM, "dedup: no room for %u reserved blocks", nk);
	}
	uint32_t nm = 0;
	for (uint32_t i = 0, k = 0; i < g->n; i++) {
		const bool known = g->cls[i] == PG_KNOWN, lead = known && g->lead[k];
		k += known;
		if (g->cls[i] == PG_PLAIN || lead)
			nm += eng_mv_page(c, pages[i], src[i], false, g->mv + nm);
	}
	*nmv = nm;
	return 0;
}

/* Unlocked: the known trip's compares into g->s.eq[q]: one device job
 * over every pair (plain: the page's plaintext in host memory against the
 * stored block's slot, or a local pair's two plaintexts), started here
 * and waited for by the caller where *wait says so (vc_cmp_wait), or with
 * encryption dd_compare_dev() (the stored pairs against their ciphertext,
 * the local ones by memcmp), done on return. 0 or the device's error. */
static int known_compare(struct vc_cache *c, struct down *g, const unsigned char *const *plain,
			 const uint64_t *src, bool *wait)
{
	*wait = false;
	if (!g->np)
		return 0;
	if (c->gt.cipher)
		return dd_compare_dev(c, g, plain, src);
	const struct vc_cmp_job job = { .pairs_dev = g->s.pair_dev, .out_dev = g->s.eq_dev,
					.n = g->np, .len = c->dd.bsize };
	const int r = vc_cmp_start(c->gpus[0].dev, &job);
	*wait = r == 0;
	return r;
}

/* Under c->mu and dd.mu, after classify() found no known trip: the
 * selected blocks (g->sel, g->dir; each page's trip by its volume's).
 * Every page not staged gets fresh blocks, appended together, and its
 * moves straight into them (g->mv from 0, D a page in page order), with
 * the fingerprint where the moves compute it; then the staged blocks'
 * moves into staging (dd_stage_moves(); encrypted, each under a fresh tweak,
 * g->tw[k]). Block k's move is g->mv[g->tix[k]]; a direct
 * block's id is g->blk[k]; the fingerprint job's address g->s.addr[k].
 * *nmv: the moves. 0 or -VC_EI_NOROOM (see dd_settle). */
static int staged_begin(struct vc_cache *c, struct down *g, struct vc_page *const *pages,
			const uint64_t *src, uint32_t *nmv)
{
	struct eng_dedup *d = &c->dd;
	g->m = g->nstage = 0;
	for (uint32_t i = 0; i < g->n; i++) {
		const struct vc_volume *v = vol_of(c, pages[i]->pno);
		if (g->cls[i] == PG_BACK || g->cls[i] == PG_PLAIN)
			continue;
		g->cls[i] = v->dd_direct ? PG_DIRECT : PG_STAGED;
		g->nstage += g->cls[i] == PG_STAGED ? d->D : 0;
		for (uint32_t j = 0; j < d->D; j++) {
			g->dir[g->m] = g->cls[i] == PG_DIRECT;
			g->sel[g->m++] = i * d->D + j;
		}
	}
	memset(g->lead, 0, g->m * sizeof *g->lead);
	memset(g->hit, 0, g->m * sizeof *g->hit);
	/* Every page direct: its blocks for the indexer (dedup_later.c). */
	g->later = d->later != NULL && g->m == g->n * d->D && g->nstage == 0;
	/* The fresh blocks' entries and the uses' links are cold lines of
	 * megabyte arrays: asked for ahead, so that their misses overlap (as
	 * lookup's probes). */
	uint32_t want = 0;
	for (uint32_t i = 0; i < g->n; i++)
		for (uint32_t j = 0; straight(g->cls[i]) && j < d->D; j++, want++) {
			const uint64_t u = (uint64_t)page_id(c, pages[i]) * d->D + j;
			__builtin_prefetch(&d->res[u], 1);
			__builtin_prefetch(&d->next[u], 1);
			__builtin_prefetch(&d->prev[u], 1);
		}
	for (uint32_t t = 0; t < want && t < d->nfree; t++)
		__builtin_prefetch(&d->blk[d->free_ids[d->nfree - 1 - t]], 1);
	uint32_t nk = 0, nm = 0;
	for (uint32_t i = 0; i < g->n; i++)
		for (uint32_t j = 0; straight(g->cls[i]) && j < d->D; j++) {
			uint32_t b = dd_blk_new(d);
			d->blk[b].later = g->later;
			dd_use_place(d, (uint64_t)page_id(c, pages[i]) * d->D + j, b);
			g->key[nk++] = b;
		}
	if (nk && vc_ls_append(c->gpus[0].ls, nk, g->key, ++c->gpus[0].clock, g->slot) < 0) {
		for (uint32_t i = 0; i < g->n; i++)
			for (uint32_t j = 0; straight(g->cls[i]) && j < d->D; j++)
				dd_use_unplace(c, (uint64_t)page_id(c, pages[i]) * d->D + j);
		return vc_err(-VC_EI_NOROOM, "dedup: no room for %u reserved blocks", nk);
	}
	for (uint32_t i = 0, k = 0; i < g->n; i++) {
		if (g->cls[i] == PG_STAGED)
			k += d->D;
		if (!straight(g->cls[i]))
			continue;
		const uint32_t first = nm;
		nm += eng_mv_page(c, pages[i], src[i], false, g->mv + nm);
		for (uint32_t j = 0; g->cls[i] == PG_DIRECT && j < d->D; j++, k++) {
			g->tix[k] = first + j;
			g->blk[k] = d->res[dd_use_of(c, g, pages, k)];
			g->s.addr[k] = g->mv[first + j].dst;
		}
	}
	for (uint32_t t = 0; d->fp_move && t < nm; t++)
		g->mv[t].op |= VC_MOVE_FP; /* free in the move */
	for (uint32_t k = 0; k < g->m; k++) {
		if (g->dir[k])
			continue;
		const uint32_t i = g->sel[k] / d->D, j = g->sel[k] % d->D;
		g->s.addr[k] = g->s.stage + (uint64_t)k * d->bsize;
		g->tix[k] = dd_stage_moves(c) ? nm : DD_NIL;
		if (!dd_stage_moves(c))
			continue;
		g->mv[nm] = eng_mv_down(c, src[i] + (uint64_t)j * d->bsize, g->s.addr[k], pages[i]->pno);
		if (c->gt.cipher)
			g->mv[nm].tweak = g->tw[k] = ++d->tweak_next; /* a serial, never reused */
		g->mv[nm++].op |= d->fp_move ? VC_MOVE_FP : 0;
	}
	*nmv = nm;
	return 0;
}

/* Under dd.mu, after dd_settle(): counts, its volumes' share rates. */
static void counts(struct vc_cache *c, const struct down *g, struct vc_page *const *pages)
{
	struct eng_dedup *d = &c->dd;
	d->blocks_in += g->m;
	d->direct_in += g->m - g->nstage - g->nknown;
	d->known_in += g->nknown;
	trip_rate(c, g, pages);
}

/* Under c->mu, which it keeps (the caller's last hold is the trip's): the
 * scratch back, then the trip's last phase (ph) and its profile; returns
 * r. The counts are counts()'s, before. */
static int trip_end(struct vc_cache *c, struct dd_scratch *sc, struct dd_prof *pf, int ph,
		    uint32_t nsel, int r)
{
	dd_scratch_put(c, sc);
	dd_prof_mark(pf, ph);
	dd_prof_end(&c->dd, pf, nsel);
	return r;
}

/* Submits n moves of g->mv; with encryption, hashes the selected blocks'
 * plaintext on this thread while they run (hash_from: the first block
 * not hashed yet); waits. */
static int move_all(struct vc_cache *c, struct down *g, uint32_t n,
		    const unsigned char *const *plain, bool hash)
{
	const struct eng_dedup *d = &c->dd;
	int r = n ? vc_batcher_add_n(c->gpus[0].bat, g->mv, n, g->tk) : 0;
	for (uint32_t k = 0; r == 0 && hash && k < g->m; k++)
		vc_fp_block(d->algo, dd_plain_of(d, g, plain, k), d->bsize, &g->fp[k]);
	return r == 0 && n ? vc_batcher_wait_n(c->gpus[0].bat, g->tk, n) : r;
}

/* The known trip after known_append() (r: its result), under c->mu,
 * which it drops for the device phase: the moves (leaders, plain pages)
 * beside the compare job, and meanwhile under dd.mu the estimate fed;
 * then unlocked, under dd.mu, dd_settle() and the counts; then c->mu again (the caller's last hold):
 * the reserved slots back, and only for stored blocks that lost their
 * last use meanwhile and for pages that shared nothing after all, dd.mu
 * inside it for their unpins and fresh blocks, and their placement. */
static int known_trip(struct vc_cache *c, struct down *g, struct vc_page *const *pages,
		      const unsigned char *const *plain, const uint64_t *src,
		      struct dd_scratch *sc, struct dd_prof *pf, uint32_t nmv, int r)
{
	struct eng_dedup *d = &c->dd;
	const uint32_t nsel = g->m;
	if (r < 0)
		return trip_end(c, sc, pf, DDP_BEGIN, 0, r);
	eng_unlock(c);
	dd_prof_mark(pf, DDP_BEGIN);
	int rp = nmv ? vc_batcher_add_n(c->gpus[0].bat, g->mv, nmv, g->tk) : 0;
	/* The stored pairs' slot addresses, out of the hold: a pinned block
	 * is neither moved nor freed (eng_dd_claim refuses its segment), so
	 * its entry of the log's where[] holds still, and the other entries'
	 * writers (under c->mu) touch other words. */
	for (uint32_t q = 0; q < g->np; q++)
		if (!g->local[q])
			g->s.pair[2 * q + 1] = dd_blk_addr(c, g->cand[q]);
	bool wait;
	int rc = known_compare(c, g, plain, src, &wait);
	/* While the device works: the estimate fed (it reads the notes'
	 * fingerprints, nothing a compare decides), under dd.mu alone, which
	 * takes it out of the settle's hold below. */
	dd_lock(d);
	feed(c, g, pages);
	dd_unlock(d);
	if (rp == 0 && nmv)
		rp = vc_batcher_wait_n(c->gpus[0].bat, g->tk, nmv);
	if (wait)
		rc = vc_cmp_wait(c->gpus[0].dev);
	dd_prof_mark(pf, DDP_CMP);
	/* The settle's cold lines (the leaders' table slots, the pairs' uses
	 * and stored blocks) asked for before its hold, not in it: both
	 * locks are what the demoters queue for. Addresses only; nothing is
	 * read. */
	for (uint32_t k = 0; k < g->m; k++)
		if (g->lead[k])
			__builtin_prefetch(&d->tab[dd_tab_home(d, &g->fp[k])]);
	for (uint32_t q = 0; q < g->np; q++) {
		const uint64_t u = page_id(c, pages[g->sel[g->pk[q]]]);
		__builtin_prefetch(&d->res[u], 1);
		__builtin_prefetch(&d->next[u], 1);
		__builtin_prefetch(&d->prev[u], 1);
		if (!g->local[q])
			__builtin_prefetch(&d->blk[g->cand[q]], 1);
	}
	dd_lock(d);
	r = dd_settle(c, g, pages, rp < 0 ? rp : rc); /* its pairs are as staged ones */
	if (r < 0)
		g->m = g->nknown = 0; /* nothing counted: the pages go back */
	counts(c, g, pages);
	dd_unlock(d);
	eng_lock(c);
	if (g->nlate || g->nu) {
		dd_lock(d);
		r = dd_settle_end(c, g, pages, src, r, &nmv);
		dd_unlock(d);
	} else {
		dd_give_back(c, g);
		nmv = 0;
	}
	if (g->np)
		eng_wake(c); /* claims that met a pin wait for it */
	if (r < 0 || nmv == 0)
		return trip_end(c, sc, pf, DDP_SETTLE, r < 0 ? 0 : nsel, r);
	eng_unlock(c);
	dd_prof_mark(pf, DDP_SETTLE);
	r = move_all(c, g, nmv, plain, false); /* the rare: collisions, dead stored blocks */
	dd_prof_mark(pf, DDP_PLACE);
	eng_lock(c);
	return trip_end(c, sc, pf, DDP_INDEX, nsel, r);
}

/* One trip (eng_dd_down), n <= scr_blocks / D pages, entered and left
 * under c->mu: its first hold is the caller's (a demotion's, which chose
 * the pages) and its last hold the caller's too (which settles the pages),
 * so that under contention for c->mu a trip costs two acquisitions more
 * than a move without dedup (one when nothing is staged or matched).
 *
 * The known trip (every selected page's fingerprint noted, D = 1):
 *   lock      the caller's, dd.mu inside: classes (classify(): the
 *             notes, back links and their unkeeps need c->mu)
 *   dd.mu     alone: lookups, pins, fresh blocks for the leaders and
 *             plain pages (known_lookup())
 *   lock      their slots appended (known_append())
 *   unlocked  the pairs' addresses; their moves beside one compare job
 *             (known_compare()), and while they run the estimate fed
 *             under dd.mu (feed())
 *   dd.mu     shares, the leaders indexed, unpins, counts (dd_settle(),
 *             counts())
 *   lock      the caller's last: the reserved slots back (dd_give_back())
 * so the lookups and the settling leave c->mu, what the engine's demoters
 * and readers queue for, at one acquisition of c->mu more. Step 9
 * measured that acquisition at 12-20 us of waiting (a wake-up) and kept
 * the lookups in the caller's hold; with the locks spinning (step 14) and
 * 8 batches in flight the split trip demotes faster: factor-4 plain
 * 962 against 891 k pages/s, 12 reps each, interleaved (H200,
 * docs/DEDUP.md step 15).
 *
 * The staged trip, in three short holds of c->mu, dd.mu inside each,
 * with the device work between them unlocked:
 *   lock      classes; the pages not staged get fresh blocks, appended
 *             (classify(), staged_begin())
 *   unlocked  their moves, and the staged blocks into staging (encrypted
 *             under tweaks of their own), fingerprinting on their way
 *             (MurmurHash3/MD5: a job after, or with encryption a host
 *             hash meanwhile); fingerprints (fingerprint())
 *   lock      estimate fed; lookups, stored blocks pinned; the leaders
 *             (staged, matching nothing) get fresh blocks and slots,
 *             appended together (dd_lookup(), fresh())
 *   unlocked  the leaders placed (staging to slot) while one compare job
 *             runs over the pairs (dd_compare(); encrypted, against the
 *             stored ciphertext, decrypted in the compare: dd_compare_dev())
 *   lock      shares, the placed leaders enter the fingerprint table,
 *             unpins, counts (dd_settle(), dd_settle_end(), counts())
 * and, only for staged blocks that share nothing after all (a collision,
 * or the stored block died meanwhile), their fresh blocks (dd_settle_end),
 * their placement unlocked, and a last hold. Before step 6 the
 * leaders got their slots after the compare, which cost a fourth hold and
 * a placement after the compare instead of beside it (docs/DEDUP.md).
 * A trip with no staged page (direct or plain only) ends at the second
 * hold when nothing matched, else at the third. A trip whose every page
 * is direct (a volume whose blocks share less than 1 in DD_DIRECT_AT)
 * looks nothing up: its blocks go to the indexer
 * (dedup_later.c) and its second hold is the caller's settle, so that it
 * is a demotion without dedup but for its fresh blocks' bookkeeping in
 * the first hold (docs/DEDUP.md step 12).
 * What the unlocked phases read cannot change under them: the trip's
 * pages are BUSY (nobody else moves, drops, cleans or evicts their
 * blocks), a pinned stored block is not moved, evicted or freed, and the
 * staging blocks are the trip's. What can change is whether a stored
 * block still has a use; settle checks it. A block enters the table only
 * after its bytes are in its slot, so every compare reads a placed block;
 * a pair local to the trip reads its leader's staging block, which the
 * leader's placement only reads. */
static int trip(struct vc_cache *c, uint32_t n, struct vc_page *const *pages,
		const unsigned char *const *plain, const uint64_t *src)
{
	struct eng_dedup *d = &c->dd;
	struct dd_prof pf = { .on = d->prof };
	dd_prof_start(&pf);
	struct dd_scratch *sc = dd_scratch_get(c);
	if (!sc)
		return vc_err(-ENOMEM, "out of pinned or device memory for a dedup trip");
	struct down *g = sc->g;
	g->n = n;
	g->placed = g->nlate = 0;
	uint32_t nmv = 0;
	int r;
	classify_prefetch(c, g, pages);
	dd_lock(d);
	if (classify(c, g, pages)) {
		/* dd.mu stays held: releasing c->mu under it breaks no order. */
		eng_unlock(c);
		known_lookup(c, g, pages, src);
		dd_unlock(d);
		eng_lock(c);
		r = known_append(c, g, pages, src, &nmv);
		return known_trip(c, g, pages, plain, src, sc, &pf, nmv, r);
	}
	dd_give_back(c, g);
	r = staged_begin(c, g, pages, src, &nmv);
	dd_unlock(d);
	uint32_t nsel = g->m; /* g is the next trip's once trip_end() gave it back */
	if (r == 0 && nmv == 0 && g->m == 0) /* every page went back by reference */
		return trip_end(c, sc, &pf, DDP_BEGIN, nsel, r);
	eng_unlock(c);
	dd_prof_mark(&pf, DDP_BEGIN);
	if (r == 0)
		r = move_all(c, g, nmv, plain, c->gt.cipher && !d->fp_move);
	dd_prof_mark(&pf, DDP_MOVE);
	if (r == 0)
		r = fingerprint(c, g, plain, nmv);
	if (r == 0)
		collect(c, g);
	dd_prof_mark(&pf, DDP_FP);
	if (r == 0 && g->later && dd_later_push(c, g, pages)) {
		eng_lock(c); /* the caller's last hold: the pages settle */
		return trip_end(c, sc, &pf, DDP_LOOKUP, nsel, 0);
	}
	eng_lock(c);
	dd_lock(d);
	g->np = g->nu = 0;
	if (r == 0) {
		feed(c, g, pages);
		r = dd_lookup(c, g, pages, src);
	}
	if (r < 0 || (g->np == 0 && g->nu == 0)) {
		/* Failed (nothing counted: the pages go back; fresh() gave
		 * back what it took), or nothing matched and nothing staged. */
		for (uint32_t q = 0; r < 0 && q < g->np; q++)
			if (!g->local[q])
				dd_blk_unpin(c, g->cand[q]);
		if (r < 0)
			g->m = g->nstage = nsel = 0;
		counts(c, g, pages);
		dd_unlock(d);
		return trip_end(c, sc, &pf, DDP_LOOKUP, nsel, r);
	}
	dd_unlock(d);
	eng_unlock(c);
	dd_prof_mark(&pf, DDP_LOOKUP);
	/* The leaders' placement and the compare at once: disjoint blocks
	 * (leaders have no pair; a local pair reads the leader's staging
	 * block, which the placement only reads). */
	const uint32_t nlead = g->nu;
	int rp = nlead ? vc_batcher_add_n(c->gpus[0].bat, g->mv, nlead, g->tk) : 0;
	int rc = g->np ? dd_compare(c, g, plain, src, rp == 0 ? nlead : 0) : 0;
	if (rp == 0 && nlead)
		rp = vc_batcher_wait_n(c->gpus[0].bat, g->tk, nlead);
	dd_prof_mark(&pf, DDP_CMP);
	eng_lock(c);
	dd_lock(d);
	r = dd_settle(c, g, pages, rp < 0 ? rp : rc);
	r = dd_settle_end(c, g, pages, src, r, &nmv);
	counts(c, g, pages);
	dd_unlock(d);
	if (g->np)
		eng_wake(c); /* claims that met a pin wait for it */
	if (r < 0 || nmv == 0)
		return trip_end(c, sc, &pf, DDP_SETTLE, nsel, r);
	eng_unlock(c);
	dd_prof_mark(&pf, DDP_SETTLE);
	r = move_all(c, g, nmv, plain, false); /* the rare: collisions, dead stored blocks */
	dd_prof_mark(&pf, DDP_PLACE);
	eng_lock(c);
	return trip_end(c, sc, &pf, DDP_INDEX, nsel, r);
}

int eng_dd_down(struct vc_cache *c, uint32_t n, struct vc_page *const *pages,
		const unsigned char *const *plain, const uint64_t *src)
{
	const uint32_t most = c->dd.scr_blocks / c->dd.D;
	int r = 0;
	for (uint32_t i = 0; r == 0 && i < n; i += most)
		r = trip(c, n - i < most ? n - i : most, pages + i, plain + i, src + i);
	return r;
}
