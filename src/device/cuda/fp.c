/* The CUDA backend's fingerprints (device/fp.h): the kernel
 * (kernels/fp.cu) on the calling thread's per-thread stream, then a wait
 * for that stream alone, so jobs of several threads run side by side and
 * none waits for moves or the queue servers (their streams do not block). */
#include <cuda_runtime_api.h>

#include "device/cuda/internal.h"
#include "device/cuda/kernels/fp_launch.h"
#include "device/fp.h"

int vc_cu_fp_run(struct vc_device *d, const struct vc_fp_job *job)
{
	struct cu_dev *c = CUD(d);
	int r = vc_cu_enter(c);
	if (r < 0)
		return r;
	r = CU((cudaError_t)vc_cuda_fp_blocks(job, c->sms, cudaStreamPerThread));
	if (r < 0)
		return r;
	return CU(cudaStreamSynchronize(cudaStreamPerThread));
}
