/* The fingerprint kernel (fp_launch.h): one thread per block, sequential
 * within the block (MD5 and MurmurHash3 chain every chunk through the
 * state), many blocks in flight.
 *
 * Memory: lane l of a warp reads its own block, so a warp's 16-byte load
 * touches 32 different lines (32 sectors, no coalescing); each sector is
 * used in full because a thread reads 64 consecutive bytes per step. The
 * L1 serves such a load in about 32 cycles, 16 bytes per cycle per SM,
 * against the 2.4 bytes per cycle per SM that 55 GB/s over 13 SMs at
 * 1.75 GHz needs. Latency: each thread has its next 64 bytes in flight
 * while it hashes (fp.cuh), 64 KiB per SM with 1024 threads, far above the
 * ~4 KiB per SM Little's law asks at 55 GB/s over 13 SMs with ~1 us of
 * latency. Arithmetic: ~2.5 (MurmurHash3) or ~9 (MD5) integer
 * instructions per byte against the SM's 64 to 128 lanes per cycle.
 * The digests and the addresses are read and written coalesced.
 *
 * __launch_bounds__(1024, 1): at most 64 registers per thread, the budget
 * for one 1024-thread block per SM; ptxas reports the use
 * (VC_PTXAS_VERBOSE) and must show no spills. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "device/cuda/kernels/fp.cuh"
#include "device/cuda/kernels/fp_launch.h"
#include "device/cuda/kernels/modules.h"

namespace {

template <int Algo>
__global__ void __launch_bounds__(VC_CUDA_FP_THREADS, 1) fp_kernel(const vc_fp_job job)
{
	const uint64_t *blocks = reinterpret_cast<const uint64_t *>(job.blocks_dev);
	uint4 *out = reinterpret_cast<uint4 *>(job.out_dev);
	const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < job.n; i += stride) {
		const uint8_t *p = reinterpret_cast<const uint8_t *>(
			__ldcs(reinterpret_cast<const unsigned long long *>(blocks + i)));
		__stcs(out + i, vc_fp_block_dev<Algo>(p, job.block_size));
	}
}

} // namespace

extern "C" int vc_cuda_fp_blocks(const struct vc_fp_job *job, uint32_t sms, void *stream)
{
	if (job->n == 0)
		return (int)cudaSuccess;
	const uint32_t cap = job->max_sms && job->max_sms < sms ? job->max_sms : (sms ? sms : 1);
	uint32_t grid, per;
	vc_cuda_fp_geometry(job->n, cap, &grid, &per);
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	if (job->algo == VC_FP_MD5)
		fp_kernel<VC_FP_MD5><<<grid, per, 0, s>>>(*job);
	else
		fp_kernel<VC_FP_MURMUR3><<<grid, per, 0, s>>>(*job);
	return (int)cudaGetLastError();
}

extern "C" const void *vc_cuda_fp_module(void)
{
	return reinterpret_cast<const void *>(&fp_kernel<VC_FP_MD5>);
}
