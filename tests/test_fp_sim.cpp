/* The fingerprint kernel's per-thread code (device/cuda/kernels/fp.cuh)
 * and its launch geometry (fp_launch.h), compiled for the host and run
 * where there is no GPU (CI): the 16-byte and byte loads, the 64-byte
 * steps with the next one prefetched, MD5's constant padding chunk and the
 * digest's word order, against the host reference (device/fp.c), for both
 * algorithms, every block size, aligned and unaligned blocks. What only a
 * GPU shows (the grid-stride loop, the streaming loads, speed) is
 * test_fp-cuda's.
 *
 * The lanes hash in a moving warp (kernels/fp_lanes.cuh, VC_MOVE_FP): the
 * 32 lanes' own code over the words each holds (l, l + 32, ...), for
 * every piece size, then the warp's five shuffle-xor rounds simulated
 * step by step: every lane ends with the same state, whose digest equals
 * the host reference's.
 *
 * Geometry: for n up to a few million and caps 1 .. 132, the grid has at
 * most cap blocks of whole warps, at most VC_CUDA_FP_THREADS threads,
 * and a thread for every digest unless n exceeds cap x 1024. */
#define __host__
#define __device__
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The streaming loads, as plain loads. */
static uint4 __ldcs(const uint4 *p)
{
	return *p;
}

#include "device/cuda/kernels/fp.cuh"
#include "device/cuda/kernels/fp_lanes.cuh"
#include "device/cuda/kernels/fp_launch.h"

extern "C" {
#include "base/rand.h"
}

#define CHECK(c)                                                                           \
	do {                                                                               \
		if (!(c)) {                                                                \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

static void test_blocks()
{
	uint64_t seed = 0x51a;
	alignas(16) static uint8_t buf[VC_FP_BLOCK_MAX + 64];
	for (int rep = 0; rep < 20; rep++) {
		for (size_t i = 0; i < sizeof buf; i += 8) {
			const uint64_t v = vc_rand64(&seed);
			memcpy(buf + i, &v, 8);
		}
		for (uint32_t bs = VC_FP_BLOCK_MIN; bs <= VC_FP_BLOCK_MAX; bs *= 2)
			for (uint32_t off : { 0u, 16u, 48u, 1u, 7u, 33u }) {
				const uint8_t *p = buf + off;
				for (uint32_t algo = 0; algo < VC_FP_ALGOS; algo++) {
					const uint4 d = algo == VC_FP_MD5 ? vc_fp_block_dev<VC_FP_MD5>(p, bs)
									  : vc_fp_block_dev<VC_FP_MURMUR3>(p, bs);
					struct vc_fp_digest want;
					vc_fp_block(algo, p, bs, &want);
					const uint32_t w[4] = { d.x, d.y, d.z, d.w };
					uint8_t got[16];
					for (int k = 0; k < 16; k++)
						got[k] = (uint8_t)(w[k / 4] >> (8 * (k % 4)));
					if (memcmp(got, want.b, 16) != 0) {
						fprintf(stderr, "%s, %u-byte block at offset %u: the kernel's "
								"digest differs from the host reference\n",
							algo == VC_FP_MD5 ? "MD5" : "MurmurHash3", bs, off);
						exit(1);
					}
				}
			}
	}
}

/* One warp moving a piece of V x 512 bytes, as piece.cuh's
 * vc_move_piece_fp: lane l's words a[k] = word l + 32 k. */
template <int V>
static void lanes_warp(const uint8_t *p, uint8_t got[16])
{
	struct vc_fp_lanes st[32];
	for (uint32_t l = 0; l < 32; l++) {
		uint4 a[V];
		for (int k = 0; k < V; k++)
			memcpy(&a[k], p + 16 * (l + 32 * k), 16);
		st[l] = vc_fp_lanes_lane<V>(a, l);
	}
	/* vc_fp_lanes_warp_sum: in each round every lane adds the state of
	 * lane l ^ off as the round began (__shfl_xor_sync). */
	for (int off = 16; off > 0; off /= 2) {
		struct vc_fp_lanes nx[32];
		for (uint32_t l = 0; l < 32; l++) {
			nx[l] = st[l];
			vc_fp_lanes_add(&nx[l], st[l ^ off].s1, st[l ^ off].s2);
		}
		memcpy(st, nx, sizeof st);
	}
	for (uint32_t l = 1; l < 32; l++)
		CHECK(st[l].s1 == st[0].s1 && st[l].s2 == st[0].s2);
	const uint4 d = vc_fp_lanes_digest(st[0], V * 512u);
	const uint32_t w[4] = { d.x, d.y, d.z, d.w };
	for (int k = 0; k < 16; k++)
		got[k] = (uint8_t)(w[k / 4] >> (8 * (k % 4)));
}

static void test_lanes()
{
	uint64_t seed = 0x1a5e5;
	alignas(16) static uint8_t buf[VC_FP_BLOCK_MAX];
	for (int rep = 0; rep < 50; rep++) {
		for (size_t i = 0; i < sizeof buf; i += 8) {
			const uint64_t v = vc_rand64(&seed);
			memcpy(buf + i, &v, 8);
		}
		if (rep == 0)
			memset(buf, 0, sizeof buf);
		for (uint32_t bs = VC_FP_BLOCK_MIN; bs <= VC_FP_BLOCK_MAX; bs *= 2) {
			uint8_t got[16];
			switch (bs) {
			case 512: lanes_warp<1>(buf, got); break;
			case 1024: lanes_warp<2>(buf, got); break;
			case 2048: lanes_warp<4>(buf, got); break;
			default: lanes_warp<8>(buf, got); break;
			}
			struct vc_fp_digest want;
			vc_fp_lanes(buf, bs, &want);
			if (memcmp(got, want.b, 16) != 0) {
				fprintf(stderr, "lanes hash, %u-byte piece: the warp's digest differs from "
						"the host reference\n", bs);
				exit(1);
			}
		}
	}
}

static void test_geometry()
{
	static const uint32_t ns[] = { 1, 2, 31, 32, 33, 1000, 1024, 1025, 13 * 1024, 13 * 1024 + 1,
				       135168, 135169, 1u << 20, 5000000 };
	for (uint32_t cap = 1; cap <= 132; cap++)
		for (uint32_t n : ns) {
			uint32_t grid = 0, threads = 0;
			vc_cuda_fp_geometry(n, cap, &grid, &threads);
			CHECK(grid >= 1 && grid <= cap);
			CHECK(threads >= 32 && threads <= VC_CUDA_FP_THREADS && threads % 32 == 0);
			const uint64_t all = (uint64_t)grid * threads;
			CHECK(all >= n || (grid == cap && threads == VC_CUDA_FP_THREADS));
			CHECK(all < (uint64_t)n + (uint64_t)32 * cap || all == (uint64_t)cap * 1024 ||
			      n < 32); /* no more than a warp per block beyond n */
		}
}

int main()
{
	test_blocks();
	test_lanes();
	test_geometry();
	printf("test_fp_sim: fp.cuh's digests equal the host reference (both algorithms, "
	       "512..4096-byte blocks, aligned and not), the moving warp's lanes hash too, "
	       "launch geometry within the SM cap: ok\n");
	return 0;
}
