/* tests/shim_gpu.sh's driver-API client: cuMemAlloc of SIZE bytes on
 * device 0, reached only as CUDA 12+ libraries reach the driver: the entry
 * point comes from cudaGetDriverEntryPointByVersion (cuGetProcAddress
 * underneath), never from linking libcuda. Linked with cudart_static, so
 * only the shim's dlsym and cuGetProcAddress hooks can see it.
 *
 * Prints "OK <bytes>" or "OOM <error name>: <text>". Exit status: 0 OK,
 * 2 out of memory, 1 anything else.
 * Usage: gpu_alloc_driver SIZE[K|M|G] [HOLD_SECONDS] */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>
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
	cudaError_t e = cudaSetDevice(0);
	if (e == cudaSuccess)
		e = cudaFree(0); /* the primary context, current on this thread */
	if (e != cudaSuccess) {
		printf("ERROR %s: %s\n", cudaGetErrorName(e), cudaGetErrorString(e));
		return 1;
	}
	PFN_cuMemAlloc_v3020 mem_alloc = NULL;
	PFN_cuMemFree_v3020 mem_free = NULL;
	PFN_cuGetErrorName_v6000 err_name = NULL;
	enum cudaDriverEntryPointQueryResult q1, q2, q3;
	if (cudaGetDriverEntryPointByVersion("cuMemAlloc", (void **)&mem_alloc, 12000, cudaEnableDefault, &q1) ||
	    cudaGetDriverEntryPointByVersion("cuMemFree", (void **)&mem_free, 12000, cudaEnableDefault, &q2) ||
	    cudaGetDriverEntryPointByVersion("cuGetErrorName", (void **)&err_name, 12000, cudaEnableDefault, &q3) ||
	    !mem_alloc || !mem_free || !err_name) {
		printf("ERROR cannot get the driver's entry points\n");
		return 1;
	}
	CUdeviceptr d;
	CUresult r = mem_alloc(&d, size);
	const char *name = "?";
	err_name(r, &name);
	if (r == CUDA_ERROR_OUT_OF_MEMORY) {
		printf("OOM %s\n", name);
		return 2;
	}
	if (r != CUDA_SUCCESS) {
		printf("ERROR %s\n", name);
		return 1;
	}
	printf("OK %llu\n", (unsigned long long)size);
	fflush(stdout);
	if (hold > 0)
		sleep((unsigned)hold);
	mem_free(d);
	return 0;
}
