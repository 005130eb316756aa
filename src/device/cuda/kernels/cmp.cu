/* The compare kernel (cmp_launch.h): one warp per pair. Lane l reads
 * 16-byte words l, l + 32, ... of both blocks (coalesced: a warp's load
 * is 512 contiguous bytes of each block) when both are 16-byte aligned and
 * len is a multiple of 16, else bytes; the warp votes once at the end, so
 * a pair costs 2 x len bytes read and no early exit (blocks are 512 B to
 * 4 KiB: at most 8 loads per lane per block). One byte written per pair. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "device/cuda/kernels/cmp_launch.h"
#include "device/cuda/kernels/modules.h"

namespace {

__global__ void cmp_kernel(const vc_cmp_job job)
{
	const uint64_t *pairs = reinterpret_cast<const uint64_t *>(job.pairs_dev);
	uint8_t *out = reinterpret_cast<uint8_t *>(job.out_dev);
	const unsigned lane = threadIdx.x & 31;
	const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x / 32);
	for (uint64_t i = (uint64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; i < job.n;
	     i += warps) {
		const uint64_t a = pairs[2 * i], b = pairs[2 * i + 1];
		bool diff = false;
		if (((a | b) & 15) == 0 && (job.len & 15) == 0) {
			const uint4 *pa = reinterpret_cast<const uint4 *>(a);
			const uint4 *pb = reinterpret_cast<const uint4 *>(b);
			for (uint32_t w = lane; w < job.len / 16; w += 32) {
				const uint4 x = pa[w], y = pb[w];
				diff |= x.x != y.x || x.y != y.y || x.z != y.z || x.w != y.w;
			}
		} else {
			const uint8_t *pa = reinterpret_cast<const uint8_t *>(a);
			const uint8_t *pb = reinterpret_cast<const uint8_t *>(b);
			for (uint32_t k = lane; k < job.len; k += 32)
				diff |= pa[k] != pb[k];
		}
		const bool any = __any_sync(0xffffffffu, diff);
		if (lane == 0)
			out[i] = any ? 0 : 1;
	}
}

} // namespace

extern "C" int vc_cuda_cmp_pairs(const struct vc_cmp_job *job, void *stream)
{
	if (job->n == 0)
		return (int)cudaSuccess;
	const uint32_t per = VC_CUDA_CMP_WARPS * 32;
	uint64_t grid = ((uint64_t)job->n + VC_CUDA_CMP_WARPS - 1) / VC_CUDA_CMP_WARPS;
	if (grid > 65535)
		grid = 65535; /* warps loop past it */
	cmp_kernel<<<(unsigned)grid, per, 0, static_cast<cudaStream_t>(stream)>>>(*job);
	return (int)cudaGetLastError();
}

extern "C" const void *vc_cuda_cmp_module(void)
{
	return reinterpret_cast<const void *>(&cmp_kernel);
}
