/* The fault op's kernel (device.h: a test hook): one thread that traps.
 * A trap ends the launch with cudaErrorLaunchFailure, a sticky error:
 * the context it ran in (the device's primary context, which every
 * handle on that ordinal shares) fails every later call, as a GPU whose
 * context died does. Other devices' contexts are not touched. */
#include <cuda_runtime.h>

#include "device/cuda/kernels/fault_launch.h"
#include "device/cuda/kernels/modules.h"

namespace {

__global__ void fault_kernel()
{
	__trap();
}

} // namespace

extern "C" int vc_cuda_fault_launch(void *stream)
{
	fault_kernel<<<1, 1, 0, (cudaStream_t)stream>>>();
	return (int)cudaGetLastError();
}

extern "C" const void *vc_cuda_fault_module(void)
{
	return reinterpret_cast<const void *>(&fault_kernel);
}
