/* The lanes hash (fp_algo.h) on the host, eight words at a time with
 * AVX-512 (F and DQ: 64-bit multiplies in vectors), for CPUs that have it:
 * vc_fp_lanes (fp.c) takes this path there. Same digest as the scalar
 * form: the state is a sum mod 2^64 of one term per word, so eight lanes
 * that each sum every eighth word, added at the end, give the same state.
 *
 * Why: a load of a page of a staged volume hashes it on the loading
 * thread (engine.h, eng_dd_note_load), on the readers' path. The scalar
 * form costs four dependent-free 64-bit multiplies a word, one at a time;
 * eight to a vector instruction it runs about four times faster (bench
 * /fingerprint's host rows; docs/DEDUP.md step 13).
 *
 * Per 128 bytes (eight words): two 64-byte loads, two permutes to split
 * them into the words' low and high halves, four vector multiplies, ten
 * shift-xors, and the keys by an add. x86-64 with GCC or Clang only (the target attribute);
 * elsewhere vc_fp_lanes_avx512_ok() is false and nothing here is built. */
#include "device/fp.h"

#include <stdint.h>
#include <string.h>

#include "base/env.h"
#include "base/hash.h"
#include "device/fp_algo.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define VC_AVX512 __attribute__((target("avx512f,avx512dq")))

bool vc_fp_lanes_avx512_ok(void)
{
	/* Decided once: what cpuid reports, unless VC_FP_AVX512=0 (for A/Bs
	 * against the scalar form). */
	static _Atomic int ok = -1;
	int v = ok;
	if (v < 0) {
		__builtin_cpu_init();
		v = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
		    vc_env_u32("VC_FP_AVX512", 1, 0, 1);
		ok = v;
	}
	return v;
}

/* vc_mix64 (base/hash.h) of eight words. */
VC_AVX512 static inline __m512i mix64_x8(__m512i x)
{
	x = _mm512_xor_si512(x, _mm512_srli_epi64(x, VC_MIX64_SHIFT));
	x = _mm512_mullo_epi64(x, _mm512_set1_epi64((long long)VC_MIX64_M1));
	x = _mm512_xor_si512(x, _mm512_srli_epi64(x, VC_MIX64_SHIFT));
	x = _mm512_mullo_epi64(x, _mm512_set1_epi64((long long)VC_MIX64_M2));
	return _mm512_xor_si512(x, _mm512_srli_epi64(x, VC_MIX64_SHIFT));
}

VC_AVX512 void vc_fp_lanes_avx512(const void *data, size_t len, struct vc_fp_digest *out)
{
	const uint8_t *p = data;
	const size_t words = len / 16, vec = words / 8 * 8;
	/* Word i's halves: lo at byte 16i, hi at 16i + 8. A 64-byte load
	 * holds four words, lo hi lo hi ...: the even 64-bit elements of the
	 * two loads are the eight lo, the odd ones the eight hi. */
	const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
	const __m512i odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
	const __m512i K = _mm512_set1_epi64((long long)VC_FP_LANES_K);
	/* Word i's key (i + 1) x P, mod 2^64: the next eight words' keys are
	 * these plus 8 x P, an add instead of a multiply. */
	const uint64_t P = VC_FP_LANES_P;
	const __m512i step = _mm512_set1_epi64((long long)(8 * P));
	__m512i key = _mm512_setr_epi64((long long)P, (long long)(2 * P), (long long)(3 * P),
					(long long)(4 * P), (long long)(5 * P), (long long)(6 * P),
					(long long)(7 * P), (long long)(8 * P));
	__m512i s1 = _mm512_setzero_si512(), s2 = _mm512_setzero_si512();
	for (size_t w = 0; w < vec; w += 8) {
		const __m512i a = _mm512_loadu_si512(p + 16 * w);
		const __m512i b = _mm512_loadu_si512(p + 16 * w + 64);
		const __m512i lo = _mm512_permutex2var_epi64(a, even, b);
		const __m512i hi = _mm512_permutex2var_epi64(a, odd, b);
		const __m512i rot = _mm512_rol_epi64(key, 32);
		s1 = _mm512_add_epi64(s1, mix64_x8(_mm512_xor_si512(lo, key)));
		s2 = _mm512_add_epi64(s2, mix64_x8(_mm512_xor_si512(_mm512_xor_si512(hi, rot), K)));
		key = _mm512_add_epi64(key, step);
	}
	/* The eight lanes' sums, added mod 2^64 (not _mm512_reduce_add_epi64,
	 * which GCC writes as signed long long additions: overflow there is
	 * undefined, and UBSan says so). */
	uint64_t l1[8], l2[8];
	_mm512_storeu_si512(l1, s1);
	_mm512_storeu_si512(l2, s2);
	struct vc_fp_lanes s = { 0, 0 };
	for (int k = 0; k < 8; k++)
		vc_fp_lanes_add(&s, l1[k], l2[k]);
	for (size_t w = vec; w < words; w++) { /* the last words, one at a time */
		uint64_t lo, hi;
		memcpy(&lo, p + 16 * w, 8); /* x86: little-endian */
		memcpy(&hi, p + 16 * w + 8, 8);
		vc_fp_lanes_word(&s, lo, hi, (uint32_t)w);
	}
	const struct vc_fp_mm3 h = vc_fp_lanes_final(s, len);
	memcpy(out->b, &h.h1, 8);
	memcpy(out->b + 8, &h.h2, 8);
}
#else
bool vc_fp_lanes_avx512_ok(void)
{
	return false;
}

void vc_fp_lanes_avx512(const void *data, size_t len, struct vc_fp_digest *out)
{
	vc_fp_lanes_scalar(data, len, out);
}
#endif
