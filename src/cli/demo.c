/* `vramcache demo` and `vramcache info`: synthetic workloads through the
 * engine on a generated sample file (GRAM's I/O-cost experiment). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "tools/workload.h"
#include "vramcache.h"

struct demo_opts {
	int device;
	double latency_ms;
	uint64_t host_pages, gpu_pages, working_set, accesses;
	double write_ratio, zipf;
	int threads;
	int write_back;
	const char *file;
	int keep;
};

static int run_one(const struct demo_opts *o, const char *path, uint64_t gpu_pages,
		   struct vc_wl_result *res, char *devname, size_t devlen)
{
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.host_bytes = o->host_pages * 4096;
	cfg.gpu_bytes = gpu_pages * 4096;
	cfg.device = o->device;
	cfg.write_mode = o->write_back ? VC_WRITE_BACK : VC_WRITE_THROUGH;
	vc_cache *c;
	int r = vc_open(&cfg, &c);
	if (r < 0) {
		fprintf(stderr, "vramcache: cannot open the cache: %s: %s\n", vc_strerror(r),
			vc_last_error());
		return r;
	}
	snprintf(devname, devlen, "%s", vc_device_name(c));
	/* Warm up with one pass of the same workload, then measure. */
	struct vc_wl_params p = { .working_set = o->working_set, .accesses = o->accesses,
				  .write_ratio = o->write_ratio, .zipf = o->zipf, .seed = 1,
				  .threads = o->threads, .latency_ms = o->latency_ms };
	r = vc_wl_run(c, &p, res);
	p.seed = 2;
	if (r == 0)
		r = vc_wl_run(c, &p, res);
	if (r < 0)
		fprintf(stderr, "vramcache: workload failed: %s: %s\n", vc_strerror(r), vc_last_error());
	int rc = vc_close(c);
	return r < 0 ? r : rc;
}

int cmd_demo(int argc, char **argv)
{
	struct demo_opts o = { .device = VC_DEVICE_AUTO, .latency_ms = 5, .host_pages = 4096,
			       .gpu_pages = 16384, .accesses = 400000, .threads = 1 };
	enum { O_DEVICE = 256, O_LAT, O_HOST, O_GPU, O_WS, O_ACC, O_WR, O_ZIPF, O_THREADS, O_WB,
	       O_FILE, O_KEEP };
	static const struct option lo[] = {
		{ "device", required_argument, 0, O_DEVICE },
		{ "backing-latency", required_argument, 0, O_LAT },
		{ "host-pages", required_argument, 0, O_HOST },
		{ "gpu-pages", required_argument, 0, O_GPU },
		{ "working-set", required_argument, 0, O_WS },
		{ "accesses", required_argument, 0, O_ACC },
		{ "write-ratio", required_argument, 0, O_WR },
		{ "zipf", required_argument, 0, O_ZIPF },
		{ "threads", required_argument, 0, O_THREADS },
		{ "write-back", no_argument, 0, O_WB },
		{ "file", required_argument, 0, O_FILE },
		{ "keep", no_argument, 0, O_KEEP },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int ch;
	uint64_t u;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case O_DEVICE:
			if ((o.device = vc_device_parse(optarg)) < 0)
				goto bad;
			break;
		case O_LAT:
			if ((o.latency_ms = vc_wl_parse_ms(optarg)) < 0)
				goto bad;
			break;
		case O_HOST:
			if (cli_u64(optarg, &o.host_pages) || o.host_pages < 16)
				goto bad;
			break;
		case O_GPU:
			if (cli_u64(optarg, &o.gpu_pages))
				goto bad;
			break;
		case O_WS:
			if (cli_u64(optarg, &o.working_set) || !o.working_set)
				goto bad;
			break;
		case O_ACC:
			if (cli_u64(optarg, &o.accesses) || !o.accesses)
				goto bad;
			break;
		case O_WR:
			o.write_ratio = atof(optarg);
			if (o.write_ratio < 0 || o.write_ratio > 1)
				goto bad;
			break;
		case O_ZIPF:
			o.zipf = atof(optarg);
			if (o.zipf < 0)
				goto bad;
			break;
		case O_THREADS:
			if (cli_u64(optarg, &u) || u < 1 || u > 256)
				goto bad;
			o.threads = (int)u;
			break;
		case O_WB:
			o.write_back = 1;
			break;
		case O_FILE:
			o.file = optarg;
			break;
		case O_KEEP:
			o.keep = 1;
			break;
		case 'h':
			cli_usage(stdout);
			return 0;
		default:
			cli_usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "vramcache demo: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!o.working_set)
		o.working_set = 5 * (o.host_pages + o.gpu_pages);

	char path[512];
	if (o.file) {
		snprintf(path, sizeof path, "%s", o.file);
	} else {
		const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
		snprintf(path, sizeof path, "%s/vramcache-demo-%d.img", dir, (int)getpid());
	}
	printf("vramcache demo: sample file %s, %llu pages of 4 KiB (%.0f MiB)\n", path,
	       (unsigned long long)o.working_set, o.working_set * 4096.0 / 1048576);
	int r = vc_wl_make_file(path, o.working_set, 4096);
	if (r < 0) {
		fprintf(stderr, "vramcache: %s\n", vc_last_error());
		return 1;
	}
	printf("workload: %llu %s page accesses (%.0f%% writes), %d thread(s), after a warm-up pass;\n"
	       "host tier %llu pages, GPU tier %llu pages, working set %llu pages; "
	       "backing latency model %.3g ms per page I/O\n\n",
	       (unsigned long long)o.accesses, o.zipf > 0 ? "Zipf" : "uniform random",
	       o.write_ratio * 100, o.threads, (unsigned long long)o.host_pages,
	       (unsigned long long)o.gpu_pages, (unsigned long long)o.working_set, o.latency_ms);

	struct vc_wl_result res[2];
	char dev[2][16];
	const char *name[2] = { "host only", "host + GPU" };
	for (int i = 0; i < 2 && r == 0; i++)
		r = run_one(&o, path, i ? o.gpu_pages : 0, &res[i], dev[i], sizeof dev[i]);
	if (!o.keep)
		unlink(path);
	if (r < 0)
		return 1;

	printf("%-11s %-6s %9s %9s %9s %11s %11s %9s %12s %12s\n", "config", "device", "hit host",
	       "hit GPU", "miss", "evict host", "evict GPU", "batches", "move ms/acc",
	       "I/O ms/acc");
	for (int i = 0; i < 2; i++) {
		const struct vc_wl_result *x = &res[i];
		printf("%-11s %-6s %8.2f%% %8.2f%% %8.2f%% %11llu %11llu %9llu %12.5f %12.4f\n",
		       name[i], dev[i], 100 * x->hit_ratio[0], 100 * x->hit_ratio[1],
		       100 * x->miss_ratio, (unsigned long long)x->st.evictions[0],
		       (unsigned long long)x->st.evictions[1], (unsigned long long)x->st.batches,
		       x->move_cost_ms, x->io_cost_ms);
		if (x->bad_pages) {
			fprintf(stderr, "vramcache: %llu pages read back wrong\n",
				(unsigned long long)x->bad_pages);
			return 1;
		}
	}
	double gain = res[0].io_cost_ms > 0 ? 1 - res[1].io_cost_ms / res[0].io_cost_ms : 0;
	printf("\nThe GPU tier cuts the I/O cost per access by %.1f%% "
	       "(moved %.1f MiB host->GPU, %.1f MiB GPU->host).\n",
	       100 * gain, res[1].st.h2d_bytes / 1048576.0, res[1].st.d2h_bytes / 1048576.0);
	return 0;
bad:
	fprintf(stderr, "vramcache demo: bad value '%s' for --%s\n", optarg, lo[ch - O_DEVICE].name);
	return 2;
}

int cmd_info(void)
{
	char path[512];
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(path, sizeof path, "%s/vramcache-info-%d.img", dir, (int)getpid());
	int r = vc_wl_make_file(path, 64, 4096);
	if (r < 0) {
		fprintf(stderr, "vramcache: %s\n", vc_last_error());
		return 1;
	}
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.host_bytes = 1 << 20;
	cfg.gpu_bytes = 1 << 20;
	vc_cache *c;
	r = vc_open(&cfg, &c);
	unlink(path);
	if (r < 0) {
		fprintf(stderr, "vramcache: %s: %s\n", vc_strerror(r), vc_last_error());
		return 1;
	}
	printf("device backend: %s\n", vc_device_name(c));
	vc_close(c);
	return 0;
}

