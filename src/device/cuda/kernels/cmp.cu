/* The compare kernels (cmp_launch.h).
 *
 * cmp_kernel, plain: one warp per pair. Lane l reads 16-byte words l, l +
 * 32, ... of both blocks (coalesced: a warp's load is 512 contiguous bytes
 * of each block) when both are 16-byte aligned and len is a multiple of
 * 16, else bytes; the warp votes once at the end, so a pair costs 2 x len
 * bytes read and no early exit (blocks are 512 B to 4 KiB: at most 8 loads
 * per lane per block). One byte written per pair.
 *
 * cmp_xts_kernel, with a key (device/cmp.h): pair i is plaintext a and
 * ciphertext b, units of U = min(len, 4 KiB) bytes (V = U / 512 words a
 * lane), unit k with tweak tweaks[i] + k. Each block sets up the
 * decryption layout (xts.cuh) once; then a warp per pair, as xts.cu: every
 * 32 pairs a warp encrypts their first units' tweaks at once (lane k the
 * one of its k-th next pair) and takes pair i's by shuffle. Per unit the
 * warp loads both blocks' words (lane l: words l, l + 32, ...; all 2V
 * loads before the first AES, so a PCIe read of plaintext in host memory
 * is paid once a unit) and runs the move kernels' vc_xts_piece_run over
 * the ciphertext with a tap that compares each decrypted word with the
 * plaintext's beside its AES and a hint that stores nothing: the
 * decrypted words live in registers only, and the one byte a pair is the
 * only store. Where key bytes are: as xts.cuh says (the kernel parameter,
 * round keys in shared memory until vc_xts_wipe; no stack frame, no
 * spills: the build refuses cmp.cu otherwise). Cost per block: the setup
 * (about a microsecond), then per pair a tweak AES per 32 pairs a lane,
 * V AES a lane per unit, 2 x len bytes read.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "device/cuda/kernels/cmp_launch.h"
#include "device/cuda/kernels/modules.h"
#include "device/cuda/kernels/piece.cuh"
#include "device/cuda/kernels/xts.cuh"

namespace {

constexpr unsigned FULL = 0xffffffffu;

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
		const bool any = __any_sync(FULL, diff);
		if (lane == 0)
			out[i] = any ? 0 : 1;
	}
}

/* Loads read once (ld.cs); stores: none (the decrypted words stay in
 * registers). */
struct cmp_hint {
	static __device__ __forceinline__ uint4 ld(const uint4 *p) { return __ldcs(p); }
	static __device__ __forceinline__ void st(uint4 *, uint4) {}
};

/* The tap: word v of the decrypted unit against the plaintext's, p[v]. */
template <int V>
struct cmp_tap {
	const uint4 (&p)[V];
	bool diff;
	__device__ __forceinline__ void operator()(int v, uint4 w)
	{
		diff |= w.x != p[v].x || w.y != p[v].y || w.z != p[v].z || w.w != p[v].w;
	}
};

template <int V>
__global__ void __launch_bounds__(VC_CUDA_CMP_XTS_THREADS, vc_xts_keys_smem::BLOCKS_PER_SM)
cmp_xts_kernel(const vc_xts_kparam key, const vc_cmp_job job)
{
	constexpr uint32_t UNIT = V * 512;
	extern __shared__ uint4 cmp_xts_dyn[];
	vc_xts_smem &s = *reinterpret_cast<vc_xts_smem *>(cmp_xts_dyn);
	vc_xts_setup<false>(s, key);

	const vc_xts_lane L = vc_xts_lane_make(s);
	const vc_xts_keys_smem kd(s.rkd);
	const uint64_t *pairs = reinterpret_cast<const uint64_t *>(job.pairs_dev);
	const uint64_t *tweaks = reinterpret_cast<const uint64_t *>(job.tweaks_dev);
	uint8_t *out = reinterpret_cast<uint8_t *>(job.out_dev);
	const uint32_t lane = threadIdx.x & 31, units = job.len / UNIT;
	constexpr uint32_t WARPS = VC_CUDA_CMP_XTS_THREADS / 32;
	const uint64_t nwarps = (uint64_t)gridDim.x * WARPS;
	uint4 mine = make_uint4(0, 0, 0, 0); /* this lane's first-unit tweak of the current 32 */
	uint32_t r = 0;
	for (uint64_t i = (uint64_t)blockIdx.x * WARPS + threadIdx.x / 32; i < job.n;
	     i += nwarps, r = (r + 1) & 31) {
		if (r == 0) {
			const uint64_t q = i + lane * nwarps;
			if (q < job.n)
				mine = vc_xts_tweak_encrypt<false>(L, s, tweaks[q]);
		}
		uint4 T = make_uint4(__shfl_sync(FULL, mine.x, r), __shfl_sync(FULL, mine.y, r),
				     __shfl_sync(FULL, mine.z, r), __shfl_sync(FULL, mine.w, r));
		const uint64_t a = pairs[2 * i], b = pairs[2 * i + 1];
		bool diff = ((a | b) & 15) != 0; /* misaligned: reported unequal (cmp.h) */
		for (uint32_t u = 0; !diff && u < units; u++) {
			if (u > 0)
				T = vc_xts_tweak_encrypt<false>(L, s, tweaks[i] + u);
			const uint64_t off = (uint64_t)u * UNIT + lane * 16u;
			uint4 c[V], p[V];
			vc_xts_piece_ld<V, cmp_hint>(reinterpret_cast<const uint4 *>(b + off), c);
			vc_xts_piece_ld<V, cmp_hint>(reinterpret_cast<const uint4 *>(a + off), p);
			cmp_tap<V> tap = { p, false };
			vc_xts_piece_run<V, false, false, cmp_hint>(L, kd, T, c, nullptr, tap);
			diff = __any_sync(FULL, tap.diff);
		}
		if (lane == 0)
			out[i] = diff ? 0 : 1;
	}
	vc_xts_wipe(s);
}

template <int V>
cudaError_t launch_xts(const vc_xts_kparam &kp, const vc_cmp_job &job, cudaStream_t s)
{
	const int smem = (int)sizeof(vc_xts_smem);
	cudaError_t e = cudaFuncSetAttribute(cmp_xts_kernel<V>, cudaFuncAttributeMaxDynamicSharedMemorySize,
					     smem);
	int dev = 0, sms = 0;
	if (e == cudaSuccess)
		e = cudaGetDevice(&dev);
	if (e == cudaSuccess)
		e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
	if (e != cudaSuccess)
		return e;
	constexpr uint32_t WARPS = VC_CUDA_CMP_XTS_THREADS / 32;
	uint64_t grid = ((uint64_t)job.n + WARPS - 1) / WARPS;
	const uint64_t cap = (uint64_t)(sms > 0 ? sms : 1) * vc_xts_keys_smem::BLOCKS_PER_SM;
	if (grid > cap)
		grid = cap; /* warps loop past it */
	cmp_xts_kernel<V><<<(unsigned)grid, VC_CUDA_CMP_XTS_THREADS, smem, s>>>(kp, job);
	return cudaGetLastError();
}

cudaError_t cmp_xts(const vc_cmp_job &job, cudaStream_t s)
{
	vc_xts_kparam kp = vc_xts_kparam_of(job.key);
	cudaError_t e;
	switch (job.len < VC_XTS_UNIT_MAX ? job.len : VC_XTS_UNIT_MAX) {
	case 512:
		e = launch_xts<1>(kp, job, s);
		break;
	case 1024:
		e = launch_xts<2>(kp, job, s);
		break;
	case 2048:
		e = launch_xts<4>(kp, job, s);
		break;
	case 4096:
		e = launch_xts<8>(kp, job, s);
		break;
	default: /* vc_cmp_check refuses it */
		e = cudaErrorInvalidValue;
	}
	vc_secret_zero(&kp, sizeof kp); /* the host copy of the key in this frame */
	return e;
}

} // namespace

extern "C" int vc_cuda_cmp_pairs(const struct vc_cmp_job *job, void *stream)
{
	if (job->n == 0)
		return (int)cudaSuccess;
	if (job->key)
		return (int)cmp_xts(*job, static_cast<cudaStream_t>(stream));
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
