/* GPUfs's fallback revoke kernel, as host code sees it (kernels/gpufs.cu).
 * Returns a cudaError_t as int, so that this header needs no CUDA header. */
#ifndef VC_CUDA_GPUFS_LAUNCH_H
#define VC_CUDA_GPUFS_LAUNCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vc_gfs_ctx;

/* Enqueues warps that take the chunks left of the revoke pass the host
 * asked for (vc_gfs_revoke_help) on `stream` (a cudaStream_t). */
int vc_cuda_gfs_revoke_launch(const struct vc_gfs_ctx *ctx, void *stream);

#ifdef __cplusplus
}
#endif
#endif
