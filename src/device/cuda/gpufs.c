/* The CUDA backend's part of GPUfs (device/cuda/gpufs.h). */
#include <cuda_runtime_api.h>

#include "device/cuda/gpufs.h"
#include "device/cuda/internal.h"
#include "device/cuda/kernels/gpufs_launch.h"

int vc_cuda_gfs_stream_new(struct vc_device *d, void **stream)
{
	int r = vc_cu_enter(CUD(d));
	if (r < 0)
		return r;
	cudaStream_t s;
	if ((r = CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))) < 0)
		return r;
	*stream = s;
	return 0;
}

void vc_cuda_gfs_stream_free(struct vc_device *d, void *stream)
{
	if (vc_cu_enter(CUD(d)) == 0) {
		(void)CU(cudaStreamSynchronize((cudaStream_t)stream));
		(void)CU(cudaStreamDestroy((cudaStream_t)stream));
	}
}

int vc_cuda_gfs_put(struct vc_device *d, void *stream, uint64_t dst_dev, const void *src, size_t n)
{
	int r = vc_cu_enter(CUD(d));
	if (r < 0)
		return r;
	return CU(cudaMemcpyAsync((void *)(uintptr_t)dst_dev, src, n, cudaMemcpyHostToDevice,
				  (cudaStream_t)stream));
}

int vc_cuda_gfs_revoke_kernel(struct vc_device *d, const struct vc_gfs_ctx *ctx, void *stream)
{
	int r = vc_cu_enter(CUD(d));
	if (r < 0)
		return r;
	return CU((cudaError_t)vc_cuda_gfs_revoke_launch(ctx, stream));
}

int vc_cuda_gfs_stream_sync(struct vc_device *d, void *stream)
{
	int r = vc_cu_enter(CUD(d));
	if (r < 0)
		return r;
	return CU(cudaStreamSynchronize((cudaStream_t)stream));
}
