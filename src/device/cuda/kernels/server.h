/* The device-queue server kernel, as host code sees it (device code in
 * server.cu; the protocol in device/queue.h).
 *
 * One launch serves every ring until asked to stop: block r serves ring r,
 * warp l of it serves lane l (tickets l, l + lanes, ...). Returns a
 * cudaError_t as int, so this header needs no CUDA header. */
#ifndef VC_CUDA_SERVER_H
#define VC_CUDA_SERVER_H

#include <stdint.h>

#include "device/queue_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the kernel gets by value: device-visible addresses only. */
struct vc_cuda_dq_view {
	uint64_t desc[VC_DQ_MAX_RINGS]; /* struct vc_dq_desc[depth] per ring (mapped) */
	uint64_t done[VC_DQ_MAX_RINGS]; /* uint64_t[depth] per ring (mapped) */
	uint64_t pos;                   /* uint64_t[rings * lanes] (mapped) */
	uint64_t stop;                  /* uint32_t (mapped): nonzero asks to exit */
	uint32_t nrings, lanes, depth_shift, piece;
	uint32_t mode;    /* VC_CUDA_DQ_* bits: variants, for measuring */
	uint32_t nap_ns;  /* longest nap between idle polls */
};

/* Variants of the server loop (VC_CUDA_DQ_MODE), for measuring. */
#define VC_CUDA_DQ_FENCE_LANE0 1u /* one fence by lane 0 after __syncwarp, not one per lane */
#define VC_CUDA_DQ_FENCE_ACQREL 2u /* fence.acq_rel.sys instead of fence.sc.sys */
#define VC_CUDA_DQ_LD_RELAXED 4u  /* descriptor words by ld.relaxed.sys, not ld.volatile */
#define VC_CUDA_DQ_NO_NAP 8u      /* never nap between idle polls */

/* Enqueues the server on `stream` (a cudaStream_t): nrings blocks of lanes
 * warps. piece: 512, 1024, 2048 or 4096 bytes. */
int vc_cuda_dq_launch(const struct vc_cuda_dq_view *v, void *stream);

#ifdef __cplusplus
}
#endif
#endif
