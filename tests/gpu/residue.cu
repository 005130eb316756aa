/* Does the driver clear GPU memory between processes? (BAG's Property 1;
 * docs/ENCRYPTION.md.) Two runs of this program, one after the other:
 *
 *   gpu_residue write FRACTION   fills FRACTION of device 0's free memory
 *                                with marker blocks (16 bytes: the magic,
 *                                then the block's number), counts them
 *                                back (so the scan can find them), and
 *                                exits without clearing
 *   gpu_residue scan FRACTION    allocates FRACTION of the free memory and
 *                                counts marker blocks in it, as found
 *
 * Both print one line ("wrote N markers in B bytes, found N back" /
 * "found N markers in B bytes"). Exit status: 0, 77 without a usable
 * device, 1 on a CUDA error, 3 when a scan finds markers (the driver let
 * a process see another's freed memory). tests/CMakeLists.txt runs the
 * pair as gpu_residue.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC 0x5544495345524356ull /* "VCRESIDU" */

__global__ void fill(uint4 *p, uint64_t n)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		p[i] = make_uint4((uint32_t)MAGIC, (uint32_t)(MAGIC >> 32), (uint32_t)i,
				  (uint32_t)(i >> 32));
}

__global__ void count(const uint4 *p, uint64_t n, unsigned long long *found)
{
	unsigned long long k = 0;
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		const uint4 v = p[i];
		k += v.x == (uint32_t)MAGIC && v.y == (uint32_t)(MAGIC >> 32);
	}
	if (k)
		atomicAdd(found, k);
}

static int fail(const char *what, cudaError_t e)
{
	printf("ERROR %s: %s\n", what, cudaGetErrorString(e));
	return 1;
}

int main(int argc, char **argv)
{
	double frac = argc == 3 ? atof(argv[2]) : 0;
	if (argc != 3 || (strcmp(argv[1], "write") && strcmp(argv[1], "scan")) || !(frac > 0 && frac <= 1)) {
		fprintf(stderr, "usage: gpu_residue write|scan FRACTION (0 < FRACTION <= 1)\n");
		return 1;
	}
	int ndev = 0;
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		printf("SKIP: no usable CUDA device\n");
		return 77;
	}
	size_t free_b, total_b;
	cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
	if (e != cudaSuccess)
		return fail("cudaMemGetInfo", e);
	uint64_t bytes = (uint64_t)((double)free_b * frac) & ~(uint64_t)((2u << 20) - 1);
	uint4 *p;
	unsigned long long *found, n_found = 0;
	if ((e = cudaMalloc(&p, bytes)) != cudaSuccess || (e = cudaMalloc(&found, sizeof *found)) != cudaSuccess ||
	    (e = cudaMemset(found, 0, sizeof *found)) != cudaSuccess)
		return fail("allocation", e);
	const uint64_t n = bytes / 16;
	const bool write = strcmp(argv[1], "write") == 0;
	if (write)
		fill<<<1024, 256>>>(p, n);
	count<<<1024, 256>>>(p, n, found);
	if ((e = cudaMemcpy(&n_found, found, sizeof n_found, cudaMemcpyDeviceToHost)) != cudaSuccess)
		return fail(write ? "writing markers" : "scanning", e);
	if (write) {
		printf("wrote %llu markers in %llu bytes, found %llu back\n", (unsigned long long)n,
		       (unsigned long long)bytes, n_found);
		return n_found == n ? 0 : 1; /* the exit leaves them to the driver */
	}
	printf("found %llu markers in %llu bytes\n", n_found, (unsigned long long)bytes);
	if (n_found)
		printf("the driver let this process see another's freed memory: BAG's Property 1 holds "
		       "here, and docs/ENCRYPTION.md's threat model must say so\n");
	return n_found ? 3 : 0;
}
