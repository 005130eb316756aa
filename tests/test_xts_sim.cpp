/* The CUDA XTS building blocks (device/cuda/kernels/xts.cuh) run on the
 * host: the same source compiled by the C++ compiler, a block's threads as
 * POSIX threads, __syncthreads as a barrier, __byte_perm as PTX's prmt
 * (default mode) defines it. Every machine with nvcc's headers runs it, GPU
 * or not, so the table layout, the PRMT selectors, both key schedules, the
 * rounds and the tweak steps are checked against OpenSSL in CI; what only
 * a GPU shows (shuffles, the launcher, speed) is test_xts-cuda's.
 *
 * One simulated block of 256 threads (8 warps) per case: vc_xts_setup,
 * then the kernel's scheme (xts.cu): lane k of a warp encrypts the tweak
 * of the warp's k-th page, each page's T goes to every lane (here through
 * shared memory instead of a shuffle) and vc_xts_unit does the page. Page
 * sizes 16 B .. 4 KiB, both directions, keys in registers and in shared
 * memory; the ciphertext must equal OpenSSL's and decrypt to the input.
 * Then the move kernels' vc_xts_piece (512 B .. 4 KiB), out of place:
 * encryption in both table layouts, decryption in the decryption layout,
 * each with the fingerprint tap (fp_lanes.cuh's vc_fp_lanes_tap in
 * vc_xts_piece_run, as the cipher moves use it): the 32 lanes' states
 * added must give the host's lanes hash of the plaintext, both ways.
 */
#define __host__
#define __device__
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static thread_local uint3 threadIdx;
static dim3 blockDim;
static pthread_barrier_t block_barrier;

static void __syncthreads()
{
	pthread_barrier_wait(&block_barrier);
}

/* PTX prmt.b32, default mode: byte n of the result is byte (nibble n of s)
 * & 7 of y:x. */
static uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s)
{
	const uint64_t v = (uint64_t)y << 32 | x;
	uint32_t r = 0;
	for (int n = 0; n < 4; n++)
		r |= (uint32_t)((v >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
	return r;
}

#include "device/cuda/kernels/fp_lanes.cuh"
#include "device/cuda/kernels/xts.cuh"

extern "C" {
#include "base/error.h"
#include "base/rand.h"
#include "device/fp.h"
}
#include "vramcache.h"

#define THREADS 256u
#define WARPS (THREADS / 32)
#define PAGES 20u /* per warp's share: lanes 20..31 have no page (the kernel's tail) */

struct plain_hint {
	static uint4 ld(const uint4 *p) { return *p; }
	static void st(uint4 *p, uint4 v) { *p = v; }
};

static vc_xts_smem smem;
static uint4 share[WARPS][32]; /* each lane's encrypted tweak: the shuffle's stand-in */
/* Piece mode: each page's 32 lane states of the fingerprint tap, added on
 * the host (the kernels' shuffle sum). */
static struct vc_fp_lanes taps[PAGES * WARPS][32];

static struct job {
	vc_xts_kparam key;
	bool enc, smem_keys;
	bool piece, layout_enc; /* vc_xts_piece (the move kernels') in a layout */
	uint4 *pages;
	uint4 *out; /* piece mode's destination */
	const uint64_t *tweaks;
	uint32_t n, nblocks;
} job;

template <bool Enc, class Keys>
static void thread_body()
{
	vc_xts_setup<Enc>(smem, job.key);
	const vc_xts_lane L = vc_xts_lane_make(smem);
	const Keys k(Enc ? smem.rk : smem.rkd);
	const uint32_t lane = threadIdx.x & 31, w = threadIdx.x / 32;
	/* Warp w's pages: w, w + WARPS, ... (the kernel's grid stride). */
	const uint32_t q = w + lane * WARPS;
	share[w][lane] = q < job.n ? vc_xts_tweak_encrypt<Enc>(L, smem, job.tweaks[q]) : make_uint4(0, 0, 0, 0);
	__syncthreads();
	for (uint32_t i = 0; i < 32; i++) {
		const uint32_t p = w + i * WARPS;
		if (p < job.n)
			vc_xts_unit<Enc, plain_hint>(L, k, share[w][i], job.pages + (size_t)p * job.nblocks,
						     job.pages + (size_t)p * job.nblocks, job.nblocks);
	}
	vc_xts_wipe(smem);
}

/* The move kernels' scheme: a block set up in LayoutEnc's layout, each
 * page one piece of V x 512 bytes by vc_xts_piece, with tweaks as above;
 * source and destination apart (a move). */
template <bool LayoutEnc, bool Enc, int V>
static void thread_body_piece()
{
	vc_xts_setup<LayoutEnc>(smem, job.key);
	const vc_xts_lane L = vc_xts_lane_make(smem);
	const vc_xts_keys_smem k(Enc ? smem.rk : smem.rkd);
	const uint32_t lane = threadIdx.x & 31, w = threadIdx.x / 32;
	const uint32_t q = w + lane * WARPS;
	share[w][lane] = q < job.n ? vc_xts_tweak_encrypt<LayoutEnc>(L, smem, job.tweaks[q])
				   : make_uint4(0, 0, 0, 0);
	__syncthreads();
	for (uint32_t i = 0; i < 32; i++) {
		const uint32_t p = w + i * WARPS;
		if (p >= job.n)
			continue;
		/* As the kernels: the lane's words loaded, then the
		 * cipher with the fingerprint tap (the plaintext's). */
		uint4 a[V];
		vc_xts_piece_ld<V, plain_hint>(job.pages + (size_t)p * job.nblocks + lane, a);
		vc_fp_lanes_tap tap = { { 0, 0 }, lane, true };
		vc_xts_piece_run<V, LayoutEnc, Enc, plain_hint>(L, k, share[w][i], a,
								job.out + (size_t)p * job.nblocks + lane, tap);
		taps[p][lane] = tap.s;
	}
	vc_xts_wipe(smem);
}

template <int V>
static void piece_v()
{
	if (job.layout_enc)
		thread_body_piece<true, true, V>();
	else if (job.enc)
		thread_body_piece<false, true, V>();
	else
		thread_body_piece<false, false, V>();
}

static void *thread_main(void *arg)
{
	threadIdx = make_uint3((unsigned)(uintptr_t)arg, 0, 0);
	if (job.piece) {
		switch (job.nblocks / 32) {
		case 1: piece_v<1>(); break;
		case 2: piece_v<2>(); break;
		case 4: piece_v<4>(); break;
		default: piece_v<8>(); break;
		}
	} else if (job.enc)
		job.smem_keys ? thread_body<true, vc_xts_keys_smem>() : thread_body<true, vc_xts_keys_reg>();
	else
		job.smem_keys ? thread_body<false, vc_xts_keys_smem>() : thread_body<false, vc_xts_keys_reg>();
	return nullptr;
}

/* One simulated block over the job. */
static void run_block()
{
	pthread_t th[THREADS];
	blockDim = dim3(THREADS, 1, 1);
	pthread_barrier_init(&block_barrier, nullptr, THREADS);
	for (uintptr_t t = 0; t < THREADS; t++)
		if (pthread_create(&th[t], nullptr, thread_main, (void *)t) != 0) {
			fprintf(stderr, "pthread_create failed\n");
			exit(1);
		}
	for (unsigned t = 0; t < THREADS; t++)
		pthread_join(th[t], nullptr);
	pthread_barrier_destroy(&block_barrier);
}

static void fill(void *p, size_t len, uint64_t *seed)
{
	for (size_t i = 0; i < len; i += 8) {
		const uint64_t v = vc_rand64(seed);
		memcpy((char *)p + i, &v, len - i < 8 ? len - i : 8);
	}
}

/* Each page's fingerprint from its 32 lanes' tap states equals the host
 * reference (VC_FP_LANES) of its plaintext, pt. */
static void check_taps(const unsigned char *pt, uint32_t n, uint32_t ps, const char *what)
{
	for (uint32_t p = 0; p < n; p++) {
		struct vc_fp_lanes f = { 0, 0 };
		for (int l = 0; l < 32; l++)
			vc_fp_lanes_add(&f, taps[p][l].s1, taps[p][l].s2);
		const uint4 dg = vc_fp_lanes_digest(f, ps);
		struct vc_fp_digest want;
		vc_fp_block(VC_FP_LANES, pt + (size_t)p * ps, ps, &want);
		if (memcmp(&dg, &want, sizeof want) != 0) {
			fprintf(stderr, "%s, %u-byte pages: page %u's tap fingerprint differs from the host's\n",
				what, ps, p);
			exit(1);
		}
	}
}

static void check(const unsigned char *got, const unsigned char *want, size_t len, uint32_t ps, const char *what)
{
	for (size_t i = 0; i < len; i++)
		if (got[i] != want[i]) {
			fprintf(stderr, "%s, %u-byte pages: page %zu byte %zu is %02x, want %02x\n", what, ps,
				i / ps, i % ps, got[i], want[i]);
			exit(1);
		}
}

int main()
{
	uint64_t seed = 0x243f6a8885a308d3ull;
	static unsigned char pt[PAGES * WARPS * 4096], buf[sizeof pt], ref[sizeof pt], pbuf[sizeof pt];
	uint64_t tw[PAGES * WARPS];
	int cases = 0;
	for (uint32_t ps = VC_XTS_UNIT_MIN; ps <= VC_XTS_UNIT_MAX; ps *= 2)
		for (int smem_keys = 0; smem_keys < 2; smem_keys++) {
			struct vc_xts_key key;
			fill(key.bytes, sizeof key.bytes, &seed);
			const uint32_t n = PAGES * WARPS - 3; /* not a multiple of the warps */
			const size_t bytes = (size_t)n * ps;
			fill(pt, bytes, &seed);
			fill(tw, sizeof tw, &seed);
			tw[0] = 0, tw[1] = 1, tw[2] = ~0ull;
			memcpy(ref, pt, bytes);
			const int r = vc_emu_xts_pages(&key, ref, tw, n, ps, 1);
			if (r == -VC_ENOTBUILT) {
				fprintf(stderr, "SKIP: %s\n", vc_last_error());
				return 77;
			}
			if (r < 0) {
				fprintf(stderr, "vc_emu_xts_pages: %s\n", vc_last_error());
				return 1;
			}
			memcpy(&job.key, key.bytes, sizeof job.key);
			memcpy(buf, pt, bytes);
			job.pages = reinterpret_cast<uint4 *>(buf);
			job.tweaks = tw;
			job.n = n;
			job.nblocks = ps / 16;
			job.smem_keys = smem_keys;
			job.enc = true;
			run_block();
			check(buf, ref, bytes, ps, "ciphertext against OpenSSL's");
			job.enc = false;
			run_block();
			check(buf, pt, bytes, ps, "decrypt(encrypt(x))");
			static const uint4 zero[45] = {};
			static_assert(sizeof zero == sizeof smem.rk + sizeof smem.rkd + sizeof smem.tk,
				      "the round keys");
			if (memcmp(smem.rk, zero, sizeof zero) != 0) {
				fprintf(stderr, "round keys left in shared memory after vc_xts_wipe\n");
				return 1;
			}
			cases++;
			if (ps < 512 || smem_keys)
				continue;
			/* The move kernels' pieces: encrypt in either layout,
			 * decrypt in the decryption layout, out of place. */
			job.piece = true;
			job.out = reinterpret_cast<uint4 *>(pbuf);
			for (int layout_enc = 1; layout_enc >= 0; layout_enc--) {
				memcpy(buf, pt, bytes);
				memset(pbuf, 0, bytes);
				job.layout_enc = layout_enc;
				job.enc = true;
				run_block();
				check(pbuf, ref, bytes, ps, layout_enc ? "piece, encryption layout"
								       : "piece encrypting, decryption layout");
				check(buf, pt, bytes, ps, "piece's source");
				check_taps(pt, n, ps, "piece encrypting, the tap");
				job.layout_enc = false;
				job.enc = false;
				job.pages = reinterpret_cast<uint4 *>(pbuf);
				job.out = reinterpret_cast<uint4 *>(buf);
				memset(buf, 0, bytes);
				run_block();
				check(buf, pt, bytes, ps, "piece decrypting");
				check_taps(pt, n, ps, "piece decrypting, the tap");
				job.pages = reinterpret_cast<uint4 *>(buf);
				job.out = reinterpret_cast<uint4 *>(pbuf);
				cases++;
			}
			job.piece = false;
		}
	printf("test_xts_sim: %d cases (16 B .. 4 KiB pages, keys in registers and shared memory, "
	       "both directions) equal OpenSSL\n", cases);
	return 0;
}
