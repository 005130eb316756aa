/* The fingerprint algorithms' building blocks, for host code and
 * device code alike (plain C; nvcc compiles them for both sides, so the host
 * reference, the emulated device and the CUDA kernel share one definition
 * and differ only in how bytes reach them).
 *
 *   MD5         RFC 1321 (DEDU's fingerprint): a 4-word state, one
 *               compression per 64-byte chunk of sixteen little-endian
 *               32-bit words, 64 steps
 *   MurmurHash3 x64_128 (Austin Appleby, SMHasher): a 2 x 64-bit state,
 *               one mixing round per 16-byte chunk of two little-endian
 *               64-bit words, then the tail and the finalizer
 *
 * Both are sequential over a block: chunk k needs the state of chunk k - 1.
 * Costs per byte in 32-bit integer instructions (what a GPU lane executes;
 * 64-bit multiplies and rotations are several each): MD5 about 9 (64 steps
 * of ~9 per 64 bytes), MurmurHash3 about 2.5 (~40 per 16 bytes). Neither
 * touches memory beyond its arguments, so device code keeps the state and
 * the chunk in registers when the chunk's words are indexed by constants.
 *
 * The digest's bytes (struct vc_fp_digest, device/fp.h): MD5's A, B, C, D
 * little-endian (RFC 1321 section 3.5); MurmurHash3's h1 then h2
 * little-endian (SMHasher's ((uint64_t *)out)[0] = h1 on a little-endian
 * machine). Host and GPU are little-endian: lo = the first 8 bytes. */
#ifndef VC_DEVICE_FP_ALGO_H
#define VC_DEVICE_FP_ALGO_H

#include <stdint.h>

#include "base/hash.h" /* vc_mix64: MurmurHash3's fmix64 */

#ifdef __CUDACC__
#define VC_FP_FN static __host__ __device__ __forceinline__
#else
#define VC_FP_FN static inline
#endif

/* --- MD5 (RFC 1321) --------------------------------------------------- */

struct vc_fp_md5 {
	uint32_t a, b, c, d;
};

VC_FP_FN uint32_t vc_fp_rotl32(uint32_t x, unsigned r)
{
	return (x << r) | (x >> (32 - r)); /* r in 1..31 */
}

VC_FP_FN struct vc_fp_md5 vc_fp_md5_init(void)
{
	struct vc_fp_md5 s = { 0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u };
	return s;
}

/* RFC 1321 section 3.4's auxiliary functions; F and G in their
 * select forms (one fewer operation, same value). */
#define VC_FP_MD5_F(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define VC_FP_MD5_G(x, y, z) ((y) ^ ((z) & ((x) ^ (y))))
#define VC_FP_MD5_H(x, y, z) ((x) ^ (y) ^ (z))
#define VC_FP_MD5_I(x, y, z) ((y) ^ ((x) | ~(z)))
/* a = b + ((a + f(b, c, d) + word + T[i]) <<< s); T[i] = floor(2^32 |sin(i)|). */
#define VC_FP_MD5_STEP(f, a, b, c, d, w, s, t) \
	(a) = (b) + vc_fp_rotl32((a) + VC_FP_MD5_##f(b, c, d) + (w) + (t), (s))

/* One 64-byte chunk, m[0..15] its little-endian words. Cost: 64 steps,
 * about 600 integer instructions; no memory beyond m. */
VC_FP_FN void vc_fp_md5_chunk(struct vc_fp_md5 *st, const uint32_t m[16])
{
	uint32_t a = st->a, b = st->b, c = st->c, d = st->d;
	VC_FP_MD5_STEP(F, a, b, c, d, m[ 0],  7, 0xd76aa478u);
	VC_FP_MD5_STEP(F, d, a, b, c, m[ 1], 12, 0xe8c7b756u);
	VC_FP_MD5_STEP(F, c, d, a, b, m[ 2], 17, 0x242070dbu);
	VC_FP_MD5_STEP(F, b, c, d, a, m[ 3], 22, 0xc1bdceeeu);
	VC_FP_MD5_STEP(F, a, b, c, d, m[ 4],  7, 0xf57c0fafu);
	VC_FP_MD5_STEP(F, d, a, b, c, m[ 5], 12, 0x4787c62au);
	VC_FP_MD5_STEP(F, c, d, a, b, m[ 6], 17, 0xa8304613u);
	VC_FP_MD5_STEP(F, b, c, d, a, m[ 7], 22, 0xfd469501u);
	VC_FP_MD5_STEP(F, a, b, c, d, m[ 8],  7, 0x698098d8u);
	VC_FP_MD5_STEP(F, d, a, b, c, m[ 9], 12, 0x8b44f7afu);
	VC_FP_MD5_STEP(F, c, d, a, b, m[10], 17, 0xffff5bb1u);
	VC_FP_MD5_STEP(F, b, c, d, a, m[11], 22, 0x895cd7beu);
	VC_FP_MD5_STEP(F, a, b, c, d, m[12],  7, 0x6b901122u);
	VC_FP_MD5_STEP(F, d, a, b, c, m[13], 12, 0xfd987193u);
	VC_FP_MD5_STEP(F, c, d, a, b, m[14], 17, 0xa679438eu);
	VC_FP_MD5_STEP(F, b, c, d, a, m[15], 22, 0x49b40821u);
	VC_FP_MD5_STEP(G, a, b, c, d, m[ 1],  5, 0xf61e2562u);
	VC_FP_MD5_STEP(G, d, a, b, c, m[ 6],  9, 0xc040b340u);
	VC_FP_MD5_STEP(G, c, d, a, b, m[11], 14, 0x265e5a51u);
	VC_FP_MD5_STEP(G, b, c, d, a, m[ 0], 20, 0xe9b6c7aau);
	VC_FP_MD5_STEP(G, a, b, c, d, m[ 5],  5, 0xd62f105du);
	VC_FP_MD5_STEP(G, d, a, b, c, m[10],  9, 0x02441453u);
	VC_FP_MD5_STEP(G, c, d, a, b, m[15], 14, 0xd8a1e681u);
	VC_FP_MD5_STEP(G, b, c, d, a, m[ 4], 20, 0xe7d3fbc8u);
	VC_FP_MD5_STEP(G, a, b, c, d, m[ 9],  5, 0x21e1cde6u);
	VC_FP_MD5_STEP(G, d, a, b, c, m[14],  9, 0xc33707d6u);
	VC_FP_MD5_STEP(G, c, d, a, b, m[ 3], 14, 0xf4d50d87u);
	VC_FP_MD5_STEP(G, b, c, d, a, m[ 8], 20, 0x455a14edu);
	VC_FP_MD5_STEP(G, a, b, c, d, m[13],  5, 0xa9e3e905u);
	VC_FP_MD5_STEP(G, d, a, b, c, m[ 2],  9, 0xfcefa3f8u);
	VC_FP_MD5_STEP(G, c, d, a, b, m[ 7], 14, 0x676f02d9u);
	VC_FP_MD5_STEP(G, b, c, d, a, m[12], 20, 0x8d2a4c8au);
	VC_FP_MD5_STEP(H, a, b, c, d, m[ 5],  4, 0xfffa3942u);
	VC_FP_MD5_STEP(H, d, a, b, c, m[ 8], 11, 0x8771f681u);
	VC_FP_MD5_STEP(H, c, d, a, b, m[11], 16, 0x6d9d6122u);
	VC_FP_MD5_STEP(H, b, c, d, a, m[14], 23, 0xfde5380cu);
	VC_FP_MD5_STEP(H, a, b, c, d, m[ 1],  4, 0xa4beea44u);
	VC_FP_MD5_STEP(H, d, a, b, c, m[ 4], 11, 0x4bdecfa9u);
	VC_FP_MD5_STEP(H, c, d, a, b, m[ 7], 16, 0xf6bb4b60u);
	VC_FP_MD5_STEP(H, b, c, d, a, m[10], 23, 0xbebfbc70u);
	VC_FP_MD5_STEP(H, a, b, c, d, m[13],  4, 0x289b7ec6u);
	VC_FP_MD5_STEP(H, d, a, b, c, m[ 0], 11, 0xeaa127fau);
	VC_FP_MD5_STEP(H, c, d, a, b, m[ 3], 16, 0xd4ef3085u);
	VC_FP_MD5_STEP(H, b, c, d, a, m[ 6], 23, 0x04881d05u);
	VC_FP_MD5_STEP(H, a, b, c, d, m[ 9],  4, 0xd9d4d039u);
	VC_FP_MD5_STEP(H, d, a, b, c, m[12], 11, 0xe6db99e5u);
	VC_FP_MD5_STEP(H, c, d, a, b, m[15], 16, 0x1fa27cf8u);
	VC_FP_MD5_STEP(H, b, c, d, a, m[ 2], 23, 0xc4ac5665u);
	VC_FP_MD5_STEP(I, a, b, c, d, m[ 0],  6, 0xf4292244u);
	VC_FP_MD5_STEP(I, d, a, b, c, m[ 7], 10, 0x432aff97u);
	VC_FP_MD5_STEP(I, c, d, a, b, m[14], 15, 0xab9423a7u);
	VC_FP_MD5_STEP(I, b, c, d, a, m[ 5], 21, 0xfc93a039u);
	VC_FP_MD5_STEP(I, a, b, c, d, m[12],  6, 0x655b59c3u);
	VC_FP_MD5_STEP(I, d, a, b, c, m[ 3], 10, 0x8f0ccc92u);
	VC_FP_MD5_STEP(I, c, d, a, b, m[10], 15, 0xffeff47du);
	VC_FP_MD5_STEP(I, b, c, d, a, m[ 1], 21, 0x85845dd1u);
	VC_FP_MD5_STEP(I, a, b, c, d, m[ 8],  6, 0x6fa87e4fu);
	VC_FP_MD5_STEP(I, d, a, b, c, m[15], 10, 0xfe2ce6e0u);
	VC_FP_MD5_STEP(I, c, d, a, b, m[ 6], 15, 0xa3014314u);
	VC_FP_MD5_STEP(I, b, c, d, a, m[13], 21, 0x4e0811a1u);
	VC_FP_MD5_STEP(I, a, b, c, d, m[ 4],  6, 0xf7537e82u);
	VC_FP_MD5_STEP(I, d, a, b, c, m[11], 10, 0xbd3af235u);
	VC_FP_MD5_STEP(I, c, d, a, b, m[ 2], 15, 0x2ad7d2bbu);
	VC_FP_MD5_STEP(I, b, c, d, a, m[ 9], 21, 0xeb86d391u);
	st->a += a;
	st->b += b;
	st->c += c;
	st->d += d;
}

/* The last chunk of a message of len bytes, len a multiple of 64: the
 * padding alone (0x80, zeros, the length in bits), RFC 1321 sections
 * 3.1-3.2. For the fixed block sizes it is a constant the compiler folds. */
VC_FP_FN void vc_fp_md5_pad_chunk(uint32_t m[16], uint64_t len)
{
	for (int i = 0; i < 16; i++)
		m[i] = 0;
	m[0] = 0x80u;
	m[14] = (uint32_t)(len << 3);
	m[15] = (uint32_t)(len >> 29);
}

/* --- MurmurHash3_x64_128 ------------------------------------------------- */

struct vc_fp_mm3 {
	uint64_t h1, h2;
};

#define VC_FP_MM3_C1 0x87c37b91114253d5ull
#define VC_FP_MM3_C2 0x4cf5ad432745937full

VC_FP_FN uint64_t vc_fp_rotl64(uint64_t x, unsigned r)
{
	return (x << r) | (x >> (64 - r)); /* r in 1..63 */
}

VC_FP_FN struct vc_fp_mm3 vc_fp_mm3_init(uint32_t seed)
{
	struct vc_fp_mm3 s = { seed, seed };
	return s;
}

/* The tail's and the body's key mixing, each half alone. */
VC_FP_FN uint64_t vc_fp_mm3_mix_k1(uint64_t k1)
{
	return vc_fp_rotl64(k1 * VC_FP_MM3_C1, 31) * VC_FP_MM3_C2;
}

VC_FP_FN uint64_t vc_fp_mm3_mix_k2(uint64_t k2)
{
	return vc_fp_rotl64(k2 * VC_FP_MM3_C2, 33) * VC_FP_MM3_C1;
}

/* One 16-byte chunk, k1 its first 8 bytes and k2 its last, little-endian.
 * Cost: 4 64-bit multiplies (3 32-bit multiply-adds each on a GPU lane),
 * 4 rotations, a few adds and xors. */
VC_FP_FN void vc_fp_mm3_chunk(struct vc_fp_mm3 *s, uint64_t k1, uint64_t k2)
{
	uint64_t h1 = s->h1, h2 = s->h2;
	h1 ^= vc_fp_mm3_mix_k1(k1);
	h1 = vc_fp_rotl64(h1, 27);
	h1 += h2;
	h1 = h1 * 5 + 0x52dce729u;
	h2 ^= vc_fp_mm3_mix_k2(k2);
	h2 = vc_fp_rotl64(h2, 31);
	h2 += h1;
	h2 = h2 * 5 + 0x38495ab5u;
	s->h1 = h1;
	s->h2 = h2;
}

/* The finalizer, after every chunk and the tail (len: the message's
 * bytes); the state becomes the digest's two words. */
VC_FP_FN void vc_fp_mm3_final(struct vc_fp_mm3 *s, uint64_t len)
{
	uint64_t h1 = s->h1 ^ len, h2 = s->h2 ^ len;
	h1 += h2;
	h2 += h1;
	h1 = vc_mix64(h1);
	h2 = vc_mix64(h2);
	h1 += h2;
	h2 += h1;
	s->h1 = h1;
	s->h2 = h2;
}

/* --- the lanes hash (VC_FP_LANES) ----------------------------------------
 *
 * For blocks of a multiple of 16 bytes. Word i (bytes 16i .. 16i + 15) is
 * lo, hi (little-endian 64-bit halves); with its position key
 * p = (i + 1) x 0x9e3779b97f4a7c15 (the golden ratio's odd 64-bit
 * multiplier, so every position gets a distinct, well-spread key):
 *     s1 += fmix64(lo ^ p)
 *     s2 += fmix64(hi ^ rotl(p, 32) ^ 0x6a09e667f3bcc908)
 * (fmix64 = vc_mix64, MurmurHash3's finalizer: full avalanche of its
 * 64-bit input). The state (s1, s2) starts at zero; sums are mod 2^64, so
 * the order words are added in does not matter: a warp's lanes each sum
 * their own words and add the 32 partial states by shuffles, and a block
 * whose words are spread over a thread block adds them in shared memory.
 * Moving a word changes its key, so reordered blocks differ. Then, len the
 * block's bytes, MurmurHash3's finalizer over (s1 ^ len, s2 ^ len): the
 * digest is h1 then h2, little-endian, as MurmurHash3's.
 *
 * Quality: a sum of independent well-mixed 64-bit values per half; for
 * ordinary (non-adversarial) data two different blocks agree on a half
 * with probability about 2^-64, which a dedup hint needs (a match is
 * compared byte for byte before anything is shared). It is not a
 * cryptographic hash and is not meant to resist chosen collisions.
 * Cost per 16-byte word: four 64-bit multiplies, six shift-xors, two
 * adds (about as much as MurmurHash3's chunk), with no dependency between
 * words, so a lane keeps its loads in flight while it hashes. */

struct vc_fp_lanes {
	uint64_t s1, s2;
};

#define VC_FP_LANES_P 0x9e3779b97f4a7c15ull
#define VC_FP_LANES_K 0x6a09e667f3bcc908ull

/* Word lo, hi with its position key p = (i + 1) x P (a caller walking
 * the words in order adds P a word instead of multiplying). */
VC_FP_FN void vc_fp_lanes_word_key(struct vc_fp_lanes *s, uint64_t lo, uint64_t hi, uint64_t p)
{
	s->s1 += vc_mix64(lo ^ p);
	s->s2 += vc_mix64(hi ^ vc_fp_rotl64(p, 32) ^ VC_FP_LANES_K);
}

VC_FP_FN void vc_fp_lanes_word(struct vc_fp_lanes *s, uint64_t lo, uint64_t hi, uint32_t i)
{
	vc_fp_lanes_word_key(s, lo, hi, (uint64_t)(i + 1) * VC_FP_LANES_P);
}

/* Two partial states of one block (disjoint words) as one. */
VC_FP_FN void vc_fp_lanes_add(struct vc_fp_lanes *s, uint64_t s1, uint64_t s2)
{
	s->s1 += s1;
	s->s2 += s2;
}

/* The digest's two words (h1, h2) of a block of len bytes from its whole
 * state. */
VC_FP_FN struct vc_fp_mm3 vc_fp_lanes_final(struct vc_fp_lanes s, uint64_t len)
{
	struct vc_fp_mm3 h = { s.s1, s.s2 };
	vc_fp_mm3_final(&h, len);
	return h;
}

#endif
