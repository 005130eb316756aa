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

#include "client.h"

int main(int argc, char **argv)
{
	struct gpu_client c = gpu_client_start(argc, argv);
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
	CUresult r = mem_alloc(&d, c.size);
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
	gpu_client_hold(c);
	mem_free(d);
	return 0;
}
