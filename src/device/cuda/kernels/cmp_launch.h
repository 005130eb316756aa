/* Byte compares of block pairs, as host code sees them (device code in
 * cmp.cu; the job in device/cmp.h). Returns a cudaError_t as int, so that
 * this header needs no CUDA header (as fp_launch.h). */
#ifndef VC_CUDA_CMP_LAUNCH_H
#define VC_CUDA_CMP_LAUNCH_H

#include "device/cmp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Warps per thread block: pairs are spread a warp each. */
#define VC_CUDA_CMP_WARPS 8
/* Threads per block of the compare with a key: 8 warps (xts.cuh's setup
 * needs 256 threads), so that the 32 pairs of a demotion trip spread over
 * 4 blocks, each setting up its 67 KiB of tables at once, not 2 warps a
 * pair in one block; two blocks an SM (round keys in shared memory). */
#define VC_CUDA_CMP_XTS_THREADS 256

/* Enqueues the job (vc_cmp_check'ed by the caller) on `stream` (a
 * cudaStream_t); returns at once with the launch's error. With a key:
 * cmp_xts_kernel, the key a kernel parameter (the host copy zeroed). */
int vc_cuda_cmp_pairs(const struct vc_cmp_job *job, void *stream);

#ifdef __cplusplus
}
#endif
#endif
