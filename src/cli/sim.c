/* `vramcache sim`: a trace through the replacement policies at many cache
 * sizes in one pass, single-tier or GRAM's host + GPU tiers; hit ratios per
 * tier and the I/O cost per access under GRAM's latency model. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/clock.h"
#include "policy/policy.h"
#include "tools/sim.h"
#include "tools/workload.h"
#include "vramcache.h"

#define MAX_SIZES 256
#define MAX_POLICIES 16

static void sim_usage(FILE *f)
{
	fputs("Usage: vramcache sim [OPTIONS] TRACE\n"
	      "\n"
	      "Replays a block trace through the replacement policies the engine runs,\n"
	      "at many cache sizes in one pass, moving no data.\n"
	      "\n"
	      "  --policy P[,P...]   policies, or \"all\" (default: the engine's, s3fifo+lru);\n"
	      "                      see below\n"
	      "  --sizes S[,S...]    cache sizes: pages (4096), bytes (64M, 1GiB) or a share\n"
	      "                      of the trace's distinct pages (1%); default\n"
	      "                      1%,2%,5%,10%,20%,50%,100%\n"
	      "  --host S            two tiers: a host tier of S; --sizes are then GPU tier\n"
	      "                      sizes (0 allowed: host tier alone)\n"
	      "  --format F          trace format (default: detect): arc, cloudphysics, msr,\n"
	      "                      systor, tencent, csv, vct; lbn32be, lbn32le (32-bit\n"
	      "                      block numbers, never detected)\n"
	      "  --page-size N       bytes per page (default 4096); requests expand into\n"
	      "                      every page they touch\n"
	      "  --per-request       one access per request, to the page of its first byte\n"
	      "                      (libCacheSim's one object per block number)\n"
	      "  --backing-latency T latency per backing page I/O (default 5ms)\n"
	      "  --move-latency T    cost of one host<->GPU page move (default 13us: one\n"
	      "                      GPU-tier hit, p50 on an H200, docs/BENCHMARKS.md)\n"
	      "  --json FILE         also write the results as JSON\n"
	      "  --no-progress       no progress bar (it is drawn only on a terminal)\n"
	      "\n",
	      f);
	fputs("Policies:\n", f);
	for (const struct vc_policy_ops *const *o = vc_policies; *o; o++)
		fprintf(f, "  %-8s %s\n", (*o)->name, (*o)->cost);
}

struct sim_run {
	struct vc_sim *sim[MAX_SIZES * MAX_POLICIES];
	int n;
};

static int sim_page(void *arg, uint64_t key, int op)
{
	struct sim_run *r = arg;
	for (int i = 0; i < r->n; i++)
		if (vc_sim_access(r->sim[i], key, op) < 0)
			return -ENOMEM;
	return 0;
}

/* Splits a comma list in place. */
static int split_list(char *s, char **out, int max)
{
	int n = 0;
	for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ","))
		if (n < max)
			out[n++] = tok;
		else
			return -1;
	return n;
}

int cmd_sim(int argc, char **argv)
{
	struct cli_trace_opts to = { .page_size = 4096, .progress = true };
	char *policies = NULL, *sizes = NULL;
	const char *host = NULL, *json = NULL;
	double lat_ms = 5, move_ms = 0.013;
	enum { O_POL = 256, O_SIZES, O_HOST, O_LAT, O_MOVE, O_JSON, O_NOPROG };
	static const struct option lo[] = {
		{ "policy", required_argument, 0, O_POL },
		{ "sizes", required_argument, 0, O_SIZES },
		{ "host", required_argument, 0, O_HOST },
		CLI_TRACE_OPTIONS,
		{ "backing-latency", required_argument, 0, O_LAT },
		{ "move-latency", required_argument, 0, O_MOVE },
		{ "json", required_argument, 0, O_JSON },
		{ "no-progress", no_argument, 0, O_NOPROG },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int ch;
	int li = 0, r;
	while ((ch = getopt_long(argc, argv, "h", lo, &li)) != -1) {
		switch (ch) {
		case O_POL:
			policies = optarg;
			break;
		case O_SIZES:
			sizes = optarg;
			break;
		case O_HOST:
			host = optarg;
			break;
		case O_LAT:
			if ((lat_ms = vc_wl_parse_ms(optarg)) < 0)
				goto bad;
			break;
		case O_MOVE:
			if ((move_ms = vc_wl_parse_ms(optarg)) < 0)
				goto bad;
			break;
		case O_JSON:
			json = optarg;
			break;
		case O_NOPROG:
			to.progress = false;
			break;
		case 'h':
			sim_usage(stdout);
			return 0;
		default:
			r = cli_trace_opt(ch, optarg, &to);
			if (r < 0)
				goto bad;
			if (r == 0) {
				sim_usage(stderr);
				return 2;
			}
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "vramcache sim: give one trace file (try --help)\n");
		return 2;
	}
	const char *path = argv[optind];

	/* Policies. */
	const char *pol[MAX_POLICIES];
	int npol = 0;
	char pbuf[512];
	snprintf(pbuf, sizeof pbuf, "%s", policies ? policies : VC_POLICY_DEFAULT);
	if (strcmp(pbuf, "all") == 0) {
		for (const struct vc_policy_ops *const *o = vc_policies; *o; o++)
			pol[npol++] = (*o)->name;
	} else {
		char *pl[MAX_POLICIES];
		int k = split_list(pbuf, pl, MAX_POLICIES);
		for (int i = 0; i < k; i++) {
			if (!vc_policy_find(pl[i])) {
				fprintf(stderr, "vramcache sim: unknown policy \"%s\" (try --help)\n", pl[i]);
				return 2;
			}
			pol[npol++] = pl[i];
		}
		if (k <= 0) {
			fprintf(stderr, "vramcache sim: bad --policy\n");
			return 2;
		}
	}

	/* Sizes: pages now, or fractions resolved after a first pass. */
	char sbuf[4096];
	snprintf(sbuf, sizeof sbuf, "%s", sizes ? sizes : "1%,2%,5%,10%,20%,50%,100%");
	char *sl[MAX_SIZES];
	int nsz = split_list(sbuf, sl, MAX_SIZES);
	if (nsz <= 0) {
		fprintf(stderr, "vramcache sim: bad --sizes\n");
		return 2;
	}
	uint64_t pages[MAX_SIZES], host_pages = 0;
	double frac[MAX_SIZES], host_frac = 0;
	bool need_ws = false;
	for (int i = 0; i < nsz; i++) {
		if (host && strcmp(sl[i], "0") == 0) {
			pages[i] = 0;
			frac[i] = 0;
			continue;
		}
		if (cli_size(sl[i], to.page_size, &pages[i], &frac[i]) < 0) {
			fprintf(stderr, "vramcache sim: bad size \"%s\"\n", sl[i]);
			return 2;
		}
		need_ws |= frac[i] > 0;
	}
	if (host) {
		if (cli_size(host, to.page_size, &host_pages, &host_frac) < 0) {
			fprintf(stderr, "vramcache sim: bad --host \"%s\"\n", host);
			return 2;
		}
		need_ws |= host_frac > 0;
	}
	uint64_t unique = 0, acc0 = 0;
	uint64_t t0 = vc_now_ns();
	if (need_ws) {
		if (cli_working_set(path, &to, &unique, &acc0) < 0)
			return 1; /* an empty trace included */
		for (int i = 0; i < nsz; i++)
			if (frac[i] > 0)
				pages[i] = (uint64_t)((double)unique * frac[i]); /* floor, as libCacheSim */
		if (host_frac > 0)
			host_pages = (uint64_t)((double)unique * host_frac);
	}

	struct sim_run *run = calloc(1, sizeof *run);
	if (!run)
		return 1;
	int rc = 1;
	for (int p = 0; p < npol; p++) {
		for (int i = 0; i < nsz; i++) {
			uint64_t h = host ? host_pages : pages[i], g = host ? pages[i] : 0;
			if (h == 0) {
				fprintf(stderr, "vramcache sim: size %s is 0 pages\n", sl[i]);
				goto out;
			}
			if (vc_sim_create(pol[p], h, g, &run->sim[run->n]) < 0) {
				fprintf(stderr, "vramcache sim: %s\n", vc_last_error());
				goto out;
			}
			run->n++;
		}
	}
	uint64_t accesses;
	uint64_t t1 = vc_now_ns();
	if (cli_for_each_page(path, &to, "sim", sim_page, run, &accesses) < 0)
		goto out;
	double secs = (double)(vc_now_ns() - t1) / 1e9;

	printf("trace %s: %llu page accesses of %u bytes%s", path, (unsigned long long)accesses,
	       to.page_size, to.per_request ? " (one per request)" : "");
	if (unique)
		printf(", %llu distinct pages", (unsigned long long)unique);
	printf("\ncost model: %.3g ms per backing page I/O, %.3g ms per host<->GPU move "
	       "(write-through)\n\n",
	       lat_ms, move_ms);
	printf("%-8s %12s %12s %9s %9s %9s %12s\n", "policy", "host pages", "GPU pages", "hit host",
	       "hit GPU", "miss", "I/O ms/acc");
	for (int i = 0; i < run->n; i++) {
		const struct vc_sim_stats *st = vc_sim_stats(run->sim[i]);
		double a = st->accesses ? (double)st->accesses : 1;
		printf("%-8s %12llu %12llu %8.4f %9.4f %9.4f %12.4f\n", vc_sim_policy(run->sim[i]),
		       (unsigned long long)vc_sim_host_pages(run->sim[i]),
		       (unsigned long long)vc_sim_gpu_pages(run->sim[i]), st->hits[0] / a,
		       st->hits[1] / a, st->misses / a, vc_sim_io_cost_ms(st, lat_ms, move_ms));
	}
	fprintf(stderr, "sim: %.2f s for %d caches (%.1f M accesses/s each)\n", secs, run->n,
		secs > 0 ? (double)accesses / secs / 1e6 : 0);
	if (json) {
		FILE *f = fopen(json, "w");
		if (!f) {
			perror(json);
			goto out;
		}
		fprintf(f, "{\n  \"command\": \"sim\",\n  \"trace\": ");
		cli_json_str(f, path);
		fprintf(f, ",\n  \"page_size\": %u,\n  \"per_request\": %s,\n  \"accesses\": %llu,\n"
			   "  \"distinct_pages\": %llu,\n  \"backing_latency_ms\": %g,\n"
			   "  \"move_latency_ms\": %g,\n  \"seconds\": %.3f,\n  \"results\": [",
			to.page_size, to.per_request ? "true" : "false", (unsigned long long)accesses,
			(unsigned long long)unique, lat_ms, move_ms,
			(double)(vc_now_ns() - t0) / 1e9);
		for (int i = 0; i < run->n; i++) {
			const struct vc_sim_stats *st = vc_sim_stats(run->sim[i]);
			double a = st->accesses ? (double)st->accesses : 1;
			fprintf(f, "%s\n    {\"policy\": \"%s\", \"host_pages\": %llu, \"gpu_pages\": %llu, "
				   "\"accesses\": %llu, \"hit_ratio_host\": %.6f, \"hit_ratio_gpu\": %.6f, "
				   "\"miss_ratio\": %.6f, \"evictions_host\": %llu, \"evictions_gpu\": %llu, "
				   "\"moves\": %llu, \"io_ms_per_access\": %.6f}",
				i ? "," : "", vc_sim_policy(run->sim[i]),
				(unsigned long long)vc_sim_host_pages(run->sim[i]),
				(unsigned long long)vc_sim_gpu_pages(run->sim[i]),
				(unsigned long long)st->accesses, st->hits[0] / a, st->hits[1] / a,
				st->misses / a, (unsigned long long)st->evictions[0],
				(unsigned long long)st->evictions[1],
				(unsigned long long)(st->moves_h2d + st->moves_d2h),
				vc_sim_io_cost_ms(st, lat_ms, move_ms));
		}
		fprintf(f, "\n  ]\n}\n");
		if (fclose(f) != 0) {
			perror(json);
			goto out;
		}
	}
	rc = 0;
out:
	for (int i = 0; i < run->n; i++)
		vc_sim_destroy(run->sim[i]);
	free(run);
	return rc;
bad:
	fprintf(stderr, "vramcache sim: bad value '%s' for --%s\n", optarg, lo[li].name);
	return 2;
}
