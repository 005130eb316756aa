/* Byte compares of block pairs on the device (issue 14, DEDU): the proof
 * behind a fingerprint match. Two blocks share storage only after their
 * bytes compared equal here, so a hash collision can never return wrong
 * data.
 *
 * With a key (the encrypted GPU tier, device/xts.h), each pair is a
 * plaintext block and a stored ciphertext block: the ciphertext is
 * decrypted with its own tweak and compared with the plaintext, so that a
 * block is proved equal to a stored one without the stored block's
 * plaintext leaving the compare (CUDA: registers only; nothing but the
 * result byte is written).
 *
 * Backends (vc_cmp_run dispatches through the device's cmp_run op):
 *   emu   device/emu/cmp.c: memcmp over the addresses (host pointers
 *         there); with a key, the ciphertexts decrypted by OpenSSL
 *         (vc_emu_xts_pages, as emu moves do) into a buffer of its own,
 *         zeroed and freed before it returns
 *   cuda  device/cuda/cmp.c and kernels/cmp.cu: one warp per pair, 16-byte
 *         loads where both blocks are 16-byte aligned; with a key,
 *         cmp_xts_kernel: the warp loads both blocks' words, decrypts the
 *         ciphertext's with xts.cuh's vc_xts_piece_run and compares each
 *         word with the plaintext's beside its AES (a tap)
 * Both write exactly n result bytes.
 */
#ifndef VC_DEVICE_CMP_H
#define VC_DEVICE_CMP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vc_xts_key;

/* One compare job. Addresses are device-visible (device.h).
 *   pairs_dev  2n uint64_t addresses, 8-byte aligned: pair i is blocks
 *              pairs[2i] and pairs[2i + 1], each len bytes
 *   out_dev    n bytes: out[i] = 1 if pair i's bytes are equal, else 0;
 *              nothing else is written
 *   key        NULL: the bytes are compared as they are. Else pairs[2i]
 *              is plaintext and pairs[2i + 1] ciphertext under key, in
 *              XTS data units of min(len, 4 KiB), unit k with tweak
 *              tweaks[i] + k (as a move's, device.h): out[i] = 1 if it
 *              decrypts to pairs[2i]'s bytes. The key is the caller's,
 *              read during the call only (CUDA: a kernel parameter)
 *   tweaks_dev with a key, n uint64_t tweaks, 8-byte aligned
 * Trivially copyable: the CUDA launch takes it by value. */
struct vc_cmp_job {
	uint64_t pairs_dev;
	uint64_t out_dev;
	uint32_t n;
	uint32_t len; /* 1 .. 2 MiB; with a key, a power of two from 512 */
	const struct vc_xts_key *key;
	uint64_t tweaks_dev;
};

/* Bound on len: a page. */
#define VC_CMP_LEN_MAX (2u << 20)
/* Bound below on len with a key: a warp's step of the cipher moves
 * (xts.cuh's vc_xts_piece_run, 512 bytes), which every dedup block size
 * meets (pages of 4 KiB and more split at most 8 ways). */
#define VC_CMP_XTS_LEN_MIN 512u

struct vc_device;

/* 0, or -EINVAL with a message: len in 1..VC_CMP_LEN_MAX, and when n > 0
 * both arrays present, pairs 8-byte aligned. With a key: the key as
 * vc_xts_check requires, len a power of two from VC_CMP_XTS_LEN_MIN, and
 * when n > 0 the tweaks present, 8-byte aligned. (CUDA with a key also
 * needs every block 16-byte aligned: cmp_xts_kernel reports a pair that
 * is not as unequal.) */
int vc_cmp_check(const struct vc_cmp_job *job);

/* Runs the job on device d to completion (results in out_dev on return).
 * 0, -EINVAL (vc_cmp_check), -VC_ENOTBUILT when the backend has no
 * compares (or, with a key, no cipher: emu without OpenSSL), -ENOMEM
 * (emu with a key), or the device's error. n = 0 does nothing.
 * Thread-safe. Cost: emu, n memcmp on the caller's thread; CUDA, a launch
 * and a wait for the calling thread's stream (tens of microseconds) plus
 * 2 x len bytes read per pair. With a key: emu, one OpenSSL key schedule
 * and n x len bytes decrypted (and a buffer of as much); CUDA, the
 * cipher's setup per thread block (about a microsecond: tables and key
 * schedules in shared memory), then per pair a tweak AES per 32 pairs a
 * warp and len / 16 AES. */
int vc_cmp_run(struct vc_device *d, const struct vc_cmp_job *job);

/* vc_cmp_run in two halves, so that the caller can work while the device
 * compares. vc_cmp_start checks the job and starts it on the calling
 * thread's stream (emu: runs it now); its arrays stay unchanged and the
 * results unread until vc_cmp_wait, on the same thread, returns 0.
 * vc_cmp_wait waits for every compare the calling thread started on d.
 * Each returns what vc_cmp_run would (the device's error from either);
 * after a start that failed there is nothing to wait for. n = 0 starts
 * nothing. */
int vc_cmp_start(struct vc_device *d, const struct vc_cmp_job *job);
int vc_cmp_wait(struct vc_device *d);

#ifdef __cplusplus
}
#endif
#endif
