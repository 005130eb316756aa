/* DEDU Fig. 5(a) and 5(d) (Zhong & He, GRAM/DEDU, section 5.3), through the
 * real engine: block dedup off (GRAM), on (DEDU) and adaptive.
 *
 * Workload (DEDU's section 5.1, as bench/gram_fig4.c for Fig. 4): uniform
 * random accesses to 4 KiB pages of a working set of W pages from a cold
 * cache, A accesses; the file's blocks (page / degree bytes) repeat with
 * dedup factor f: each distinct block has f copies scattered over the file
 * (bench/dupdata.h). An update rewrites a whole page with bytes that occur
 * nowhere else, so updates wear the factor down as in the paper. Every
 * read is checked against what the file (or the last update) holds.
 *   5(a): f = 1 .. 10, read-only.
 *   5(d): f = 4, updates 0 .. 100 % of the accesses, write-back (an update
 *         costs a page write when it is evicted, as GRAM's buffer would).
 * Sizes (--scale 1): host tier 64K pages and working set 640K pages as the
 * paper; the GPU tier is 128K pages, W / 5: it holds the working set's
 * distinct blocks from f = 5 on, as the paper's whole buffer (host + GPU,
 * 128K pages) does ("when the duplication factor is equal to or larger
 * than five, the data fit into the buffer"). Our dedup is in the GPU tier
 * only, and its logical pages are bounded by its blocks (degree x its
 * pages), so the whole working set fits from f = 5 at degree 8 and up to
 * H + 4G = 576K of 640K pages at degree 4.
 *
 * Cost per access, as gram_fig4 (GRAM's model): backing page I/Os (reads
 * and write-backs) x --latency (5 ms, the paper's disk) + the measured
 * time in host<->GPU moves, over the accesses. The paper's Fig. 5(d) also
 * plots the cost "including the computation cost"; ours is `total`: the
 * backing I/Os x latency + the measured wall time per access and thread
 * (moves, fingerprints, compares, locks, page-cache reads, checks). The
 * crossover is where DEDU's cost first reaches GRAM's along the update
 * ratio (interpolated), at --latency and at 0.1 ms (an NVMe-class store,
 * where computation weighs more), both from the same counts.
 *
 * Also: the engine's sampled estimates (dedup_est_factor,
 * dedup_est_update_ratio) against the workload's true factor (at the start
 * and at the end of the run, counted over the working set's blocks) and
 * update ratio, and what the adaptive mode decided (volumes on, switches).
 *
 * The paper's Fig. 5 survives only as its text; printed beside ours: 5(a)
 * DEDU(1) costs 5 % more than GRAM, the data fit the buffer from f = 5,
 * and DEDU's cost is up to 81 % below GRAM's (the abstract); 5(d) GRAM's
 * cost is stable, DEDU's rises with the update ratio, crossover between
 * 32 % and 64 % updates.
 *
 * Usage: dedup_fig5 [--device auto|cuda|emu] [--scale F] [--accesses N]
 *                   [--threads N] [--latency T] [--degree D] [--factors LIST]
 *                   [--updates LIST] [--quick] [--json FILE] [--dir DIR]
 * --quick: --scale 0.01 (a 6.5K-page working set, 40K accesses a point),
 * and unless --factors or --updates say otherwise, factors 1, 2, 4, 6, 8,
 * 10 and updates 0, 16, 32, 64, 100 %.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define BENCH_NAME "dedup_fig5"
#include "bench.h"
#include "dupdata.h"
#include "base/clock.h"
#include "tools/workload.h"

#define PS 4096u
#define K 1024ull
#define MAXF 16
#define MAXU 16
#define NLOCKS 1024 /* page locks: a read is checked against the last update */
#define NVME_MS 0.1

enum { OFF, ON, ADAPT, NMODE };
static const char *const mode_name[NMODE] = { "GRAM", "DEDU", "adaptive" };
static const int mode_cfg[NMODE] = { VC_DEDUP_OFF, VC_DEDUP_ON, VC_DEDUP_ADAPTIVE };

struct point {
	char fig;   /* 'a' or 'd' */
	int mode;
	double f, u; /* factor of the file, update ratio asked */
	/* results */
	uint64_t acc, ios, writes;
	double wall_s, move_ms;
	double hit[2], miss;
	double true_f_end, true_u;
	struct vc_stats st; /* at the end (dedup gauges, estimates) */
};

struct shared {
	vc_cache *c;
	const struct dupdata *dd;
	uint32_t D;
	uint64_t ws, per_thread;
	double u;
	_Atomic uint64_t *ver;    /* per page: 0, or the serial of its last update */
	_Atomic uint64_t serial;
	pthread_mutex_t locks[NLOCKS];
};

struct worker {
	struct shared *sh;
	pthread_t th;
	uint64_t seed, writes, bad;
	int err;
};

/* The bytes page p holds at version v (0: the file's). */
static void page_bytes(const struct shared *sh, uint64_t p, uint64_t v, unsigned char *out)
{
	if (v == 0) {
		dup_units(sh->dd, p * sh->D, sh->D, out);
		return;
	}
	const uint32_t bs = PS / sh->D;
	for (uint32_t j = 0; j < sh->D; j++)
		dup_fill(DUP_FRESH + v * 8 + j, out + j * bs, bs);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	unsigned char buf[PS], want[PS];
	const uint64_t wthresh = (uint64_t)(sh->u * 1e6);
	for (uint64_t i = 0; i < sh->per_thread && !w->err; i++) {
		uint64_t p = vc_rand64(&w->seed) % sh->ws;
		bool wr = vc_rand64(&w->seed) % 1000000 < wthresh;
		pthread_mutex_t *lk = &sh->locks[p % NLOCKS];
		pthread_mutex_lock(lk);
		uint64_t v = atomic_load_explicit(&sh->ver[p], memory_order_relaxed);
		ssize_t r;
		if (wr) {
			v = atomic_fetch_add(&sh->serial, 1);
			page_bytes(sh, p, v, buf);
			r = vc_write(sh->c, buf, PS, p * PS);
			if (r == PS)
				atomic_store_explicit(&sh->ver[p], v, memory_order_relaxed);
			w->writes++;
		} else {
			r = vc_read(sh->c, buf, PS, p * PS);
			page_bytes(sh, p, v, want);
			if (r == PS && memcmp(buf, want, PS) != 0)
				w->bad++;
		}
		pthread_mutex_unlock(lk);
		if (r != PS)
			w->err = r < 0 ? (int)r : -EIO;
	}
	return NULL;
}

/* The working set's dedup factor at the degree now: blocks over distinct
 * contents (the file's still in place, and every update's own). */
static double true_factor(const struct shared *sh)
{
	uint8_t *seen = calloc((sh->dd->pool + 7) / 8, 1);
	if (!seen)
		return NAN;
	uint64_t distinct = 0;
	for (uint64_t p = 0; p < sh->ws; p++) {
		if (atomic_load(&sh->ver[p])) {
			distinct += sh->D;
			continue;
		}
		for (uint32_t j = 0; j < sh->D; j++) {
			uint64_t id = dup_id(sh->dd, p * sh->D + j);
			if (!(seen[id / 8] & (1u << (id % 8)))) {
				seen[id / 8] |= (uint8_t)(1u << (id % 8));
				distinct++;
			}
		}
	}
	free(seen);
	return (double)(sh->ws * sh->D) / (double)distinct;
}

/* Puts back the file's bytes of every updated page. */
static void restore_file(const char *path, const struct shared *sh)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	unsigned char buf[PS];
	for (uint64_t p = 0; p < sh->ws; p++)
		if (atomic_load(&sh->ver[p])) {
			page_bytes(sh, p, 0, buf);
			if (pwrite(fd, buf, PS, (off_t)(p * PS)) != PS) {
				perror(path);
				exit(1);
			}
		}
	close(fd);
}

struct geom {
	uint64_t host, gpu, ws, accesses;
	int device, threads;
	uint32_t D;
	double lat_ms;
};

static void run_point(const struct geom *g, const char *path, const struct dupdata *dd,
		      struct point *pt, char *desc, size_t desclen)
{
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.host_bytes = g->host * PS;
	cfg.gpu_bytes = g->gpu * PS;
	cfg.device = g->device;
	cfg.write_mode = VC_WRITE_BACK;
	cfg.flags = pt->u > 0 ? 0 : VC_OPEN_READONLY;
	cfg.dedup = mode_cfg[pt->mode];
	cfg.dedup_degree = g->D;
	vc_cache *c;
	BENCH_OK(vc_open(&cfg, &c));
	snprintf(desc, desclen, "%s", vc_device_desc(c));

	struct shared *sh = calloc(1, sizeof *sh);
	sh->ver = calloc(g->ws, sizeof *sh->ver);
	if (!sh->ver)
		bench_die("calloc", -ENOMEM);
	*sh = (struct shared){ .c = c, .dd = dd, .D = g->D, .ws = g->ws, .u = pt->u, .ver = sh->ver,
			       .per_thread = g->accesses / (uint64_t)g->threads, .serial = 1 };
	for (int i = 0; i < NLOCKS; i++)
		pthread_mutex_init(&sh->locks[i], NULL);
	struct worker *w = calloc((size_t)g->threads, sizeof *w);
	struct vc_stats s0 = { .size = sizeof s0 }, s1 = { .size = sizeof s1 };
	BENCH_OK(vc_get_stats(c, &s0));
	uint64_t t0 = vc_now_ns();
	for (int t = 0; t < g->threads; t++) {
		w[t] = (struct worker){ .sh = sh, .seed = 42 * 31 + (uint64_t)t + 1 };
		pthread_create(&w[t].th, NULL, worker_main, &w[t]);
	}
	uint64_t bad = 0;
	for (int t = 0; t < g->threads; t++) {
		pthread_join(w[t].th, NULL);
		if (w[t].err)
			bench_die("vc_read/vc_write", w[t].err);
		bad += w[t].bad;
		pt->writes += w[t].writes;
	}
	pt->wall_s = (double)(vc_now_ns() - t0) / 1e9;
	BENCH_OK(vc_get_stats(c, &s1));
	if (bad) {
		fprintf(stderr, BENCH_NAME ": %llu pages read back wrong (f %g, %s, updates %g)\n",
			(unsigned long long)bad, pt->f, mode_name[pt->mode], pt->u);
		exit(1);
	}
	pt->st = s1;
	double h0 = (double)(s1.hits[0] - s0.hits[0]), h1 = (double)(s1.hits[1] - s0.hits[1]);
	double m = (double)(s1.misses - s0.misses);
	pt->acc = (uint64_t)(h0 + h1 + m);
	pt->hit[0] = h0 / (double)pt->acc;
	pt->hit[1] = h1 / (double)pt->acc;
	pt->miss = m / (double)pt->acc;
	pt->ios = (s1.backing_read_bytes - s0.backing_read_bytes + s1.backing_write_bytes -
		   s0.backing_write_bytes) / PS;
	pt->move_ms = (double)(s1.batch_wait_ns - s0.batch_wait_ns) / 1e6;
	pt->true_f_end = true_factor(sh);
	pt->true_u = (double)pt->writes / (double)(g->threads * sh->per_thread);
	/* Updates reach the file (write-back at eviction): nothing after this
	 * point may read it as the generator's until it is restored. */
	BENCH_OK(vc_drop(c, 0, 0, VC_DROP_DISCARD));
	BENCH_OK(vc_close(c));
	if (pt->u > 0)
		restore_file(path, sh);
	for (int i = 0; i < NLOCKS; i++)
		pthread_mutex_destroy(&sh->locks[i]);
	free(sh->ver);
	free(sh);
	free(w);
}

/* Cost per access at latency lat (ms): GRAM's model, and with the
 * measured time per access and thread instead of the moves alone. */
static double io_cost(const struct point *p, double lat)
{
	return vc_wl_io_cost_ms((double)p->acc, (double)p->ios, lat, p->move_ms);
}

static double total_cost(const struct point *p, double lat, int threads)
{
	return ((double)p->ios * lat + p->wall_s * 1e3 * threads) / (double)p->acc;
}

/* The first update ratio where DEDU's cost reaches GRAM's (linear between
 * points), or -1 where it never does. */
static double crossover(const struct point *pts, int n, double lat, int threads, bool total)
{
	double pu = -1, pd = 0;
	for (int i = 0; i < n; i++) {
		const struct point *on = &pts[i];
		if (on->fig != 'd' || on->mode != ON)
			continue;
		const struct point *off = NULL;
		for (int j = 0; j < n; j++)
			if (pts[j].fig == 'd' && pts[j].mode == OFF && pts[j].u == on->u)
				off = &pts[j];
		if (!off)
			continue;
		double a = total ? total_cost(on, lat, threads) : io_cost(on, lat);
		double b = total ? total_cost(off, lat, threads) : io_cost(off, lat);
		double d = a - b;
		if (d >= 0)
			return pu < 0 || d == pd ? on->u : pu + (on->u - pu) * (-pd) / (d - pd);
		pu = on->u;
		pd = d;
	}
	return -1;
}

static void print_cross(const char *what, double x)
{
	if (x < 0)
		printf("%s: none (DEDU below GRAM at every update ratio measured)", what);
	else
		printf("%s: %.0f %% updates", what, 100 * x);
}

static void write_json(const char *path, const char *desc, const struct geom *g,
		       const struct point *pts, int n, const double cross[4])
{
	FILE *f = bench_json_open(path, "dedup_fig5", desc);
	fprintf(f, ",\n  \"host_pages\": %llu,\n  \"gpu_pages\": %llu,\n  \"working_set\": %llu,\n"
		   "  \"accesses\": %llu,\n  \"threads\": %d,\n  \"degree\": %u",
		(unsigned long long)g->host, (unsigned long long)g->gpu, (unsigned long long)g->ws,
		(unsigned long long)g->accesses, g->threads, g->D);
	bench_json_field(f, "  ", "latency_ms", g->lat_ms);
	fputs(",\n  \"paper\": {\"fig5a_dedu1_vs_gram\": 1.05, \"fig5a_fits_from_factor\": 5, "
	      "\"dedu_best_gain_vs_gram\": 0.81, \"fig5d_crossover_updates\": [0.32, 0.64]}",
	      f);
	fputs(",\n  \"crossover\": {", f);
	const char *ck[4] = { "io_cost", "total_cost", "io_cost_nvme", "total_cost_nvme" };
	for (int i = 0; i < 4; i++) {
		fprintf(f, "%s\"%s\": ", i ? ", " : "", ck[i]);
		bench_json_num(f, cross[i] < 0 ? NAN : cross[i]);
	}
	fputs("},\n  \"points\": [", f);
	for (int i = 0; i < n; i++) {
		const struct point *p = &pts[i];
		fprintf(f, "%s\n    {\"fig\": \"5%c\", \"mode\": \"%s\"", i ? "," : "", p->fig,
			mode_name[p->mode]);
		bench_json_field(f, "", "factor", p->f);
		bench_json_field(f, "", "update_ratio", p->u);
		bench_json_field(f, "", "hit_host", p->hit[0]);
		bench_json_field(f, "", "hit_gpu", p->hit[1]);
		bench_json_field(f, "", "miss", p->miss);
		fprintf(f, ", \"accesses\": %llu, \"backing_ios\": %llu", (unsigned long long)p->acc,
			(unsigned long long)p->ios);
		bench_json_field(f, "", "move_ms", p->move_ms);
		bench_json_field(f, "", "wall_s", p->wall_s);
		bench_json_field(f, "", "io_cost_ms", io_cost(p, g->lat_ms));
		bench_json_field(f, "", "total_cost_ms", total_cost(p, g->lat_ms, g->threads));
		bench_json_field(f, "", "gpu_pages", (double)p->st.pages_cached[VC_TIER_GPU]);
		bench_json_field(f, "", "dedup_blocks", (double)p->st.dedup_blocks);
		bench_json_field(f, "", "dedup_factor", p->st.dedup_factor);
		bench_json_field(f, "", "dedup_hits", (double)p->st.dedup_hits);
		bench_json_field(f, "", "dedup_blocks_in", (double)p->st.dedup_blocks_in);
		bench_json_field(f, "", "dedup_collisions", (double)p->st.dedup_collisions);
		bench_json_field(f, "", "est_factor", p->st.dedup_est_factor);
		bench_json_field(f, "", "est_update_ratio", p->st.dedup_est_update_ratio);
		bench_json_field(f, "", "true_factor_end", p->true_f_end);
		bench_json_field(f, "", "true_update_ratio", p->true_u);
		bench_json_field(f, "", "gpu_fragmentation", p->st.gpu_fragmentation);
		bench_json_field(f, "", "gc_runs", (double)p->st.gc_runs);
		bench_json_field(f, "", "gc_pages_moved", (double)p->st.gc_pages_moved);
		bench_json_field(f, "", "gpu_segments_evicted", (double)p->st.gpu_segments_evicted);
		bench_json_field(f, "", "gpu_segments", (double)p->st.gpu_segments);
		bench_json_field(f, "", "gpu_segments_free", (double)p->st.gpu_segments_free);
		bench_json_field(f, "", "volumes_on", (double)p->st.dedup_volumes_on);
		bench_json_field(f, "", "switches", (double)p->st.dedup_switches);
		fputc('}', f);
	}
	fputs("\n  ]", f);
	bench_json_close(f);
}

static void usage(void)
{
	fprintf(stderr, "usage: dedup_fig5 [--device auto|cuda|emu] [--scale F] [--accesses N] "
			"[--threads N] [--latency T] [--degree D] [--factors LIST] [--updates LIST] "
			"[--quick] [--json FILE] [--dir DIR]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct geom g = { .device = VC_DEVICE_AUTO, .threads = 1, .D = 4, .lat_ms = 5 };
	double scale = 1, factors[MAXF] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	double updates[MAXU] = { 0, 0.08, 0.16, 0.32, 0.48, 0.64, 0.80, 1.0 };
	int nf = 10, nu = 8;
	uint64_t accesses = 4000000;
	struct bench_common co = bench_common_init();
	bool lists = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		if (bench_common_opt(argc, argv, &i, &co, &v, usage))
			continue;
		if (strcmp(a, "--scale") == 0) {
			scale = atof(v);
		} else if (strcmp(a, "--accesses") == 0) {
			accesses = strtoull(v, NULL, 10);
		} else if (strcmp(a, "--threads") == 0) {
			g.threads = atoi(v);
		} else if (strcmp(a, "--latency") == 0) {
			g.lat_ms = vc_wl_parse_ms(v);
		} else if (strcmp(a, "--degree") == 0) {
			g.D = (uint32_t)atoi(v);
		} else if (strcmp(a, "--factors") == 0) {
			if ((nf = bench_parse_list_double(v, factors, MAXF)) < 0)
				usage();
			lists = true;
		} else if (strcmp(a, "--updates") == 0) {
			if ((nu = bench_parse_list_double(v, updates, MAXU)) < 0)
				usage();
			lists = true;
		} else {
			usage();
		}
	}
	g.device = co.device;
	if (co.quick) {
		scale = 0.01;
		if (!lists) {
			static const double qf[] = { 1, 2, 4, 6, 8, 10 }, qu[] = { 0, 0.16, 0.32, 0.64, 1 };
			nf = 6;
			memcpy(factors, qf, sizeof qf);
			nu = 5;
			memcpy(updates, qu, sizeof qu);
		}
	}
	bool bad = scale <= 0 || scale > 1 || g.threads < 1 || g.threads > 64 || g.lat_ms < 0 ||
		   !accesses || (g.D != 1 && g.D != 2 && g.D != 4 && g.D != 8);
	for (int i = 0; i < nf; i++)
		bad |= factors[i] < 1;
	for (int i = 0; i < nu; i++)
		bad |= updates[i] < 0 || updates[i] > 1;
	if (bad) {
		fprintf(stderr, BENCH_NAME ": bad --scale, --threads, --latency, --accesses, --degree, "
				"factor (>= 1) or update ratio (0..1)\n");
		return 2;
	}
#define S(x) ((uint64_t)((x) * scale + 0.5) ? (uint64_t)((x) * scale + 0.5) : 1)
	g.host = S(64 * K);
	g.gpu = S(128 * K);
	g.ws = S(640 * K);
	g.accesses = S(accesses);

	/* 5(a): every factor x mode; 5(d): f = 4 x updates x mode (its 0 %
	 * points are 5(a)'s f = 4 ones where 5(a) has them). */
	struct point *pts = calloc((size_t)(nf + nu) * NMODE, sizeof *pts);
	int n = 0;
	for (int i = 0; i < nf; i++)
		for (int m = 0; m < NMODE; m++)
			pts[n++] = (struct point){ .fig = 'a', .mode = m, .f = factors[i] };
	for (int i = 0; i < nu; i++)
		for (int m = 0; m < NMODE; m++)
			pts[n++] = (struct point){ .fig = 'd', .mode = m, .f = 4, .u = updates[i] };

	char path[512], desc[160] = "";
	uint64_t t0 = vc_now_ns();
	/* One file per factor, made when first needed and removed after its
	 * last point (the points are grouped by factor). */
	double made = 0;
	struct dupdata dd;
	for (int i = 0; i < n; i++) {
		struct point *p = &pts[i];
		const struct point *same = NULL;
		for (int j = 0; j < i && p->fig == 'd' && p->u == 0; j++)
			if (pts[j].fig == 'a' && pts[j].f == p->f && pts[j].mode == p->mode)
				same = &pts[j];
		if (same) {
			*p = *same;
			p->fig = 'd';
			continue;
		}
		if (p->f != made) {
			if (made)
				unlink(path);
			snprintf(path, sizeof path, "%s/dedup-fig5-%d-f%g.img", co.dir, (int)getpid(), p->f);
			dup_init(&dd, g.ws * PS, PS / g.D, p->f);
			if (dup_make_file(&dd, path) < 0)
				return 1;
			made = p->f;
		}
		run_point(&g, path, &dd, p, desc, sizeof desc);
		fprintf(stderr, "  5(%c) f %g updates %g %s: %.1f s\n", p->fig, p->f, p->u,
			mode_name[p->mode], p->wall_s);
	}
	if (made)
		unlink(path);

	printf("DEDU Fig. 5 on %s: uniform random accesses from cold, %llu a point, %d thread(s); "
	       "host tier %llu, GPU tier %llu, working set %llu pages; degree %u (%u B blocks); "
	       "backing latency %.3g ms (%.0f s)\n",
	       desc, (unsigned long long)g.accesses, g.threads, (unsigned long long)g.host,
	       (unsigned long long)g.gpu, (unsigned long long)g.ws, g.D, PS / g.D, g.lat_ms,
	       (double)(vc_now_ns() - t0) / 1e9);
	printf("%-4s %5s %5s %-8s | %7s %7s %7s | %8s %8s %7s | %6s %6s %6s | %6s %6s %6s %4s\n",
	       "fig", "f", "upd", "mode", "hit hst", "hit gpu", "miss", "cost ms", "total ms",
	       "vs GRAM", "pages", "blocks", "factor", "est f", "true f", "est u", "on");
	for (int fig = 'a'; fig <= 'd'; fig += 3)
		for (int i = 0; i < n; i++) {
			const struct point *p = &pts[i];
			if (p->fig != fig)
				continue;
			const struct point *base = NULL;
			for (int j = 0; j < n; j++)
				if (pts[j].fig == p->fig && pts[j].mode == OFF && pts[j].f == p->f &&
				    pts[j].u == p->u)
					base = &pts[j];
			double cost = io_cost(p, g.lat_ms);
			double rel = base && io_cost(base, g.lat_ms) > 0 ? cost / io_cost(base, g.lat_ms) : NAN;
			printf("5(%c) %5g %4.0f%% %-8s | %6.2f%% %6.2f%% %6.2f%% | %8.4f %8.4f %6.3fx |",
			       p->fig, p->f, 100 * p->u, mode_name[p->mode], 100 * p->hit[0],
			       100 * p->hit[1], 100 * p->miss, cost, total_cost(p, g.lat_ms, g.threads),
			       rel);
			if (p->mode == OFF)
				printf(" %6llu %6s %6s | %6s %6.2f %6s %4s\n",
				       (unsigned long long)p->st.pages_cached[VC_TIER_GPU], "-", "-", "-",
				       p->true_f_end, "-", "-");
			else
				printf(" %6llu %6llu %6.2f | %6.2f %6.2f %5.1f%% %4llu\n",
				       (unsigned long long)p->st.pages_cached[VC_TIER_GPU],
				       (unsigned long long)p->st.dedup_blocks, p->st.dedup_factor,
				       p->st.dedup_est_factor, p->true_f_end,
				       100 * p->st.dedup_est_update_ratio,
				       (unsigned long long)p->st.dedup_volumes_on);
		}
	printf("pages, blocks, factor: the GPU tier at the end (logical pages, of at most %llu; "
	       "blocks stored, of %llu; uses / blocks); est f, est u: the engine's sampled estimates; true f: the working "
	       "set's factor at the end; on: adaptive switched on\n",
	       (unsigned long long)(g.gpu * 8) /* dedup_max_factor's default */,
	       (unsigned long long)(g.gpu * g.D));
	printf("paper (text only): 5(a) DEDU(1) 5 %% above GRAM; data fit the buffer from f = 5; "
	       "DEDU up to 81 %% below GRAM; 5(d) GRAM stable, crossover at 32-64 %% updates\n");
	double cross[4] = { crossover(pts, n, g.lat_ms, g.threads, false),
			    crossover(pts, n, g.lat_ms, g.threads, true),
			    crossover(pts, n, NVME_MS, g.threads, false),
			    crossover(pts, n, NVME_MS, g.threads, true) };
	char what[64];
	snprintf(what, sizeof what, "ours, crossover at %.3g ms: cost", g.lat_ms);
	print_cross(what, cross[0]);
	print_cross("; total", cross[1]);
	snprintf(what, sizeof what, "\nours, crossover at %.3g ms: cost", NVME_MS);
	print_cross(what, cross[2]);
	print_cross("; total", cross[3]);
	putchar('\n');
	if (co.json)
		write_json(co.json, desc, &g, pts, n, cross);
	free(pts);
	return 0;
}
