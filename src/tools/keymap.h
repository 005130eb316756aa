/* A hash map from 64-bit keys to 64-bit values, for the trace tools (sim,
 * mrc, replay): open addressing with linear probing over a power-of-two
 * table kept at most 1/2 full, doubling as it grows; deletion shifts the
 * following entries back (no tombstones), so lookups stay short under the
 * insert/delete churn of a simulated cache. Every key is allowed: the one
 * key that marks empty slots (UINT64_MAX) is kept beside the table.
 *
 * Cost: get, put, del O(1) expected; put is amortised over doublings.
 * Memory: 16 bytes a slot, 32-64 bytes a key. Not thread safe. */
#ifndef VC_TOOLS_KEYMAP_H
#define VC_TOOLS_KEYMAP_H

#include <stdbool.h>
#include <stdint.h>

struct vc_keymap {
	uint64_t *keys, *vals;
	uint64_t mask, n;
	bool has_max;     /* key UINT64_MAX is present */
	uint64_t max_val; /* its value */
};

/* hint: expected keys (0 is fine). 0 or -ENOMEM. */
int vc_keymap_init(struct vc_keymap *m, uint64_t hint);
void vc_keymap_fini(struct vc_keymap *m);
/* Pointer to key's value, or NULL. Valid until the next put or del. */
uint64_t *vc_keymap_get(const struct vc_keymap *m, uint64_t key);
/* Sets key's value (inserting it). 1 inserted, 0 replaced, -ENOMEM. */
int vc_keymap_put(struct vc_keymap *m, uint64_t key, uint64_t val);
/* Removes key; returns whether it was there. */
bool vc_keymap_del(struct vc_keymap *m, uint64_t key);
static inline uint64_t vc_keymap_count(const struct vc_keymap *m)
{
	return m->n;
}

#endif
