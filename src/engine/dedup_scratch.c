/* The dedup trips' scratch (docs/DEDUP.md): each trip running at once
 * has one, kept on a free list (dd.scr_free, under c->mu) for the next;
 * one is made at open, the rest as trips first run at once, all freed at
 * close. What a scratch holds: dedup_trip.h. */
#include <stdlib.h>

#include "engine/dedup.h"
#include "engine/dedup_trip.h"
#include "engine/engine.h"

static void down_free(struct down *g)
{
	if (!g)
		return;
	free(g->sel);
	free(g->fp);
	free(g->ltab);
	free(g->mv);
	free(g->tk);
	free(g->local);
	free(g->pfp);
	free(g->tw);
	free(g);
}

/* Room for trips of up to cap = n x D blocks; NULL on memory failure. */
static struct down *down_alloc(uint32_t cap)
{
	struct down *g = calloc(1, sizeof *g);
	if (!g)
		return NULL;
	uint32_t lt = 2;
	while (lt < 2 * cap)
		lt <<= 1;
	g->lmask = lt - 1;
	g->sel = malloc((size_t)cap * 10 * sizeof *g->sel);
	g->fp = malloc((size_t)cap * sizeof *g->fp);
	g->ltab = calloc(lt, sizeof *g->ltab);
	g->mv = malloc((size_t)cap * sizeof *g->mv);
	g->tk = malloc((size_t)cap * sizeof *g->tk);
	g->local = calloc((size_t)cap * 7, sizeof *g->local);
	g->pfp = malloc((size_t)cap * 2 * sizeof *g->pfp);
	g->tw = malloc((size_t)cap * sizeof *g->tw);
	if (!g->sel || !g->fp || !g->ltab || !g->mv || !g->tk || !g->local || !g->pfp || !g->tw) {
		down_free(g);
		return NULL;
	}
	g->pk = g->sel + cap;
	g->cand = g->pk + cap;
	g->blk = g->cand + cap;
	g->key = g->blk + cap;
	g->slot = g->key + cap;
	g->uk = g->slot + cap;
	g->tix = g->uk + cap;
	g->xq = g->tix + cap;
	g->late = g->xq + cap;
	g->lead = g->local + cap;
	g->hit = g->lead + cap;
	g->ok = g->hit + cap;
	g->have = g->ok + cap;
	g->dir = g->have + cap;
	g->cls = (uint8_t *)(g->dir + cap);
	g->dfp = g->pfp + cap;
	return g;
}

/* With encryption, the region after the results: the device compare's
 * job (25 B a block, rounded up to 32) or the bounce (a block). */
static uint64_t cipher_len(const struct eng_dedup *d)
{
	return (uint64_t)d->scr_blocks * (d->dev_cmp ? 32 : d->bsize);
}

static uint64_t scratch_len(const struct vc_cache *c)
{
	const uint64_t m = c->dd.scr_blocks;
	return m * 41 + 64 + (c->gt.cipher ? cipher_len(&c->dd) : 0);
}

static struct scratch scratch_of(const struct eng_dedup *d, const struct dd_scratch *sc)
{
	const uint64_t m = d->scr_blocks;
	unsigned char *h = sc->mem;
	uint64_t o_fp = m * 8, o_pair = o_fp + m * 16, o_eq = o_pair + m * 16;
	uint64_t o_buf = (o_eq + m + 63) / 64 * 64, o_xtw = o_buf + m * 16, o_xeq = o_xtw + m * 8;
	struct scratch s = { .addr = (uint64_t *)h, .addr_dev = sc->dev,
			     .fp = (struct vc_fp_digest *)(h + o_fp), .fp_dev = sc->dev + o_fp,
			     .pair = (uint64_t *)(h + o_pair), .pair_dev = sc->dev + o_pair,
			     .eq = h + o_eq, .eq_dev = sc->dev + o_eq,
			     .buf = h + o_buf, .buf_dev = sc->dev + o_buf, .stage = sc->stage };
	if (d->dev_cmp) { /* the cipher region holds the job, not the bounce */
		s.xpair = (uint64_t *)(h + o_buf), s.xpair_dev = sc->dev + o_buf;
		s.xtw = (uint64_t *)(h + o_xtw), s.xtw_dev = sc->dev + o_xtw;
		s.xeq = h + o_xeq, s.xeq_dev = sc->dev + o_xeq;
	}
	return s;
}

static void scratch_free(struct vc_cache *c, struct dd_scratch *sc)
{
	if (sc->stage)
		c->gpus[0].dev->ops->mem_free(c->gpus[0].dev, sc->stage);
	if (sc->mem)
		c->gpus[0].dev->ops->host_free(c->gpus[0].dev, sc->mem);
	down_free(sc->g);
	free(sc);
}

/* Unlocked: a new scratch (as many exist as trips ever ran at once; the
 * free list keeps them). NULL on failure. */
static struct dd_scratch *scratch_new(struct vc_cache *c)
{
	struct eng_dedup *d = &c->dd;
	struct vc_device *dev = c->gpus[0].dev;
	struct dd_scratch *sc = calloc(1, sizeof *sc);
	if (!sc)
		return NULL;
	if (!(sc->g = down_alloc(d->scr_blocks)) ||
	    dev->ops->host_alloc(dev, scratch_len(c), &sc->mem, &sc->dev) < 0 ||
	    (dd_stage_moves(c) &&
	     dev->ops->mem_alloc(dev, (size_t)d->scr_blocks * d->bsize, &sc->stage) < 0)) {
		scratch_free(c, sc);
		return NULL;
	}
	sc->g->s = scratch_of(d, sc);
	return sc;
}

struct dd_scratch *dd_scratch_get(struct vc_cache *c)
{
	struct dd_scratch *sc = c->dd.scr_free;
	if (sc) {
		c->dd.scr_free = sc->next;
		return sc;
	}
	eng_unlock(c);
	sc = scratch_new(c);
	eng_lock(c);
	return sc;
}

void dd_scratch_put(struct vc_cache *c, struct dd_scratch *sc)
{
	sc->next = c->dd.scr_free;
	c->dd.scr_free = sc;
}

int dd_scratch_open(struct vc_cache *c)
{
	struct dd_scratch *sc = scratch_new(c);
	if (!sc)
		return vc_err(-ENOMEM, "out of pinned or device memory for the dedup scratch");
	c->dd.scr_free = sc;
	return 0;
}

void dd_scratch_close(struct vc_cache *c)
{
	struct eng_dedup *d = &c->dd;
	dd_prof_print(c, "since the last");
	while (d->scr_free) {
		struct dd_scratch *sc = d->scr_free;
		d->scr_free = sc->next;
		scratch_free(c, sc);
	}
}
