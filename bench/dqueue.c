/* Device queues against launched batches and the bulk copy, side by side.
 *
 * The question for the engine's data path: how fast can callers move
 * single 4 KiB pages between device memory and pinned host memory, alone
 * and many at once? Three ways, in one run on one device:
 *   queue   device/queue.h: the server consumes rings continuously
 *   batch   core/batcher.h over launched batches (one kernel per batch)
 *   bulk    one cudaMemcpy-class copy of 64 MiB (memcpy_sync): the link
 *
 * Measures
 *   latency   one page device -> host, one thread, warm (queue: the server
 *             running; batch: the device idle): p50/p99 over --n moves;
 *             and the queue's cold start (the server stopped by idleness)
 *   threads   T threads each moving one page at a time and waiting for it
 *             (a synchronous GPU-tier hit): pages/s for T = 1..16, both paths
 *   depth     T threads each keeping D pages in flight, submitted one page
 *             per call (an asynchronous caller): pages/s and GB/s, both
 *             directions, queue only
 *
 * Pages are scattered at random over a 256 MiB device region.
 * Usage: dqueue [--device auto|cuda|emu] [--seconds S] [--n N] [--quick] [--latency-only]
 *               [--json FILE]
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define BENCH_NAME "dqueue"
#include "bench.h"
#include "base/clock.h"
#include "base/rand.h"
#include "engine/batcher.h"
#include "device/device.h"
#include "device/queue.h"

#define PS 4096u
#define MAXT 16

static struct vc_device *dev;
static uint64_t gpu_base, gpu_pages;
static unsigned char *host; /* MAXT x 1024 pinned pages */
static uint64_t host_dev;
static double seconds = 1.0;

static uint64_t hpage(int thread, uint32_t i)
{
	return host_dev + ((uint64_t)thread * 1024 + (i % 1024)) * PS;
}

static uint64_t gpage(uint64_t *seed)
{
	return gpu_base + (vc_rand64(seed) % gpu_pages) * PS;
}

enum path { QUEUE, BATCH };

struct job {
	enum path path;
	struct vc_dq *q;
	struct vc_batcher *bat;
	int thread, depth;
	bool h2d;
	uint64_t pages;
	double *lat; /* per-move latency (us), when not NULL */
	int nlat;
	unsigned char *sink;
};

static atomic_bool go, halt;

/* One page at a time, each waited for; copies it out of the pinned page as
 * a read of the engine would. */
static void *sync_main(void *arg)
{
	struct job *j = arg;
	uint64_t seed = 99 + (uint64_t)j->thread;
	while (!atomic_load(&go))
		;
	for (uint32_t i = 0; j->lat ? (int)i < j->nlat : !atomic_load(&halt); i++) {
		struct vc_move m = { .src = gpage(&seed), .dst = hpage(j->thread, i) };
		uint64_t t0 = j->lat ? vc_now_ns() : 0;
		if (j->path == QUEUE) {
			struct vc_dq_span sp;
			BENCH_OK(vc_dq_submit(j->q, vc_dq_home(j->q), &m, 1, &sp));
			BENCH_OK(vc_dq_wait(j->q, &sp));
		} else {
			struct vc_ticket t;
			BENCH_OK(vc_batcher_add(j->bat, &m, &t));
			BENCH_OK(vc_batcher_wait(j->bat, &t));
		}
		memcpy(j->sink, host + (m.dst - host_dev), PS);
		if (j->lat)
			j->lat[i] = (double)(vc_now_ns() - t0) / 1e3;
		j->pages++;
	}
	return NULL;
}

/* D pages in flight, one submission each, reaped in order. */
static void *depth_main(void *arg)
{
	struct job *j = arg;
	uint64_t seed = 77 + (uint64_t)j->thread;
	struct vc_dq_span *sp = calloc((size_t)j->depth, sizeof *sp);
	uint32_t ring = vc_dq_home(j->q);
	while (!atomic_load(&go))
		;
	uint64_t head = 0, tail = 0;
	while (!atomic_load(&halt)) {
		while (tail - head < (uint64_t)j->depth) {
			struct vc_move m = { .src = gpage(&seed), .dst = hpage(j->thread, (uint32_t)tail) };
			if (j->h2d) {
				uint64_t x = m.src;
				m.src = m.dst;
				m.dst = x;
			}
			BENCH_OK(vc_dq_submit(j->q, ring, &m, 1, &sp[tail % (uint64_t)j->depth]));
			tail++;
		}
		BENCH_OK(vc_dq_wait(j->q, &sp[head % (uint64_t)j->depth]));
		head++;
		j->pages++;
	}
	while (head < tail)
		BENCH_OK(vc_dq_wait(j->q, &sp[head++ % (uint64_t)j->depth]));
	free(sp);
	return NULL;
}

/* Runs n jobs for `seconds`; pages per second over all of them. */
static double run(struct job *jobs, int n, void *(*fn)(void *))
{
	pthread_t tid[MAXT];
	atomic_store(&go, false);
	atomic_store(&halt, false);
	for (int i = 0; i < n; i++) {
		jobs[i].pages = 0;
		jobs[i].sink = malloc(PS);
		if (pthread_create(&tid[i], NULL, fn, &jobs[i]))
			bench_die("pthread_create", -EAGAIN);
	}
	uint64_t t0 = vc_now_ns();
	atomic_store(&go, true);
	if (!jobs[0].lat)
		usleep((useconds_t)(seconds * 1e6));
	atomic_store(&halt, true);
	uint64_t pages = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(tid[i], NULL);
		pages += jobs[i].pages;
		free(jobs[i].sink);
	}
	return (double)pages / ((double)(vc_now_ns() - t0) / 1e9);
}

struct lat {
	double p50, p99;
};

static struct lat latency(enum path path, struct vc_dq *q, struct vc_batcher *bat, int n)
{
	double *v = malloc((size_t)n * sizeof *v);
	struct job j = { .path = path, .q = q, .bat = bat, .lat = v, .nlat = n };
	run(&j, 1, sync_main);
	struct lat l = { bench_quantile(v, n, 0.5), bench_quantile(v, n, 0.99) };
	free(v);
	return l;
}

/* The queue's first move after its server stopped for idleness. */
static struct lat cold(struct vc_dq *q, int n)
{
	double *v = malloc((size_t)n * sizeof *v);
	uint64_t seed = 5;
	for (int i = 0; i < n; i++) {
		usleep((useconds_t)(q->idle_ns / 1000 * 3));
		struct vc_move m = { .src = gpage(&seed), .dst = hpage(0, 0) };
		struct vc_dq_span sp;
		uint64_t t0 = vc_now_ns();
		BENCH_OK(vc_dq_submit(q, 0, &m, 1, &sp));
		BENCH_OK(vc_dq_wait(q, &sp));
		v[i] = (double)(vc_now_ns() - t0) / 1e3;
	}
	struct lat l = { bench_quantile(v, n, 0.5), bench_quantile(v, n, 0.99) };
	free(v);
	return l;
}

static double bulk(bool h2d)
{
	size_t len = 64u << 20;
	uint64_t t0 = 0;
	for (int rep = 0; rep < 4; rep++) { /* the first is a warm-up */
		if (rep == 1)
			t0 = vc_now_ns();
		BENCH_OK(dev->ops->memcpy_sync(dev, h2d ? gpu_base : host_dev, h2d ? host_dev : gpu_base,
					       len));
	}
	return 3.0 * (double)len / ((double)(vc_now_ns() - t0) / 1e9);
}

int main(int argc, char **argv)
{
	int device = VC_DEVICE_AUTO, n = 5000;
	bool quick = false, lat_only = false;
	const char *json = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--quick") == 0) {
			quick = true;
		} else if (strcmp(a, "--latency-only") == 0) {
			lat_only = true;
		} else if (v && strcmp(a, "--device") == 0) {
			device = vc_device_parse(v);
			i++;
		} else if (v && strcmp(a, "--seconds") == 0) {
			seconds = atof(v);
			i++;
		} else if (v && strcmp(a, "--n") == 0) {
			n = atoi(v);
			i++;
		} else if (v && strcmp(a, "--json") == 0) {
			json = v;
			i++;
		} else {
			device = -1;
			break;
		}
	}
	if (device < 0 || n < 100 || !(seconds > 0)) {
		fprintf(stderr, "usage: dqueue [--device auto|cuda|emu] [--seconds S>0] [--n N>=100] "
				"[--quick] [--json FILE]\n");
		return 2;
	}
	if (quick) {
		seconds = seconds < 0.2 ? seconds : 0.2;
		n = n < 1000 ? n : 1000;
	}
	BENCH_OK(vc_device_open(device, 0, &dev));
	gpu_pages = (256u << 20) / PS;
	BENCH_OK(dev->ops->mem_alloc(dev, gpu_pages * PS, &gpu_base));
	void *h;
	BENCH_OK(dev->ops->host_alloc(dev, (size_t)MAXT * 1024 * PS, &h, &host_dev));
	host = h;
	memset(host, 1, (size_t)MAXT * 1024 * PS);
	struct vc_dq *q;
	struct vc_dq_config qc = { .page_size = PS };
	BENCH_OK(vc_dq_create(dev, &qc, &q));
	struct vc_batcher *bat;
	setenv("VC_MOVE_PATH", "batch", 1); /* the launched-batch baseline, not the queue */
	BENCH_OK(vc_batcher_create(dev, PS, 256, 50, NULL, &bat));
	printf("device: %s\nqueue: %u rings x %u lanes, depth %u, idle stop %llu us\n", dev->desc,
	       q->nrings, q->lanes, q->depth, (unsigned long long)(q->idle_ns / 1000));
	if (lat_only) {
		latency(QUEUE, q, NULL, n / 10 + 10);
		struct lat l = latency(QUEUE, q, NULL, n);
		struct job jobs[MAXT];
		for (int i = 0; i < MAXT; i++)
			jobs[i] = (struct job){ .path = QUEUE, .q = q, .thread = i };
		double t16 = run(jobs, MAXT, sync_main);
		printf("latency-only: p50 %.2f us, p99 %.2f us; 16 sync threads %.3f M pages/s\n", l.p50,
		       l.p99, t16 / 1e6);
		vc_dq_destroy(q);
		return 0;
	}

	double bulk_d2h = bulk(false), bulk_h2d = bulk(true);
	double limit = bulk_d2h / PS;
	printf("bulk copy: d2h %.1f GB/s, h2d %.1f GB/s (d2h limit %.2f M pages/s)\n\n",
	       bulk_d2h / 1e9, bulk_h2d / 1e9, limit / 1e6);

	latency(QUEUE, q, NULL, n / 10 + 10); /* warm-up: the server starts */
	struct lat lq = latency(QUEUE, q, NULL, n), lb = latency(BATCH, NULL, bat, n);
	struct lat lc = cold(q, quick ? 20 : 100);
	printf("latency, one 4 KiB page d2h + copy out (us)\n  %-18s %8s %8s\n", "", "p50", "p99");
	printf("  %-18s %8.2f %8.2f\n  %-18s %8.2f %8.2f\n  %-18s %8.2f %8.2f\n\n", "queue (warm)",
	       lq.p50, lq.p99, "queue (cold start)", lc.p50, lc.p99, "batch", lb.p50, lb.p99);

	static const int tcounts[] = { 1, 2, 4, 8, 16 };
	double tq[5], tb[5];
	printf("synchronous callers, one page each (M pages/s)\n  %7s %9s %9s %7s %9s\n", "threads",
	       "queue", "batch", "ratio", "of limit");
	for (int k = 0; k < 5; k++) {
		struct job jobs[MAXT];
		for (int i = 0; i < tcounts[k]; i++)
			jobs[i] = (struct job){ .path = QUEUE, .q = q, .thread = i };
		tq[k] = run(jobs, tcounts[k], sync_main);
		for (int i = 0; i < tcounts[k]; i++)
			jobs[i] = (struct job){ .path = BATCH, .bat = bat, .thread = i };
		tb[k] = run(jobs, tcounts[k], sync_main);
		printf("  %7d %9.3f %9.3f %7.1f %9.2f\n", tcounts[k], tq[k] / 1e6, tb[k] / 1e6,
		       tq[k] / tb[k], tq[k] / limit);
	}

	static const int dthreads[] = { 1, 2, 4 }, depths[] = { 1, 8, 64, 512 };
	double dd[3][4][2];
	printf("\nasynchronous callers, D pages in flight each (M pages/s; GB/s)\n"
	       "  %7s %5s %16s %16s\n", "threads", "D", "d2h", "h2d");
	for (int a = 0; a < 3; a++)
		for (int b = 0; b < 4; b++) {
			for (int dir = 0; dir < 2; dir++) {
				struct job jobs[MAXT];
				for (int i = 0; i < dthreads[a]; i++)
					jobs[i] = (struct job){ .path = QUEUE, .q = q, .thread = i,
								.depth = depths[b], .h2d = dir == 1 };
				dd[a][b][dir] = run(jobs, dthreads[a], depth_main);
			}
			printf("  %7d %5d %7.3f %7.1f  %7.3f %7.1f\n", dthreads[a], depths[b],
			       dd[a][b][0] / 1e6, dd[a][b][0] * PS / 1e9, dd[a][b][1] / 1e6,
			       dd[a][b][1] * PS / 1e9);
		}
	struct vc_dq_stats st;
	vc_dq_get_stats(q, &st);
	printf("\nqueue: %llu submissions, %llu pieces, server started %llu times\n",
	       (unsigned long long)st.submits, (unsigned long long)st.pieces,
	       (unsigned long long)st.starts);

	if (json) {
		FILE *f = bench_json_open(json, "dqueue", dev->desc);
		fprintf(f, ",\n  \"rings\": %u, \"lanes\": %u, \"depth\": %u", q->nrings, q->lanes,
			q->depth);
		bench_json_field(f, "  ", "bulk_d2h_GBps", bulk_d2h / 1e9);
		bench_json_field(f, "  ", "bulk_h2d_GBps", bulk_h2d / 1e9);
		bench_json_field(f, "  ", "lat_queue_p50_us", lq.p50);
		bench_json_field(f, "  ", "lat_queue_p99_us", lq.p99);
		bench_json_field(f, "  ", "lat_queue_cold_p50_us", lc.p50);
		bench_json_field(f, "  ", "lat_batch_p50_us", lb.p50);
		bench_json_field(f, "  ", "lat_batch_p99_us", lb.p99);
		fputs(",\n  \"sync\": [", f);
		for (int k = 0; k < 5; k++)
			fprintf(f, "%s\n    {\"threads\": %d, \"queue_pps\": %.0f, \"batch_pps\": %.0f}",
				k ? "," : "", tcounts[k], tq[k], tb[k]);
		fputs("\n  ],\n  \"depth\": [", f);
		for (int a = 0; a < 3; a++)
			for (int b = 0; b < 4; b++)
				fprintf(f, "%s\n    {\"threads\": %d, \"depth\": %d, \"d2h_pps\": %.0f, "
					   "\"h2d_pps\": %.0f}",
					a || b ? "," : "", dthreads[a], depths[b], dd[a][b][0], dd[a][b][1]);
		fputs("\n  ]", f);
		bench_json_close(f);
	}
	vc_batcher_destroy(bat);
	vc_dq_destroy(q);
	dev->ops->host_free(dev, host);
	dev->ops->mem_free(dev, gpu_base);
	vc_device_close(dev);
	return 0;
}
