/* The page-move kernel, as host code sees it (device code in move.cu).
 *
 * One launch runs one batch: every move of it, COPY or SWAP, between any
 * two device-visible addresses (device memory or mapped pinned host
 * memory), then signals completion by writing `gen` to *flag.
 *
 * Functions return a cudaError_t as int, so that this header needs no CUDA
 * header and host code passes the result through its one checking macro.
 */
#ifndef VC_CUDA_MOVE_H
#define VC_CUDA_MOVE_H

#include <stdint.h>

#include "device/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Threads per block of the move kernel: 8 warps. */
#define VC_CUDA_MOVE_THREADS 256

/* Resident blocks of the move kernel per multiprocessor (the compiler's
 * register count decides it); the host sizes its grids as SMs times this. */
int vc_cuda_moves_blocks_per_sm(int *out);

/* Enqueues on `stream` (a cudaStream_t) the moves moves_dev[0..n) of
 * page_size bytes each (a power of two, 512 B .. 2 MiB; every address 16-byte
 * aligned). moves_dev is the descriptors' device-visible address: they are
 * read in place, so they must stay unchanged until the flag arrives.
 *
 * The grid has at most max_blocks blocks. When the last block finishes,
 * *counter_dev (device memory, 0 at launch) is back to 0 and *flag_dev
 * (mapped host memory) holds gen, written after a system-scope fence, so a
 * host thread that reads gen there also sees every byte the batch wrote.
 * n must be at least 1. fp_dev: the batch's digests (vc_dbatch.fp), which
 * moves with VC_MOVE_FP write (page_size <= 4 KiB), or 0 when none has it. */
int vc_cuda_launch_moves(const struct vc_move *moves_dev, uint64_t fp_dev, uint32_t n,
			 uint32_t page_size, uint32_t max_blocks, volatile uint32_t *flag_dev,
			 uint32_t gen, uint32_t *counter_dev, void *stream);

/* Sets up the cipher kernel (its shared memory, xts.cuh) once per
 * process and device, and gives its resident blocks per multiprocessor. */
int vc_cuda_moves_xts_init(int *blocks_per_sm);

/* vc_cuda_launch_moves for a batch with cipher moves (device.h), under
 * key: layout_enc when the batch only encrypts (the faster tables), else
 * any mix. The key goes to the kernel as a parameter; the copy made for
 * it here is zeroed before return. fp_dev as for vc_cuda_launch_moves
 * (VC_MOVE_FP on plain and encrypting COPYs: the plaintext's digest). */
struct vc_xts_key;
int vc_cuda_launch_moves_xts(const struct vc_xts_key *key, int layout_enc,
			     const struct vc_move *moves_dev, uint64_t fp_dev, uint32_t n,
			     uint32_t page_size, uint32_t max_blocks, volatile uint32_t *flag_dev,
			     uint32_t gen, uint32_t *counter_dev, void *stream);

#ifdef __cplusplus
}
#endif
#endif
