/* Concurrent index: (backing id, page number) -> packed location.
 *
 * Open addressing that stays fast above 90% load; lookups take no lock
 * (they validate against per-bucket versions, seqlock style) and writers
 * take one of a set of striped locks. Built on the portable atomics of
 * src/base/atomics.h so the same structure can later be compiled for the
 * device (the GPU-side file API needs it in GPU memory).
 *
 * Keys: vc_ikey(bid, pno) packs a 16-bit backing id and a 48-bit page
 * number; the all-ones key is reserved. Values: vc_iloc packs tier (2 bits),
 * segment (24), slot in segment (22) and a 16-bit version.
 */
#ifndef VC_CINDEX_H
#define VC_CINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/pageno.h"

#define VC_IKEY_NONE UINT64_MAX

static inline uint64_t vc_ikey(uint32_t bid, uint64_t pno)
{
	return vc_pno(bid, pno); /* the layout of base/pageno.h */
}

static inline uint64_t vc_iloc(unsigned tier, uint32_t segment, uint32_t slot, uint32_t version)
{
	return ((uint64_t)(tier & 3) << 62) | ((uint64_t)(segment & 0xffffff) << 38) |
	       ((uint64_t)(slot & 0x3fffff) << 16) | (version & 0xffff);
}
static inline unsigned vc_iloc_tier(uint64_t v) { return (unsigned)(v >> 62); }
static inline uint32_t vc_iloc_segment(uint64_t v) { return (uint32_t)(v >> 38) & 0xffffff; }
static inline uint32_t vc_iloc_slot(uint64_t v) { return (uint32_t)(v >> 16) & 0x3fffff; }
static inline uint32_t vc_iloc_version(uint64_t v) { return (uint32_t)v & 0xffff; }

struct vc_cindex;

/* Room for `capacity` keys (the table may round up). */
int vc_cindex_create(uint64_t capacity, struct vc_cindex **out);
void vc_cindex_destroy(struct vc_cindex *ix);

/* Lock-free; true and *val when present. */
bool vc_cindex_lookup(const struct vc_cindex *ix, uint64_t key, uint64_t *val);
/* Inserts or replaces: 0 new, 1 replaced, -ENOSPC when no room. */
int vc_cindex_put(struct vc_cindex *ix, uint64_t key, uint64_t val);
/* Inserts only: 0 new, -EEXIST (nothing changed) when the key is present,
 * -ENOSPC when no room. Of racing adds of one key exactly one returns 0:
 * the engine's lock-free misses decide by it who loads a page. */
int vc_cindex_add(struct vc_cindex *ix, uint64_t key, uint64_t val);
/* Replaces only if the current value is `expect`: 0, -ENOENT, or -EAGAIN. */
int vc_cindex_cas(struct vc_cindex *ix, uint64_t key, uint64_t expect, uint64_t val);
/* 0, or -ENOENT. */
int vc_cindex_delete(struct vc_cindex *ix, uint64_t key);

uint64_t vc_cindex_count(const struct vc_cindex *ix);
uint64_t vc_cindex_capacity(const struct vc_cindex *ix);

/* ---- Additions (issue 3) ----
 *
 * Semantics of the functions above, as implemented (src/index/cindex.c):
 * - capacity: create() sizes the table for capacity / VC_CINDEX_MAX_LOAD
 *   slots, and capacity() reports at least the capacity asked for. Puts of
 *   new keys succeed up to capacity keys: the first failed put, filling
 *   with random or page keys, came at 0.97-1.0 of the slots in every trial
 *   measured (capacity is 0.95 of them); failing earlier would take keys
 *   chosen against the hash. Past capacity puts may fail. -ENOSPC: no
 *   empty slot could be brought within reach of the key's home; the failed
 *   put changed nothing. Puts that replace a value never fail for room.
 * - put/cas/delete are linearizable and release; lookup is acquire: data
 *   written before a put is visible to a lookup that returns its value.
 * - A replaced value (put of a present key, cas) is one atomic store: a
 *   concurrent lookup returns the old or the new value, never a mix, and
 *   never a value of another key. To read-modify-write a value use cas.
 * - Lookups never block and never wait for writers; a key that is present
 *   throughout a lookup is found, even while writers move it.
 * - VC_IKEY_NONE: put returns -EINVAL, lookup false, cas/delete -ENOENT.
 * - count() is exact when no writer is active (O(slots / 224) loads).
 * - Memory: 128 bytes per 7 slots, about 19.3 bytes per key at capacity.
 */

/* capacity / slots at the guaranteed fill. */
#define VC_CINDEX_MAX_LOAD 0.95

/* Slots in the table (the load factor is count / slots). */
uint64_t vc_cindex_slots(const struct vc_cindex *ix);
/* Starts loading the cache lines a lookup of `key` reads. */
void vc_cindex_prefetch(const struct vc_cindex *ix, uint64_t key);
/* n lookups, overlapping their cache misses (1.5-2 times the rate of single
 * lookups on a table much larger than the caches); vals[i] is set where
 * found, found may be NULL. Returns how many were found. Each lookup is as
 * vc_cindex_lookup. */
size_t vc_cindex_lookup_n(const struct vc_cindex *ix, size_t n, const uint64_t *keys,
			  uint64_t *vals, bool *found);
/* Slot index of `key`, or -1 (tests and diagnostics; lock-free). */
int64_t vc_cindex_debug_slot(const struct vc_cindex *ix, uint64_t key);

#endif
