/* Range walks: invalidating, prefetching and describing a byte range of a
 * volume (vc_volume_drop, vc_volume_prefetch, vc_volume_extent).
 */
#include "base/workers.h"
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

/* Unlocked; returns under c->mu (the trip's last hold is the caller's).
 * With dedup: the round's pages that arrived go down from the staging
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
		pl[k] = vc_tier_host(c->gpus[0].stage_bulk, b->jobs[i].stage); /* dedup: one part */
		src[k] = vc_tier_addr(c->gpus[0].stage_bulk, b->jobs[i].stage);
		if (eng_integ(c))
			r = eng_seal(c, pg[k], pl[k]);
		k++;
	}
	eng_lock(c);
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

/* Loads the uncached pages among pno[0..n) (ascending: a volume's pages
 * together) straight into the GPU tier, up to batch_pages of them in one
 * round: one backing submission per volume (io_uring) into the bulk
 * staging pages, then one batched move. *used: how many entries of pno
 * the round got through (the rest are for the next round); *loaded: pages
 * it loaded. Pages already cached, or loaded meanwhile by someone else,
 * are skipped. */
static int prefetch_gpu_round(struct vc_cache *c, const uint64_t *pno, uint32_t n, uint32_t *used,
			      uint32_t *loaded)
{
	struct bulk b;
	uint32_t i = 0;
	*loaded = 0;
	int r = eng_bulk_init(c, &b);
	if (r < 0)
		return r;
	eng_lock(c);
	while (i < n && b.n < c->batch_pages) {
		if (vc_index_find(&c->ix, pno[i])) {
			i++;
			continue;
		}
		/* Its home part, whose staging and queue it goes through. */
		int h = c->ngpus > 1 ? eng_home(c, pno[i]) : 0;
		if (h < 0 || !eng_part_usable(&c->gpus[h])) {
			i = n; /* no part takes pages now: a hint goes unheeded */
			break;
		}
		struct vc_gpu *g = &c->gpus[h];
		uint32_t s;
		if (vc_tier_alloc(g->stage_bulk, &s) < 0) {
			if (b.n)
				break;
			eng_wait_cv(c);
			continue;
		}
		/* Room at the log's head. With pages of this round in flight
		 * (busy, unqueued) reclaiming may find nothing but them, so
		 * write those first instead of sleeping on ourselves. */
		r = eng_gpu_room(c, g, 1, b.n > 0);
		if (r < 0 && atomic_load(&g->off)) { /* its device failed: the others next time */
			vc_tier_free(g->stage_bulk, s);
			r = 0;
			break;
		}
		if (r < 0 || vc_index_find(&c->ix, pno[i])) { /* or raced while reclaiming */
			vc_tier_free(g->stage_bulk, s);
			/* The tier shrank to nothing, or can make no room while
			 * stores refuse write-backs: a hint goes unheeded. */
			if ((r == -VC_EI_SHRUNK || r == -VC_EI_REFUSED) && b.n == 0)
				i = n;
			if (r == -EAGAIN || r == -VC_EI_SHRUNK || r == -VC_EI_REFUSED)
				r = 0;
			if (r < 0 || b.n || i >= n)
				break;
			continue;
		}
		/* Published busy: a lock-free miss of it waits for this round. */
		struct vc_page *p;
		r = vc_index_insert(&c->ix, pno[i], GPU, 0, VC_ST_BUSY, &p);
		if (r < 0) {
			vc_tier_free(g->stage_bulk, s);
			if (r == -EEXIST) { /* a lock-free miss loaded it meanwhile */
				r = 0;
				continue;
			}
			if (r == -VC_EI_NOROOM) { /* no entry free: a hint goes unheeded */
				r = 0;
				i = n;
			}
			break;
		}
		if (eng_gpu_append(c, g, 1, &p) < 0) {
			vc_index_remove(&c->ix, p); /* not reached: room was made under this hold */
			eng_wake_page(c, pno[i]);
			vc_tier_free(g->stage_bulk, s);
			break;
		}
		/* Its GPU residence: eng_gpu_append recorded it (p->gpu too). */
		b.jobs[b.n] = (struct bulk_job){ .p = p, .stage = s, .staged = true };
		struct vc_bio *io = &b.bios[b.n];
		io->buf = vc_tier_host(g->stage_bulk, s);
		io->off = page_off(c, pno[i]);
		io->len = page_len(c, pno[i]);
		if (io->len < c->page_size)
			memset((char *)io->buf + io->len, 0, c->page_size - io->len);
		b.n++;
		i++;
	}
	eng_unlock(c);
	*used = i;

	/* One submission per volume: its pages are adjacent in the round. */
	int e = 0;
	for (unsigned k = 0, end; k < b.n; k = end) {
		struct vc_volume *v = vol_of(c, b.jobs[k].p->pno);
		for (end = k + 1; end < b.n && vol_of(c, b.jobs[end].p->pno) == v; end++)
			;
		int e1 = vc_backing_submit(v->bk, b.bios + k, end - k);
		if (e1 < 0 && e == 0)
			e = e1;
	}
	for (unsigned k = 0; k < c->ngpus; k++)
		b.perr[k] = 0;
	int dev_r = eng_dd(c) ? (b.perr[0] = prefetch_dd_down(c, &b)) : eng_bulk_move(c, &b, false);
	if (!eng_dd(c))
		eng_lock(c);
	for (unsigned j = 0; j < b.n; j++) {
		struct vc_page *p = b.jobs[j].p;
		vc_tier_free(gpu_of(c, p)->stage_bulk, b.jobs[j].stage);
		if (b.bios[j].result < 0) {
			eng_page_drop(c, p);
			continue;
		}
		st_settle(c, p, VC_ST_GPU); /* settled */
		pol_insert(c, p, GPU);
		atomic_fetch_add_explicit(&gpu_of(c, p)->n_h2d, 1, memory_order_relaxed);
		c->st.h2d += c->page_size;
		c->st.rd_bytes += b.bios[j].len;
		(*loaded)++;
	}
	eng_fail_parts(c, b.perr);
	/* A failed part's pages were dropped, the others loaded; with dedup,
	 * room promised and gone (not reached: the reservation) drops them. */
	if (eng_dev_err(dev_r) || dev_r == -VC_EI_NOROOM)
		dev_r = 0;
	eng_wake(c);
	eng_unlock(c);
	eng_bulk_fini(&b);
	if (r == 0)
		r = e < 0 ? e : dev_r;
	return r;
}

/* Runs rounds over the whole list (ascending); *rounds and *loaded count
 * them and the pages loaded. Stops at the first error. */
int eng_prefetch_gpu_list(struct vc_cache *c, const uint64_t *pno, uint32_t n, uint32_t *rounds,
			  uint32_t *loaded)
{
	*rounds = *loaded = 0;
	while (n) {
		uint32_t used = 0, got = 0;
		int r = prefetch_gpu_round(c, pno, n, &used, &got);
		(*rounds)++;
		*loaded += got;
		if (r < 0)
			return r;
		pno += used;
		n -= used;
	}
	return 0;
}

/* A GPU prefetch of pages [p0, p1]: chunks of a batch's worth of
 * candidates, taken in order by up to c->prefetchers workers (the caller
 * and threads of this call), each running its chunk's rounds. A lone
 * worker's round is serial: the store reads, then the move (and with
 * dedup the trip's fingerprints, lookups and compares), then the settle;
 * a second worker's reads and claims overlap them. The first error stops
 * every worker before its next chunk and is the call's result (its
 * message carried over from the worker's thread); pages already loaded
 * stay (a prefetch is a hint). Each worker holds a batch of staging
 * pages at most (stage_bulk has a batch a worker, within
 * STAGE_BULK_BYTES). 4 by default: a cold 1 GiB prefetch on the H200
 * loads 0.6-0.7 / 1.0 / 1.7 M pages/s at 1 / 2 / 4 workers (dedup off),
 * and at 4 c->mu is 89 % busy, the rounds' claims and settles queueing
 * for it (docs/DEDUP.md step 16). */
struct pf_range {
	struct vc_cache *c;
	uint64_t p0, n;
	_Atomic uint64_t next; /* the next chunk's first page, from p0 */
	_Atomic int err;       /* the first error; 0: none */
	char msg[256];         /* its message: written by the worker that set err,
				* read by the caller after the joins */
};

static void *pf_worker(void *arg)
{
	struct pf_range *w = arg;
	struct vc_cache *c = w->c;
	uint64_t *list = malloc((size_t)c->batch_pages * sizeof *list);
	int r = list ? 0 : vc_err(-ENOMEM, "out of memory");
	while (r == 0 && atomic_load(&w->err) == 0) {
		const uint64_t s = atomic_fetch_add(&w->next, c->batch_pages);
		if (s >= w->n)
			break;
		uint32_t k = 0, rounds, loaded;
		for (; k < c->batch_pages && s + k < w->n; k++)
			list[k] = w->p0 + s + k;
		r = eng_prefetch_gpu_list(c, list, k, &rounds, &loaded);
	}
	free(list);
	int none = 0;
	if (r < 0 && atomic_compare_exchange_strong(&w->err, &none, r))
		snprintf(w->msg, sizeof w->msg, "%s", vc_last_error());
	return NULL;
}

static int prefetch_gpu_range(struct vc_cache *c, uint64_t p0, uint64_t p1)
{
	struct pf_range w = { .c = c, .p0 = p0, .n = p1 - p0 + 1 };
	const uint64_t chunks = (w.n + c->batch_pages - 1) / c->batch_pages;
	vc_run_workers(pf_worker, &w, chunks < c->prefetchers ? (uint32_t)chunks : c->prefetchers);
	const int r = atomic_load(&w.err);
	return r < 0 ? vc_err(r, "%s", w.msg) : 0;
}

int vc_volume_prefetch(vc_volume *v, uint64_t off, uint64_t len, int tier)
{
	if (!v)
		return vc_err(-EINVAL, "vc_prefetch: NULL cache");
	struct vc_cache *c = v->c;
	if (tier != HOST && tier != GPU)
		return vc_err(-EINVAL, "prefetch: unknown tier %d", tier);
	if (tier == GPU && !c->gpus[0].ls)
		return vc_err(-EINVAL, "prefetch into the GPU tier, but it is disabled (size 0)");
	bool alive = false; /* some part's device still works */
	for (uint32_t k = 0; tier == GPU && k < c->ngpus; k++)
		alive |= !atomic_load(&c->gpus[k].off);
	if (tier == GPU && !alive)
		return vc_err(-VC_EDEVICE, "prefetch into the GPU tier, but it is off after a device "
					   "failure");
	if (off >= v->size || len == 0)
		return 0;
	if (len > v->size - off)
		len = v->size - off;
	uint64_t p0 = v->base + (off >> c->pshift), p1 = v->base + ((off + len - 1) >> c->pshift);
	if (tier == GPU)
		return prefetch_gpu_range(c, p0, p1);
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
