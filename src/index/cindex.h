/* Concurrent index: (backing id, page number) -> packed location.
 *
 * Open addressing that stays fast above 90% load; lookups take no lock
 * (they validate against per-bucket versions, seqlock style) and writers
 * take one of a set of striped locks. Built on the portable atomics of
 * src/index/atomics.h so the same structure can later be compiled for the
 * device (the GPU-side file API needs it in GPU memory).
 *
 * Keys: vc_ikey(bid, pno) packs a 16-bit backing id and a 48-bit page
 * number; the all-ones key is reserved. Values: vc_iloc packs tier (2 bits),
 * segment (24), slot in segment (22) and a 16-bit version.
 */
#ifndef VC_CINDEX_H
#define VC_CINDEX_H

#include <stdbool.h>
#include <stdint.h>

#define VC_IKEY_NONE UINT64_MAX

static inline uint64_t vc_ikey(uint32_t bid, uint64_t pno)
{
	return ((uint64_t)(bid & 0xffff) << 48) | (pno & 0xffffffffffffull);
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
/* Replaces only if the current value is `expect`: 0, -ENOENT, or -EAGAIN. */
int vc_cindex_cas(struct vc_cindex *ix, uint64_t key, uint64_t expect, uint64_t val);
/* 0, or -ENOENT. */
int vc_cindex_delete(struct vc_cindex *ix, uint64_t key);

uint64_t vc_cindex_count(const struct vc_cindex *ix);
uint64_t vc_cindex_capacity(const struct vc_cindex *ix);

#endif
