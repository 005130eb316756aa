/* Byte compares of block pairs on the device (issue 14, DEDU): the proof
 * behind a fingerprint match. Two blocks share storage only after their
 * bytes compared equal here, so a hash collision can never return wrong
 * data.
 *
 * Backends (vc_cmp_run dispatches through the device's cmp_run op):
 *   emu   device/emu/cmp.c: memcmp over the addresses (host pointers there)
 *   cuda  device/cuda/cmp.c and kernels/cmp.cu: one warp per pair, 16-byte
 *         loads where both blocks are 16-byte aligned
 * Both write exactly n result bytes.
 */
#ifndef VC_DEVICE_CMP_H
#define VC_DEVICE_CMP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One compare job. Addresses are device-visible (device.h).
 *   pairs_dev  2n uint64_t addresses, 8-byte aligned: pair i is blocks
 *              pairs[2i] and pairs[2i + 1], each len bytes
 *   out_dev    n bytes: out[i] = 1 if pair i's bytes are equal, else 0;
 *              nothing else is written
 * Trivially copyable: the CUDA launch takes it by value. */
struct vc_cmp_job {
	uint64_t pairs_dev;
	uint64_t out_dev;
	uint32_t n;
	uint32_t len; /* 1 .. 2 MiB */
};

/* Bound on len: a page. */
#define VC_CMP_LEN_MAX (2u << 20)

struct vc_device;

/* 0, or -EINVAL with a message: len in 1..VC_CMP_LEN_MAX, and when n > 0
 * both arrays present, pairs 8-byte aligned. */
int vc_cmp_check(const struct vc_cmp_job *job);

/* Runs the job on device d to completion (results in out_dev on return).
 * 0, -EINVAL (vc_cmp_check), -VC_ENOTBUILT when the backend has no
 * compares, or the device's error. n = 0 does nothing. Thread-safe.
 * Cost: emu, n memcmp on the caller's thread; CUDA, a launch and a wait
 * for the calling thread's stream (tens of microseconds) plus 2 x len
 * bytes read per pair. */
int vc_cmp_run(struct vc_device *d, const struct vc_cmp_job *job);

#ifdef __cplusplus
}
#endif
#endif
