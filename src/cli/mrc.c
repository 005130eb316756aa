/* `vramcache mrc`: the LRU miss-ratio curve of a trace, exact or by SHARDS
 * sampling, as CSV and SVG, with the cache sizes that reach given hit
 * ratios and, for a given host tier, the GPU tier that gets there (GRAM's
 * two tiers are one LRU queue, so host + GPU pages reach what one cache of
 * that size reaches). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/clock.h"
#include "tools/mrc.h"
#include "tools/svg.h"
#include "vramcache.h"

static void mrc_usage(FILE *f)
{
	fputs("Usage: vramcache mrc [OPTIONS] TRACE\n"
	      "\n"
	      "The LRU miss-ratio curve of a block trace by SHARDS spatial sampling\n"
	      "(Waldspurger et al., FAST 2015), or exact (O(N log M)).\n"
	      "\n"
	      "  --method M[,M...]   size (default: fixed-size SHARDS, O(smax) memory,\n"
	      "                      MAE under 0.01 on the shared traces), exact, rate\n"
	      "                      (fixed-rate SHARDS), or all (each, for comparison)\n"
	      "  --rate R            fixed-rate sampling rate (default 0.01)\n"
	      "  --smax S            fixed-size sample, in keys (default 12288: under 1 MiB)\n"
	      "  --points N          curve points, evenly spaced up to the distinct pages\n"
	      "                      (default 100)\n"
	      "  --csv FILE          write the curve as CSV (\"-\": standard output)\n"
	      "  --svg FILE          plot it, with the sizes that reach the target hit ratios\n"
	      "  --hit H[,H...]      target hit ratios (0..1); default 90%, 95% and 99% of\n"
	      "                      the highest reachable (all but first accesses)\n"
	      "  --host S            host tier size (pages, bytes or % of the distinct\n"
	      "                      pages): print the GPU tier that reaches each target\n"
	      "  --format F, --page-size N, --per-request, --no-progress: as for sim\n",
	      f);
}

#define MAXM 8

struct mrc_run {
	struct vc_mrc *m[MAXM];
	int n;
};

static int mrc_batch(void *arg, const uint64_t *keys, const uint8_t *ops, size_t n)
{
	(void)ops;
	struct mrc_run *r = arg;
	for (int i = 0; i < r->n; i++)
		if (vc_mrc_access_batch(r->m[i], keys, n) < 0)
			return -ENOMEM;
	return 0;
}

/* Smallest cache (pages) whose hit ratio reaches h, by bisection over
 * [1, hi] (miss ratios do not rise with size); 0 if none does. */
static uint64_t size_for(const struct vc_mrc *m, double h, uint64_t hi)
{
	if (1 - vc_mrc_miss_ratio(m, (double)hi) < h - 1e-12)
		return 0;
	uint64_t lo = 1;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (1 - vc_mrc_miss_ratio(m, (double)mid) >= h - 1e-12)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static void human(char *b, size_t n, double bytes)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int i = 0;
	while (bytes >= 1024 && i < 4) {
		bytes /= 1024;
		i++;
	}
	snprintf(b, n, "%.1f %s", bytes, u[i]);
}

int cmd_mrc(int argc, char **argv)
{
	struct cli_trace_opts to = { .page_size = 4096, .progress = true };
	const char *methods = "size", *csv = NULL, *svg = NULL, *hits = NULL, *host = NULL;
	double rate = 0.01;
	uint64_t smax = VC_MRC_SMAX_DEFAULT, points = 100;
	enum { O_METHOD = 256, O_RATE, O_SMAX, O_POINTS, O_CSV, O_SVG, O_HIT, O_HOST, O_NOPROG };
	static const struct option lo[] = {
		{ "method", required_argument, 0, O_METHOD },
		{ "rate", required_argument, 0, O_RATE },
		{ "smax", required_argument, 0, O_SMAX },
		{ "points", required_argument, 0, O_POINTS },
		{ "csv", required_argument, 0, O_CSV },
		{ "svg", required_argument, 0, O_SVG },
		{ "hit", required_argument, 0, O_HIT },
		{ "host", required_argument, 0, O_HOST },
		CLI_TRACE_OPTIONS,
		{ "no-progress", no_argument, 0, O_NOPROG },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int ch;
	char *end;
	int li = 0, r;
	while ((ch = getopt_long(argc, argv, "h", lo, &li)) != -1) {
		switch (ch) {
		case O_METHOD:
			methods = optarg;
			break;
		case O_RATE:
			rate = strtod(optarg, &end);
			if (*end || !(rate > 0 && rate <= 1))
				goto bad;
			break;
		case O_SMAX:
			if (cli_u64(optarg, &smax) || smax < 16)
				goto bad;
			break;
		case O_POINTS:
			if (cli_u64(optarg, &points) || points < 2 || points > 100000)
				goto bad;
			break;
		case O_CSV:
			csv = optarg;
			break;
		case O_SVG:
			svg = optarg;
			break;
		case O_HIT:
			hits = optarg;
			break;
		case O_HOST:
			host = optarg;
			break;
		case O_NOPROG:
			to.progress = false;
			break;
		case 'h':
			mrc_usage(stdout);
			return 0;
		default:
			r = cli_trace_opt(ch, optarg, &to);
			if (r < 0)
				goto bad;
			if (r == 0) {
				mrc_usage(stderr);
				return 2;
			}
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "vramcache mrc: give one trace file (try --help)\n");
		return 2;
	}
	const char *path = argv[optind];

	struct vc_mrc_params mp[MAXM];
	char label[MAXM][40];
	int nm = 0;
	char mbuf[256];
	snprintf(mbuf, sizeof mbuf, "%s", methods);
	for (char *tok = strtok(mbuf, ","); tok; tok = strtok(NULL, ",")) {
		bool all = strcmp(tok, "all") == 0;
		if ((all || !strcmp(tok, "exact")) && nm < MAXM) {
			mp[nm] = (struct vc_mrc_params){ .kind = VC_MRC_EXACT };
			snprintf(label[nm++], 40, "exact");
		}
		if ((all || !strcmp(tok, "rate")) && nm < MAXM) {
			mp[nm] = (struct vc_mrc_params){ .kind = VC_MRC_FIXED_RATE, .rate = rate };
			snprintf(label[nm++], 40, "SHARDS R=%g", rate);
		}
		if (all && nm < MAXM && rate != 0.001) {
			mp[nm] = (struct vc_mrc_params){ .kind = VC_MRC_FIXED_RATE, .rate = 0.001 };
			snprintf(label[nm++], 40, "SHARDS R=0.001");
		}
		if ((all || !strcmp(tok, "size")) && nm < MAXM) {
			mp[nm] = (struct vc_mrc_params){ .kind = VC_MRC_FIXED_SIZE, .smax = smax };
			snprintf(label[nm++], 40, "SHARDS S=%llu", (unsigned long long)smax);
		}
		if (!all && strcmp(tok, "exact") && strcmp(tok, "rate") && strcmp(tok, "size")) {
			fprintf(stderr, "vramcache mrc: unknown method \"%s\"\n", tok);
			return 2;
		}
	}
	double targets[16];
	int nt = 0;
	if (hits) {
		char hbuf[256];
		snprintf(hbuf, sizeof hbuf, "%s", hits);
		for (char *tok = strtok(hbuf, ","); tok && nt < 16; tok = strtok(NULL, ",")) {
			double h = strtod(tok, &end);
			if (*end == '%')
				h /= 100, end++;
			if (*end || !(h > 0 && h < 1)) {
				fprintf(stderr, "vramcache mrc: bad hit ratio \"%s\"\n", tok);
				return 2;
			}
			targets[nt++] = h;
		}
	}

	struct mrc_run run = { .n = 0 };
	int rc = 1;
	for (int i = 0; i < nm; i++) {
		if (vc_mrc_create(&mp[i], &run.m[i]) < 0) {
			fprintf(stderr, "vramcache mrc: %s\n", vc_last_error());
			goto out;
		}
		run.n++;
	}
	uint64_t n, t0 = vc_now_ns();
	if (cli_for_each_batch(path, &to, "mrc", mrc_batch, &run, &n) < 0)
		goto out; /* an empty trace included: no curve, nothing written */
	double secs = (double)(vc_now_ns() - t0) / 1e9;
	for (int i = 0; i < nm; i++)
		if (vc_mrc_finish(run.m[i]) < 0)
			goto out;
	/* The reference curve is the first method's (exact when asked). */
	const struct vc_mrc *ref = run.m[0];
	double distinct = vc_mrc_distinct(ref);
	uint64_t xmax = (uint64_t)ceil(distinct);
	if (xmax < 1)
		xmax = 1;
	double maxhit = 1 - vc_mrc_miss_ratio(ref, (double)xmax);
	if (!hits) {
		targets[0] = 0.90 * maxhit;
		targets[1] = 0.95 * maxhit;
		targets[2] = 0.99 * maxhit;
		nt = maxhit > 0 ? 3 : 0;
	}
	uint64_t host_pages = 0;
	if (host) {
		double fr;
		if (cli_size(host, to.page_size, &host_pages, &fr) < 0) {
			fprintf(stderr, "vramcache mrc: bad --host \"%s\"\n", host);
			goto out;
		}
		if (fr > 0)
			host_pages = (uint64_t)(fr * distinct);
	}

	printf("trace %s: %llu page accesses of %u bytes, %.0f distinct pages (%s)\n", path,
	       (unsigned long long)n, to.page_size, distinct, label[0]);
	for (int i = 0; i < nm; i++) {
		char mem[32];
		human(mem, sizeof mem, (double)vc_mrc_peak_bytes(run.m[i]));
		printf("  %-16s final rate %.6f, peak memory %s\n", label[i], vc_mrc_rate(run.m[i]),
		       mem);
	}
	fprintf(stderr, "mrc: %.2f s for %d curve(s)\n", secs, nm);
	if (nm > 1) {
		printf("\nmean absolute error against %s over %llu sizes:\n", label[0],
		       (unsigned long long)points);
		for (int i = 1; i < nm; i++) {
			double sum = 0, mx = 0;
			for (uint64_t k = 1; k <= points; k++) {
				double c = floor(distinct * (double)k / (double)points);
				double e = fabs(vc_mrc_miss_ratio(ref, c) - vc_mrc_miss_ratio(run.m[i], c));
				sum += e;
				mx = e > mx ? e : mx;
			}
			printf("  %-16s MAE %.5f, max %.5f\n", label[i], sum / (double)points, mx);
		}
	}
	struct vc_svg_mark marks[17];
	char mlabel[17][64];
	int nmk = 0;
	if (nt) {
		printf("\n%-10s %14s %12s", "hit ratio", "cache pages", "size");
		if (host)
			printf(" %14s %12s %10s %10s", "GPU pages", "GPU size", "hit host", "hit GPU");
		printf("\n");
	}
	for (int i = 0; i < nt; i++) {
		uint64_t c = size_for(ref, targets[i], xmax);
		char sz[32];
		human(sz, sizeof sz, (double)c * to.page_size);
		if (!c) {
			printf("%-10.4f %14s %12s\n", targets[i], "unreachable", "-");
			continue;
		}
		printf("%-10.4f %14llu %12s", targets[i], (unsigned long long)c, sz);
		if (host) {
			uint64_t g = c > host_pages ? c - host_pages : 0;
			char gs[32];
			human(gs, sizeof gs, (double)g * to.page_size);
			double hh = 1 - vc_mrc_miss_ratio(ref, (double)host_pages);
			double hg = vc_mrc_miss_ratio(ref, (double)host_pages) -
				    vc_mrc_miss_ratio(ref, (double)(host_pages + g));
			printf(" %14llu %12s %10.4f %10.4f", (unsigned long long)g, gs, hh, hg);
		}
		printf("\n");
		snprintf(mlabel[nmk], 64, "hit %.3f", targets[i]);
		marks[nmk] = (struct vc_svg_mark){ (double)c, mlabel[nmk] };
		nmk++;
	}
	if (host) {
		printf("\nhost tier %llu pages: hit ratio %.4f alone; GPU tier sizes above reach each "
		       "target (GRAM: host + GPU act as one LRU of their sum)\n",
		       (unsigned long long)host_pages,
		       1 - vc_mrc_miss_ratio(ref, (double)host_pages));
		snprintf(mlabel[nmk], 64, "host tier");
		marks[nmk++] = (struct vc_svg_mark){ (double)host_pages, mlabel[nmk - 1] };
	}

	double *xs = malloc((points + 1) * sizeof *xs), *ys = malloc(nm * (points + 1) * sizeof *ys);
	if (!xs || !ys) {
		free(xs);
		free(ys);
		goto out;
	}
	for (uint64_t k = 0; k <= points; k++) {
		xs[k] = floor(distinct * (double)k / (double)points);
		for (int i = 0; i < nm; i++)
			ys[i * (points + 1) + k] = vc_mrc_miss_ratio(run.m[i], xs[k]);
	}
	if (csv) {
		FILE *f = strcmp(csv, "-") == 0 ? stdout : fopen(csv, "w");
		if (!f) {
			perror(csv);
			free(xs);
			free(ys);
			goto out;
		}
		fprintf(f, "cache_pages,cache_bytes");
		for (int i = 0; i < nm; i++)
			fprintf(f, ",miss_ratio %s", label[i]);
		fputc('\n', f);
		for (uint64_t k = 0; k <= points; k++) {
			fprintf(f, "%.0f,%.0f", xs[k], xs[k] * to.page_size);
			for (int i = 0; i < nm; i++)
				fprintf(f, ",%.6f", ys[i * (points + 1) + k]);
			fputc('\n', f);
		}
		if (f != stdout && fclose(f) != 0)
			perror(csv);
	}
	if (svg) {
		FILE *f = fopen(svg, "w");
		if (!f) {
			perror(svg);
			free(xs);
			free(ys);
			goto out;
		}
		struct vc_svg_series ser[MAXM];
		for (int i = 0; i < nm; i++)
			ser[i] = (struct vc_svg_series){ label[i], xs, ys + i * (points + 1),
							 (int)points + 1, i > 0 };
		const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
		char title[256], xl[64];
		snprintf(title, sizeof title, "LRU miss-ratio curve: %s", base);
		snprintf(xl, sizeof xl, "cache size (pages of %u bytes)", to.page_size);
		vc_svg_plot(f, title, xl, "miss ratio", (double)xmax, ser, nm, marks, nmk);
		if (fclose(f) != 0)
			perror(svg);
	}
	free(xs);
	free(ys);
	rc = 0;
out:
	for (int i = 0; i < run.n; i++)
		vc_mrc_destroy(run.m[i]);
	return rc;
bad:
	fprintf(stderr, "vramcache mrc: bad value '%s' for --%s\n", optarg, lo[li].name);
	return 2;
}
