/* The CUDA backend's part of GPUfs (src/gpufs/): the revoke pass as a small
 * kernel on a stream of its own (kernels/gpufs.cu), so that it runs beside
 * the user's kernels where an SM is free. */
#ifndef VC_CUDA_GPUFS_H
#define VC_CUDA_GPUFS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct vc_device;
struct vc_gfs_ctx;

/* Runs vc_gfs_revoke_pass over the whole table into out (mapped: cap ids,
 * then the count at out[cap]) and waits for it, polling, until it is done
 * or *stop is set. *stream: created on first use. 0 or -VC_EDEVICE. */
int vc_cuda_gfs_revoke(struct vc_device *d, const struct vc_gfs_ctx *ctx, uint64_t out_dev,
		       uint32_t cap, void **stream, _Atomic bool *stop);
void vc_cuda_gfs_stream_free(struct vc_device *d, void *stream);

#endif
