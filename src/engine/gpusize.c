/* The GPU tier's size at run time: giving device memory back to other
 * programs and taking it again (BAG section 3.3.5).
 *
 * The tier's memory is chunks of whole log segments (vc_ls chunks, mapped
 * by the device's mem_map). A shrink chooses the chunks that hold the
 * fewest live pages, drains them (appends and cleaning no longer land
 * there), and empties them segment by segment, youngest first: while the
 * rest of the tier has room beyond its watermark, a segment's live pages
 * move there on the device (vc_ls_clean: the hottest pages stay cached);
 * after that, segments are evicted, dirty pages written back first. An
 * empty chunk's memory is overwritten and given back (mem_unmap) outside
 * the engine lock: nothing refers to it any more. A grow maps chunks
 * given back earlier, while the device has room, and their segments join
 * the free pool.
 *
 * Readers and writers keep going meanwhile: the work runs under c->mu in
 * the holds that eviction and cleaning already take (a segment at a
 * time, DROP_CHUNK pages per hold while dropping), and a page that is in
 * flight or pinned makes its segment wait for the next pass. Nothing
 * acknowledged is lost: a dirty page leaves only after its write-back
 * (a failed write-back keeps the page, its segment and so its chunk).
 *
 * Lock rules: c->gpu.resize_mu serialises shrinks and grows (taken before
 * c->mu, never inside it); the counters are atomics, read by
 * vc_get_stats without either lock.
 * Cost: O(live pages of the chunks) host work (claims, drops, stamps) plus
 * one cleaning job per moved segment and one write-back batch per
 * evicted segment with dirty pages; per chunk a device memset and an
 * unmap. */
#include "engine/engine.h"

/* The whole tier's segments: enough for one chunk's sealed list. */
static uint32_t chunk_seg_max(const struct vc_cache *c)
{
	uint32_t first, n = 0;
	for (uint32_t ch = 0; ch < vc_ls_nchunks(c->gpu.ls); ch++) {
		uint32_t k = vc_ls_chunk_segs(c->gpu.ls, ch, &first);
		n = k > n ? k : n;
	}
	return n;
}

/* Under c->mu: moves the live pages of sealed segment seg (in a draining
 * chunk) to the head, elsewhere in the tier. False, with nothing changed,
 * when a page is in flight or pinned, or the room is gone. */
static bool move_seg(struct vc_cache *c, uint32_t seg, struct vc_page **held)
{
	struct vc_ls *ls = c->gpu.ls;
	if (vc_ls_take(ls, seg) < 0)
		return false;
	uint32_t nh = 0;
	if (!eng_segs_claim(c, 1, &seg, held, &nh)) {
		vc_ls_unpick(ls, 1, &seg);
		return false;
	}
	int r = vc_ls_clean(ls, 1, &seg);
	if (r < 0 && r != -ENOSPC) {
		/* The device failed mid-job (as in a cleaning step): which
		 * copy is current is unknown; forget the pages, demote no more. */
		vc_opq_drain(c->opq);
		for (uint32_t i = 0; i < nh; i++)
			eng_page_forget(c, held[i], true);
		c->gpu.off = true;
		eng_wake(c);
		return true; /* the segment is released either way */
	}
	for (uint32_t i = 0; i < nh; i++)
		st_clear(c, held[i], VC_ST_BUSY);
	if (r == -ENOSPC) {
		vc_ls_unpick(ls, 1, &seg);
		return false;
	}
	eng_wake(c);
	return true;
}

/* Under c->mu: empties the draining chunks chs[0..n). Returns 0 once every
 * one is empty, or the first error of a write-back (the chunk holding that
 * dirty page stays). Sleeps on c->cv while pages are busy. */
static int empty_chunks(struct vc_cache *c, const uint32_t *chs, uint32_t n, uint32_t *segs,
			struct vc_page **held, uint64_t *moved, uint64_t *evicted)
{
	struct vc_ls *ls = c->gpu.ls;
	const uint32_t per = vc_ls_slots_per_seg(ls);
	for (;;) {
		bool empty = true, progress = false;
		for (uint32_t i = 0; i < n; i++) {
			if (vc_ls_chunk_empty(ls, chs[i]))
				continue;
			empty = false;
			int k = vc_ls_chunk_sealed(ls, chs[i], segs, chunk_seg_max(c));
			for (int j = 0; j < k; j++) {
				uint32_t live = vc_ls_seg_live(ls, segs[j]);
				/* Room beyond the watermark, for the hottest first. */
				uint64_t keep = (uint64_t)(vc_ls_low(ls) ? 0 : 1) * per;
				uint64_t room = vc_ls_room(ls);
				if (!c->gpu.off && live && room > keep && room - keep >= live &&
				    move_seg(c, segs[j], held)) {
					*moved += live;
					progress = true;
					continue;
				}
				if (vc_ls_take(ls, segs[j]) < 0)
					continue; /* a cleaner or evictor has it: it goes off when done */
				uint64_t ev = 0;
				int r = eng_evict_seg(c, segs[j], &ev);
				*evicted += ev;
				if (r == 0)
					progress = true;
				else if (r != -EAGAIN)
					return r;
			}
		}
		if (empty)
			return 0;
		if (!progress)
			eng_wait_cv(c); /* pins, moves in flight, other threads' segments */
	}
}

/* ON chunks by live pages, fewest first (insertion sort: a tier has few). */
static uint32_t chunks_by_live(struct vc_ls *ls, uint32_t *out)
{
	uint32_t n = 0;
	for (uint32_t ch = vc_ls_nchunks(ls); ch-- > 0;) {
		if (vc_ls_chunk_state(ls, ch) != VC_LS_CHUNK_ON)
			continue;
		uint64_t live = vc_ls_chunk_live(ls, ch);
		uint32_t j = n++;
		for (; j > 0 && vc_ls_chunk_live(ls, out[j - 1]) > live; j--)
			out[j] = out[j - 1];
		out[j] = ch;
	}
	return n;
}

static void stat_max(_Atomic uint64_t *m, uint64_t v)
{
	uint64_t o = atomic_load_explicit(m, memory_order_relaxed);
	while (v > o && !atomic_compare_exchange_weak(m, &o, v))
		;
}

static int resizable(struct vc_cache *c, const char *what)
{
	if (!c)
		return vc_err(-EINVAL, "%s: NULL cache", what);
	if (!c->gpu.ls)
		return vc_err(-EINVAL, "%s: the cache has no GPU tier", what);
	if (!vc_ls_resizable(c->gpu.ls))
		return vc_err(-EOPNOTSUPP, "%s: the device cannot map memory by chunks (no virtual "
					   "memory management), so the GPU tier has a fixed size", what);
	return 0;
}

int vc_gpu_shrink(vc_cache *c, uint64_t bytes, unsigned flags, uint64_t *released)
{
	int r = resizable(c, "vc_gpu_shrink");
	if (released)
		*released = 0;
	if (r < 0)
		return r;
	if (flags & ~VC_SHRINK_REQUESTED)
		return vc_err(-EINVAL, "vc_gpu_shrink: unknown flags %#x", flags);
	if (bytes == 0)
		return 0;
	struct vc_ls *ls = c->gpu.ls;
	const uint32_t nch = vc_ls_nchunks(ls);
	uint32_t *chs = malloc(nch * sizeof *chs);
	uint32_t *segs = malloc(chunk_seg_max(c) * sizeof *segs);
	struct vc_page **held = malloc(vc_ls_slots_per_seg(ls) * sizeof *held);
	if (!chs || !segs || !held) {
		free(chs);
		free(segs);
		free(held);
		return vc_err(-ENOMEM, "out of memory");
	}
	pthread_mutex_lock(&c->gpu.resize_mu);
	const uint64_t t0 = vc_now_ns();
	eng_lock(c);
	/* Chunks a failed write-back left drained come first: they hold
	 * memory and no capacity. */
	uint32_t take = 0;
	uint64_t plan = 0;
	for (uint32_t ch = 0; ch < nch; ch++)
		if (vc_ls_chunk_state(ls, ch) == VC_LS_CHUNK_DRAIN) {
			chs[take++] = ch;
			plan += vc_ls_chunk_bytes(ls, ch);
		}
	uint32_t n = take + chunks_by_live(ls, chs + take);
	while (take < n && plan < bytes) {
		plan += vc_ls_chunk_bytes(ls, chs[take]);
		vc_ls_chunk_drain(ls, chs[take++]);
	}
	uint64_t moved = 0, evicted = 0;
	r = empty_chunks(c, chs, take, segs, held, &moved, &evicted);
	eng_wake(c); /* capacity changed: waiters for GPU room re-check */
	eng_unlock(c);
	/* Empty chunks go back to the device; one that could not be emptied
	 * (a write-back failed) stays drained, its pages cached, until a
	 * later shrink or grow. */
	uint64_t gone = 0, nchunks = 0;
	for (uint32_t i = 0; i < take; i++) {
		eng_lock(c);
		bool empty = vc_ls_chunk_empty(ls, chs[i]);
		eng_unlock(c);
		if (!empty)
			continue;
		uint64_t addr, len;
		vc_ls_chunk_range(ls, chs[i], &addr, &len);
		int e = c->gpu.dev->ops->mem_unmap(c->gpu.dev, addr, len);
		if (e < 0 && r == 0)
			r = e;
		eng_lock(c);
		vc_ls_chunk_gone(ls, chs[i]);
		eng_unlock(c);
		gone += len;
		nchunks++;
	}
	const uint64_t ns = vc_now_ns() - t0;
	atomic_fetch_add(&c->gpu.rs.chunks_released, nchunks);
	atomic_fetch_add(&c->gpu.rs.bytes_released, gone);
	if (flags & VC_SHRINK_REQUESTED)
		atomic_fetch_add(&c->gpu.rs.bytes_released_req, gone);
	atomic_fetch_add(&c->gpu.rs.pages_moved, moved);
	atomic_fetch_add(&c->gpu.rs.shrinks, 1);
	atomic_fetch_add(&c->gpu.rs.shrink_ns_total, ns);
	atomic_store(&c->gpu.rs.shrink_ns_last, ns);
	stat_max(&c->gpu.rs.shrink_ns_max, ns);
	pthread_mutex_unlock(&c->gpu.resize_mu);
	free(chs);
	free(segs);
	free(held);
	if (released)
		*released = gone;
	return r;
}

int vc_gpu_grow(vc_cache *c, uint64_t bytes, uint64_t *grown)
{
	int r = resizable(c, "vc_gpu_grow");
	if (grown)
		*grown = 0;
	if (r < 0)
		return r;
	struct vc_ls *ls = c->gpu.ls;
	uint64_t got = 0;
	pthread_mutex_lock(&c->gpu.resize_mu);
	/* Chunks given back, lowest first. (A chunk that a failed write-back
	 * left drained is not one: the next shrink empties it.) */
	for (uint32_t ch = 0; ch < vc_ls_nchunks(ls) && got < bytes; ch++) {
		eng_lock(c);
		int st = vc_ls_chunk_state(ls, ch);
		eng_unlock(c);
		if (st != VC_LS_CHUNK_OFF)
			continue;
		uint64_t addr, len;
		vc_ls_chunk_range(ls, ch, &addr, &len);
		r = c->gpu.dev->ops->mem_map(c->gpu.dev, addr, len);
		if (r < 0)
			break;
		eng_lock(c);
		vc_ls_chunk_online(ls, ch);
		eng_wake(c);
		eng_unlock(c);
		got += len;
		atomic_fetch_add(&c->gpu.rs.chunks_regained, 1);
	}
	pthread_mutex_unlock(&c->gpu.resize_mu);
	if (grown)
		*grown = got;
	if (r == -ENOMEM && got > 0)
		r = 0; /* what fitted */
	return r;
}

int vc_gpu_mem_info(vc_cache *c, uint64_t *free_bytes, uint64_t *total_bytes)
{
	if (!c || !free_bytes || !total_bytes)
		return vc_err(-EINVAL, "vc_gpu_mem_info: NULL argument");
	if (!c->gpu.dev->ops->mem_info)
		return vc_err(-EOPNOTSUPP, "vc_gpu_mem_info: the device cannot say");
	return c->gpu.dev->ops->mem_info(c->gpu.dev, free_bytes, total_bytes);
}

int vc_gpu_uuid(vc_cache *c, unsigned char uuid[16])
{
	if (!c || !uuid)
		return vc_err(-EINVAL, "vc_gpu_uuid: NULL argument");
	if (!c->gpu.dev->ops->uuid)
		return vc_err(-EOPNOTSUPP, "vc_gpu_uuid: the device has none");
	return c->gpu.dev->ops->uuid(c->gpu.dev, uuid);
}
