/* Write-back: dirty pages to the backing store, one at a time (drops,
 * evictions of host pages), in device batches through staging pages (GPU
 * segments evicted), and in rounds of batch_pages (flush).
 */
#include "engine/engine.h"

/* A write-back of p completed (under c->mu). Two flushes may write one
 * host page at once (both pin it, and pins exclude only writers, so both
 * wrote the same bytes): the second finds it clean already, and must not
 * count it again (the dirty count went below the truth and a flush
 * stopped early; test_aio and test_flush found it). */
void eng_note_written(struct vc_cache *c, struct vc_page *p, uint32_t len)
{
	eng_store_ok(vol_of(c, p->pno));
	if (p->dirty)
		dirty_clear(c, p);
	c->st.writebacks++;
	c->st.wr_bytes += len;
}

/* A write-back of p to its store failed with final error err (engine/dirty.h,
 * "Store errors"): the volume refuses from now, and p stays dirty. */
static void note_refused(struct vc_cache *c, const struct vc_page *p, int err)
{
	eng_store_refused(vol_of(c, p->pno), err);
	atomic_fetch_add_explicit(&c->refusals, 1, memory_order_relaxed);
}

/* Writes a dirty page that is not busy, pinned or owned to the backing store
 * and marks it clean. It stays cached. -EAGAIN: no staging page free now.
 * A GPU page that fails its integrity check is dropped, unwritten: -EIO.
 * The store's final error: the page stays dirty, its volume refusing. */
int eng_writeback_page(struct vc_cache *c, struct vc_page *p)
{
	eng_assert_locked(c);
	uint32_t s = 0;
	bool on_gpu = p->tier == GPU;
	struct vc_gpu *g = on_gpu ? gpu_of(c, p) : NULL;
	if (on_gpu && atomic_load(&g->off))
		return -EIO; /* a failed part's dirty page is lost */
	if (on_gpu && vc_tier_alloc(g->stage_wb, &s) < 0)
		return -EAGAIN;
	if (!vc_page_claim(p, VC_ST_BUSY, 0)) { /* a lock-free reader pinned it */
		if (on_gpu)
			vc_tier_free(g->stage_wb, s);
		return -EAGAIN;
	}
	uint64_t pno = p->pno;
	unsigned char *buf = on_gpu ? vc_tier_host(g->stage_wb, s) : host_data(c, p);
	eng_unlock(c);
	int r = on_gpu ? eng_move_up(c, p, vc_tier_addr(g->stage_wb, s)) : 0;
	uint64_t nonce = 0;
	bool bad = false;
	if (r == 0 && on_gpu && eng_integ(c))
		bad = (r = eng_check(c, p, buf, &nonce)) < 0;
	bool stored = false; /* r is the store's */
	if (r == 0) {
		r = vc_backing_write(vol_of(c, pno)->bk, buf, page_len(c, pno), page_off(c, pno));
		stored = true;
	}
	eng_lock(c);
	if (stored && r < 0)
		note_refused(c, p, r);
	if (on_gpu) {
		vc_tier_free(g->stage_wb, s);
		c->st.d2h += c->page_size;
	}
	if (r == 0) /* before the release: a lock-free writer may own it next */
		eng_note_written(c, p, page_len(c, pno));
	if (bad) {
		eng_integ_drop(c, p, pno, nonce, true);
		return r;
	}
	if (on_gpu && eng_dev_err(r)) { /* its part failed: the page with it */
		eng_gpu_lost(c, p);
		eng_gpu_fail(c, g, r);
		eng_wake(c);
		return -EIO;
	}
	st_clear(c, p, VC_ST_BUSY);
	eng_wake(c);
	return r;
}

/* vc_backing_submit of those of io[0..n) whose result is 0 (in runs; one
 * call when all are, as without the integrity mode): 0, or the first
 * failure. The others failed their integrity check (eng_stage_bad). */
static int bios_submit(struct vc_backing *bk, struct vc_bio *io, unsigned n)
{
	int err = 0;
	for (unsigned j = 0, e; j < n; j = e) {
		for (; j < n && io[j].result < 0; j++)
			;
		for (e = j; e < n && io[e].result == 0; e++)
			;
		int r = e > j ? vc_backing_submit(bk, io + j, e - j) : 0;
		if (r < 0 && err == 0)
			err = r;
	}
	return err;
}

/* Writes back dirty GPU pages that the caller marked busy, through `cap`
 * pages of `stage` at a time: one device batch to the staging pages, then
 * one backing submission per volume. Unlocked while data moves. done[i]
 * tells which the caller drops: those written back, and those that failed
 * their integrity check (not written: their data is lost, and counted in
 * vc_stats); returns the first error of the others. Never sleeps holding
 * staging pages (a shared stage may be empty for a while: single-page
 * write-backs hold its pages, and they never wait). */
int eng_writeback_gpu_via(struct vc_cache *c, struct vc_page **pages, uint32_t n, bool *done,
			  struct vc_tiermem *stage, uint32_t cap)
{
	const uint32_t mpp = eng_mpp(c);
	struct vc_move *mv = malloc((size_t)cap * mpp * sizeof *mv);
	struct vc_ticket *tk = malloc((size_t)cap * mpp * sizeof *tk);
	struct vc_bio *io = malloc(cap * sizeof *io);
	uint32_t *st = malloc(cap * sizeof *st);
	bool *bad = malloc(cap * sizeof *bad);
	uint8_t *mpart = malloc((size_t)cap * mpp);
	int err = 0, perr[VC_GPUS_MAX];
	if (!mv || !tk || !io || !st || !bad || !mpart) {
		err = vc_err(-ENOMEM, "out of memory");
		for (uint32_t i = 0; i < n; i++)
			done[i] = false;
		n = 0;
	}
	for (uint32_t i = 0; i < n;) {
		uint32_t k = 0;
		while (k < cap && i + k < n && vc_tier_alloc(stage, &st[k]) == 0)
			k++;
		if (k == 0) {
			eng_wait_cv(c);
			continue;
		}
		for (uint32_t j = 0; j < k; j++) {
			struct vc_page *p = pages[i + j];
			eng_mv_page(c, p, vc_tier_addr(stage, st[j]), true, mv + (size_t)j * mpp);
			memset(mpart + (size_t)j * mpp, p->gpu, mpp);
			io[j] = (struct vc_bio){ .buf = vc_tier_host(stage, st[j]),
						 .off = page_off(c, p->pno),
						 .len = page_len(c, p->pno),
						 .write = 1 };
		}
		eng_unlock(c);
		int r = eng_fan(c, mv, mpart, k * mpp, tk, perr);
		for (uint32_t j = 0; j < k; j++) {
			io[j].result = 0;
			bad[j] = r == 0 && eng_integ(c) && eng_stage_bad(c, pages[i + j], &io[j]);
		}
		/* One submission per volume (a segment mixes them), of the pages
		 * that passed their checks. */
		/* Each volume's requests go on whatever another's store said:
		 * their results are their own. */
		for (uint32_t j = 0, e; r == 0 && j < k; j = e) {
			struct vc_volume *v = vol_of(c, pages[i + j]->pno);
			for (e = j + 1; e < k && vol_of(c, pages[i + e]->pno) == v; e++)
				;
			(void)bios_submit(v->bk, io + j, e - j);
		}
		eng_lock(c);
		for (uint32_t j = 0; j < k; j++) {
			struct vc_page *p = pages[i + j];
			vc_tier_free(stage, st[j]);
			done[i + j] = r == 0 && io[j].result == 0;
			if (done[i + j]) {
				eng_note_written(c, p, io[j].len);
			} else if (bad[j]) {
				done[i + j] = true; /* the caller drops it */
				eng_integ_count_drop(c, p);
			} else {
				if (r == 0) /* the store's: the device's r failed the move */
					note_refused(c, p, io[j].result);
				if (!err)
					err = r < 0 ? r : io[j].result;
			}
		}
		c->st.d2h += (uint64_t)k * c->page_size;
		eng_fail_parts(c, perr);
		i += k;
	}
	free(mv);
	free(tk);
	free(io);
	free(st);
	free(bad);
	free(mpart);
	eng_wake(c);
	return err;
}

/* The pages' part's staging (every page of pages[] is in one part: a
 * segment's). */
int eng_writeback_gpu(struct vc_cache *c, struct vc_page **pages, uint32_t n, bool *done)
{
	return n ? eng_writeback_gpu_via(c, pages, n, done, gpu_of(c, pages[0])->stage_wb,
					 WB_STAGING_PAGES)
		 : 0;
}

void eng_bulk_fini(struct bulk *b)
{
	free(b->jobs);
	free(b->bios);
	free(b->moves);
	free(b->tickets);
	free(b->mpart);
}

int eng_bulk_init(struct vc_cache *c, struct bulk *b)
{
	b->n = 0;
	b->jobs = calloc(c->batch_pages, sizeof *b->jobs);
	b->bios = calloc(c->batch_pages, sizeof *b->bios);
	b->moves = calloc((size_t)c->batch_pages * eng_mpp(c), sizeof *b->moves);
	b->tickets = calloc((size_t)c->batch_pages * eng_mpp(c), sizeof *b->tickets);
	b->mpart = calloc((size_t)c->batch_pages * eng_mpp(c), 1);
	if (b->jobs && b->bios && b->moves && b->tickets && b->mpart)
		return 0;
	eng_bulk_fini(b);
	return vc_err(-ENOMEM, "out of memory");
}

/* Unlocked: moves every staged job whose request has not failed between
 * its GPU slot and its staging page (toward the staging page when
 * to_stage), as one batch. On a device failure every such request fails.
 * Integrity mode: pages going down are sealed first; pages come up
 * checked, and one that fails gets job.bad and bio result -EIO (its data
 * is lost: the caller drops it). */
int eng_bulk_move(struct vc_cache *c, struct bulk *b, bool to_stage)
{
	uint32_t m = 0;
	int r = 0;
	for (unsigned k = 0; k < c->ngpus; k++)
		b->perr[k] = 0;
	for (unsigned i = 0; i < b->n && r == 0; i++) {
		struct bulk_job *j = &b->jobs[i];
		j->bad = false;
		if (!j->staged || b->bios[i].result < 0)
			continue;
		struct vc_tiermem *stage = c->gpus[j->p->gpu].stage_bulk;
		uint64_t st = vc_tier_addr(stage, j->stage);
		if (!to_stage && eng_integ(c))
			r = eng_seal(c, j->p, vc_tier_host(stage, j->stage));
		uint32_t k = eng_mv_page(c, j->p, st, to_stage, b->moves + m);
		memset(b->mpart + m, j->p->gpu, k);
		m += k;
	}
	if (r == 0 && m == 0)
		return 0;
	if (r == 0)
		r = eng_fan(c, b->moves, b->mpart, m, b->tickets, b->perr);
	for (unsigned i = 0; i < b->n; i++) {
		struct bulk_job *j = &b->jobs[i];
		if (!j->staged || b->bios[i].result < 0)
			continue;
		int e = eng_dev_err(r) ? b->perr[j->p->gpu] : r;
		if (e < 0)
			b->bios[i].result = e;
		else if (to_stage && eng_integ(c))
			j->bad = eng_stage_bad(c, j->p, &b->bios[i]);
	}
	return r;
}

/* One round of a volume's write-back walk: collects up to batch_pages
 * members of its dirty set in [*pos, last] (page indexes) and writes back
 * those that are dirty when looked up, advancing *pos past the ones done
 * or skipped. Host pages are pinned (readers go on, writers wait); GPU
 * pages are busy while they travel through the bulk staging pages.
 * A member that is clean when looked up (written back or dropped since it
 * was collected, or reserved by a writer that has not let go) is skipped,
 * not removed: only dirty_clear removes members. 1: a round ran, 0: no
 * member is left in the range, or -errno. Cost: O(depth + batch) in the
 * set's lock, O(batch) lookups under c->mu, then the writes. */
int eng_writeback_round(struct vc_volume *v, struct bulk *b, uint64_t *ids, uint64_t *pos,
			uint64_t last)
{
	struct vc_cache *c = v->c;
	uint32_t n = vc_dset_collect(v->dirty, *pos, last, ids, c->batch_pages), i = 0;
	if (n == 0)
		return 0;
	b->n = 0;
	eng_lock(c);
	while (i < n) {
		struct vc_page *p = vc_index_find(&c->ix, v->base + ids[i]);
		if (!p || !p->dirty) {
			i++;
			continue;
		}
		uint64_t st = st_of(p);
		if (st & (VC_ST_BUSY | VC_ST_EXCL)) {
			if (b->n)
				break; /* write what we hold before sleeping */
			eng_wait_page(c, p, st);
			continue; /* look it up again: it may be gone */
		}
		struct bulk_job *j = &b->jobs[b->n];
		*j = (struct bulk_job){ .p = p };
		if (p->tier == GPU) {
			if (!vc_page_claim(p, VC_ST_BUSY, 0)) { /* read in place now */
				if (b->n)
					break;
				eng_wait_page(c, p, st_of(p));
				continue;
			}
			if (atomic_load(&gpu_of(c, p)->off)) {
				/* Its part failed: the dirty page is lost
				 * (VC_GPU_DIRTY_KEEP), and the flush says so. */
				eng_gpu_lost(c, p);
				b->lost = true;
				i++;
				continue;
			}
			if (vc_tier_alloc(gpu_of(c, p)->stage_bulk, &j->stage) < 0) {
				st_clear(c, p, VC_ST_BUSY);
				if (b->n)
					break;
				eng_wait_cv(c); /* another flush or prefetch holds them */
				continue;
			}
			j->staged = true;
		} else if (!eng_grab(p, ACQ_READ, VC_ST_HOST)) { /* a lock-free writer came first */
			if (b->n)
				break;
			eng_wait_page(c, p, st_of(p));
			continue;
		}
		b->bios[b->n] = (struct vc_bio){ .buf = j->staged ? vc_tier_host(gpu_of(c, p)->stage_bulk,
										   j->stage)
								  : host_data(c, p),
						 .off = page_off(c, p->pno),
						 .len = page_len(c, p->pno),
						 .write = 1 };
		b->n++;
		i++;
	}
	eng_unlock(c);
	*pos = i < n ? ids[i] : ids[n - 1] + 1;

	int r = eng_bulk_move(c, b, true);
	if ((r == 0 || eng_dev_err(r)) && b->n) { /* a failed part's jobs failed alone */
		int e = bios_submit(v->bk, b->bios, b->n);
		r = r ? r : e;
	}

	eng_lock(c);
	eng_fail_parts(c, b->perr);
	for (unsigned k = 0; k < b->n; k++) {
		struct vc_page *p = b->jobs[k].p;
		/* Clean before the release, under the pin or BUSY: a writer,
		 * which may own it lock-free once released, must find it clean
		 * and mark it dirty again, not have its mark cleared. */
		if (b->bios[k].result == 0)
			eng_note_written(c, p, b->bios[k].len);
		else if (!b->jobs[k].bad && !eng_dev_err(b->bios[k].result))
			note_refused(c, p, b->bios[k].result); /* it stays dirty: the flush fails */
		if (b->jobs[k].staged) {
			vc_tier_free(gpu_of(c, p)->stage_bulk, b->jobs[k].stage);
			c->st.d2h += c->page_size;
			if (b->jobs[k].bad) { /* its write is lost: the flush fails */
				eng_integ_drop(c, p, p->pno, 0, true);
				if (r == 0)
					r = -EIO;
				continue;
			}
			if (eng_dev_err(b->bios[k].result)) { /* its part failed, and the write */
				eng_gpu_lost(c, p);
				b->lost = true;
				continue;
			}
			st_clear(c, p, VC_ST_BUSY);
		} else {
			atomic_fetch_sub(&p->st, VC_ST_PIN1);
			eng_wake_page(c, p->pno);
		}
	}
	eng_wake(c);
	eng_unlock(c);
	if (eng_dev_err(r)) { /* a failed part's pages are lost (above); the rest went on */
		b->lost = true;
		r = 0;
	}
	return r < 0 ? r : 1;
}

/* Writes back volume v's dirty pages with indexes in [first, last], in
 * rounds of batch_pages; no sync. Every page that was dirty when the call
 * began is written back on return (by it or by someone else), unless an
 * error is returned or it was discarded: members leave the set only once
 * written back or dropped, and the walk visits every member at or past its
 * position. Pages dirtied behind the walk meanwhile may stay dirty. Cost:
 * O(log) when no page of the range is dirty (nothing is in write-through),
 * else O(dirty pages in the range) plus their writes; c->mu is held per
 * round for O(batch_pages) lookups. */
int eng_writeback_range(struct vc_volume *v, uint64_t first, uint64_t last)
{
	struct vc_cache *c = v->c;
	uint64_t pos;
	if (!vc_dset_next(v->dirty, first, last, &pos))
		return 0;
	struct bulk b;
	uint64_t *ids = malloc(c->batch_pages * sizeof *ids);
	int r = ids ? eng_bulk_init(c, &b) : vc_err(-ENOMEM, "out of memory");
	if (r < 0) {
		free(ids);
		return r;
	}
	b.lost = false;
	while ((r = eng_writeback_round(v, &b, ids, &pos, last)) > 0)
		;
	if (r == 0 && b.lost)
		r = vc_err(-EIO, "flush: dirty pages were lost with a failed GPU (vc_stats.gpu_dirty_lost)");
	eng_bulk_fini(&b);
	free(ids);
	return r;
}

/* The dirty pages of [off, off + len) written back, the range clipped as
 * vc_volume_flush_range says: 0 (and *len 0 when there is nothing to
 * write), or -errno. */
static int writeback_clipped(vc_volume *v, uint64_t off, uint64_t *len, const char *what)
{
	if (!v)
		return vc_err(-EINVAL, "%s: NULL volume", what);
	if (*len > UINT64_MAX - off)
		return vc_err(-EINVAL, "%s: range at %llu of %llu bytes wraps", what,
			      (unsigned long long)off, (unsigned long long)*len);
	if (v->readonly || off >= v->size) {
		*len = 0;
		return 0; /* nothing was written there */
	}
	if (*len == 0 || *len > v->size - off)
		*len = v->size - off;
	unsigned sh = v->c->pshift;
	return eng_writeback_range(v, off >> sh, (off + *len - 1) >> sh);
}

int vc_volume_writeback(vc_volume *v, uint64_t off, uint64_t len)
{
	return writeback_clipped(v, off, &len, "vc_volume_writeback");
}

int vc_volume_flush_range(vc_volume *v, uint64_t off, uint64_t len)
{
	int r = writeback_clipped(v, off, &len, "vc_volume_flush_range");
	return r < 0 || len == 0 ? r : vc_backing_sync_range(v->bk, off, len);
}

int vc_volume_flush(vc_volume *v)
{
	if (!v)
		return vc_err(-EINVAL, "vc_flush: NULL cache");
	return vc_volume_flush_range(v, 0, 0);
}

int vc_flush(vc_cache *c)
{
	if (!c)
		return vc_err(-EINVAL, "vc_flush: NULL cache");
	int r = 0;
	for (uint32_t i = 0; i < VC_VOLUMES_MAX && r == 0; i++) {
		eng_lock(c);
		struct vc_volume *v = c->vols[i];
		eng_unlock(c);
		if (v)
			r = vc_volume_flush(v);
	}
	return r;
}
