/* AES-256-XTS in place over pages in GPU memory (xts_launch.h), built from
 * the blocks of xts.cuh, as a move kernel would use them.
 *
 * Grid: at most as many blocks as are resident at once (one or two per
 * SM, below), each set up once (tables and key schedules, xts.cuh) and
 * then looping. Warp w of nwarps takes pages w,
 * w + nwarps, ... (a grid-stride loop, so the last round leaves at most
 * one page per warp of imbalance). Tweaks: every 32 pages a warp encrypts
 * the next 32 tweaks at once, lane k the one of its (k+1)-th next page,
 * and the page loop takes T from lane i % 32 by shuffle: one AES per 32
 * pages per lane, 3% of the work at 512-byte pages, 0.4% at 4 KiB.
 *
 * Registers: by default the data key's 15 round keys stay in registers
 * (60 of them) for the kernel's life, so the inner loop reads only the
 * tables from shared memory, whose bandwidth is the limit (a uint4
 * round-key load per round returns 4 registers per lane: 2 to 4 clocks of
 * the pipe beside the round's 16). That costs occupancy: 128 registers
 * per thread (ptxas, sm_90), one 16-warp block per SM, which should keep
 * the shared pipe busy (each warp has 16 independent lookups per round).
 * The variant (vc_cuda_xts_pages_variant) reads the round keys from
 * shared memory at 56 registers, two blocks per SM; bench/aes_xts runs
 * both, to settle which is faster on the machine.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <string.h>

#include "device/cuda/kernels/piece.cuh"
#include "device/cuda/kernels/xts.cuh"
#include "device/cuda/kernels/xts_launch.h"
#include "device/cuda/kernels/modules.h"

extern "C" {
#include "base/error.h"
}

namespace {

constexpr uint32_t WARPS = VC_CUDA_XTS_THREADS / 32;
constexpr unsigned FULL = 0xffffffffu;

/* Keys: vc_xts_keys_reg (one block per SM) or vc_xts_keys_smem (two). */
template <bool Enc, class Keys>
__global__ void __launch_bounds__(VC_CUDA_XTS_THREADS, Keys::BLOCKS_PER_SM)
xts_kernel(const vc_xts_kparam key, uint4 *__restrict__ pages, const uint64_t *__restrict__ tweaks,
	   uint32_t n, uint32_t nblocks)
{
	extern __shared__ uint4 xts_dyn[];
	vc_xts_smem &s = *reinterpret_cast<vc_xts_smem *>(xts_dyn);
	vc_xts_setup<Enc>(s, key);

	const vc_xts_lane L = vc_xts_lane_make(s);
	const Keys k(Enc ? s.rk : s.rkd);
	const uint32_t lane = threadIdx.x & 31;
	const uint64_t nwarps = (uint64_t)gridDim.x * WARPS;
	uint4 mine = make_uint4(0, 0, 0, 0); /* this lane's tweak of the current 32 */
	uint32_t i = 0;
	for (uint64_t p = blockIdx.x * WARPS + threadIdx.x / 32; p < n; p += nwarps, i = (i + 1) & 31) {
		if (i == 0) {
			const uint64_t q = p + lane * nwarps;
			if (q < n)
				mine = vc_xts_tweak_encrypt<Enc>(L, s, tweaks[q]);
		}
		const uint4 T = make_uint4(__shfl_sync(FULL, mine.x, i), __shfl_sync(FULL, mine.y, i),
					   __shfl_sync(FULL, mine.z, i), __shfl_sync(FULL, mine.w, i));
		uint4 *pg = pages + p * nblocks;
		vc_xts_unit<Enc, vc_stream_hint>(L, k, T, pg, pg, nblocks);
	}
	vc_xts_wipe(s);
}

template <bool Enc, class Keys>
cudaError_t launch(const vc_xts_kparam &kp, uint4 *pages, const uint64_t *tweaks, uint32_t n,
		   uint32_t nblocks, cudaStream_t stream)
{
	const size_t smem = sizeof(vc_xts_smem);
	auto kern = xts_kernel<Enc, Keys>;
	cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
	int dev = 0, sms = 0, per_sm = 0;
	if (e == cudaSuccess)
		e = cudaGetDevice(&dev);
	if (e == cudaSuccess)
		e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
	if (e == cudaSuccess)
		e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, VC_CUDA_XTS_THREADS, smem);
	if (e != cudaSuccess)
		return e;
	uint64_t blocks = ((uint64_t)n + WARPS - 1) / WARPS, cap = (uint64_t)sms * (per_sm > 0 ? per_sm : 1);
	if (blocks > cap)
		blocks = cap;
	kern<<<(unsigned)blocks, VC_CUDA_XTS_THREADS, smem, stream>>>(kp, pages, tweaks, n, nblocks);
	/* Launch errors only; the kernel's own faults surface at the next sync. */
	return cudaGetLastError();
}

} // namespace

extern "C" int vc_cuda_xts_pages_variant(const struct vc_xts_key *key, void *pages_dev,
					 const uint64_t *tweaks_dev, uint32_t n, uint32_t page_size,
					 int encrypt, int keys_in_smem, void *stream)
{
	if (vc_xts_check(key, page_size) < 0)
		return (int)cudaErrorInvalidValue;
	if (((uintptr_t)pages_dev & 15) != 0 || (n > 0 && !tweaks_dev)) {
		vc_err(-EINVAL, "XTS: pages at %p are not 16-byte aligned, or no tweaks", pages_dev);
		return (int)cudaErrorInvalidValue;
	}
	if (n == 0)
		return 0;
	vc_xts_kparam kp = vc_xts_kparam_of(key);
	uint4 *pages = static_cast<uint4 *>(pages_dev);
	const uint32_t nb = page_size / VC_XTS_BLOCK;
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	cudaError_t e;
	if (keys_in_smem)
		e = encrypt ? launch<true, vc_xts_keys_smem>(kp, pages, tweaks_dev, n, nb, s)
			    : launch<false, vc_xts_keys_smem>(kp, pages, tweaks_dev, n, nb, s);
	else
		e = encrypt ? launch<true, vc_xts_keys_reg>(kp, pages, tweaks_dev, n, nb, s)
			    : launch<false, vc_xts_keys_reg>(kp, pages, tweaks_dev, n, nb, s);
	vc_secret_zero(&kp, sizeof kp); /* the host copy of the key in this frame */
	return (int)e;
}

extern "C" int vc_cuda_xts_pages(const struct vc_xts_key *key, void *pages_dev, const uint64_t *tweaks_dev,
				 uint32_t n, uint32_t page_size, int encrypt, void *stream)
{
	return vc_cuda_xts_pages_variant(key, pages_dev, tweaks_dev, n, page_size, encrypt, 0, stream);
}

extern "C" const void *vc_cuda_xts_module(void)
{
	return reinterpret_cast<const void *>(&xts_kernel<true, vc_xts_keys_reg>);
}
