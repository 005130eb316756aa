#include "tier/logstore.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/batcher.h"
#include "core/clock.h"
#include "core/error.h"

enum { SEG_FREE, SEG_OPEN, SEG_SEALED, SEG_CLEANING };

struct seg {
	uint64_t lsn;       /* log order: larger is younger */
	uint64_t last_clock; /* append clock of its last append: its age */
	uint32_t used;      /* slots handed out, from 0 */
	uint32_t live;      /* of those, not orphaned */
	uint32_t state;
	uint32_t _pad;
};

struct vc_ls {
	struct vc_device *dev;
	uint64_t base; /* device address of segment 0 */
	uint32_t nseg, per_seg, page_size, seg_bytes;
	uint32_t min_free; /* watermark, in segments */
	double early_release;
	struct seg *segs;
	struct vc_lsmeta *meta; /* nseg * per_seg */
	uint32_t *free;         /* stack of free segments */
	uint32_t nfree;
	int64_t head; /* open segment, or -1 */
	uint64_t lsn, clock;
	struct vc_ls_stats st;
};

int vc_ls_open(struct vc_device *dev, const struct vc_ls_config *cfg, struct vc_ls **out)
{
	uint32_t ps = cfg->page_size, sb = cfg->seg_bytes;
	if (!ps || (ps & (ps - 1)) || !sb || (sb & (sb - 1)) || sb < ps)
		return vc_err(-EINVAL, "log store: segment size %u must be a power of two >= the "
				       "page size %u", sb, ps);
	uint64_t nseg = cfg->total_bytes / sb;
	if (nseg < 2 || nseg > UINT32_MAX)
		return vc_err(-EINVAL, "log store: %llu bytes make %llu segments of %u bytes; need "
				       "at least 2", (unsigned long long)cfg->total_bytes,
			      (unsigned long long)nseg, sb);
	struct vc_ls *ls = calloc(1, sizeof *ls);
	if (!ls)
		return vc_err(-ENOMEM, "out of memory");
	ls->dev = dev;
	ls->nseg = (uint32_t)nseg;
	ls->per_seg = sb / ps;
	ls->page_size = ps;
	ls->seg_bytes = sb;
	double wm = cfg->free_watermark > 0 ? cfg->free_watermark : 0;
	ls->min_free = (uint32_t)(wm * (double)nseg + 0.999);
	ls->early_release = cfg->early_release;
	ls->head = -1;
	ls->segs = calloc(nseg, sizeof *ls->segs);
	ls->meta = malloc(nseg * ls->per_seg * sizeof *ls->meta);
	ls->free = malloc(nseg * sizeof *ls->free);
	int r = 0;
	if (!ls->segs || !ls->meta || !ls->free)
		r = vc_err(-ENOMEM, "log store: out of memory for %llu segments",
			   (unsigned long long)nseg);
	if (r == 0)
		r = dev->ops->mem_alloc(dev, nseg * (size_t)sb, &ls->base);
	if (r < 0) {
		free(ls->segs);
		free(ls->meta);
		free(ls->free);
		free(ls);
		return r;
	}
	for (uint64_t i = 0; i < nseg * ls->per_seg; i++)
		ls->meta[i] = (struct vc_lsmeta){ .key = VC_LS_DEAD };
	for (uint32_t i = 0; i < nseg; i++)
		ls->free[ls->nfree++] = (uint32_t)(nseg - 1 - i);
	*out = ls;
	return 0;
}

void vc_ls_close(struct vc_ls *ls)
{
	if (!ls)
		return;
	ls->dev->ops->mem_free(ls->dev, ls->base);
	free(ls->segs);
	free(ls->meta);
	free(ls->free);
	free(ls);
}

uint32_t vc_ls_slots_per_seg(const struct vc_ls *ls)
{
	return ls->per_seg;
}

uint64_t vc_ls_addr(const struct vc_ls *ls, struct vc_lsloc loc)
{
	return ls->base + (uint64_t)loc.seg * ls->seg_bytes + (uint64_t)loc.slot * ls->page_size;
}

struct vc_lsmeta *vc_ls_meta(struct vc_ls *ls, struct vc_lsloc loc)
{
	return &ls->meta[(size_t)loc.seg * ls->per_seg + loc.slot];
}

int vc_ls_append(struct vc_ls *ls, uint32_t n, const uint64_t *keys, struct vc_lsloc *out)
{
	uint64_t room = (uint64_t)ls->nfree * ls->per_seg;
	if (ls->head >= 0)
		room += ls->per_seg - ls->segs[ls->head].used;
	if (n > room)
		return -ENOSPC;
	for (uint32_t i = 0; i < n; i++) {
		if (ls->head < 0 || ls->segs[ls->head].used == ls->per_seg) {
			if (ls->head >= 0)
				ls->segs[ls->head].state = SEG_SEALED;
			uint32_t s = ls->free[--ls->nfree];
			ls->segs[s] = (struct seg){ .lsn = ++ls->lsn, .state = SEG_OPEN };
			ls->head = s;
		}
		struct seg *sg = &ls->segs[ls->head];
		out[i] = (struct vc_lsloc){ (uint32_t)ls->head, sg->used++ };
		sg->live++;
		sg->last_clock = ++ls->clock;
		*vc_ls_meta(ls, out[i]) = (struct vc_lsmeta){ .key = keys[i] };
	}
	return 0;
}

void vc_ls_orphan(struct vc_ls *ls, struct vc_lsloc loc)
{
	struct vc_lsmeta *m = vc_ls_meta(ls, loc);
	if (m->key == VC_LS_DEAD)
		return;
	m->key = VC_LS_DEAD;
	ls->segs[loc.seg].live--;
}

bool vc_ls_low(const struct vc_ls *ls)
{
	return ls->nfree < ls->min_free;
}

int vc_ls_tail(const struct vc_ls *ls, uint32_t *seg)
{
	int64_t best = -1;
	for (uint32_t i = 0; i < ls->nseg; i++)
		if (ls->segs[i].state == SEG_SEALED && (best < 0 || ls->segs[i].lsn < ls->segs[best].lsn))
			best = i;
	if (best < 0)
		return -ENOENT;
	*seg = (uint32_t)best;
	return 0;
}

uint32_t vc_ls_live(const struct vc_ls *ls, uint32_t seg, struct vc_lsloc *out, uint32_t max)
{
	uint32_t k = 0;
	const struct vc_lsmeta *m = &ls->meta[(size_t)seg * ls->per_seg];
	for (uint32_t s = 0; s < ls->segs[seg].used && k < max; s++)
		if (m[s].key != VC_LS_DEAD)
			out[k++] = (struct vc_lsloc){ seg, s };
	return k;
}

void vc_ls_release(struct vc_ls *ls, uint32_t seg, bool evicted)
{
	struct seg *sg = &ls->segs[seg];
	struct vc_lsmeta *m = &ls->meta[(size_t)seg * ls->per_seg];
	for (uint32_t s = 0; s < sg->used; s++)
		m[s].key = VC_LS_DEAD;
	if (ls->head == (int64_t)seg)
		ls->head = -1;
	*sg = (struct seg){ .state = SEG_FREE };
	ls->free[ls->nfree++] = seg;
	if (evicted)
		ls->st.segs_evicted++;
}

/* Higher is a better segment to clean. */
static double clean_score(const struct vc_ls *ls, const struct seg *sg, int policy)
{
	if (policy == VC_LS_CLEAN_OLDEST)
		return -(double)sg->lsn;
	/* RAMCloud/LFS cost-benefit: cleaning frees (1 - u) of a segment, for
	 * reading it (1) and writing back its live part (u), weighted by how
	 * long its data has stayed unchanged. */
	double u = (double)sg->live / ls->per_seg;
	double age = (double)(ls->clock - sg->last_clock) + 1;
	return (1 - u) * age / (1 + u);
}

uint32_t vc_ls_pick(struct vc_ls *ls, int policy, uint32_t max, uint32_t *segs)
{
	uint32_t k = 0;
	while (k < max) {
		int64_t best = -1;
		double bs = 0;
		for (uint32_t i = 0; i < ls->nseg; i++) {
			if (ls->segs[i].state != SEG_SEALED)
				continue;
			double sc = clean_score(ls, &ls->segs[i], policy);
			if (best < 0 || sc > bs) {
				best = i;
				bs = sc;
			}
		}
		if (best < 0)
			break;
		ls->segs[best].state = SEG_CLEANING;
		segs[k++] = (uint32_t)best;
	}
	return k;
}

int vc_ls_relocate(struct vc_ls *ls, uint32_t n, const struct vc_lsloc *from, struct vc_lsloc *to,
		   struct vc_move *moves)
{
	uint64_t *keys = calloc(n ? n : 1, sizeof *keys);
	if (!keys)
		return vc_err(-ENOMEM, "out of memory");
	for (uint32_t i = 0; i < n; i++)
		keys[i] = vc_ls_meta(ls, from[i])->key;
	int r = vc_ls_append(ls, n, keys, to);
	free(keys);
	if (r < 0)
		return r;
	for (uint32_t i = 0; i < n; i++) {
		*vc_ls_meta(ls, to[i]) = *vc_ls_meta(ls, from[i]);
		moves[i] = (struct vc_move){ .src = vc_ls_addr(ls, from[i]),
					     .dst = vc_ls_addr(ls, to[i]),
					     .op = VC_MOVE_COPY };
		vc_ls_orphan(ls, from[i]);
	}
	return 0;
}

int vc_ls_clean(struct vc_ls *ls, struct vc_batcher *bat, int policy, uint32_t max_segs,
		void (*order)(void *arg, struct vc_lsloc *locs, uint32_t n),
		void (*moved)(void *arg, const struct vc_lsloc *from, const struct vc_lsloc *to,
			      uint32_t n),
		void *arg)
{
	uint64_t t0 = vc_now_ns();
	uint32_t *segs = malloc((max_segs ? max_segs : 1) * sizeof *segs);
	if (!segs)
		return vc_err(-ENOMEM, "out of memory");
	uint32_t ns = vc_ls_pick(ls, policy, max_segs, segs);
	uint64_t live = 0;
	for (uint32_t i = 0; i < ns; i++)
		live += ls->segs[segs[i]].live;
	uint64_t room = (uint64_t)ls->nfree * ls->per_seg;
	if (ls->head >= 0)
		room += ls->per_seg - ls->segs[ls->head].used;
	if (live > room) {
		for (uint32_t i = 0; i < ns; i++)
			ls->segs[segs[i]].state = SEG_SEALED;
		free(segs);
		return -ENOSPC;
	}
	struct vc_lsloc *from = malloc((live ? live : 1) * sizeof *from);
	struct vc_lsloc *to = malloc((live ? live : 1) * sizeof *to);
	struct vc_move *mv = malloc((live ? live : 1) * sizeof *mv);
	struct vc_ticket *tk = malloc((live ? live : 1) * sizeof *tk);
	int r = 0;
	if (!from || !to || !mv || !tk)
		r = vc_err(-ENOMEM, "out of memory");
	uint32_t n = 0;
	for (uint32_t i = 0; r == 0 && i < ns; i++)
		n += vc_ls_live(ls, segs[i], from + n, (uint32_t)live - n);
	if (r == 0 && order)
		order(arg, from, n);
	if (r == 0)
		r = vc_ls_relocate(ls, n, from, to, mv);
	if (r == 0 && n) {
		r = vc_batcher_add_n(bat, mv, n, tk);
		if (r == 0)
			r = vc_batcher_wait_n(bat, tk, n);
	}
	if (r == 0) {
		if (moved && n)
			moved(arg, from, to, n);
		for (uint32_t i = 0; i < ns; i++)
			vc_ls_release(ls, segs[i], false);
		vc_ls_note_gc(ls, n, vc_now_ns() - t0);
	}
	free(from);
	free(to);
	free(mv);
	free(tk);
	free(segs);
	return r < 0 ? r : (int)n;
}

void vc_ls_note_gc(struct vc_ls *ls, uint64_t pages, uint64_t ns)
{
	ls->st.gc_runs++;
	ls->st.gc_pages_moved += pages;
	ls->st.gc_ns += ns;
}

uint64_t vc_ls_early_budget(const struct vc_ls *ls)
{
	uint64_t live = 0;
	for (uint32_t i = 0; i < ls->nseg; i++)
		live += ls->segs[i].live;
	return (uint64_t)(ls->early_release * (double)live);
}

void vc_ls_note_early_release(struct vc_ls *ls, uint64_t pages)
{
	ls->st.early_releases += pages;
}

void vc_ls_get_stats(const struct vc_ls *ls, struct vc_ls_stats *st)
{
	*st = ls->st;
	st->segs_total = ls->nseg;
	st->segs_free = ls->nfree;
	st->segs_live = st->segs_cleaning = 0;
	st->slots_live = st->slots_dead = 0;
	for (uint32_t i = 0; i < ls->nseg; i++) {
		const struct seg *sg = &ls->segs[i];
		if (sg->state == SEG_OPEN || sg->state == SEG_SEALED)
			st->segs_live++;
		else if (sg->state == SEG_CLEANING)
			st->segs_cleaning++;
		st->slots_live += sg->live;
		st->slots_dead += sg->used - sg->live;
	}
	uint64_t used = st->slots_live + st->slots_dead;
	st->fragmentation = used ? (double)st->slots_dead / (double)used : 0;
}
