/* aes_latency: what AES-256-XTS adds to the latency of one 4 KiB page, the
 * parts measured one by one on the GPU (SM cycles, clock64) and on the
 * CPU. The lone encrypted GPU-tier hit waits for a tweak AES and then the
 * page's own 256 blocks in the queue server (kernels/server.cu); this
 * says how long each takes at the least, and what spreading a page over
 * several SMs (thread-block clusters) would pay to synchronize them.
 *
 *   setup       vc_xts_setup<decrypt layout> by a 512-thread block (the
 *               queue server's size): tables and key schedules; paid once
 *               per launch (per batch on the launched-batch path, once per
 *               server run on the queue path)
 *   tweak       thread 0 encrypts one tweak, then a block barrier (the
 *               server's first step for a lone piece)
 *   page        256 threads of one block decrypt one block each of a
 *               4 KiB page (the tweak times alpha^j, the AES), then a
 *               barrier: the lone page's AES on one SM
 *   block       one thread, one AES block, as a dependent chain: the
 *               least any split of a page can take after its tweak
 *   cluster N   one barrier across a cluster of N blocks (N SMs),
 *               barrier.cluster arrive + wait; and with a 1 KiB write of
 *               every block into block 0's shared memory (DSMEM) before it
 *   cpu         vc_emu_xts_pages over one 4 KiB page on one core (a key
 *               schedule and OpenSSL's AES-NI XTS): decrypting on the host
 *               after a plain copy instead
 * GPU figures are means over --reps repetitions after one warm-up; the SM
 * clock is measured against %globaltimer while a block spins. CPU: median
 * of 20,000 calls.
 *
 * Usage: aes_latency [--reps N] [--json FILE]
 */
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "aes_latency"
extern "C" {
#include "bench.h"
#include "base/clock.h"
#include "base/rand.h"
#include "base/secret.h"
#include "device/xts.h"
}
#include "device/cuda/kernels/xts.cuh"

namespace cg = cooperative_groups;

namespace {

constexpr int THREADS = 512;

/* out: [0] setup, [1] tweak, [2] page, [3] block (cycles), [4] sink. */
__global__ void __launch_bounds__(THREADS) lat_kernel(const vc_xts_kparam key, const uint4 *page,
						      long long *out, int reps)
{
	extern __shared__ uint4 dyn[];
	vc_xts_smem &xs = *reinterpret_cast<vc_xts_smem *>(dyn);
	__shared__ uint4 tw;
	__shared__ uint4 res[256];
	const uint32_t tid = threadIdx.x;
	const uint4 x = tid < 256 ? page[tid] : make_uint4(0, 0, 0, 0);
	__syncthreads();
	const long long t0 = clock64();
	vc_xts_setup<false>(xs, key);
	__syncthreads();
	const long long t1 = clock64();
	const vc_xts_lane L = vc_xts_lane_make(xs);
	const vc_xts_keys_smem kd(xs.rkd);
	long long s_tw = 0, s_pg = 0;
	for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
		__syncthreads();
		const long long a = clock64();
		if (tid == 0)
			tw = vc_xts_tweak_encrypt<false>(L, xs, (uint64_t)r + 7);
		__syncthreads();
		const long long b = clock64();
		if (tid < 256) {
			const uint4 tt = vc_xts_to_u4(vc_xts_mul_alpha_any(vc_xts_from_u4(tw), tid));
			res[tid] = vc_xts_block_in<false, false>(L, kd, x, tt);
		}
		__syncthreads();
		const long long c = clock64();
		if (r >= 0) {
			s_tw += b - a;
			s_pg += c - b;
		}
	}
	__syncthreads();
	long long one = 0;
	if (tid == 0) {
		uint4 y = x;
		y = vc_xts_block_in<false, false>(L, kd, y, x); /* warm-up */
		const long long a = clock64();
		for (int r = 0; r < reps; r++)
			y = vc_xts_block_in<false, false>(L, kd, y, x);
		one = (clock64() - a) / reps;
		res[0].x ^= y.x;
	}
	__syncthreads();
	if (tid == 0) {
		out[0] = t1 - t0;
		out[1] = s_tw / reps;
		out[2] = s_pg / reps;
		out[3] = one;
		long long sink = 0;
		for (int i = 0; i < 256; i++)
			sink ^= res[i].x ^ res[i].w;
		out[4] = sink;
		tw = make_uint4(0, 0, 0, 0);
	}
	for (uint32_t i = tid; i < 256; i += blockDim.x)
		res[i] = make_uint4(0, 0, 0, 0);
	vc_xts_wipe(xs);
}

/* out: [0] barrier, [1] 1 KiB DSMEM write into block 0 + barrier (cycles). */
__global__ void __launch_bounds__(THREADS) cluster_kernel(long long *out, int reps)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 /* clusters: sm_90 and up */
	__shared__ uint4 buf[64 * 8];
	cg::cluster_group cl = cg::this_cluster();
	const uint32_t rank = cl.block_rank();
	uint4 *b0 = cl.map_shared_rank(buf, 0);
	cl.sync();
	const long long a = clock64();
	for (int r = 0; r < reps; r++)
		cl.sync();
	const long long b = clock64();
	for (int r = 0; r < reps; r++) {
		if (threadIdx.x < 64)
			b0[(rank % 8) * 64 + threadIdx.x] = make_uint4(r, rank, threadIdx.x, 0);
		cl.sync();
	}
	const long long c = clock64();
	if (threadIdx.x == 0 && rank == 0) {
		out[0] = (b - a) / reps;
		out[1] = (c - b) / reps;
	}
#else
	(void)out;
	(void)reps;
#endif
}

/* Cycles per ns of an SM: one block spins 20 ms of %globaltimer. */
__global__ void clock_kernel(double *out)
{
	uint64_t g0, g1;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
	const long long c0 = clock64();
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
	while (g1 - g0 < 20000000ull);
	const long long c1 = clock64();
	*out = (double)(c1 - c0) / (double)(g1 - g0);
}

int cluster_run(int n, int reps, long long *host)
{
	long long *d;
	BENCH_CUOK(cudaMalloc(&d, 2 * sizeof(long long)));
	cudaLaunchConfig_t cfg = {};
	cfg.gridDim = dim3(n);
	cfg.blockDim = dim3(THREADS);
	cudaLaunchAttribute at[1];
	at[0].id = cudaLaunchAttributeClusterDimension;
	at[0].val.clusterDim.x = n;
	at[0].val.clusterDim.y = 1;
	at[0].val.clusterDim.z = 1;
	cfg.attrs = at;
	cfg.numAttrs = 1;
	cudaError_t e = cudaLaunchKernelEx(&cfg, cluster_kernel, d, reps);
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	if (e == cudaSuccess)
		e = cudaMemcpy(host, d, 2 * sizeof(long long), cudaMemcpyDeviceToHost);
	cudaFree(d);
	if (e != cudaSuccess)
		fprintf(stderr, BENCH_NAME ": cluster of %d: %s\n", n, cudaGetErrorString(e));
	return e == cudaSuccess ? 0 : -1;
}

} // namespace

int main(int argc, char **argv)
{
	int reps = 1000;
	const char *json = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
			json = argv[++i];
		else {
			fprintf(stderr, "usage: aes_latency [--reps N] [--json FILE]\n");
			return 2;
		}
	}
	if (reps < 1)
		reps = 1;
	struct cudaDeviceProp prop;
	if (!bench_cuda_open(&prop))
		return 77;

	struct vc_xts_key key;
	uint64_t seed = 0x5eed;
	for (size_t i = 0; i < sizeof key.bytes; i++)
		key.bytes[i] = (unsigned char)(vc_rand64(&seed) >> 13);
	unsigned char page[4096];
	for (size_t i = 0; i < sizeof page; i++)
		page[i] = (unsigned char)(vc_rand64(&seed) >> 7);

	double *dclk, cyc_per_ns;
	BENCH_CUOK(cudaMalloc(&dclk, sizeof *dclk));
	clock_kernel<<<1, 32>>>(dclk);
	BENCH_CUOK(cudaMemcpy(&cyc_per_ns, dclk, sizeof cyc_per_ns, cudaMemcpyDeviceToHost));
	cudaFree(dclk);

	uint4 *dpage;
	long long *dout, out[5];
	BENCH_CUOK(cudaMalloc(&dpage, sizeof page));
	BENCH_CUOK(cudaMalloc(&dout, sizeof out));
	BENCH_CUOK(cudaMemcpy(dpage, page, sizeof page, cudaMemcpyHostToDevice));
	const int smem = (int)sizeof(vc_xts_smem);
	BENCH_CUOK(cudaFuncSetAttribute(lat_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
	vc_xts_kparam kp;
	memcpy(&kp, key.bytes, sizeof kp);
	lat_kernel<<<1, THREADS, smem>>>(kp, dpage, dout, reps);
	BENCH_CUOK(cudaGetLastError());
	BENCH_CUOK(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost));
	memset(&kp, 0, sizeof kp);

	const int cn[3] = { 2, 4, 8 };
	long long cl[3][2];
	bool cl_ok[3];
	for (int i = 0; i < 3; i++) /* clusters need sm_90 */
		cl_ok[i] = prop.major >= 9 && cluster_run(cn[i], reps, cl[i]) == 0;

	/* CPU: one page a call, as a reader thread would decrypt it. */
	enum { CPU_CALLS = 20000 };
	double *cpu = (double *)malloc(CPU_CALLS * sizeof *cpu);
	const uint64_t tweak = 12345;
	bool cpu_ok = true;
	for (int i = 0; i < CPU_CALLS && cpu_ok; i++) {
		const uint64_t a = vc_now_ns();
		cpu_ok = vc_emu_xts_pages(&key, page, &tweak, 1, 4096, 0) == 0;
		cpu[i] = (double)(vc_now_ns() - a);
	}
	const double cpu_ns = cpu_ok ? bench_quantile(cpu, CPU_CALLS, 0.5) : NAN;
	free(cpu);
	vc_secret_zero(&key, sizeof key);

	printf("aes_latency: %s (sm_%d%d, %d SMs), SM clock %.3f GHz measured, means of %d\n",
	       prop.name, prop.major, prop.minor, prop.multiProcessorCount, cyc_per_ns, reps);
	printf("  %-52s %10s %9s\n", "step", "cycles", "us");
	const char *names[4] = { "setup: tables and key schedules (512 threads)",
				 "tweak AES (one thread) + barrier",
				 "lone 4 KiB page: 256 threads, one block each + barrier",
				 "one AES block, one thread (dependent chain)" };
	for (int i = 0; i < 4; i++)
		printf("  %-52s %10lld %9.3f\n", names[i], out[i], (double)out[i] / cyc_per_ns / 1000);
	for (int i = 0; i < 3; i++) {
		if (!cl_ok[i])
			continue;
		char n1[64], n2[64];
		snprintf(n1, sizeof n1, "cluster barrier, %d SMs", cn[i]);
		snprintf(n2, sizeof n2, "1 KiB DSMEM write + cluster barrier, %d SMs", cn[i]);
		printf("  %-52s %10lld %9.3f\n", n1, cl[i][0], (double)cl[i][0] / cyc_per_ns / 1000);
		printf("  %-52s %10lld %9.3f\n", n2, cl[i][1], (double)cl[i][1] / cyc_per_ns / 1000);
	}
	printf("  %-52s %10s %9.3f\n", "CPU: one 4 KiB page, vc_emu_xts_pages, one core", "-",
	       cpu_ns / 1000);
	if (json) {
		FILE *f = bench_json_open(json, "aes_latency", prop.name);
		bench_json_field(f, "  ", "sm_ghz", cyc_per_ns);
		bench_json_field(f, "  ", "setup_us", (double)out[0] / cyc_per_ns / 1000);
		bench_json_field(f, "  ", "tweak_us", (double)out[1] / cyc_per_ns / 1000);
		bench_json_field(f, "  ", "page_one_sm_us", (double)out[2] / cyc_per_ns / 1000);
		bench_json_field(f, "  ", "one_block_us", (double)out[3] / cyc_per_ns / 1000);
		for (int i = 0; i < 3; i++) {
			char k1[48], k2[48];
			snprintf(k1, sizeof k1, "cluster%d_barrier_us", cn[i]);
			snprintf(k2, sizeof k2, "cluster%d_dsmem_barrier_us", cn[i]);
			bench_json_field(f, "  ", k1, cl_ok[i] ? (double)cl[i][0] / cyc_per_ns / 1000 : NAN);
			bench_json_field(f, "  ", k2, cl_ok[i] ? (double)cl[i][1] / cyc_per_ns / 1000 : NAN);
		}
		bench_json_field(f, "  ", "cpu_page_us", cpu_ns / 1000);
		bench_json_close(f);
	}
	cudaFree(dpage);
	cudaFree(dout);
	return 0;
}
