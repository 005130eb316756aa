/* Helpers shared by the benchmarks (header only: each bench file is its own
 * program). Benchmarks print a short table and, with --json FILE, write
 * their figures with the device, the date and the commit they ran at. */
#ifndef VC_BENCH_H
#define VC_BENCH_H

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vramcache.h"
#include "vc_build_commit.h"

/* A benchmark names itself in its messages: #define BENCH_NAME "name"
 * before including this header. */
#ifndef BENCH_NAME
#define BENCH_NAME "bench"
#endif

#ifdef __CUDACC__
#define BENCH_HD __host__ __device__
#else
#define BENCH_HD
#endif

/* Seconds on the monotonic clock. */
static inline double bench_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* splitmix64's finalizer: the benchmarks' file contents and record
 * choices (host and device code alike). */
static inline BENCH_HD uint64_t bench_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Sleeps s seconds, resuming after signals. */
static inline void bench_sleep_s(double s)
{
	struct timespec ts;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* p[0..n) becomes a random permutation of 0..n-1 (Fisher-Yates, drawing
 * bench_mix64 of *seed, *seed + 1, ...; *seed moves on): the scattered
 * slots of the transfer benchmarks. */
static inline void bench_permutation(uint32_t *p, uint32_t n, uint64_t *seed)
{
	for (uint32_t i = 0; i < n; i++)
		p[i] = i;
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = (uint32_t)(bench_mix64((*seed)++) % i), t = p[i - 1];
		p[i - 1] = p[j];
		p[j] = t;
	}
}

/* Failure of a library call: say what failed and why, and exit. */
static inline void bench_die(const char *what, int r)
{
	fprintf(stderr, BENCH_NAME ": %s: %s (%s)\n", what, vc_strerror(r), vc_last_error());
	exit(1);
}

#define BENCH_OK(expr)                          \
	do {                                    \
		int r_ = (expr);                \
		if (r_ < 0)                     \
			bench_die(#expr, r_);   \
	} while (0)

/* For CUDA runtime calls in baselines (include cuda_runtime.h first). */
#define BENCH_CUOK(expr)                                                                     \
	do {                                                                                 \
		cudaError_t e_ = (expr);                                                     \
		if (e_ != cudaSuccess) {                                                     \
			fprintf(stderr, BENCH_NAME ": %s: %s\n", #expr, cudaGetErrorString(e_)); \
			exit(1);                                                             \
		}                                                                            \
	} while (0)

#ifdef CUDART_VERSION
/* For baselines on the CUDA runtime: makes device 0 current and starts its
 * context; false, after saying why, where no GPU is usable (the caller
 * exits 77). */
static inline bool bench_cuda_open(struct cudaDeviceProp *prop)
{
	cudaError_t e = cudaSetDevice(0);
	if (e == cudaSuccess)
		e = cudaFree(0);
	if (e == cudaSuccess)
		e = cudaGetDeviceProperties(prop, 0);
	if (e != cudaSuccess)
		fprintf(stderr, BENCH_NAME ": no usable GPU: %s\n", cudaGetErrorString(e));
	return e == cudaSuccess;
}
#endif

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* q-quantile (0..1) of v[0..n); sorts v. */
static inline double bench_quantile(double *v, int n, double q)
{
	if (n <= 0)
		return NAN;
	qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
	int i = (int)(q * (n - 1) + 0.5);
	return v[i];
}

/* A comma-separated list of at most max numbers ("1,2,4"), the whole
 * string: returns the count, or -1 for an empty item, a stray character,
 * a minus sign (strtoull would wrap it) or more than max items. */
static inline int bench_parse_list_u64(const char *s, uint64_t *out, int max)
{
	int n = 0;
	for (;;) {
		char *e;
		if (n == max || !isdigit((unsigned char)*s))
			return -1;
		out[n++] = strtoull(s, &e, 0);
		if (*e == '\0')
			return n;
		if (*e != ',')
			return -1;
		s = e + 1;
	}
}

static inline int bench_parse_list_double(const char *s, double *out, int max)
{
	int n = 0;
	for (;;) {
		char *e;
		if (n == max)
			return -1;
		out[n++] = strtod(s, &e);
		if (e == s || !isfinite(out[n - 1]))
			return -1;
		if (*e == '\0')
			return n;
		if (*e != ',')
			return -1;
		s = e + 1;
	}
}

/* The options most benchmarks share: "--quick", "--device NAME",
 * "--json FILE" and "--dir DIR" (scratch files; default $TMPDIR or /tmp). */
struct bench_common {
	int device;
	bool quick;
	const char *json, *dir;
};

static inline struct bench_common bench_common_init(void)
{
	return (struct bench_common){ .device = VC_DEVICE_AUTO,
				      .dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp" };
}

/* The option at argv[*i]: true when it is one of the shared ones (taken,
 * with its value: *i moves on); false for another, whose value it puts in
 * *v (and moves *i on). A missing value or an unknown device calls usage,
 * which must not return. */
static inline bool bench_common_opt(int argc, char **argv, int *i, struct bench_common *c,
				    const char **v, void (*usage)(void))
{
	const char *a = argv[*i];
	if (strcmp(a, "--quick") == 0) {
		c->quick = true;
		return true;
	}
	if (*i + 1 >= argc)
		usage();
	*v = argv[++*i];
	if (strcmp(a, "--device") == 0 && (c->device = vc_device_parse(*v)) < 0)
		usage();
	if (strcmp(a, "--json") == 0)
		c->json = *v;
	else if (strcmp(a, "--dir") == 0)
		c->dir = *v;
	return strcmp(a, "--device") == 0 || strcmp(a, "--json") == 0 || strcmp(a, "--dir") == 0;
}

/* The CPU's model name (from /proc/cpuinfo) in buf, or "host CPU"; returns buf. */
static inline const char *bench_cpu_model(char *buf, size_t len)
{
	snprintf(buf, len, "host CPU");
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return buf;
	char line[256];
	while (fgets(line, sizeof line, f)) {
		char *c = strchr(line, ':');
		if (strncmp(line, "model name", 10) == 0 && c) {
			c += 2;
			c[strcspn(c, "\n")] = 0;
			snprintf(buf, len, "%s", c);
			break;
		}
	}
	fclose(f);
	return buf;
}

/* The q-quantile of a log2 histogram of microseconds (bucket 0: under
 * 1 us; bucket b: [2^(b-1), 2^b) us; the last open-ended), as the upper
 * bound of the bucket it falls in: NAN for an empty histogram. */
static inline double bench_hist_quantile_us(const uint64_t *h, int n, double q)
{
	uint64_t total = 0, run = 0;
	for (int b = 0; b < n; b++)
		total += h[b];
	if (total == 0)
		return NAN;
	for (int b = 0; b < n; b++) {
		run += h[b];
		if ((double)run >= q * (double)total)
			return (double)(1ull << b);
	}
	return (double)(1ull << (n - 1));
}

static inline void bench_json_num(FILE *f, double x)
{
	if (isfinite(x))
		fprintf(f, "%.6g", x);
	else
		fputs("null", f);
}

/* Writes `,\n<indent>"key": value`: one numeric field of an open object. */
static inline void bench_json_field(FILE *f, const char *indent, const char *key, double x)
{
	fprintf(f, ",\n%s\"%s\": ", indent, key);
	bench_json_num(f, x);
}

/* Opens the JSON file and writes the fields every result carries; the
 * caller continues the object and closes it with bench_json_close. The
 * commit is $VC_COMMIT where set (scripts/gpu-check sets it), else the
 * one the binary was built from. */
static inline FILE *bench_json_open(const char *path, const char *bench, const char *device)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	char date[32];
	time_t now = time(NULL);
	strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	const char *commit = getenv("VC_COMMIT") ? getenv("VC_COMMIT") : VC_BUILD_COMMIT;
	fprintf(f, "{\n  \"bench\": \"%s\",\n  \"device\": \"%s\",\n  \"date\": \"%s\",\n"
		   "  \"commit\": \"%s\"",
		bench, device, date, commit);
	return f;
}

static inline void bench_json_close(FILE *f)
{
	fputs("\n}\n", f);
	fclose(f);
}

/* A read-only cache over path on the CUDA device (the GPUfs benchmarks). */
static inline vc_cache *bench_ro_cuda_cache(const char *path, uint64_t gpu_bytes, uint64_t host_bytes)
{
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.flags = VC_OPEN_READONLY;
	cfg.device = VC_DEVICE_CUDA;
	cfg.gpu_bytes = gpu_bytes;
	cfg.host_bytes = host_bytes;
	vc_cache *c;
	BENCH_OK(vc_open(&cfg, &c));
	return c;
}

/* Writes bytes of pseudo-random words (bench_mix64 of seed, seed + 1, ...)
 * to path, replacing it: 0, or -1 with errno set. */
static inline int bench_make_random_file(const char *path, uint64_t bytes, uint64_t seed)
{
	const uint64_t step = 1 << 20;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	uint64_t *b = (uint64_t *)malloc(step);
	int r = fd >= 0 && b ? 0 : -1;
	for (uint64_t off = 0; r == 0 && off < bytes; off += step) {
		for (uint64_t i = 0; i < step / 8; i++)
			b[i] = bench_mix64(seed++);
		if (pwrite(fd, b, step < bytes - off ? step : bytes - off, (off_t)off) < 0)
			r = -1;
	}
	free(b);
	if (fd >= 0 && close(fd) < 0)
		r = -1;
	return r;
}

#endif
