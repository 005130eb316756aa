/* 64-bit key mixing, shared by every hash table, SHARDS sampling and the
 * MurmurHash3 block fingerprints (device/fp_algo.h, which nvcc also
 * compiles for device code: hence VC_HASH_FN). */
#ifndef VC_HASH_H
#define VC_HASH_H

#include <stdint.h>

#ifdef __CUDACC__
#define VC_HASH_FN static __host__ __device__ __forceinline__
#else
#define VC_HASH_FN static inline
#endif

/* murmur3's fmix64: a bijection in which every key bit reaches every hash
 * bit, so consecutive page numbers spread evenly. SHARDS relies on the
 * output being close to uniform for "hash mod P < T" to sample a rate of
 * T/P of the keys. */
#define VC_MIX64_SHIFT 33
#define VC_MIX64_M1 0xff51afd7ed558ccdull
#define VC_MIX64_M2 0xc4ceb9fe1a85ec53ull

VC_HASH_FN uint64_t vc_mix64(uint64_t k)
{
	k ^= k >> VC_MIX64_SHIFT;
	k *= VC_MIX64_M1;
	k ^= k >> VC_MIX64_SHIFT;
	k *= VC_MIX64_M2;
	k ^= k >> VC_MIX64_SHIFT;
	return k;
}

#endif
