/* BAG Table 1 (Chen et al., "Managing GPU as Buffer Cache in Operating
 * Systems", TPDS 2014): cleaning the log-structured GPU store, in time per
 * GiB of store. The paper reports 24.2 ms per GiB on a GTX 480, 60x its
 * CPU version.
 *
 * Store: S MiB of 4 MiB segments of 4 KiB pages (--page, --seg-mib), S in
 * 128, 256, 512, 768, 1024 MiB and 16 GiB; sizes that do not fit in free
 * device memory are skipped, saying so (on emu only 128 MiB unless --full).
 * At load factor lf (0.8, 0.9) every segment holds round(lf * slots) live
 * pages at random slots, owners drawn as a random permutation (page ids
 * unrelated to log position; --owners seq: in log order), stamps in log
 * order plus a random offset of up to one segment's worth, so neighbouring
 * segments interleave and the sort does real work. Free destination
 * segments follow the store. The whole store is cleaned, J segments per
 * job (--jobs, default 256, 64 and 8; the goals are judged at the first),
 * in log order, destinations continuing mid-segment from job to job.
 *
 *   ours      gc_run per job, index update included: the index an engine
 *             owes, loc[owner] = new global slot for every moved page (a
 *             uint32 array indexed by owner, in mapped pinned memory: the
 *             log store's where[]), is written by the move kernel. Each job
 *             states its live count and stamp bounds as the log store does
 *             (per-segment bounds, here one segment's worth wider than the
 *             stamps), so the device needs no mid-job round trip.
 *   host-index  the previous design, for comparison in the same run: gc_run
 *             without where[], then the index update on the host, on 4
 *             helper threads (pieces of 32K pages, owners read from key[]
 *             of the destination range) while the next job runs on the
 *             device; the time is from the first job's start to the last
 *             update's end.
 *   baseline  the CPU-driven cleaner: per job, collect the live slots and
 *             sort them by (stamp, position) on the CPU, one
 *             cudaMemcpyAsync device to device per page on a stream, then
 *             a synchronize; the CPU writes key[] and stamp[]; the same
 *             index update. On emu, one memcpy_sync per page. Run over the
 *             first --baseline-mib of the store (it is slow; jobs are alike).
 *   d2d       one memcpy_sync (cudaMemcpyAsync device to device) of the
 *             store's live bytes: the bulk copy rate, measured in the same
 *             run.
 * Reported per size, lf and J: live bytes moved, ms per GiB of store, GB/s
 * of live bytes, ours/d2d and ours/baseline. Figures are medians of --reps
 * (5; --quick 3) after a warm-up; the store's tables are restored from a
 * copy before each repetition (the page data needs no restoring: cleaning
 * only reads the sources and writes free destinations). After the first
 * repetition the index is checked (every owner at a destination slot that
 * names it) and 64 pages are compared with their originals.
 *
 * Goals (the issue's): at J = the first --jobs value, ours/d2d >= 0.70 and
 * ours/baseline >= 50, for every size.
 *
 * Usage: gc_table1 [--device cuda|emu|auto] [--json FILE] [--quick] [--full]
 *                  [--sizes MIB,...] [--lf X,...] [--jobs N,...] [--page BYTES]
 *                  [--seg-mib N] [--reps N] [--baseline-mib N] [--owners random|seq]
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef VC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define BENCH_NAME "gc_table1"
#include "bench.h"
#include "base/clock.h"
#include "base/rand.h"
#include "device/device.h"
#include "vramcache.h"

#define MAXLIST 16
#define FILL_CHUNK (64u << 20)
#define BAG_MS_PER_GIB 24.2


struct opts {
	int kind;
	const char *json;
	bool quick, full, seq_owners;
	uint64_t sizes[MAXLIST];
	int nsizes;
	double lf[MAXLIST];
	int nlf;
	uint32_t jobs[MAXLIST];
	int njobs;
	uint32_t page, seg_mib;
	int reps;
	uint64_t baseline_mib;
};

/* --- the index updater: helper threads --------------------------------- */

/* Jobs' destination ranges [g0, g0 + n) of global slots, cut into pieces of
 * UPD_PIECE slots that UPD_THREADS threads apply as they come: loc[key[g]]
 * = g. Each owner moves once per cleaning pass, so pieces commute. O(n) per
 * job: key[] read sequentially from pinned host memory, loc written at the
 * owners' places (a cache miss each when owners are random: the pieces run
 * in parallel so that the host keeps up with the device). */
#define UPD_THREADS 4
#define UPD_PIECE 32768
struct updater {
	pthread_mutex_t mu;
	pthread_cond_t more, done;
	uint64_t (*q)[2];
	uint32_t pushed, claimed, applied, cap;
	bool stop;
	const uint32_t *key;
	uint32_t *loc;
	uint64_t busy_ns; /* summed over the threads */
	pthread_t th[UPD_THREADS];
};

static void *updater_main(void *arg)
{
	struct updater *u = arg;
	pthread_mutex_lock(&u->mu);
	for (;;) {
		while (u->claimed == u->pushed && !u->stop)
			pthread_cond_wait(&u->more, &u->mu);
		if (u->claimed == u->pushed)
			break;
		uint64_t g0 = u->q[u->claimed][0], n = u->q[u->claimed][1];
		u->claimed++;
		pthread_mutex_unlock(&u->mu);
		uint64_t t0 = vc_now_ns();
		const uint32_t *key = u->key;
		uint32_t *loc = u->loc;
		for (uint64_t g = g0; g < g0 + n; g++)
			loc[key[g]] = (uint32_t)g;
		pthread_mutex_lock(&u->mu);
		u->busy_ns += vc_now_ns() - t0;
		u->applied++;
		pthread_cond_broadcast(&u->done);
	}
	pthread_mutex_unlock(&u->mu);
	return NULL;
}

static void updater_start(struct updater *u, const uint32_t *key, uint32_t *loc, uint64_t slots)
{
	memset(u, 0, sizeof *u);
	pthread_mutex_init(&u->mu, NULL);
	pthread_cond_init(&u->more, NULL);
	pthread_cond_init(&u->done, NULL);
	u->cap = (uint32_t)(slots / UPD_PIECE + 1024);
	u->q = malloc(u->cap * sizeof *u->q);
	if (!u->q)
		bench_die("malloc", -ENOMEM);
	u->key = key;
	u->loc = loc;
	for (int i = 0; i < UPD_THREADS; i++)
		if (pthread_create(&u->th[i], NULL, updater_main, u))
			bench_die("pthread_create", -EAGAIN);
}

static void updater_push(struct updater *u, uint64_t g0, uint64_t n)
{
	pthread_mutex_lock(&u->mu);
	for (uint64_t k = 0; k < n; k += UPD_PIECE) {
		if (u->pushed == u->cap)
			bench_die("updater queue", -ENOSPC);
		u->q[u->pushed][0] = g0 + k;
		u->q[u->pushed][1] = n - k < UPD_PIECE ? n - k : UPD_PIECE;
		u->pushed++;
	}
	pthread_cond_broadcast(&u->more);
	pthread_mutex_unlock(&u->mu);
}

/* Waits until every pushed range is applied; resets the queue. */
static void updater_drain(struct updater *u)
{
	pthread_mutex_lock(&u->mu);
	while (u->applied != u->pushed)
		pthread_cond_wait(&u->done, &u->mu);
	u->applied = u->claimed = u->pushed = 0;
	pthread_mutex_unlock(&u->mu);
}

static void updater_stop(struct updater *u)
{
	pthread_mutex_lock(&u->mu);
	u->stop = true;
	pthread_cond_broadcast(&u->more);
	pthread_mutex_unlock(&u->mu);
	for (int i = 0; i < UPD_THREADS; i++)
		pthread_join(u->th[i], NULL);
	pthread_mutex_destroy(&u->mu);
	pthread_cond_destroy(&u->more);
	pthread_cond_destroy(&u->done);
	free(u->q);
}

/* --- the store -------------------------------------------------------- */

struct store {
	struct vc_device *d;
	bool cuda;
	uint32_t ps, per;   /* page size, slots per segment */
	uint32_t nseg;      /* store segments; destinations follow */
	uint32_t ndseg;     /* destination segments reserved */
	uint64_t seg_bytes;
	uint64_t base;      /* device memory, nseg + ndseg segments */
	uint32_t *key;      /* pinned host tables, (nseg + ndseg) * per */
	uint64_t key_dev;
	uint64_t *stamp;
	uint64_t stamp_dev;
	uint32_t *key0;     /* the store's tables as filled */
	uint64_t *stamp0;
	uint32_t *loc, *loc0; /* the index (mapped pinned), and as filled */
	uint64_t loc_dev;
	uint32_t *segno;    /* segno[i] = i: source and destination lists */
	uint32_t live_per_seg, nlive;
	struct updater up;
#ifdef VC_HAVE_CUDA
	cudaStream_t s;
#endif
};

static uint64_t slots_of(const struct store *st)
{
	return (uint64_t)(st->nseg + st->ndseg) * st->per;
}

/* Device memory and tables for nseg store segments plus destinations for
 * load factor lf_max; the page data is written once: every page's first
 * word is its global slot, the rest a fixed pattern. */
static void store_open(struct store *st, struct vc_device *d, bool cuda, uint64_t bytes,
		       uint32_t ps, uint64_t seg_bytes, double lf_max)
{
	memset(st, 0, sizeof *st);
	st->d = d;
	st->cuda = cuda;
	st->ps = ps;
	st->seg_bytes = seg_bytes;
	st->per = (uint32_t)(seg_bytes / ps);
	st->nseg = (uint32_t)(bytes / seg_bytes);
	uint64_t live_max = (uint64_t)st->nseg * (uint32_t)(lf_max * st->per + 0.5);
	st->ndseg = (uint32_t)((live_max + st->per - 1) / st->per) + 1;
	uint64_t slots = slots_of(st);
	BENCH_OK(d->ops->mem_alloc(d, slots * ps, &st->base));
	void *p;
	BENCH_OK(d->ops->host_alloc(d, slots * sizeof(uint32_t), &p, &st->key_dev));
	st->key = p;
	BENCH_OK(d->ops->host_alloc(d, slots * sizeof(uint64_t), &p, &st->stamp_dev));
	st->stamp = p;
	uint64_t store_slots = (uint64_t)st->nseg * st->per;
	st->key0 = malloc(store_slots * sizeof *st->key0);
	st->stamp0 = malloc(store_slots * sizeof *st->stamp0);
	BENCH_OK(d->ops->host_alloc(d, store_slots * sizeof *st->loc, &p, &st->loc_dev));
	st->loc = p;
	st->loc0 = malloc(store_slots * sizeof *st->loc0);
	st->segno = malloc((st->nseg + st->ndseg) * sizeof *st->segno);
	if (!st->key0 || !st->stamp0 || !st->loc || !st->loc0 || !st->segno)
		bench_die("malloc", -ENOMEM);
	for (uint32_t i = 0; i < st->nseg + st->ndseg; i++)
		st->segno[i] = i;

	void *buf;
	uint64_t buf_dev;
	BENCH_OK(d->ops->host_alloc(d, FILL_CHUNK, &buf, &buf_dev));
	uint64_t *w = buf;
	for (uint64_t j = 0; j < FILL_CHUNK / 8; j++)
		w[j] = 0xa5a5a5a5a5a5a5a5ull ^ (j * 0x9e3779b97f4a7c15ull);
	uint64_t total = store_slots * ps;
	for (uint64_t off = 0; off < total; off += FILL_CHUNK) {
		uint64_t k = total - off < FILL_CHUNK ? total - off : FILL_CHUNK;
		for (uint64_t o = 0; o < k; o += ps)
			w[o / 8] = (off + o) / ps;
		BENCH_OK(d->ops->memcpy_sync(d, st->base + off, buf_dev, k));
	}
	d->ops->host_free(d, buf);
	updater_start(&st->up, st->key, st->loc, (uint64_t)(st->nseg + st->ndseg) * st->per);
#ifdef VC_HAVE_CUDA
	if (cuda)
		BENCH_CUOK(cudaStreamCreateWithFlags(&st->s, cudaStreamNonBlocking));
#endif
}

static void store_close(struct store *st)
{
	struct vc_device *d = st->d;
	updater_stop(&st->up);
#ifdef VC_HAVE_CUDA
	if (st->cuda)
		BENCH_CUOK(cudaStreamDestroy(st->s));
#endif
	d->ops->mem_free(d, st->base);
	d->ops->host_free(d, st->key);
	d->ops->host_free(d, st->stamp);
	free(st->key0);
	free(st->stamp0);
	d->ops->host_free(d, st->loc);
	free(st->loc0);
	free(st->segno);
}

/* Tables for load factor lf: round(lf * per) live slots per segment at
 * random places; owners a random permutation (or in log order); stamps
 * in log order (8 per slot) plus up to 8 * per: about one segment's worth
 * of disorder, with some equal stamps. */
static void store_fill(struct store *st, double lf, bool seq_owners, uint64_t seed)
{
	uint64_t rng = seed | 1;
	const uint32_t per = st->per, m = (uint32_t)(lf * per + 0.5);
	st->live_per_seg = m;
	st->nlive = st->nseg * m;
	uint32_t *perm = malloc((uint64_t)st->nlive * sizeof *perm);
	uint32_t *slot = malloc(per * sizeof *slot);
	if (!perm || !slot)
		bench_die("malloc", -ENOMEM);
	for (uint32_t i = 0; i < st->nlive; i++)
		perm[i] = i;
	if (!seq_owners)
		for (uint32_t i = st->nlive; i > 1; i--) {
			uint32_t j = (uint32_t)(vc_rand64(&rng) % i), t = perm[i - 1];
			perm[i - 1] = perm[j];
			perm[j] = t;
		}
	uint32_t o = 0;
	for (uint32_t s = 0; s < st->nseg; s++) {
		uint64_t g0 = (uint64_t)s * per;
		for (uint32_t k = 0; k < per; k++) {
			slot[k] = k;
			st->key0[g0 + k] = VC_GC_DEAD;
			st->stamp0[g0 + k] = 0;
		}
		for (uint32_t k = 0; k < m; k++) { /* m random slots, partial shuffle */
			uint32_t j = k + (uint32_t)(vc_rand64(&rng) % (per - k)), t = slot[k];
			slot[k] = slot[j];
			slot[j] = t;
		}
		/* owners in slot order within the segment */
		bool *live = calloc(per, sizeof *live);
		if (!live)
			bench_die("calloc", -ENOMEM);
		for (uint32_t k = 0; k < m; k++)
			live[slot[k]] = true;
		for (uint32_t k = 0; k < per; k++) {
			if (!live[k])
				continue;
			uint64_t g = g0 + k;
			uint32_t owner = perm[o++];
			st->key0[g] = owner;
			st->stamp0[g] = g * 8 + vc_rand64(&rng) % (8ull * per);
			st->loc0[owner] = (uint32_t)g;
		}
		free(live);
	}
	free(perm);
	free(slot);
}

/* Before every timed clean: the store's tables and the index as filled,
 * free destinations. O(slots) host memcpy. */
static void store_restore(struct store *st)
{
	uint64_t n = (uint64_t)st->nseg * st->per, nd = (uint64_t)st->ndseg * st->per;
	memcpy(st->key, st->key0, n * sizeof *st->key);
	memcpy(st->stamp, st->stamp0, n * sizeof *st->stamp);
	memset(st->key + n, 0xff, nd * sizeof *st->key);
	memset(st->stamp + n, 0, nd * sizeof *st->stamp);
	memcpy(st->loc, st->loc0, (uint64_t)st->nlive * sizeof *st->loc);
}

/* After a clean: every owner sits at a destination slot that names it,
 * and sampled pages hold their original bytes (the sources' keys are the
 * log store's to recycle). */
static void store_check(struct store *st, uint32_t nseg_cleaned, const char *what)
{
	uint64_t n = (uint64_t)nseg_cleaned * st->per, lo = (uint64_t)st->nseg * st->per;
	uint32_t owners = nseg_cleaned * st->live_per_seg;
	for (uint64_t g = 0; g < n; g++) { /* the owners of the cleaned part */
		uint32_t o = st->key0[g];
		if (o == VC_GC_DEAD)
			continue;
		uint32_t l = st->loc[o];
		if (l < lo || l >= lo + owners + st->per || st->key[l] != o) {
			fprintf(stderr, "gc_table1: %s: owner %u at slot %u (key %u)\n", what, o, l,
				st->key[l]);
			exit(1);
		}
	}
	uint64_t rng = 7, a, b;
	for (int i = 0; i < 64 && n; i++) {
		uint64_t g;
		do
			g = vc_rand64(&rng) % n;
		while (st->key0[g] == VC_GC_DEAD);
		uint64_t l = st->loc[st->key0[g]];
		BENCH_OK(st->d->ops->memcpy_sync(st->d, (uint64_t)(uintptr_t)&a, st->base + g * st->ps, 8));
		BENCH_OK(st->d->ops->memcpy_sync(st->d, (uint64_t)(uintptr_t)&b, st->base + l * st->ps, 8));
		if (a != g || b != g) {
			fprintf(stderr, "gc_table1: %s: page of slot %llu reads %llu at %llu\n", what,
				(unsigned long long)g, (unsigned long long)b, (unsigned long long)l);
			exit(1);
		}
	}
}

/* --- the cleaners ----------------------------------------------------- */

struct timing {
	double total_s, gpu_s, index_s;
};

/* ours: gc_run per job of J segments over the first nseg segments, the
 * index updated by the device (dev_index) or by the host's updaters. */
static struct timing clean_ours(struct store *st, uint32_t J, uint32_t nseg, bool dev_index)
{
	struct vc_device *d = st->d;
	const uint32_t per = st->per;
	uint32_t dseg = st->nseg, dfirst = 0;
	uint64_t gpu = 0;
	st->up.busy_ns = 0;
	uint64_t t0 = vc_now_ns();
	for (uint32_t s = 0; s < nseg; s += J) {
		uint32_t nsrc = nseg - s < J ? nseg - s : J;
		uint64_t live = (uint64_t)nsrc * st->live_per_seg;
		uint32_t nd = (uint32_t)((dfirst + live + per - 1) / per);
		struct vc_gc_job j = { .base = st->base,
				       .page_size = st->ps,
				       .per_seg = per,
				       .key = st->key,
				       .key_dev = st->key_dev,
				       .stamp = st->stamp,
				       .stamp_dev = st->stamp_dev,
				       .src = st->segno + s,
				       .dst = st->segno + dseg,
				       .nsrc = nsrc,
				       .ndst = nd,
				       .dst_first = nd ? dfirst : 0,
				       .live = (uint32_t)live,
				       /* store_fill's stamps: 8 per slot plus up to a segment's worth */
				       .stamp_min = (uint64_t)s * per * 8,
				       .stamp_max = ((uint64_t)s + nsrc + 1) * per * 8 - 1 };
		if (dev_index) {
			j.where = st->loc;
			j.where_dev = st->loc_dev;
			j.nowners = st->nlive;
		}
		uint64_t a = vc_now_ns();
		BENCH_OK(d->ops->gc_run(d, &j));
		gpu += vc_now_ns() - a;
		if (j.moved != live)
			bench_die("gc_run moved the wrong count", -EIO);
		/* The log store then releases the sources in O(1) each: their
		 * keys stay until appends overwrite them. */
		if (!dev_index)
			updater_push(&st->up, (uint64_t)dseg * per + dfirst, live);
		uint64_t q = dfirst + live;
		dseg += (uint32_t)(q / per);
		dfirst = (uint32_t)(q % per);
	}
	updater_drain(&st->up);
	struct timing t = { (double)(vc_now_ns() - t0) / 1e9, (double)gpu / 1e9,
			    (double)st->up.busy_ns / 1e9 };
	return t;
}

struct plan_item {
	uint64_t stamp;
	uint32_t pos;
};

static int cmp_plan(const void *a, const void *b)
{
	const struct plan_item *x = a, *y = b;
	if (x->stamp != y->stamp)
		return x->stamp < y->stamp ? -1 : 1;
	return (x->pos > y->pos) - (x->pos < y->pos);
}

/* baseline: the CPU plans each job and copies page by page. */
static struct timing clean_baseline(struct store *st, uint32_t J, uint32_t nseg)
{
	struct vc_device *d = st->d;
	const uint32_t per = st->per, ps = st->ps;
	struct plan_item *plan = malloc((uint64_t)J * per * sizeof *plan);
	if (!plan)
		bench_die("malloc", -ENOMEM);
	uint32_t dseg = st->nseg, dfirst = 0;
	uint64_t gpu = 0;
	st->up.busy_ns = 0;
	uint64_t t0 = vc_now_ns();
	for (uint32_t s = 0; s < nseg; s += J) {
		uint32_t nsrc = nseg - s < J ? nseg - s : J, n = 0;
		uint64_t a = vc_now_ns();
		for (uint32_t p = 0; p < nsrc * per; p++) {
			uint64_t g = (uint64_t)s * per + p;
			if (st->key[g] != VC_GC_DEAD)
				plan[n++] = (struct plan_item){ st->stamp[g], p };
		}
		qsort(plan, n, sizeof *plan, cmp_plan);
		uint64_t g0 = (uint64_t)dseg * per + dfirst; /* destinations are consecutive */
		for (uint32_t r = 0; r < n; r++) {
			uint64_t gs = (uint64_t)s * per + plan[r].pos, gd = g0 + r;
			uint64_t from = st->base + gs * ps, to = st->base + gd * ps;
#ifdef VC_HAVE_CUDA
			if (st->cuda)
				BENCH_CUOK(cudaMemcpyAsync((void *)(uintptr_t)to, (const void *)(uintptr_t)from,
						     ps, cudaMemcpyDeviceToDevice, st->s));
			else
#endif
				BENCH_OK(d->ops->memcpy_sync(d, to, from, ps));
			st->key[gd] = st->key[gs];
			st->stamp[gd] = plan[r].stamp;
			st->key[gs] = VC_GC_DEAD;
		}
#ifdef VC_HAVE_CUDA
		if (st->cuda)
			BENCH_CUOK(cudaStreamSynchronize(st->s));
#endif
		gpu += vc_now_ns() - a;
		updater_push(&st->up, g0, n);
		uint64_t q = dfirst + (uint64_t)n;
		dseg += (uint32_t)(q / per);
		dfirst = (uint32_t)(q % per);
	}
	updater_drain(&st->up);
	free(plan);
	struct timing t = { (double)(vc_now_ns() - t0) / 1e9, (double)gpu / 1e9,
			    (double)st->up.busy_ns / 1e9 };
	return t;
}

/* d2d: one copy of the live bytes, store to destinations. */
static double copy_d2d(struct store *st)
{
	uint64_t len = (uint64_t)st->nlive * st->ps;
	uint64_t t0 = vc_now_ns();
	BENCH_OK(st->d->ops->memcpy_sync(st->d, st->base + (uint64_t)st->nseg * st->seg_bytes, st->base,
				   len));
	return (double)(vc_now_ns() - t0) / 1e9;
}

/* --- the table -------------------------------------------------------- */

struct row {
	uint64_t store_bytes;
	double lf;
	uint32_t jobs;
	uint64_t live_bytes;
	struct timing ours, host; /* medians; host: the host-index variant */
	double d2d_s;
	double base_s, base_live_bytes; /* baseline over its sample */
	double base_gbps;
};

static double median(double *v, int n)
{
	return bench_quantile(v, n, 0.5);
}

static double gbps(double bytes, double s)
{
	return s > 0 ? bytes / s / 1e9 : NAN;
}

/* Free memory for the store: device memory on CUDA, host memory on emu. */
static uint64_t free_bytes(bool cuda)
{
#ifdef VC_HAVE_CUDA
	if (cuda) {
		size_t fr = 0, tot = 0;
		BENCH_CUOK(cudaMemGetInfo(&fr, &tot));
		return fr;
	}
#endif
	(void)cuda;
	return (uint64_t)sysconf(_SC_AVPHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: gc_table1 [--device cuda|emu|auto] [--json FILE] [--quick] [--full]\n"
		"                 [--sizes MIB,...] [--lf X,...] [--jobs N,...] [--page BYTES]\n"
		"                 [--seg-mib N] [--reps N] [--baseline-mib N] [--owners random|seq]\n");
	exit(2);
}

static void parse(int argc, char **argv, struct opts *o)
{
	static const uint64_t sizes[] = { 128, 256, 512, 768, 1024, 16384 };
	memset(o, 0, sizeof *o);
	o->kind = VC_DEVICE_AUTO;
	o->page = 4096;
	o->seg_mib = 4;
	o->lf[0] = 0.8, o->lf[1] = 0.9, o->nlf = 2;
	o->jobs[0] = 256, o->jobs[1] = 64, o->jobs[2] = 8, o->njobs = 3;
	for (int i = 0; i < 6; i++)
		o->sizes[i] = sizes[i];
	o->nsizes = 6;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--quick") == 0) {
			o->quick = true;
			continue;
		}
		if (strcmp(a, "--full") == 0) {
			o->full = true;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (strcmp(a, "--device") == 0) {
			if ((o->kind = vc_device_parse(v)) < 0)
				usage();
		} else if (strcmp(a, "--json") == 0) {
			o->json = v;
		} else if (strcmp(a, "--sizes") == 0) {
			if ((o->nsizes = bench_parse_list_u64(v, o->sizes, MAXLIST)) <= 0)
				usage();
		} else if (strcmp(a, "--lf") == 0) {
			if ((o->nlf = bench_parse_list_double(v, o->lf, MAXLIST)) <= 0)
				usage();
		} else if (strcmp(a, "--jobs") == 0) {
			uint64_t j[MAXLIST];
			if ((o->njobs = bench_parse_list_u64(v, j, MAXLIST)) <= 0)
				usage();
			for (int k = 0; k < o->njobs; k++)
				o->jobs[k] = j[k] ? (uint32_t)j[k] : 1;
		} else if (strcmp(a, "--page") == 0) {
			o->page = (uint32_t)strtoul(v, NULL, 0);
		} else if (strcmp(a, "--seg-mib") == 0) {
			o->seg_mib = (uint32_t)strtoul(v, NULL, 0);
		} else if (strcmp(a, "--reps") == 0) {
			o->reps = atoi(v);
		} else if (strcmp(a, "--baseline-mib") == 0) {
			o->baseline_mib = strtoull(v, NULL, 0);
		} else if (strcmp(a, "--owners") == 0) {
			o->seq_owners = strcmp(v, "seq") == 0;
			if (!o->seq_owners && strcmp(v, "random") != 0)
				usage();
		} else {
			usage();
		}
	}
	for (int k = 0; k < o->nlf; k++)
		if (!(o->lf[k] > 0 && o->lf[k] <= 1))
			usage();
	if (o->page < 512 || (o->page & (o->page - 1)) || o->seg_mib == 0 ||
	    ((uint64_t)o->seg_mib << 20) < o->page)
		usage();
	if (o->reps <= 0)
		o->reps = o->quick ? 3 : 5;
	if (o->reps > 15)
		o->reps = 15;
	if (!o->baseline_mib)
		o->baseline_mib = o->quick ? 256 : 1024;
}

int main(int argc, char **argv)
{
	struct opts o;
	parse(argc, argv, &o);
	struct vc_device *d;
	int r = vc_device_open(o.kind, 0, &d);
	if (r == -VC_ENODEVICE || r == -VC_ENOTBUILT) {
		printf("SKIP gc_table1: %s (%s)\n", vc_strerror(r), vc_last_error());
		return 0;
	}
	if (r < 0)
		bench_die("vc_device_open", r);
	const bool cuda = strcmp(d->ops->name, "cuda") == 0;
#ifdef VC_HAVE_CUDA
	if (cuda)
		BENCH_CUOK(cudaSetDevice(0));
#endif
	const uint64_t seg_bytes = (uint64_t)o.seg_mib << 20;
	double lf_max = 0;
	for (int k = 0; k < o.nlf; k++)
		lf_max = fmax(lf_max, o.lf[k]);

	printf("gc_table1: %s: %s\n", d->ops->name, d->desc);
	printf("BAG Table 1: clean the whole store; %u B pages, %u MiB segments, owners %s; "
	       "median of %d\n",
	       o.page, o.seg_mib, o.seq_owners ? "in log order" : "random", o.reps);
	printf("paper: %.1f ms per GiB on a GTX 480, 60x its CPU version\n", BAG_MS_PER_GIB);
	printf("baseline: CPU plan + one %s per page, over the first %llu MiB of each store\n",
	       cuda ? "cudaMemcpyAsync D2D" : "memcpy_sync", (unsigned long long)o.baseline_mib);

	static struct row rows[MAXLIST * MAXLIST * MAXLIST];
	int nrows = 0;
	char skipped[MAXLIST][96];
	int nskipped = 0;
	uint64_t t_start = vc_now_ns();
	printf("\n%9s %4s %4s %8s %8s %8s %8s %8s %7s %9s %8s\n", "store MiB", "lf", "J", "live GiB",
	       "ms/GiB", "GB/s", "host/d2d", "d2d GB/s", "ours/d2d", "base GB/s", "ours/base");
	for (int si = 0; si < o.nsizes; si++) {
		uint64_t bytes = o.sizes[si] << 20;
		if (bytes < seg_bytes)
			continue;
		if (!cuda && !o.full && o.sizes[si] > 128) {
			snprintf(skipped[nskipped++], sizeof skipped[0],
				 "%llu MiB: emu runs 128 MiB only without --full",
				 (unsigned long long)o.sizes[si]);
			continue;
		}
		uint64_t nseg = bytes / seg_bytes;
		uint64_t need = (nseg + (uint64_t)ceil(nseg * lf_max) + 2) * seg_bytes +
				(512ull << 20); /* the gc scratch, CUB, the driver's slack */
		uint64_t fr = free_bytes(cuda);
		if (need > fr) {
			snprintf(skipped[nskipped++], sizeof skipped[0],
				 "%llu MiB: needs %.1f GiB, %.1f GiB free",
				 (unsigned long long)o.sizes[si], need / 1073741824.0,
				 fr / 1073741824.0);
			printf("skip %llu MiB: needs %.1f GiB with destinations, %.1f GiB free\n",
			       (unsigned long long)o.sizes[si], need / 1073741824.0, fr / 1073741824.0);
			continue;
		}
		struct store st;
		store_open(&st, d, cuda, bytes, o.page, seg_bytes, lf_max);
		for (int li = 0; li < o.nlf; li++) {
			store_fill(&st, o.lf[li], o.seq_owners, 0x6c0de + (uint64_t)si * 97 + li);
			const double live_bytes = (double)st.nlive * st.ps;
			const double gib = (double)bytes / 1073741824.0;
			uint32_t bseg = (uint32_t)((o.baseline_mib << 20) / seg_bytes);
			if (bseg > st.nseg)
				bseg = st.nseg;
			if (bseg == 0)
				bseg = 1;

			/* warm-up: module load, scratch growth, first touches */
			for (int k = 0; k < o.njobs; k++)
				for (int h = 0; h < 2; h++) {
					store_restore(&st);
					clean_ours(&st, o.jobs[k], st.nseg, h == 0);
					store_check(&st, st.nseg, "ours (warm-up)");
				}
			copy_d2d(&st);
			store_restore(&st);
			clean_baseline(&st, o.jobs[0], bseg < o.jobs[0] ? bseg : o.jobs[0]);

			double v[2][MAXLIST][16], vg[2][MAXLIST][16], vi[2][MAXLIST][16], vd[16],
				vb[16];
			/* ours and host-index at each J and d2d back to back, the
			 * order rotating from one repetition to the next (as
			 * transfer does) */
			const int nvar = 2 * o.njobs + 1;
			for (int rep = 0; rep < o.reps; rep++) {
				for (int x = 0; x < nvar; x++) {
					int y = (x + rep) % nvar, k = y / 2, h = y % 2;
					if (y == nvar - 1) {
						vd[rep] = copy_d2d(&st);
						continue;
					}
					store_restore(&st);
					struct timing t = clean_ours(&st, o.jobs[k], st.nseg, h == 0);
					v[h][k][rep] = t.total_s;
					vg[h][k][rep] = t.gpu_s;
					vi[h][k][rep] = t.index_s;
					if (rep == 0)
						store_check(&st, st.nseg, h ? "host-index" : "ours");
				}
			}
			for (int rep = 0; rep < o.reps; rep++) {
				store_restore(&st);
				vb[rep] = clean_baseline(&st, o.jobs[0], bseg).total_s;
				if (rep == 0)
					store_check(&st, bseg, "baseline");
			}
			const double d2d_s = median(vd, o.reps);
			const double base_live = (double)bseg * st.live_per_seg * st.ps;
			const double base_s = median(vb, o.reps);
			for (int k = 0; k < o.njobs; k++) {
				struct row *x = &rows[nrows++];
				*x = (struct row){ .store_bytes = bytes,
						   .lf = o.lf[li],
						   .jobs = o.jobs[k],
						   .live_bytes = (uint64_t)live_bytes,
						   .d2d_s = d2d_s,
						   .base_s = base_s,
						   .base_live_bytes = base_live };
				x->ours.total_s = median(v[0][k], o.reps);
				x->ours.gpu_s = median(vg[0][k], o.reps);
				x->host.total_s = median(v[1][k], o.reps);
				x->host.gpu_s = median(vg[1][k], o.reps);
				x->host.index_s = median(vi[1][k], o.reps);
				x->base_gbps = gbps(base_live, base_s);
				double ours = gbps(live_bytes, x->ours.total_s);
				double d2d = gbps(live_bytes, d2d_s);
				double host = gbps(live_bytes, x->host.total_s);
				printf("%9llu %4.2f %4u %8.2f %8.2f %8.1f %8.2f %8.1f %7.2f %9.2f %8.1f\n",
				       (unsigned long long)o.sizes[si], o.lf[li], o.jobs[k],
				       live_bytes / 1073741824.0, x->ours.total_s * 1e3 / gib, ours,
				       host / d2d, d2d, ours / d2d, x->base_gbps, ours / x->base_gbps);
			}
			fflush(stdout);
		}
		store_close(&st);
	}
	for (int i = 0; i < nskipped; i++)
		printf("skipped %s\n", skipped[i]);

	/* Goals at the first J. */
	double worst_d2d = INFINITY, worst_base = INFINITY;
	for (int i = 0; i < nrows; i++) {
		if (rows[i].jobs != o.jobs[0])
			continue;
		double ours = gbps((double)rows[i].live_bytes, rows[i].ours.total_s);
		worst_d2d = fmin(worst_d2d, ours / gbps((double)rows[i].live_bytes, rows[i].d2d_s));
		worst_base = fmin(worst_base, ours / rows[i].base_gbps);
	}
	bool met = nrows > 0 && worst_d2d >= 0.70 && worst_base >= 50;
	printf("\nms/GiB: per GiB of store (paper: %.1f). GB/s: live bytes moved per second, "
	       "index update included; host/d2d: the same with the index updated by 4 host "
	       "threads.\n",
	       BAG_MS_PER_GIB);
	printf("goals at J = %u: ours/d2d >= 0.70 and ours/baseline >= 50: %s (worst %.2f, %.1f)%s;"
	       " %.1f s\n",
	       o.jobs[0], met ? "met" : "NOT met", worst_d2d, worst_base,
	       cuda ? "" : " [emu: the goals are for cuda]",
	       (double)(vc_now_ns() - t_start) / 1e9);

	if (o.json) {
		FILE *f = bench_json_open(o.json, "gc_table1", d->desc);
		fprintf(f, ",\n  \"backend\": \"%s\",\n", d->ops->name);
		fprintf(f, "  \"page_size\": %u,\n  \"seg_bytes\": %llu,\n  \"reps\": %d,\n", o.page,
			(unsigned long long)seg_bytes, o.reps);
		fprintf(f, "  \"owners\": \"%s\",\n", o.seq_owners ? "log order" : "random");
		fprintf(f, "  \"paper\": {\"ms_per_gib\": %.1f, \"gpu\": \"GTX 480\", "
			   "\"speedup_vs_cpu\": 60},\n",
			BAG_MS_PER_GIB);
		fprintf(f, "  \"unit\": \"GB/s (1e9 bytes/s) of live bytes; ms per GiB of store\",\n");
		fprintf(f, "  \"ours\": \"gc_run per job, the index loc[owner] = slot written by the "
			   "move kernel (mapped memory); live count and stamp bounds stated\",\n");
		fprintf(f, "  \"host_index\": \"gc_run per job without where[] + index update on 4 "
			   "helper threads, overlapping the next job\",\n");
		fprintf(f, "  \"baseline\": \"CPU plan (collect, qsort by stamp) + one %s per page + "
			   "sync + the same index update, over the first %llu MiB of the store\",\n",
			cuda ? "cudaMemcpyAsync D2D" : "memcpy_sync",
			(unsigned long long)o.baseline_mib);
		fprintf(f, "  \"d2d\": \"one memcpy_sync device to device of the live bytes\",\n");
		fprintf(f, "  \"goal\": {\"rule\": \"at J = %u: ours/d2d >= 0.70 and ours/baseline >= "
			   "50\", \"met\": %s",
			o.jobs[0], met ? "true" : "false");
		bench_json_field(f, "    ", "worst_ours_d2d", worst_d2d);
		bench_json_field(f, "    ", "worst_ours_baseline", worst_base);
		fprintf(f, "\n  },\n  \"skipped\": [");
		for (int i = 0; i < nskipped; i++)
			fprintf(f, "%s\"%s\"", i ? ", " : "", skipped[i]);
		fprintf(f, "],\n  \"rows\": [\n");
		for (int i = 0; i < nrows; i++) {
			struct row *x = &rows[i];
			double gib = (double)x->store_bytes / 1073741824.0;
			double ours = gbps((double)x->live_bytes, x->ours.total_s);
			double d2d = gbps((double)x->live_bytes, x->d2d_s);
			const char *in = "      ";
			fprintf(f, "    {\"store_mib\": %llu, \"lf\": %.2f, \"jobs_segs\": %u",
				(unsigned long long)(x->store_bytes >> 20), x->lf, x->jobs);
			bench_json_field(f, in, "live_bytes", (double)x->live_bytes);
			bench_json_field(f, in, "ours_ms", x->ours.total_s * 1e3);
			bench_json_field(f, in, "ours_ms_per_gib", x->ours.total_s * 1e3 / gib);
			bench_json_field(f, in, "ours_gbps", ours);
			bench_json_field(f, in, "gc_run_ms", x->ours.gpu_s * 1e3);
			bench_json_field(f, in, "gc_run_gbps", gbps((double)x->live_bytes, x->ours.gpu_s));
			bench_json_field(f, in, "host_index_ms", x->host.total_s * 1e3);
			bench_json_field(f, in, "host_index_gc_run_ms", x->host.gpu_s * 1e3);
			bench_json_field(f, in, "host_index_update_ms", x->host.index_s * 1e3);
			bench_json_field(f, in, "ratio_host_index_d2d",
					 gbps((double)x->live_bytes, x->host.total_s) / d2d);
			bench_json_field(f, in, "d2d_ms", x->d2d_s * 1e3);
			bench_json_field(f, in, "d2d_gbps", d2d);
			bench_json_field(f, in, "ratio_ours_d2d", ours / d2d);
			bench_json_field(f, in, "baseline_live_bytes", x->base_live_bytes);
			bench_json_field(f, in, "baseline_ms", x->base_s * 1e3);
			bench_json_field(f, in, "baseline_gbps", x->base_gbps);
			bench_json_field(f, in, "ratio_ours_baseline", ours / x->base_gbps);
			fprintf(f, "}%s\n", i + 1 < nrows ? "," : "");
		}
		fprintf(f, "  ]");
		bench_json_close(f);
	}
	vc_device_close(d);
	return 0;
}
