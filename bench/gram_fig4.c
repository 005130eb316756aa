/* GRAM Fig. 4(a) and 4(c) (Zhong & He, ICCS 2011), through the real engine.
 *
 * Uniform random page reads from a cold cache, 4 KiB pages, host tier 64K
 * pages. (a): working set 640K pages, GPU tier 0..576K pages. (c): host and
 * GPU tiers 64K pages each, working set 128K..1280K pages. For each point:
 * hit ratios and the I/O cost per access = backing page I/Os x latency
 * (5 ms disk by default) + measured time in host<->GPU moves, host-only
 * against host+GPU.
 *
 * The paper's figures survive only as its text: (a) "up to 83% smaller I/O
 * cost per page access" with the working set fitting the two tiers at a
 * 596K-page GPU buffer; (c) "the performance improvement is up to 90%" at
 * a 128K-page working set. Both measured 4M accesses from cold, so cold
 * misses bound the gain: with W pages and A accesses at least W/A of the
 * accesses miss (640K/4M = 16%, hence 83%).
 *
 * Usage: gram_fig4 [--device auto|cuda|emu] [--accesses N] [--threads N]
 *                  [--scale F] [--latency 5ms] [--json FILE] [--dir DIR]
 * --scale shrinks every size (pages and accesses) for a quick run.
 */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "bench.h"
#include "tools/workload.h"

#define K 1024ull

struct point {
	char fig;
	uint64_t host, gpu, ws;
	struct vc_wl_result r;
};

static int run_point(const char *path, int device, int threads, uint64_t accesses,
		     double lat_ms, struct point *pt, char *desc, size_t desclen)
{
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.host_bytes = pt->host * 4096;
	cfg.gpu_bytes = pt->gpu * 4096;
	cfg.device = device;
	cfg.flags = VC_OPEN_READONLY;
	vc_cache *c;
	int r = vc_open(&cfg, &c);
	if (r < 0) {
		fprintf(stderr, "gram_fig4: %s: %s\n", vc_strerror(r), vc_last_error());
		return r;
	}
	snprintf(desc, desclen, "%s", vc_device_desc(c));
	struct vc_wl_params p = { .working_set = pt->ws, .accesses = accesses, .seed = 42,
				  .threads = threads, .latency_ms = lat_ms };
	r = vc_wl_run(c, &p, &pt->r);
	if (r < 0)
		fprintf(stderr, "gram_fig4: %s: %s\n", vc_strerror(r), vc_last_error());
	if (pt->r.bad_pages) {
		fprintf(stderr, "gram_fig4: %llu pages read back wrong\n",
			(unsigned long long)pt->r.bad_pages);
		r = -EIO;
	}
	vc_close(c);
	return r;
}

int main(int argc, char **argv)
{
	int device = VC_DEVICE_AUTO, threads = 1;
	uint64_t accesses = 4000000;
	double scale = 1, lat_ms = 5;
	const char *json = NULL, *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			fprintf(stderr, "gram_fig4: %s needs a value\n", a);
			return 2;
		}
		if (strcmp(a, "--device") == 0 && (device = vc_device_parse(v)) >= 0)
			;
		else if (strcmp(a, "--accesses") == 0)
			accesses = strtoull(v, NULL, 10);
		else if (strcmp(a, "--threads") == 0)
			threads = atoi(v);
		else if (strcmp(a, "--scale") == 0)
			scale = atof(v);
		else if (strcmp(a, "--latency") == 0)
			lat_ms = vc_wl_parse_ms(v);
		else if (strcmp(a, "--json") == 0)
			json = v;
		else if (strcmp(a, "--dir") == 0)
			dir = v;
		else {
			fprintf(stderr, "usage: gram_fig4 [--device auto|cuda|emu] [--accesses N] "
					"[--threads N] [--scale F] [--latency T] [--json FILE] [--dir DIR]\n");
			return 2;
		}
		i++;
	}
	if (scale <= 0 || scale > 1 || threads < 1 || lat_ms < 0 || !accesses) {
		fprintf(stderr, "gram_fig4: bad --scale, --threads, --latency or --accesses\n");
		return 2;
	}
#define S(x) ((uint64_t)((x) * scale + 0.5) ? (uint64_t)((x) * scale + 0.5) : 1)
	accesses = S(accesses);
	struct point pts[32];
	int n = 0;
	uint64_t a_gpu[] = { 0, 64 * K, 128 * K, 256 * K, 384 * K, 512 * K, 576 * K };
	for (size_t i = 0; i < sizeof a_gpu / sizeof *a_gpu; i++)
		pts[n++] = (struct point){ .fig = 'a', .host = S(64 * K),
					   .gpu = a_gpu[i] ? S(a_gpu[i]) : 0, .ws = S(640 * K) };
	uint64_t c_ws[] = { 128 * K, 256 * K, 384 * K, 640 * K, 1280 * K };
	for (size_t i = 0; i < sizeof c_ws / sizeof *c_ws; i++)
		for (int g = 0; g < 2; g++)
			pts[n++] = (struct point){ .fig = 'c', .host = S(64 * K),
						   .gpu = g ? S(64 * K) : 0, .ws = S(c_ws[i]) };

	char path[512];
	snprintf(path, sizeof path, "%s/gram-fig4-%d.img", dir, (int)getpid());
	uint64_t maxws = S(1280 * K);
	fprintf(stderr, "gram_fig4: writing %llu-page backing file %s\n", (unsigned long long)maxws,
		path);
	if (vc_wl_make_file(path, maxws, 4096) < 0) {
		fprintf(stderr, "gram_fig4: %s\n", vc_last_error());
		return 1;
	}
	char desc[160] = "";
	int r = 0;
	for (int i = 0; i < n && r == 0; i++) {
		r = run_point(path, device, threads, accesses, lat_ms, &pts[i], desc, sizeof desc);
		fprintf(stderr, "  fig 4(%c) ws %llu gpu %llu: %.1f s\n", pts[i].fig,
			(unsigned long long)pts[i].ws, (unsigned long long)pts[i].gpu, pts[i].r.seconds);
	}
	unlink(path);
	if (r < 0)
		return 1;

	printf("GRAM Fig. 4 on %s: uniform random reads from cold, %llu accesses, %d thread(s), "
	       "backing latency %.3g ms\n",
	       desc, (unsigned long long)accesses, threads, lat_ms);
	printf("%-4s %8s %8s %8s | %8s %8s %8s | %10s %10s | %9s %9s\n", "fig", "host", "gpu", "ws",
	       "hit host", "hit gpu", "miss", "move ms", "cost ms", "vs host", "C/W");
	for (int i = 0; i < n; i++) {
		const struct point *p = &pts[i];
		/* The host-only point of the same figure and working set. */
		const struct point *base = NULL;
		for (int j = 0; j < n; j++)
			if (pts[j].fig == p->fig && pts[j].ws == p->ws && pts[j].gpu == 0)
				base = &pts[j];
		double gain = base && base->r.io_cost_ms > 0 ? 1 - p->r.io_cost_ms / base->r.io_cost_ms : 0;
		/* Uniform random reads in steady state hit with probability
		 * C/W (cache pages over working-set pages); the run starts
		 * cold, so it measures a little less. */
		double cap = (double)(p->host + p->gpu), ws = (double)p->ws;
		double model_hit = cap >= ws ? 1 : cap / ws;
		printf("4(%c) %8llu %8llu %8llu | %7.2f%% %7.2f%% %7.2f%% | %10.5f %10.4f | %8.1f%% %8.2f%%\n",
		       p->fig, (unsigned long long)p->host, (unsigned long long)p->gpu,
		       (unsigned long long)p->ws, 100 * p->r.hit_ratio[0], 100 * p->r.hit_ratio[1],
		       100 * p->r.miss_ratio, p->r.move_cost_ms, p->r.io_cost_ms, 100 * gain,
		       100 * model_hit);
	}
	printf("paper (text only): 4(a) up to 83%% lower cost, all fits at a 596K-page GPU tier; "
	       "4(c) up to 90%% lower at a 128K-page working set\n");

	if (json) {
		FILE *f = bench_json_open(json, "gram_fig4", desc);
		fprintf(f, ",\n  \"accesses\": %llu,\n  \"threads\": %d,\n  \"latency_ms\": ",
			(unsigned long long)accesses, threads);
		bench_json_num(f, lat_ms);
		fputs(",\n  \"paper\": {\"fig4a_best_gain\": 0.83, \"fig4c_best_gain\": 0.90},\n"
		      "  \"points\": [",
		      f);
		for (int i = 0; i < n; i++) {
			const struct point *p = &pts[i];
			fprintf(f, "%s\n    {\"fig\": \"4%c\", \"host_pages\": %llu, \"gpu_pages\": %llu, "
				   "\"working_set\": %llu, \"hit_host\": ",
				i ? "," : "", p->fig, (unsigned long long)p->host,
				(unsigned long long)p->gpu, (unsigned long long)p->ws);
			bench_json_num(f, p->r.hit_ratio[0]);
			fputs(", \"hit_gpu\": ", f);
			bench_json_num(f, p->r.hit_ratio[1]);
			fputs(", \"miss\": ", f);
			bench_json_num(f, p->r.miss_ratio);
			fputs(", \"move_ms_per_access\": ", f);
			bench_json_num(f, p->r.move_cost_ms);
			fputs(", \"io_cost_ms_per_access\": ", f);
			bench_json_num(f, p->r.io_cost_ms);
			fprintf(f, ", \"batches\": %llu, \"batch_pages\": %llu, \"seconds\": ",
				(unsigned long long)p->r.st.batches,
				(unsigned long long)p->r.st.batch_pages);
			bench_json_num(f, p->r.seconds);
			fputc('}', f);
		}
		fputs("\n  ]", f);
		bench_json_close(f);
	}
	return 0;
}
