/* xorshift64*: a fast, seedable generator for workloads, tests and
 * benchmarks (not for anything that needs unpredictability). State must
 * start non-zero. */
#ifndef VC_RAND_H
#define VC_RAND_H

#include <stdint.h>

static inline uint64_t vc_rand64(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

#endif
