/* The engine's side of the GPU file API (engine/gpufs.h). */
#include "engine/gpufs.h"
#include "engine/engine.h"
#include "vramcache/gpufs.h"

int eng_gfs_check(vc_cache *c)
{
	if (c->ngpus > 1)
		return vc_err(-ENOTSUP, "gpufs: not with a GPU tier over %u parts (vc_config.gpus): "
					"kernels read the pages of one GPU in place", c->ngpus);
	if (eng_dd(c))
		return vc_err(-ENOTSUP, "gpufs: not with dedup on (vc_config.dedup): a GPU-tier page "
					"is blocks in scattered slots, which kernels cannot read in place");
	if (c->gt.cipher)
		return vc_err(-ENOTSUP, "gpufs: not with encryption on (vc_config.encrypt): the GPU "
					"tier holds ciphertext and the key never leaves host memory");
	return 0;
}

struct vc_device *eng_gfs_device(vc_cache *c)
{
	return c->gpus[0].dev;
}

uint64_t eng_gfs_base(vc_volume *v)
{
	return v->base;
}

bool eng_gfs_file_current(vc_volume *v)
{
	return v->readonly || v->c->write_mode == VC_WRITE_THROUGH;
}

bool eng_gfs_cached(vc_volume *v, uint64_t idx)
{
	return vc_index_peek(&v->c->ix, v->base + idx) != NULL;
}

uint64_t eng_gfs_npool(vc_cache *c)
{
	return c->ix.npool;
}

/* Pinned page p: the address where the device reads its bytes. */
static uint64_t pin_addr(const struct vc_cache *c, const struct vc_page *p, int tier)
{
	return tier == GPU ? slot_addr_gpu(c, p) : vc_tier_addr(c->host, p->slot);
}

int eng_gfs_pin(vc_volume *v, uint64_t idx, bool host, uint32_t *id, uint64_t *addr)
{
	struct vc_cache *c = v->c;
	if (idx >= (atomic_load(&v->size) + c->page_size - 1) >> c->pshift)
		return vc_err(-ENXIO, "gpufs: page %llu past the end", (unsigned long long)idx);
	uint64_t pno = v->base + idx;
	struct tstate *t = eng_tstate(c);
	for (int round = 0;; round++) {
		int tier;
		struct vc_page *p = eng_pin_fast(c, pno, !host, &tier);
		if (p) {
			eng_note_hit_fast(c, t, p, tier);
			*id = page_id(c, p);
			*addr = pin_addr(c, p, tier);
			return 0;
		}
		/* Not cached (or busy, owned, racing): into the GPU tier when it
		 * works, else (or after two tries) through the ordinary path,
		 * which waits for the page and leaves it pinned in the host tier. */
		if (round < 2 && !host && c->gpus[0].ls && !atomic_load(&c->gpus[0].off) &&
		    !vc_index_peek(&c->ix, pno)) {
			int r = vc_volume_prefetch(v, idx << c->pshift, c->page_size, GPU);
			if (r < 0)
				return r;
			continue;
		}
		int r = eng_acquire(c, pno, ACQ_READ, true, false, &p);
		if (r < 0)
			return r;
		*id = page_id(c, p);
		*addr = pin_addr(c, p, HOST);
		return 0;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

void eng_gfs_load(vc_cache *c, uint64_t *list, uint32_t n, uint32_t *rounds, uint32_t *loaded)
{
	*rounds = *loaded = 0;
	if (!n || !c->gpus[0].ls || atomic_load(&c->gpus[0].off))
		return;
	/* Cached pages leave the list first, lock-free: a batch of hits
	 * costs no engine lock. */
	uint32_t m = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!vc_index_peek(&c->ix, list[i]))
			list[m++] = list[i];
	if (!m)
		return;
	qsort(list, m, sizeof *list, cmp_u64);
	uint32_t k = 1;
	for (uint32_t i = 1; i < m; i++)
		if (list[i] != list[k - 1])
			list[k++] = list[i];
	(void)eng_prefetch_gpu_list(c, list, k, rounds, loaded);
}

void eng_gfs_quiet(vc_cache *c, bool on)
{
	if (on)
		atomic_fetch_add(&c->gpus[0].quiet, 1);
	else
		atomic_fetch_sub(&c->gpus[0].quiet, 1);
	vc_batcher_set_dma(c->gpus[0].bat, on);
}

void eng_gfs_unpin(vc_cache *c, uint32_t id)
{
	eng_unpin(c, &c->ix.pool[id]);
}

_Static_assert(PW_BUCKETS == VC_GFS_BUCKETS, "GPUfs revoke passes select the engine's wait buckets");

uint32_t eng_gfs_wait_sel(vc_cache *c, uint32_t *sel, uint64_t *stalls, bool *resource)
{
	uint32_t n = 0;
	for (uint32_t b = 0; b < PW_BUCKETS; b++)
		if (atomic_load_explicit(&c->pw_waiters[b], memory_order_relaxed)) {
			sel[b / 32] |= 1u << (b % 32);
			n++;
		}
	for (uint32_t i = 0; i < PW_BUCKETS / 32; i++) {
		uint32_t w = atomic_exchange(&c->pin_want[i], 0);
		sel[i] |= w;
		n += (uint32_t)__builtin_popcount(w);
	}
	*stalls = atomic_load_explicit(&c->pin_stalls, memory_order_relaxed);
	*resource = atomic_load_explicit(&c->nwaiters, memory_order_relaxed) ||
		    atomic_load_explicit(&c->slot_waiters, memory_order_relaxed);
	return n;
}

uint64_t eng_gfs_writes(vc_volume *v, uint64_t *begun)
{
	return vc_backing_writes(v->bk, begun);
}

int eng_gfs_flush(vc_volume *v, _Atomic uint64_t *synced, bool *did)
{
	*did = false;
	if (v->readonly)
		return 0;
	/* The dirty pages first (their writes count), then the count: what
	 * the sync below covers is everything counted up to w. */
	uint64_t size = atomic_load(&v->size);
	int r = size ? eng_writeback_range(v, 0, (size - 1) >> v->c->pshift) : 0;
	if (r < 0)
		return r;
	uint64_t w = vc_backing_writes(v->bk, NULL), s = atomic_load(synced);
	if (w == s)
		return 0;
	r = vc_backing_sync(v->bk);
	if (r < 0)
		return r;
	*did = true;
	while (s < w && !atomic_compare_exchange_weak(synced, &s, w))
		;
	return 0;
}
