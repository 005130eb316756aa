/* Test hooks (engine/debug.h). */
#include "engine/debug.h"

#include "engine/engine.h"

#define DUMP_BOUNCE (4u << 20)

int eng_debug_gpu_dump(vc_cache *c, unsigned char **out, size_t *len)
{
	*out = NULL;
	*len = 0;
	if (!c->gpus[0].ls)
		return vc_err(-ENODEV, "no GPU tier to dump");
	struct vc_device *d = c->gpus[0].dev;
	void *bounce;
	uint64_t bounce_dev;
	int r = d->ops->host_alloc(d, DUMP_BOUNCE, &bounce, &bounce_dev);
	if (r < 0)
		return r;
	pthread_mutex_lock(&c->gpus[0].resize_mu);
	const uint64_t total = vc_ls_bytes(c->gpus[0].ls);
	unsigned char *buf = malloc(total ? total : 1);
	if (!buf)
		r = vc_err(-ENOMEM, "out of memory for a %llu-byte dump", (unsigned long long)total);
	uint64_t at = 0;
	for (uint32_t ch = 0; r == 0 && ch < vc_ls_nchunks(c->gpus[0].ls); ch++) {
		if (vc_ls_chunk_state(c->gpus[0].ls, ch) == VC_LS_CHUNK_OFF)
			continue;
		uint64_t addr, n;
		vc_ls_chunk_range(c->gpus[0].ls, ch, &addr, &n);
		for (uint64_t o = 0; r == 0 && o < n && at < total; o += DUMP_BOUNCE) {
			uint64_t k = n - o < DUMP_BOUNCE ? n - o : DUMP_BOUNCE;
			if (k > total - at)
				k = total - at;
			r = d->ops->memcpy_sync(d, bounce_dev, addr + o, k);
			if (r == 0)
				memcpy(buf + at, bounce, k);
			at += k;
		}
	}
	pthread_mutex_unlock(&c->gpus[0].resize_mu);
	d->ops->host_free(d, bounce);
	if (r < 0) {
		free(buf);
		return r;
	}
	*out = buf;
	*len = at;
	return 0;
}

int eng_debug_gpu_poke(vc_volume *v, uint64_t off, unsigned char mask)
{
	struct vc_cache *c = v->c;
	struct vc_device *d = c->gpus[0].dev;
	if (off >= v->size)
		return vc_err(-EINVAL, "poke at %llu: past the end", (unsigned long long)off);
	const uint64_t pno = v->base + (off >> c->pshift);
	void *bounce;
	uint64_t bounce_dev;
	int r = d->ops->host_alloc(d, c->page_size, &bounce, &bounce_dev);
	if (r < 0)
		return r;
	eng_lock(c);
	struct vc_page *p = vc_index_find(&c->ix, pno);
	if (!p || !(st_of(p) & VC_ST_GPU) || p->tier != GPU)
		r = vc_err(-ENOENT, "poke at %llu: the page is not in the GPU tier",
			   (unsigned long long)off);
	else if (!vc_page_claim(p, VC_ST_BUSY, 0))
		r = vc_err(-EBUSY, "poke at %llu: the page is in use", (unsigned long long)off);
	/* The stored unit that holds the byte: the page's slot, or with
	 * dedup its block (shared or not: every page using it sees it). */
	uint32_t len = c->page_size, at = (uint32_t)(off & (c->page_size - 1));
	uint64_t addr = 0;
	if (r == 0 && eng_dd(c)) {
		uint32_t b = c->dd.res[(uint64_t)page_id(c, p) * c->dd.D + at / c->dd.bsize];
		addr = vc_ls_addr(c->gpus[0].ls, vc_ls_where(c->gpus[0].ls, b));
		len = c->dd.bsize;
		at %= c->dd.bsize;
	} else if (r == 0) {
		addr = slot_addr_gpu(c, p);
		d = gpu_of(c, p)->dev; /* host memory from part 0's reaches it too (portable) */
	}
	eng_unlock(c);
	if (r == 0) {
		r = d->ops->memcpy_sync(d, bounce_dev, addr, len);
		((unsigned char *)bounce)[at] ^= mask;
		if (r == 0)
			r = d->ops->memcpy_sync(d, addr, bounce_dev, len);
		eng_lock(c);
		st_clear(c, p, VC_ST_BUSY);
		eng_wake(c);
		eng_unlock(c);
	}
	c->gpus[0].dev->ops->host_free(c->gpus[0].dev, bounce);
	return r;
}

int eng_debug_gpu_fault(vc_cache *c, unsigned gpu)
{
	if (!c || gpu >= c->ngpus || !c->gpus[gpu].ls)
		return vc_err(-EINVAL, "fault: no GPU part %u", gpu);
	return vc_device_fault(c->gpus[gpu].dev);
}

int eng_debug_dedup_collide(vc_cache *c, bool on)
{
	if (!eng_dd(c))
		return vc_err(-EINVAL, "dedup is off");
	dd_lock(&c->dd);
	c->dd.fp_same = on;
	dd_unlock(&c->dd);
	return 0;
}

/* Two of dedup's counters (dd.mu's), read together. */
static int dd_counters(vc_cache *c, const uint64_t *x, const uint64_t *y, uint64_t *a,
		       uint64_t *b)
{
	if (!eng_dd(c))
		return vc_err(-EINVAL, "dedup is off");
	eng_dd_later_drain(c);
	dd_lock(&c->dd);
	*a = *x;
	*b = *y;
	dd_unlock(&c->dd);
	return 0;
}

int eng_debug_dedup_notes(vc_cache *c, uint64_t *back, uint64_t *known)
{
	return dd_counters(c, &c->dd.back_in, &c->dd.known_in, back, known);
}

void eng_debug_lock_profile(vc_cache *c, const char *what)
{
	if (!c->lock_prof_ns)
		return;
	eng_lock(c);
	eng_lock_profile_print(c, what);
	eng_unlock(c);
}

int eng_debug_dedup_kept(vc_cache *c, uint64_t *back, uint64_t *freed)
{
	return dd_counters(c, &c->dd.kept_back, &c->dd.kept_freed, back, freed);
}

int eng_debug_dedup_trips(vc_cache *c, uint64_t *direct, uint64_t *merged_late)
{
	return dd_counters(c, &c->dd.direct_in, &c->dd.merged_late, direct, merged_late);
}

int eng_debug_dedup_later(vc_cache *c, uint64_t *later)
{
	uint64_t none;
	return dd_counters(c, &c->dd.later_in, &c->dd.later_in, later, &none);
}

int eng_debug_dedup_check(vc_cache *c)
{
	if (!eng_dd(c))
		return vc_err(-EINVAL, "dedup is off");
	eng_dd_later_drain(c);
	eng_lock(c);
	int r = eng_dd_check(c);
	eng_unlock(c);
	return r;
}
