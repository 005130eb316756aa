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
VC_HASH_FN uint64_t vc_mix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return k;
}

#endif
