/* Test hooks into the GPU tier's memory, for the tests that check what
 * it holds (tests/test_encrypt.c): not part of the public API, not
 * exported by the shared library (src/vramcache.map); the tests reach
 * them through the static library. */
#ifndef VC_ENGINE_DEBUG_H
#define VC_ENGINE_DEBUG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vramcache.h"

/* Copies every byte of GPU memory the GPU tier holds now (its mapped
 * chunks, in address order) into a new buffer: *out (free() it) of *len
 * bytes. Under the tier's resize lock, so no chunk comes or goes
 * meanwhile; moves in flight may be seen half done (call it while the
 * cache is idle). -ENODEV without a GPU tier. Cost: the tier's size in
 * device-to-host copies through a pinned bounce. */
int eng_debug_gpu_dump(vc_cache *c, unsigned char **out, size_t *len);

/* Tampering, as another user of the GPU's memory could: xors `mask` into
 * the byte at `off` of volume v as the GPU tier holds it (ciphertext when
 * encrypted), leaving the cache's records alone. The page is claimed
 * (BUSY) meanwhile, so no move races with it. -ENOENT when that page is
 * not settled in the GPU tier, -EBUSY when it is in use. */
int eng_debug_gpu_poke(vc_volume *v, uint64_t off, unsigned char mask);

/* A failing GPU, as a device error on it would be: vc_device_fault on
 * part `gpu`'s device (CUDA: a kernel that traps, so the driver's own
 * sticky error; emu: every later call on it fails). The engine finds out
 * at its next call there. -EINVAL: no such part. */
int eng_debug_gpu_fault(vc_cache *c, unsigned gpu);

/* Dedup's collision hook: while on, every block's fingerprint is the same
 * (zero), so every block going down matches a stored one and only the
 * byte compare keeps unequal blocks apart (tests/test_dedup.c). -EINVAL
 * when dedup is off. */
int eng_debug_dedup_collide(vc_cache *c, bool on);

/* Dedup's two trips down (dedup.c): *direct, the blocks that went the
 * direct trip (into fresh slots, looked up after); *merged_late, those of
 * them shared after their move (each left a dead slot). The rest of
 * dedup_blocks_in went the staged trip. -EINVAL when dedup is off. */
int eng_debug_dedup_trips(vc_cache *c, uint64_t *direct, uint64_t *merged_late);
/* The blocks the indexer took off its queue after their trips
 * (dedup_later.c; those that died before count here, not in *direct),
 * once it is done with those queued before the call (*later); -EINVAL
 * when dedup is off. */
int eng_debug_dedup_later(vc_cache *c, uint64_t *later);
/* Test hook: the indexer stops taking blocks off its queue (on) or goes
 * on (off). Nothing that drains it (the statistics, the two calls above,
 * the check) may run while it is paused: they would wait for it. -EINVAL
 * without an indexer. */
int eng_debug_dedup_later_pause(vc_cache *c, bool on);

/* With VC_DD_PROF=1 in the environment at open: prints each trip phase's
 * time summed since the last call (or open) to stderr, labelled `what`,
 * and starts the sums again. Nothing otherwise. For benchmarks. */
void eng_debug_dedup_prof(vc_cache *c, const char *what);
/* Blocks that went down by their host slots' notes (dedup_down.c): *back,
 * by reference to the stored blocks their pages came up from (GRAM swap);
 * *known, down the known trip (fingerprints taken when their pages were
 * loaded, or from the blocks they came up from). -EINVAL when dedup is
 * off. */
int eng_debug_dedup_notes(vc_cache *c, uint64_t *back, uint64_t *known);
/* With VC_LOCK_PROFILE=US in the environment at open: prints the engine
 * lock's holds of US microseconds or more since the last call (or open),
 * by the function that ended them, to stderr, labelled `what`, and
 * starts the counts again. Nothing otherwise. For benchmarks. */
void eng_debug_lock_profile(vc_cache *c, const char *what);
/* Kept blocks (GRAM swap, dedup.c): *back, blocks gone back to by
 * reference that had no use left, kept for their pages while up;
 * *freed, kept blocks freed by claims (cleaning, eviction, a shrink)
 * before their pages came back. -EINVAL when dedup is off. */
int eng_debug_dedup_kept(vc_cache *c, uint64_t *back, uint64_t *freed);
/* Checks the block store's invariants (dedup.c's head comment) while no
 * trip is in flight (the caller's threads idle): no slot promised
 * (dd.resv 0) and no block pinned; each block with uses owns a live slot
 * keyed by it, its use list as long as its count, each use naming it;
 * every other id free, once; the fingerprint table naming only live
 * indexed blocks, each found by its fingerprint; dd.pages the pages
 * whose uses are linked; dd.kept the blocks with keeps and no use, each
 * indexed; every keep a note's. 0, or -EPROTO naming the first broken one on
 * stderr; -EINVAL when dedup is off. O(blocks + page entries). */
int eng_debug_dedup_check(vc_cache *c);

#endif
