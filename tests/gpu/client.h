/* What the GPU clients of tests/shim_gpu.sh share: their arguments and a
 * context made before the allocation, so that a failure is the
 * allocation's and not the context's. */
#ifndef VC_GPU_CLIENT_H
#define VC_GPU_CLIENT_H

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Bytes, or a number with K, M, G or T (binary): 0, or -1 for anything else. */
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

struct gpu_client {
	uint64_t size; /* what to allocate */
	int hold;      /* seconds to hold it */
};

/* argv: SIZE [HOLD_SECONDS]. Makes device 0's primary context current and
 * says how much is free; exits 1 on bad usage or without a device. */
static inline struct gpu_client gpu_client_start(int argc, char **argv)
{
	struct gpu_client c = { 0, 0 };
	if (argc < 2 || argc > 3 || gpu_parse_size(argv[1], &c.size) < 0) {
		fprintf(stderr, "usage: %s SIZE[K|M|G] [HOLD_SECONDS]\n", argv[0]);
		exit(1);
	}
	c.hold = argc == 3 ? atoi(argv[2]) : 0;
	cudaError_t e = cudaSetDevice(0);
	if (e == cudaSuccess)
		e = cudaFree(0);
	if (e != cudaSuccess) {
		printf("ERROR %s: %s\n", cudaGetErrorName(e), cudaGetErrorString(e));
		exit(1);
	}
	size_t free_b = 0, total_b = 0;
	cudaMemGetInfo(&free_b, &total_b);
	fprintf(stderr, "%s: %zu MiB free of %zu MiB; asking %llu MiB\n", argv[0], free_b >> 20, total_b >> 20,
		(unsigned long long)(c.size >> 20));
	return c;
}

/* The allocation worked: says so, and holds it `hold` seconds. */
static inline void gpu_client_hold(struct gpu_client c)
{
	printf("OK %llu\n", (unsigned long long)c.size);
	fflush(stdout);
	if (c.hold > 0)
		sleep((unsigned)c.hold);
}

#endif
