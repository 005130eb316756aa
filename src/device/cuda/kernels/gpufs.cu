/* GPUfs's revoke pass on the device (vramcache/gpufs.h's
 * vc_gfs_revoke_pass): a grid-stride sweep of the device table, one thread
 * per entry, with device-scope CAS; what it revokes goes to mapped host
 * memory, and a one-thread kernel after it publishes the count there. Cost: one 4-byte read per entry, one CAS and 4-byte PCIe write
 * per revoked entry; 16384 entries take a few microseconds. */
#include <cuda_runtime.h>

#include "vramcache/gpufs.h"
#include "device/cuda/kernels/gpufs_launch.h"
#include "device/cuda/kernels/modules.h"

namespace {

/* Blocks x threads: a small grid, so that it finds room beside a user's
 * kernel; the sweep is memory-bound and short anyway. */
constexpr unsigned BLOCKS = 8, THREADS = 256;

__global__ void revoke_kernel(struct vc_gfs_ctx g, uint32_t *out, uint32_t cap)
{
	uint32_t rank = blockIdx.x * blockDim.x + threadIdx.x;
	vc_gfs_revoke_pass(&g, rank, gridDim.x * blockDim.x, out, cap);
}

/* After the pass, in stream order: its count to host memory. */
__global__ void publish_kernel(struct vc_gfs_ctx g, uint32_t *out, uint32_t cap)
{
	vc_gfs_revoke_publish(&g, out, cap);
}

} // namespace

extern "C" int vc_cuda_gfs_revoke_launch(const struct vc_gfs_ctx *ctx, uint32_t *out, uint32_t cap,
					 void *stream)
{
	revoke_kernel<<<BLOCKS, THREADS, 0, (cudaStream_t)stream>>>(*ctx, out, cap);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		return (int)e;
	publish_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(*ctx, out, cap);
	return (int)cudaGetLastError();
}

extern "C" const void *vc_cuda_gfs_module(void)
{
	return reinterpret_cast<const void *>(&revoke_kernel);
}
