/* `vramcache mrc` end to end: its default method, fixed-size SHARDS
 * (Waldspurger et al., "Efficient MRC Construction with SHARDS", FAST 2015),
 * against the exact LRU curve, side by side on each trace in one run.
 *
 *   mrc_e2e [--json FILE] [--runs N] [--smax S] [--page-size N] [--vramcache PATH] TRACE...
 *
 * Time: the command itself, as a user runs it (`vramcache mrc --method
 * exact|size`: start, reading and decompressing the trace, the curve, the
 * report), wall clock, the best of N runs (default 5), the two methods
 * alternating so that both see the same machine. Where a SHARDS run's time
 * goes: "start" is the program's start and exit alone (`vramcache
 * --version`, loading its shared libraries), "read" the trace read to page
 * keys in this process with the command's calls and no curve (decompression
 * on its own thread included); the rest is the sampling that decompression
 * does not hide. Error: the mean absolute
 * and the largest difference of the miss ratio over 100 cache sizes (1 % to
 * 100 % of the distinct pages), computed here with the same library calls
 * the command makes. The ARC traces are from Megiddo & Modha, "ARC: A
 * Self-Tuning, Low Overhead Replacement Cache", FAST 2003. */
#define BENCH_NAME "mrc_e2e"
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "base/clock.h"
#include "tools/mrc.h"
#include "trace/trace.h"

extern char **environ;

/* Wall seconds of one run of the command, output discarded; method NULL:
 * `vramcache --version`. */
static double run_cmd(const char *vc, const char *method, const char *smax, const char *ps,
		      const char *trace)
{
	char *argv[] = { (char *)vc, "mrc", "--no-progress", "--method", (char *)method, "--smax",
			 (char *)smax, "--page-size", (char *)ps, (char *)trace, NULL };
	char *version[] = { (char *)vc, "--version", NULL };
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	uint64_t t0 = vc_now_ns();
	if (posix_spawn(&pid, vc, &fa, NULL, method ? argv : version, environ) != 0) {
		perror(vc);
		exit(1);
	}
	int st;
	waitpid(pid, &st, 0);
	double s = (double)(vc_now_ns() - t0) / 1e9;
	posix_spawn_file_actions_destroy(&fa);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, BENCH_NAME ": %s mrc --method %s %s failed\n", vc,
			method ? method : "(--version)", trace);
		exit(1);
	}
	return s;
}

/* Seconds to read the trace to page keys, in process, as the command does
 * (batches of 4096), with no curve. */
static double read_only(const char *path, uint32_t ps)
{
	static uint64_t keys[4096];
	uint64_t t0 = vc_now_ns();
	vc_trace *t;
	BENCH_OK(vc_trace_open(path, NULL, &t));
	long n;
	while ((n = vc_trace_next_pages(t, ps, true, keys, NULL, 4096)) > 0)
		;
	BENCH_OK((int)n);
	vc_trace_close(t);
	return (double)(vc_now_ns() - t0) / 1e9;
}

/* The curve the command computes, in process. */
static struct vc_mrc *curve(const struct vc_mrc_params *p, const char *path, uint32_t ps)
{
	struct vc_mrc *m;
	vc_trace *t;
	BENCH_OK(vc_mrc_create(p, &m));
	BENCH_OK(vc_trace_open(path, NULL, &t));
	static uint64_t keys[4096];
	long n;
	while ((n = vc_trace_next_pages(t, ps, true, keys, NULL, 4096)) > 0)
		BENCH_OK(vc_mrc_access_batch(m, keys, (size_t)n));
	BENCH_OK((int)n);
	vc_trace_close(t);
	BENCH_OK(vc_mrc_finish(m));
	return m;
}

static void cpu_name(char *buf, size_t n)
{
	snprintf(buf, n, "cpu");
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
			char *s = strchr(line, ':') + 2;
			s[strcspn(s, "\n")] = '\0';
			snprintf(buf, n, "%s, %ld cores online", s, sysconf(_SC_NPROCESSORS_ONLN));
			break;
		}
	if (f)
		fclose(f);
}

int main(int argc, char **argv)
{
	const char *json = NULL, *vc = NULL;
	char smax[32], ps[32] = "4096";
	snprintf(smax, sizeof smax, "%d", VC_MRC_SMAX_DEFAULT);
	int runs = 5;
	static const struct option lo[] = { { "json", required_argument, 0, 'j' },
					    { "runs", required_argument, 0, 'r' },
					    { "smax", required_argument, 0, 's' },
					    { "page-size", required_argument, 0, 'p' },
					    { "vramcache", required_argument, 0, 'v' },
					    { 0, 0, 0, 0 } };
	int ch;
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (ch == 'j')
			json = optarg;
		else if (ch == 'r')
			runs = atoi(optarg);
		else if (ch == 's')
			snprintf(smax, sizeof smax, "%s", optarg);
		else if (ch == 'p')
			snprintf(ps, sizeof ps, "%s", optarg);
		else if (ch == 'v')
			vc = optarg;
		else
			return 2;
	}
	if (optind >= argc || runs < 1) {
		fprintf(stderr, "usage: mrc_e2e [--json FILE] [--runs N] [--smax S] [--page-size N] "
				"[--vramcache PATH] TRACE...\n");
		return 2;
	}
	/* The command beside this program (both are in the build directory). */
	char self[4096], vcbuf[4200];
	if (!vc) {
		ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
		self[k > 0 ? k : 0] = '\0';
		snprintf(vcbuf, sizeof vcbuf, "%s/vramcache", k > 0 ? dirname(self) : ".");
		vc = vcbuf;
	}
	char cpu[200];
	cpu_name(cpu, sizeof cpu);
	double tstart = INFINITY;
	for (int r = 0; r < runs; r++) {
		double t = run_cmd(vc, NULL, NULL, NULL, NULL);
		tstart = t < tstart ? t : tstart;
	}
	FILE *jf = json ? bench_json_open(json, "mrc_e2e", cpu) : NULL;
	if (jf)
		fprintf(jf, ",\n  \"baseline\": \"vramcache mrc --method exact, same run\",\n"
			    "  \"page_size\": %s,\n  \"smax\": %s,\n  \"runs\": %d,\n"
			    "  \"start_seconds\": %.5f,\n  \"results\": [",
			ps, smax, runs, tstart);
	printf("%s; best of %d runs each, SHARDS S=%s against exact, pages of %s bytes; "
	       "start %.4f s (vramcache --version)\n",
	       cpu, runs, smax, ps, tstart);
	printf("%-30s %10s %10s %10s %8s %8s %8s %8s\n", "trace", "accesses", "exact s", "SHARDS s",
	       "speedup", "read s", "MAE", "max err");
	for (int a = optind; a < argc; a++) {
		const char *path = argv[a];
		uint32_t page = (uint32_t)strtoul(ps, NULL, 10);
		double te = INFINITY, ts = INFINITY, tr = INFINITY;
		for (int r = 0; r < runs; r++) {
			double e = run_cmd(vc, "exact", smax, ps, path);
			double s = run_cmd(vc, "size", smax, ps, path);
			double d = read_only(path, page);
			te = e < te ? e : te;
			ts = s < ts ? s : ts;
			tr = d < tr ? d : tr;
		}
		struct vc_mrc_params pe = { .kind = VC_MRC_EXACT },
				     pz = { .kind = VC_MRC_FIXED_SIZE, .smax = strtoull(smax, NULL, 10) };
		struct vc_mrc *ex = curve(&pe, path, page), *sz = curve(&pz, path, page);
		double distinct = vc_mrc_distinct(ex), sum = 0, mx = 0;
		for (int i = 1; i <= 100; i++) {
			double c = floor(distinct * i / 100);
			double e = fabs(vc_mrc_miss_ratio(ex, c) - vc_mrc_miss_ratio(sz, c));
			sum += e;
			mx = e > mx ? e : mx;
		}
		const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
		printf("%-30s %10llu %10.4f %10.4f %7.1fx %8.4f %8.5f %8.5f\n", name,
		       (unsigned long long)vc_mrc_accesses(ex), te, ts, te / ts, tr, sum / 100, mx);
		if (jf)
			fprintf(jf, "%s\n    {\"trace\": \"%s\", \"accesses\": %llu, \"distinct\": %.0f, "
				    "\"exact_seconds\": %.5f, \"shards_seconds\": %.5f, \"speedup\": %.2f, "
				    "\"read_seconds\": %.5f, \"mae\": %.6f, \"max_error\": %.6f, "
				    "\"final_rate\": %.6f}",
				a == optind ? "" : ",", name, (unsigned long long)vc_mrc_accesses(ex),
				distinct, te, ts, te / ts, tr, sum / 100, mx, vc_mrc_rate(sz));
		vc_mrc_destroy(ex);
		vc_mrc_destroy(sz);
	}
	if (jf) {
		fputs("\n  ]", jf);
		bench_json_close(jf);
	}
	return 0;
}
