/* GPUfs's revoke pass, as host code sees it (kernels/gpufs.cu). Returns a
 * cudaError_t as int, so that this header needs no CUDA header. */
#ifndef VC_CUDA_GPUFS_LAUNCH_H
#define VC_CUDA_GPUFS_LAUNCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vc_gfs_ctx;

/* Enqueues the pass on `stream` (a cudaStream_t): every table entry nobody
 * pins is revoked, its engine id written to out[] (cap at most), and then
 * the count to out[cap]. */
int vc_cuda_gfs_revoke_launch(const struct vc_gfs_ctx *ctx, uint32_t *out, uint32_t cap,
			      void *stream);

#ifdef __cplusplus
}
#endif
#endif
