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

#include "client.h"

int main(int argc, char **argv)
{
	struct gpu_client c = gpu_client_start(argc, argv);
	void *p = NULL;
	cudaError_t e = cudaMalloc(&p, c.size);
	if (e == cudaErrorMemoryAllocation) {
		printf("OOM %s: %s\n", cudaGetErrorName(e), cudaGetErrorString(e));
		return 2;
	}
	if (e != cudaSuccess) {
		printf("ERROR %s: %s\n", cudaGetErrorName(e), cudaGetErrorString(e));
		return 1;
	}
	/* Touch it: the memory is real, and no error is left behind. */
	e = cudaMemset(p, 0xa5, c.size);
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	if (e == cudaSuccess)
		e = cudaGetLastError();
	if (e != cudaSuccess) {
		printf("ERROR after the allocation: %s: %s\n", cudaGetErrorName(e), cudaGetErrorString(e));
		return 1;
	}
	gpu_client_hold(c);
	cudaFree(p);
	return 0;
}
