/* The GPU clients' size argument: bytes, or a number with K, M, G or T
 * (binary). Returns 0, or -1 for anything else. */
#ifndef VC_GPU_SIZE_H
#define VC_GPU_SIZE_H

#include <stdint.h>
#include <stdlib.h>

static inline int gpu_parse_size(const char *s, uint64_t *out)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -1;
	double v = strtod(s, &end);
	int shift = 0;
	switch (*end) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	case '\0': break;
	default: return -1;
	}
	if (*end || v <= 0)
		return -1;
	*out = (uint64_t)(v * (double)(1ull << shift));
	return *out ? 0 : -1;
}

#endif
