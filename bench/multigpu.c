/* multigpu: scattered 4 KiB page moves through the engine's batcher on one
 * GPU and on several at once, against the same GPUs' bulk-copy limit.
 *
 * The question (the multi-GPU issue): does host-facing throughput grow with
 * the GPUs where each has its own PCIe link? Goal: all GPUs together move
 * >= 0.9 x N times what one moves alone (1.8x for two).
 *
 * Every device of --gpus gets its own pinned host pool (its own host_alloc)
 * and device pool of --pool pages, two random permutations of their slots
 * (as transfer.c) and one batcher (vc_batcher_create with max_pages =
 * --batch, transfer.c's "ours" column). Per device, --threads-per-gpu
 * feeder threads each keep --window batches of --batch moves in flight
 * (add_n, then wait_n of the oldest); feeder f walks its own share of the
 * permutations, so no two moves in flight touch one page.
 *
 * Configurations, each direction (h2d, d2h):
 *   devK    device K of the list alone, in turn
 *   all(N)  every device at once (when there are two or more)
 * Columns: ours (the batcher), and limit: one bulk pinned copy of the pool
 * (at most 256 MiB) per device with memcpy_sync (CUDA: cudaMemcpyAsync;
 * transfer.c's "peak"), alone or on every device at once (a thread each).
 * Each figure is the median of --reps repetitions of --seconds (ours) or one
 * copy (limit), their order alternating, after a warm-up (one pass over the
 * pools and one copy). GB/s: per device, bytes it moved / wall time of the
 * repetition; aggregate, all bytes / wall time. all/single: the aggregate
 * of "all" over the mean of the single-device aggregates.
 *
 * With two or more devices, peer: device 0's pool to device 1's, scattered
 * moves on device 0's batcher (same feeders) and one bulk memcpy_sync, after
 * vc_device_peer_enable(dev0, dev1) (-ENOTSUP: P2P is reported unavailable
 * and skipped).
 *
 * Data check, after the timed runs: device pools overwritten, one pass of
 * h2d moves over every slot, device pools read back and every page
 * compared with the host page that went there; the same for d2h (host
 * pages compared) and peer. Pages carry a pattern with their device,
 * slot and side; one wrong byte fails the run (exit 1).
 *
 * Usage: multigpu [--device auto|emu|cuda] [--gpus 0,1] [--threads-per-gpu T]
 *                 [--batch N] [--window W] [--pool PAGES] [--seconds S]
 *                 [--reps R] [--quick] [--json FILE]
 * --gpus: device ordinals (default: every CUDA device; on emu "0,1", each
 * entry its own emulated device). Defaults: 2 feeders a device, batches of
 * 512, 6 / T batches in flight a feeder, 65536-page pools (256 MiB host
 * and 256 MiB device memory a device, and 256 MiB of host scratch for the
 * check), 1 s, 5 reps; --quick: 4096-page pools, 0.2 s, 3 reps.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#define BENCH_NAME "multigpu"
#include "bench.h"
#include "device/device.h"
#include "engine/batcher.h"

#define PAGE 4096u
#define MAXDEV VC_GPUS_MAX
#define MAXFEED 64 /* feeder threads per device */
#define MAXREPS 64
/* The bulk copy: transfer.c's peak, 256 MiB (or the pool, if smaller). */
#define BULK_PAGES 65536u

enum { H2D, D2H, P2P, NDIRS };
static const char *dir_name[NDIRS] = { "h2d", "d2h", "peer" };

/* A stream of moves: move j takes source slot sperm[j] to destination slot
 * dperm[j]; the pairing is fixed, so any pass over j leaves the same data. */
struct xfer {
	uint64_t sbase, dbase;
	const uint32_t *sperm, *dperm;
};

struct feeder {
	pthread_t th;
	struct vc_batcher *bt;
	struct xfer x;
	uint32_t lo, len; /* its share of j: [lo, lo + len) */
	uint64_t g;       /* next move: j = lo + g % len; persists across runs */
	uint64_t maxb;    /* batches to move, or 0: until the stop flag */
	uint32_t n, w;    /* moves a batch, batches in flight */
	uint64_t pages;   /* moved in this run */
	struct vc_ticket *tk; /* w * n */
	struct vc_move *mv;
};

struct gdev {
	struct vc_device *d;
	int ordinal;
	void *host_ptr, *scr_ptr; /* the host pool; scratch for the check */
	uint64_t host, scr, dev;  /* device-visible bases */
	uint32_t *hperm, *dperm;
	struct vc_batcher *bt;
	struct feeder f[MAXFEED];
};

struct bench {
	struct gdev g[MAXDEV];
	int n; /* devices */
	int kind;
	uint32_t pool, batch, window, tpg;
	double seconds;
	int reps;
	bool quick;
};

static atomic_bool stop_flag;
static pthread_barrier_t gate;

/* ---- moves through the batcher -------------------------------------------- */

static struct xfer xfer_of(const struct bench *B, int k, int dir)
{
	const struct gdev *g = &B->g[k];
	switch (dir) {
	case H2D:
		return (struct xfer){ g->host, g->dev, g->hperm, g->dperm };
	case D2H:
		return (struct xfer){ g->dev, g->host, g->dperm, g->hperm };
	default: /* P2P: device k's pool to the next device's */
		return (struct xfer){ g->dev, g[1].dev, g->dperm, g[1].dperm };
	}
}

static void fill_moves(struct feeder *f)
{
	for (uint32_t i = 0; i < f->n; i++, f->g++) {
		uint32_t j = f->lo + (uint32_t)(f->g % f->len);
		f->mv[i] = (struct vc_move){ .src = f->x.sbase + (uint64_t)f->x.sperm[j] * PAGE,
					     .dst = f->x.dbase + (uint64_t)f->x.dperm[j] * PAGE,
					     .op = VC_MOVE_COPY };
	}
}

/* One feeder: batches of n moves, at most w in flight, the oldest waited
 * for when the window is full; at the end (stop flag, or maxb batches)
 * the rest drained. Counts only completed batches. */
static void *feeder_main(void *arg)
{
	struct feeder *f = arg;
	uint64_t issued = 0, done = 0;
	pthread_barrier_wait(&gate);
	for (;;) {
		bool more = f->maxb ? issued < f->maxb
				    : !atomic_load_explicit(&stop_flag, memory_order_relaxed);
		if (more) {
			fill_moves(f);
			BENCH_OK(vc_batcher_add_n(f->bt, f->mv, f->n, &f->tk[issued % f->w * f->n]));
			issued++;
		}
		if (done < issued && (!more || issued - done == f->w)) {
			BENCH_OK(vc_batcher_wait_n(f->bt, &f->tk[done % f->w * f->n], f->n));
			done++;
		} else if (!more) {
			break;
		}
	}
	f->pages = done * f->n;
	return NULL;
}

/* The feeders of devices which[0..nw) at once, direction dir, for
 * B->seconds or (pass) one pass over each feeder's share of the slots.
 * GB/s: per device in gbps[k], the aggregate returned. */
static double run_moves(struct bench *B, const int *which, int nw, int dir, bool pass,
			double *gbps)
{
	pthread_barrier_init(&gate, NULL, (unsigned)(nw * (int)B->tpg) + 1);
	atomic_store(&stop_flag, false);
	for (int k = 0; k < nw; k++) {
		for (uint32_t t = 0; t < B->tpg; t++) {
			struct feeder *f = &B->g[which[k]].f[t];
			f->x = xfer_of(B, which[k], dir);
			f->maxb = pass ? (f->len + f->n - 1) / f->n : 0;
			int e = pthread_create(&f->th, NULL, feeder_main, f);
			if (e)
				bench_die("pthread_create", -e);
		}
	}
	pthread_barrier_wait(&gate);
	double t0 = bench_now_s();
	if (!pass) {
		bench_sleep_s(B->seconds);
		atomic_store(&stop_flag, true);
	}
	uint64_t pages[MAXDEV] = { 0 };
	for (int k = 0; k < nw; k++) {
		for (uint32_t t = 0; t < B->tpg; t++) {
			pthread_join(B->g[which[k]].f[t].th, NULL);
			pages[k] += B->g[which[k]].f[t].pages;
		}
	}
	double wall = bench_now_s() - t0, all = 0;
	pthread_barrier_destroy(&gate);
	for (int k = 0; k < nw; k++) {
		gbps[k] = (double)pages[k] * PAGE / wall / 1e9;
		all += gbps[k];
	}
	return all;
}

/* ---- the limit: one bulk copy per device -------------------------------- */

struct bulk {
	pthread_t th;
	struct vc_device *d;
	uint64_t dst, src;
	size_t len;
	double s;
};

static void *bulk_main(void *arg)
{
	struct bulk *j = arg;
	pthread_barrier_wait(&gate);
	double t0 = bench_now_s();
	BENCH_OK(j->d->ops->memcpy_sync(j->d, j->dst, j->src, j->len));
	j->s = bench_now_s() - t0;
	return NULL;
}

static size_t bulk_len(const struct bench *B)
{
	return (size_t)(B->pool < BULK_PAGES ? B->pool : BULK_PAGES) * PAGE;
}

/* One copy on each device of which[0..nw) at once: per device its bytes
 * over its own time, the aggregate all bytes over the wall time. */
static double run_bulk(struct bench *B, const int *which, int nw, int dir, double *gbps)
{
	struct bulk j[MAXDEV];
	pthread_barrier_init(&gate, NULL, (unsigned)nw + 1);
	for (int k = 0; k < nw; k++) {
		struct xfer x = xfer_of(B, which[k], dir);
		j[k] = (struct bulk){ .d = B->g[which[k]].d, .dst = x.dbase, .src = x.sbase,
				      .len = bulk_len(B) };
		int e = pthread_create(&j[k].th, NULL, bulk_main, &j[k]);
		if (e)
			bench_die("pthread_create", -e);
	}
	pthread_barrier_wait(&gate);
	double t0 = bench_now_s();
	for (int k = 0; k < nw; k++)
		pthread_join(j[k].th, NULL);
	double wall = bench_now_s() - t0;
	pthread_barrier_destroy(&gate);
	for (int k = 0; k < nw; k++)
		gbps[k] = (double)j[k].len / j[k].s / 1e9;
	return (double)j[0].len * nw / wall / 1e9;
}

/* ---- one configuration ----------------------------------------------------- */

/* GB/s: the aggregate and each device's (k: the k-th of the configuration). */
struct fig {
	double agg, dev[MAXDEV];
};

struct row {
	int dir, nw;
	int which[MAXDEV];
	struct fig ours, limit;
};

static void median_fig(double v[][MAXREPS], int nw, int reps, struct fig *out)
{
	out->agg = bench_quantile(v[0], reps, 0.5);
	for (int k = 0; k < nw; k++)
		out->dev[k] = bench_quantile(v[1 + k], reps, 0.5);
}

static void measure(struct bench *B, struct row *r)
{
	static double o[1 + MAXDEV][MAXREPS], l[1 + MAXDEV][MAXREPS];
	double d[MAXDEV];
	/* warm-up: every page once, launches, the copy path */
	run_moves(B, r->which, r->nw, r->dir, true, d);
	run_bulk(B, r->which, r->nw, r->dir, d);
	for (int k = 0; k < B->reps; k++) {
		for (int i = 0; i < 2; i++) {
			if ((i + k) % 2 == 0) {
				o[0][k] = run_moves(B, r->which, r->nw, r->dir, false, d);
				for (int w = 0; w < r->nw; w++)
					o[1 + w][k] = d[w];
			} else {
				l[0][k] = run_bulk(B, r->which, r->nw, r->dir, d);
				for (int w = 0; w < r->nw; w++)
					l[1 + w][k] = d[w];
			}
		}
	}
	median_fig(o, r->nw, B->reps, &r->ours);
	median_fig(l, r->nw, B->reps, &r->limit);
}

static const char *row_name(const struct row *r, char *buf, size_t len)
{
	if (r->dir == P2P)
		snprintf(buf, len, "dev%d>dev%d", r->which[0], r->which[0] + 1);
	else if (r->nw == 1)
		snprintf(buf, len, "dev%d", r->which[0]);
	else
		snprintf(buf, len, "all(%d)", r->nw);
	return buf;
}

static void print_row(const struct row *r)
{
	char name[32];
	printf("%-10s %4s %9.2f %9.2f %7.3f", row_name(r, name, sizeof name), dir_name[r->dir],
	       r->ours.agg, r->limit.agg, r->ours.agg / r->limit.agg);
	for (int k = 0; k < r->nw && r->nw > 1; k++)
		printf("%s%.2f/%.2f", k ? " " : "   ", r->ours.dev[k], r->limit.dev[k]);
	printf("\n");
	fflush(stdout);
}

/* ---- P2P ------------------------------------------------------------------ */

/* Device 0's batches may reach device 1's memory: 0, or -ENOTSUP. *how
 * names the call, for the report. */
static int peer_enable(struct bench *B, const char **how)
{
	*how = "vc_device_peer_enable";
	return vc_device_peer_enable(B->g[0].d, B->g[1].d);
}

/* ---- the data check ---------------------------------------------------------- */

enum { SIDE_HOST = 1, SIDE_DEV = 2 };

/* Word 0 names the page (side, device, slot); the rest follow from it. */
static void page_fill(uint64_t *w, int side, int dev, uint32_t slot)
{
	w[0] = (uint64_t)side << 56 | (uint64_t)dev << 48 | slot;
	for (uint32_t i = 1; i < PAGE / 8; i++)
		w[i] = bench_mix64(w[0] * (PAGE / 8) + i);
}

static void pool_fill(void *p, uint32_t pool, int side, int dev)
{
	for (uint32_t s = 0; s < pool; s++)
		page_fill((uint64_t *)((char *)p + (size_t)s * PAGE), side, dev, s);
}

/* Every j: page dperm[j] of dst must be the pattern of (side, dev,
 * sperm[j]). Returns the pages that are not, after naming the first. */
static uint64_t pool_check(const char *what, const void *dst, const uint32_t *sperm,
			   const uint32_t *dperm, uint32_t pool, int side, int dev)
{
	uint64_t want[PAGE / 8], bad = 0;
	for (uint32_t j = 0; j < pool; j++) {
		const uint64_t *got = (const uint64_t *)((const char *)dst + (size_t)dperm[j] * PAGE);
		page_fill(want, side, dev, sperm[j]);
		if (memcmp(got, want, PAGE) == 0 || bad++)
			continue;
		uint32_t i = 0;
		while (got[i] == want[i])
			i++;
		fprintf(stderr, BENCH_NAME ": %s: slot %u, word %u: %#llx, want %#llx (page %u of "
				"device %d)\n",
			what, dperm[j], i, (unsigned long long)got[i], (unsigned long long)want[i],
			sperm[j], dev);
	}
	return bad;
}

/* Device k's pool overwritten with its own pattern (through the scratch). */
static void dev_reset(struct bench *B, int k)
{
	struct gdev *g = &B->g[k];
	pool_fill(g->scr_ptr, B->pool, SIDE_DEV, k);
	BENCH_OK(g->d->ops->memcpy_sync(g->d, g->dev, g->scr, (size_t)B->pool * PAGE));
}

static void *dev_read(struct bench *B, int k)
{
	struct gdev *g = &B->g[k];
	BENCH_OK(g->d->ops->memcpy_sync(g->d, g->scr, g->dev, (size_t)B->pool * PAGE));
	return g->scr_ptr;
}

/* One pass of moves over every slot of every device each way (and peer),
 * onto pages that held something else: the pages checked. */
static uint64_t check(struct bench *B, const int *all, bool peer, uint64_t *bad)
{
	double d[MAXDEV];
	uint64_t pages = 0;
	*bad = 0;
	for (int k = 0; k < B->n; k++) {
		pool_fill(B->g[k].host_ptr, B->pool, SIDE_HOST, k);
		dev_reset(B, k);
	}
	run_moves(B, all, B->n, H2D, true, d);
	for (int k = 0; k < B->n; k++, pages += B->pool)
		*bad += pool_check("h2d", dev_read(B, k), B->g[k].hperm, B->g[k].dperm, B->pool,
				   SIDE_HOST, k);
	for (int k = 0; k < B->n; k++)
		dev_reset(B, k);
	run_moves(B, all, B->n, D2H, true, d);
	for (int k = 0; k < B->n; k++, pages += B->pool)
		*bad += pool_check("d2h", B->g[k].host_ptr, B->g[k].dperm, B->g[k].hperm, B->pool,
				   SIDE_DEV, k);
	if (peer) { /* device 1 holds its own pattern since the d2h check */
		run_moves(B, all, 1, P2P, true, d);
		*bad += pool_check("peer", dev_read(B, 1), B->g[0].dperm, B->g[1].dperm, B->pool,
				   SIDE_DEV, 0);
		pages += B->pool;
	}
	return pages;
}

/* ---- setup ------------------------------------------------------------------- */

/* AUTO settles on CUDA where it is built and a GPU answers, else emu. */
static int open_dev(int *kind, int ordinal, struct vc_device **d)
{
	if (*kind != VC_DEVICE_AUTO)
		return vc_device_open(*kind, ordinal, d);
	int r = vc_device_open(VC_DEVICE_CUDA, ordinal, d);
	*kind = VC_DEVICE_CUDA;
	if (r == -VC_ENOTBUILT || r == -VC_ENODEVICE) {
		*kind = VC_DEVICE_EMU;
		r = vc_device_open(*kind, ordinal, d);
	}
	return r;
}

/* The devices of --gpus, or every one of the kind (emu: two). Exits 0
 * with SKIP where there is none. */
static void open_devices(struct bench *B, const char *gpus)
{
	uint64_t ord[MAXDEV];
	int n = -1;
	if (gpus && strcmp(gpus, "all") != 0) {
		n = bench_parse_list_u64(gpus, ord, MAXDEV);
		if (n <= 0) {
			fprintf(stderr, BENCH_NAME ": bad --gpus '%s': a list of up to %d ordinals or "
					"\"all\"\n", gpus, MAXDEV);
			exit(2);
		}
	}
	for (int k = 0; n < 0 ? k < MAXDEV : k < n; k++) {
		int o = n < 0 ? k : (int)ord[k];
		if (n < 0 && B->kind == VC_DEVICE_EMU && k == 2)
			break;
		int r = open_dev(&B->kind, o, &B->g[k].d);
		if (r == -VC_ENODEVICE && n < 0 && k > 0)
			break; /* every CUDA device there is */
		if ((r == -VC_ENODEVICE || r == -VC_ENOTBUILT) && k == 0) {
			printf("SKIP multigpu: %s (%s)\n", vc_strerror(r), vc_last_error());
			exit(0);
		}
		if (r < 0) {
			fprintf(stderr, BENCH_NAME ": device %d: ", o);
			bench_die("vc_device_open", r);
		}
		B->g[k].ordinal = o;
		B->n = k + 1;
	}
}

static void *xmalloc(size_t len)
{
	void *p = malloc(len);
	if (!p)
		bench_die("malloc", -ENOMEM);
	return p;
}

static void setup_device(struct bench *B, int k, uint64_t *seed)
{
	struct gdev *g = &B->g[k];
	const size_t len = (size_t)B->pool * PAGE;
	BENCH_OK(g->d->ops->host_alloc(g->d, len, &g->host_ptr, &g->host));
	BENCH_OK(g->d->ops->host_alloc(g->d, len, &g->scr_ptr, &g->scr));
	BENCH_OK(g->d->ops->mem_alloc(g->d, len, &g->dev));
	/* Real data, every page touched once. */
	pool_fill(g->host_ptr, B->pool, SIDE_HOST, k);
	dev_reset(B, k);
	g->hperm = xmalloc(B->pool * sizeof *g->hperm);
	g->dperm = xmalloc(B->pool * sizeof *g->dperm);
	bench_permutation(g->hperm, B->pool, seed);
	bench_permutation(g->dperm, B->pool, seed);
}

static void start_feeders(struct bench *B, int k)
{
	struct gdev *g = &B->g[k];
	BENCH_OK(vc_batcher_create(g->d, PAGE, B->batch, 50, NULL, &g->bt));
	for (uint32_t t = 0; t < B->tpg; t++) {
		struct feeder *f = &g->f[t];
		uint32_t lo = (uint32_t)((uint64_t)B->pool * t / B->tpg);
		uint32_t hi = (uint32_t)((uint64_t)B->pool * (t + 1) / B->tpg);
		*f = (struct feeder){ .bt = g->bt, .lo = lo, .len = hi - lo, .n = B->batch,
				      .w = B->window };
		f->tk = xmalloc((size_t)B->window * B->batch * sizeof *f->tk);
		f->mv = xmalloc((size_t)B->batch * sizeof *f->mv);
	}
}

static void teardown_device(struct bench *B, int k)
{
	struct gdev *g = &B->g[k];
	vc_batcher_destroy(g->bt);
	for (uint32_t t = 0; t < B->tpg; t++) {
		free(g->f[t].tk);
		free(g->f[t].mv);
	}
	g->d->ops->mem_free(g->d, g->dev);
	g->d->ops->host_free(g->d, g->host_ptr);
	g->d->ops->host_free(g->d, g->scr_ptr);
	free(g->hperm);
	free(g->dperm);
	vc_device_close(g->d);
}

/* ---- JSON ------------------------------------------------------------------ */

static void json_fig(FILE *f, const char *key, const struct fig *x, int nw)
{
	fprintf(f, ", \"%s\": {\"agg\": ", key);
	bench_json_num(f, x->agg);
	fputs(", \"per_device\": [", f);
	for (int k = 0; k < nw; k++) {
		fputs(k ? ", " : "", f);
		bench_json_num(f, x->dev[k]);
	}
	fputs("]}", f);
}

struct result {
	struct row rows[2 * (MAXDEV + 1) + 1];
	int nrows;
	double ratio_ours[2], ratio_limit[2]; /* all/single, h2d and d2h; NAN with one device */
	double goal, worst;
	bool met;
	int peer_r; /* peer_enable's; 1: one device, not tried */
	const char *peer_how;
	struct row peer;
	uint64_t checked, bad;
};

static void write_json(const struct bench *B, const struct result *R, const char *path)
{
	FILE *f = bench_json_open(path, "multigpu", B->g[0].d->desc);
	fprintf(f, ",\n  \"backend\": \"%s\",\n  \"devices\": [", B->g[0].d->ops->name);
	for (int k = 0; k < B->n; k++)
		fprintf(f, "%s\n    {\"index\": %d, \"ordinal\": %d, \"desc\": \"%s\"}", k ? "," : "", k,
			B->g[k].ordinal, B->g[k].d->desc);
	fprintf(f, "\n  ],\n  \"config\": {\"page_size\": %u, \"pool_pages\": %u, \"batch\": %u, "
		   "\"threads_per_gpu\": %u, \"window\": %u, \"reps\": %d, \"seconds\": %g, "
		   "\"bulk_bytes\": %zu, \"quick\": %s},\n",
		PAGE, B->pool, B->batch, B->tpg, B->window, B->reps, B->seconds, bulk_len(B),
		B->quick ? "true" : "false");
	fputs("  \"unit\": \"GB/s (1e9 bytes/s)\",\n  \"baseline\": \"limit = one bulk pinned copy "
	      "per device with memcpy_sync (CUDA: cudaMemcpyAsync), alone or on every device at "
	      "once\",\n  \"rows\": [",
	      f);
	for (int i = 0; i < R->nrows; i++) {
		const struct row *r = &R->rows[i];
		char name[32];
		fprintf(f, "%s\n    {\"config\": \"%s\", \"dir\": \"%s\", \"devices\": [", i ? "," : "",
			row_name(r, name, sizeof name), dir_name[r->dir]);
		for (int k = 0; k < r->nw; k++)
			fprintf(f, "%s%d", k ? ", " : "", r->which[k]);
		fputc(']', f);
		json_fig(f, "ours", &r->ours, r->nw);
		json_fig(f, "limit", &r->limit, r->nw);
		bench_json_field(f, "      ", "ours_over_limit", r->ours.agg / r->limit.agg);
		fputc('}', f);
	}
	fputs("\n  ],\n  \"all_over_single\": {", f);
	for (int d = 0; d < 2; d++) {
		fprintf(f, "%s\"%s\": {\"ours\": ", d ? ", " : "", dir_name[d]);
		bench_json_num(f, R->ratio_ours[d]);
		fputs(", \"limit\": ", f);
		bench_json_num(f, R->ratio_limit[d]);
		fputc('}', f);
	}
	fprintf(f, "},\n  \"goal\": {\"rule\": \"ours all/single >= 0.9 x devices (1.8 for 2)\", "
		   "\"target\": ");
	bench_json_num(f, R->goal);
	fputs(", \"worst\": ", f);
	bench_json_num(f, R->worst);
	fprintf(f, ", \"met\": %s},\n  \"peer\": ", B->n < 2 ? "null" : R->met ? "true" : "false");
	if (R->peer_r == 0) {
		fprintf(f, "{\"available\": true, \"how\": \"%s\", \"src\": 0, \"dst\": 1, \"ours\": ",
			R->peer_how);
		bench_json_num(f, R->peer.ours.agg);
		fputs(", \"bulk\": ", f);
		bench_json_num(f, R->peer.limit.agg);
		fputc('}', f);
	} else if (R->peer_r < 0) {
		fprintf(f, "{\"available\": false, \"how\": \"%s\", \"error\": \"%s\"}", R->peer_how,
			vc_strerror(R->peer_r));
	} else {
		fputs("null", f);
	}
	fprintf(f, ",\n  \"check\": {\"pages\": %llu, \"bad\": %llu}",
		(unsigned long long)R->checked, (unsigned long long)R->bad);
	bench_json_close(f);
}

/* ---- main ------------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr, "usage: multigpu [--device auto|emu|cuda] [--gpus 0,1|all] "
			"[--threads-per-gpu T] [--batch N]\n"
			"                [--window W] [--pool PAGES] [--seconds S] [--reps R] "
			"[--quick] [--json FILE]\n");
	exit(2);
}

static uint32_t num_opt(const char *opt, const char *v, uint32_t lo, uint32_t hi)
{
	char *e;
	unsigned long x = strtoul(v, &e, 0);
	if (e == v || *e || !isdigit((unsigned char)*v) || x < lo || x > hi) {
		fprintf(stderr, BENCH_NAME ": %s takes a number from %u to %u, not '%s'\n", opt, lo,
			hi, v);
		usage();
	}
	return (uint32_t)x;
}

int main(int argc, char **argv)
{
	struct bench *B = calloc(1, sizeof *B);
	struct result *R = calloc(1, sizeof *R);
	if (!B || !R)
		bench_die("malloc", -ENOMEM);
	struct bench_common c = bench_common_init();
	const char *gpus = NULL;
	uint32_t pool = 0, window = 0, reps = 0;
	B->tpg = 2;
	B->batch = 512;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		if (bench_common_opt(argc, argv, &i, &c, &v, usage))
			continue;
		if (strcmp(a, "--gpus") == 0) {
			gpus = v;
		} else if (strcmp(a, "--threads-per-gpu") == 0) {
			B->tpg = num_opt(a, v, 1, MAXFEED);
		} else if (strcmp(a, "--batch") == 0) {
			B->batch = num_opt(a, v, 1, 65536);
		} else if (strcmp(a, "--window") == 0) {
			window = num_opt(a, v, 1, 64);
		} else if (strcmp(a, "--pool") == 0) {
			pool = num_opt(a, v, 1, 1u << 24);
		} else if (strcmp(a, "--reps") == 0) {
			reps = num_opt(a, v, 1, MAXREPS);
		} else if (strcmp(a, "--seconds") == 0) {
			char *e;
			B->seconds = strtod(v, &e);
			if (e == v || *e || !(B->seconds > 0 && B->seconds <= 60))
				usage();
		} else {
			usage();
		}
	}
	B->quick = c.quick;
	B->kind = c.device;
	B->reps = reps ? (int)reps : c.quick ? 3 : 5;
	if (!(B->seconds > 0))
		B->seconds = c.quick ? 0.2 : 1.0;
	/* transfer.c keeps 6 batches in flight on one batcher (of its 8
	 * slots, one filling): the feeders of a device share them. */
	B->window = window ? window : B->tpg < 6 ? 6 / B->tpg : 1;
	B->pool = pool ? pool : c.quick ? 4096 : 65536;
	/* Each feeder's share holds its window, so pages in flight are
	 * disjoint. */
	if (B->pool < B->tpg * B->window * B->batch)
		B->pool = B->tpg * B->window * B->batch;

	open_devices(B, gpus);
	uint64_t seed = 42;
	for (int k = 0; k < B->n; k++)
		setup_device(B, k, &seed);
	R->peer_r = 1;
	if (B->n >= 2)
		R->peer_r = peer_enable(B, &R->peer_how);
	if (R->peer_r < 0 && R->peer_r != -ENOTSUP)
		bench_die("peer_enable", R->peer_r);
	for (int k = 0; k < B->n; k++)
		start_feeders(B, k);

	double t_start = bench_now_s();
	printf("multigpu: %s, %d device%s\n", B->g[0].d->ops->name, B->n, B->n > 1 ? "s" : "");
	for (int k = 0; k < B->n; k++)
		printf("  dev%d = ordinal %d: %s\n", k, B->g[k].ordinal, B->g[k].d->desc);
	printf("4 KiB pages scattered over %u-page pools per device, batches of %u, %u feeders x "
	       "%u batches in flight per device; median of %d x %g s; GB/s\n"
	       "limit: one %zu MiB bulk copy per device (memcpy_sync), alone or all at once\n\n",
	       B->pool, B->batch, B->tpg, B->window, B->reps, B->seconds, bulk_len(B) >> 20);
	printf("%-10s %4s %9s %9s %7s   per device: ours/limit\n", "config", "dir", "ours", "limit",
	       "o/l");

	int all[MAXDEV];
	for (int k = 0; k < B->n; k++)
		all[k] = k;
	for (int d = H2D; d <= D2H; d++) {
		double single_o = 0, single_l = 0;
		for (int k = 0; k <= B->n; k++) {
			if (k == B->n && B->n < 2)
				break;
			struct row *r = &R->rows[R->nrows++];
			r->dir = d;
			r->nw = k < B->n ? 1 : B->n;
			memcpy(r->which, k < B->n ? &all[k] : all, (size_t)r->nw * sizeof *all);
			measure(B, r);
			print_row(r);
			if (k < B->n)
				single_o += r->ours.agg / B->n, single_l += r->limit.agg / B->n;
			else
				R->ratio_ours[d] = r->ours.agg / single_o,
				R->ratio_limit[d] = r->limit.agg / single_l;
		}
		if (B->n < 2)
			R->ratio_ours[d] = R->ratio_limit[d] = NAN;
	}

	if (R->peer_r == 0) {
		R->peer = (struct row){ .dir = P2P, .nw = 1 };
		measure(B, &R->peer);
		print_row(&R->peer);
	}

	R->checked = check(B, all, R->peer_r == 0, &R->bad);

	printf("\n");
	R->goal = 0.9 * B->n;
	R->worst = fmin(R->ratio_ours[H2D], R->ratio_ours[D2H]);
	R->met = R->worst >= R->goal;
	if (B->n >= 2) {
		printf("all/single (all's aggregate / mean of the singles): h2d ours %.2f limit %.2f; "
		       "d2h ours %.2f limit %.2f\n",
		       R->ratio_ours[H2D], R->ratio_limit[H2D], R->ratio_ours[D2H],
		       R->ratio_limit[D2H]);
		printf("goal ours all/single >= %.2f (0.9 x %d devices): %s (worst %.2f)\n", R->goal,
		       B->n, R->met ? "met" : "NOT met", R->worst);
	} else {
		printf("one device: no all/single ratio\n");
	}
	if (R->peer_r == 0)
		printf("peer dev0 -> dev1: ours %.2f GB/s, bulk %.2f GB/s, ours/bulk %.3f (P2P by %s)\n",
		       R->peer.ours.agg, R->peer.limit.agg, R->peer.ours.agg / R->peer.limit.agg,
		       R->peer_how);
	else if (R->peer_r < 0)
		printf("peer: P2P not available between dev0 and dev1 (%s, by %s): skipped\n",
		       vc_strerror(R->peer_r), R->peer_how);
	printf("data check: %llu pages moved and compared, %llu wrong; %.1f s\n",
	       (unsigned long long)R->checked, (unsigned long long)R->bad,
	       bench_now_s() - t_start);

	if (c.json)
		write_json(B, R, c.json);
	for (int k = 0; k < B->n; k++)
		teardown_device(B, k);
	int rc = R->bad ? 1 : 0;
	free(B);
	free(R);
	return rc;
}
