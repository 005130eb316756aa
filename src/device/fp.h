/* Fingerprints of fixed-size blocks (issue 14, DEDU: block deduplication):
 * the job both backends run, the host reference, and the entry the engine
 * calls on either backend.
 *
 * A cache page of 4 KiB is split into D = 1, 2, 4 or 8 blocks of
 * block_size = 4096 / D bytes; every block gets a 16-byte digest. A digest
 * match is a hint that two blocks are equal, never proof: whoever shares
 * storage on it compares the bytes first, so the hash need not resist
 * attackers, only spread ordinary data. Three algorithms (fp_algo.h):
 *   VC_FP_MURMUR3  MurmurHash3_x64_128, seed 0: the default, chosen for GPU
 *                  speed (about 2.5 integer instructions per byte against
 *                  MD5's 9); verified by SMHasher's verification value
 *   VC_FP_MD5      RFC 1321, as the DEDU paper uses, for its experiments
 *   VC_FP_LANES    the lanes hash: word-parallel, computed inside the moves
 *                  that carry VC_MOVE_FP (device.h), at no extra pass over
 *                  the data; the engine's default. Not a job algorithm
 *
 * Backends (vc_fp_run dispatches through the device's fp_run op):
 *   emu   device/emu/fp.c: the host reference over the blocks' addresses
 *         (the emulated device's memory is host memory), on the caller's
 *         thread
 *   cuda  device/cuda/fp.c and kernels/fp.cu: one GPU thread per block,
 *         at most max_sms thread blocks (so at most max_sms SMs)
 * Both give the host reference's digests byte for byte (tests/test_fp).
 */
#ifndef VC_DEVICE_FP_H
#define VC_DEVICE_FP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device/fp_algo.h"

#ifdef __cplusplus
extern "C" {
#endif

enum vc_fp_algo {
	VC_FP_MURMUR3 = 0, /* the fingerprint job's default */
	VC_FP_MD5 = 1,
	VC_FP_LANES = 2,   /* computed inside moves (device.h's VC_MOVE_FP) */
};
/* Algorithms of the fingerprint job (vc_fp_run): MurmurHash3 and MD5. The
 * lanes hash is computed by the moves themselves, not by the job. */
#define VC_FP_ALGOS 2
/* Every algorithm vc_fp_block knows. */
#define VC_FP_ALGOS_ALL 3

/* Block sizes: a power of two in this range, so a 4 KiB page holds 1 .. 8
 * whole blocks (and every block is a whole number of 64-byte MD5 chunks). */
#define VC_FP_BLOCK_MIN 512u
#define VC_FP_BLOCK_MAX 4096u

/* A digest: the algorithm's 16 bytes in its own order (fp_algo.h), 16-byte
 * aligned so that device code stores it as one uint4. */
struct vc_fp_digest {
	uint8_t b[16];
} __attribute__((aligned(16)));

/* One fingerprinting job. Addresses are device-visible (device.h): device
 * memory, or mapped host memory from host_alloc.
 *   blocks_dev  n uint64_t block addresses, 8-byte aligned, read once; a
 *               block may start anywhere (16-byte aligned ones take the
 *               fast loads on CUDA)
 *   out_dev     n digests (struct vc_fp_digest), 16-byte aligned: digest
 *               i is block i's; nothing else is written
 *   max_sms     CUDA: at most this many SMs work on the job (0: all); the
 *               emulated device ignores it
 * Trivially copyable: the CUDA launch takes it by value. */
struct vc_fp_job {
	uint64_t blocks_dev;
	uint64_t out_dev;
	uint32_t n;
	uint32_t block_size;
	uint32_t algo; /* enum vc_fp_algo */
	uint32_t max_sms;
};

struct vc_device;

/* Checks what a backend can check without touching the job's memory: a
 * known algorithm, a block size as above, and, when n > 0, both arrays
 * present and aligned. 0 or -EINVAL with a message (base/error.h). */
int vc_fp_check(const struct vc_fp_job *job);

/* Runs the job on device d to completion: the digests are in out_dev on
 * return. 0, -EINVAL (vc_fp_check), -VC_ENOTBUILT when the backend has no
 * fingerprinting, or the backend's device error (-VC_EDEVICE). n = 0 does
 * nothing. Thread-safe; jobs of several threads may run at once. Cost:
 * emu, the host reference's speed on one core; CUDA, a launch and a
 * synchronization (tens of microseconds) plus one block's sequential hash
 * per thread: docs/DEDUP.md gives the bound. */
int vc_fp_run(struct vc_device *d, const struct vc_fp_job *job);

/* --- the host reference (device/fp.c) ------------------------------------ */

/* MD5 of len bytes at p (any length, any alignment). */
void vc_fp_md5(const void *p, size_t len, struct vc_fp_digest *out);
/* MurmurHash3_x64_128 of len bytes at p with seed (any length, any
 * alignment). */
void vc_fp_murmur3(const void *p, size_t len, uint32_t seed, struct vc_fp_digest *out);
/* The lanes hash of len bytes at p (len a multiple of 16, any alignment):
 * vc_fp_lanes_avx512 where the CPU has AVX-512 F and DQ (about four times
 * the scalar form's speed), else vc_fp_lanes_scalar. Both are named for
 * the tests and bench/fingerprint; the avx512 one needs
 * vc_fp_lanes_avx512_ok() (else it is the scalar form). */
void vc_fp_lanes(const void *p, size_t len, struct vc_fp_digest *out);
void vc_fp_lanes_scalar(const void *p, size_t len, struct vc_fp_digest *out);
void vc_fp_lanes_avx512(const void *p, size_t len, struct vc_fp_digest *out);
bool vc_fp_lanes_avx512_ok(void);
/* Algo's digest of one block: size bytes at p (seed 0 for MurmurHash3;
 * size a multiple of 16 for the lanes hash). algo < VC_FP_ALGOS_ALL. */
void vc_fp_block(uint32_t algo, const void *p, size_t size, struct vc_fp_digest *out);

/* OpenSSL's MD5 of n contiguous blocks of size bytes (device/fp_openssl.c):
 * an implementation independent of ours, for the tests and the CPU
 * baseline of bench/fingerprint. 0, -EIO when OpenSSL fails (a FIPS
 * provider refuses MD5), or -VC_ENOTBUILT in a build without OpenSSL.
 * Cost: one context per call, then OpenSSL's speed. */
int vc_fp_md5_openssl(const void *p, uint32_t n, size_t size, struct vc_fp_digest *out);

#ifdef __cplusplus
}
#endif
#endif
