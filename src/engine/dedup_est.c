/* The data's dedup factor, estimated by sampling contents, and the
 * adaptive switch it drives (dd_decide, at the end) (issue 14;
 * docs/DEDUP.md "The factor estimate").
 *
 * SHARDS samples keys by a hash of the key, so every reference to a
 * sampled key is seen. Here the key is a block's content: a block going
 * down is sampled when a hash of its fingerprint lies below the threshold
 * (rate thresh / 2^64), so every location that holds a sampled content is
 * seen, and locations / distinct contents among those sampled estimates
 * the data's factor at any rate (a ratio estimator). A location (page,
 * block j) counts once, with its latest content: a block that goes down
 * again (a page demoted after a promotion) changes nothing, a rewritten
 * one moves from its old content's count to its new. So this is the
 * factor of the data seen so far, not of what the GPU tier holds now
 * (dedup_factor says that), and it does not depend on the tier's size.
 *
 * Fixed size (SHARDS' fixed-size variant): at most EST_MAX locations;
 * when full, the rate halves and the locations whose content falls out of
 * the sample go (about half).
 *
 * Per volume: a location of volume v counts 1 logical and 1 / (locations
 * of its content, every volume's) physical, so a volume whose blocks
 * repeat another's is credited with that sharing.
 *
 * All under dd.mu (engine.h). Cost: O(1) expected per block fed (a probe in each
 * table), O(EST_SLOTS) per volume estimate and per halving. Memory: two
 * tables of EST_SLOTS entries, 16 and 24 bytes each (320 KiB).
 */
#include "engine/dedup.h"
#include "engine/engine.h"

/* A window is DD_WINDOW sampled blocks (dedup.c samples 1 page in
 * DD_SAMPLE). */
#define DD_WINDOW 4096
/* The adaptive switch (hysteresis): off below DD_OFF_FACTOR or above
 * DD_OFF_UPD, on again above DD_ON_FACTOR and below DD_ON_UPD. DEDU's
 * crossover is 32-64 % updates; ours is to be measured (docs/DEDUP.md). */
#define DD_ON_FACTOR 1.15
#define DD_OFF_FACTOR 1.05
#define DD_ON_UPD 0.35
#define DD_OFF_UPD 0.50

/* 4096 sampled locations: a ratio estimate's relative error shrinks as
 * 1 / sqrt(distinct contents sampled), a few per cent at 1000. */
#define EST_MAX 4096
#define EST_SLOTS (2 * EST_MAX)

struct est_loc {
	uint64_t loc; /* pno x 8 + j, plus 1; 0: empty */
	uint32_t f;   /* its content: an index into fp[] */
	uint32_t _pad;
};

struct est_fp {
	struct vc_fp_digest fp;
	uint32_t cnt; /* locations holding it; 0: none now (purged at a rebuild) */
	uint32_t used;
};

struct dd_est {
	struct est_loc *loc;
	struct est_fp *fp;
	uint32_t nloc, nfp, nlive; /* locations; content entries; of those cnt > 0 */
	uint64_t thresh;           /* sampled: h(fp) <= thresh */
};

static uint64_t fp_hash(const struct vc_fp_digest *fp)
{
	uint64_t h;
	memcpy(&h, fp->b + 8, sizeof h);
	return vc_mix64(h ^ 0x3c6ef372fe94f82bull);
}

int eng_est_open(struct vc_cache *c)
{
	struct dd_est *e = calloc(1, sizeof *e);
	if (e) {
		e->loc = calloc(EST_SLOTS, sizeof *e->loc);
		e->fp = calloc(EST_SLOTS, sizeof *e->fp);
		e->thresh = UINT64_MAX;
	}
	c->dd.est = e;
	if (!e || !e->loc || !e->fp)
		return vc_err(-ENOMEM, "out of memory for the dedup estimate");
	return 0;
}

void eng_est_close(struct vc_cache *c)
{
	struct dd_est *e = c->dd.est;
	if (e) {
		free(e->loc);
		free(e->fp);
		free(e);
	}
	c->dd.est = NULL;
}

static uint32_t fp_get(struct dd_est *e, const struct vc_fp_digest *fp)
{
	uint32_t i = (uint32_t)fp_hash(fp) & (EST_SLOTS - 1);
	while (e->fp[i].used && memcmp(&e->fp[i].fp, fp, sizeof *fp) != 0)
		i = (i + 1) & (EST_SLOTS - 1);
	if (!e->fp[i].used) {
		e->fp[i] = (struct est_fp){ .fp = *fp, .used = 1 };
		e->nfp++;
	}
	return i;
}

static void fp_ref(struct dd_est *e, uint32_t f, int d)
{
	if (d > 0 && e->fp[f].cnt++ == 0)
		e->nlive++;
	else if (d < 0 && --e->fp[f].cnt == 0)
		e->nlive--;
}

static struct est_loc *loc_get(struct dd_est *e, uint64_t key)
{
	uint32_t i = (uint32_t)vc_mix64(key) & (EST_SLOTS - 1);
	while (e->loc[i].loc && e->loc[i].loc != key)
		i = (i + 1) & (EST_SLOTS - 1);
	return &e->loc[i];
}

/* Rebuilds both tables at the current threshold: contents no location
 * holds go, as do locations whose content is out of the sample. */
static void rebuild(struct dd_est *e)
{
	struct est_loc *ol = e->loc;
	struct est_fp *of = e->fp;
	struct est_loc *nl = calloc(EST_SLOTS, sizeof *nl);
	struct est_fp *nf = calloc(EST_SLOTS, sizeof *nf);
	if (!nl || !nf) { /* keep what there is; the next block tries again */
		free(nl);
		free(nf);
		return;
	}
	e->loc = nl;
	e->fp = nf;
	e->nloc = e->nfp = e->nlive = 0;
	for (uint32_t i = 0; i < EST_SLOTS; i++) {
		if (!ol[i].loc || fp_hash(&of[ol[i].f].fp) > e->thresh)
			continue;
		struct est_loc *l = loc_get(e, ol[i].loc);
		*l = (struct est_loc){ .loc = ol[i].loc, .f = fp_get(e, &of[ol[i].f].fp) };
		fp_ref(e, l->f, 1);
		e->nloc++;
	}
	free(ol);
	free(of);
}

void eng_est_feed(struct vc_cache *c, uint64_t pno, uint32_t j, const struct vc_fp_digest *fp)
{
	struct dd_est *e = c->dd.est;
	vol_of(c, pno)->dd_in++;
	if (fp_hash(fp) > e->thresh || e->nloc >= EST_SLOTS - 1 || e->nfp >= EST_SLOTS - 1)
		return; /* out of the sample (or a rebuild found no memory) */
	const uint64_t key = (pno << 3 | j) + 1;
	struct est_loc *l = loc_get(e, key);
	if (l->loc) {
		if (memcmp(&e->fp[l->f].fp, fp, sizeof *fp) == 0)
			return;
		fp_ref(e, l->f, -1); /* rewritten: its old content has one fewer */
	} else {
		*l = (struct est_loc){ .loc = key };
		e->nloc++;
	}
	l->f = fp_get(e, fp);
	fp_ref(e, l->f, 1);
	/* Full: half the sample goes (a rebuild at the halved threshold),
	 * or, with locations to spare, the contents nobody holds now. */
	for (int t = 0; t < 64 && (e->nloc >= EST_MAX || e->nfp >= EST_MAX); t++) {
		if (e->nloc >= EST_MAX)
			e->thresh >>= 1;
		rebuild(e);
	}
}

double eng_est_factor(const struct vc_cache *c)
{
	const struct dd_est *e = c->dd.est;
	return e && e->nlive ? (double)e->nloc / (double)e->nlive : 1;
}

double eng_est_factor_vol(const struct vc_cache *c, const struct vc_volume *v)
{
	const struct dd_est *e = c->dd.est;
	double logical = 0, physical = 0;
	for (uint32_t i = 0; e && i < EST_SLOTS; i++) {
		const struct est_loc *l = &e->loc[i];
		if (!l->loc || vol_of(c, (l->loc - 1) >> 3) != v)
			continue;
		logical += 1;
		physical += 1.0 / e->fp[l->f].cnt;
	}
	return physical > 0 ? logical / physical : 1;
}

/* Every DD_WINDOW blocks of the volume fed to the estimate: its
 * estimates, and (adaptive) its switch, with hysteresis; the update
 * ratio's counts then halve, so it follows change with a half-life of a
 * window. The factor is the data's (above), not the tier's: a volume
 * switched off still feeds it (its sampled pages always, and every block
 * where the moves fingerprint), so it can come back on. */
void dd_decide(struct vc_cache *c, struct vc_volume *v)
{
	if (v->dd_in < DD_WINDOW)
		return;
	uint64_t rd = atomic_load_explicit(&v->dd_reads, memory_order_relaxed);
	uint64_t wr = atomic_load_explicit(&v->dd_writes, memory_order_relaxed);
	v->dd_est_upd = rd + wr ? (double)wr / (double)(rd + wr) : 0;
	if (c->dd.mode == VC_DEDUP_ADAPTIVE) {
		/* O(the sample, 8k entries): tens of microseconds under the
		 * locks, every DD_WINDOW blocks, and only the switch reads it
		 * (the statistics take the sample's factor, eng_est_factor). */
		v->dd_est_factor = eng_est_factor_vol(c, v);
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
	v->dd_in = 0;
	atomic_fetch_sub_explicit(&v->dd_reads, rd / 2, memory_order_relaxed);
	atomic_fetch_sub_explicit(&v->dd_writes, wr / 2, memory_order_relaxed);
}
