/* Block deduplication, indexing later (docs/DEDUP.md step 12): a direct
 * trip's blocks (a volume whose blocks rarely share, dedup_down.c) are
 * stored, their pages settled, and the trip is over without a lookup;
 * their ids, generations and fingerprints go on a queue, and one thread
 * per cache (the indexer) looks them up and indexes them under dd.mu
 * alone, off the engine lock and off the trip's round trip, where the
 * lookups cost the demote column most of what dedup cost it (on the
 * H200, plain unique demotion at 0.89 of dedup off against 0.85 with the
 * lookups in the trip, docs/DEDUP.md step 12).
 *
 * A block of the queue (eng_blk.later, set at its birth in the trip's
 * first hold) is indexed only if it is still that block (its id's
 * generation, dd.gen, bumped at every death: ids are reused, so nothing
 * of the entry is read before the generation matches) and still
 * flagged: a shrink that empties its segment clears the flag
 * (eng_dd_unindex_seg), as it takes indexed blocks out of the table.
 * Every death happens under dd.mu (dedup.c), so under dd.mu a block whose
 * generation matches stays that block for the lookup.
 *
 * A block that matches a stored one is a duplicate stored twice until the
 * indexer merges it (merge()): with both locks, its page claimed (BUSY,
 * as cleaning claims) and the stored block pinned; the two compared on
 * the device, unlocked (with encryption, both come up decrypted, each
 * under its own tweak, into a pinned bounce and are compared there:
 * cipher_eq); then with both locks the page's use moves to the
 * stored block and the later one dies (its slot dead, for cleaning), as
 * the direct trip merged its duplicates in its own hold before. A page
 * that cannot be claimed (in use, or moving) keeps its block: the
 * duplicate stays stored twice, unindexed, until the page leaves.
 *
 * Locks: the queue is lq's own (a leaf: taken under c->mu or alone, never
 * holding another); the indexer holds dd.mu alone for at most
 * LATER_HOLD blocks at a time (a trip's first hold waits for dd.mu under
 * c->mu), and takes c->mu, then dd.mu, for a merge. Nobody waits for the
 * indexer but eng_dd_later_drain's callers (statistics, checks, close),
 * which hold neither lock. Cost: 48 bytes a queued block (with
 * encryption also a pinned bounce of 4 x LATER_PASS blocks, 4 MiB at 4
 * KiB blocks, and a batch of moves a merge); the queue holds
 * four trips' blocks (4 x dd.scr_blocks), and a trip that finds it full
 * looks its blocks up in its own hold as before. So the trip switch
 * (dd_vol_switch), fed by the indexer, lags the trips by at most the
 * queue and a pass: a volume whose blocks start to repeat takes up to
 * that many more direct trips (their duplicates merged late, dead slots
 * for cleaning) before it stages. */
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/env.h"
#include "device/cmp.h"
#include "engine/debug.h"
#include "engine/dedup.h"
#include "engine/dedup_trip.h"
#include "engine/engine.h"

#define LATER_PASS 256u /* blocks the indexer takes off the queue at once */
#define LATER_HOLD 32u  /* blocks looked up per hold of dd.mu */
/* A merge whose page cannot be claimed is tried again every
 * LATER_RETRY_NS while the queue is empty (or with the next pass), at
 * most LATER_TRIES times: the page is usually still its trip's, settling,
 * or a reader's for a moment. */
#define LATER_RETRY_NS 200000u
#define LATER_TRIES 64u

struct later_ent {
	struct vc_fp_digest fp;
	uint64_t pno;
	uint32_t b, gen, j;
};

struct dd_later {
	pthread_mutex_t mu;
	pthread_cond_t work, idle;
	struct later_ent *q; /* a ring of cap */
	uint32_t cap, head, n;
	uint64_t pushed, done; /* blocks queued, and indexed (or merged) since open */
	uint32_t nretry;       /* merges waiting for another try (the indexer's npair) */
	bool stop, paused;     /* paused: a test hook (eng_debug_dedup_later_pause) */
	pthread_t thr;
	/* The indexer's own: a pass's entries, and its matches. */
	struct later_ent pass[LATER_PASS];
	struct later_pair {
		uint32_t b, o, tries;
		uint64_t sb, so, u;
	} pair[2 * LATER_PASS]; /* those tried again first, then this pass's */
	uint32_t npair;
	/* With encryption: both blocks of each pair come up decrypted into
	 * the bounce (pinned, 2 x pairs x dd.bsize), two moves a pair. */
	unsigned char *bounce;
	uint64_t bounce_dev;
	struct vc_move mv[4 * LATER_PASS];
	struct vc_ticket tk[4 * LATER_PASS];
};

/* Under dd.mu alone: entry e's block, if it is still that block: the
 * estimate and the volume's share rate fed (as the trip's lookup hold fed
 * them: feed(), trip_rate()), then looked up and indexed if still
 * queued; a match is listed for merge(). Its volume (returned; NULL for
 * a block that died) is open: a queued block that is alive is its page's
 * (nothing shares or keeps a block the table does not name), and a volume
 * goes only after its pages are dropped (vc_volume_close), their blocks
 * dying under dd.mu, which we hold. So nothing of an entry's volume is
 * read before its block's generation matches. */
static struct vc_volume *index_one(struct vc_cache *c, struct dd_later *l,
				   const struct later_ent *e)
{
	struct eng_dedup *d = &c->dd;
	d->later_in++;
	if (d->gen[e->b] != e->gen)
		return NULL; /* died: the id may be another block's now */
	struct vc_volume *v = vol_of(c, e->pno);
	struct vc_fp_digest fp = e->fp;
	if (d->fp_same)
		memset(&fp, 0, sizeof fp);
	eng_est_feed(c, e->pno, e->j, &e->fp);
	if (e->j == 0)
		dd_decide(c, v);
	d->blocks_in++;
	d->direct_in++;
	v->dd_look++;
	struct eng_blk *k = &d->blk[e->b];
	if (!k->later)
		return v; /* its segment is being emptied */
	k->later = false;
	k->fp = fp;
	const uint32_t o = dd_tab_find(d, &fp);
	if (o == DD_NIL) {
		dd_tab_insert(d, e->b);
		return v;
	}
	v->dd_match++;
	if (k->refs == 1) /* room: the indexer's pass */
		l->pair[l->npair++] = (struct later_pair){ .b = e->b, .o = o, .sb = k->tweak,
							   .so = d->blk[o].tweak, .u = k->head };
	return v;
}

/* Under dd.mu alone: the pass's entries [from, to), their table lines
 * asked for first (as dd_lookup_prefetch does), then indexed; each volume's
 * trip switch decided once its counts allow (dd_vol_switch). */
static void index_run(struct vc_cache *c, struct dd_later *l, uint32_t from, uint32_t to)
{
	struct eng_dedup *d = &c->dd;
	for (uint32_t t = from; t < to; t++) {
		__builtin_prefetch(&d->tab[dd_tab_home(d, &l->pass[t].fp)]);
		__builtin_prefetch(&d->blk[l->pass[t].b]);
	}
	struct vc_volume *v[LATER_HOLD];
	for (uint32_t t = from; t < to; t++)
		v[t - from] = index_one(c, l, &l->pass[t]);
	for (uint32_t t = from; t < to; t++)
		if (v[t - from])
			dd_vol_switch(v[t - from]);
}

/* Unlocked, encryption: the np pairs' two blocks (slots g->s.pair[2q],
 * [2q + 1], claimed and pinned) come up decrypted, each under its own
 * tweak (the stored blocks' serials: a pair's two ciphertexts of equal
 * plaintexts differ), into the bounce in one batch of moves, and are
 * compared there into g->s.eq[q]. 0 or the device's error. */
static int cipher_eq(struct vc_cache *c, struct dd_later *l, struct down *g, uint32_t np)
{
	const uint32_t bs = c->dd.bsize;
	for (uint32_t q = 0; q < np; q++) {
		const struct later_pair *p = &l->pair[g->pk[q]];
		for (uint32_t s = 0; s < 2; s++)
			l->mv[2 * q + s] = (struct vc_move){
				.src = g->s.pair[2 * q + s],
				.dst = l->bounce_dev + (uint64_t)(2 * q + s) * bs,
				.op = VC_MOVE_COPY | VC_MOVE_DECRYPT,
				.tweak = s ? p->so : p->sb
			};
	}
	int r = vc_batcher_add_n(c->gpus[0].bat, l->mv, 2 * np, l->tk);
	if (r == 0)
		r = vc_batcher_wait_n(c->gpus[0].bat, l->tk, 2 * np);
	for (uint32_t q = 0; r == 0 && q < np; q++)
		g->s.eq[q] = memcmp(l->bounce + (size_t)2 * q * bs,
				    l->bounce + (size_t)(2 * q + 1) * bs, bs) == 0;
	return r;
}

/* The indexer's matches, merged where the bytes agree (the head comment).
 * Takes c->mu then dd.mu twice around one compare job. Those whose page
 * could not be claimed stay in l->pair for another try (`last`: none). */
static void merge(struct vc_cache *c, struct dd_later *l, bool last)
{
	struct eng_dedup *d = &c->dd;
	eng_lock(c);
	struct dd_scratch *sc = dd_scratch_get(c);
	if (!sc) {
		eng_unlock(c);
		l->npair = 0;
		return;
	}
	struct down *g = sc->g;
	struct vc_page *held[2 * LATER_PASS]; /* claimed, each once (D > 1: a page's blocks) */
	uint32_t np = 0, nh = 0, nkeep = 0;
	dd_lock(d);
	for (uint32_t t = 0; t < l->npair; t++) {
		struct later_pair *p = &l->pair[t];
		const struct eng_blk *kb = &d->blk[p->b], *ko = &d->blk[p->o];
		if (kb->tweak != p->sb || kb->refs != 1 || kb->head != p->u || ko->tweak != p->so ||
		    !ko->indexed || !dd_blk_live(ko))
			continue; /* changed meanwhile: keep what is stored */
		struct vc_page *pg = &c->ix.pool[p->u / d->D];
		uint32_t h = 0;
		while (h < nh && held[h] != pg)
			h++;
		if (h == nh && !vc_page_claim(pg, VC_ST_BUSY, 0)) {
			if (!last && ++p->tries < LATER_TRIES)
				p->b |= 1u << 31; /* in use or moving: again later */
			continue;
		}
		if (h == nh)
			held[nh++] = pg;
		d->blk[p->o].pins++;
		g->pk[np] = t;
		g->s.pair[2 * np] = vc_ls_addr(c->gpus[0].ls, vc_ls_where(c->gpus[0].ls, p->b));
		g->s.pair[2 * np + 1] = vc_ls_addr(c->gpus[0].ls, vc_ls_where(c->gpus[0].ls, p->o));
		np++;
	}
	dd_unlock(d);
	eng_unlock(c);
	/* Unlocked: the claimed pages hold their blocks still (no claim for
	 * cleaning, eviction or a shrink takes a BUSY page), the stored
	 * blocks are pinned. */
	const struct vc_cmp_job job = { .pairs_dev = g->s.pair_dev, .out_dev = g->s.eq_dev,
					.n = np, .len = d->bsize };
	int rc = !np ? 0 : c->gt.cipher ? cipher_eq(c, l, g, np) : vc_cmp_run(c->gpus[0].dev, &job);
	eng_lock(c);
	dd_lock(d);
	for (uint32_t q = 0; q < np; q++) {
		const struct later_pair *p = &l->pair[g->pk[q]];
		const bool eq = rc == 0 && g->s.eq[q];
		d->collisions += rc == 0 && !eq;
		if (eq && dd_blk_live(&d->blk[p->o])) {
			dd_use_unlink(c, p->u, true);
			dd_use_link(d, p->u, p->o);
			d->merged_late++;
			d->hits++;
		}
		dd_blk_unpin(c, p->o);
	}
	dd_unlock(d);
	for (uint32_t h = 0; h < nh; h++)
		st_clear(c, held[h], VC_ST_BUSY);
	if (np)
		eng_wake(c); /* claims that met a pin wait for it */
	dd_scratch_put(c, sc);
	eng_unlock(c);
	for (uint32_t t = 0; t < l->npair; t++)
		if (l->pair[t].b & 1u << 31) {
			l->pair[nkeep] = l->pair[t];
			l->pair[nkeep++].b &= ~(1u << 31);
		}
	l->npair = nkeep;
}

static void *indexer(void *arg)
{
	struct vc_cache *c = arg;
	struct dd_later *l = c->dd.later;
	pthread_mutex_lock(&l->mu);
	for (;;) {
		while ((l->paused || (l->n == 0 && l->nretry == 0)) && !l->stop)
			pthread_cond_wait(&l->work, &l->mu);
		/* Each entry may add a pair: a pass takes no more than the
		 * pairs have room for, so none is dropped. */
		const uint32_t room = 2 * LATER_PASS - l->nretry;
		if (l->nretry && !l->stop && (l->n == 0 || room < LATER_PASS)) {
			const uint64_t t = vc_now_ns() + LATER_RETRY_NS;
			const struct timespec ts = { (time_t)(t / 1000000000ull),
						     (long)(t % 1000000000ull) };
			pthread_cond_timedwait(&l->work, &l->mu, &ts);
		}
		if (l->n == 0 && l->nretry == 0)
			break; /* stopped, all done */
		const uint32_t m = l->n < room ? (l->n < LATER_PASS ? l->n : LATER_PASS)
					       : (room < LATER_PASS ? room : LATER_PASS);
		for (uint32_t t = 0; t < m; t++)
			l->pass[t] = l->q[(l->head + t) % l->cap];
		l->head = (l->head + m) % l->cap;
		l->n -= m;
		const bool last = l->stop;
		pthread_mutex_unlock(&l->mu);
		for (uint32_t t = 0; t < m; t += LATER_HOLD) {
			dd_lock(&c->dd);
			index_run(c, l, t, t + LATER_HOLD < m ? t + LATER_HOLD : m);
			dd_unlock(&c->dd);
		}
		if (l->npair)
			merge(c, l, last && l->n == 0);
		pthread_mutex_lock(&l->mu);
		l->done += m;
		l->nretry = l->npair;
		pthread_cond_broadcast(&l->idle);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

bool dd_later_push(struct vc_cache *c, const struct down *g, struct vc_page *const *pages)
{
	struct dd_later *l = c->dd.later;
	const uint32_t D = c->dd.D;
	pthread_mutex_lock(&l->mu);
	const bool room = l->n + g->m <= l->cap;
	for (uint32_t k = 0; room && k < g->m; k++) {
		const uint32_t i = g->sel[k] / D, b = g->blk[k];
		l->q[(l->head + l->n++) % l->cap] =
			(struct later_ent){ .fp = g->fp[k], .gen = c->dd.gen[b], .pno = pages[i]->pno,
					    .b = b, .j = g->sel[k] % D };
	}
	if (room) {
		l->pushed += g->m;
		pthread_cond_signal(&l->work);
	}
	pthread_mutex_unlock(&l->mu);
	return room;
}

int eng_debug_dedup_later_pause(vc_cache *c, bool on)
{
	struct dd_later *l = eng_dd(c) ? c->dd.later : NULL;
	if (!l)
		return vc_err(-EINVAL, "no dedup indexer (dedup off, or VC_DD_LATER=0)");
	pthread_mutex_lock(&l->mu);
	l->paused = on;
	pthread_cond_signal(&l->work);
	pthread_mutex_unlock(&l->mu);
	return 0;
}

void eng_dd_later_drain(struct vc_cache *c)
{
	struct dd_later *l = eng_dd(c) ? c->dd.later : NULL;
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	const uint64_t until = l->pushed; /* not what comes after: no livelock under load */
	while (l->done < until || l->nretry)
		pthread_cond_wait(&l->idle, &l->mu);
	pthread_mutex_unlock(&l->mu);
}

/* Frees what dd_later_open allocated (NULL: nothing). */
static void later_free(struct vc_cache *c, struct dd_later *l)
{
	if (!l)
		return;
	if (l->bounce)
		c->gpus[0].dev->ops->host_free(c->gpus[0].dev, l->bounce);
	free(l->q);
	free(l);
}

int dd_later_open(struct vc_cache *c)
{
	struct eng_dedup *d = &c->dd;
	/* VC_DD_LATER=0 leaves it off (every trip looks up in its own hold:
	 * step 11's). */
	if (vc_env_u32("VC_DD_LATER", 1, 0, 1) == 0)
		return 0;
	struct dd_later *l = calloc(1, sizeof *l);
	if (l)
		l->cap = 4 * d->scr_blocks;
	struct vc_device *dev = c->gpus[0].dev;
	void *bounce = NULL;
	if (!l || !(l->q = malloc(l->cap * sizeof *l->q)) ||
	    (c->gt.cipher && dev->ops->host_alloc(dev, (size_t)4 * LATER_PASS * d->bsize, &bounce,
						  &l->bounce_dev) < 0)) {
		later_free(c, l);
		return vc_err(-ENOMEM, "out of memory for the dedup indexer's queue or bounce");
	}
	l->bounce = bounce;
	if (pthread_mutex_init(&l->mu, NULL) != 0) {
		later_free(c, l);
		return vc_err(-ENOMEM, "dedup: cannot create the indexer's lock");
	}
	vc_cond_init_monotonic(&l->work);
	vc_cond_init_monotonic(&l->idle);
	d->later = l;
	if (pthread_create(&l->thr, NULL, indexer, c) != 0) {
		d->later = NULL;
		pthread_mutex_destroy(&l->mu);
		pthread_cond_destroy(&l->work);
		pthread_cond_destroy(&l->idle);
		later_free(c, l);
		return vc_err(-EAGAIN, "dedup: cannot start the indexer thread");
	}
	return 0;
}

void eng_dd_later_close(struct vc_cache *c)
{
	struct dd_later *l = eng_dd(c) ? c->dd.later : NULL;
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_cond_signal(&l->work);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->thr, NULL); /* it drains the queue first */
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->work);
	pthread_cond_destroy(&l->idle);
	later_free(c, l);
	c->dd.later = NULL;
}
