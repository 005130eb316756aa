/* GPUfs on the emulated device: kernels are CPU threads standing in for
 * warps of one lane, running the device half (vramcache/gpufs.h compiled
 * for the host) over the same context; device memory is host memory, so
 * the host's part of a revoke pass is plain stores (host.c). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "base/error.h"
#include "gpufs/gpufs.h"

struct emu_run {
	struct vc_gpufs *g;
	void (*fn)(const struct vc_gfs_ctx *ctx, unsigned warp, void *arg);
	void *arg;
	unsigned nwarps;
	_Atomic unsigned next;
};

static void *emu_worker(void *p)
{
	struct emu_run *run = p;
	struct vc_gfs_ctx ctx = run->g->ctx; /* by value, as a kernel's parameter */
	for (;;) {
		unsigned w = atomic_fetch_add(&run->next, 1);
		if (w >= run->nwarps)
			return NULL;
		run->fn(&ctx, w, run->arg);
	}
}

int vc_gpufs_emu_run(vc_gpufs *g, unsigned nwarps, unsigned threads,
		     void (*fn)(const struct vc_gfs_ctx *ctx, unsigned warp, void *arg), void *arg)
{
	if (!g || !fn)
		return vc_err(-EINVAL, "vc_gpufs_emu_run: NULL argument");
	if (!g->emu)
		return vc_err(-ENOTSUP, "vc_gpufs_emu_run: the cache is on a GPU; launch a kernel");
	if (threads == 0)
		threads = 1;
	if (threads > nwarps)
		threads = nwarps ? nwarps : 1;
	struct emu_run run = { .g = g, .fn = fn, .arg = arg, .nwarps = nwarps };
	pthread_t *t = calloc(threads, sizeof *t);
	if (!t)
		return -ENOMEM;
	unsigned started = 0;
	for (; started < threads; started++)
		if (pthread_create(&t[started], NULL, emu_worker, &run) != 0)
			break;
	if (started == 0) {
		free(t);
		return vc_err(-EAGAIN, "vc_gpufs_emu_run: cannot start threads");
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	free(t);
	return 0;
}
