/* tests/shim_gpu.sh's runtime-API client: cudaMalloc of SIZE bytes on
 * device 0, one line of result, the memory held HOLD seconds, then freed.
 * Built twice: against libcudart.so (gpu_alloc_runtime: the shim's
 * runtime hooks see cudaMalloc, and its driver hooks the cuMemAlloc under
 * it) and cudart_static (gpu_alloc_runtime_static: the runtime is inside
 * the program, so only the driver hooks, reached through dlsym and
 * cuGetProcAddress, can see the allocation).
 *
 * Prints "OK <bytes>" or "OOM <error name>: <text>". Exit status: 0 OK,
 * 2 out of memory, 1 anything else (no device, bad usage).
 * Usage: gpu_alloc_runtime SIZE[K|M|G] [HOLD_SECONDS] */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <unistd.h>

#include "size.h"

int main(int argc, char **argv)
{
	uint64_t size;
	if (argc < 2 || argc > 3 || gpu_parse_size(argv[1], &size) < 0) {
		fprintf(stderr, "usage: %s SIZE[K|M|G] [HOLD_SECONDS]\n", argv[0]);
		return 1;
	}
	int hold = argc == 3 ? atoi(argv[2]) : 0;
	/* The context first, so that a failure below is the allocation's. */
	cudaError_t e = cudaSetDevice(0);
	if (e == cudaSuccess)
		e = cudaFree(0);
	if (e != cudaSuccess) {
		printf("ERROR %s: %s\n", cudaGetErrorName(e), cudaGetErrorString(e));
		return 1;
	}
	size_t free_b = 0, total_b = 0;
	cudaMemGetInfo(&free_b, &total_b);
	fprintf(stderr, "%s: %zu MiB free of %zu MiB; asking %llu MiB\n", argv[0], free_b >> 20, total_b >> 20,
		(unsigned long long)(size >> 20));
	void *p = NULL;
	e = cudaMalloc(&p, size);
	if (e == cudaErrorMemoryAllocation) {
		printf("OOM %s: %s\n", cudaGetErrorName(e), cudaGetErrorString(e));
		return 2;
	}
	if (e != cudaSuccess) {
		printf("ERROR %s: %s\n", cudaGetErrorName(e), cudaGetErrorString(e));
		return 1;
	}
	/* Touch it: the memory is real, and no error is left behind. */
	e = cudaMemset(p, 0xa5, size);
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	if (e == cudaSuccess)
		e = cudaGetLastError();
	if (e != cudaSuccess) {
		printf("ERROR after the allocation: %s: %s\n", cudaGetErrorName(e), cudaGetErrorString(e));
		return 1;
	}
	printf("OK %llu\n", (unsigned long long)size);
	fflush(stdout);
	if (hold > 0)
		sleep((unsigned)hold);
	cudaFree(p);
	return 0;
}
