/* GPUfs on a GPU: the model test of tests/gpufs_model.h with real warps
 * (256 of them), and a threadblock-level read checked against the file.
 * Exit 77 (skip) without a usable GPU. */
#include <cuda_runtime.h>

#include "gpufs_model.h"
#include "vramcache/gpufs.cuh"

__global__ void k_model(struct vc_gfs_ctx g, struct gm_arg *a)
{
	unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
	if (warp < a->nwarps)
		gm_model_warp(&g, warp, a);
}

__global__ void k_mmap(struct vc_gfs_ctx g, struct gm_arg *a, unsigned nwarps)
{
	unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
	if (warp < nwarps)
		gm_mmap_warp(&g, warp, a);
}

__global__ void k_timeout(struct vc_gfs_ctx g, struct gm_arg *a)
{
	gm_timeout_warp(&g, threadIdx.x / 32, a);
}

/* Errors, then a block-level read of R into scratch, compared there. */
__global__ void k_errors(struct vc_gfs_ctx g, struct gm_arg *a)
{
	if (threadIdx.x < 32)
		gm_errors_warp(&g, 0, a);
	__syncthreads();
	int fd = vc_gopen_block(&g, a->path_r, VC_GO_RDONLY);
	uint64_t off = 12345, len = GM_MAXLEN;
	int64_t r = vc_gread_block(&g, fd, off, len, a->scratch);
	if (threadIdx.x == 0 && r != (int64_t)len)
		atomicAdd(&a->errors, 1ull);
	for (uint64_t i = threadIdx.x; r == (int64_t)len && i < len; i += blockDim.x)
		if (a->scratch[i] != a->shadow_r[off + i])
			atomicAdd(&a->errors, 1ull);
	vc_gclose_block(&g, fd);
}

static void *t_alloc(size_t n)
{
	void *p = NULL;
	return cudaMallocManaged(&p, n) == cudaSuccess ? p : NULL;
}

static void t_free(void *p)
{
	cudaFree(p);
}

static int t_launch(vc_gpufs *g, enum gm_kernel k, unsigned nwarps, struct gm_arg *a)
{
	struct vc_gfs_ctx ctx;
	int r = vc_gpufs_ctx(g, &ctx);
	if (r < 0)
		return r;
	unsigned threads = 128, blocks = (nwarps * 32 + threads - 1) / threads;
	if (k == GM_MODEL)
		k_model<<<blocks, threads>>>(ctx, a);
	else if (k == GM_MMAP)
		k_mmap<<<blocks, threads>>>(ctx, a, nwarps);
	else if (k == GM_TIMEOUT)
		k_timeout<<<1, 64>>>(ctx, a);
	else
		k_errors<<<1, 128>>>(ctx, a);
	cudaError_t e = cudaGetLastError();
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	if (e != cudaSuccess) {
		fprintf(stderr, "kernel: %s\n", cudaGetErrorString(e));
		return -EIO;
	}
	return 0;
}

int main(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
		fprintf(stderr, "SKIP: no usable GPU\n");
		return 77;
	}
	const char *w = getenv("VC_GPUFS_WARPS"), *o = getenv("VC_GPUFS_OPS");
	struct gm_env env = { VC_DEVICE_CUDA, t_alloc, t_free, t_launch };
	return gm_main(&env, w ? (unsigned)atoi(w) : 256, o ? (unsigned)atoi(o) : 200, 4);
}
