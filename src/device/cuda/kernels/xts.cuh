/* AES-256-XTS on the GPU: building blocks for kernels that encrypt or
 * decrypt pages on their way (the parameters and the tweak arithmetic are
 * device/xts.h's; xts.cu is a kernel built from these).
 *
 * A kernel that uses them:
 *   1. passes the key by value (struct vc_xts_kparam, a kernel parameter);
 *   2. gives each block struct vc_xts_smem in dynamic shared memory
 *      (sizeof: 67 KiB; raise cudaFuncAttributeMaxDynamicSharedMemorySize)
 *      and calls vc_xts_setup<Enc> with every thread of the block (it has
 *      barriers); blockDim.x >= 256;
 *   3. per warp: vc_xts_tweak_encrypt turns page numbers into tweaks T,
 *      one page per lane, so a warp pays one AES per lane for 32 pages;
 *      vc_xts_unit encrypts or decrypts one page given its T (a warp per
 *      page, lane l on blocks l, l + 32, ..., as move.cu's pieces);
 *   4. calls vc_xts_wipe with every thread before it exits.
 *
 * Where key bytes are, and for how long: the 64 key bytes in the kernel's
 * parameter space (constant bank 0) for the launch; the driver stages
 * parameters through its own launch buffers (host and device memory it
 * manages and reuses), which no API lets us zero. The round keys (240
 * bytes each: K1's, K2's, and in the decryption layout K1's inverse) in
 * the block's shared memory from vc_xts_setup to vc_xts_wipe,
 * which zeroes them; the data key's round keys and the state in registers
 * while the block runs (not cleared at exit: no instruction does). Nothing
 * is written to global or local memory: local memory is device memory, so
 * the kernels must have no stack frame and no spills; the build makes
 * ptxas refuse xts.cu otherwise (CMakeLists.txt, --warn-on-local-memory-usage
 * as an error).
 *
 * Tables. AES by T-tables in shared memory, with the index computed so that
 * no two lanes ever hit the same bank: each of the 256 entries is 256
 * bytes, two slots of 32 copies (one per lane), so lane l reads entry x of
 * slot s at byte x * 256 + s * 128 + l * 4, bank l whatever x is. That
 * offset is one PRMT: byte k of the state word goes to bits 8..15 and the
 * lane's (slot * 128 + l * 4) to bits 0..7. 64 KiB per block:
 *   encryption  slot A = Te0, slot B = Te1 (Te2, Te3 are Te0, Te1 rotated
 *               by 16 bits: 2 rotations per column and round)
 *   decryption  slot A = Td0 (Td1..Td3 by rotation: 3 per column and
 *               round), slot B = S | InvS << 8 | 2S << 16 | 3S << 24: InvS
 *               for the last round, and Te0..Te3 (one PRMT each) for the
 *               tweak, which XTS always encrypts
 * Cost per 16-byte block (AES-256, 14 rounds): 224 conflict-free shared
 * loads, about 450 integer instructions (PRMT index, rotations, LOP3
 * xors). An SM's shared memory answers one warp-wide 32-bit load (128
 * bytes) per clock, so an SM does at most 32 blocks (512 B) per 224
 * clocks: ~2.3 B/clock, ~600 GB/s on an H100 SXM (132 SMs at 1.98 GHz) at
 * the ceiling; the integer pipes (64 lanes per clock per SM) bound it
 * about as tightly, so PRMT computing the whole address matters.
 * Round keys: the data key's are read into registers once per block
 * (vc_xts_keys_reg: 60 registers), so the loop reads only the tables; the
 * tweak key's are read from shared memory per round (vc_xts_keys_smem),
 * as the tweak is one AES per lane per 32 pages.
 *
 * Conventions: a state word is 4 bytes of the block as a little-endian
 * uint32 (column c = bytes 4c..4c+3, row r at bits 8r), as a uint4 load
 * gives it; round keys likewise.
 */
#ifndef VC_CUDA_XTS_CUH
#define VC_CUDA_XTS_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "base/secret.h"
#include "device/xts.h"
#include "device/cuda/kernels/xts_tables.cuh"

/* The key as a kernel parameter: read by field with constant indices only,
 * so it is never copied to local memory. */
struct vc_xts_kparam {
	uint4 w[4]; /* K1 = w[0], w[1]; K2 = w[2], w[3] */
};

/* A block's shared memory. The tables and S-boxes are public; rk, rkd, tk
 * hold key material from vc_xts_setup to vc_xts_wipe. */
struct vc_xts_smem {
	uint32_t tab[256 * 64]; /* entry x: [64x, 64x+32) slot A, [64x+32, 64x+64) slot B */
	uint4 rk[15];           /* K1's round keys (forward) */
	uint4 rkd[15];          /* decryption layout: the equivalent inverse cipher's */
	uint4 tk[15];           /* K2's round keys (forward) */
	uint32_t stage[2][256]; /* one copy of each slot, while the tables are filled */
	uint8_t sbox[256];
};

/* What a lane carries: the tables and its two slot offsets. */
struct vc_xts_lane {
	const unsigned char *tab; /* shared: vc_xts_smem.tab */
	uint32_t la, lb;          /* lane * 4, 128 + lane * 4 */
};

__device__ __forceinline__ vc_xts_lane vc_xts_lane_make(const vc_xts_smem &s)
{
	const uint32_t l = threadIdx.x & 31;
	return { reinterpret_cast<const unsigned char *>(s.tab), l * 4, 128 + l * 4 };
}

/* --- The setup ------------------------------------------------------- */

__device__ __forceinline__ uint32_t vc_gf8_xtime(uint32_t a)
{
	return ((a << 1) ^ ((a & 0x80) ? 0x1b : 0)) & 0xff;
}

__device__ __forceinline__ uint32_t vc_aes_sub_word(const uint8_t *sbox, uint32_t w)
{
	return sbox[w & 0xff] | (uint32_t)sbox[(w >> 8) & 0xff] << 8 |
	       (uint32_t)sbox[(w >> 16) & 0xff] << 16 | (uint32_t)sbox[w >> 24] << 24;
}

/* FIPS-197's AES-256 key expansion of k[0..8) into rk[0..15), by one
 * thread (7 rounds of 8 words; ~30 dependent shared loads). */
__device__ __forceinline__ void vc_aes256_expand(uint4 k0, uint4 k1, const uint8_t *sbox, uint4 *rk)
{
	uint32_t w[8] = { k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w };
	uint32_t rcon = 1;
	rk[0] = k0;
	rk[1] = k1;
#pragma unroll
	for (int r = 1; r <= 7; r++) {
		/* RotWord is a right rotation of the little-endian word. */
		const uint32_t t = vc_aes_sub_word(sbox, (w[7] >> 8) | (w[7] << 24)) ^ rcon;
		rcon = vc_gf8_xtime(rcon);
		w[0] ^= t, w[1] ^= w[0], w[2] ^= w[1], w[3] ^= w[2];
		rk[2 * r] = make_uint4(w[0], w[1], w[2], w[3]);
		if (r == 7)
			break;
		w[4] ^= vc_aes_sub_word(sbox, w[3]), w[5] ^= w[4], w[6] ^= w[5], w[7] ^= w[6];
		rk[2 * r + 1] = make_uint4(w[4], w[5], w[6], w[7]);
	}
}

__device__ __forceinline__ uint32_t *vc_u4_word(uint4 &v, int c)
{
	return c == 0 ? &v.x : c == 1 ? &v.y : c == 2 ? &v.z : &v.w;
}

/* Fills s for the encryption layout (Enc) or the decryption layout:
 * tables, K1's round keys (rk; the decryption layout adds the equivalent
 * inverse cipher's, FIPS-197 5.3.5, in rkd) and K2's (tk). A block set up
 * with the decryption layout can encrypt too (vc_xts_fwd_dec: a PRMT more
 * per lookup), so one kernel serves moves both ways.
 * Every thread of the block calls it; blockDim.x >= 256. Cost: 2 KiB of
 * the public tables (xts_tables.cuh) read from global memory (L2 after
 * the first launch), 64 KiB of shared stores (512 clocks of the SM's
 * shared-memory bandwidth), two serial key expansions beside them (~30
 * dependent shared loads each), and in the decryption layout 13 round
 * keys through InvMixColumns by table (4 lookups each): about a
 * microsecond per block. Inlined, so that key (the kernel's parameter) is
 * read in place, never copied. */
template <bool Enc>
__device__ __forceinline__ void vc_xts_setup(vc_xts_smem &s, const vc_xts_kparam &key)
{
	const uint32_t t = threadIdx.x, nt = blockDim.x;
	if (t < 256) {
		s.sbox[t] = vc_aes_sbox_tab[t];
		s.stage[0][t] = Enc ? vc_xts_enc_a[t] : vc_xts_dec_a[t];
		s.stage[1][t] = Enc ? vc_xts_enc_b[t] : vc_xts_dec_b[t];
	}
	__syncthreads();
	/* Consecutive threads write consecutive words; a warp reads one
	 * stage word (a broadcast). */
	for (uint32_t i = t; i < 256 * 64; i += nt)
		s.tab[i] = s.stage[(i >> 5) & 1][i >> 6];
	if (t == 0)
		vc_aes256_expand(key.w[0], key.w[1], s.sbox, s.rk);
	if (t == 32)
		vc_aes256_expand(key.w[2], key.w[3], s.sbox, s.tk);
	__syncthreads();
	if (!Enc) {
		/* InvMixColumns of a word by Td0 (stage A): Td0[S[b]] is the
		 * column that byte b alone in row 0 mixes to, and row k's
		 * byte's is it rotated left by 8k bits. */
		const int r = (int)(t >> 2), c = (int)(t & 3);
		if (t < 60) {
			const uint32_t w = *vc_u4_word(s.rk[14 - r], c);
			uint32_t m = w;
			if (r != 0 && r != 14) {
				m = 0;
#pragma unroll
				for (int k = 0; k < 4; k++) {
					const uint32_t d = s.stage[0][s.sbox[(w >> (8 * k)) & 0xff]];
					m ^= k ? (d << (8 * k)) | (d >> (32 - 8 * k)) : d;
				}
			}
			*vc_u4_word(s.rkd[r], c) = m;
		}
		__syncthreads();
	}
}

/* Zeroes the block's round keys. Every thread calls it, after its last use
 * of them. */
__device__ __forceinline__ void vc_xts_wipe(vc_xts_smem &s)
{
	__syncthreads();
	uint32_t *k = reinterpret_cast<uint32_t *>(s.rk); /* rk, rkd and tk: 180 words */
	for (uint32_t i = threadIdx.x; i < 180; i += blockDim.x)
		k[i] = 0;
}

/* --- Round keys ---------------------------------------------------------- */

/* In registers: loaded once, indexed only by unrolled round numbers. 60
 * registers: a kernel holding them runs one 512-thread block per SM. */
struct vc_xts_keys_reg {
	static constexpr int BLOCKS_PER_SM = 1;
	uint4 k[15];
	__device__ __forceinline__ explicit vc_xts_keys_reg(const uint4 *rk)
	{
#pragma unroll
		for (int r = 0; r < 15; r++)
			k[r] = rk[r];
	}
	__device__ __forceinline__ uint4 operator[](int r) const { return k[r]; }
};

/* In shared memory: one broadcast uint4 load per round (2 to 4 of the
 * shared pipe's clocks, beside the round's 16 table loads); registers for
 * two 512-thread blocks per SM. */
struct vc_xts_keys_smem {
	static constexpr int BLOCKS_PER_SM = 2;
	const uint4 *k;
	__device__ __forceinline__ explicit vc_xts_keys_smem(const uint4 *rk) : k(rk) {}
	__device__ __forceinline__ uint4 operator[](int r) const { return k[r]; }
};

/* --- Table lookups ------------------------------------------------------- */

/* The byte offset of entry (byte K of x) for the lane's slot offset lo:
 * byte 1 = x's byte K, byte 0 = lo, bytes 2-3 = lo's zero byte 1. */
template <int K>
__device__ __forceinline__ uint32_t vc_xts_lds(const vc_xts_lane &L, uint32_t x, uint32_t lo)
{
	const uint32_t off = __byte_perm(x, lo, 0x5504 | (K << 4));
	return *reinterpret_cast<const uint32_t *>(L.tab + off);
}

/* The lookups of one kind of round, as constants: for row r (the state
 * word's byte r), the slot read (Ar: A or B) and a PRMT selector applied
 * to the word read (Sr; 0x3210 keeps it, 0x1032 rotates by 16 bits, ...);
 * for the last round, the slot of rows 0-1 and of rows 2-3 (LastA01,
 * LastA23) and the selectors that pick each row's S-box byte into place.
 *   t_r(x)               the round's contribution of byte r of x
 *   last(a, b, c, d)     S(a.b0) | S(b.b1) << 8 | S(c.b2) << 16 | S(d.b3) << 24
 *                        (InvS for the inverse cipher) */
template <bool A0, uint32_t S0, bool A1, uint32_t S1, bool A2, uint32_t S2, bool A3, uint32_t S3,
	  bool LastA01, bool LastA23, uint32_t LastLo, uint32_t LastHi>
struct vc_xts_tables {
	template <int R, bool A, uint32_t S>
	static __device__ __forceinline__ uint32_t row(const vc_xts_lane &L, uint32_t x)
	{
		const uint32_t v = vc_xts_lds<R>(L, x, A ? L.la : L.lb);
		return S == 0x3210 ? v : __byte_perm(v, 0, S);
	}
	static __device__ __forceinline__ uint32_t t0(const vc_xts_lane &L, uint32_t x) { return row<0, A0, S0>(L, x); }
	static __device__ __forceinline__ uint32_t t1(const vc_xts_lane &L, uint32_t x) { return row<1, A1, S1>(L, x); }
	static __device__ __forceinline__ uint32_t t2(const vc_xts_lane &L, uint32_t x) { return row<2, A2, S2>(L, x); }
	static __device__ __forceinline__ uint32_t t3(const vc_xts_lane &L, uint32_t x) { return row<3, A3, S3>(L, x); }
	static __device__ __forceinline__ uint32_t last(const vc_xts_lane &L, uint32_t a, uint32_t b, uint32_t c,
							uint32_t d)
	{
		const uint32_t l01 = LastA01 ? L.la : L.lb, l23 = LastA23 ? L.la : L.lb;
		const uint32_t lo = __byte_perm(vc_xts_lds<0>(L, a, l01), vc_xts_lds<1>(L, b, l01), LastLo);
		const uint32_t hi = __byte_perm(vc_xts_lds<2>(L, c, l23), vc_xts_lds<3>(L, d, l23), LastHi);
		return __byte_perm(lo, hi, 0x7610);
	}
};

/* Forward rounds, encryption layout: Te_r(x), the MixColumns image of S(x)
 * in row r, is Te0 rotated left by 8r: Te0 and Te1 from their slots, Te2
 * and Te3 those rotated by 16. Last round: Te0 (2S, S, S, 3S) has S in
 * byte 1, Te1 (3S, 2S, S, S) in byte 2. */
using vc_xts_fwd_enc = vc_xts_tables<true, 0x3210, false, 0x3210, true, 0x1032, false, 0x1032,
				     true, false, 0x0051, 0x6200>;
/* Forward rounds, decryption layout (the tweak of a decrypting kernel):
 * slot B = (S, InvS, 2S, 3S), so Te0 = bytes (2, 0, 0, 3) of it and Te1..3
 * its rotations, one PRMT each; the last round takes its byte 0. */
using vc_xts_fwd_dec = vc_xts_tables<false, 0x3002, false, 0x0023, false, 0x0230, false, 0x2300,
				     false, false, 0x0040, 0x4000>;
/* Inverse rounds, decryption layout: Td_r(x), the InvMixColumns image of
 * InvS(x) in row r, is slot A's Td0 rotated left by 8r; the last round
 * takes InvS, slot B's byte 1. */
using vc_xts_inv = vc_xts_tables<true, 0x3210, true, 0x2103, true, 0x1032, true, 0x0321,
				 false, false, 0x0051, 0x5100>;

/* --- Blocks -------------------------------------------------------------- */

/* The 14 rounds of AES-256 on one block by T's lookups: the forward
 * cipher (T = vc_xts_fwd_enc or vc_xts_fwd_dec, Step = 1: row r of output
 * column c comes from column c + r, ShiftRows) or the equivalent inverse
 * cipher (T = vc_xts_inv, Step = 3: column c - r, InvShiftRows; k from a
 * decrypting vc_xts_setup). Unrolled: every index is a constant, so the
 * state stays in registers. */
template <class T, int Step, class K>
__device__ __forceinline__ uint4 vc_aes256_rounds(const vc_xts_lane &L, const K &k, uint4 v)
{
	uint4 rk = k[0];
	uint32_t s[4] = { v.x ^ rk.x, v.y ^ rk.y, v.z ^ rk.z, v.w ^ rk.w };
#pragma unroll
	for (int r = 1; r < 14; r++) {
		rk = k[r];
		const uint32_t key[4] = { rk.x, rk.y, rk.z, rk.w };
		uint32_t e[4];
#pragma unroll
		for (int c = 0; c < 4; c++)
			e[c] = T::t0(L, s[c]) ^ T::t1(L, s[(c + Step) & 3]) ^ T::t2(L, s[(c + 2 * Step) & 3]) ^
			       T::t3(L, s[(c + 3 * Step) & 3]) ^ key[c];
#pragma unroll
		for (int c = 0; c < 4; c++)
			s[c] = e[c];
	}
	rk = k[14];
	const uint32_t key[4] = { rk.x, rk.y, rk.z, rk.w };
	uint32_t o[4];
#pragma unroll
	for (int c = 0; c < 4; c++)
		o[c] = T::last(L, s[c], s[(c + Step) & 3], s[(c + 2 * Step) & 3], s[(c + 3 * Step) & 3]) ^ key[c];
	return make_uint4(o[0], o[1], o[2], o[3]);
}

__device__ __forceinline__ vc_xts_u128 vc_xts_from_u4(uint4 v)
{
	return { v.x | (uint64_t)v.y << 32, v.z | (uint64_t)v.w << 32 };
}

__device__ __forceinline__ uint4 vc_xts_to_u4(vc_xts_u128 t)
{
	return make_uint4((uint32_t)t.lo, (uint32_t)(t.lo >> 32), (uint32_t)t.hi, (uint32_t)(t.hi >> 32));
}

/* T = AES-256(K2, tweak block of unit i), for one lane (any lanes may
 * call it at once, each with its own i). Enc names the layout in shared
 * memory (the kernel's direction); XTS encrypts the tweak either way. */
template <bool Enc>
__device__ __forceinline__ uint4 vc_xts_tweak_encrypt(const vc_xts_lane &L, const vc_xts_smem &s,
						      uint64_t i)
{
	const vc_xts_keys_smem k(s.tk);
	const uint4 b = vc_xts_to_u4(vc_xts_tweak_block(i));
	if (Enc)
		return vc_aes256_rounds<vc_xts_fwd_enc, 1>(L, k, b);
	return vc_aes256_rounds<vc_xts_fwd_dec, 1>(L, k, b);
}

/* One block of a unit: x with its tweak t (T * alpha^j for block j),
 * encrypted (Enc) or decrypted, in a block set up with the encryption
 * layout (LayoutEnc, which only encrypts) or the decryption layout; k is
 * rk to encrypt, rkd to decrypt. */
template <bool LayoutEnc, bool Enc, class K>
__device__ __forceinline__ uint4 vc_xts_block_in(const vc_xts_lane &L, const K &k, uint4 x, uint4 t)
{
	static_assert(Enc || !LayoutEnc, "the encryption layout cannot decrypt");
	x.x ^= t.x, x.y ^= t.y, x.z ^= t.z, x.w ^= t.w;
	uint4 y = !Enc ? vc_aes256_rounds<vc_xts_inv, 3>(L, k, x)
		: LayoutEnc ? vc_aes256_rounds<vc_xts_fwd_enc, 1>(L, k, x)
			    : vc_aes256_rounds<vc_xts_fwd_dec, 1>(L, k, x);
	y.x ^= t.x, y.y ^= t.y, y.z ^= t.z, y.w ^= t.w;
	return y;
}

template <bool Enc, class K>
__device__ __forceinline__ uint4 vc_xts_block(const vc_xts_lane &L, const K &k, uint4 x, uint4 t)
{
	return vc_xts_block_in<Enc, Enc>(L, k, x, t);
}

/* One unit (page) of nblocks 16-byte blocks (a power of two, 1..256) from
 * src to dst (the same, or not overlapping), by the whole warp: T, the
 * page's encrypted tweak, is the same in every lane. Lane l does blocks l,
 * l + 32, ... (each warp access covers 512 contiguous bytes), loading its
 * next block before it computes this one, so the load's latency hides
 * under the AES; lanes l >= nblocks (pages under 512 B) do nothing. Its
 * tweak starts at T * alpha^l and steps by alpha^32. Hint: move.cu's
 * cache policy (piece.cuh). Cost: nblocks / 32 AES per lane, 2 x 16 bytes
 * of memory traffic per block, ~10 instructions of tweak arithmetic. */
template <bool Enc, class Hint, class K>
__device__ __forceinline__ void vc_xts_unit(const vc_xts_lane &L, const K &k, uint4 T,
					    const uint4 *src, uint4 *dst, uint32_t nblocks)
{
	uint32_t j = threadIdx.x & 31;
	if (j >= nblocks)
		return;
	vc_xts_u128 t = vc_xts_mul_alpha_pow(vc_xts_from_u4(T), j);
	uint4 x = Hint::ld(src + j);
	for (;;) {
		const uint32_t jn = j + 32;
		uint4 xn = x;
		if (jn < nblocks)
			xn = Hint::ld(src + jn);
		Hint::st(dst + j, vc_xts_block<Enc>(L, k, x, vc_xts_to_u4(t)));
		if (jn >= nblocks)
			break;
		t = vc_xts_mul_alpha_pow(t, 32);
		x = xn;
		j = jn;
	}
}

/* A move's piece with the cipher on the way (move.cu, server.cu): the
 * unit of V x 512 bytes at src, encrypted (Enc) or decrypted with T, its
 * encrypted tweak, to dst, by the whole warp. As piece.cuh's move: lane l
 * owns the 16-byte words l, l + 32, ..., each access covers 512
 * contiguous bytes, and all V loads are issued before the first cipher
 * step, so the loads' latency (a PCIe read when src is host memory) is
 * paid once per piece, and the V blocks' AES are independent work for
 * the scheduler. Layout: the block's (vc_xts_setup); k: rk to encrypt,
 * rkd to decrypt. Cost: V AES per lane, ~8 instructions of tweak
 * arithmetic per block; registers: 4V for the data. */
template <int V, class Hint>
__device__ __forceinline__ void vc_xts_piece_ld(const uint4 *src, uint4 (&a)[V])
{
#pragma unroll
	for (int v = 0; v < V; v++)
		a[v] = Hint::ld(src + 32 * v);
}

/* A tap on vc_xts_piece_run: tap(v, p) is called once for each of the
 * lane's words, v = 0 .. V-1 in order, with p the word's plaintext (the
 * input when encrypting, the output when decrypting), in the same
 * iteration as the word's AES, so that work on the plaintext (a
 * fingerprint, fp_lanes.cuh's vc_fp_lanes_tap; a compare) interleaves
 * with the cipher instead of running as a pass of its own before the
 * first AES or after the last. The tap sees registers only. */
struct vc_xts_no_tap {
	__device__ __forceinline__ void operator()(int, uint4) const {}
};

/* vc_xts_piece's cipher and stores, over the words a lane loaded
 * (vc_xts_piece_ld): a kernel may load a piece before its setup. Each
 * word's plaintext goes to tap beside its AES (above). */
template <int V, bool LayoutEnc, bool Enc, class Hint, class K, class Tap>
__device__ __forceinline__ void vc_xts_piece_run(const vc_xts_lane &L, const K &k, uint4 T,
						 const uint4 (&a)[V], uint4 *dst, Tap &tap)
{
	vc_xts_u128 t = vc_xts_mul_alpha_pow(vc_xts_from_u4(T), threadIdx.x & 31);
#pragma unroll
	for (int v = 0; v < V; v++) {
		const uint4 y = vc_xts_block_in<LayoutEnc, Enc>(L, k, a[v], vc_xts_to_u4(t));
		tap(v, Enc ? a[v] : y);
		Hint::st(dst + 32 * v, y);
		t = vc_xts_mul_alpha_pow(t, 32);
	}
}

template <int V, bool LayoutEnc, bool Enc, class Hint, class K>
__device__ __forceinline__ void vc_xts_piece_run(const vc_xts_lane &L, const K &k, uint4 T,
						 const uint4 (&a)[V], uint4 *dst)
{
	vc_xts_no_tap none;
	vc_xts_piece_run<V, LayoutEnc, Enc, Hint>(L, k, T, a, dst, none);
}

template <int V, bool LayoutEnc, bool Enc, class Hint, class K>
__device__ __forceinline__ void vc_xts_piece(const vc_xts_lane &L, const K &k, uint4 T,
					     const uint4 *src, uint4 *dst)
{
	uint4 a[V];
	vc_xts_piece_ld<V, Hint>(src, a);
	vc_xts_piece_run<V, LayoutEnc, Enc, Hint>(L, k, T, a, dst);
}

/* The key as a kernel parameter from the host's key (no other copy). */
static inline vc_xts_kparam vc_xts_kparam_of(const struct vc_xts_key *key)
{
	vc_xts_kparam kp;
	static_assert(sizeof kp == sizeof *key, "the key is four uint4");
	memcpy(&kp, key->bytes, sizeof kp);
	return kp;
}


#endif
