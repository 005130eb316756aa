/* GPUfs's fallback revoke kernel (vramcache/gpufs.h's vc_gfs_revoke_help):
 * the host asks for a revoke pass through the copy engines, and the
 * user's warps share it as they call or wait; when none has finished it
 * within a few milliseconds (no warp calls: the kernel computes, or has
 * ended) the host launches this kernel, whose warps take the chunks left.
 * Nobody on the device waits for it, so a user's kernel that holds every
 * SM only delays it. Cost: one 4-byte read per entry of the chunks it
 * takes, one CAS and one 4-byte PCIe write per revoked entry. */
#include <cuda_runtime.h>

#include "vramcache/gpufs.h"
#include "device/cuda/kernels/gpufs_launch.h"
#include "device/cuda/kernels/modules.h"

namespace {

/* Blocks x threads: a small grid, so that it finds room beside a user's
 * kernel; the sweep is memory-bound and short anyway. */
constexpr unsigned BLOCKS = 8, THREADS = 256;

__global__ void revoke_kernel(struct vc_gfs_ctx g)
{
	vc_gfs_revoke_help(&g, vc_gfs_warp_self());
}

} // namespace

extern "C" int vc_cuda_gfs_revoke_launch(const struct vc_gfs_ctx *ctx, void *stream)
{
	revoke_kernel<<<BLOCKS, THREADS, 0, (cudaStream_t)stream>>>(*ctx);
	return (int)cudaGetLastError();
}

extern "C" const void *vc_cuda_gfs_module(void)
{
	return reinterpret_cast<const void *>(&revoke_kernel);
}
