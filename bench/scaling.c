/* Read scaling: random reads through vc_read from 1..N threads, against
 * pread of the same file from the OS page cache, per thread count.
 *
 * The question (the read-scaling issue): do reads that hit the GPU tier
 * scale with threads up to what the PCIe link can move? On the H100
 * machine 4 KiB GPU-tier hits stayed near 96k IOPS from 1 to 16 threads.
 *
 * Cases (uniform random reads, aligned to their size, over a working set
 * that starts at offset 0 of one temporary file):
 *   gpu   working set that fits host + GPU tiers but not the host tier
 *         (default 384 MiB over 64 MiB + 512 MiB): in steady state a read
 *         misses the host tier and hits the GPU tier, which swaps the page
 *         with the host tier's victim. 4 KiB and 128 KiB reads. Warm-up:
 *         vc_prefetch of the working set into the GPU tier, one sequential
 *         pass of vc_read (the last host-tier-size of it ends in the host
 *         tier), then one untimed point (below).
 *   host  working set of 3/4 of the host tier: every read a host-tier hit
 *         (the engine's floor). Warm-up: vc_prefetch into the host tier.
 *   miss  a file far larger than both tiers (default 4 GiB): nearly every
 *         read goes to the backing store, once per backing latency
 *         (vc_config.backing_latency_ns, default 0, 20 and 100 us; the
 *         file itself is in the OS page cache). Warm-up: both tiers filled
 *         by vc_prefetch, so evictions run from the first timed read.
 * Every case's warm-up ends with one untimed point at the largest thread
 * count, so the GPU log has turned over before the first timed point.
 *
 * A point: T threads, each reading at random offsets until a stop flag
 * after --seconds; IOPS and GB/s over the wall time; p50/p99 latency from
 * every SAMPLE_EVERY-th read of each thread (clock_gettime around the
 * call); the share of page accesses served by each tier, from vc_get_stats
 * before and after. Each read's first 8 bytes are checked against the
 * page's stamp (vc_wl_make_file): a wrong one fails the run.
 *
 * Baseline: pread of the same file and the same offsets' distribution,
 * same threads and sizes, after posix_fadvise(WILLNEED) and one sequential
 * read of the file, so the OS page cache holds it: the kernel's cached read
 * path with no capacity limit. "ratio" is ours / pread.
 *
 * Two hooks, marked HOOK below: the physical limit (limit_pages_per_s, 0
 * until filled in; printed "-") and an asynchronous interface (run_async,
 * which the engine does not have yet).
 *
 * Usage: scaling [--device auto|emu|cuda] [--cases gpu,host,miss]
 *                [--threads 1,2,4,8,16] [--seconds S] [--host-bytes B]
 *                [--gpu-bytes B] [--ws-bytes B] [--miss-bytes B]
 *                [--latencies 0,20,100] [--gpu-hits serve|swap] [--policy NAME]
 *                [--gpus LIST] [--aio-threads 1,2,4] [--quick] [--json FILE]
 * Sizes take K, M, G suffixes (binary). --quick: host 16 MiB, GPU 64 MiB,
 * working set 48 MiB, miss file 512 MiB, 0.3 s a point (the 2-core
 * machine); options given explicitly win over it. --gpus: vc_config.gpus
 * ("0,1", "all", ...: the GPU tier over several GPUs, --gpu-bytes their
 * total); the cache must then report that many parts (vc_stats.gpus), and
 * each case prints every part's share of the GPU-tier hits. The limit
 * column stays one GPU's (device 0).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#define BENCH_NAME "scaling"
#include "bench.h"
#include "base/clock.h"
#include "base/rand.h"
#include "device/device.h"
#include "tools/workload.h"

#define PS 4096u             /* page size and the small read */
#define BIG (128u << 10)     /* the large read, case gpu */
#define MIB (1ull << 20)
#define MAXLIST 16           /* entries of --threads and --latencies */
#define MAX_THREADS 1024
#define MAX_ATHREADS 64      /* vc_aio threads a point */
/* One read in 16 is timed: two clock_gettime calls (~20 ns each through
 * the vDSO on the 2-core machine) around every read would add a third to
 * a 4 KiB host-tier hit (~0.12 us there) and depress its IOPS; one in 16
 * adds ~2%. At 100k IOPS a 2 s point still gives 12k samples, ample for
 * p99. */
#define SAMPLE_EVERY 16

enum { C_GPU, C_HOST, C_MISS, NCASES };
static const char *case_name[NCASES] = { "gpu", "host", "miss" };

struct opts {
	int device;
	unsigned cases; /* bit 1 << C_* */
	int threads[MAXLIST];
	int nthreads;
	int athreads[MAXLIST]; /* vc_aio's thread counts (--aio-threads; default 1, 2, 4) */
	int nathreads;
	double lat_us[MAXLIST];
	int nlat;
	double seconds;
	uint64_t host_bytes, gpu_bytes, ws_bytes, miss_bytes; /* 0: default */
	int gpu_hits; /* enum vc_gpu_hits */
	int encrypt;  /* enum vc_encrypt */
	const char *policy; /* vc_config.policy; NULL: the default */
	const char *gpus;   /* vc_config.gpus; NULL: one GPU */
	bool quick;
	const char *json;
};

/* ---- HOOKS ------------------------------------------------------------- */

/* The physical limit: the device's bulk copy rate device -> pinned host
 * (64 MiB, one copy-engine DMA; the best the link gives one direction), in
 * 4 KiB pages per second, measured once on a device opened beside the
 * cache. A GPU-tier hit served in place moves one page that way. */
static double limit_pps = -1;

static double limit_pages_per_s(const vc_cache *c)
{
	if (limit_pps >= 0)
		return limit_pps;
	limit_pps = 0;
	struct vc_device *d;
	if (vc_device_open(vc_device_parse(vc_device_name(c)), 0, &d) < 0)
		return 0;
	const size_t len = 64u << 20;
	void *h;
	uint64_t hd, g;
	if (d->ops->host_alloc(d, len, &h, &hd) == 0) {
		if (d->ops->mem_alloc(d, len, &g) == 0) {
			uint64_t t0 = 0;
			int r = 0;
			for (int i = 0; i < 4 && r == 0; i++) { /* the first is a warm-up */
				if (i == 1)
					t0 = vc_now_ns();
				r = d->ops->memcpy_sync(d, hd, g, len);
			}
			if (r == 0)
				limit_pps = 3.0 * len / PS / ((double)(vc_now_ns() - t0) / 1e9);
			d->ops->mem_free(d, g);
		}
		d->ops->host_free(d, h);
	}
	vc_device_close(d);
	return limit_pps;
}

/* Asynchronous reads (vc_aio): T threads, each with its own queue keeping D
 * reads in flight, over the case's working set (4 KiB reads, and 128 KiB
 * in case gpu). Every completed read's page stamp is checked. Points go
 * to the table below the synchronous ones and to the JSON's "async". */
/* ---- the temporary file ------------------------------------------------ */

/* Removed at exit (bench_die included) and on SIGINT, SIGTERM, SIGHUP. */
static char tmp_path[512];

static void remove_tmp(void)
{
	if (tmp_path[0])
		unlink(tmp_path);
}

static void on_signal(int sig)
{
	remove_tmp(); /* unlink is async-signal-safe */
	raise(sig);   /* SA_RESETHAND: the default action now */
}

static void make_tmp(uint64_t bytes)
{
	const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(tmp_path, sizeof tmp_path, "%s/vc-scaling-%d.img", dir, (int)getpid());
	atexit(remove_tmp);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESETHAND;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	uint64_t t0 = vc_now_ns();
	/* Real data, not a sparse file: holes would read as zeroes from no
	 * page at all and flatter the miss case and the baseline. */
	int r = vc_wl_make_file(tmp_path, bytes / PS, PS);
	if (r < 0)
		bench_die("temporary file", r);
	printf("file %s: %.0f MiB written in %.1f s\n", tmp_path, (double)bytes / MIB,
	       (double)(vc_now_ns() - t0) / 1e9);
}

/* The baseline's fd, with the whole file read once into the OS page cache. */
static int open_baseline(uint64_t bytes)
{
	int fd = open(tmp_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		bench_die("open for pread", -errno);
	posix_fadvise(fd, 0, (off_t)bytes, POSIX_FADV_WILLNEED);
	char *buf = malloc(MIB);
	if (!buf)
		bench_die("baseline buffer", -ENOMEM);
	for (uint64_t off = 0; off < bytes;) {
		ssize_t n = pread(fd, buf, MIB, (off_t)off);
		if (n <= 0)
			bench_die("reading the file into the OS page cache", n < 0 ? -errno : -EIO);
		off += (uint64_t)n;
	}
	free(buf);
	return fd;
}

/* ---- one point: T threads of random reads for a fixed time -------------- */

enum reader { RD_VC, RD_PREAD };

struct load {
	enum reader rd;
	vc_cache *c; /* RD_VC */
	int fd;      /* RD_PREAD */
	uint64_t ws; /* reads fall in [0, ws), aligned to io */
	size_t io;
	int threads;
	double seconds;
	uint64_t seed;
};

struct perf {
	uint64_t ops, samples;
	double seconds, iops, gbps, p50_us, p99_us;
	double hit_host, hit_gpu, miss; /* RD_VC: shares of page accesses */
	double lock_p99_us;             /* RD_VC: the engine lock's holds in the point, p99 */
};

struct worker {
	pthread_t th;
	const struct load *ld;
	unsigned char *buf;
	uint64_t seed, ops, bad, bad_off;
	double *lat; /* sampled latencies, us */
	size_t nlat, cap;
	int err;
	uint64_t err_off;
	char msg[256];
};

static atomic_bool stop_flag;
static pthread_barrier_t gate;

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const struct load *ld = w->ld;
	const uint64_t units = ld->ws / ld->io;
	pthread_barrier_wait(&gate);
	for (uint64_t i = 0; !atomic_load_explicit(&stop_flag, memory_order_relaxed); i++) {
		uint64_t off = vc_rand64(&w->seed) % units * ld->io;
		bool timed = i % SAMPLE_EVERY == 0;
		uint64_t t0 = timed ? vc_now_ns() : 0;
		ssize_t n = ld->rd == RD_VC ? vc_read(ld->c, w->buf, ld->io, off)
					    : pread(ld->fd, w->buf, ld->io, (off_t)off);
		if (timed) {
			double us = (double)(vc_now_ns() - t0) / 1e3;
			if (w->nlat == w->cap) { /* rare: the buffer doubles */
				double *p = realloc(w->lat, 2 * w->cap * sizeof *p);
				if (p)
					w->lat = p, w->cap *= 2;
			}
			if (w->nlat < w->cap)
				w->lat[w->nlat++] = us;
		}
		if (n != (ssize_t)ld->io) {
			w->err = n < 0 ? (ld->rd == RD_VC ? (int)n : -errno) : -EIO;
			w->err_off = off;
			snprintf(w->msg, sizeof w->msg, "%s",
				 ld->rd == RD_VC ? vc_last_error() : "short or failed pread");
			break;
		}
		uint64_t stamp;
		memcpy(&stamp, w->buf, 8);
		if (stamp != off / PS && !w->bad++)
			w->bad_off = off;
		w->ops++;
	}
	return NULL;
}

#define ASYNC_MAX 64
static struct async_pt {
	const char *kase;
	double lat_us;
	size_t io;
	int threads, depth;
	double iops, gbps;
} async_pts[ASYNC_MAX];
static int nasync;

struct ajob {
	vc_cache *c;
	uint64_t ws;
	size_t io;
	int depth;
	uint64_t seed, ops, bad;
	int err;
};

static void *async_main(void *arg)
{
	struct ajob *j = arg;
	vc_aio *q;
	if ((j->err = vc_aio_open(j->c, (unsigned)j->depth, 0, &q)) < 0)
		return NULL;
	struct vc_aio_req *rq = calloc((size_t)j->depth, sizeof *rq);
	struct vc_aio_req **free_ = calloc((size_t)j->depth, sizeof *free_);
	struct vc_aio_req **batch = calloc((size_t)j->depth, sizeof *batch);
	unsigned char *bufs = malloc((size_t)j->depth * j->io);
	if (!rq || !free_ || !batch || !bufs) {
		j->err = -ENOMEM;
		goto out;
	}
	int nfree = j->depth;
	for (int i = 0; i < j->depth; i++) {
		rq[i].vol = vc_volume_default(j->c);
		rq[i].buf = bufs + (size_t)i * j->io;
		rq[i].len = j->io;
		rq[i].op = VC_AIO_READ;
		free_[i] = &rq[i];
	}
	const uint64_t units = j->ws / j->io;
	pthread_barrier_wait(&gate);
	while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
		int nb = 0;
		while (nfree > 0) {
			struct vc_aio_req *r = free_[--nfree];
			r->off = vc_rand64(&j->seed) % units * j->io;
			batch[nb++] = r;
		}
		int t = nb ? vc_aio_submit(q, batch, (unsigned)nb) : 0;
		if (t < 0 || t != nb) {
			j->err = t < 0 ? t : -EAGAIN;
			break;
		}
		int n = vc_aio_reap(q, batch, 1, (unsigned)j->depth, -1);
		if (n < 0) {
			j->err = n;
			break;
		}
		for (int i = 0; i < n; i++) {
			struct vc_aio_req *r = batch[i];
			uint64_t stamp;
			memcpy(&stamp, r->buf, 8);
			if (r->result != (int64_t)j->io || stamp != r->off / PS) {
				if (!j->bad++)
					fprintf(stderr, BENCH_NAME ": read at %llu: result %lld, first word %llu "
						"(want %llu)\n", (unsigned long long)r->off,
						(long long)r->result, (unsigned long long)stamp,
						(unsigned long long)(r->off / PS));
			}
			j->ops++;
			free_[nfree++] = r;
		}
	}
out:
	vc_aio_close(q);
	free(rq);
	free(free_);
	free(batch);
	free(bufs);
	return NULL;
}

static void run_async(vc_cache *c, uint64_t ws, size_t io, const struct opts *o, const char *kase,
		      double lat_us)
{
	static const int depths[] = { 1, 8, 64, 512 };
	const int *threads = o->athreads;
	printf("%s, asynchronous (vc_aio): %zu KiB random reads; M reads/s (GB/s)\n  threads %s\n",
	       kase, io / 1024, "    D=1            D=8           D=64          D=512");
	for (int a = 0; a < o->nathreads; a++) {
		printf("  %7d", threads[a]);
		for (int b = 0; b < 4; b++) {
			struct ajob jobs[MAX_ATHREADS];
			pthread_t th[MAX_ATHREADS];
			pthread_barrier_init(&gate, NULL, (unsigned)threads[a] + 1);
			atomic_store(&stop_flag, false);
			for (int i = 0; i < threads[a]; i++) {
				jobs[i] = (struct ajob){ .c = c, .ws = ws, .io = io, .depth = depths[b],
							 .seed = 1234 + (uint64_t)i };
				if (pthread_create(&th[i], NULL, async_main, &jobs[i]))
					bench_die("pthread_create", -EAGAIN);
			}
			pthread_barrier_wait(&gate);
			uint64_t t0 = vc_now_ns();
			bench_sleep_s(o->seconds);
			atomic_store(&stop_flag, true);
			uint64_t ops = 0, bad = 0;
			for (int i = 0; i < threads[a]; i++) {
				pthread_join(th[i], NULL);
				if (jobs[i].err < 0)
					bench_die("asynchronous reads", jobs[i].err);
				ops += jobs[i].ops;
				bad += jobs[i].bad;
			}
			pthread_barrier_destroy(&gate);
			if (bad)
				bench_die("asynchronous reads: wrong data", -EIO);
			double secs = (double)(vc_now_ns() - t0) / 1e9, iops = (double)ops / secs;
			printf("  %6.3f (%5.1f)", iops / 1e6, iops * (double)io / 1e9);
			if (nasync < ASYNC_MAX)
				async_pts[nasync++] = (struct async_pt){ kase, lat_us, io, threads[a], depths[b],
									 iops, iops * (double)io / 1e9 };
		}
		printf("\n");
	}
}


static struct perf run_point(const struct load *ld)
{
	const int n = ld->threads;
	struct worker *w = calloc((size_t)n, sizeof *w);
	if (!w)
		bench_die("threads", -ENOMEM);
	for (int i = 0; i < n; i++) {
		w[i].ld = ld;
		/* Distinct non-zero streams per point and thread. */
		w[i].seed = ld->seed * 0x9e3779b97f4a7c15ull;
		w[i].seed = (w[i].seed + (uint64_t)i * 0xbf58476d1ce4e5b9ull) | 1;
		w[i].buf = aligned_alloc(PS, ld->io);
		w[i].cap = 4096;
		w[i].lat = malloc(w[i].cap * sizeof *w[i].lat);
		if (!w[i].buf || !w[i].lat)
			bench_die("read buffers", -ENOMEM);
	}
	struct vc_stats s0 = { .size = sizeof s0 }, s1 = { .size = sizeof s1 };
	if (ld->rd == RD_VC)
		BENCH_OK(vc_get_stats(ld->c, &s0));
	atomic_store(&stop_flag, false);
	pthread_barrier_init(&gate, NULL, (unsigned)n + 1);
	for (int i = 0; i < n; i++) {
		int e = pthread_create(&w[i].th, NULL, worker_main, &w[i]);
		if (e)
			bench_die("pthread_create", -e);
	}
	pthread_barrier_wait(&gate);
	uint64_t t0 = vc_now_ns();
	bench_sleep_s(ld->seconds);
	atomic_store(&stop_flag, true);
	for (int i = 0; i < n; i++)
		pthread_join(w[i].th, NULL);
	uint64_t t1 = vc_now_ns();
	pthread_barrier_destroy(&gate);
	if (ld->rd == RD_VC)
		BENCH_OK(vc_get_stats(ld->c, &s1));

	struct perf p;
	memset(&p, 0, sizeof p);
	for (int i = 0; i < n; i++) {
		if (w[i].err) {
			fprintf(stderr, BENCH_NAME ": %s of %zu bytes at %llu: %s (%s)\n",
				ld->rd == RD_VC ? "vc_read" : "pread", ld->io,
				(unsigned long long)w[i].err_off, vc_strerror(w[i].err), w[i].msg);
			exit(1);
		}
		if (w[i].bad) {
			fprintf(stderr, BENCH_NAME ": %s returned wrong data %llu times (first at "
					"%llu)\n",
				ld->rd == RD_VC ? "vc_read" : "pread", (unsigned long long)w[i].bad,
				(unsigned long long)w[i].bad_off);
			exit(1);
		}
		p.ops += w[i].ops;
		p.samples += w[i].nlat;
	}
	double *all = malloc((p.samples ? p.samples : 1) * sizeof *all);
	if (!all)
		bench_die("latency samples", -ENOMEM);
	size_t k = 0;
	for (int i = 0; i < n; i++) {
		memcpy(all + k, w[i].lat, w[i].nlat * sizeof *all);
		k += w[i].nlat;
		free(w[i].lat);
		free(w[i].buf);
	}
	free(w);
	p.seconds = (double)(t1 - t0) / 1e9;
	p.iops = (double)p.ops / p.seconds;
	p.gbps = p.iops * (double)ld->io / 1e9;
	p.p50_us = bench_quantile(all, (int)p.samples, 0.50);
	p.p99_us = bench_quantile(all, (int)p.samples, 0.99);
	free(all);
	p.hit_host = p.hit_gpu = p.miss = p.lock_p99_us = NAN;
	if (ld->rd == RD_VC) {
		uint64_t d[VC_LOCK_HIST];
		for (int b = 0; b < VC_LOCK_HIST; b++)
			d[b] = s1.lock_hold_hist[b] - s0.lock_hold_hist[b];
		p.lock_p99_us = bench_hist_quantile_us(d, VC_LOCK_HIST, 0.99);
		double h = (double)(s1.hits[VC_TIER_HOST] - s0.hits[VC_TIER_HOST]);
		double g = (double)(s1.hits[VC_TIER_GPU] - s0.hits[VC_TIER_GPU]);
		double m = (double)(s1.misses - s0.misses);
		if (h + g + m > 0)
			p.hit_host = h / (h + g + m), p.hit_gpu = g / (h + g + m),
			p.miss = m / (h + g + m);
	}
	return p;
}

/* ---- cases --------------------------------------------------------------- */

/* One timed row: a case, a backing latency, a read size, a thread count. */
struct row {
	int kase;
	double lat_us;
	size_t io;
	int threads;
	struct perf ours, base;
	double limit_iops; /* 0: unknown */
};

/* One opened cache: a case at one backing latency, and what was cached when
 * timing began. */
struct setup {
	int kase;
	double lat_us;
	uint64_t ws;
	struct vc_stats warm;
};

struct run {
	const struct opts *o;
	int fd; /* the baseline's */
	struct row *rows;
	int nrows;
	struct setup setups[NCASES + MAXLIST];
	int nsetups;
	double limit_pps; /* limit_pages_per_s on case gpu's cache */
	char desc[160];
	/* With --gpus: each part of the GPU tier at the end of each case. */
	struct part {
		int kase;
		struct vc_gpu_stats st;
	} parts[NCASES * VC_GPUS_MAX];
	int nparts;
};

/* Before timing on a cache opened with --gpus: the parts the list names
 * ("all": any number), as vc_stats.gpus counts them. An engine that
 * ignores vc_config.gpus reports 0: its figures would be one GPU's under
 * the name of several, so the run stops. */
static void check_parts(vc_cache *c, const char *gpus)
{
	struct vc_stats st = { .size = sizeof st };
	BENCH_OK(vc_get_stats(c, &st));
	uint64_t want = 1;
	for (const char *p = gpus; *p; p++)
		want += *p == ',';
	if (st.gpus == 0 || (strcmp(gpus, "all") != 0 && st.gpus != want)) {
		fprintf(stderr, BENCH_NAME ": --gpus %s: the cache reports %llu GPU parts (vc_stats."
				"gpus), not %s: this engine does not spread the GPU tier over "
				"several GPUs\n",
			gpus, (unsigned long long)st.gpus,
			strcmp(gpus, "all") ? "as many as listed" : "at least one");
		exit(1);
	}
	printf("GPU tier over %llu parts (--gpus %s)\n", (unsigned long long)st.gpus, gpus);
}

static vc_cache *open_cache(struct run *R, double lat_us)
{
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = tmp_path;
	cfg.flags = VC_OPEN_READONLY;
	cfg.host_bytes = R->o->host_bytes;
	cfg.gpu_bytes = R->o->gpu_bytes;
	cfg.device = R->o->device;
	cfg.gpu_hits = R->o->gpu_hits;
	cfg.encrypt = R->o->encrypt;
	if (R->o->policy)
		cfg.policy = R->o->policy;
	cfg.backing_latency_ns = (uint64_t)(lat_us * 1e3);
	cfg.gpus = R->o->gpus;
	vc_cache *c;
	int r = vc_open(&cfg, &c);
	if (r < 0 && cfg.gpus)
		fprintf(stderr, BENCH_NAME ": the cache with --gpus %s did not open (why: below; an "
				"engine without several GPUs may refuse the option)\n", cfg.gpus);
	if (r < 0)
		bench_die("vc_open", r);
	if (cfg.gpus)
		check_parts(c, cfg.gpus);
	if (!R->desc[0])
		snprintf(R->desc, sizeof R->desc, "%s", vc_device_desc(c));
	return c;
}

/* With --gpus, at the end of a case: each part's figures (printed, and
 * kept for the JSON). */
static void record_parts(struct run *R, vc_cache *c, int kase)
{
	if (!R->o->gpus)
		return;
	unsigned n = vc_gpu_count(c);
	for (unsigned i = 0; i < n && R->nparts < NCASES * VC_GPUS_MAX; i++) {
		struct part *p = &R->parts[R->nparts++];
		p->kase = kase;
		p->st = (struct vc_gpu_stats){ .size = sizeof p->st };
		BENCH_OK(vc_get_gpu_stats(c, i, &p->st));
		printf("part %u: device %d%s, %llu of %llu pages cached, %llu hits, "
		       "h2d %.2f GB, d2h %.2f GB: %s\n",
		       i, p->st.ordinal, p->st.failed ? " (failed)" : "",
		       (unsigned long long)p->st.pages_cached,
		       (unsigned long long)p->st.pages_capacity, (unsigned long long)p->st.hits,
		       (double)p->st.h2d_bytes / 1e9, (double)p->st.d2h_bytes / 1e9, p->st.desc);
	}
}

static struct load vc_load(vc_cache *c, uint64_t ws, size_t io, int threads, double seconds)
{
	static uint64_t points; /* a new random stream for every point */
	return (struct load){ .rd = RD_VC, .c = c, .fd = -1, .ws = ws, .io = io,
			      .threads = threads, .seconds = seconds, .seed = ++points };
}

/* The untimed point that ends every warm-up, then what is cached. */
static void settle(struct run *R, vc_cache *c, int kase, double lat_us, uint64_t ws)
{
	int tmax = 1;
	for (int i = 0; i < R->o->nthreads; i++)
		if (R->o->threads[i] > tmax)
			tmax = R->o->threads[i];
	struct load ld = vc_load(c, ws, PS, tmax, R->o->seconds);
	run_point(&ld);
	struct setup *s = &R->setups[R->nsetups++];
	s->kase = kase;
	s->lat_us = lat_us;
	s->ws = ws;
	s->warm = (struct vc_stats){ .size = sizeof s->warm };
	BENCH_OK(vc_get_stats(c, &s->warm));
	printf("cached when timing starts: host tier %llu of %llu pages, GPU tier %llu of %llu; "
	       "working set %llu pages\n",
	       (unsigned long long)s->warm.pages_cached[VC_TIER_HOST],
	       (unsigned long long)s->warm.pages_capacity[VC_TIER_HOST],
	       (unsigned long long)s->warm.pages_cached[VC_TIER_GPU],
	       (unsigned long long)s->warm.pages_capacity[VC_TIER_GPU],
	       (unsigned long long)(ws / PS));
}

static void print_head(const struct run *R, int kase, double lat_us, uint64_t ws, size_t io)
{
	printf("\n%s: %zu KiB random reads over %.0f MiB; host tier %.0f MiB + GPU tier %.0f MiB%s%s; "
	       "backing latency %g us; %g s a point\n",
	       case_name[kase], io >> 10, (double)ws / MIB, (double)R->o->host_bytes / MIB,
	       (double)R->o->gpu_bytes / MIB, R->o->gpus ? " over gpus " : "",
	       R->o->gpus ? R->o->gpus : "", lat_us, R->o->seconds);
	printf("%7s %10s %7s %8s %8s %11s %10s %6s %8s %8s %7s %10s %8s\n", "threads", "IOPS", "GB/s",
	       "p50 us", "p99 us", "pread IOPS", "pread GB/s", "ratio", "hit host", "hit GPU",
	       "miss", "limit IOPS", "lock p99");
}

static void print_row(const struct row *w)
{
	printf("%7d %10.0f %7.3f %8.2f %8.2f %11.0f %10.3f %6.3g %7.1f%% %7.1f%% %6.1f%% ",
	       w->threads, w->ours.iops, w->ours.gbps, w->ours.p50_us, w->ours.p99_us, w->base.iops,
	       w->base.gbps, w->ours.iops / w->base.iops, 100 * w->ours.hit_host,
	       100 * w->ours.hit_gpu, 100 * w->ours.miss);
	if (w->limit_iops > 0)
		printf("%10.0f", w->limit_iops);
	else
		printf("%10s", "-");
	if (w->ours.lock_p99_us >= 0)
		printf(" %6.0fus\n", w->ours.lock_p99_us);
	else
		printf(" %8s\n", "-");
	fflush(stdout);
}

/* One table: every thread count at one read size. base[] holds pread's
 * figures per thread count when already measured (case miss measures them
 * once for all latencies), else NULL. */
static void run_table(struct run *R, vc_cache *c, int kase, double lat_us, uint64_t ws,
		      size_t io, const struct perf *base)
{
	const struct opts *o = R->o;
	print_head(R, kase, lat_us, ws, io);
	double limit = 0;
	if (kase == C_GPU) {
		R->limit_pps = limit_pages_per_s(c);
		limit = R->limit_pps * PS / (double)io;
	}
	for (int i = 0; i < o->nthreads; i++) {
		struct row *w = &R->rows[R->nrows++];
		w->kase = kase;
		w->lat_us = lat_us;
		w->io = io;
		w->threads = o->threads[i];
		struct load ld = vc_load(c, ws, io, w->threads, o->seconds);
		w->ours = run_point(&ld);
		if (base) {
			w->base = base[i];
		} else {
			ld.rd = RD_PREAD;
			ld.fd = R->fd;
			w->base = run_point(&ld);
		}
		w->limit_iops = limit;
		print_row(w);
	}
}

static void case_gpu(struct run *R)
{
	const struct opts *o = R->o;
	uint64_t ws = o->ws_bytes;
	vc_cache *c = open_cache(R, 0);
	BENCH_OK(vc_prefetch(c, 0, ws, VC_TIER_GPU));
	char *buf = malloc(MIB);
	if (!buf)
		bench_die("warm-up buffer", -ENOMEM);
	for (uint64_t off = 0; off < ws; off += MIB) {
		size_t len = ws - off < MIB ? (size_t)(ws - off) : MIB;
		ssize_t n = vc_read(c, buf, len, off);
		if (n != (ssize_t)len)
			bench_die("warm-up read", n < 0 ? (int)n : -EIO);
	}
	free(buf);
	settle(R, c, C_GPU, 0, ws);
	const struct vc_stats *w = &R->setups[R->nsetups - 1].warm;
	if (w->pages_cached[VC_TIER_HOST] + w->pages_cached[VC_TIER_GPU] < ws / PS)
		printf("note: not every page of the working set is cached\n");
	run_table(R, c, C_GPU, 0, ws, PS, NULL);
	run_table(R, c, C_GPU, 0, ws, BIG, NULL);
	run_async(c, ws, PS, o, "gpu", 0);
	run_async(c, ws, BIG, o, "gpu", 0);
	record_parts(R, c, C_GPU);
	BENCH_OK(vc_close(c));
}

static void case_host(struct run *R)
{
	uint64_t ws = R->o->host_bytes / 4 * 3 / PS * PS;
	vc_cache *c = open_cache(R, 0);
	BENCH_OK(vc_prefetch(c, 0, ws, VC_TIER_HOST));
	settle(R, c, C_HOST, 0, ws);
	run_table(R, c, C_HOST, 0, ws, PS, NULL);
	run_async(c, ws, PS, R->o, "host", 0);
	record_parts(R, c, C_HOST);
	BENCH_OK(vc_close(c));
}

static void case_miss(struct run *R)
{
	const struct opts *o = R->o;
	uint64_t ws = o->miss_bytes;
	/* pread does not depend on the backing latency: measured once. */
	struct perf base[MAXLIST];
	for (int i = 0; i < o->nthreads; i++) {
		struct load ld = vc_load(NULL, ws, PS, o->threads[i], o->seconds);
		ld.rd = RD_PREAD;
		ld.fd = R->fd;
		base[i] = run_point(&ld);
	}
	for (int l = 0; l < o->nlat; l++) {
		vc_cache *c = open_cache(R, o->lat_us[l]);
		/* Full tiers, so that every miss evicts from the first timed read
		 * on: the GPU tier in batches (one latency per batch round), the
		 * host tier page by page (~16k x the latency by default). */
		BENCH_OK(vc_prefetch(c, o->host_bytes, o->gpu_bytes, VC_TIER_GPU));
		BENCH_OK(vc_prefetch(c, 0, o->host_bytes, VC_TIER_HOST));
		settle(R, c, C_MISS, o->lat_us[l], ws);
		run_table(R, c, C_MISS, o->lat_us[l], ws, PS, base);
		run_async(c, ws, PS, o, "miss", o->lat_us[l]);
		record_parts(R, c, C_MISS);
		BENCH_OK(vc_close(c));
	}
}

/* ---- JSON ---------------------------------------------------------------- */

static void json_perf(FILE *f, const char *key, const struct perf *p, bool tiers)
{
	fprintf(f, ", \"%s\": {\"ops\": %llu, \"samples\": %llu", key, (unsigned long long)p->ops,
		(unsigned long long)p->samples);
	bench_json_field(f, "      ", "seconds", p->seconds);
	bench_json_field(f, "      ", "iops", p->iops);
	bench_json_field(f, "      ", "gbps", p->gbps);
	bench_json_field(f, "      ", "p50_us", p->p50_us);
	bench_json_field(f, "      ", "p99_us", p->p99_us);
	if (tiers) {
		bench_json_field(f, "      ", "hit_host", p->hit_host);
		bench_json_field(f, "      ", "lock_hold_p99_us", p->lock_p99_us);
		bench_json_field(f, "      ", "hit_gpu", p->hit_gpu);
		bench_json_field(f, "      ", "miss", p->miss);
	}
	fputc('}', f);
}

static void write_json(const struct run *R, uint64_t file_bytes)
{
	const struct opts *o = R->o;
	FILE *f = bench_json_open(o->json, "scaling", R->desc);
	fprintf(f, ",\n  \"config\": {\"quick\": %s, \"seconds\": %g, \"page_size\": %u, "
		   "\"sample_every\": %d, \"host_bytes\": %llu, \"gpu_bytes\": %llu, "
		   "\"file_bytes\": %llu, \"encrypt\": \"%s\", \"gpus\": %s%s%s, \"threads\": ",
		o->quick ? "true" : "false", o->seconds, PS, SAMPLE_EVERY,
		(unsigned long long)o->host_bytes, (unsigned long long)o->gpu_bytes,
		(unsigned long long)file_bytes,
		o->encrypt == VC_ENCRYPT_XTS_GMAC ? "xts-gmac" : o->encrypt ? "xts" : "off",
		o->gpus ? "\"" : "", o->gpus ? o->gpus : "null", o->gpus ? "\"" : "");
	for (int i = 0; i < o->nthreads; i++)
		fprintf(f, "%s%d", i ? ", " : "[", o->threads[i]);
	fputs("], \"backing_latencies_us\": [", f);
	for (int i = 0; i < o->nlat; i++) {
		fputs(i ? ", " : "", f);
		bench_json_num(f, o->lat_us[i]);
	}
	fputs("],\n    \"baseline\": \"pread of the same file, same offsets' distribution, "
	      "threads and sizes; file in the OS page cache\"}", f);
	bench_json_field(f, "  ", "limit_pages_per_s", R->limit_pps > 0 ? R->limit_pps : NAN);
	fputs(",\n  \"setups\": [", f);
	for (int i = 0; i < R->nsetups; i++) {
		const struct setup *s = &R->setups[i];
		fprintf(f, "%s\n    {\"case\": \"%s\", \"backing_latency_us\": %g, "
			   "\"working_set_bytes\": %llu, "
			   "\"cached_pages\": {\"host\": %llu, \"gpu\": %llu}, "
			   "\"capacity_pages\": {\"host\": %llu, \"gpu\": %llu}}",
			i ? "," : "", case_name[s->kase], s->lat_us, (unsigned long long)s->ws,
			(unsigned long long)s->warm.pages_cached[VC_TIER_HOST],
			(unsigned long long)s->warm.pages_cached[VC_TIER_GPU],
			(unsigned long long)s->warm.pages_capacity[VC_TIER_HOST],
			(unsigned long long)s->warm.pages_capacity[VC_TIER_GPU]);
	}
	fputs("\n  ],\n  \"points\": [", f);
	for (int i = 0; i < R->nrows; i++) {
		const struct row *w = &R->rows[i];
		fprintf(f, "%s\n    {\"case\": \"%s\", \"backing_latency_us\": %g, "
			   "\"io_bytes\": %zu, \"threads\": %d",
			i ? "," : "", case_name[w->kase], w->lat_us, w->io, w->threads);
		json_perf(f, "ours", &w->ours, true);
		json_perf(f, "pread", &w->base, false);
		bench_json_field(f, "      ", "ratio", w->ours.iops / w->base.iops);
		bench_json_field(f, "      ", "limit_iops",
				 w->limit_iops > 0 ? w->limit_iops : NAN);
		fputc('}', f);
	}
	fputs("\n  ],\n  \"gpu_parts\": [", f);
	for (int i = 0; i < R->nparts; i++) {
		const struct part *p = &R->parts[i];
		fprintf(f, "%s\n    {\"case\": \"%s\", \"ordinal\": %d, \"failed\": %u, "
			   "\"pages_cached\": %llu, \"pages_capacity\": %llu, \"hits\": %llu, "
			   "\"h2d_bytes\": %llu, \"d2h_bytes\": %llu, \"desc\": \"%s\"}",
			i ? "," : "", case_name[p->kase], p->st.ordinal, p->st.failed,
			(unsigned long long)p->st.pages_cached, (unsigned long long)p->st.pages_capacity,
			(unsigned long long)p->st.hits, (unsigned long long)p->st.h2d_bytes,
			(unsigned long long)p->st.d2h_bytes, p->st.desc);
	}
	fputs("\n  ],\n  \"async\": [", f);
	for (int i = 0; i < nasync; i++) {
		const struct async_pt *a = &async_pts[i];
		fprintf(f, "%s\n    {\"case\": \"%s\", \"backing_latency_us\": %g, \"io_bytes\": %zu, "
			   "\"threads\": %d, \"depth\": %d, \"iops\": %.0f, \"gbps\": %.3f}",
			i ? "," : "", a->kase, a->lat_us, a->io, a->threads, a->depth, a->iops, a->gbps);
	}
	fputs("\n  ]", f);
	bench_json_close(f);
}

/* ---- options ------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr,
		"usage: scaling [--device auto|emu|cuda] [--cases gpu,host,miss]\n"
		"               [--threads 1,2,4,8,16] [--seconds S] [--host-bytes B]\n"
		"               [--gpu-bytes B] [--ws-bytes B] [--miss-bytes B]\n"
		"               [--latencies 0,20,100] [--gpu-hits serve|swap] [--policy NAME]\n"
		"               [--encrypt off|xts|xts-gmac] [--gpus LIST] [--aio-threads 1,2,4]\n"
		"               [--quick] [--json FILE]\n"
		"sizes take K, M, G suffixes; --latencies in microseconds\n");
	exit(2);
}

static void bad(const char *opt, const char *v, const char *why)
{
	fprintf(stderr, BENCH_NAME ": bad value for %s: '%s' (%s)\n", opt, v, why);
	usage();
}

/* A list option: up to MAXLIST numbers in [lo, hi], whole ones if whole.
 * Returns the count; exits through bad() on anything else. */
static int list_opt(const char *opt, const char *v, double *out, double lo, double hi, bool whole,
		    const char *why)
{
	int n = bench_parse_list_double(v, out, MAXLIST);
	for (int k = 0; k < n; k++)
		if (!(out[k] >= lo && out[k] <= hi) || (whole && out[k] != floor(out[k])))
			n = -1;
	if (n <= 0)
		bad(opt, v, why);
	return n;
}

static int parse_cases(const char *s, unsigned *mask)
{
	*mask = 0;
	for (;;) {
		size_t n = strcspn(s, ",");
		int k = 0;
		while (k < NCASES && (strlen(case_name[k]) != n || strncmp(s, case_name[k], n)))
			k++;
		if (k == NCASES)
			return -1;
		*mask |= 1u << k;
		if (!s[n])
			return 0;
		s += n + 1;
	}
}

static void parse(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof *o);
	o->device = VC_DEVICE_AUTO;
	o->cases = (1u << NCASES) - 1;
	static const int threads[] = { 1, 2, 4, 8, 16 };
	o->nthreads = 5;
	memcpy(o->threads, threads, sizeof threads);
	o->athreads[0] = 1, o->athreads[1] = 2, o->athreads[2] = 4, o->nathreads = 3;
	o->lat_us[0] = 0, o->lat_us[1] = 20, o->lat_us[2] = 100, o->nlat = 3;
	const struct {
		const char *name;
		uint64_t *to, min;
		const char *why;
	} sizes[] = {
		{ "--host-bytes", &o->host_bytes, MIB, "a size of at least 1M" },
		{ "--gpu-bytes", &o->gpu_bytes, MIB, "a size of at least 1M" },
		{ "--ws-bytes", &o->ws_bytes, BIG, "a size of at least 128K" },
		{ "--miss-bytes", &o->miss_bytes, PS, "a size of at least 4K" },
	};
	enum { NSIZES = sizeof sizes / sizeof sizes[0] };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--quick") == 0) {
			o->quick = true;
			continue;
		}
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
			usage();
		if (strncmp(a, "--", 2) != 0) {
			fprintf(stderr, BENCH_NAME ": unexpected argument '%s'\n", a);
			usage();
		}
		if (!v) {
			fprintf(stderr, BENCH_NAME ": %s needs a value\n", a);
			usage();
		}
		i++;
		int z = 0;
		while (z < NSIZES && strcmp(a, sizes[z].name))
			z++;
		if (z < NSIZES) {
			if (vc_wl_parse_bytes(v, sizes[z].to) || *sizes[z].to < sizes[z].min)
				bad(a, v, sizes[z].why);
			continue;
		}
		char *end;
		if (strcmp(a, "--device") == 0) {
			if ((o->device = vc_device_parse(v)) < 0)
				bad(a, v, "auto, emu or cuda");
		} else if (strcmp(a, "--policy") == 0) {
			o->policy = v;
		} else if (strcmp(a, "--gpus") == 0) {
			if (!*v)
				bad(a, v, "a list such as 0,1 or 0:2,1:1, or all");
			o->gpus = v;
		} else if (strcmp(a, "--gpu-hits") == 0) {
			if (strcmp(v, "serve") && strcmp(v, "swap"))
				bad(a, v, "serve or swap");
			o->gpu_hits = strcmp(v, "swap") == 0 ? VC_GPU_HITS_SWAP : VC_GPU_HITS_SERVE;
		} else if (strcmp(a, "--encrypt") == 0) {
			if (strcmp(v, "off") && strcmp(v, "xts") && strcmp(v, "xts-gmac"))
				bad(a, v, "off, xts or xts-gmac");
			o->encrypt = strcmp(v, "xts") == 0	? VC_ENCRYPT_XTS
				     : strcmp(v, "xts-gmac") == 0 ? VC_ENCRYPT_XTS_GMAC
								  : VC_ENCRYPT_OFF;
		} else if (strcmp(a, "--cases") == 0) {
			if (parse_cases(v, &o->cases) < 0)
				bad(a, v, "a list of gpu, host, miss");
		} else if (strcmp(a, "--threads") == 0) {
			double t[MAXLIST];
			o->nthreads = list_opt(a, v, t, 1, MAX_THREADS, true,
					       "up to 16 thread counts from 1 to 1024");
			for (int k = 0; k < o->nthreads; k++)
				o->threads[k] = (int)t[k];
		} else if (strcmp(a, "--aio-threads") == 0) {
			double t[MAXLIST];
			o->nathreads = list_opt(a, v, t, 1, MAX_ATHREADS, true,
						"up to 16 thread counts from 1 to 64");
			for (int k = 0; k < o->nathreads; k++)
				o->athreads[k] = (int)t[k];
		} else if (strcmp(a, "--latencies") == 0) {
			o->nlat = list_opt(a, v, o->lat_us, 0, 1e6, false,
					   "up to 16 latencies from 0 to 1000000 us");
		} else if (strcmp(a, "--seconds") == 0) {
			o->seconds = strtod(v, &end);
			if (end == v || *end || !(o->seconds > 0 && o->seconds <= 600))
				bad(a, v, "seconds a point, more than 0 and at most 600");
		} else if (strcmp(a, "--json") == 0) {
			/* Writable? Known now rather than after the run. */
			bool existed = access(v, F_OK) == 0;
			FILE *f = fopen(v, "a");
			if (!f)
				bad(a, v, strerror(errno));
			fclose(f);
			if (!existed)
				unlink(v);
			o->json = v;
		} else {
			fprintf(stderr, BENCH_NAME ": unknown option %s\n", a);
			usage();
		}
	}
	/* Defaults: the H100 machine's setup, or --quick's for 2 cores. */
	if (!o->host_bytes)
		o->host_bytes = (o->quick ? 16 : 64) * MIB;
	if (!o->gpu_bytes)
		o->gpu_bytes = (o->quick ? 64 : 512) * MIB;
	if (!o->ws_bytes)
		o->ws_bytes = (o->quick ? 48 : 384) * MIB;
	if (!o->miss_bytes)
		o->miss_bytes = (o->quick ? 512 : 4096) * MIB;
	if (!(o->seconds > 0))
		o->seconds = o->quick ? 0.3 : 2;
	o->ws_bytes = o->ws_bytes / BIG * BIG;
	o->miss_bytes = o->miss_bytes / PS * PS;
	if (o->cases & (1u << C_GPU)) {
		if (o->ws_bytes <= o->host_bytes)
			fprintf(stderr, BENCH_NAME ": warning: case gpu's working set fits the "
					"host tier alone: expect host-tier hits\n");
		else if (o->ws_bytes > o->host_bytes + o->gpu_bytes)
			fprintf(stderr, BENCH_NAME ": warning: case gpu's working set is larger "
					"than both tiers: expect misses\n");
	}
	if ((o->cases & (1u << C_MISS)) && o->miss_bytes < 4 * (o->host_bytes + o->gpu_bytes))
		fprintf(stderr, BENCH_NAME ": warning: case miss's file is less than 4x both "
				"tiers: expect many hits\n");
}

int main(int argc, char **argv)
{
	struct opts o;
	parse(argc, argv, &o);
	uint64_t file_bytes = 0;
	if (o.cases & (1u << C_GPU) && o.ws_bytes > file_bytes)
		file_bytes = o.ws_bytes;
	if (o.cases & (1u << C_HOST) && o.host_bytes > file_bytes)
		file_bytes = o.host_bytes;
	if (o.cases & (1u << C_MISS) && o.miss_bytes > file_bytes)
		file_bytes = o.miss_bytes;
	make_tmp(file_bytes);

	struct run R;
	memset(&R, 0, sizeof R);
	R.o = &o;
	R.fd = open_baseline(file_bytes);
	R.rows = calloc((size_t)o.nthreads * (3 + (size_t)o.nlat), sizeof *R.rows);
	if (!R.rows)
		bench_die("results", -ENOMEM);
	if (o.cases & (1u << C_GPU))
		case_gpu(&R);
	if (o.cases & (1u << C_HOST))
		case_host(&R);
	if (o.cases & (1u << C_MISS))
		case_miss(&R);
	printf("\ndevice: %s%s%s; baseline: pread of the same file from the OS page cache; "
	       "ratio = ours / pread; latencies from every %dth read\n",
	       R.desc, o.gpus ? "; gpus " : "", o.gpus ? o.gpus : "", SAMPLE_EVERY);
	if (o.json)
		write_json(&R, file_bytes);
	close(R.fd);
	free(R.rows);
	return 0;
}
