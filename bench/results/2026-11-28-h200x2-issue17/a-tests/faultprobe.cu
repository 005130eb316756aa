// Does a trap on GPU 1 leave GPU 0 working in the same process?
// faultprobe nopeer|peer|vmm
#include <cstdio>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>
__global__ void trap_k() { __trap(); }
__global__ void inc_k(int *p) { p[threadIdx.x] += 1; }
#define P(x) do { cudaError_t e = (x); printf("  %-48s %s\n", #x, cudaGetErrorString(e)); } while (0)
int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "nopeer";
	printf("mode %s\n", mode);
	int *a = nullptr, *b = nullptr;
	cudaSetDevice(0); P(cudaMalloc(&a, 4096));
	cudaSetDevice(1); P(cudaMalloc(&b, 4096));
	if (!strcmp(mode, "peer") || !strcmp(mode, "vmm")) {
		cudaSetDevice(0); P(cudaDeviceEnablePeerAccess(1, 0));
		cudaSetDevice(1); P(cudaDeviceEnablePeerAccess(0, 0));
	}
	CUdeviceptr v = 0;
	if (!strcmp(mode, "vmm")) {
		cuInit(0);
		CUmemAllocationProp pr; memset(&pr, 0, sizeof pr);
		pr.type = CU_MEM_ALLOCATION_TYPE_PINNED; pr.location.type = CU_MEM_LOCATION_TYPE_DEVICE; pr.location.id = 1;
		size_t g = 0; cuMemGetAllocationGranularity(&g, &pr, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
		CUmemGenericAllocationHandle h; printf("  create %d\n", cuMemCreate(&h, g, &pr, 0));
		printf("  reserve %d\n", cuMemAddressReserve(&v, g, g, 0, 0));
		printf("  map %d\n", cuMemMap(v, g, 0, h, 0));
		CUmemAccessDesc ad[2]; memset(ad, 0, sizeof ad);
		for (int i = 0; i < 2; i++) { ad[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE; ad[i].location.id = i; ad[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE; }
		printf("  access %d\n", cuMemSetAccess(v, g, ad, 2));
		cudaSetDevice(0); inc_k<<<1, 32>>>((int *)v); P(cudaDeviceSynchronize());
	}
	if (!strcmp(mode, "peer")) { cudaSetDevice(0); inc_k<<<1, 32>>>(b); P(cudaDeviceSynchronize()); }
	printf("trap on GPU 1\n");
	cudaSetDevice(1); trap_k<<<1, 1>>>(); P(cudaDeviceSynchronize()); P(cudaGetLastError());
	printf("GPU 0 after it\n");
	cudaSetDevice(0);
	int *c = nullptr; P(cudaMalloc(&c, 4096));
	inc_k<<<1, 32>>>(a); P(cudaDeviceSynchronize());
	int h[32]; P(cudaMemcpy(h, a, sizeof h, cudaMemcpyDeviceToHost));
	P(cudaGetLastError());
	printf("GPU 1 after it\n");
	cudaSetDevice(1); P(cudaMalloc(&c, 4096));
	return 0;
}
