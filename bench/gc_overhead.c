/* GC overhead: a write-heavy engine run with the GPU log's cleaner on
 * (both policies) and off (space comes back by tail eviction alone), side
 * by side, as BAG measured it ("Managing GPU as Buffer Cache in Operating
 * Systems", TPDS 2014: 2.1% overhead).
 *
 * Workload: Zipf-skewed page accesses, half of them rewrites, write-back,
 * over a working set twice the two tiers, from several threads, so GPU
 * hits keep orphaning slots and the log fragments. By default no backing
 * latency is modelled: the engine's own speed is what GC could slow down.
 * --backing-latency US adds a device's read latency to every backing
 * access, where what the cleaner keeps in the GPU tier saves I/O.
 *
 * Reported per variant (median of --reps runs, variants interleaved):
 * throughput, hit ratios, GC steps, pages moved, GC time, what the engine
 * did besides (write-backs of dirty pages, segments evicted, PCIe bytes
 * moved, and the callers' time waiting for device moves and for the
 * backing store, per access: where a gap that is not GC time comes
 * from), and
 *   overhead    1 - throughput(on) / throughput(off)
 *   gc share    GC time / (wall time x threads): the share of the callers'
 *               time spent stalled in GC pauses (a pause holds the engine
 *               lock, so every caller waits it out)
 * Goal (issue 3): overhead <= 3%.
 *
 * Usage: gc_overhead [--device auto|cuda|emu] [--quick] [--threads N]
 *                    [--reps N] [--json FILE] [--dir DIR] [--backing-latency US]
 */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "bench.h"
#include "tools/workload.h"

#define NV 3
static const struct {
	const char *name;
	int policy;
} variants[NV] = {
	{ "off", VC_GC_OFF },
	{ "cost-benefit", VC_GC_COST_BENEFIT },
	{ "oldest", VC_GC_OLDEST },
};

struct res {
	double thr[16]; /* accesses per second, per rep */
	struct vc_wl_result r;
};

static int run_one(const char *path, int device, int policy, uint64_t host, uint64_t gpu,
		   uint64_t ws, uint64_t accesses, int threads, uint64_t seed, uint64_t lat_ns,
		   struct vc_wl_result *out, char *desc, size_t desclen)
{
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.host_bytes = host * 4096;
	cfg.gpu_bytes = gpu * 4096;
	cfg.device = device;
	cfg.write_mode = VC_WRITE_BACK;
	cfg.gc_policy = policy;
	cfg.backing_latency_ns = lat_ns;
	vc_cache *c;
	int r = vc_open(&cfg, &c);
	if (r < 0) {
		fprintf(stderr, "gc_overhead: %s: %s\n", vc_strerror(r), vc_last_error());
		return r;
	}
	snprintf(desc, desclen, "%s", vc_device_desc(c));
	struct vc_wl_params p = { .working_set = ws, .accesses = accesses, .write_ratio = 0.5,
				  .zipf = 0.9, .seed = seed, .threads = threads };
	r = vc_wl_run(c, &p, out);
	if (r == 0 && out->bad_pages) {
		fprintf(stderr, "gc_overhead: %llu pages read back wrong\n",
			(unsigned long long)out->bad_pages);
		r = -EIO;
	}
	if (r < 0)
		fprintf(stderr, "gc_overhead: %s: %s\n", vc_strerror(r), vc_last_error());
	int e = vc_close(c);
	return r < 0 ? r : e;
}

int main(int argc, char **argv)
{
	int device = VC_DEVICE_AUTO, threads = 4, reps = 3;
	double lat_us = 0;
	bool quick = false;
	const char *json = NULL, *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--quick") == 0) {
			quick = true;
			continue;
		}
		if (!v) {
			fprintf(stderr, "gc_overhead: %s needs a value\n", a);
			return 2;
		}
		if (strcmp(a, "--device") == 0 && (device = vc_device_parse(v)) >= 0)
			;
		else if (strcmp(a, "--threads") == 0)
			threads = atoi(v);
		else if (strcmp(a, "--reps") == 0)
			reps = atoi(v);
		else if (strcmp(a, "--json") == 0)
			json = v;
		else if (strcmp(a, "--dir") == 0)
			dir = v;
		else if (strcmp(a, "--backing-latency") == 0)
			lat_us = atof(v);
		else {
			fprintf(stderr, "usage: gc_overhead [--device auto|cuda|emu] [--quick] "
					"[--threads N] [--reps N] [--json FILE] [--dir DIR] "
					"[--backing-latency US]\n");
			return 2;
		}
		i++;
	}
	if (threads < 1 || reps < 1 || reps > 16 || !(lat_us >= 0 && lat_us <= 1e6)) {
		fprintf(stderr, "gc_overhead: bad --threads, --reps or --backing-latency\n");
		return 2;
	}
	/* Host tier 16K pages (64 MiB), GPU tier 64K pages (256 MiB, 64
	 * segments of 4 MiB), working set twice both. */
	uint64_t host = 16384, gpu = 65536, accesses = 1000000;
	if (quick) {
		host = 1024;
		gpu = 4096;
		accesses = 200000;
	}
	uint64_t ws = 2 * (host + gpu);
	char path[512];
	snprintf(path, sizeof path, "%s/gc-overhead-%d.img", dir, (int)getpid());
	if (vc_wl_make_file(path, ws, 4096) < 0) {
		fprintf(stderr, "gc_overhead: %s\n", vc_last_error());
		return 1;
	}
	struct res res[NV];
	memset(res, 0, sizeof res);
	char desc[160] = "";
	int r = 0;
	for (int k = 0; k < reps && r == 0; k++)
		for (int j = 0; j < NV && r == 0; j++) {
			int v = (j + k) % NV; /* rotate the order: no variant always first */
			struct vc_wl_result wr;
			r = run_one(path, device, variants[v].policy, host, gpu, ws, accesses, threads,
				    42, (uint64_t)(lat_us * 1e3), &wr, desc, sizeof desc);
			if (r == 0) {
				res[v].thr[k] = (double)accesses / wr.seconds;
				if (k == 0 || wr.seconds < res[v].r.seconds)
					res[v].r = wr;
			}
		}
	unlink(path);
	if (r < 0)
		return 1;

	double thr[NV], share[NV], over[NV];
	for (int v = 0; v < NV; v++) {
		double t[16];
		memcpy(t, res[v].thr, sizeof t);
		thr[v] = bench_quantile(t, reps, 0.5);
		const struct vc_wl_result *w = &res[v].r;
		share[v] = (double)w->st.gc_ns / (w->seconds * 1e9 * threads);
	}
	for (int v = 0; v < NV; v++)
		over[v] = 1 - thr[v] / thr[0];
	printf("GC overhead on %s: write-back, 50%% rewrites, Zipf 0.9, host %llu + GPU %llu pages, "
	       "working set %llu, %llu accesses on %d threads, backing latency %g us, median of %d\n",
	       desc, (unsigned long long)host, (unsigned long long)gpu, (unsigned long long)ws,
	       (unsigned long long)accesses, threads, lat_us, reps);
	printf("%-13s %12s %8s %8s %8s %9s %10s %9s %9s %9s %9s %8s %9s %8s %8s\n", "gc",
	       "accesses/s", "hit host", "hit gpu", "miss", "gc steps", "pages mvd", "gc ms",
	       "gc share", "overhead", "wb pages", "segs ev", "PCIe MiB", "move us", "io us");
	for (int v = 0; v < NV; v++) {
		const struct vc_wl_result *w = &res[v].r;
		const double per_acc = 1e-3 / (double)accesses; /* ns in all -> us per access */
		printf("%-13s %12.0f %7.2f%% %7.2f%% %7.2f%% %9llu %10llu %9.1f %8.2f%% %8.2f%% %9llu "
		       "%8llu %9.0f %8.2f %8.2f\n",
		       variants[v].name, thr[v], 100 * w->hit_ratio[0], 100 * w->hit_ratio[1],
		       100 * w->miss_ratio, (unsigned long long)w->st.gc_runs,
		       (unsigned long long)w->st.gc_pages_moved, w->st.gc_ns / 1e6, 100 * share[v],
		       100 * over[v], (unsigned long long)w->st.writebacks,
		       (unsigned long long)w->st.gpu_segments_evicted,
		       (double)(w->st.h2d_bytes + w->st.d2h_bytes) / 1048576.0,
		       (double)w->st.batch_wait_ns * per_acc, (double)w->st.backing_wait_ns * per_acc);
	}
	printf("goal: overhead <= 3%% (BAG: 2.1%%)\n");

	if (json) {
		FILE *f = bench_json_open(json, "gc_overhead", desc);
		fprintf(f, ",\n  \"host_pages\": %llu,\n  \"gpu_pages\": %llu,\n  \"working_set\": %llu,\n"
			   "  \"accesses\": %llu,\n  \"threads\": %d,\n  \"reps\": %d,\n"
			   "  \"backing_latency_us\": %g,\n  \"variants\": [",
			(unsigned long long)host, (unsigned long long)gpu, (unsigned long long)ws,
			(unsigned long long)accesses, threads, reps, lat_us);
		for (int v = 0; v < NV; v++) {
			const struct vc_wl_result *w = &res[v].r;
			fprintf(f, "%s\n    {\"gc\": \"%s\", \"accesses_per_s\": ", v ? "," : "",
				variants[v].name);
			bench_json_num(f, thr[v]);
			bench_json_field(f, "", "hit_host", w->hit_ratio[0]);
			bench_json_field(f, "", "hit_gpu", w->hit_ratio[1]);
			bench_json_field(f, "", "miss", w->miss_ratio);
			bench_json_field(f, "", "gc_runs", (double)w->st.gc_runs);
			bench_json_field(f, "", "gc_pages_moved", (double)w->st.gc_pages_moved);
			bench_json_field(f, "", "gc_ms", w->st.gc_ns / 1e6);
			bench_json_field(f, "", "gc_share", share[v]);
			bench_json_field(f, "", "overhead", over[v]);
			bench_json_field(f, "", "writebacks", (double)w->st.writebacks);
			bench_json_field(f, "", "segments_evicted", (double)w->st.gpu_segments_evicted);
			bench_json_field(f, "", "pcie_bytes", (double)(w->st.h2d_bytes + w->st.d2h_bytes));
			bench_json_field(f, "", "move_wait_us_per_access",
					 (double)w->st.batch_wait_ns / 1e3 / (double)accesses);
			bench_json_field(f, "", "backing_wait_us_per_access",
					 (double)w->st.backing_wait_ns / 1e3 / (double)accesses);
			fputc('}', f);
		}
		fputs("\n  ]", f);
		bench_json_close(f);
	}
	return 0;
}
