/* The fault op's trapping kernel, as host code sees it (kernels/fault.cu).
 * Returns a cudaError_t as int, so that this header needs no CUDA header. */
#ifndef VC_CUDA_FAULT_LAUNCH_H
#define VC_CUDA_FAULT_LAUNCH_H

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues one thread that traps on `stream` (a cudaStream_t); the
 * launch itself succeeds, the stream's next synchronization fails. */
int vc_cuda_fault_launch(void *stream);

#ifdef __cplusplus
}
#endif
#endif
