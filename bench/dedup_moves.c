/* Tier moves with block dedup on against off (issue 14's goal: moves with
 * dedup on at >= 90 % of the rate with it off), through the engine's own
 * paths, one cache per point:
 *
 *   prefetch  vc_prefetch(VC_TIER_GPU) of the whole file from cold: rounds
 *             of batch_pages pages read from the store (the OS page cache:
 *             the file is read once before), moved down, then merged
 *             (fingerprint job, table, compare job) under the engine lock;
 *             --prefetches times (default 5), the tier emptied between
 *             (vc_drop), the median kept: one prefetch of 512 MiB takes
 *             0.15-0.25 s, and single ones varied by +-20 % on the H100.
 *             A later prefetch finds the volume's trip (direct or staged)
 *             and the estimate as the one before left them: the steady
 *             state of a volume that is read again
 *   demote    --threads readers, each reading its own stripe of the file
 *             once, 4 KiB at a time, from cold, with a host tier of
 *             --host-mib: every read misses, and the host tier's victims
 *             go down to the GPU tier in demotion batches (demote_batch,
 *             --demote-batch; at most VC_DEMOTERS of them in flight)
 *   swap      gpu_hits = SWAP, the whole file in the GPU tier: --threads
 *             readers read random pages for --seconds; every GPU hit
 *             comes up to the host tier and victims go down, no store I/O
 *             (dedup off: GRAM's one-for-one exchange; on: a demotion
 *             batch makes room, as under encryption)
 *
 * Rates: prefetch and demote in pages of the file per second (store read,
 * move, merge), swap in page moves per second (up + down, from the cache's
 * h2d and d2h counters). Every point runs with dedup off and on at degrees
 * 1, 2, 4, 8 (the engine's default hash, or --hash), plain and
 * AES-256-XTS, for two files: unique
 * pages, and pages that repeat with factor 4 (whole pages, so every degree
 * sees 4; bench/dupdata.h). The points of one repetition run in that order,
 * and --reps repetitions (default 3) interleave them, so a drift hits on
 * and off alike; each figure is the median. The ratio column is on / off
 * for the same file and cipher: the goal is >= 0.90.
 *
 * The store alone, the demote column's limit: the same threads pread
 * their stripes of each file, 4 KiB at a time, without the cache, once
 * a repetition (the median printed under the table).
 *
 * Each point also says the dedup factor the tier reached (uses / blocks
 * after the prefetch) and the share of blocks shared, and checks 512
 * random pages' bytes after the swap run. The header gives the
 * fingerprint job's SM cap the engine runs with (read from the open
 * cache, c->dd.max_sms: an internal field, so this bench includes
 * engine/engine.h) against the device's SM count.
 *
 * Sizes: file --file-mib (default 1024), host tier --host-mib (64), GPU
 * tier the file's size x 1.5 (it holds the file with dedup off, whatever
 * the log's free-space watermark). --quick: 64 MiB file, 8 MiB host tier,
 * 0.2 s swaps, one repetition (the emulated device here: a few seconds).
 *
 * Usage: dedup_moves [--device auto|cuda|emu] [--file-mib N] [--host-mib N]
 *                    [--threads N] [--seconds S] [--reps R] [--prefetches K] [--degrees 1,2,4,8]
 *                    [--demote-batch N]
 *                    [--hash default|murmur3|md5] [--quick] [--json FILE] [--dir DIR]
 */
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#define BENCH_NAME "dedup_moves"
#include "bench.h"
#include "dupdata.h"
#include "base/clock.h"
#include "engine/debug.h"  /* VC_DD_PROF: the trips' phases per path */
#include "engine/engine.h" /* the SM cap the open cache's merge uses (c->dd.max_sms) */

#define PS 4096u
#define MAX_DEG 4
#define MAX_REPS 32
#define MAX_PREFETCHES 32
#define CHECK_PAGES 512
#define GOAL 0.90

enum { M_PREFETCH, M_DEMOTE, M_SWAP, N_METRIC };
static const char *const metric_name[N_METRIC] = { "prefetch", "demote", "swap" };

struct point {
	int data;    /* 0: unique pages, 1: factor 4 */
	int enc;     /* enum vc_encrypt: off or XTS */
	int degree;  /* 0: dedup off */
	double rate[N_METRIC][MAX_REPS]; /* pages/s (swap: page moves/s) */
	double med[N_METRIC];
	double factor, shared; /* after the prefetch: uses/blocks, hits/blocks_in */
	uint32_t max_sms;
};

struct opts {
	int device, threads, reps;
	int algo; /* enum vc_dedup_algo, or -1: the engine's default */
	uint64_t file_pages, host_pages;
	double seconds;
	int prefetches; /* timed prefetches a point, the median kept */
	uint32_t demote_batch; /* vc_config.demote_batch (0: the engine's default) */
};

/* --- the readers ----------------------------------------------------- */

struct reader {
	vc_cache *c;
	int fd; /* store_main: the file, no cache */
	pthread_t th;
	uint64_t first, count; /* demote: the stripe */
	uint64_t seed, pages;  /* swap: random pages of [0, pages) */
	double until;
	int err;
};

static void *stripe_main(void *p)
{
	struct reader *r = p;
	unsigned char buf[PS];
	for (uint64_t i = 0; i < r->count && !r->err; i++) {
		ssize_t n = vc_read(r->c, buf, PS, (r->first + i) * PS);
		if (n != PS)
			r->err = n < 0 ? (int)n : -EIO;
	}
	return NULL;
}

static void *random_main(void *p)
{
	struct reader *r = p;
	unsigned char buf[PS];
	uint64_t k = 0;
	do {
		for (int i = 0; i < 64 && !r->err; i++, k++) {
			ssize_t n = vc_read(r->c, buf, PS, (vc_rand64(&r->seed) % r->pages) * PS);
			if (n != PS)
				r->err = n < 0 ? (int)n : -EIO;
		}
	} while (!r->err && bench_now_s() < r->until);
	return NULL;
}

/* The demote column's reads without the cache: each thread preads its
 * stripe of the file (r->fd), 4 KiB at a time (the store's limit for that
 * column: the OS page cache, the file being read before). */
static void *store_main(void *p)
{
	struct reader *r = p;
	unsigned char buf[PS];
	for (uint64_t i = 0; i < r->count && !r->err; i++)
		if (pread(r->fd, buf, PS, (off_t)((r->first + i) * PS)) != PS)
			r->err = -EIO;
	return NULL;
}

/* Runs nt readers (fn) of cache c, or without one of file fd
 * (store_main), and returns the wall seconds. */
static double run_readers(vc_cache *c, int fd, int nt, void *(*fn)(void *), uint64_t pages,
			  double secs)
{
	struct reader rd[64];
	const uint64_t per = (pages + (uint64_t)nt - 1) / (uint64_t)nt;
	double t0 = bench_now_s();
	for (int t = 0; t < nt; t++) {
		uint64_t first = per * (uint64_t)t;
		rd[t] = (struct reader){ .c = c, .fd = fd, .first = first,
					 .count = first < pages ? (pages - first < per ? pages - first : per) : 0,
					 .seed = 0x1234567ull + (uint64_t)t, .pages = pages,
					 .until = t0 + secs };
		pthread_create(&rd[t].th, NULL, fn, &rd[t]);
	}
	for (int t = 0; t < nt; t++)
		pthread_join(rd[t].th, NULL);
	double dt = bench_now_s() - t0;
	for (int t = 0; t < nt; t++)
		if (rd[t].err)
			bench_die(c ? "vc_read" : "pread", rd[t].err);
	return dt;
}

static double store_rate(const char *path, int nt, uint64_t pages)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		bench_die("open", -errno);
	double dt = run_readers(NULL, fd, nt, store_main, pages, 0);
	close(fd);
	return (double)pages / dt;
}

static struct vc_stats stats(vc_cache *c)
{
	struct vc_stats s = { .size = sizeof s };
	BENCH_OK(vc_get_stats(c, &s));
	return s;
}

/* Checks CHECK_PAGES random pages against the file's bytes. */
static void check_pages(vc_cache *c, const struct dupdata *dd, uint64_t pages)
{
	unsigned char got[PS], want[PS];
	uint64_t seed = 77;
	for (int i = 0; i < CHECK_PAGES; i++) {
		uint64_t p = vc_rand64(&seed) % pages;
		if (vc_read(c, got, PS, p * PS) != PS)
			bench_die("vc_read (check)", -EIO);
		dup_units(dd, p * (PS / dd->unit), PS / dd->unit, want);
		if (memcmp(got, want, PS) != 0) {
			fprintf(stderr, BENCH_NAME ": page %llu read back wrong\n", (unsigned long long)p);
			exit(1);
		}
	}
}

/* The profiles asked for in the environment (VC_DD_PROF, VC_LOCK_PROFILE),
 * printed for the phase just run and started again. */
static void phase_profiles(vc_cache *c, const char *what)
{
	eng_debug_dedup_prof(c, what);
	eng_debug_lock_profile(c, what);
}

/* One repetition of one point: its own cache over `path`. */
static void run_point(const struct opts *o, const char *path, const struct dupdata *dd,
		      struct point *pt, int rep, char *desc, size_t desclen)
{
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.flags = VC_OPEN_READONLY;
	cfg.device = o->device;
	cfg.host_bytes = o->host_pages * PS;
	cfg.gpu_bytes = o->file_pages * PS / 2 * 3;
	cfg.gpu_hits = VC_GPU_HITS_SWAP;
	cfg.demote_batch = o->demote_batch;
	cfg.encrypt = pt->enc;
	cfg.dedup = pt->degree ? VC_DEDUP_ON : VC_DEDUP_OFF;
	cfg.dedup_degree = pt->degree ? (uint32_t)pt->degree : 0;
	if (o->algo >= 0)
		cfg.dedup_algo = o->algo;
	vc_cache *c;
	BENCH_OK(vc_open(&cfg, &c));
	snprintf(desc, desclen, "%s", vc_device_desc(c));
	pt->max_sms = pt->degree ? c->dd.max_sms : 0;

	/* prefetch: the whole file, cold, into the GPU tier, o->prefetches
	 * times (the tier emptied between), the median kept. */
	const uint64_t bytes = o->file_pages * PS;
	double pr[MAX_PREFETCHES];
	for (int k = 0; k < o->prefetches; k++) {
		if (k)
			BENCH_OK(vc_drop(c, 0, 0, 0));
		double t0 = bench_now_s();
		BENCH_OK(vc_prefetch(c, 0, bytes, VC_TIER_GPU));
		pr[k] = (double)o->file_pages / (bench_now_s() - t0);
	}
	pt->rate[M_PREFETCH][rep] = bench_quantile(pr, o->prefetches, 0.5);
	phase_profiles(c, "prefetch");
	struct vc_stats s = stats(c);
	if (pt->degree) {
		pt->factor = s.dedup_factor;
		pt->shared = s.dedup_blocks_in ? (double)s.dedup_hits / (double)s.dedup_blocks_in : 0;
	}

	/* demote: from cold again, every page read once by misses. */
	BENCH_OK(vc_drop(c, 0, 0, 0));
	double dt = run_readers(c, -1, o->threads, stripe_main, o->file_pages, 0);
	pt->rate[M_DEMOTE][rep] = (double)o->file_pages / dt;
	phase_profiles(c, "demote");

	/* swap: the file back in the GPU tier (what the readers left in the
	 * host tier stays there), then random GPU hits. */
	BENCH_OK(vc_prefetch(c, 0, bytes, VC_TIER_GPU));
	struct vc_stats s0 = stats(c);
	dt = run_readers(c, -1, o->threads, random_main, o->file_pages, o->seconds);
	struct vc_stats s1 = stats(c);
	double moves = (double)(s1.h2d_bytes - s0.h2d_bytes + s1.d2h_bytes - s0.d2h_bytes) / PS;
	pt->rate[M_SWAP][rep] = moves / dt;
	phase_profiles(c, "swap, with its prefetch");
	if (s1.misses != s0.misses)
		fprintf(stderr, BENCH_NAME ": warning: %llu misses in the swap run (the file should "
				"fit the tiers)\n",
			(unsigned long long)(s1.misses - s0.misses));
	check_pages(c, dd, o->file_pages);
	BENCH_OK(vc_close(c));
}

static void write_json(const char *path, const char *desc, const struct opts *o,
		       const struct point *pts, int n, int ndeg, double worst, const double *store)
{
	FILE *f = bench_json_open(path, "dedup_moves", desc);
	fprintf(f, ",\n  \"file_pages\": %llu,\n  \"host_pages\": %llu,\n  \"threads\": %d,\n"
		   "  \"reps\": %d,\n  \"degrees\": %d,\n  \"hash\": \"%s\"",
		(unsigned long long)o->file_pages, (unsigned long long)o->host_pages, o->threads,
		o->reps, ndeg, o->algo < 0 ? "default" : o->algo == VC_DEDUP_MD5 ? "md5" : "murmur3");
	bench_json_field(f, "  ", "swap_seconds", o->seconds);
	bench_json_field(f, "  ", "prefetches", o->prefetches);
	bench_json_field(f, "  ", "demote_batch", o->demote_batch);
	bench_json_field(f, "  ", "goal_ratio", GOAL);
	bench_json_field(f, "  ", "worst_ratio", worst);
	bench_json_field(f, "  ", "store_unique_per_s", store[0]);
	bench_json_field(f, "  ", "store_f4_per_s", store[1]);
	fputs(",\n  \"points\": [", f);
	for (int i = 0; i < n; i++) {
		const struct point *p = &pts[i];
		const struct point *base = &pts[i - (i % (ndeg + 1))];
		fprintf(f, "%s\n    {\"data\": \"%s\", \"encrypt\": \"%s\", \"dedup\": %s, "
			   "\"degree\": %d, \"fp_max_sms\": %u",
			i ? "," : "", p->data ? "factor4" : "unique", p->enc ? "xts" : "off",
			p->degree ? "true" : "false", p->degree, p->max_sms);
		bench_json_field(f, "", "dedup_factor", p->factor);
		bench_json_field(f, "", "shared_blocks", p->shared);
		for (int m = 0; m < N_METRIC; m++) {
			char k[48];
			snprintf(k, sizeof k, "%s_per_s", metric_name[m]);
			bench_json_field(f, "", k, p->med[m]);
			snprintf(k, sizeof k, "%s_ratio", metric_name[m]);
			bench_json_field(f, "", k, p->med[m] / base->med[m]);
			fprintf(f, ", \"%s_reps\": [", metric_name[m]);
			for (int r = 0; r < o->reps; r++) {
				fputs(r ? ", " : "", f);
				bench_json_num(f, p->rate[m][r]);
			}
			fputc(']', f);
		}
		fputc('}', f);
	}
	fputs("\n  ]", f);
	bench_json_close(f);
}

static void usage(void)
{
	fprintf(stderr, "usage: dedup_moves [--device auto|cuda|emu] [--file-mib N] [--host-mib N] "
			"[--threads N] [--seconds S] [--reps R] [--prefetches K] [--demote-batch N] "
			"[--degrees 1,2,4,8] [--hash default|murmur3|md5] [--quick] [--json FILE] [--dir DIR]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct opts o = { .device = VC_DEVICE_AUTO, .threads = 8, .reps = 3, .algo = -1,
			  .file_pages = (1024ull << 20) / PS, .host_pages = (64ull << 20) / PS,
			  .seconds = 1, .prefetches = 5 };
	struct bench_common co = bench_common_init();
	uint64_t degs[MAX_DEG] = { 1, 2, 4, 8 };
	int ndeg = MAX_DEG;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		if (bench_common_opt(argc, argv, &i, &co, &v, usage))
			continue;
		if (strcmp(a, "--file-mib") == 0) {
			o.file_pages = strtoull(v, NULL, 10) * (1u << 20) / PS;
		} else if (strcmp(a, "--host-mib") == 0) {
			o.host_pages = strtoull(v, NULL, 10) * (1u << 20) / PS;
		} else if (strcmp(a, "--threads") == 0) {
			o.threads = atoi(v);
		} else if (strcmp(a, "--seconds") == 0) {
			o.seconds = atof(v);
		} else if (strcmp(a, "--reps") == 0) {
			o.reps = atoi(v);
		} else if (strcmp(a, "--prefetches") == 0) {
			o.prefetches = atoi(v);
		} else if (strcmp(a, "--demote-batch") == 0) {
			o.demote_batch = (uint32_t)strtoul(v, NULL, 10);
		} else if (strcmp(a, "--degrees") == 0) {
			if ((ndeg = bench_parse_list_u64(v, degs, MAX_DEG)) < 0)
				usage();
		} else if (strcmp(a, "--hash") == 0) {
			if (strcmp(v, "murmur3") == 0)
				o.algo = VC_DEDUP_MURMUR3;
			else if (strcmp(v, "md5") == 0)
				o.algo = VC_DEDUP_MD5;
			else if (strcmp(v, "default") != 0)
				usage();
		} else {
			usage();
		}
	}
	o.device = co.device;
	if (co.quick) {
		o.file_pages = (64u << 20) / PS;
		o.host_pages = (8u << 20) / PS;
		o.seconds = 0.2;
		o.reps = 1;
		o.prefetches = 1;
	}
	for (int d = 0; d < ndeg; d++)
		if (degs[d] != 1 && degs[d] != 2 && degs[d] != 4 && degs[d] != 8)
			usage();
	if (o.threads < 1 || o.threads > 64 || o.reps < 1 || o.reps > MAX_REPS || o.seconds <= 0 ||
	    o.prefetches < 1 || o.prefetches > MAX_PREFETCHES ||
	    o.file_pages < 1024 || o.host_pages < 256 || o.host_pages * 2 > o.file_pages) {
		fprintf(stderr, BENCH_NAME ": bad sizes: --threads 1..64, --reps 1..%d, --prefetches "
				"1..%d, a file of at least twice the host tier and 4 MiB\n",
			MAX_REPS, MAX_PREFETCHES);
		return 2;
	}

	/* The two files: unique pages, and whole pages repeating 4 times. */
	struct dupdata dd[2];
	char path[2][512];
	for (int k = 0; k < 2; k++) {
		dup_init(&dd[k], o.file_pages * PS, PS, k ? 4 : 1);
		snprintf(path[k], sizeof path[k], "%s/dedup-moves-%d-%s.img", co.dir, (int)getpid(),
			 k ? "f4" : "unique");
		if (dup_make_file(&dd[k], path[k]) < 0)
			return 1;
	}

	const int per = ndeg + 1, n = 2 * 2 * per;
	struct point *pts = calloc((size_t)n, sizeof *pts);
	for (int i = 0; i < n; i++)
		pts[i] = (struct point){ .data = i / (2 * per), .enc = (i / per) % 2 ? VC_ENCRYPT_XTS : 0,
					 .degree = i % per ? (int)degs[i % per - 1] : 0 };
	char desc[160] = "";
	double t0 = bench_now_s();
	double store[2][MAX_REPS], store_med[2];
	for (int r = 0; r < o.reps; r++)
		for (int i = 0; i < n; i++) {
			if (i % (2 * per) == 0) {
				const int k = i / (2 * per);
				store[k][r] = store_rate(path[k], o.threads, o.file_pages);
				fprintf(stderr, "  rep %d %-6s store reads %.0f /s\n", r + 1, k ? "f4" : "unique",
					store[k][r]);
			}
			struct point *p = &pts[i];
			run_point(&o, path[p->data], &dd[p->data], p, r, desc, sizeof desc);
			fprintf(stderr, "  rep %d %-6s xts %-3s D=%d: prefetch %.0f demote %.0f swap %.0f /s\n",
				r + 1, p->data ? "f4" : "unique", p->enc ? "on" : "off", p->degree,
				p->rate[M_PREFETCH][r], p->rate[M_DEMOTE][r], p->rate[M_SWAP][r]);
		}
	for (int k = 0; k < 2; k++)
		unlink(path[k]);
	for (int k = 0; k < 2; k++)
		store_med[k] = bench_quantile(store[k], o.reps, 0.5);
	for (int i = 0; i < n; i++)
		for (int m = 0; m < N_METRIC; m++) {
			double v[MAX_REPS];
			memcpy(v, pts[i].rate[m], sizeof v);
			pts[i].med[m] = bench_quantile(v, o.reps, 0.5);
		}

	/* The device's SMs, from its description ("... 132 SMs)"). */
	const char *sm = strstr(desc, " SMs");
	int nsm = 0;
	if (sm) {
		const char *b = sm;
		while (b > desc && isdigit((unsigned char)b[-1]))
			b--;
		nsm = atoi(b);
	}
	uint32_t cap = 0;
	for (int i = 0; i < n; i++)
		if (pts[i].degree)
			cap = pts[i].max_sms;
	printf("Tier moves, dedup on vs off, on %s (%d reader threads, median of %d, %.0f s):\n"
	       "file %llu MiB, host tier %llu MiB, GPU tier %llu MiB; hash %s; "
	       "fingerprint job SM cap %u%s\n",
	       desc, o.threads, o.reps, bench_now_s() - t0, (unsigned long long)(o.file_pages * PS >> 20),
	       (unsigned long long)(o.host_pages * PS >> 20),
	       (unsigned long long)(o.file_pages * PS / 2 * 3 >> 20),
	       o.algo < 0 ? "the default" : o.algo == VC_DEDUP_MD5 ? "md5" : "murmur3", cap,
	       nsm ? "" : " (no SMs: the emulated device hashes on the calling thread)");
	if (nsm)
		printf("of %d SMs (%.0f %%)\n", nsm, 100.0 * cap / nsm);
	const char *dm = getenv("VC_DEMOTERS");
	printf("demotion batches of %u pages, at most %s in flight\n",
	       o.demote_batch ? o.demote_batch : 32, dm && *dm ? dm : "the engine's default");
	printf("%-7s %-4s %-6s | %7s %7s | %10s %6s | %10s %6s | %10s %6s\n", "data", "xts", "dedup",
	       "factor", "shared", "prefetch/s", "ratio", "demote/s", "ratio", "swap mv/s", "ratio");
	double worst = INFINITY;
	for (int i = 0; i < n; i++) {
		const struct point *p = &pts[i], *base = &pts[i - i % per];
		char dg[8] = "off";
		if (p->degree)
			snprintf(dg, sizeof dg, "D=%d", p->degree);
		printf("%-7s %-4s %-6s |", p->data ? "f4" : "unique", p->enc ? "on" : "off", dg);
		if (p->degree)
			printf(" %7.2f %6.1f%% |", p->factor, 100 * p->shared);
		else
			printf(" %7s %7s |", "-", "-");
		for (int m = 0; m < N_METRIC; m++) {
			double ratio = p->med[m] / base->med[m];
			printf(" %10.0f %6.3f |", p->med[m], ratio);
			if (p->degree && ratio < worst)
				worst = ratio;
		}
		putchar('\n');
	}
	printf("the store alone, the demote column's reads (%d threads, 4 KiB preads, no cache): "
	       "unique %.0f /s, f4 %.0f /s\n", o.threads, store_med[0], store_med[1]);
	printf("goal: every path with dedup on >= %.0f %% of its rate with it off: %s (worst %.3f)\n",
	       100 * GOAL, worst >= GOAL ? "met" : "not met", worst);
	if (co.json)
		write_json(co.json, desc, &o, pts, n, ndeg, worst, store_med);
	free(pts);
	return 0;
}
