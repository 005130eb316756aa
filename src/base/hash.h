/* 64-bit key mixing, shared by every hash table and by SHARDS sampling. */
#ifndef VC_HASH_H
#define VC_HASH_H

#include <stdint.h>

/* murmur3's fmix64: a bijection in which every key bit reaches every hash
 * bit, so consecutive page numbers spread evenly. SHARDS relies on the
 * output being close to uniform for "hash mod P < T" to sample a rate of
 * T/P of the keys. */
static inline uint64_t vc_mix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return k;
}

#endif
