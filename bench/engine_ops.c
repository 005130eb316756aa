/* Range operations of the engine against a full write-back cache, one
 * thread, ms per operation:
 *
 *   extent, 4 GiB hole       vc_volume_extent over a 4 GiB hole of the store
 *                            that no cached page touches
 *   extent, cached hole      the same over 4 GiB from 0, a hole of the store
 *                            holding the cache's clean pages
 *   FUA write                a 4 KiB write and vc_volume_flush_range of it
 *                            (what the NBD server does for FUA), incl. the
 *                            store's fdatasync
 *   baseline pwrite+sync     a 4 KiB pwrite and fdatasync on the same file,
 *                            no cache: the floor of the FUA write; their
 *                            difference is the engine's part
 *   vc_flush                 a full flush of `dirty` pages (also us/page)
 *
 * The store is a 64 GiB sparse file. The cache is filled first: the host
 * tier by vc_prefetch to it, the GPU tier by vc_prefetch straight into it
 * (clean pages), then `dirty` pages are written 8 GiB in, so the extent and
 * FUA figures are taken with ~2M clean and `dirty` dirty pages cached
 * (--quick: 256K entries and 16K dirty pages, which fit a small machine on
 * the emulated device). Goals (the issue): extent over a 4 GiB hole and a
 * FUA write with 2M cached entries, <= 1 ms each. Before the dirty set both
 * scanned the cache under the engine lock: extent 64-117 ms, and FUA a full
 * volume flush whose pool pass alone took 18.6 ms at 1M entries and 41 ms
 * at 2M (H100 machine).
 *
 * Usage: engine_ops [--device auto|cuda|emu] [--quick] [--dirty N]
 *                   [--reps N] [--json FILE]
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#define BENCH_NAME "engine_ops"
#include "bench.h"
#include "base/clock.h"
#include "base/rand.h"

#define PS 4096ull
#define GiB (1ull << 30)
#define STORE (64 * GiB)
#define DIRTY_AT (8 * GiB)  /* dirty pages from here (past the cached clean ones) */
#define HOLE_AT (16 * GiB)  /* the untouched 4 GiB hole */
#define FUA_AT (24 * GiB)   /* FUA writes: random pages of [24, 25) GiB */
#define BASE_AT (28 * GiB)  /* baseline pwrites: random pages of [28, 29) GiB */

struct row {
	const char *name;
	int n;
	double p50, mean, max; /* ms */
	double goal;           /* ms, or 0 */
};

static struct row summarize(const char *name, double *ms, int n, double goal)
{
	struct row r = { .name = name, .n = n, .goal = goal };
	for (int i = 0; i < n; i++)
		r.mean += ms[i] / n;
	r.p50 = bench_quantile(ms, n, 0.5);
	r.max = ms[n - 1];
	return r;
}

static double ms_since(uint64_t t0)
{
	return (double)(vc_now_ns() - t0) / 1e6;
}

static double extent_ms(vc_volume *v, uint64_t off, int expect)
{
	uint64_t n, t0 = vc_now_ns();
	int k = vc_volume_extent(v, off, 4 * GiB, &n);
	double ms = ms_since(t0);
	if (k < 0)
		bench_die("vc_volume_extent", k);
	if (k != expect || (expect == VC_EXTENT_HOLE && n != 4 * GiB)) {
		fprintf(stderr, BENCH_NAME ": extent at %llu: %d of %llu bytes, not the hole expected "
				"(does this file system report holes?)\n",
			(unsigned long long)off, k, (unsigned long long)n);
		exit(1);
	}
	return ms;
}

static void write_dirty(vc_cache *c, uint64_t ndirty, unsigned char *page)
{
	for (uint64_t i = 0; i < ndirty; i++) {
		memcpy(page, &i, sizeof i);
		ssize_t r = vc_write(c, page, PS, DIRTY_AT + i * PS);
		if (r != (ssize_t)PS)
			bench_die("dirty write", r < 0 ? (int)r : -EIO);
	}
}

int main(int argc, char **argv)
{
	int device = VC_DEVICE_AUTO, reps = 200;
	bool quick = false, bad = false;
	uint64_t ndirty = 0;
	const char *json = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--quick") == 0)
			quick = true;
		else if (strcmp(a, "--device") == 0 && next && ++i)
			device = vc_device_parse(next);
		else if (strcmp(a, "--dirty") == 0 && next && ++i)
			ndirty = strtoull(next, NULL, 0);
		else if (strcmp(a, "--reps") == 0 && next && ++i)
			reps = atoi(next);
		else if (strcmp(a, "--json") == 0 && next && ++i)
			json = next;
		else
			bad = true;
	}
	if (bad || device < 0 || reps < 10) {
		fprintf(stderr, "usage: engine_ops [--device auto|cuda|emu] [--quick] [--dirty N] "
				"[--reps N>=10] [--json FILE]\n");
		return 2;
	}
	/* 2M entries: host 1 GiB + GPU 7 GiB of 4 KiB pages; --quick: 256K. */
	uint64_t host = quick ? 128ull << 20 : 1 * GiB, gpu = quick ? 896ull << 20 : 7 * GiB;
	if (!ndirty)
		ndirty = quick ? 16384 : 65536;
	if (ndirty * PS > HOLE_AT - DIRTY_AT) {
		fprintf(stderr, BENCH_NAME ": --dirty: at most %llu pages\n",
			(unsigned long long)((HOLE_AT - DIRTY_AT) / PS));
		return 2;
	}

	char path[512];
	snprintf(path, sizeof path, "%s/engine-ops-%d.img", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
		 (int)getpid());
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)STORE) != 0) {
		perror(path);
		return 1;
	}
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.device = device;
	cfg.write_mode = VC_WRITE_BACK;
	cfg.page_size = PS;
	cfg.host_bytes = host;
	cfg.gpu_bytes = gpu;
	cfg.early_release = 0; /* keep the GPU tier full: the cache is the subject */
	vc_cache *c;
	BENCH_OK(vc_open(&cfg, &c));
	vc_volume *v = vc_volume_default(c);

	/* Fill: host tier first (exactly its pages), then the GPU tier
	 * straight from the store, then the dirty pages. */
	uint64_t t0 = vc_now_ns();
	BENCH_OK(vc_prefetch(c, gpu, host, VC_TIER_HOST));
	BENCH_OK(vc_prefetch(c, 0, gpu, VC_TIER_GPU));
	unsigned char *page = aligned_alloc(PS, PS);
	memset(page, 0x5a, PS);
	write_dirty(c, ndirty, page);
	struct vc_stats st = { .size = sizeof st };
	BENCH_OK(vc_get_stats(c, &st));
	uint64_t cached = st.pages_cached[VC_TIER_HOST] + st.pages_cached[VC_TIER_GPU];
	double fill_s = ms_since(t0) / 1e3;

	double *ms = malloc((size_t)reps * sizeof *ms);
	struct row rows[5];
	int nr = 0;
	for (int i = 0; i < reps; i++)
		ms[i] = extent_ms(v, HOLE_AT, VC_EXTENT_HOLE);
	rows[nr++] = summarize("extent, 4 GiB hole", ms, reps, 1);
	for (int i = 0; i < reps; i++)
		ms[i] = extent_ms(v, 0, VC_EXTENT_HOLE);
	rows[nr++] = summarize("extent, cached hole", ms, reps, 1);

	/* FUA writes and the baseline alternate, so both meet the same
	 * state of the file system's own write-back. */
	double *base = malloc((size_t)reps * sizeof *base);
	uint64_t seed = 12345;
	for (int i = 0; i < reps; i++) {
		uint64_t off = FUA_AT + (vc_rand64(&seed) % (GiB / PS)) * PS;
		memcpy(page, &off, sizeof off);
		uint64_t t = vc_now_ns();
		ssize_t w = vc_write(c, page, PS, off);
		if (w != (ssize_t)PS)
			bench_die("FUA write", w < 0 ? (int)w : -EIO);
		BENCH_OK(vc_volume_flush_range(v, off, PS));
		ms[i] = ms_since(t);
		off = BASE_AT + (vc_rand64(&seed) % (GiB / PS)) * PS;
		memcpy(page, &off, sizeof off);
		t = vc_now_ns();
		if (pwrite(fd, page, PS, (off_t)off) != (ssize_t)PS || fdatasync(fd) != 0) {
			perror("baseline pwrite + fdatasync");
			return 1;
		}
		base[i] = ms_since(t);
	}
	rows[nr++] = summarize("FUA write", ms, reps, 1);
	rows[nr++] = summarize("baseline pwrite+sync", base, reps, 0);
	free(base);
	BENCH_OK(vc_get_stats(c, &st));
	uint64_t dirty_left = st.dirty_pages; /* the FUA writes left the others dirty */

	/* Full flushes: the dirty pages written above, then again. */
	int nflush = 3;
	for (int i = 0; i < nflush; i++) {
		if (i)
			write_dirty(c, ndirty, page);
		uint64_t t = vc_now_ns();
		BENCH_OK(vc_flush(c));
		ms[i] = ms_since(t);
	}
	rows[nr++] = summarize("vc_flush", ms, nflush, 0);
	double us_per_page = rows[nr - 1].p50 * 1e3 / (double)ndirty;

	char desc[160];
	snprintf(desc, sizeof desc, "%s", vc_device_desc(c));
	BENCH_OK(vc_close(c));
	close(fd);
	unlink(path);

	printf("engine_ops on %s: write-back, %llu pages cached (%s), %llu dirty elsewhere "
	       "(%llu after the FUA writes); fill %.1f s\n",
	       desc, (unsigned long long)cached, quick ? "--quick" : "full", (unsigned long long)ndirty,
	       (unsigned long long)dirty_left, fill_s);
	printf("%-22s %6s %10s %10s %10s   %s\n", "op (ms)", "n", "p50", "mean", "max", "goal");
	for (int i = 0; i < nr; i++) {
		printf("%-22s %6d %10.4f %10.4f %10.4f", rows[i].name, rows[i].n, rows[i].p50,
		       rows[i].mean, rows[i].max);
		if (rows[i].goal > 0)
			printf("   p50 <= %g ms: %s", rows[i].goal,
			       rows[i].p50 <= rows[i].goal ? "met" : "MISSED");
		printf("\n");
	}
	double engine_fua = rows[2].p50 - rows[3].p50;
	printf("FUA write minus the baseline (p50): %.4f ms; vc_flush: %.2f us per dirty page\n",
	       engine_fua, us_per_page);
	if (json) {
		FILE *f = bench_json_open(json, "engine_ops", desc);
		fprintf(f, ",\n  \"quick\": %s,\n  \"pages_cached\": %llu,\n  \"dirty_pages\": %llu",
			quick ? "true" : "false", (unsigned long long)cached,
			(unsigned long long)ndirty);
		bench_json_field(f, "  ", "fua_engine_ms", engine_fua);
		bench_json_field(f, "  ", "flush_us_per_page", us_per_page);
		fputs(",\n  \"ops\": [", f);
		for (int i = 0; i < nr; i++) {
			fprintf(f, "%s\n    {\"op\": \"%s\", \"n\": %d, \"p50_ms\": ", i ? "," : "",
				rows[i].name, rows[i].n);
			bench_json_num(f, rows[i].p50);
			fputs(", \"mean_ms\": ", f);
			bench_json_num(f, rows[i].mean);
			fputs(", \"max_ms\": ", f);
			bench_json_num(f, rows[i].max);
			fputs(", \"goal_ms\": ", f);
			bench_json_num(f, rows[i].goal > 0 ? rows[i].goal : NAN);
			fputs("}", f);
		}
		fputs("\n  ]", f);
		bench_json_close(f);
	}
	free(ms);
	free(page);
	return 0;
}
