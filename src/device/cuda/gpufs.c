/* The CUDA backend's part of GPUfs (device/cuda/gpufs.h): the revoke pass
 * on its own non-blocking stream, polled, so that a reaper asked to stop
 * is not held by a pass that waits for an SM. */
#include <time.h>

#include <cuda_runtime_api.h>

#include "device/cuda/gpufs.h"
#include "device/cuda/internal.h"
#include "device/cuda/kernels/gpufs_launch.h"

int vc_cuda_gfs_revoke(struct vc_device *d, const struct vc_gfs_ctx *ctx, uint64_t out_dev,
		       uint32_t cap, void **stream, _Atomic bool *stop)
{
	struct cu_dev *c = CUD(d);
	int r = vc_cu_enter(c);
	if (r < 0)
		return r;
	if (!*stream) {
		cudaStream_t s;
		if ((r = CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))) < 0)
			return r;
		*stream = s;
	}
	r = CU((cudaError_t)vc_cuda_gfs_revoke_launch(ctx, (uint32_t *)(uintptr_t)out_dev, cap,
						      *stream));
	if (r < 0)
		return r;
	for (;;) {
		cudaError_t e = cudaStreamQuery((cudaStream_t)*stream);
		if (e == cudaSuccess)
			return 0;
		if (e != cudaErrorNotReady)
			return CU(e);
		if (atomic_load(stop))
			return 0; /* the pass finishes on its own; its output is not read */
		struct timespec ts = { 0, 50000 };
		nanosleep(&ts, NULL);
	}
}

void vc_cuda_gfs_stream_free(struct vc_device *d, void *stream)
{
	if (vc_cu_enter(CUD(d)) == 0) {
		CU(cudaStreamSynchronize((cudaStream_t)stream));
		CU(cudaStreamDestroy((cudaStream_t)stream));
	}
}
