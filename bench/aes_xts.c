/* AES-256-XTS throughput of the kernel alone (issue 13): pages already in
 * GPU memory, encrypted and decrypted in place by vc_cuda_xts_pages, with
 * the round keys in registers (the default) and in shared memory (the
 * variant); against OpenSSL's AES-256-XTS (AES-NI) on every CPU core, one
 * thread per core, the same page sizes, in the same run. Goal: >= 300 GB/s
 * on an H100 (published GPU AES: ~110 GB/s on an RTX 2070 Super; OpenSSL
 * AES-XTS: ~6.8 GB/s per core on the H100 machine).
 *
 * GPU: --gib GiB of pages (default 4), one launch per pass over all of
 * them, timed by events; each figure is the median of --reps passes
 * (default 5) after one warm-up pass. Encryptions and decryptions
 * alternate, so the pages end as they began: the bench checks that (a
 * wrong kernel would not round-trip) and says so. GB/s are 10^9 bytes of
 * pages per second (each page byte is read and written once).
 * CPU: --threads threads (default: the online CPUs), each pinned to a CPU,
 * each on its own 64 MiB in calls of 1 MiB (one key schedule per call:
 * under 1% of it), for --cpu-seconds (default 1) per figure.
 *
 * Usage: aes_xts [--gib N] [--reps R] [--threads T] [--cpu-seconds S]
 *                [--quick] [--json FILE]
 * Exits 77 without a usable GPU. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

#define BENCH_NAME "aes_xts"
#include "bench.h"
#include "cores.h"
#include "base/rand.h"
#include "device/cuda/kernels/xts_launch.h"
#include "device/xts.h"

#define GOAL_GBS 300.0
#define CPU_BUF (64ull << 20)
#define CPU_CALL (1u << 20)

enum { N_PS = 2, N_DIR = 2 };
static const uint32_t page_sizes[N_PS] = { 4096, 512 };
static const char *const dir_name[N_DIR] = { "encrypt", "decrypt" };

struct result {
	double gpu_reg, gpu_smem, cpu; /* GB/s */
};

/* --- CPU: OpenSSL on every core ---------------------------------------- */

struct cpu_arg {
	const struct vc_xts_key *key;
	uint32_t ps;
	int enc;
	unsigned char **bufs; /* a CPU_BUF buffer per thread */
	uint64_t *tweaks;
};

static uint64_t cpu_loop(void *p, int t, uint64_t until, int *err)
{
	const struct cpu_arg *a = p;
	const uint32_t per_call = CPU_CALL / a->ps;
	uint64_t off = 0, bytes = 0;
	do {
		if ((*err = vc_emu_xts_pages(a->key, a->bufs[t] + off, a->tweaks, per_call, a->ps,
					     a->enc)) < 0)
			break;
		bytes += CPU_CALL;
		off = (off + CPU_CALL) % CPU_BUF;
	} while (vc_now_ns() < until);
	return bytes;
}

/* Aggregate GB/s of nthreads OpenSSL threads, or NAN without OpenSSL. */
static double cpu_gbs(const struct vc_xts_key *key, uint32_t ps, int enc, int nthreads, double seconds,
		      unsigned char **bufs, uint64_t *tweaks)
{
	struct cpu_arg a = { .key = key, .ps = ps, .enc = enc, .bufs = bufs, .tweaks = tweaks };
	int err;
	const double gbs = bench_cores_gbs(nthreads, seconds, cpu_loop, &a, &err);
	if (err == -VC_ENOTBUILT)
		return NAN;
	if (err < 0)
		bench_die("vc_emu_xts_pages", err);
	return gbs;
}

/* --- GPU: the kernel over pages in device memory ------------------------ */

/* Median GB/s of reps passes in each direction; passes alternate
 * encrypt, decrypt, so the pages come back as they were. */
static void gpu_gbs(const struct vc_xts_key *key, void *pages, const uint64_t *tweaks, uint64_t bytes,
		    uint32_t ps, int smem, int reps, double out[N_DIR])
{
	const uint32_t n = (uint32_t)(bytes / ps);
	cudaEvent_t a, b;
	BENCH_CUOK(cudaEventCreate(&a));
	BENCH_CUOK(cudaEventCreate(&b));
	double *t[N_DIR];
	for (int d = 0; d < N_DIR; d++)
		t[d] = malloc(sizeof(double) * (size_t)reps);
	for (int i = -1; i < reps; i++) { /* i = -1: warm-up */
		for (int d = 0; d < N_DIR; d++) {
			BENCH_CUOK(cudaEventRecord(a, 0));
			int e = vc_cuda_xts_pages_variant(key, pages, tweaks, n, ps, d == 0, smem, NULL);
			if (e != 0) {
				fprintf(stderr, BENCH_NAME ": vc_cuda_xts_pages: %s (%s)\n",
					cudaGetErrorString((cudaError_t)e), vc_last_error());
				exit(1);
			}
			BENCH_CUOK(cudaEventRecord(b, 0));
			BENCH_CUOK(cudaEventSynchronize(b));
			float ms = 0;
			BENCH_CUOK(cudaEventElapsedTime(&ms, a, b));
			if (i >= 0)
				t[d][i] = (double)bytes / (ms / 1e3) / 1e9;
		}
	}
	for (int d = 0; d < N_DIR; d++) {
		out[d] = bench_quantile(t[d], reps, 0.5);
		free(t[d]);
	}
	cudaEventDestroy(a);
	cudaEventDestroy(b);
}

static void usage(void)
{
	fprintf(stderr, "usage: aes_xts [--gib N] [--reps R] [--threads T] [--cpu-seconds S] [--quick] "
			"[--json FILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct bench_cores_opts o = bench_cores_defaults();
	for (int i = 1; i < argc; i++) {
		if (bench_cores_opt(&o, argc, argv, &i))
			continue;
		if (strcmp(argv[i], "--quick") == 0)
			o.gib = 0.5, o.reps = 3, o.cpu_seconds = 0.3;
		else
			usage();
	}
	if (!bench_cores_valid(&o))
		usage();
	const double gib = o.gib, cpu_seconds = o.cpu_seconds;
	const int reps = o.reps, nthreads = o.nthreads;
	const char *json = o.json;

	struct cudaDeviceProp prop;
	if (!bench_cuda_open(&prop))
		return 77;
	char gpu[320], cpu[128];
	snprintf(gpu, sizeof gpu, "%s (sm_%d%d, %d SMs)", prop.name, prop.major, prop.minor,
		 prop.multiProcessorCount);
	bench_cpu_model(cpu, sizeof cpu);

	/* A random key; pages of random bytes; tweaks 0, 1, 2, ... */
	struct vc_xts_key key;
	uint64_t seed = vc_now_ns() | 1;
	for (int i = 0; i < VC_XTS_KEY_BYTES; i += 8) {
		uint64_t v = vc_rand64(&seed);
		memcpy(key.bytes + i, &v, 8);
	}
	const uint64_t bytes = (uint64_t)(gib * (double)(1ull << 30)) / 4096 * 4096;
	const uint64_t max_pages = bytes / 512;
	uint64_t *tweaks_h = malloc(max_pages * 8);
	for (uint64_t i = 0; i < max_pages; i++)
		tweaks_h[i] = i;
	void *pages, *tweaks;
	BENCH_CUOK(cudaMalloc(&pages, bytes));
	BENCH_CUOK(cudaMalloc(&tweaks, max_pages * 8));
	BENCH_CUOK(cudaMemcpy(tweaks, tweaks_h, max_pages * 8, cudaMemcpyHostToDevice));
	const size_t probe = 1u << 20;
	unsigned char *before = malloc(probe), *after = malloc(probe);
	for (size_t i = 0; i < probe; i += 8) {
		uint64_t v = vc_rand64(&seed);
		memcpy(before + i, &v, 8);
	}
	BENCH_CUOK(cudaMemset(pages, 0x5a, bytes));
	BENCH_CUOK(cudaMemcpy((char *)pages + bytes - probe, before, probe, cudaMemcpyHostToDevice));

	unsigned char **bufs = malloc(sizeof *bufs * (size_t)nthreads);
	for (int t = 0; t < nthreads; t++) {
		bufs[t] = malloc(CPU_BUF);
		memset(bufs[t], t, CPU_BUF);
	}

	printf("aes_xts: %s, %.2f GiB of pages in GPU memory, median of %d passes\n", gpu,
	       (double)bytes / (1ull << 30), reps);
	printf("baseline: OpenSSL AES-256-XTS on %d threads of %s\n\n", nthreads, cpu);
	printf("%6s %-8s %14s %14s %14s %8s\n", "page", "", "GPU keys:reg", "GPU keys:smem", "CPU (OpenSSL)",
	       "GPU/CPU");
	struct result res[N_PS][N_DIR];
	double worst4k = 0;
	for (int p = 0; p < N_PS; p++) {
		double reg[N_DIR], sm[N_DIR];
		gpu_gbs(&key, pages, tweaks, bytes, page_sizes[p], 0, reps, reg);
		gpu_gbs(&key, pages, tweaks, bytes, page_sizes[p], 1, reps, sm);
		for (int d = 0; d < N_DIR; d++) {
			struct result *r = &res[p][d];
			r->gpu_reg = reg[d];
			r->gpu_smem = sm[d];
			r->cpu = cpu_gbs(&key, page_sizes[p], d == 0, nthreads, cpu_seconds, bufs, tweaks_h);
			const double g = r->gpu_reg > r->gpu_smem ? r->gpu_reg : r->gpu_smem;
			if (page_sizes[p] == 4096 && (worst4k == 0 || g < worst4k))
				worst4k = g; /* the best variant of the slower direction */
			printf("%6u %-8s %9.1f GB/s %9.1f GB/s %9.2f GB/s %7.1fx\n", page_sizes[p], dir_name[d],
			       r->gpu_reg, r->gpu_smem, r->cpu, g / r->cpu);
		}
	}
	BENCH_CUOK(cudaMemcpy(after, (char *)pages + bytes - probe, probe, cudaMemcpyDeviceToHost));
	const bool roundtrip = memcmp(before, after, probe) == 0;
	printf("\npages after every encrypt/decrypt pair: %s\n",
	       roundtrip ? "as before (round trip ok)" : "CHANGED: the kernel is wrong");
	printf("goal: >= %.0f GB/s at 4 KiB pages, both directions: %.1f GB/s, %s\n", GOAL_GBS, worst4k,
	       worst4k >= GOAL_GBS ? "met" : "not met");

	if (json) {
		FILE *f = bench_json_open(json, BENCH_NAME, gpu);
		fprintf(f, ",\n  \"cpu\": \"%s\",\n  \"cpu_threads\": %d", cpu, nthreads);
		bench_json_field(f, "  ", "gib", (double)bytes / (1ull << 30));
		bench_json_field(f, "  ", "reps", reps);
		bench_json_field(f, "  ", "goal_gbs", GOAL_GBS);
		bench_json_field(f, "  ", "worst_4k_gbs", worst4k);
		fprintf(f, ",\n  \"roundtrip_ok\": %s,\n  \"results\": [", roundtrip ? "true" : "false");
		for (int p = 0; p < N_PS; p++)
			for (int d = 0; d < N_DIR; d++) {
				const struct result *r = &res[p][d];
				fprintf(f, "%s\n    {\"page_size\": %u, \"op\": \"%s\"", p + d ? "," : "",
					page_sizes[p], dir_name[d]);
				bench_json_field(f, "     ", "gpu_keys_reg_gbs", r->gpu_reg);
				bench_json_field(f, "     ", "gpu_keys_smem_gbs", r->gpu_smem);
				bench_json_field(f, "     ", "cpu_openssl_gbs", r->cpu);
				fputs("}", f);
			}
		fputs("\n  ]", f);
		bench_json_close(f);
	}
	for (int t = 0; t < nthreads; t++)
		free(bufs[t]);
	free(bufs);
	free(before);
	free(after);
	free(tweaks_h);
	cudaFree(pages);
	cudaFree(tweaks);
	return roundtrip ? 0 : 1;
}
