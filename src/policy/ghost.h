/* A ghost list: the keys of recently evicted pages, oldest first out.
 *
 * ARC's B1/B2, 2Q's A1out and S3-FIFO's ghost queue are all this: keys
 * enter at the new end, leave from the old end when the list is over its
 * bound or when the policy trims it, and leave from anywhere when the key
 * comes back ("take"). Memory is fixed at create: a pool of cap + 1 entries
 * of 16 bytes and a bucket array of 4 bytes per slot, at most 2 x cap
 * slots rounded to a power of two: 24-32 bytes per remembered key, and no
 * allocation afterwards. Every operation is O(1) expected (chained
 * hashing over the pool, load <= 1/2).
 */
#ifndef VC_POLICY_GHOST_H
#define VC_POLICY_GHOST_H

#include <stdbool.h>
#include <stdint.h>

struct vc_ghost;

/* cap 0 is allowed: the list remembers nothing. NULL on out of memory. */
struct vc_ghost *vc_ghost_create(uint64_t cap);
void vc_ghost_destroy(struct vc_ghost *g);
/* Adds key at the new end (it must not be present). The list may hold one
 * key over its bound until the next vc_ghost_trim (beyond that, the oldest
 * is dropped): a policy adds the key of the page it evicts, then looks up
 * the incoming key, then trims, so the lookup sees the list as it was when
 * the miss happened, as in the papers, where the lookup comes first. */
void vc_ghost_add(struct vc_ghost *g, uint64_t key);
/* Drops the oldest keys until the list is within its bound. */
void vc_ghost_trim(struct vc_ghost *g);
/* Removes key if present; returns whether it was. */
bool vc_ghost_take(struct vc_ghost *g, uint64_t key);
bool vc_ghost_has(const struct vc_ghost *g, uint64_t key);
/* Sets the mark of key's entry, one bit that the policy owns (ARC marks a
 * key whose return it has already counted) and that vc_ghost_add clears.
 * -ENOENT when key is absent, else the mark before the call (0 or 1). */
int vc_ghost_mark(struct vc_ghost *g, uint64_t key);
/* Drops the oldest key (no-op when empty). */
void vc_ghost_pop(struct vc_ghost *g);
uint64_t vc_ghost_count(const struct vc_ghost *g);

#endif
