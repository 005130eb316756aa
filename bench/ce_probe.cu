/* Copy engines against the GPU tier's device queue for reads of many
 * scattered pages: does a batched cudaMemcpy (CUDA 12.8+'s
 * cudaMemcpyBatchAsync) move a 128 KiB read's 32 scattered 4 KiB GPU pages
 * into pinned host memory faster than the queue server's zero-copy
 * stores? A standalone probe (the engine is not involved): T host threads,
 * each with its own stream and pinned buffer, each repeating one read of N
 * random 4 KiB pages out of a 1 GiB device buffer and waiting for it.
 *
 *   batch   one cudaMemcpyBatchAsync of the N pages, then a stream sync
 *   loop    N cudaMemcpyAsync, then a stream sync
 *   contig  one cudaMemcpyAsync of N contiguous pages (the copy engines'
 *           bulk rate: the limit)
 *
 * Measured on the H100 (2026-11-24, docs/BENCHMARKS.md): 32 pages from 16
 * threads, batch 10.2 GB/s, loop 1.8, contig 27.4; the engine's device
 * queue moves the same reads at 36-37 GB/s (bench/scaling). So runs of
 * scattered pages stay on the queue.
 *
 * Built with the CUDA backend (target ce_probe).
 * Usage: ce_probe [--seconds S] [--json FILE] (a line per mode, N and T)
 */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PS 4096u
#define DEV_BYTES (1ull << 30)
#define MAXN 64

#define CK(x)                                                                        \
	do {                                                                         \
		cudaError_t e_ = (x);                                                \
		if (e_ != cudaSuccess) {                                             \
			fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,    \
				cudaGetErrorString(e_));                             \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

static char *dev;
static double seconds = 1.0;
static int stop;

enum mode { M_BATCH, M_LOOP, M_CONTIG };
static const char *mode_name[] = { "batch", "loop", "contig" };

struct arg {
	enum mode m;
	unsigned n;
	uint64_t ops;
	double lat_sum;
	uint64_t seed;
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *worker(void *p)
{
	struct arg *a = (struct arg *)p;
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	char *host;
	CK(cudaHostAlloc((void **)&host, MAXN * PS, cudaHostAllocDefault));
	void *dsts[MAXN];
	const void *srcs[MAXN];
	size_t sizes[MAXN];
	struct cudaMemcpyAttributes attr;
	memset(&attr, 0, sizeof attr);
	attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
	attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
	size_t idx = 0;
	uint64_t x = a->seed | 1;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		for (unsigned i = 0; i < a->n; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			dsts[i] = host + (size_t)i * PS;
			srcs[i] = dev + (x % (DEV_BYTES / PS)) * PS;
			sizes[i] = PS;
		}
		double t0 = now();
		switch (a->m) {
		case M_BATCH:
			CK(cudaMemcpyBatchAsync(dsts, srcs, sizes, a->n, &attr, &idx, 1, s));
			break;
		case M_LOOP:
			for (unsigned i = 0; i < a->n; i++)
				CK(cudaMemcpyAsync(dsts[i], srcs[i], PS, cudaMemcpyDeviceToHost, s));
			break;
		case M_CONTIG:
			CK(cudaMemcpyAsync(host, srcs[0] < dev + DEV_BYTES - MAXN * PS ? srcs[0] : dev,
					   (size_t)a->n * PS, cudaMemcpyDeviceToHost, s));
			break;
		}
		CK(cudaStreamSynchronize(s));
		a->lat_sum += now() - t0;
		a->ops++;
	}
	CK(cudaFreeHost(host));
	CK(cudaStreamDestroy(s));
	return NULL;
}

int main(int argc, char **argv)
{
	const char *json = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc && atof(argv[i + 1]) > 0)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--json") && i + 1 < argc)
			json = argv[++i];
		else {
			fprintf(stderr, "usage: ce_probe [--seconds S] [--json FILE]\n");
			return 2;
		}
	}
	int ndev = 0;
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		printf("ce_probe: skipped: no CUDA device\n");
		return 0;
	}
	FILE *jf = json ? fopen(json, "w") : NULL;
	if (json && !jf) {
		perror(json);
		return 1;
	}
	struct cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, 0));
	if (jf)
		fprintf(jf, "{\"bench\": \"ce_probe\", \"device\": \"%s\", \"page_size\": %u, \"points\": [", prop.name, PS);
	int first = 1;
	CK(cudaSetDeviceFlags(cudaDeviceScheduleSpin));
	CK(cudaMalloc((void **)&dev, DEV_BYTES));
	CK(cudaMemset(dev, 1, DEV_BYTES));
	static const unsigned ns[] = { 1, 8, 32 };
	static const unsigned ts[] = { 1, 4, 8, 16 };
	printf("%-7s %4s %3s %12s %10s %10s\n", "mode", "N", "T", "reads/s", "GB/s", "mean_us");
	for (int m = 0; m < 3; m++)
		for (unsigned ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
			for (unsigned ti = 0; ti < sizeof ts / sizeof ts[0]; ti++) {
				unsigned n = ns[ni], T = ts[ti];
				if (m == M_LOOP && n == 1)
					continue;
				struct arg a[16];
				pthread_t th[16];
				__atomic_store_n(&stop, 0, __ATOMIC_RELAXED);
				for (unsigned t = 0; t < T; t++) {
					a[t] = (struct arg){ (enum mode)m, n, 0, 0, 0x9e3779b97f4a7c15ull * (t + 1) };
					pthread_create(&th[t], NULL, worker, &a[t]);
				}
				double t0 = now();
				struct timespec d = { (time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9) };
				nanosleep(&d, NULL);
				__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
				uint64_t ops = 0;
				double lat = 0;
				for (unsigned t = 0; t < T; t++) {
					pthread_join(th[t], NULL);
					ops += a[t].ops;
					lat += a[t].lat_sum;
				}
				double el = now() - t0;
				printf("%-7s %4u %3u %12.0f %10.2f %10.1f\n", mode_name[m], n, T, ops / el,
				       ops * (double)n * PS / el / 1e9, ops ? lat / ops * 1e6 : 0);
				fflush(stdout);
				if (jf)
					fprintf(jf, "%s\n  {\"mode\": \"%s\", \"pages\": %u, \"threads\": %u, \"reads_per_s\": %.0f, \"gbps\": %.3f, \"mean_us\": %.2f}",
						first ? "" : ",", mode_name[m], n, T, ops / el, ops * (double)n * PS / el / 1e9,
						ops ? lat / ops * 1e6 : 0);
				first = 0;
			}
	if (jf) {
		fprintf(jf, "\n]}\n");
		fclose(jf);
	}
	CK(cudaFree(dev));
	return 0;
}
