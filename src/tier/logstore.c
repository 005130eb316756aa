#include "tier/logstore.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

enum { SEG_FREE, SEG_OPEN, SEG_SEALED, SEG_TAKEN, SEG_OFF, SEG_CONDEMNED };
/* A chunk: seg_per_chunk consecutive segments, mapped and given back
 * whole. ON: its free segments are on the free stack; DRAIN: none is,
 * and each of its segments turns SEG_OFF as it empties (release); OFF:
 * every segment SEG_OFF and the memory given back (or never mapped). */
enum { CH_ON, CH_DRAIN, CH_OFF };

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
 * for every live slot g with key k < nowners. Chunks: the free stack holds
 * exactly the SEG_FREE segments, all in ON chunks; a DRAIN chunk's
 * segments are SEALED, TAKEN or OFF (never the head); an OFF chunk's are
 * all OFF; nseg_on counts the segments of ON chunks. */
struct vc_ls {
	struct vc_device *dev;
	uint64_t base; /* device address of segment 0 */
	uint32_t nseg, per_seg, page_size, seg_bytes;
	uint32_t nseg_on;       /* segments in ON chunks: the capacity now */
	uint32_t seg_per_chunk, nchunk;
	uint8_t *chunk;         /* CH_* per chunk */
	uint8_t *mapped;        /* per chunk: its memory is the store's */
	bool chunked;           /* reserved and mapped by chunk (mem_map) */
	uint64_t reserved;      /* bytes of the reservation (chunked) */
	double watermark;
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

/* Bytes of chunk ch's memory: whole segments, rounded up to the device's
 * mapping granularity (only the last chunk can be short of segments). */
static uint64_t chunk_len(const struct vc_ls *ls, uint32_t ch)
{
	uint32_t first = ch * ls->seg_per_chunk;
	uint32_t n = ls->nseg - first < ls->seg_per_chunk ? ls->nseg - first : ls->seg_per_chunk;
	uint64_t len = (uint64_t)n * ls->seg_bytes, g = ls->dev->map_granularity;
	return ls->chunked ? (len + g - 1) & ~(g - 1) : len;
}

static uint64_t chunk_addr(const struct vc_ls *ls, uint32_t ch)
{
	return ls->base + (uint64_t)ch * ls->seg_per_chunk * ls->seg_bytes;
}

/* The device memory: by chunks of chunk_bytes when the device can map
 * (and chunk_bytes is not 0), else one allocation (one chunk, never
 * given back). */
static int chunks_open(struct vc_ls *ls, uint64_t chunk_bytes)
{
	struct vc_device *dev = ls->dev;
	const uint64_t g = dev->map_granularity;
	ls->chunked = chunk_bytes && g && dev->ops->mem_reserve;
	if (ls->chunked) {
		uint64_t unit = g > ls->seg_bytes ? g : ls->seg_bytes;
		if (chunk_bytes % unit)
			return vc_err(-EINVAL, "log store: chunk size %llu must be a multiple of %llu "
					       "(the segment size and the device's mapping granularity)",
				      (unsigned long long)chunk_bytes, (unsigned long long)unit);
		ls->seg_per_chunk = (uint32_t)(chunk_bytes / ls->seg_bytes);
	} else {
		ls->seg_per_chunk = ls->nseg;
	}
	if (ls->seg_per_chunk > ls->nseg)
		ls->seg_per_chunk = ls->nseg;
	ls->nchunk = (ls->nseg + ls->seg_per_chunk - 1) / ls->seg_per_chunk;
	ls->chunk = calloc(ls->nchunk, 1);
	ls->mapped = malloc(ls->nchunk);
	if (!ls->chunk || !ls->mapped)
		return vc_err(-ENOMEM, "out of memory");
	memset(ls->mapped, 1, ls->nchunk);
	ls->nseg_on = ls->nseg;
	if (!ls->chunked)
		return dev->ops->mem_alloc(dev, (size_t)ls->nseg * ls->seg_bytes, &ls->base);
	ls->reserved = chunk_addr(ls, ls->nchunk - 1) + chunk_len(ls, ls->nchunk - 1);
	int r = dev->ops->mem_reserve(dev, ls->reserved, &ls->base);
	if (r < 0) {
		ls->base = 0;
		return r;
	}
	for (uint32_t ch = 0; ch < ls->nchunk && r == 0; ch++) {
		r = dev->ops->mem_map(dev, chunk_addr(ls, ch), chunk_len(ls, ch));
		if (r < 0) {
			ls->chunk[ch] = CH_OFF;
			ls->mapped[ch] = 0;
		}
	}
	for (uint32_t ch = 0; ch < ls->nchunk; ch++)
		if (r < 0 && ls->mapped[ch]) {
			(void)dev->ops->mem_unmap(dev, chunk_addr(ls, ch), chunk_len(ls, ch));
			ls->mapped[ch] = 0;
		}
	return r;
}

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
	ls->watermark = wm;
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
		r = chunks_open(ls, cfg->chunk_bytes);
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

/* Overwrites len bytes of device memory at addr with zeros before they
 * go back to the device, as mem_unmap does for chunks: no cached byte
 * reaches the memory's next owner. Best effort (close cannot fail): a
 * device that cannot take the copies has failed anyway. Cost: len bytes
 * of host-to-device copies, 4 MiB at a time. */
static void scrub(struct vc_device *d, uint64_t addr, uint64_t len)
{
	const size_t step = 4u << 20;
	void *zero;
	uint64_t zero_dev;
	if (d->ops->host_alloc(d, step, &zero, &zero_dev) < 0)
		return;
	memset(zero, 0, step);
	for (uint64_t o = 0; o < len; o += step)
		if (d->ops->memcpy_sync(d, addr + o, zero_dev, len - o < step ? len - o : step) < 0)
			break;
	d->ops->host_free(d, zero);
}

void vc_ls_close(struct vc_ls *ls)
{
	if (!ls)
		return;
	if (ls->base && ls->chunked) {
		for (uint32_t ch = 0; ch < ls->nchunk; ch++)
			if (ls->mapped[ch])
				(void)ls->dev->ops->mem_unmap(ls->dev, chunk_addr(ls, ch), chunk_len(ls, ch));
		ls->dev->ops->mem_unreserve(ls->dev, ls->base, ls->reserved);
	} else if (ls->base) {
		scrub(ls->dev, ls->base, (uint64_t)ls->nseg * ls->seg_bytes);
		ls->dev->ops->mem_free(ls->dev, ls->base);
	}
	free(ls->chunk);
	free(ls->mapped);
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
	return (uint64_t)ls->nseg_on * ls->per_seg;
}

uint64_t vc_ls_capacity_max(const struct vc_ls *ls)
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

void vc_ls_where_prefetch(const struct vc_ls *ls, uint32_t key)
{
	__builtin_prefetch(&ls->where[key]);
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

uint64_t vc_ls_take_loss(const struct vc_ls *ls, uint32_t seg)
{
	return ls->head == (int64_t)seg ? ls->per_seg - ls->segs[seg].used : 0;
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
	if (ls->chunk[seg / ls->seg_per_chunk] != CH_ON) {
		*sg = (struct seg){ .state = SEG_OFF };
	} else {
		*sg = (struct seg){ .state = SEG_FREE };
		ls->free[ls->nfree++] = seg;
	}
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
	st->segs_total = ls->nseg_on;
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
	for (uint32_t i = 0; i < ls->nseg; i++) /* going with a shrink: not cached */
		if (ls->segs[i].state == SEG_CONDEMNED)
			st->slots_live -= ls->segs[i].live;
	st->slots_dead = ls->used_total - ls->live_total;
	st->fragmentation = vc_ls_fragmentation(ls);
}

/* --- chunks: the store shrinks and grows ------------------------------- */

static void watermark_update(struct vc_ls *ls)
{
	ls->min_free = (uint32_t)(ls->watermark * (double)ls->nseg_on + 0.999);
}

static uint32_t chunk_segs(const struct vc_ls *ls, uint32_t ch)
{
	uint32_t first = ch * ls->seg_per_chunk;
	return ls->nseg - first < ls->seg_per_chunk ? ls->nseg - first : ls->seg_per_chunk;
}

bool vc_ls_resizable(const struct vc_ls *ls)
{
	return ls->chunked;
}

uint32_t vc_ls_nchunks(const struct vc_ls *ls)
{
	return ls->nchunk;
}

uint32_t vc_ls_chunk_segs(const struct vc_ls *ls, uint32_t ch, uint32_t *first)
{
	*first = ch * ls->seg_per_chunk;
	return chunk_segs(ls, ch);
}

int vc_ls_chunk_state(const struct vc_ls *ls, uint32_t ch)
{
	return ls->chunk[ch] == CH_ON ? VC_LS_CHUNK_ON
	       : ls->chunk[ch] == CH_DRAIN ? VC_LS_CHUNK_DRAIN
					 : VC_LS_CHUNK_OFF;
}

uint64_t vc_ls_chunk_live(const struct vc_ls *ls, uint32_t ch)
{
	uint32_t first = ch * ls->seg_per_chunk, n = chunk_segs(ls, ch);
	uint64_t live = 0;
	for (uint32_t i = 0; i < n; i++)
		live += ls->segs[first + i].live;
	return live;
}

uint64_t vc_ls_chunk_room(const struct vc_ls *ls, uint32_t ch)
{
	uint32_t first = ch * ls->seg_per_chunk, n = chunk_segs(ls, ch);
	uint64_t room = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct seg *sg = &ls->segs[first + i];
		if (sg->state == SEG_FREE) /* on the free stack: the chunk is ON */
			room += ls->per_seg;
		else if (ls->head == (int64_t)(first + i))
			room += ls->per_seg - sg->used;
	}
	return room;
}

uint64_t vc_ls_chunk_bytes(const struct vc_ls *ls, uint32_t ch)
{
	return chunk_len(ls, ch);
}

uint64_t vc_ls_bytes_max(const struct vc_ls *ls)
{
	uint64_t b = 0;
	for (uint32_t ch = 0; ch < ls->nchunk; ch++)
		b += chunk_len(ls, ch);
	return b;
}

uint64_t vc_ls_bytes(const struct vc_ls *ls)
{
	uint64_t b = 0;
	for (uint32_t ch = 0; ch < ls->nchunk; ch++)
		if (ls->mapped[ch])
			b += chunk_len(ls, ch);
	return b;
}

int vc_ls_chunk_drain(struct vc_ls *ls, uint32_t ch)
{
	if (!ls->chunked || ls->chunk[ch] != CH_ON)
		return -EINVAL;
	uint32_t first = ch * ls->seg_per_chunk, n = chunk_segs(ls, ch);
	ls->chunk[ch] = CH_DRAIN;
	/* Its free segments leave the stack (O(free segments)). */
	uint32_t k = 0;
	for (uint32_t i = 0; i < ls->nfree; i++) {
		uint32_t sgn = ls->free[i];
		if (sgn >= first && sgn < first + n)
			ls->segs[sgn].state = SEG_OFF;
		else
			ls->free[k++] = sgn;
	}
	ls->nfree = k;
	/* The head seals where it stands (its unwritten slots die, as in
	 * vc_ls_take); an empty one goes off at once. */
	if (ls->head >= (int64_t)first && ls->head < (int64_t)(first + n)) {
		uint32_t h = (uint32_t)ls->head;
		struct seg *sg = &ls->segs[h];
		for (uint32_t s = sg->used; s < ls->per_seg; s++)
			ls->key[(h << ls->seg_shift) + s] = VC_LS_DEAD;
		sg->state = SEG_SEALED;
		ls->head = -1;
		if (sg->live == 0)
			vc_ls_release(ls, h, false);
	}
	ls->nseg_on -= n;
	watermark_update(ls);
	return 0;
}

bool vc_ls_chunk_empty(const struct vc_ls *ls, uint32_t ch)
{
	uint32_t first = ch * ls->seg_per_chunk, n = chunk_segs(ls, ch);
	for (uint32_t i = 0; i < n; i++)
		if (ls->segs[first + i].state != SEG_OFF && ls->segs[first + i].state != SEG_CONDEMNED)
			return false;
	return true;
}

void vc_ls_seg_condemn(struct vc_ls *ls, uint32_t seg)
{
	ls->segs[seg].state = SEG_CONDEMNED;
}

void vc_ls_chunk_unmapped(struct vc_ls *ls, uint32_t ch)
{
	ls->mapped[ch] = 0;
}

int vc_ls_chunk_sealed(const struct vc_ls *ls, uint32_t ch, uint32_t *segs, uint32_t max)
{
	uint32_t first = ch * ls->seg_per_chunk, n = chunk_segs(ls, ch), k = 0;
	for (uint32_t i = 0; i < n && k < max; i++)
		if (ls->segs[first + i].state == SEG_SEALED)
			segs[k++] = first + i;
	/* Youngest first: those are the pages worth moving. */
	for (uint32_t i = 1; i < k; i++)
		for (uint32_t j = i; j > 0 && ls->segs[segs[j]].lsn > ls->segs[segs[j - 1]].lsn; j--) {
			uint32_t t = segs[j];
			segs[j] = segs[j - 1];
			segs[j - 1] = t;
		}
	return (int)k;
}

void vc_ls_chunk_range(const struct vc_ls *ls, uint32_t ch, uint64_t *addr, uint64_t *len)
{
	*addr = chunk_addr(ls, ch);
	*len = chunk_len(ls, ch);
}

void vc_ls_chunk_gone(struct vc_ls *ls, uint32_t ch)
{
	ls->chunk[ch] = CH_OFF;
}

void vc_ls_chunk_online(struct vc_ls *ls, uint32_t ch)
{
	uint32_t first = ch * ls->seg_per_chunk, n = chunk_segs(ls, ch);
	ls->chunk[ch] = CH_ON;
	ls->mapped[ch] = 1;
	for (uint32_t i = n; i-- > 0;) {
		ls->segs[first + i] = (struct seg){ .state = SEG_FREE };
		ls->free[ls->nfree++] = first + i;
	}
	ls->nseg_on += n;
	watermark_update(ls);
}
