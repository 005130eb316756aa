/* LRU stack distances (Mattson et al., 1970) in O(log M) per access.
 *
 * Each key remembers the time slot of its last access; a Fenwick tree over
 * the slots counts which slots are some key's latest. The stack distance of
 * an access is 1 + the number of keys whose latest access came after this
 * key's previous one: a prefix sum. An LRU cache of C pages hits exactly the
 * accesses whose distance is at most C.
 *
 * Slots are renumbered (compacted) when they run out, so the tree has at
 * most 2M + O(1) slots for M live keys: O(log M) per access, amortised,
 * and 13 bytes per slot plus the key map (keymap.h). Not thread safe. */
#ifndef VC_TOOLS_SDIST_H
#define VC_TOOLS_SDIST_H

#include <stddef.h>
#include <stdint.h>

#include "tools/keymap.h"

struct vc_sdist {
	struct vc_keymap map; /* key -> slot */
	uint32_t *fen;        /* Fenwick tree, 1-based, over slots */
	uint64_t *key_at;     /* slot -> key, meaningful where live */
	uint8_t *live;        /* slot is some key's latest access */
	uint64_t cap, now, nlive;
};

int vc_sdist_init(struct vc_sdist *s);
void vc_sdist_fini(struct vc_sdist *s);
/* Records an access; returns its stack distance (>= 1), 0 for a key never
 * seen (or forgotten), or -ENOMEM (as a negative int64). */
int64_t vc_sdist_access(struct vc_sdist *s, uint64_t key);
/* Forgets key (SHARDS drops keys from its sample). */
void vc_sdist_forget(struct vc_sdist *s, uint64_t key);
/* Bytes allocated now. */
size_t vc_sdist_bytes(const struct vc_sdist *s);

#endif
