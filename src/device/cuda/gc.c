/* CUDA backend: cleaning jobs (BAG's GPU garbage collector) on the device,
 * kernels in kernels/gc.cu. One job at a time per device, on a stream of
 * its own, with scratch that grows to the largest job seen and lives until
 * close. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomics.h"
#include "base/clock.h"
#include "base/env.h"
#include "base/error.h"
#include "device/cuda/internal.h"
#include "vramcache.h"

/* VC_CUDA_GC_BLOCKS caps both grids (tests use it to run every
 * grid-stride loop more than once); unset, the caps fill the GPU. */
static int gc_setup(struct cu_dev *c)
{
	struct cu_gc *g = &c->gc;
	int gather = 0, move = 0;
	int r = CU((cudaError_t)vc_cuda_gc_blocks_per_sm(&gather, &move));
	if (r < 0)
		return r;
	g->gather_blocks = c->sms * (uint32_t)(gather > 0 ? gather : 1);
	g->move_blocks = c->sms * (uint32_t)(move > 0 ? move : 1);
	const uint32_t cap = vc_env_u32("VC_CUDA_GC_BLOCKS", UINT32_MAX, 1, UINT32_MAX);
	g->gather_blocks = cap < g->gather_blocks ? cap : g->gather_blocks;
	g->move_blocks = cap < g->move_blocks ? cap : g->move_blocks;
	void *h;
	uint64_t dv;
	if ((r = vc_cu_host_alloc(&c->dev, sizeof *g->count, &h, &dv)) < 0)
		return r;
	g->count = h;
	g->count_dev = (struct vc_cuda_gc_count *)(uintptr_t)dv;
	r = CU(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
	if (r < 0) {
		vc_cu_host_free(&c->dev, g->count);
		g->count = NULL;
		return r;
	}
	g->ready = true;
	return 0;
}

void vc_cu_gc_release(struct cu_dev *c)
{
	struct cu_gc *g = &c->gc;
	if (!g->ready)
		return;
	(void)CU(cudaStreamSynchronize(g->stream));
	(void)CU(cudaStreamDestroy(g->stream));
	(void)CU(cudaFree(g->slot_mem));
	(void)CU(cudaFree(g->sort_mem));
	(void)CU(cudaFree(g->list_dev));
	vc_cu_host_free(&c->dev, g->list_host);
	vc_cu_host_free(&c->dev, g->count);
	memset(g, 0, sizeof *g);
}

/* Capacity at least `need`, doubling, so that a run of growing jobs
 * reallocates O(log) times. */
static uint32_t grow_to(uint32_t have, uint64_t need, uint32_t floor)
{
	uint64_t n = have ? have : floor;
	while (n < need)
		n *= 2;
	return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* Scratch for `slots` source positions and `lists` segment numbers. The
 * previous job has synchronized, so old buffers are free to go; on failure
 * the old ones stay. */
static int gc_reserve(struct cu_dev *c, uint64_t slots, uint64_t lists)
{
	struct cu_gc *g = &c->gc;
	int r;
	if (slots > g->slot_cap) {
		/* 64K positions: 64 segments of 1024 slots, the usual job */
		uint32_t cap = grow_to(g->slot_cap, slots, 1u << 16);
		if (cap > VC_GC_MAX_SLOTS)
			cap = VC_GC_MAX_SLOTS;
		size_t sort_bytes = 0;
		void *mem = NULL, *sort = NULL;
		if ((r = CU((cudaError_t)vc_cuda_gc_sort_bytes(cap, &sort_bytes))) < 0)
			return r;
		sort_bytes = sort_bytes < 256 ? 256 : sort_bytes;
		if ((r = CU(cudaMalloc(&mem, vc_cuda_gc_slot_bytes(cap)))) < 0)
			return r;
		if ((r = CU(cudaMalloc(&sort, sort_bytes))) < 0) {
			(void)CU(cudaFree(mem));
			return r;
		}
		struct vc_cuda_gc_scratch s = { 0 };
		vc_cuda_gc_carve(mem, cap, &s);
		if ((r = CU(cudaMemsetAsync(s.done, 0, sizeof *s.done, g->stream))) < 0) {
			(void)CU(cudaFree(sort));
			(void)CU(cudaFree(mem));
			return r;
		}
		(void)CU(cudaFree(g->slot_mem));
		(void)CU(cudaFree(g->sort_mem));
		g->slot_mem = mem;
		g->sort_mem = sort;
		g->slot_cap = cap;
		s.sort_tmp = sort;
		s.sort_bytes = sort_bytes;
		s.src = g->s.src;
		s.dst = g->s.dst;
		g->s = s;
	}
	if (lists > g->list_cap) {
		uint32_t cap = grow_to(g->list_cap, lists, 1024);
		void *dev = NULL, *host = NULL;
		uint64_t host_dev;
		if ((r = CU(cudaMalloc(&dev, (size_t)cap * sizeof(uint32_t)))) < 0)
			return r;
		if ((r = vc_cu_host_alloc(&c->dev, (size_t)cap * sizeof(uint32_t), &host, &host_dev)) < 0) {
			(void)CU(cudaFree(dev));
			return r;
		}
		(void)CU(cudaFree(g->list_dev));
		vc_cu_host_free(&c->dev, g->list_host);
		g->list_dev = dev;
		g->list_host = host;
		g->list_host_dev = (uint32_t *)(uintptr_t)host_dev;
		g->list_cap = cap;
	}
	return 0;
}

/* The host's share is O(nsrc + ndst): staging the lists, the launches of
 * both steps back to back (see kernels/gc.h), and one synchronization at
 * the end. vc_gc_check has settled -ENOSPC from the statement; a wrong
 * statement is caught on the device before anything moves. */
static int cu_gc_run_locked(struct cu_dev *c, struct vc_gc_job *job)
{
	struct cu_gc *g = &c->gc;
	int r;
	if (!g->ready && (r = gc_setup(c)) < 0)
		return r;
	const uint64_t S = (uint64_t)job->nsrc * job->per_seg;
	if (S > g->slot_cap || (uint64_t)job->nsrc + job->ndst > g->list_cap) {
		vc_cu_quiesce(c); /* it frees the old scratch */
		r = gc_reserve(c, S, (uint64_t)job->nsrc + job->ndst);
		vc_cu_unquiesce(c);
		if (r < 0)
			return r;
	}
	memcpy(g->list_host, job->src, (size_t)job->nsrc * sizeof(uint32_t));
	if (job->ndst)
		memcpy(g->list_host + job->nsrc, job->dst, (size_t)job->ndst * sizeof(uint32_t));
	struct vc_cuda_gc_job kj = {
		.base = job->base,
		.key = (uint32_t *)(uintptr_t)job->key_dev,
		.stamp = (uint64_t *)(uintptr_t)job->stamp_dev,
		.where = (uint32_t *)(uintptr_t)job->where_dev,
		.lists = g->list_host_dev,
		.nsrc = job->nsrc,
		.ndst = job->ndst,
		.per_seg = job->per_seg,
		.page_size = job->page_size,
		.dst_first = job->dst_first,
		.nowners = job->where_dev ? job->nowners : 0,
		.live = job->live,
		.smin = job->stamp_min,
		.smax = job->stamp_max,
	};
	g->s.src = g->list_dev;
	g->s.dst = g->list_dev + job->nsrc;
	r = CU((cudaError_t)vc_cuda_gc_gather(&kj, &g->s, g->count_dev, g->gather_blocks, g->stream));
	if (r == 0 && job->live > 0)
		r = CU((cudaError_t)vc_cuda_gc_finish(&kj, &g->s, g->gather_blocks, g->move_blocks,
						      g->stream));
	/* Also after a failed launch: what was enqueued still reads the lists. */
	int rs = CU(cudaStreamSynchronize(g->stream));
	if (r < 0 || (r = rs) < 0)
		return r;
	const struct vc_cuda_gc_count cnt = *g->count;
	if (!cnt.go)
		return vc_err(-EINVAL,
			      "cuda: gc: the job states %u live pages in stamps [%llu, %llu]; %u are "
			      "live in [%llu, %llu]; nothing moved",
			      job->live, (unsigned long long)job->stamp_min,
			      (unsigned long long)job->stamp_max, cnt.live, (unsigned long long)cnt.min,
			      (unsigned long long)cnt.max);
	job->moved = cnt.live;
	return 0;
}

int vc_cu_gc_run(struct vc_device *d, struct vc_gc_job *job)
{
	struct cu_dev *c = CUD(d);
	int r = vc_gc_check(job);
	if (r < 0)
		return r;
	if (job->nsrc == 0) {
		job->moved = 0;
		return 0;
	}
	if ((r = vc_cu_enter(c)) < 0)
		return r;
	pthread_mutex_lock(&c->gc_mu);
	r = cu_gc_run_locked(c, job);
	pthread_mutex_unlock(&c->gc_mu);
	return r;
}


