#include "tier/logstore.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

enum { SEG_FREE, SEG_OPEN, SEG_SEALED, SEG_TAKEN };

struct seg {
	uint64_t lsn;        /* log order: larger is younger */
	uint64_t last_clock; /* append clock of its last append: its age */
	uint32_t used;       /* slots handed out, from 0 */
	uint32_t live;       /* of those, not orphaned */
	uint32_t state;
	uint32_t _pad;
	uint64_t smin, smax; /* bounds on its live slots' stamps; smin > smax: none yet */
};

/* Invariants: live_total and used_total are the sums of the segments'
 * live and used counts; below its segment's `used`, a slot's key is
 * VC_LS_DEAD unless it is one of the segment's `live` slots; in a sealed
 * or taken segment every slot is below `used` or dead (a free or open
 * segment's slots past `used` hold whatever they held: every one is
 * written before the segment is sealed full, and one sealed short has
 * them killed), so the cleaner, which reads whole sealed segments, sees
 * only current keys; the head, if any, is the only SEG_OPEN segment;
 * every live slot's stamp lies in its segment's [smin, smax]; where[k] = g
 * for every live slot g with key k < nowners. */
struct vc_ls {
	struct vc_device *dev;
	uint64_t base; /* device address of segment 0 */
	uint32_t nseg, per_seg, page_size, seg_bytes;
	unsigned seg_shift; /* log2(per_seg) */
	uint32_t min_free;  /* watermark, in segments */
	double early_release;
	struct seg *segs;
	uint32_t *key; /* per global slot, mapped pinned */
	uint64_t key_dev;
	uint64_t *stamp; /* per global slot, mapped pinned */
	uint64_t stamp_dev;
	uint32_t *where; /* per owner, mapped pinned; NULL without owners */
	uint64_t where_dev;
	uint32_t nowners;
	uint32_t *free; /* stack of free segments */
	uint32_t nfree;
	int64_t head; /* open segment, or -1 */
	uint64_t lsn, clock;
	uint64_t live_total, used_total;
	struct vc_ls_stats st;
};

int vc_ls_open(struct vc_device *dev, const struct vc_ls_config *cfg, struct vc_ls **out)
{
	uint32_t ps = cfg->page_size, sb = cfg->seg_bytes;
	if (!ps || (ps & (ps - 1)) || !sb || (sb & (sb - 1)) || sb < ps)
		return vc_err(-EINVAL, "log store: segment size %u must be a power of two >= the "
				       "page size %u", sb, ps);
	uint64_t nseg = cfg->total_bytes / sb;
	if (nseg < 2 || nseg * (sb / ps) >= VC_LS_DEAD)
		return vc_err(-EINVAL, "log store: %llu bytes make %llu segments of %u bytes; need "
				       "at least 2 and fewer than 2^32 slots",
			      (unsigned long long)cfg->total_bytes, (unsigned long long)nseg, sb);
	struct vc_ls *ls = calloc(1, sizeof *ls);
	if (!ls)
		return vc_err(-ENOMEM, "out of memory");
	ls->dev = dev;
	ls->nseg = (uint32_t)nseg;
	ls->per_seg = sb / ps;
	ls->seg_shift = (unsigned)__builtin_ctz(ls->per_seg);
	ls->page_size = ps;
	ls->seg_bytes = sb;
	double wm = cfg->free_watermark > 0 ? cfg->free_watermark : 0;
	ls->min_free = (uint32_t)(wm * (double)nseg + 0.999);
	ls->early_release = cfg->early_release;
	ls->head = -1;
	size_t nslot = (size_t)nseg * ls->per_seg;
	ls->segs = calloc(nseg, sizeof *ls->segs);
	ls->free = malloc(nseg * sizeof *ls->free);
	int r = 0;
	if (!ls->segs || !ls->free)
		r = vc_err(-ENOMEM, "log store: out of memory for %llu segments",
			   (unsigned long long)nseg);
	if (r == 0)
		r = dev->ops->host_alloc(dev, nslot * sizeof *ls->key, (void **)&ls->key, &ls->key_dev);
	if (r == 0)
		r = dev->ops->host_alloc(dev, nslot * sizeof *ls->stamp, (void **)&ls->stamp,
					 &ls->stamp_dev);
	if (r == 0 && cfg->owners) {
		ls->nowners = cfg->owners;
		r = dev->ops->host_alloc(dev, (size_t)cfg->owners * sizeof *ls->where,
					 (void **)&ls->where, &ls->where_dev);
	}
	if (r == 0)
		r = dev->ops->mem_alloc(dev, nseg * (size_t)sb, &ls->base);
	if (r < 0) {
		vc_ls_close(ls);
		return r;
	}
	memset(ls->key, 0xff, nslot * sizeof *ls->key);
	memset(ls->stamp, 0, nslot * sizeof *ls->stamp);
	if (ls->where)
		memset(ls->where, 0xff, (size_t)ls->nowners * sizeof *ls->where);
	for (uint32_t i = 0; i < nseg; i++)
		ls->free[ls->nfree++] = (uint32_t)(nseg - 1 - i);
	*out = ls;
	return 0;
}

void vc_ls_close(struct vc_ls *ls)
{
	if (!ls)
		return;
	if (ls->base)
		ls->dev->ops->mem_free(ls->dev, ls->base);
	if (ls->key)
		ls->dev->ops->host_free(ls->dev, ls->key);
	if (ls->stamp)
		ls->dev->ops->host_free(ls->dev, ls->stamp);
	if (ls->where)
		ls->dev->ops->host_free(ls->dev, ls->where);
	free(ls->segs);
	free(ls->free);
	free(ls);
}

uint32_t vc_ls_slots_per_seg(const struct vc_ls *ls)
{
	return ls->per_seg;
}

uint64_t vc_ls_capacity(const struct vc_ls *ls)
{
	return (uint64_t)ls->nseg * ls->per_seg;
}

uint64_t vc_ls_live_total(const struct vc_ls *ls)
{
	return ls->live_total;
}

uint64_t vc_ls_addr(const struct vc_ls *ls, uint32_t g)
{
	return ls->base + (uint64_t)g * ls->page_size;
}

uint32_t vc_ls_key(const struct vc_ls *ls, uint32_t g)
{
	return ls->key[g];
}

uint32_t vc_ls_where(const struct vc_ls *ls, uint32_t key)
{
	return ls->where[key];
}

/* Slot g of segment sg now holds `key` with `stamp`. */
static void slot_set(struct vc_ls *ls, struct seg *sg, uint32_t g, uint32_t key, uint64_t stamp)
{
	ls->key[g] = key;
	ls->stamp[g] = stamp;
	if (key < ls->nowners)
		ls->where[key] = g;
	sg->smin = stamp < sg->smin ? stamp : sg->smin;
	sg->smax = stamp > sg->smax ? stamp : sg->smax;
}

uint64_t vc_ls_room(const struct vc_ls *ls)
{
	uint64_t n = (uint64_t)ls->nfree * ls->per_seg;
	if (ls->head >= 0)
		n += ls->per_seg - ls->segs[ls->head].used;
	return n;
}

/* The head, opening a free segment when there is none. The caller has
 * checked the room. A head is sealed as soon as it fills (seal_full), so
 * the tail can be any full segment. */
static uint32_t head_seg(struct vc_ls *ls)
{
	if (ls->head < 0) {
		uint32_t s = ls->free[--ls->nfree];
		ls->segs[s] = (struct seg){ .lsn = ++ls->lsn, .state = SEG_OPEN, .smin = UINT64_MAX };
		ls->head = s;
	}
	return (uint32_t)ls->head;
}

static void seal_full(struct vc_ls *ls)
{
	if (ls->head >= 0 && ls->segs[ls->head].used == ls->per_seg) {
		ls->segs[ls->head].state = SEG_SEALED;
		ls->head = -1;
	}
}

int vc_ls_append(struct vc_ls *ls, uint32_t n, const uint32_t *keys, uint64_t stamp,
		 uint32_t *out)
{
	if (n > vc_ls_room(ls))
		return -ENOSPC;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = head_seg(ls);
		struct seg *sg = &ls->segs[s];
		uint32_t g = (s << ls->seg_shift) + sg->used++;
		sg->live++;
		sg->last_clock = ++ls->clock;
		slot_set(ls, sg, g, keys[i], stamp);
		out[i] = g;
		seal_full(ls);
	}
	ls->live_total += n;
	ls->used_total += n;
	return 0;
}

void vc_ls_orphan(struct vc_ls *ls, uint32_t g)
{
	if (ls->key[g] == VC_LS_DEAD)
		return;
	ls->key[g] = VC_LS_DEAD;
	struct seg *sg = &ls->segs[g >> ls->seg_shift];
	sg->live--;
	ls->live_total--;
	/* A sealed segment whose last live page leaves is free at once: no
	 * eviction or cleaning needs to find it. */
	if (sg->live == 0 && sg->state == SEG_SEALED)
		vc_ls_release(ls, g >> ls->seg_shift, false);
}

void vc_ls_rekey(struct vc_ls *ls, uint32_t g, uint32_t key, uint64_t stamp)
{
	slot_set(ls, &ls->segs[g >> ls->seg_shift], g, key, stamp);
}

bool vc_ls_low(const struct vc_ls *ls)
{
	return ls->nfree < ls->min_free;
}

double vc_ls_fragmentation(const struct vc_ls *ls)
{
	return ls->used_total ? (double)(ls->used_total - ls->live_total) / (double)ls->used_total
			      : 0;
}

int vc_ls_take_tail(struct vc_ls *ls, uint32_t *seg)
{
	int64_t best = -1;
	for (uint32_t i = 0; i < ls->nseg; i++)
		if (ls->segs[i].state == SEG_SEALED && (best < 0 || ls->segs[i].lsn < ls->segs[best].lsn))
			best = i;
	if (best < 0)
		return -ENOENT;
	ls->segs[best].state = SEG_TAKEN;
	*seg = (uint32_t)best;
	return 0;
}

int vc_ls_take(struct vc_ls *ls, uint32_t seg)
{
	struct seg *sg = &ls->segs[seg];
	if (sg->state == SEG_OPEN) {
		for (uint32_t s = sg->used; s < ls->per_seg; s++)
			ls->key[(seg << ls->seg_shift) + s] = VC_LS_DEAD;
		ls->head = -1;
		sg->state = SEG_SEALED;
	}
	if (sg->state != SEG_SEALED)
		return -EBUSY;
	sg->state = SEG_TAKEN;
	return 0;
}

uint32_t vc_ls_live(const struct vc_ls *ls, uint32_t seg, uint32_t *out, uint32_t max)
{
	uint32_t k = 0, g0 = seg << ls->seg_shift;
	for (uint32_t s = 0; s < ls->segs[seg].used && k < max; s++)
		if (ls->key[g0 + s] != VC_LS_DEAD)
			out[k++] = g0 + s;
	return k;
}

uint32_t vc_ls_seg_live(const struct vc_ls *ls, uint32_t seg)
{
	return ls->segs[seg].live;
}

void vc_ls_release(struct vc_ls *ls, uint32_t seg, bool evicted)
{
	/* Its keys stay: O(1), where killing them would cost a pass over
	 * the slots (for a cleaned segment, over its live owners' keys). */
	struct seg *sg = &ls->segs[seg];
	ls->live_total -= sg->live;
	ls->used_total -= sg->used;
	if (ls->head == (int64_t)seg)
		ls->head = -1;
	*sg = (struct seg){ .state = SEG_FREE };
	ls->free[ls->nfree++] = seg;
	if (evicted)
		ls->st.segs_evicted++;
}

void vc_ls_unpick(struct vc_ls *ls, uint32_t n, const uint32_t *segs)
{
	for (uint32_t i = 0; i < n; i++)
		ls->segs[segs[i]].state = SEG_SEALED;
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
			const struct seg *sg = &ls->segs[i];
			if (sg->state != SEG_SEALED || sg->live == ls->per_seg)
				continue;
			double sc = clean_score(ls, sg, policy);
			if (best < 0 || sc > bs) {
				best = i;
				bs = sc;
			}
		}
		if (best < 0)
			break;
		ls->segs[best].state = SEG_TAKEN;
		segs[k++] = (uint32_t)best;
	}
	return k;
}

static uint64_t live_of(const struct vc_ls *ls, uint32_t n, const uint32_t *segs)
{
	uint64_t live = 0;
	for (uint32_t i = 0; i < n; i++)
		live += ls->segs[segs[i]].live;
	return live;
}

/* The union of the segments' stamp bounds (min > max: none). */
static void bounds_of(const struct vc_ls *ls, uint32_t n, const uint32_t *segs, uint64_t *lo,
		      uint64_t *hi)
{
	*lo = UINT64_MAX;
	*hi = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct seg *sg = &ls->segs[segs[i]];
		*lo = sg->smin < *lo ? sg->smin : *lo;
		*hi = sg->smax > *hi ? sg->smax : *hi;
	}
}

int64_t vc_ls_clean_gain(const struct vc_ls *ls, uint32_t n, const uint32_t *segs)
{
	uint64_t live = live_of(ls, n, segs);
	if (live > vc_ls_room(ls))
		return -1;
	uint64_t head_left = ls->head >= 0 ? ls->per_seg - ls->segs[ls->head].used : 0;
	uint64_t fresh = live > head_left ? (live - head_left + ls->per_seg - 1) / ls->per_seg : 0;
	return (int64_t)n - (int64_t)fresh;
}

int vc_ls_clean(struct vc_ls *ls, uint32_t n, const uint32_t *segs)
{
	uint64_t live = live_of(ls, n, segs);
	if (live > vc_ls_room(ls))
		return -ENOSPC;
	/* Destinations: the rest of the head, then as many free segments as
	 * the live pages fill. */
	uint32_t first = 0, nd = 0;
	uint64_t left = live;
	uint32_t *dst = malloc(((live + ls->per_seg - 1) / ls->per_seg + 1) * sizeof *dst);
	if (!dst)
		return vc_err(-ENOMEM, "out of memory");
	if (ls->head >= 0 && ls->segs[ls->head].used < ls->per_seg) {
		struct seg *h = &ls->segs[ls->head];
		first = h->used;
		dst[nd++] = (uint32_t)ls->head;
	}
	uint64_t fit = nd ? ls->per_seg - first : 0;
	while (fit < left) {
		/* Fresh segments: every one but the last fills and is sealed
		 * below; the last stays the head. */
		if (ls->head >= 0)
			ls->segs[ls->head].state = SEG_SEALED;
		ls->head = -1;
		dst[nd++] = head_seg(ls);
		fit += ls->per_seg;
	}
	uint64_t lo, hi;
	bounds_of(ls, n, segs, &lo, &hi);
	struct vc_gc_job job = {
		.base = ls->base,
		.page_size = ls->page_size,
		.per_seg = ls->per_seg,
		.key = ls->key,
		.key_dev = ls->key_dev,
		.stamp = ls->stamp,
		.stamp_dev = ls->stamp_dev,
		.where = ls->where,
		.where_dev = ls->where_dev,
		.nowners = ls->nowners,
		.src = segs,
		.dst = dst,
		.nsrc = n,
		.ndst = nd,
		.dst_first = first,
		.live = (uint32_t)live,
		.stamp_min = lo,
		.stamp_max = hi,
	};
	int r = live ? ls->dev->ops->gc_run(ls->dev, &job) : 0;
	if (r == 0 && job.moved != live)
		r = vc_err(-EIO, "log store: cleaner moved %u pages, %llu were live", job.moved,
			   (unsigned long long)live);
	if (r < 0) {
		/* The device failed mid-way: which copy of a page is current is
		 * unknown. The caller drops the GPU tier's pages. */
		free(dst);
		return r;
	}
	/* The destination segments' counts and bounds; the device has
	 * written their keys, stamps and owners' places. */
	uint64_t q = first;
	for (uint32_t i = 0; i < nd; i++) {
		struct seg *sg = &ls->segs[dst[i]];
		uint32_t take = (uint32_t)((q + left > ls->per_seg ? ls->per_seg : q + left) - q);
		sg->used += take;
		sg->live += take;
		sg->last_clock = ++ls->clock;
		sg->smin = lo < sg->smin ? lo : sg->smin;
		sg->smax = hi > sg->smax ? hi : sg->smax;
		left -= take;
		q = 0;
	}
	seal_full(ls);
	/* The pages changed segments: live_total stays, used_total grows by
	 * the destination slots; the device killed the source keys. */
	ls->used_total += live;
	for (uint32_t i = 0; i < n; i++) {
		ls->segs[segs[i]].live = 0;
		vc_ls_release(ls, segs[i], false);
	}
	free(dst);
	ls->st.gc_runs++;
	ls->st.gc_pages_moved += live;
	return (int)live;
}

uint64_t vc_ls_early_budget(const struct vc_ls *ls)
{
	return (uint64_t)(ls->early_release * (double)ls->live_total);
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
	for (uint32_t i = 0; i < ls->nseg; i++) {
		const struct seg *sg = &ls->segs[i];
		if (sg->state == SEG_OPEN || sg->state == SEG_SEALED)
			st->segs_live++;
		else if (sg->state == SEG_TAKEN)
			st->segs_cleaning++;
	}
	st->slots_live = ls->live_total;
	st->slots_dead = ls->used_total - ls->live_total;
	st->fragmentation = vc_ls_fragmentation(ls);
}
