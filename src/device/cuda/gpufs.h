/* The CUDA backend's part of GPUfs (src/gpufs/): a non-blocking stream of
 * the context's own, on which the host asks for revoke passes through the
 * copy engines (no kernel, no SM: the user's warps share the pass) and,
 * when no warp takes it up, launches the fallback revoke kernel
 * (kernels/gpufs.cu). Nothing here waits for a user's kernel. */
#ifndef VC_CUDA_GPUFS_H
#define VC_CUDA_GPUFS_H

#include <stddef.h>
#include <stdint.h>

struct vc_device;
struct vc_gfs_ctx;

int vc_cuda_gfs_stream_new(struct vc_device *d, void **stream);
/* Waits for what the stream holds (a fallback kernel), then frees it. */
void vc_cuda_gfs_stream_free(struct vc_device *d, void *stream);
/* Copies n bytes of pinned host memory to device memory on the stream
 * (a copy engine; ordered after the stream's earlier copies). */
int vc_cuda_gfs_put(struct vc_device *d, void *stream, uint64_t dst_dev, const void *src,
		    size_t n);
/* Launches the fallback revoke kernel on the stream; does not wait. */
int vc_cuda_gfs_revoke_kernel(struct vc_device *d, const struct vc_gfs_ctx *ctx, void *stream);
/* Waits until the stream is idle (release, after the user's kernels). */
int vc_cuda_gfs_stream_sync(struct vc_device *d, void *stream);

#endif
