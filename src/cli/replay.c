/* `vramcache replay`: a block trace through the real engine, with verified
 * reads, throughput and per-request latency percentiles. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "policy/policy.h"
#include "tools/replay.h"
#include "vramcache.h"

static void replay_usage(FILE *f)
{
	fputs("Usage: vramcache replay [OPTIONS] TRACE\n"
	      "\n"
	      "Drives the engine with a block trace: every page of every request is a\n"
	      "vc_read or vc_write, in trace order. Written data is synthesized so every\n"
	      "read is checked. The backing store is a sparse file of the trace's distinct\n"
	      "pages, numbered in order of first touch.\n"
	      "\n"
	      "  --device auto|cuda|emu   device backend (default auto)\n"
	      "  --host S                 host tier: pages, bytes (64M) or % of the distinct\n"
	      "                           pages (default 10%)\n"
	      "  --gpu S                  GPU tier, likewise (default 40%; 0 for none)\n"
	      "  --policy P               replacement policy (default s3fifo+lru)\n"
	      "  --page-size N            engine and trace page size (default 4096)\n"
	      "  --write-back             write-back instead of write-through\n"
	      "  --limit N                replay the first N requests only\n"
	      "  --file PATH              the sparse backing file (default in $TMPDIR)\n"
	      "  --format F, --per-request: as for sim\n"
	      "  --json FILE              also write the results as JSON\n",
	      f);
}

int cmd_replay(int argc, char **argv)
{
	struct vc_replay_params p = { 0 };
	vc_config_init(&p.cfg);
	const char *host = "10%", *gpu = "40%", *json = NULL, *file = NULL;
	enum { O_DEV = 256, O_HOST, O_GPU, O_POL, O_PS, O_WB, O_LIMIT, O_FILE, O_FMT, O_PERREQ,
	       O_JSON };
	static const struct option lo[] = {
		{ "device", required_argument, 0, O_DEV },
		{ "host", required_argument, 0, O_HOST },
		{ "gpu", required_argument, 0, O_GPU },
		{ "policy", required_argument, 0, O_POL },
		{ "page-size", required_argument, 0, O_PS },
		{ "write-back", no_argument, 0, O_WB },
		{ "limit", required_argument, 0, O_LIMIT },
		{ "file", required_argument, 0, O_FILE },
		{ "format", required_argument, 0, O_FMT },
		{ "per-request", no_argument, 0, O_PERREQ },
		{ "json", required_argument, 0, O_JSON },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int ch;
	uint64_t u;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case O_DEV:
			if ((p.cfg.device = vc_device_parse(optarg)) < 0)
				goto bad;
			break;
		case O_HOST:
			host = optarg;
			break;
		case O_GPU:
			gpu = optarg;
			break;
		case O_POL:
			if (!vc_policy_find(optarg))
				goto bad;
			p.cfg.policy = optarg;
			break;
		case O_PS:
			if (cli_u64(optarg, &u) || u < 512 || u > (2u << 20) || (u & (u - 1)))
				goto bad;
			p.cfg.page_size = (uint32_t)u;
			break;
		case O_WB:
			p.cfg.write_mode = VC_WRITE_BACK;
			break;
		case O_LIMIT:
			if (cli_u64(optarg, &p.limit) || !p.limit)
				goto bad;
			break;
		case O_FILE:
			file = optarg;
			break;
		case O_FMT:
			p.format = optarg;
			break;
		case O_PERREQ:
			p.per_request = true;
			break;
		case O_JSON:
			json = optarg;
			break;
		case 'h':
			replay_usage(stdout);
			return 0;
		default:
			replay_usage(stderr);
			return 2;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "vramcache replay: give one trace file (try --help)\n");
		return 2;
	}
	p.trace = argv[optind];
	uint32_t ps = p.cfg.page_size;
	uint64_t hp, gp;
	double hf, gf;
	bool gzero = strcmp(gpu, "0") == 0;
	if (cli_size(host, ps, &hp, &hf) < 0 || (!gzero && cli_size(gpu, ps, &gp, &gf) < 0)) {
		fprintf(stderr, "vramcache replay: bad --host or --gpu size\n");
		return 2;
	}
	if (gzero)
		gp = 0, gf = 0;
	if (hf > 0 || gf > 0) {
		struct cli_trace_opts to = { .format = p.format, .page_size = ps,
					     .per_request = p.per_request, .progress = true };
		uint64_t distinct, acc;
		if (cli_working_set(p.trace, &to, &distinct, &acc) < 0)
			return 1;
		if (hf > 0)
			hp = (uint64_t)(hf * (double)distinct);
		if (gf > 0)
			gp = (uint64_t)(gf * (double)distinct);
	}
	if (hp < 16)
		hp = 16; /* the engine's smallest host tier */
	p.cfg.host_bytes = hp * ps;
	p.cfg.gpu_bytes = gp * ps;
	char path[512];
	if (file) {
		snprintf(path, sizeof path, "%s", file);
	} else {
		const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
		snprintf(path, sizeof path, "%s/vramcache-replay-%d.img", dir, (int)getpid());
	}
	p.file = path;
	struct vc_replay_result res;
	int r = vc_replay_run(&p, &res);
	if (r < 0) {
		fprintf(stderr, "vramcache replay: %s: %s\n", vc_strerror(r), vc_last_error());
		return 1;
	}
	double acc = (double)(res.st.hits[0] + res.st.hits[1] + res.st.misses);
	if (acc <= 0)
		acc = 1;
	printf("replay %s on %s: %llu requests, %llu pages (%llu reads, %llu writes), %llu "
	       "distinct pages\n",
	       p.trace, res.device, (unsigned long long)res.requests, (unsigned long long)res.pages,
	       (unsigned long long)res.reads, (unsigned long long)res.writes,
	       (unsigned long long)res.distinct);
	printf("host tier %llu pages, GPU tier %llu pages, policy %s, %s\n",
	       (unsigned long long)hp, (unsigned long long)gp, p.cfg.policy ? p.cfg.policy : VC_POLICY_DEFAULT,
	       p.cfg.write_mode == VC_WRITE_BACK ? "write-back" : "write-through");
	printf("%.3f s: %.0f requests/s, %.1f MiB/s\n", res.seconds,
	       res.seconds > 0 ? (double)res.requests / res.seconds : 0,
	       res.seconds > 0 ? (double)res.pages * ps / 1048576.0 / res.seconds : 0);
	printf("latency per request (us): p50 %.2f, p99 %.2f, p99.9 %.2f, max %.2f\n", res.lat_us[0],
	       res.lat_us[1], res.lat_us[2], res.lat_us[3]);
	printf("hit host %.4f, hit GPU %.4f, miss %.4f; verified reads: %llu wrong pages\n",
	       res.st.hits[0] / acc, res.st.hits[1] / acc, res.st.misses / acc,
	       (unsigned long long)res.bad_pages);
	if (json) {
		FILE *f = fopen(json, "w");
		if (!f) {
			perror(json);
			return 1;
		}
		fprintf(f, "{\n  \"command\": \"replay\",\n  \"trace\": ");
		cli_json_str(f, p.trace);
		fprintf(f, ",\n  \"device\": \"%s\",\n  \"policy\": \"%s\",\n  \"page_size\": %u,\n"
			   "  \"host_pages\": %llu,\n  \"gpu_pages\": %llu,\n  \"requests\": %llu,\n"
			   "  \"pages\": %llu,\n  \"seconds\": %.4f,\n  \"lat_us_p50\": %.3f,\n"
			   "  \"lat_us_p99\": %.3f,\n  \"lat_us_p999\": %.3f,\n  \"lat_us_max\": %.3f,\n"
			   "  \"hit_ratio_host\": %.6f,\n  \"hit_ratio_gpu\": %.6f,\n"
			   "  \"miss_ratio\": %.6f,\n  \"bad_pages\": %llu\n}\n",
			res.device, p.cfg.policy ? p.cfg.policy : VC_POLICY_DEFAULT, ps, (unsigned long long)hp,
			(unsigned long long)gp, (unsigned long long)res.requests,
			(unsigned long long)res.pages, res.seconds, res.lat_us[0], res.lat_us[1],
			res.lat_us[2], res.lat_us[3], res.st.hits[0] / acc, res.st.hits[1] / acc,
			res.st.misses / acc, (unsigned long long)res.bad_pages);
		fclose(f);
	}
	return res.bad_pages ? 1 : 0;
bad:
	fprintf(stderr, "vramcache replay: bad value '%s' for --%s\n", optarg, lo[ch - O_DEV].name);
	return 2;
}
