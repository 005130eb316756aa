/* Environment knobs (VC_*: measurement and diagnosis settings), one parser
 * for every layer. */
#ifndef VC_BASE_ENV_H
#define VC_BASE_ENV_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The knob `name` as a whole number in [lo, hi] (decimal, or 0x hex).
 * Unset or empty: dflt. Not a whole number, or below lo: dflt; above hi:
 * hi; either with a line on stderr naming the knob, so that a mistyped
 * experiment does not silently run with another setting. */
static inline uint64_t vc_env_u64(const char *name, uint64_t dflt, uint64_t lo, uint64_t hi)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return dflt;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end || *s == '-' || v < lo) {
		fprintf(stderr, "vramcache: %s=%s: not a whole number from %llu to %llu; using %llu\n",
			name, s, (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)dflt);
		return dflt;
	}
	if (v > hi) {
		fprintf(stderr, "vramcache: %s=%s: at most %llu; using that\n", name, s,
			(unsigned long long)hi);
		return hi;
	}
	return v;
}

static inline uint32_t vc_env_u32(const char *name, uint32_t dflt, uint32_t lo, uint32_t hi)
{
	return (uint32_t)vc_env_u64(name, dflt, lo, hi);
}

#endif
