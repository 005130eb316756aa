/* Built when CUDA is not: the CUDA backend reports that it is absent. */
#include "base/error.h"
#include "device/device.h"
#include "vramcache.h"

int vc_cuda_open(int ordinal, struct vc_device **out)
{
	(void)ordinal;
	(void)out;
	return vc_err(-VC_ENOTBUILT, "this build of vramcache has no CUDA backend");
}

int vc_cuda_count(void)
{
	return 0;
}
