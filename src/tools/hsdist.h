/* LRU stack distances over a bounded set of hashed keys: the sample of
 * fixed-size SHARDS (mrc.h), at most a few thousand keys, where every
 * access of a trace that passes the sampling test lands.
 *
 * The same method as sdist.h (each key's latest access holds a time slot;
 * the distance is 1 + the live slots after the key's previous one), laid
 * out for a set that fits in the caches:
 *   - keys are known by their 64-bit hash, which the caller has computed
 *     already for the sampling test; vc_mix64 is a bijection, so the hash
 *     is the key (no collisions, no second hash);
 *   - the table is open addressing over the hash's low bits, at most half
 *     full for the bound it was made for;
 *   - live slots are a bitmap, counted by a Fenwick tree over its 64-bit
 *     words: a rank is a popcount and log2(slots / 64) steps (9 for 16 K
 *     slots), and the tree is 1/64 of sdist's, so both stay in L1.
 * Slots are renumbered when they run out, as in sdist: at most
 * 2 (max + 1) slots, O(1) amortised. Memory: about 50 bytes a key of the
 * bound (16 for each of two table entries, 8 for each of two slots). More
 * than 2 (max + 1) keys at once is a caller's bug. Not thread safe. */
#ifndef VC_TOOLS_HSDIST_H
#define VC_TOOLS_HSDIST_H

#include <stddef.h>
#include <stdint.h>

struct vc_hsent {
	uint64_t h;
	uint32_t slot; /* HS_EMPTY: a free entry */
};

struct vc_hsdist {
	struct vc_hsent *tab; /* hash -> slot */
	uint64_t tmask;
	uint64_t *bits;   /* live slots */
	uint32_t *fen;    /* Fenwick tree over the live count of each word (hsdist.c) */
	uint32_t fen_steps; /* bits of nwords: the length of every tree walk */
	uint64_t *h_at;   /* slot -> hash, meaningful where live */
	uint32_t nwords;  /* slots / 64 */
	uint32_t now;     /* next slot */
	uint32_t sealed;  /* the tree counts words [0, sealed); now is in word sealed */
	uint32_t nlive;
	uint32_t max;     /* the bound: at most max + 1 keys at once */
};

/* A set of at most max + 1 keys (1 <= max < 2^30). 0 or -ENOMEM. */
int vc_hsdist_init(struct vc_hsdist *s, uint64_t max);
void vc_hsdist_fini(struct vc_hsdist *s);
/* Records an access to the key with hash h; returns its stack distance
 * (>= 1), or 0 for a key not in the set (it joins; the caller keeps the
 * set within the bound with vc_hsdist_forget). */
uint64_t vc_hsdist_access(struct vc_hsdist *s, uint64_t h);
/* Removes the key with hash h (nothing when absent). */
void vc_hsdist_forget(struct vc_hsdist *s, uint64_t h);
size_t vc_hsdist_bytes(const struct vc_hsdist *s);

#endif
