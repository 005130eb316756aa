/* SHARDS against the exact LRU MRC (Waldspurger et al., FAST 2015) on block
 * traces: mean absolute error of the miss ratio over 100 cache sizes (1 %
 * to 100 % of the distinct pages), time, and peak memory, for fixed-rate
 * R = 0.01 and 0.001 and fixed-size samples.
 *
 *   bench_shards [--json FILE] [--page-size N] [--smax S[,S...]] TRACE...
 *
 * The ARC traces are from Megiddo & Modha, "ARC: A Self-Tuning, Low
 * Overhead Replacement Cache", FAST 2003.
 *
 * To time the algorithms and not the parser, each trace's page keys are
 * read once into memory (a benchmark's choice; the readers and `vramcache
 * mrc` stream). Times are the best of three runs. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "base/clock.h"
#include "tools/mrc.h"
#include "trace/trace.h"

static uint64_t *load(const char *path, uint32_t ps, uint64_t *n)
{
	vc_trace *t;
	if (vc_trace_open(path, NULL, &t) < 0) {
		fprintf(stderr, "%s\n", vc_last_error());
		exit(1);
	}
	uint64_t cap = 1 << 20, k;
	uint64_t *v = malloc(cap * sizeof *v);
	int op, r;
	*n = 0;
	while ((r = vc_trace_next_page(t, ps, true, &k, &op)) == 1) {
		if (*n == cap) {
			cap *= 2;
			v = realloc(v, cap * sizeof *v);
		}
		if (!v) {
			fprintf(stderr, "out of memory\n");
			exit(1);
		}
		v[(*n)++] = k;
	}
	if (r < 0) {
		fprintf(stderr, "%s\n", vc_last_error());
		exit(1);
	}
	vc_trace_close(t);
	return v;
}

static struct vc_mrc *run(const struct vc_mrc_params *p, const uint64_t *keys, uint64_t n,
			  double *secs)
{
	struct vc_mrc *best = NULL;
	*secs = INFINITY;
	for (int rep = 0; rep < 3; rep++) {
		struct vc_mrc *m;
		if (vc_mrc_create(p, &m) < 0) {
			fprintf(stderr, "%s\n", vc_last_error());
			exit(1);
		}
		uint64_t t0 = vc_now_ns();
		for (uint64_t i = 0; i < n; i++)
			if (vc_mrc_access(m, keys[i]) < 0) {
				fprintf(stderr, "out of memory\n");
				exit(1);
			}
		vc_mrc_finish(m);
		double s = (double)(vc_now_ns() - t0) / 1e9;
		if (s < *secs) {
			*secs = s;
			vc_mrc_destroy(best);
			best = m;
		} else {
			vc_mrc_destroy(m);
		}
	}
	return best;
}

static double mae(const struct vc_mrc *a, const struct vc_mrc *b, double distinct, double *maxe)
{
	double sum = 0;
	*maxe = 0;
	for (int i = 1; i <= 100; i++) {
		double c = floor(distinct * i / 100);
		double e = fabs(vc_mrc_miss_ratio(a, c) - vc_mrc_miss_ratio(b, c));
		sum += e;
		if (e > *maxe)
			*maxe = e;
	}
	return sum / 100;
}

int main(int argc, char **argv)
{
	const char *json = NULL;
	uint32_t ps = 512;
	char smax_list[256] = "4096,8192";
	static const struct option lo[] = { { "json", required_argument, 0, 'j' },
					    { "page-size", required_argument, 0, 'p' },
					    { "smax", required_argument, 0, 's' },
					    { 0, 0, 0, 0 } };
	int ch;
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (ch == 'j')
			json = optarg;
		else if (ch == 'p')
			ps = (uint32_t)atoi(optarg);
		else if (ch == 's')
			snprintf(smax_list, sizeof smax_list, "%s", optarg);
		else
			return 2;
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: bench_shards [--json FILE] [--page-size N] [--smax S,...] TRACE...\n");
		return 2;
	}
	uint64_t smax[8];
	int nsm = 0;
	for (char *tok = strtok(smax_list, ","); tok && nsm < 8; tok = strtok(NULL, ","))
		smax[nsm++] = strtoull(tok, NULL, 10);

	FILE *jf = json ? bench_json_open(json, "shards", "cpu") : NULL;
	if (jf)
		fprintf(jf, ",\n  \"page_size\": %u,\n  \"sizes\": \"100, 1%%..100%% of distinct pages\",\n"
			    "  \"results\": [",
			ps);
	printf("%-22s %-14s %10s %9s %9s %10s %8s\n", "trace", "method", "MAE", "max err",
	       "seconds", "speedup", "memory");
	int first = 1;
	for (int a = optind; a < argc; a++) {
		uint64_t n;
		uint64_t *keys = load(argv[a], ps, &n);
		const char *name = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a];
		struct vc_mrc_params ep = { .kind = VC_MRC_EXACT };
		double es;
		struct vc_mrc *ex = run(&ep, keys, n, &es);
		double distinct = vc_mrc_distinct(ex);
		printf("%-22s %-14s %10s %9s %9.3f %10s %7.1fM   (%llu accesses, %.0f distinct)\n",
		       name, "exact", "-", "-", es, "-", vc_mrc_peak_bytes(ex) / 1048576.0,
		       (unsigned long long)n, distinct);
		struct vc_mrc_params ps_[2 + 8];
		char label[2 + 8][32];
		int np = 0;
		ps_[np] = (struct vc_mrc_params){ .kind = VC_MRC_FIXED_RATE, .rate = 0.01 };
		snprintf(label[np++], 32, "R=0.01");
		ps_[np] = (struct vc_mrc_params){ .kind = VC_MRC_FIXED_RATE, .rate = 0.001 };
		snprintf(label[np++], 32, "R=0.001");
		for (int i = 0; i < nsm; i++) {
			ps_[np] = (struct vc_mrc_params){ .kind = VC_MRC_FIXED_SIZE, .smax = smax[i] };
			snprintf(label[np++], 32, "S=%llu", (unsigned long long)smax[i]);
		}
		for (int i = 0; i < np; i++) {
			double s, maxe;
			struct vc_mrc *m = run(&ps_[i], keys, n, &s);
			double e = mae(ex, m, distinct, &maxe);
			printf("%-22s %-14s %10.5f %9.5f %9.3f %9.1fx %7.3fM   (final R %.5f)\n", name,
			       label[i], e, maxe, s, es / s, vc_mrc_peak_bytes(m) / 1048576.0,
			       vc_mrc_rate(m));
			if (jf) {
				fprintf(jf, "%s\n    {\"trace\": \"%s\", \"method\": \"%s\", \"mae\": %.6f, "
					    "\"max_error\": %.6f, \"seconds\": %.4f, \"exact_seconds\": %.4f, "
					    "\"speedup\": %.2f, \"peak_bytes\": %zu, \"final_rate\": %.6f, "
					    "\"accesses\": %llu, \"distinct\": %.0f}",
					first ? "" : ",", name, label[i], e, maxe, s, es, es / s,
					vc_mrc_peak_bytes(m), vc_mrc_rate(m), (unsigned long long)n, distinct);
				first = 0;
			}
			vc_mrc_destroy(m);
		}
		vc_mrc_destroy(ex);
		free(keys);
	}
	if (jf) {
		fputs("\n  ]", jf);
		bench_json_close(jf);
	}
	return 0;
}
