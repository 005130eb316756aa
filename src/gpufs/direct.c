/* GPUfs direct reads (vramcache/gpufs.h, struct vc_gfs_file; docs/GPUFS.md,
 * step 4): a file's pages in the OS page cache, mapped read-only and
 * registered with the device, read by warps for pages the cache does not
 * hold, with no request to the host; and the admission of pages that the
 * warps hint at into the GPU tier.
 *
 * Why it is safe: only for files the context opened read-only, so the
 * cache writes nothing to them and a page of the mapping equals the
 * cache's copy (writable files would let a warp read a page half written
 * by a CPU client through the cache, which the engine's pins exclude: the
 * model test's whole-generation pages caught it). A change from outside
 * (close-to-open finds it at a gopen) ends the file's direct reads: it may
 * have cut pages the registration still pins, which the device would read
 * for ever after; vc_gpufs_open maps the file anew.
 *
 * Cost: mapping and registering pin the file's pages in the OS page cache
 * (the ones not there are read first; about 0.03 s/GiB on the H100 host
 * for cached ones) until destroy: direct_max bounds it. The bitmap of
 * cached pages costs one index lookup per page at the open, and dlen /
 * 32768 bytes of device memory and as much host memory. */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "base/error.h"
#include "base/pageno.h"
#include "device/device.h"
#include "engine/gpufs.h"
#include "gpufs/gpufs.h"

#ifdef VC_HAVE_CUDA
#include "device/cuda/gpufs.h"
#endif

int gfs_direct_open(struct vc_gpufs *g, struct gfs_file *f)
{
	struct vc_device *d = g->dev;
	const uint64_t psz = 1ull << g->page_shift;
	uint64_t len = vc_volume_size(f->v) & ~(psz - 1);
	if (f->map && f->dstale)
		gfs_direct_close(g, f);
	if (f->map || g->no_direct || (f->flags & VC_GO_RDWR) || !eng_gfs_file_current(f->v) ||
	    len == 0 || len > g->direct_max)
		return 0;
	void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, f->fd, 0);
	if (m == MAP_FAILED)
		return 0; /* a file that cannot be mapped is read through the cache */
	uint64_t dev = 0, words = ((len >> g->page_shift) + 31) / 32, res = 0;
	uint32_t *bits = calloc(words, sizeof *bits);
	int r = bits ? d->ops->host_register(d, m, len, &dev) : -ENOMEM;
	if (r == -ENOTSUP) { /* the device cannot: the cache serves every page */
		vc_err_clear();
		r = 0;
		goto unmap;
	}
	if (r < 0)
		goto unmap;
	if ((r = d->ops->mem_alloc(d, words * sizeof *bits, &res)) < 0)
		goto unregister;
	for (uint64_t i = 0; i < len >> g->page_shift; i++)
		if (eng_gfs_cached(f->v, i))
			bits[i / 32] |= 1u << (i % 32);
	if ((r = d->ops->memcpy_sync(d, res, (uint64_t)(uintptr_t)bits, words * sizeof *bits)) < 0) {
		d->ops->mem_free(d, res);
		goto unregister;
	}
	f->map = m;
	f->map_len = len;
	f->dmap = dev;
	f->dlen = len;
	f->res_dev = res;
	pthread_mutex_lock(&g->admit_mu);
	f->res_host = bits;
	pthread_mutex_unlock(&g->admit_mu);
	f->dstale = false;
	atomic_fetch_add_explicit(&g->st.direct_files, 1, memory_order_relaxed);
	return 0;
unregister:
	d->ops->host_unregister(d, m);
unmap:
	free(bits);
	munmap(m, len);
	return r;
}

void gfs_direct_stale(struct vc_gpufs *g, struct gfs_file *f)
{
	(void)g;
	if (f->map) {
		f->dlen = 0;
		f->dstale = true;
	}
}

void gfs_direct_close(struct vc_gpufs *g, struct gfs_file *f)
{
	struct vc_device *d = g->dev;
	if (!f->map)
		return;
	d->ops->mem_free(d, f->res_dev);
	d->ops->host_unregister(d, f->map);
	munmap(f->map, f->map_len);
	pthread_mutex_lock(&g->admit_mu);
	free(f->res_host);
	f->res_host = NULL;
	pthread_mutex_unlock(&g->admit_mu);
	f->map = NULL;
	f->map_len = f->dmap = f->dlen = f->res_dev = 0;
	f->dstale = false;
}

/* Copies res words [w0, w1] of f to the device: through the copy engines
 * (CUDA: no SM, nothing waits for the kernels), word by word atomically on
 * the emulated device (its warps set bits meanwhile). A warp's bit that a
 * copy overwrites is a hint lost: the page is read directly once more. */
static void res_push(struct vc_gpufs *g, struct gfs_file *f, uint64_t w0, uint64_t w1)
{
	if (g->emu) {
		uint32_t *dst = (uint32_t *)(uintptr_t)f->res_dev;
		for (uint64_t i = w0; i <= w1; i++)
			__atomic_store_n(&dst[i], f->res_host[i], __ATOMIC_RELAXED);
		return;
	}
#ifdef VC_HAVE_CUDA
	(void)vc_cuda_gfs_put(g->dev, g->rev_stream, f->res_dev + w0 * sizeof(uint32_t), &f->res_host[w0],
			      (w1 - w0 + 1) * sizeof(uint32_t));
#endif
}

#define ADMIT_BATCH 256

/* The hints taken (up to ADMIT_BATCH), a file's at a time, loaded into the
 * GPU tier (eng_gfs_load sorts them and skips cached pages), and every one
 * cached afterwards marked in res, one copy per file of the words between
 * its first and last page. Under admit_mu, with the hinted file's rw held
 * shared (no reopen drops its pages meanwhile). Cost: the load (a backing
 * read round and a batched move), O(n log n), and O(n) a hinted file. */
bool gfs_admit(struct vc_gpufs *g)
{
	if (pthread_mutex_trylock(&g->admit_mu) != 0)
		return false;
	uint64_t list[ADMIT_BATCH], keys[ADMIT_BATCH];
	uint32_t n = 0;
	while (n < ADMIT_BATCH) {
		uint64_t *slot = &g->hints[g->hint_head & (g->nhint - 1)];
		uint64_t v = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
		if (!v)
			break; /* not written yet (or never: lapped) */
		__atomic_store_n(slot, 0, __ATOMIC_RELAXED);
		g->hint_head++;
		keys[n++] = v - 1;
	}
	if (!n) {
		pthread_mutex_unlock(&g->admit_mu);
		return false;
	}
	const uint64_t vol_mask = ~((1ull << VC_PNO_VOL_SHIFT) - 1);
	while (n) {
		/* This file's hints into grp, the others kept for the next. */
		uint64_t base = keys[0] & vol_mask, grp[ADMIT_BATCH];
		uint32_t m = 0, rest = 0;
		for (uint32_t k = 0; k < n; k++) {
			if ((keys[k] & vol_mask) == base)
				grp[m++] = keys[k];
			else
				keys[rest++] = keys[k];
		}
		n = rest;
		struct gfs_file *f = NULL;
		pthread_mutex_lock(&g->mu);
		for (int k = 0; k < VC_GFS_MAX_FILES && !f; k++)
			if (g->files[k].path && g->files[k].res_host && eng_gfs_base(g->files[k].v) == base)
				f = &g->files[k];
		pthread_mutex_unlock(&g->mu);
		if (!f || pthread_rwlock_tryrdlock(&f->rw) != 0)
			continue;
		uint64_t pages = f->dlen >> g->page_shift, w0 = UINT64_MAX, w1 = 0;
		uint32_t nl = 0, rounds, loaded;
		for (uint32_t k = 0; k < m; k++)
			if ((grp[k] & ~vol_mask) < pages)
				list[nl++] = grp[k];
		eng_gfs_load(g->c, list, nl, &rounds, &loaded);
		atomic_fetch_add_explicit(&g->st.admitted, loaded, memory_order_relaxed);
		for (uint32_t k = 0; k < m; k++) {
			uint64_t idx = grp[k] & ~vol_mask;
			if (idx < pages && eng_gfs_cached(f->v, idx)) {
				f->res_host[idx / 32] |= 1u << (idx % 32);
				w0 = idx / 32 < w0 ? idx / 32 : w0;
				w1 = idx / 32 > w1 ? idx / 32 : w1;
			}
		}
		if (w0 <= w1)
			res_push(g, f, w0, w1);
		pthread_rwlock_unlock(&f->rw);
	}
	pthread_mutex_unlock(&g->admit_mu);
	return true;
}
