/* GPUfs's reaper: the thread that drops the pins the device handed back
 * (the unpin ring) and asks for revoke passes (gpufs.h has the lock rules,
 * docs/GPUFS.md the design).
 *
 * The reaper asks for a revoke pass (device table entries nobody pins
 * become DEAD; their pins are dropped here) for the entries that engine
 * sleepers may wait for (pass_select): those of the pages they sleep on,
 * and a share more when pins kept the engine from making room or the
 * table holds max_cached grants; the user's warps do the pass (see
 * "Revoke passes" below).
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "base/clock.h"
#include "device/device.h"
#include "engine/gpufs.h"
#include "gpufs/gpufs.h"

#ifdef VC_HAVE_CUDA
#include "device/cuda/gpufs.h"
#endif

/* The reaper looks at the engine's sleepers and the table's grants this
 * often: bounds how long a CPU writer waits for an idle table entry. */
#define REAPER_NS 200000
/* ... and drains the unpin ring this often: how long a handed-back pin may
 * keep a writer waiting. */
#define UNPIN_NS 20000

/* ---- grants ---------------------------------------------------------------- */

static void grant_drop(struct vc_gpufs *g, uint32_t id, bool cached)
{
	if (id >= g->npool)
		return; /* a device bug: never trust an id blindly */
	uint32_t h = atomic_load(&g->held[id]);
	do {
		if (h == 0)
			return;
	} while (!atomic_compare_exchange_weak(&g->held[id], &h, h - 1));
	atomic_fetch_sub(&g->nheld, 1);
	if (cached)
		atomic_fetch_sub(&g->ncached, 1);
	eng_gfs_unpin(g->c, id);
}

/* ---- revoking ------------------------------------------------------------------ */

/* Revoke passes (entries nobody pins leave the table, their engine pins
 * drop) run without a kernel: the reaper asks for one by writing the
 * pass's words in device memory through the copy engines (CUDA; plain
 * stores on emu), and the user's warps share it at their next call or
 * while they wait for the host (vc_gfs_revoke_help); the warp that
 * finishes the last chunk publishes the revoked ids. The reaper polls for
 * that between its unpin drains, never waiting on the device. A pass that
 * no warp finishes within REVOKE_COOP_NS (the kernel computes without
 * calls, or has ended) gets the fallback: the revoke kernel on CUDA,
 * which takes the chunks left once an SM is free, the reaper itself on
 * emu. Everything here is under revoke_mu. */
#define REVOKE_COOP_NS 2000000
/* pass_select: reaper looks (REAPER_NS apart) with resource sleepers in a
 * row before a pass takes an eighth of the table for them: 5 ms. */
#define RESOURCE_TICKS 25

/* Which entries the next pass revokes (sel: VC_GFS_BUCKETS bits), or
 * false for no pass. Those that engine sleepers may wait for: the buckets
 * of the pages they wait for, and, when room could not be made because of
 * pins (the engine's pin stalls grew) or the table holds max_cached
 * grants, an eighth of the rest more (32 buckets, the next eighth each
 * time). A table of grants that nobody waits for is left alone: the step
 * before revoked every entry at any sleeper, staging and I/O waits
 * included, and a kernel re-asked the host for pages it had been granted
 * (docs/GPUFS.md, step 4). */
static bool pass_select(struct vc_gpufs *g, uint32_t *sel)
{
	memset(sel, 0, VC_GFS_BUCKETS / 8);
	uint64_t stalls;
	bool resource;
	uint32_t n = eng_gfs_wait_sel(g->c, sel, &stalls, &resource);
	bool want = atomic_exchange(&g->want_revoke, false);
	/* Resource sleepers that stay (RESOURCE_TICKS looks in a row) may be
	 * waiting for pins after all: an eighth more each time, the net under
	 * every wait the engine does not tell apart. */
	g->rev_resource = resource ? g->rev_resource + 1 : 0;
	if (stalls != g->rev_stalls || want || g->rev_resource >= RESOURCE_TICKS) {
		g->rev_stalls = stalls;
		g->rev_resource = 0;
		sel[g->rev_eighth++ % (VC_GFS_BUCKETS / 32)] = ~0u;
		n++;
	}
	return n != 0;
}

/* Asks for pass g->rev_gen + 1: one store of ctl.rev_req (the counters
 * never go back: gpufs.h's struct vc_gfs_ctl). The previous pass is done
 * and its output taken. */
static int pass_start(struct vc_gpufs *g, const uint32_t *sel)
{
	uint32_t gen = g->rev_gen + 1;
	int r = 0;
	if (g->emu) {
		struct vc_gfs_ctl *ctl = (struct vc_gfs_ctl *)(uintptr_t)g->ctl_dev;
		memcpy(ctl->rev_sel, sel, sizeof ctl->rev_sel);
		__atomic_store_n(&ctl->rev_req, gen, __ATOMIC_RELEASE);
	} else {
#ifdef VC_HAVE_CUDA
		/* The copies read g->sig when they run: it stays put until the
		 * next pass, which starts after this one's output was seen. The
		 * selection lands first (one stream: in order), so a warp that
		 * claims a chunk of this pass reads this pass's. */
		memcpy(g->sig->sel, sel, sizeof g->sig->sel);
		g->sig->gen = gen;
		r = vc_cuda_gfs_put(g->dev, g->rev_stream, g->ctl_dev + offsetof(struct vc_gfs_ctl, rev_sel),
				    g->sig->sel, sizeof g->sig->sel);
		if (r == 0)
			r = vc_cuda_gfs_put(g->dev, g->rev_stream,
					    g->ctl_dev + offsetof(struct vc_gfs_ctl, rev_req), &g->sig->gen,
					    sizeof g->sig->gen);
#else
		r = -ENOTSUP;
#endif
	}
	if (r < 0)
		return r;
	g->rev_gen = gen;
	g->rev_active = true;
	g->rev_fallback = false;
	g->rev_t0 = vc_now_ns();
	atomic_store(&g->st.pass_t0, g->rev_t0);
	return 0;
}

/* The pass in progress: drops the pins it revoked once published, sends
 * the fallback when it is overdue. */
static void pass_poll(struct vc_gpufs *g)
{
	if (__atomic_load_n(&g->rev[g->ntab + 1], __ATOMIC_ACQUIRE) != g->rev_gen) {
		if (g->rev_fallback || vc_now_ns() - g->rev_t0 < REVOKE_COOP_NS)
			return;
		g->rev_fallback = true;
		atomic_fetch_add_explicit(&g->st.rev_fallbacks, 1, memory_order_relaxed);
		if (g->emu) {
			vc_gfs_revoke_help(&g->ctx, vc_gfs_warp_self());
		} else {
#ifdef VC_HAVE_CUDA
			(void)vc_cuda_gfs_revoke_kernel(g->dev, &g->ctx, g->rev_stream);
#endif
		}
		if (__atomic_load_n(&g->rev[g->ntab + 1], __ATOMIC_ACQUIRE) != g->rev_gen)
			return;
	}
	/* The pass's ids: rev_n's count since the last pass, from there on
	 * (mod entries; a pass revokes each entry at most once). */
	uint32_t end = __atomic_load_n(&g->rev[g->ntab], __ATOMIC_ACQUIRE);
	uint32_t n = end - g->rev_seen;
	if (n > g->ntab)
		n = g->ntab; /* a device bug: never trust a count blindly */
	for (uint32_t i = 0; i < n; i++)
		grant_drop(g, __atomic_load_n(&g->rev[(g->rev_seen + i) & (g->ntab - 1)], __ATOMIC_RELAXED),
			   true);
	g->rev_seen = end;
	g->rev_active = false;
	atomic_store(&g->st.pass_t0, 0);
	atomic_fetch_add_explicit(&g->st.revokes, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&g->st.revoked, n, memory_order_relaxed);
}

/* Release, after the user's kernels: no pass is left in progress (a
 * fallback kernel is waited for; a pass that warps left unfinished needs
 * nothing: release drops every pin and resets the words). */
void gfs_pass_settle(struct vc_gpufs *g)
{
	if (g->rev_active && g->rev_fallback && !g->emu) {
#ifdef VC_HAVE_CUDA
		(void)vc_cuda_gfs_stream_sync(g->dev, g->rev_stream);
#endif
	}
	g->rev_active = false;
	atomic_store(&g->st.pass_t0, 0);
	g->rev_gen = 0;
	g->rev_seen = 0;
	__atomic_store_n(&g->rev[g->ntab], 0, __ATOMIC_RELEASE);
	__atomic_store_n(&g->rev[g->ntab + 1], 0, __ATOMIC_RELEASE);
}

/* Serves the unpin ring's published requests (the reaper's; never sleeps
 * in the engine). Under revoke_mu, which release takes too. */
void gfs_drain_unpins(struct vc_gpufs *g)
{
	for (;;) {
		uint64_t t = g->uhead;
		struct vc_gfs_req *s = &g->uring[t & (g->nring - 1)];
		if (gfs_ld64(&s->seq) != t + 1)
			return;
		for (uint32_t i = 0; i < s->nids && i < VC_GFS_IDS; i++)
			grant_drop(g, s->ids[i], s->flags & VC_GFS_R_CACHE);
		atomic_fetch_add_explicit(&g->st.requests, 1, memory_order_relaxed);
		gfs_st64(&s->done, t + 1);
		gfs_st64(&s->ack, t + 1);
		g->uhead = t + 1;
	}
}

void *gfs_reaper_main(void *arg)
{
	struct vc_gpufs *g = arg;
	unsigned k = 0;
	while (!atomic_load(&g->stop)) {
		gfs_nap(UNPIN_NS);
		pthread_mutex_lock(&g->revoke_mu);
		gfs_drain_unpins(g);
		if (g->rev_active) {
			pass_poll(g);
		} else if (++k >= REAPER_NS / UNPIN_NS) {
			k = 0;
			uint32_t sel[VC_GFS_BUCKETS / 32];
			if (atomic_load(&g->ncached) && pass_select(g, sel))
				(void)pass_start(g, sel);
		}
		pthread_mutex_unlock(&g->revoke_mu);
	}
	return NULL;
}
