/* Fingerprints of blocks in GPU-visible memory, as host code sees it
 * (device code in fp.cu and fp.cuh; the job in device/fp.h).
 *
 * Returns a cudaError_t as int, so that this header needs no CUDA header
 * and host code passes the result through its one checking macro
 * (device/cuda/fp.c). */
#ifndef VC_CUDA_FP_LAUNCH_H
#define VC_CUDA_FP_LAUNCH_H

#include <stdint.h>

#include "device/fp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Threads per block at most: a whole SM's worth for one block (1024 x 64
 * registers = the register file), so that the SM cap, which bounds thread
 * blocks, still leaves each capped SM with 32 warps to hide latency. */
#define VC_CUDA_FP_THREADS 1024

/* The launch geometry of a job of n digests with at most cap thread
 * blocks (cap >= 1): threads per block, n spread evenly over cap blocks in
 * whole warps, at most VC_CUDA_FP_THREADS; then as many blocks as that
 * needs, at most cap. So the grid never exceeds cap blocks (hence cap
 * SMs), and it has a thread per digest unless n exceeds cap x
 * VC_CUDA_FP_THREADS, when threads loop. n >= 1. */
static inline void vc_cuda_fp_geometry(uint32_t n, uint32_t cap, uint32_t *grid, uint32_t *threads)
{
	uint64_t per = ((uint64_t)n + cap - 1) / cap;
	per = (per + 31) / 32 * 32;
	if (per > VC_CUDA_FP_THREADS)
		per = VC_CUDA_FP_THREADS;
	uint64_t g = ((uint64_t)n + per - 1) / per;
	*grid = (uint32_t)(g < cap ? g : cap);
	*threads = (uint32_t)per;
}

/* Enqueues the job (vc_fp_check'ed by the caller) on `stream` (a
 * cudaStream_t). sms: the device's SM count. The grid has at most
 * min(job->max_sms or sms, sms) thread blocks, hence runs on at most that
 * many SMs (vc_cuda_fp_geometry). Returns at once with the
 * launch's error; faults surface at the next synchronization. */
int vc_cuda_fp_blocks(const struct vc_fp_job *job, uint32_t sms, void *stream);

#ifdef __cplusplus
}
#endif
#endif
