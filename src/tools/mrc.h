/* Miss-ratio curves of LRU: exact, and by SHARDS sampling (Waldspurger,
 * Park, Garthwaite and Ahmad, "Efficient MRC Construction with SHARDS",
 * FAST 2015).
 *
 *   exact        every access through the stack-distance tree (sdist.h):
 *                O(log M) per access, O(M) memory, M distinct keys
 *   fixed rate   only keys with hash(key) mod P < T, rate R = T/P; a
 *                sampled distance d stands for d / R; O(M R) memory
 *   fixed size   at most S keys: when a new key makes S + 1, the key with
 *                the largest hash leaves and T drops to that hash, so the
 *                rate falls as the trace reveals more keys; the histogram
 *                is rescaled by R_new / R_old; O(S) memory
 *
 * Both SHARDS variants apply the paper's SHARDS_adj correction: the gap
 * between the expected sampled accesses (N R) and the ones counted goes to
 * the first histogram bucket, which removes most of the bias small samples
 * have at small cache sizes.
 *
 * Fixed size keeps its sample in hsdist.h (keys by hash, a bitmap Fenwick
 * tree, all in cache), the others in sdist.h.
 *
 * The hash is murmur3's fmix64; its top 24 bits are compared with T, so P is
 * 2^24 (R is a multiple of 2^-24) and sampling is independent of the low
 * bits the key maps use for their slots. */
#ifndef VC_TOOLS_MRC_H
#define VC_TOOLS_MRC_H

#include <stddef.h>
#include <stdint.h>

enum vc_mrc_kind { VC_MRC_EXACT, VC_MRC_FIXED_RATE, VC_MRC_FIXED_SIZE };

#define VC_SHARDS_P (1u << 24)

/* The default fixed-size sample (`vramcache mrc`): 12,288 keys, 0.84 MiB.
 * The mean absolute error falls about as 1/sqrt(S) and the sampled work
 * grows about as S. On the shared traces (docs/TRACES.md) 8,192 keys gave
 * 0.0114 on the Tencent sample at 4 KiB pages (0.0268 for the worst of 16
 * hash seeds, on cloudPhysicsIO), 12,288 keys at most 0.0079 at 4 KiB and
 * 512-byte pages (worst seed 0.0163), 16,384 keys 0.0067 (worst seed
 * 0.0108) for a third more sampling work. */
#define VC_MRC_SMAX_DEFAULT 12288

struct vc_mrc_params {
	int kind;      /* enum vc_mrc_kind */
	double rate;   /* fixed rate: R, 0 < R <= 1 */
	uint64_t smax; /* fixed size: S, the most sampled keys */
};

struct vc_mrc;

int vc_mrc_create(const struct vc_mrc_params *p, struct vc_mrc **out);
void vc_mrc_destroy(struct vc_mrc *m);
/* One access. 0 or -ENOMEM. */
int vc_mrc_access(struct vc_mrc *m, uint64_t key);
/* n accesses, the same as n calls of vc_mrc_access. The sampling test
 * (one hash and a compare) runs first in a tight loop; only sampled keys
 * pay for the stack-distance work. 0 or -ENOMEM. */
int vc_mrc_access_batch(struct vc_mrc *m, const uint64_t *keys, size_t n);
/* Ends the input: applies the correction and builds cumulative counts.
 * Queries are valid after it. 0 or -ENOMEM. */
int vc_mrc_finish(struct vc_mrc *m);
/* LRU miss ratio at a cache of c pages (c >= 0). */
double vc_mrc_miss_ratio(const struct vc_mrc *m, double c);
uint64_t vc_mrc_accesses(const struct vc_mrc *m);
/* Distinct keys: exact, or the sample's count divided by the rate. */
double vc_mrc_distinct(const struct vc_mrc *m);
/* The sampling rate at the end (1 for exact). */
double vc_mrc_rate(const struct vc_mrc *m);
/* Peak bytes held by the structure (keys, tree, histogram, heap). */
size_t vc_mrc_peak_bytes(const struct vc_mrc *m);

#endif
