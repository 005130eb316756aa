/* AES-256-XTS over pages in GPU memory, as host code sees it (device code
 * in xts.cu; the cipher's parameters in device/xts.h).
 *
 * The standalone kernel, for the tests and the benchmark, and the
 * reference for fusing the cipher into the move kernels (xts.cuh).
 * Functions return a cudaError_t as int, so that this header needs no
 * CUDA header and host code passes the result through its one checking
 * macro. */
#ifndef VC_CUDA_XTS_LAUNCH_H
#define VC_CUDA_XTS_LAUNCH_H

#include <stdint.h>

#include "device/xts.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Threads per block: 16 warps, one or two blocks per SM (xts.cu). */
#define VC_CUDA_XTS_THREADS 512

/* Enqueues on `stream` (a cudaStream_t; NULL: the default stream) the
 * encryption (encrypt != 0) or decryption in place of the n pages of
 * page_size bytes at pages_dev (device-visible, 16-byte aligned), page p
 * with tweak tweaks_dev[p] (device-visible, read by the kernel). Returns
 * at once; n = 0 enqueues nothing. cudaErrorInvalidValue when
 * vc_xts_check refuses the key or the page size (with its message,
 * vc_last_error) or an address is misaligned; otherwise the launch's
 * error. The key travels as a kernel parameter: no copy of it is made in
 * device memory by us (xts.cuh says where its bytes are). Cost: a few
 * microseconds of setup per block (tables, key schedules), then about 450
 * integer instructions and 224 shared loads per 16 bytes; the grid is at
 * most one block per SM (two for the variant below), and the launcher
 * asks the runtime for the SM count and the occupancy at every call. */
int vc_cuda_xts_pages(const struct vc_xts_key *key, void *pages_dev, const uint64_t *tweaks_dev,
		      uint32_t n, uint32_t page_size, int encrypt, void *stream);

/* The same with the round keys' place chosen, for measuring (bench/aes_xts):
 * keys_in_smem = 0 (vc_cuda_xts_pages' choice) keeps the data key's round
 * keys in registers, one block per SM; 1 reads them from shared memory
 * every round, two blocks per SM. */
int vc_cuda_xts_pages_variant(const struct vc_xts_key *key, void *pages_dev,
			      const uint64_t *tweaks_dev, uint32_t n, uint32_t page_size, int encrypt,
			      int keys_in_smem, void *stream);

#ifdef __cplusplus
}
#endif
#endif
