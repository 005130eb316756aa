/* AES-256-XTS for GPU-resident pages (BAG section 3.5): the parameters both
 * backends share, and the tweak arithmetic, for host code and device code
 * alike (plain C; nvcc compiles the helpers for both sides).
 *
 * The cipher is dm-crypt's aes-xts-plain64 (IEEE 1619-2018, NIST SP
 * 800-38E) with one cache page as the data unit:
 *   key       64 bytes: K1 (bytes 0..31) the data key, K2 (32..63) the
 *             tweak key, two AES-256 keys; OpenSSL's EVP_aes_256_xts
 *             takes the same 64 bytes in the same order
 *   tweak     the page's 64-bit number, little-endian, in bytes 0..7 of
 *             the 16-byte tweak block, zeros after ("plain64"); the
 *             caller chooses the number (the engine: volume and page,
 *             never the slot, so ciphertext moves without re-encryption)
 *   unit      page_size bytes, a power of two in [VC_XTS_UNIT_MIN,
 *             VC_XTS_UNIT_MAX]: a whole number of 16-byte blocks, so no
 *             ciphertext stealing
 * Block j of a unit with tweak i is, with T = AES-256(K2, tweak block of i)
 * and T_j = T * alpha^j in GF(2^128):
 *   C_j = AES-256(K1, P_j ^ T_j) ^ T_j        P_j = AES-256^-1(K1, C_j ^ T_j) ^ T_j
 * XTS hides content; it does not detect changes (a changed ciphertext block
 * decrypts to 16 unpredictable bytes, silently), and equal plaintext in the
 * same page and block position under the same tweak gives equal ciphertext.
 *
 * Backends: device/emu/xts.c (OpenSSL, host memory: vc_emu_xts_pages,
 * below) and device/cuda/kernels/xts.cu (vc_cuda_xts_pages, declared in
 * device/cuda/kernels/xts_launch.h; its device building blocks for other
 * kernels in xts.cuh).
 */
#ifndef VC_DEVICE_XTS_H
#define VC_DEVICE_XTS_H

#include <stdint.h>

#ifdef __CUDACC__
#define VC_XTS_FN static __host__ __device__ __forceinline__
#else
#define VC_XTS_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define VC_XTS_KEY_BYTES 64
#define VC_XTS_BLOCK 16
/* The data unit's bounds. 4 KiB at most: dm-crypt's largest sector, and the
 * move kernel's largest piece (device/cuda/kernels/move.cu), so that a warp
 * never spans two units (small batches split a unit over several warps,
 * each starting its tweak at T * alpha^first block); a larger cache page is
 * several units, each with its own tweak (as dm-crypt numbers the sectors
 * of a bio). */
#define VC_XTS_UNIT_MIN 16u
#define VC_XTS_UNIT_MAX 4096u

/* The key, 16-byte aligned so that device code reads it as four uint4. */
struct vc_xts_key {
	uint8_t bytes[VC_XTS_KEY_BYTES];
} __attribute__((aligned(16)));

/* A 16-byte block as a little-endian 128-bit integer (IEEE 1619's
 * convention): bytes 0..7 are lo, least significant first. Loading the
 * block's bytes as two little-endian uint64_t gives exactly this. */
struct vc_xts_u128 {
	uint64_t lo, hi;
};

/* The tweak block of unit number i ("plain64"). */
VC_XTS_FN struct vc_xts_u128 vc_xts_tweak_block(uint64_t i)
{
	struct vc_xts_u128 t = { i, 0 };
	return t;
}

/* t * alpha^k in GF(2^128) modulo x^128 + x^7 + x^2 + x + 1, for 0 <= k <=
 * 57: a shift by k bits, and the k bits shifted out, c, folded back as
 * c * (x^7 + x^2 + x + 1), which has degree below 64 for k <= 57, so it
 * lands in lo alone. Cost: a few shifts and xors, whatever k is; k = 1 is
 * IEEE 1619's multiplication by alpha, k = 32 a step of 32 blocks (one per
 * lane of a warp). */
VC_XTS_FN struct vc_xts_u128 vc_xts_mul_alpha_pow(struct vc_xts_u128 t, unsigned k)
{
	/* (x >> 1) >> (63 - k): no shift by 64 when k = 0. */
	const uint64_t c = (t.hi >> 1) >> (63 - k);
	struct vc_xts_u128 r;
	r.hi = (t.hi << k) | ((t.lo >> 1) >> (63 - k));
	r.lo = (t.lo << k) ^ c ^ (c << 1) ^ (c << 2) ^ (c << 7);
	return r;
}

/* t * alpha^j for any j: steps of at most 56. Cost: ceil(j / 56) of the
 * above (a block's offset in a 4 KiB unit, j < 256: at most 5). */
VC_XTS_FN struct vc_xts_u128 vc_xts_mul_alpha_any(struct vc_xts_u128 t, uint32_t j)
{
	for (; j > 56; j -= 56)
		t = vc_xts_mul_alpha_pow(t, 56);
	return vc_xts_mul_alpha_pow(t, j);
}

/* Checks what both backends require before touching data: a key whose two
 * halves differ (IEEE 1619-2018 and NIST SP 800-38E require independent
 * K1 and K2; OpenSSL refuses equal ones) and a page size as above. 0, or
 * -EINVAL with a message (base/error.h). Cost: 32 byte compares. */
int vc_xts_check(const struct vc_xts_key *key, uint32_t page_size);

/* The emulated device's cipher (device/emu/xts.c, OpenSSL's
 * EVP_aes_256_xts): encrypts (encrypt != 0) or decrypts in place the n
 * pages of page_size bytes at `pages` (host memory), page p with tweak
 * tweaks[p]. 0, -EINVAL (vc_xts_check), -ENOMEM, -EIO when OpenSSL fails,
 * or -VC_ENOTBUILT when this build has no OpenSSL. Thread-safe: every call
 * keys its own OpenSSL context and frees it (OpenSSL zeroes the key
 * schedule on free). Cost: one key schedule per call, then OpenSSL's
 * AES-NI speed (about 6.8 GB/s per core on the H100 machine's CPU). */
int vc_emu_xts_pages(const struct vc_xts_key *key, void *pages, const uint64_t *tweaks,
		     uint32_t n, uint32_t page_size, int encrypt);

#ifdef __cplusplus
}
#endif
#endif
