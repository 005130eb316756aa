/* The CUDA backend's byte compares (device/cmp.h): the kernel
 * (kernels/cmp.cu) on the calling thread's per-thread stream, then a wait
 * for that stream alone (as fp.c), so no compare waits for moves or the
 * queue servers. */
#include <cuda_runtime_api.h>

#include "device/cmp.h"
#include "device/cuda/internal.h"
#include "device/cuda/kernels/cmp_launch.h"

int vc_cu_cmp_start(struct vc_device *d, const struct vc_cmp_job *job)
{
	struct cu_dev *c = CUD(d);
	int r = vc_cu_enter(c);
	if (r < 0)
		return r;
	return CU((cudaError_t)vc_cuda_cmp_pairs(job, cudaStreamPerThread));
}

int vc_cu_cmp_wait(struct vc_device *d)
{
	struct cu_dev *c = CUD(d);
	int r = vc_cu_enter(c);
	if (r < 0)
		return r;
	return CU(cudaStreamSynchronize(cudaStreamPerThread));
}
