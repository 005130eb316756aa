/* The device-queue server kernel, as host code sees it (device code in
 * server.cu; the protocol in device/queue.h).
 *
 * One launch serves every ring until asked to stop: block r serves ring r,
 * in rounds of up to VC_CUDA_DQ_LANES descriptors spread over its
 * VC_CUDA_DQ_WARPS warps. Within a round completions come in any order;
 * a round completes after the one before it, so for the host protocol the
 * server has VC_CUDA_DQ_LANES lanes. Returns a cudaError_t as int, so this
 * header needs no CUDA header. */
#ifndef VC_CUDA_SERVER_H
#define VC_CUDA_SERVER_H

#include <stdint.h>

#include "device/queue_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Warps per block, and the round's width (the host protocol's lanes). A
 * build may set VC_CUDA_DQ_WARPS (8, 16 or 32), for measuring. 16: three
 * interleaved runs on the H100 at 16 threads gave 128 KiB reads 33.1-35.8
 * GB/s against 8 warps' 28.2-33.1, and 4 KiB hits 1.99-2.10M against
 * 1.92-2.19M (a ring's moves are zero-copy stores from its one block:
 * more warps keep more of them in flight). */
#ifndef VC_CUDA_DQ_WARPS
#define VC_CUDA_DQ_WARPS 16
#endif
#define VC_CUDA_DQ_LANES 32

/* What the kernel gets by value: device-visible addresses only. */
struct vc_cuda_dq_view {
	uint64_t desc[VC_DQ_MAX_RINGS]; /* struct vc_dq_desc[depth] per ring (mapped) */
	uint64_t done[VC_DQ_MAX_RINGS]; /* uint64_t[depth] per ring (mapped) */
	uint64_t fp[VC_DQ_MAX_RINGS];   /* 16-byte digests [depth] per ring (mapped): VC_MOVE_FP's */
	uint64_t pos;                   /* uint64_t[rings * lanes] (mapped) */
	uint64_t stop;                  /* uint32_t (mapped): nonzero asks to exit */
	uint32_t nrings, lanes, depth_shift, piece;
	uint32_t mode;    /* VC_CUDA_DQ_* bits: variants, for measuring */
	uint32_t nap_ns;  /* longest nap between idle polls */
	uint32_t cipher;  /* nonzero: key is the queue's, for cipher moves */
	uint32_t _pad;
	/* The XTS key (device/xts.h's 64 bytes), a kernel parameter for the
	 * server's run; the launching host code zeroes its copy after. */
	struct {
		uint64_t w[8];
	} key;
};

/* Variants of the server loop (VC_CUDA_DQ_MODE), for measuring. */
#define VC_CUDA_DQ_NO_NAP 8u /* never nap between idle polls */

/* Enqueues the server on `stream` (a cudaStream_t): nrings blocks of
 * VC_CUDA_DQ_WARPS warps. piece: 512, 1024, 2048 or 4096 bytes. */
int vc_cuda_dq_launch(const struct vc_cuda_dq_view *v, void *stream);

#ifdef __cplusplus
}
#endif
#endif
