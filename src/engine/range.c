/* Range walks: invalidating, prefetching and describing a byte range of a
 * volume (vc_volume_drop, vc_volume_prefetch, vc_volume_extent).
 */
#include "engine/engine.h"

/* Drops page pno if cached (under c->mu; may sleep and write back). */
static int drop_page(struct vc_cache *c, uint64_t pno, bool discard)
{
	for (;;) {
		struct vc_page *p = vc_index_find(&c->ix, pno);
		if (!p)
			return 0;
		uint64_t st = st_of(p);
		if (st & (VC_ST_BUSY | VC_ST_PINS | VC_ST_EXCL)) {
			eng_wait_page(c, p, st);
			continue;
		}
		if (p->dirty && !discard) {
			int r = eng_writeback_page(c, p);
			if (r == -EAGAIN)
				eng_wait_cv(c);
			else if (r < 0)
				return r;
			continue;
		}
		if (!vc_page_claim(p, 0, VC_ST_HOST | VC_ST_GPU)) { /* a lock-free reader pinned it */
			eng_wait_page(c, p, st_of(p));
			continue;
		}
		eng_page_drop(c, p);
		return 0;
	}
}

int vc_volume_drop(vc_volume *v, uint64_t off, uint64_t len, unsigned flags)
{
	if (!v)
		return vc_err(-EINVAL, "vc_drop: NULL cache");
	struct vc_cache *c = v->c;
	if (off >= v->size)
		return 0;
	if (len == 0 || len > v->size - off)
		len = v->size - off;
	uint64_t p0 = v->base + (off >> c->pshift), p1 = v->base + ((off + len - 1) >> c->pshift);
	bool discard = flags & VC_DROP_DISCARD;
	/* Dirty pages go back in batches first (O(dirty pages in the range));
	 * drop_page writes back, one by one, those dirtied since. */
	int r = discard ? 0 : eng_writeback_range(v, p0 - v->base, p1 - v->base);
	if (r < 0)
		return r;
	eng_lock(c);
	if (p1 - p0 < c->ix.npool) {
		for (uint64_t pno = p0; pno <= p1 && r == 0; pno++)
			r = drop_page(c, pno, discard);
	} else {
		/* A range wider than the cache: visit the cached pages instead:
		 * the settled ones (page.h: an entry without HOST or GPU may be
		 * a lock-free miss's, filled in meanwhile; its load races with
		 * this drop, and either order is one the caller allowed). */
		for (uint64_t i = 0; i < c->ix.npool && r == 0; i++) {
			struct vc_page *p = &c->ix.pool[i];
			if ((st_of(p) & (VC_ST_HOST | VC_ST_GPU)) && p->pno >= p0 && p->pno <= p1)
				r = drop_page(c, p->pno, discard);
		}
	}
	eng_wake(c);
	eng_unlock(c);
	return r;
}

/* With dedup: the round's pages that arrived go down from the staging
 * pages, duplicates taking no slot (eng_dd_down); sealed first. On
 * failure every such page's result is the error (the caller drops it). */
static int prefetch_dd_down(struct vc_cache *c, struct bulk *b)
{
	struct vc_page **pg = malloc(b->n * sizeof *pg);
	const unsigned char **pl = malloc(b->n * sizeof *pl);
	uint64_t *src = malloc(b->n * sizeof *src);
	uint32_t k = 0;
	int r = pg && pl && src ? 0 : vc_err(-ENOMEM, "out of memory");
	for (unsigned i = 0; r == 0 && i < b->n; i++) {
		if (b->bios[i].result < 0)
			continue;
		pg[k] = b->jobs[i].p;
		pl[k] = vc_tier_host(c->gpu.stage_bulk, b->jobs[i].stage);
		src[k] = vc_tier_addr(c->gpu.stage_bulk, b->jobs[i].stage);
		if (eng_integ(c))
			r = eng_seal(c, pg[k], pl[k]);
		k++;
	}
	if (r == 0)
		r = eng_dd_down(c, k, pg, pl, src);
	for (unsigned i = 0; r < 0 && i < b->n; i++)
		if (b->bios[i].result >= 0)
			b->bios[i].result = r;
	free(pg);
	free(pl);
	free(src);
	return r;
}

/* Loads uncached pages [*pno, p1] straight into the GPU tier, up to one
 * batch at a time, through the bulk staging pages. */
static int prefetch_gpu_round(struct vc_volume *v, uint64_t *pno, uint64_t p1)
{
	struct vc_cache *c = v->c;
	struct bulk b;
	int r = eng_bulk_init(c, &b);
	if (r < 0)
		return r;
	eng_lock(c);
	while (*pno <= p1 && b.n < c->batch_pages) {
		if (vc_index_find(&c->ix, *pno)) {
			(*pno)++;
			continue;
		}
		uint32_t s;
		if (vc_tier_alloc(c->gpu.stage_bulk, &s) < 0) {
			if (b.n)
				break;
			eng_wait_cv(c);
			continue;
		}
		/* Room at the log's head. With pages of this round in flight
		 * (busy, unqueued) reclaiming may find nothing but them, so
		 * write those first instead of sleeping on ourselves. */
		r = eng_gpu_room(c, 1, b.n > 0);
		if (r < 0 || vc_index_find(&c->ix, *pno)) { /* or raced while reclaiming */
			vc_tier_free(c->gpu.stage_bulk, s);
			if (r == -ENOSPC && b.n == 0)
				*pno = p1 + 1; /* the tier shrank to nothing: a hint goes unheeded */
			if (r == -EAGAIN || r == -ENOSPC)
				r = 0;
			if (r < 0 || b.n || *pno > p1)
				break;
			continue;
		}
		/* Published busy: a lock-free miss of it waits for this round. */
		struct vc_page *p;
		r = vc_index_insert(&c->ix, *pno, GPU, 0, VC_ST_BUSY, &p);
		if (r < 0) {
			vc_tier_free(c->gpu.stage_bulk, s);
			if (r == -EEXIST) { /* a lock-free miss loaded it meanwhile */
				r = 0;
				continue;
			}
			break;
		}
		if (eng_gpu_append(c, 1, &p) < 0) {
			vc_index_remove(&c->ix, p); /* not reached: room was made under this hold */
			eng_wake_page(c, *pno);
			vc_tier_free(c->gpu.stage_bulk, s);
			break;
		}
		/* Its GPU residence: eng_gpu_append recorded it. */
		b.jobs[b.n] = (struct bulk_job){ .p = p, .stage = s, .staged = true };
		struct vc_bio *io = &b.bios[b.n];
		io->buf = vc_tier_host(c->gpu.stage_bulk, s);
		io->off = page_off(c, *pno);
		io->len = page_len(c, *pno);
		if (io->len < c->page_size)
			memset((char *)io->buf + io->len, 0, c->page_size - io->len);
		b.n++;
		(*pno)++;
	}
	eng_unlock(c);

	int e = b.n ? vc_backing_submit(v->bk, b.bios, b.n) : 0;
	int dev_r = eng_dd(c) ? prefetch_dd_down(c, &b) : eng_bulk_move(c, &b, false);
	eng_lock(c);
	for (unsigned i = 0; i < b.n; i++) {
		struct vc_page *p = b.jobs[i].p;
		vc_tier_free(c->gpu.stage_bulk, b.jobs[i].stage);
		if (b.bios[i].result < 0) {
			eng_page_drop(c, p);
			continue;
		}
		st_settle(c, p, VC_ST_GPU); /* settled */
		pol_insert(c, p, GPU);
		c->st.h2d += c->page_size;
		c->st.rd_bytes += b.bios[i].len;
	}
	eng_wake(c);
	eng_unlock(c);
	eng_bulk_fini(&b);
	if (r == 0)
		r = e < 0 ? e : dev_r;
	return r;
}

int vc_volume_prefetch(vc_volume *v, uint64_t off, uint64_t len, int tier)
{
	if (!v)
		return vc_err(-EINVAL, "vc_prefetch: NULL cache");
	struct vc_cache *c = v->c;
	if (tier != HOST && tier != GPU)
		return vc_err(-EINVAL, "prefetch: unknown tier %d", tier);
	if (tier == GPU && !c->gpu.ls)
		return vc_err(-EINVAL, "prefetch into the GPU tier, but it is disabled (size 0)");
	if (tier == GPU && c->gpu.off)
		return vc_err(-VC_EDEVICE, "prefetch into the GPU tier, but it is off after a device "
					   "failure");
	if (off >= v->size || len == 0)
		return 0;
	if (len > v->size - off)
		len = v->size - off;
	uint64_t p0 = v->base + (off >> c->pshift), p1 = v->base + ((off + len - 1) >> c->pshift);
	if (tier == GPU) {
		while (p0 <= p1) {
			int r = prefetch_gpu_round(v, &p0, p1);
			if (r < 0)
				return r;
		}
		return 0;
	}
	for (uint64_t pno = p0; pno <= p1; pno++) {
		struct vc_page *p;
		int r = eng_acquire(c, pno, ACQ_READ, false, false, &p);
		if (r < 0)
			return r;
		eng_unpin(c, p);
	}
	return 0;
}

int vc_volume_extent(vc_volume *v, uint64_t off, uint64_t len, uint64_t *ext_len)
{
	if (!v || !ext_len)
		return vc_err(-EINVAL, "vc_volume_extent: NULL argument");
	if (off >= v->size || len == 0)
		return vc_err(-EINVAL, "vc_volume_extent: empty range or offset %llu past the end",
			      (unsigned long long)off);
	struct vc_cache *c = v->c;
	if (len > v->size - off)
		len = v->size - off;
	/* The store's hole may hold dirty cached pages (write-back): those
	 * are data, and end the hole. The set is asked first: a page
	 * acknowledged before the call is in it now, or its write-back
	 * completed before it left the set, so the store's answer below
	 * already counts it. (Asked after the store, a write-back finishing
	 * in between would hide the page from both.) */
	uint64_t d, end;
	bool dirty = vc_dset_next(v->dirty, off >> c->pshift, (off + len - 1) >> c->pshift, &d);
	bool hole;
	int r = vc_backing_extent(v->bk, off, &end, &hole);
	if (r < 0)
		return r;
	if (end > off + len)
		end = off + len;
	if (hole && dirty) {
		uint64_t start = d << c->pshift;
		if (start <= off) {
			hole = false;
			start += c->page_size;
		}
		end = start < end ? start : end;
	}
	*ext_len = end - off;
	return hole ? VC_EXTENT_HOLE : VC_EXTENT_DATA;
}

int vc_volume_dirty_next(vc_volume *v, uint64_t off, uint64_t *start, uint64_t *len)
{
	if (!v || !start || !len)
		return vc_err(-EINVAL, "vc_volume_dirty_next: NULL argument");
	if (off >= v->size)
		return 0;
	const unsigned sh = v->c->pshift;
	const uint64_t last = (v->size - 1) >> sh;
	uint64_t first, next;
	if (!vc_dset_next(v->dirty, off >> sh, last, &first))
		return 0;
	uint64_t end = first + 1; /* members are page indexes (pno - base) */
	while (end <= last && vc_dset_next(v->dirty, end, end, &next))
		end++;
	*start = first << sh;
	uint64_t stop = end << sh;
	*len = (stop < v->size ? stop : v->size) - *start;
	return 1;
}
