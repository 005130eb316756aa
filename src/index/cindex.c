/* Concurrent index: bucketized hopscotch hashing with lock-free lookups.
 *
 * BAG (Chen et al., TPDS 2014, 3.3.2-3.3.3) keeps its block map in a
 * hopscotch hash table (Herlihy, Shavit, Tzafrir, DISC 2008): open
 * addressing in which every key lives within a fixed neighbourhood of its
 * home, found through a hop bitmap; writers take one of a set of segment
 * locks and lookups take none. This is that table with the neighbourhood
 * counted in cache-line buckets instead of single slots, because slot-level
 * hopscotch does not reach the loads the issue asks for. Measured with
 * earlier versions of this file, load at the first failed put while filling
 * 1M-8M slots with random keys: slot-level H = 32: 0.80-0.83; H = 64: 0.91;
 * 7-slot buckets, 16-bucket neighbourhood: 0.93; 32 buckets: 0.97 (this
 * file; bench/index.c prints it for 2^23 keys, tests/test_cindex.c checks
 * that capacity always fits). Bucketized cuckoo hashing was not built: it
 * reads two random buckets per lookup where this reads one (85% of keys at
 * 90% load sit in their home bucket, 7% in the next).
 *
 * ---- Layout: one flat array of 64-bit words, no pointers ----
 *
 * nb buckets of 16 words (128 bytes, two cache lines), then nseg lock words:
 *   word 0       meta: bits 0..31 hop bitmap of home bucket b (bit j set:
 *                bucket b+j mod nb holds at least one key whose home is b,
 *                "family b"); bits 32..63 the family's version.
 *   words 1..7   seven keys, stored as ~key so that all-zero is empty
 *                (VC_IKEY_NONE, the reserved key, would store as 0): a new
 *                table is zero memory and costs no writes.
 *   words 8..14  the seven values.     word 15: unused.
 * Memory: 128/7 = 18.3 bytes per slot, 19.3 per key at the 0.95 load that
 * VC_CINDEX_MAX_LOAD allows, 20.3 at 0.90; plus 8 bytes per 32 buckets.
 * Neighbourhoods wrap around the end of the table (without the wrap the
 * last buckets collect every overflow and fill first: 0.95 instead of 0.97).
 *
 * ---- Tuning constants ----
 *
 * B = 7 slots per bucket: meta plus seven keys fill one cache line.
 * HB = 32 buckets (224 slots) of neighbourhood: the bitmap and a 32-bit
 * version share the meta word, so one load gives a consistent pair; 16
 * buckets fill worse (above), more would not fit. A lookup compares the 7
 * keys of each bucket the bitmap names: at most 32 buckets, on average 1.7
 * per family at 90% load (2.0 at 95%).
 * MAX_PROBE = 4096 buckets: how far a put looks for an empty slot before
 * giving up with -ENOSPC. At load <= 0.95 the scan ends within a few
 * buckets; runs of hundreds of full buckets appear only past 0.95 (a bound
 * of 512 failed at 0.953).
 * SEG = 32 buckets per lock stripe (nb/32 stripes: 42K for 2^23 keys at
 * 90%): SEG >= HB, so a neighbourhood spans at most two stripes and a put
 * usually takes one or two locks. Readers never touch the locks, so the
 * stripe count only sets how often writers collide (two writers on random
 * keys share a stripe with probability ~2/nseg). The lock word also counts
 * the keys homed in its stripe, so count() needs no shared counter that
 * every put would bounce between cores; it costs nb/32 loads instead.
 *
 * ---- Writers: what each lock owns ----
 *
 * Lock g (bit 0 of lock word g; a spin lock with backoff, see backoff())
 * owns
 *   (a) meta[b] for every home bucket b of stripe g,
 *   (b) every slot holding a key of a family homed in stripe g: only its
 *       holder may move, delete or update such a key, so holding the home
 *       stripe pins a key in place;
 *   (c) the right to fill an empty slot of a bucket in stripe g.
 * Put of a new key, home h, locks stripe(h), then scans buckets h, h+1, ...
 * for an empty slot, locking each next stripe as the scan enters it. If the
 * empty slot is HB or more buckets from h, keys move up into it (hopscotch
 * displacement): among the HB-1 buckets below the empty slot's bucket f,
 * the lowest home x with a family member in a bucket y < f gives that key
 * to f, and its old slot becomes the empty one; repeat until within reach
 * of h. Every bucket involved lies between h and f, inside the locked
 * range. Every thread holds a contiguous run of stripes and blocks only on
 * the stripe just above its run; a run that wraps past the last stripe
 * only tries the next one and, failing, lets go of all and starts over. So
 * waits never form a cycle: no deadlock. A failed put (-ENOSPC) leaves the
 * set of keys as it was: every move kept its key inside its neighbourhood.
 * Cost of a put: one or two locks and a few buckets at load <= 0.95; at
 * worst MAX_PROBE buckets scanned, MAX_PROBE/SEG + 1 locks, and one move
 * per bucket of distance.
 *
 * ---- Readers: the protocol and why a lookup is right ----
 *
 * lookup(K), home h:
 *   m1 = meta[h] (acquire);
 *   compare the 7 keys of each bucket m1 names with ~K (bucket h first,
 *   whose keys share m1's cache line: compared before the bitmap arrives);
 *   on a match in slot s: acquire fence, v = val[s], acquire fence, and the
 *   key of s again: if it is no longer ~K, retry;
 *   acquire fence; m2 = meta[h]; if m2 != m1, retry; else answer.
 * Writers follow four rules (every store to a slot word is a release store):
 *   W1 arrival: a key is stored into an empty slot value first, key second;
 *      the bit that names its bucket is published (meta store, version + 1)
 *      after both. A reader that sees the bit, or the key, sees the value.
 *   W2 departure: a key leaves a slot by its key word becoming 0 (delete's
 *      linearization point), and the family's version then advances, in the
 *      same critical section. Only an empty slot is ever refilled (the
 *      filler loads the 0 with acquire), so a slot's value changes only
 *      after its key word went to 0.
 *   W3 move (displacement of Y from slot s to the empty slot t): fill t
 *      (W1), publish the bitmap that names t's bucket (and no longer s's,
 *      unless other family members stay there), then empty s and advance
 *      the version again (W2). Y is in a named bucket at every instant.
 *   W4 update (put of a present key, cas): one release store to the value
 *      word, no version change. Readers see the old or the new value, and
 *      are not made to retry by updates.
 * Why the answer is right:
 *   - A value returned belongs to K: if the value load saw a store of a
 *     later occupant, that store follows (W2) the key word's 0, so the
 *     re-read of the key, after an acquire fence, sees 0 or a later key.
 *     Only if K itself came back to the same slot can the re-read see ~K;
 *     K's return follows K's departure, whose version advance (W2, under
 *     the lock K's return must take) the final load of meta[h] then sees:
 *     m2 != m1, retry. (A bucket-level bitmap can still name a bucket after
 *     a member left it, so slot-level hopscotch's argument, where a named
 *     slot cannot change under an unchanged version, does not carry over;
 *     the re-read is what replaces it.)
 *   - A present key is never missed: the only way to miss it is to read its
 *     old slot after a move emptied it, with a bitmap that did not yet name
 *     its new bucket; the emptying store follows the publish (W3), so after
 *     the acquire fence the final meta load sees the publish: m2 != m1,
 *     retry. A key that is present and not deleted is found by every
 *     lookup, however often it moves.
 *   - The version makes m1 == m2 mean "no structural change to family h"
 *     even when a bitmap returns to an earlier value (a false match needs
 *     2^32 changes of one family inside one lookup).
 * Progress: lookups are lock-free. They retry only when a writer completed
 * a change to their family (or their slot) inside their window, and never
 * wait for a writer: there is no "writer inside" state, so a writer
 * preempted in the middle of a put holds up no reader. Cost per attempt:
 * one meta load and 7 compares per named bucket (1.7 buckets on average at
 * 90% load, bucket h alone for 85% of hits), one value load, and the
 * re-reads of the key and meta words, which hit in L1. A lookup touches the
 * two lines of its home bucket (both requested at once) and, for 15% of
 * hits and most misses, the buckets that follow.
 *
 * Testing: tests/test_cindex.c compiles this file with VC_CINDEX_WINDOW()
 * defined to stretch the gaps between these steps. Swapping fill and
 * publish, or publish and emptying, in a move; storing a key before its
 * value; dropping the m2 check: each fails it within seconds. Dropping the
 * re-read, the second version advance of a move, or the version does not:
 * on x86 (stores seen in order) those guard only against reordering that
 * weaker memory models (ARM, the GPU) allow, or against the same key
 * returning to the same slot inside one lookup. Keep them on the device.
 */
#include "index/cindex.h"
#include "base/hash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/error.h"
#include "base/atomics.h"

#define B 7             /* slots per bucket */
#define BW 16           /* words per bucket */
#define HB 32u          /* neighbourhood, in buckets */
#define SEG_SHIFT 5     /* 32 buckets per lock stripe */
#define MAX_PROBE 4096u /* empty-slot scan bound, in buckets */
#define HOP_MASK 0xffffffffull
#define VER_ONE (1ull << 32)

/* Race windows: nothing here. tests/test_cindex.c compiles this file with
 * VC_CINDEX_WINDOW defined to yield now and then, which stretches the gaps
 * between the steps of a move, an insert, a delete and a lookup so that a
 * wrong order of steps fails the test instead of passing by luck. */
#ifndef VC_CINDEX_WINDOW
#define VC_CINDEX_WINDOW() ((void)0)
#endif

_Static_assert((1u << SEG_SHIFT) >= HB, "a neighbourhood must span at most two stripes");
_Static_assert(HB <= 32, "the bitmap shares the meta word with a 32-bit version");
_Static_assert(B == 7 && BW == 16, "find_in_bucket() and the layout assume 7 slots in 128 bytes");

struct vc_cindex {
	vc_aw64 *w;     /* nb buckets of BW words */
	vc_aw64 *locks; /* nseg lock words, right after the buckets */
	uint64_t nb, nseg, cap;
	void *map;      /* the mapping of a large table, else NULL (heap) */
	size_t maplen;
};

static inline vc_aw64 *meta_p(vc_aw64 *w, uint64_t b)
{
	return w + b * BW;
}
static inline vc_aw64 *key_p(vc_aw64 *w, uint64_t b, unsigned i)
{
	return w + b * BW + 1 + i;
}
static inline vc_aw64 *val_p(vc_aw64 *w, uint64_t b, unsigned i)
{
	return w + b * BW + 8 + i;
}

/* Bucket of an unwrapped position p < 2 nb. */
static inline uint64_t wrap(const struct vc_cindex *ix, uint64_t p)
{
	return p >= ix->nb ? p - ix->nb : p;
}

#define mix64 vc_mix64 /* core/hash.h */

/* Multiply-shift range reduction: nb need not be a power of two. */
static inline uint64_t home_of(const struct vc_cindex *ix, uint64_t key)
{
	return vc_mulhi64(mix64(key), ix->nb);
}

/* The next meta word of a family: bitmap `bits`, version advanced. */
static inline uint64_t meta_next(uint64_t m, uint64_t bits)
{
	return ((m & ~HOP_MASK) + VER_ONE) | bits;
}

/* Exponential backoff (pause), then yielding: on an oversubscribed host
 * (more runnable threads than cores) a spinner must let the holder run. */
static inline void backoff(unsigned *spins)
{
	unsigned s = *spins < 10 ? *spins : 10;
	for (unsigned i = 0; i < (1u << s); i++)
		vc_cpu_relax();
	if (++*spins > 12)
		vc_yield();
}

/* ---- striped spin locks ---- */

static inline bool seg_trylock(struct vc_cindex *ix, uint64_t g)
{
	uint64_t w = vc_ld_relaxed(&ix->locks[g]);
	return !(w & 1) && vc_cas_acquire(&ix->locks[g], &w, w | 1);
}

static void seg_lock(struct vc_cindex *ix, uint64_t g)
{
	for (unsigned spins = 0; !seg_trylock(ix, g);)
		backoff(&spins);
}

/* Unlocks, adding `delta` to the stripe's key count (we own the word). */
static inline void seg_unlock(struct vc_cindex *ix, uint64_t g, int64_t delta)
{
	uint64_t w = vc_ld_relaxed(&ix->locks[g]);
	vc_st_release(&ix->locks[g], (w & ~1ull) + (uint64_t)delta * 2);
}

/* The stripes a put holds: g0, then n more in circular order. */
struct span {
	uint64_t g0, gcur;
	uint64_t n;
	bool wrapped;
};

static void span_unlock(struct vc_cindex *ix, const struct span *sp, int64_t delta)
{
	for (uint64_t k = 1; k <= sp->n; k++) {
		uint64_t g = sp->g0 + k;
		seg_unlock(ix, g >= ix->nseg ? g - ix->nseg : g, 0);
	}
	seg_unlock(ix, sp->g0, delta);
}

/* Adds the stripe of bucket b, the next in circular order (or one held).
 * False when a stripe past the wrap was busy: the caller lets go of all. */
static bool span_extend(struct vc_cindex *ix, struct span *sp, uint64_t b)
{
	uint64_t g = b >> SEG_SHIFT;
	if (g == sp->gcur || g == sp->g0) {
		sp->gcur = g; /* held (a scan that comes round to g0 ends before h) */
		return true;
	}
	if (g < sp->gcur)
		sp->wrapped = true;
	if (sp->wrapped) {
		if (!seg_trylock(ix, g))
			return false;
	} else {
		seg_lock(ix, g);
	}
	sp->gcur = g;
	sp->n++;
	return true;
}

/* ---- bucket and family scans ---- */

/* Slot of stored key sk in bucket b, or -1. Branch-free compares: which
 * slot matches is unpredictable, and a mispredict per lookup costs more
 * than seven compares. */
static inline int find_in_bucket(vc_aw64 *w, uint64_t b, uint64_t sk)
{
	const vc_aw64 *k = key_p(w, b, 0);
	unsigned hit = (unsigned)(vc_ld_relaxed(k) == sk) |
		       (unsigned)(vc_ld_relaxed(k + 1) == sk) << 1 |
		       (unsigned)(vc_ld_relaxed(k + 2) == sk) << 2 |
		       (unsigned)(vc_ld_relaxed(k + 3) == sk) << 3 |
		       (unsigned)(vc_ld_relaxed(k + 4) == sk) << 4 |
		       (unsigned)(vc_ld_relaxed(k + 5) == sk) << 5 |
		       (unsigned)(vc_ld_relaxed(k + 6) == sk) << 6;
	return hit ? (int)vc_ctz32(hit) : -1;
}

/* Writers (family stable under its lock): slot of sk in family h with
 * bitmap m, bucket offset from h in *jp; or -1. */
static int find_family(const struct vc_cindex *ix, uint64_t h, uint64_t m, uint64_t sk,
		       uint64_t *jp)
{
	uint32_t bits = (uint32_t)(m & HOP_MASK);
	while (bits) {
		uint64_t j = vc_ctz32(bits);
		bits &= bits - 1;
		int i = find_in_bucket(ix->w, wrap(ix, h + j), sk);
		if (i >= 0) {
			*jp = j;
			return i;
		}
	}
	return -1;
}

/* Readers: 1 found (*v, and *slot when asked), 0 not found, -1 the slot
 * changed under us (retry). See "Readers" above. */
static inline int scan_family(const struct vc_cindex *ix, uint64_t h, uint64_t m, uint64_t sk,
			      uint64_t *v, uint64_t *slot)
{
	vc_aw64 *w = ix->w;
	uint32_t bits = (uint32_t)(m & HOP_MASK);
	while (bits) {
		uint64_t b = wrap(ix, h + vc_ctz32(bits));
		bits &= bits - 1;
		int i = find_in_bucket(w, b, sk);
		if (i < 0)
			continue;
		vc_fence_acquire();
		VC_CINDEX_WINDOW();
		*v = vc_ld_relaxed(val_p(w, b, (unsigned)i));
		vc_fence_acquire();
		VC_CINDEX_WINDOW();
		if (vc_ld_relaxed(key_p(w, b, (unsigned)i)) != sk)
			return -1;
		if (slot)
			*slot = b * B + (uint64_t)i;
		return 1;
	}
	return 0;
}

/* Whether bucket b holds a key of family x other than slot `except`
 * (exact for family x while its stripe is held). */
static bool family_in_bucket(const struct vc_cindex *ix, uint64_t b, uint64_t x, unsigned except)
{
	for (unsigned i = 0; i < B; i++) {
		uint64_t sk = vc_ld_relaxed(key_p(ix->w, b, i));
		if (i != except && sk && home_of(ix, ~sk) == x)
			return true;
	}
	return false;
}

/* ---- create / destroy ---- */

int vc_cindex_create(uint64_t capacity, struct vc_cindex **out)
{
	*out = NULL;
	if (capacity == 0 || capacity > (1ull << 40))
		return vc_err(-EINVAL, "cindex: capacity %llu out of range",
			      (unsigned long long)capacity);
	uint64_t nb = (uint64_t)((double)capacity / (VC_CINDEX_MAX_LOAD * B)) + 1;
	if (nb < 2 * HB)
		nb = 2 * HB;
	struct vc_cindex *ix = calloc(1, sizeof *ix);
	if (!ix)
		return vc_err(-ENOMEM, "cindex: out of memory");
	ix->nb = nb;
	ix->nseg = (nb + (1u << SEG_SHIFT) - 1) >> SEG_SHIFT;
	ix->cap = (uint64_t)((double)nb * B * VC_CINDEX_MAX_LOAD);
	if (ix->cap < capacity)
		ix->cap = capacity;
	uint64_t nwords = nb * BW;
	size_t bytes = (size_t)((nwords + ix->nseg) * sizeof(uint64_t));
	/* Zero is empty. A large table is anonymous memory (zero, untouched
	 * until used), 2 MiB aligned so that the kernel can back it with huge
	 * pages: a random lookup then costs a cache miss and not also a page
	 * walk. A small one comes from the heap (where ASan watches its ends). */
	const size_t huge = 2u << 20;
	uintptr_t base;
	if (bytes < huge) {
		void *p = aligned_alloc(128, (bytes + 127) & ~(size_t)127);
		if (!p) {
			free(ix);
			return vc_err(-ENOMEM, "cindex: out of memory for %llu keys",
				      (unsigned long long)capacity);
		}
		memset(p, 0, bytes);
		base = (uintptr_t)p;
	} else {
		size_t len = ((bytes + huge - 1) & ~(huge - 1)) + huge;
		void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);
		if (p == MAP_FAILED) {
			free(ix);
			return vc_err(-ENOMEM, "cindex: cannot map %zu bytes for %llu keys", len,
				      (unsigned long long)capacity);
		}
		ix->map = p;
		ix->maplen = len;
		base = ((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1);
#ifdef MADV_HUGEPAGE
		madvise((void *)base, len - (base - (uintptr_t)p), MADV_HUGEPAGE);
#endif
	}
	ix->w = (vc_aw64 *)base;
	ix->locks = ix->w + nwords;
	*out = ix;
	return 0;
}

void vc_cindex_destroy(struct vc_cindex *ix)
{
	if (!ix)
		return;
	if (ix->map)
		munmap(ix->map, ix->maplen);
	else
		free((void *)ix->w);
	free(ix);
}

/* ---- lookups ---- */

/* A lookup of stored key sk whose home is h: 1 found (*v), 0 not. */
static inline __attribute__((always_inline)) int
lookup_at(const struct vc_cindex *ix, uint64_t h, uint64_t sk, uint64_t *v)
{
	vc_aw64 *w = ix->w;
	const vc_aw64 *mp = meta_p(w, h);
	for (unsigned spins = 0;; backoff(&spins)) {
		uint64_t m1 = vc_ld_acquire(mp);
		VC_CINDEX_WINDOW();
		/* Fast path, most keys: the home bucket, whose keys share the
		 * meta word's cache line. Comparing them does not wait for the
		 * bitmap, and a match there needs bit 0 set. */
		int r, i = find_in_bucket(w, h, sk);
		if (__builtin_expect(i >= 0 && (m1 & 1), 1)) {
			vc_fence_acquire();
			VC_CINDEX_WINDOW();
			*v = vc_ld_relaxed(val_p(w, h, (unsigned)i));
			vc_fence_acquire();
			VC_CINDEX_WINDOW();
			r = vc_ld_relaxed(key_p(w, h, (unsigned)i)) == sk ? 1 : -1;
		} else {
			/* Bucket h was just compared: scan the rest of the family. */
			r = scan_family(ix, h, m1 & ~1ull, sk, v, NULL);
		}
		VC_CINDEX_WINDOW();
		vc_fence_acquire();
		if (__builtin_expect(r >= 0 && vc_ld_relaxed(mp) == m1, 1))
			return r;
	}
}

/* Starts loading both lines of bucket b: the value line too, so that a
 * hit does not wait for a second miss after the key compare. */
static inline void prefetch_bucket(const struct vc_cindex *ix, uint64_t b)
{
	const vc_aw64 *p = meta_p(ix->w, b);
	__builtin_prefetch((const void *)p);
	__builtin_prefetch((const void *)(p + 8));
}

bool vc_cindex_lookup(const struct vc_cindex *ix, uint64_t key, uint64_t *val)
{
	if (key == VC_IKEY_NONE)
		return false;
	uint64_t h = home_of(ix, key), v = 0;
	prefetch_bucket(ix, h);
	if (!lookup_at(ix, h, ~key, &v))
		return false;
	if (val)
		*val = v;
	return true;
}

void vc_cindex_prefetch(const struct vc_cindex *ix, uint64_t key)
{
	prefetch_bucket(ix, home_of(ix, key));
}

/* Prefetch distance: enough lookups in flight to cover a DRAM miss, few
 * enough that their lines are still in L1 when used. */
#ifndef BATCH_AHEAD
#define BATCH_AHEAD 8
#endif

size_t vc_cindex_lookup_n(const struct vc_cindex *ix, size_t n, const uint64_t *keys,
			  uint64_t *vals, bool *found)
{
	uint64_t home[BATCH_AHEAD];
	size_t hits = 0;
	for (size_t i = 0; i < n && i < BATCH_AHEAD; i++) {
		home[i] = home_of(ix, keys[i]);
		prefetch_bucket(ix, home[i]);
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t h = home[i % BATCH_AHEAD], k = keys[i];
		if (i + BATCH_AHEAD < n) {
			uint64_t h2 = home_of(ix, keys[i + BATCH_AHEAD]);
			home[i % BATCH_AHEAD] = h2;
			prefetch_bucket(ix, h2);
		}
		bool f = k != VC_IKEY_NONE && lookup_at(ix, h, ~k, &vals[i]);
		if (found)
			found[i] = f;
		hits += f;
	}
	return hits;
}

int64_t vc_cindex_debug_slot(const struct vc_cindex *ix, uint64_t key)
{
	if (key == VC_IKEY_NONE)
		return -1;
	uint64_t h = home_of(ix, key), v = 0, slot = 0;
	const vc_aw64 *mp = meta_p(ix->w, h);
	for (unsigned spins = 0;; backoff(&spins)) {
		uint64_t m1 = vc_ld_acquire(mp);
		int r = scan_family(ix, h, m1, ~key, &v, &slot);
		if (r < 0)
			continue;
		vc_fence_acquire();
		if (vc_ld_relaxed(mp) == m1)
			return r ? (int64_t)slot : -1;
	}
}

/* ---- writers ---- */

/* Moves keys up into the empty slot (fs of the bucket at unwrapped position
 * *fpp) until it lies within HB buckets of h; the caller holds the stripes
 * of h..*fpp. False when no key below may move up: the set of keys is then
 * as it was (every vacated slot has been emptied). */
static bool displace(struct vc_cindex *ix, uint64_t h, uint64_t *fpp, unsigned *fsp)
{
	vc_aw64 *w = ix->w;
	uint64_t fp = *fpp;
	unsigned fs = *fsp;
	while (fp - h >= HB) {
		uint64_t fb = wrap(ix, fp);
		bool moved = false;
		/* The lowest movable key closes the most distance. */
		for (uint64_t x = fp - (HB - 1); x < fp && !moved; x++) {
			uint64_t xb = wrap(ix, x);
			vc_aw64 *mp = meta_p(w, xb);
			uint64_t m = vc_ld_relaxed(mp);
			uint32_t bits = (uint32_t)(m & ((1ull << (fp - x)) - 1));
			if (!bits)
				continue;
			uint64_t yp = x + vc_ctz32(bits), yb = wrap(ix, yp);
			unsigned ys = 0;
			for (; ys < B; ys++) {
				uint64_t sk = vc_ld_relaxed(key_p(w, yb, ys));
				if (sk && home_of(ix, ~sk) == xb)
					break;
			}
			if (ys == B)
				continue; /* cannot happen: the bit says one is there */
			/* W3: fill, publish, then empty the source (W2). */
			vc_st_release(val_p(w, fb, fs), vc_ld_relaxed(val_p(w, yb, ys)));
			vc_st_release(key_p(w, fb, fs), vc_ld_relaxed(key_p(w, yb, ys)));
			uint64_t nbits = (m & HOP_MASK) | (1ull << (fp - x));
			if (!family_in_bucket(ix, yb, xb, ys))
				nbits &= ~(1ull << (yp - x));
			uint64_t m1 = meta_next(m, nbits);
			VC_CINDEX_WINDOW();
			vc_st_release(mp, m1);
			VC_CINDEX_WINDOW();
			vc_st_release(key_p(w, yb, ys), 0);
			VC_CINDEX_WINDOW();
			vc_st_release(mp, meta_next(m1, nbits));
			fp = yp;
			fs = ys;
			moved = true;
		}
		if (!moved)
			return false;
	}
	*fpp = fp;
	*fsp = fs;
	return true;
}

/* put and add: a present key's value is replaced (put) or left (add). */
static int insert(struct vc_cindex *ix, uint64_t key, uint64_t val, bool replace)
{
	if (key == VC_IKEY_NONE)
		return vc_err(-EINVAL, "cindex: the reserved key cannot be stored");
	vc_aw64 *w = ix->w;
	uint64_t h = home_of(ix, key), sk = ~key, j = 0;
	uint64_t probe = ix->nb < MAX_PROBE ? ix->nb : MAX_PROBE;
	vc_aw64 *mp = meta_p(w, h);
	for (unsigned spins = 0;; backoff(&spins)) {
		struct span sp = { .g0 = h >> SEG_SHIFT, .gcur = h >> SEG_SHIFT };
		seg_lock(ix, sp.g0);
		int i = find_family(ix, h, vc_ld_relaxed(mp), sk, &j);
		if (i >= 0) {
			if (!replace) {
				seg_unlock(ix, sp.g0, 0);
				return -EEXIST;
			}
			vc_st_release(val_p(w, wrap(ix, h + j), (unsigned)i), val); /* W4 */
			seg_unlock(ix, sp.g0, 0);
			return 1;
		}
		/* Empty-slot scan. The acquire load of a 0 key pairs with the
		 * release that emptied it: our stores to the slot come after. */
		uint64_t fp = h;
		unsigned fs = 0;
		bool ok = true;
		for (; fp < h + probe; fp++) {
			uint64_t fb = wrap(ix, fp);
			if (!(ok = span_extend(ix, &sp, fb)))
				break;
			for (fs = 0; fs < B; fs++)
				if (vc_ld_acquire(key_p(w, fb, fs)) == 0)
					goto found;
		}
		span_unlock(ix, &sp, 0);
		if (!ok)
			continue; /* a stripe past the wrap was busy: start over */
		return vc_err(-ENOSPC, "cindex: no empty slot within %llu buckets of bucket %llu",
			      (unsigned long long)probe, (unsigned long long)h);
found:
		if (!displace(ix, h, &fp, &fs)) {
			span_unlock(ix, &sp, 0);
			return vc_err(-ENOSPC, "cindex: no key can move toward bucket %llu",
				      (unsigned long long)h);
		}
		/* W1 */
		uint64_t fb = wrap(ix, fp);
		vc_st_release(val_p(w, fb, fs), val);
		VC_CINDEX_WINDOW();
		vc_st_release(key_p(w, fb, fs), sk);
		VC_CINDEX_WINDOW();
		uint64_t m = vc_ld_relaxed(mp);
		vc_st_release(mp, meta_next(m, (m & HOP_MASK) | (1ull << (fp - h))));
		span_unlock(ix, &sp, 1);
		return 0;
	}
}

int vc_cindex_put(struct vc_cindex *ix, uint64_t key, uint64_t val)
{
	return insert(ix, key, val, true);
}

int vc_cindex_add(struct vc_cindex *ix, uint64_t key, uint64_t val)
{
	return insert(ix, key, val, false);
}

int vc_cindex_cas(struct vc_cindex *ix, uint64_t key, uint64_t expect, uint64_t val)
{
	if (key == VC_IKEY_NONE)
		return -ENOENT;
	vc_aw64 *w = ix->w;
	uint64_t h = home_of(ix, key), g = h >> SEG_SHIFT, j = 0;
	seg_lock(ix, g);
	int i = find_family(ix, h, vc_ld_relaxed(meta_p(w, h)), ~key, &j);
	int r = -ENOENT;
	if (i >= 0) {
		vc_aw64 *vp = val_p(w, wrap(ix, h + j), (unsigned)i);
		r = -EAGAIN;
		if (vc_ld_relaxed(vp) == expect) {
			vc_st_release(vp, val); /* W4 */
			r = 0;
		}
	}
	seg_unlock(ix, g, 0);
	return r;
}

int vc_cindex_delete(struct vc_cindex *ix, uint64_t key)
{
	if (key == VC_IKEY_NONE)
		return -ENOENT;
	vc_aw64 *w = ix->w;
	uint64_t h = home_of(ix, key), g = h >> SEG_SHIFT, j = 0;
	vc_aw64 *mp = meta_p(w, h);
	seg_lock(ix, g);
	uint64_t m = vc_ld_relaxed(mp);
	int i = find_family(ix, h, m, ~key, &j);
	if (i < 0) {
		seg_unlock(ix, g, 0);
		return -ENOENT;
	}
	uint64_t b = wrap(ix, h + j), bits = m & HOP_MASK;
	/* W2: empty the key, then advance the version. */
	vc_st_release(key_p(w, b, (unsigned)i), 0);
	VC_CINDEX_WINDOW();
	if (!family_in_bucket(ix, b, h, (unsigned)i))
		bits &= ~(1ull << j);
	vc_st_release(mp, meta_next(m, bits));
	seg_unlock(ix, g, -1);
	return 0;
}

uint64_t vc_cindex_count(const struct vc_cindex *ix)
{
	uint64_t n = 0;
	for (uint64_t g = 0; g < ix->nseg; g++)
		n += vc_ld_relaxed(&ix->locks[g]) >> 1;
	return n;
}

uint64_t vc_cindex_capacity(const struct vc_cindex *ix)
{
	return ix->cap;
}

uint64_t vc_cindex_slots(const struct vc_cindex *ix)
{
	return ix->nb * B;
}
