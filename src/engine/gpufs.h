/* The engine's side of the GPU file API (src/gpufs/, docs/GPUFS.md): what
 * the GPUfs host half may ask of the engine, and nothing else of it.
 * Implemented in src/engine/gpufs.c; this header needs no engine internals.
 *
 * A grant is one engine pin (page.h: a read pin on the page's state word)
 * that the GPUfs host half holds for the device: while it holds it, the
 * page stays in the tier and slot it was granted in (cleaning, eviction,
 * promotion, writers and drops all claim only unpinned pages), so the
 * device may read its bytes at the granted address. */
#ifndef VC_ENGINE_GPUFS_H
#define VC_ENGINE_GPUFS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "vramcache.h"

struct vc_device;

/* 0 when GPUfs can run on c, else -ENOTSUP with a message (dedup: a GPU
 * page is D blocks in scattered slots; encryption: the GPU tier holds
 * ciphertext, and device reads would need the key on the device). */
int eng_gfs_check(vc_cache *c);
struct vc_device *eng_gfs_device(vc_cache *c);
/* The volume's first page number (volume << 48): device keys are it | index. */
uint64_t eng_gfs_base(vc_volume *v);
/* Page ids are below this (sizes the host half's per-page counts). */
uint64_t eng_gfs_npool(vc_cache *c);
/* Pins page idx of v where it is cached (host or GPU tier), loading it into
 * the GPU tier first when it is not (one bulk round: backing read, one
 * batched move), or into the host tier when the GPU tier cannot take it:
 * 0 with its id and the device-visible address of its bytes, or -errno
 * (past the end: -ENXIO). `host`: in the host tier only (promoted there
 * when it is in the GPU tier), for long pins. Unlocked; may sleep on the
 * page. */
int eng_gfs_pin(vc_volume *v, uint64_t idx, bool host, uint32_t *id, uint64_t *addr);
/* Loads the pages of list[0..n) (engine page numbers, base | index, of
 * open volumes and inside them; any order, duplicates allowed: sorted in
 * place) that are not cached into the GPU tier together: batch_pages a
 * round, each round one backing read per volume and one batched move
 * (GPUfs'16 §4.3.1). Best effort (a page it could not load is left to
 * eng_gfs_pin): *rounds and *loaded say what it did. Unlocked; sleeps. */
void eng_gfs_load(vc_cache *c, uint64_t *list, uint32_t n, uint32_t *rounds, uint32_t *loaded);
/* Drops a pin eng_gfs_pin took. Lock-free (wakes sleepers). */
void eng_gfs_unpin(vc_cache *c, uint32_t id);
/* Quiet mode on or off (nests): while on, the engine runs nothing on the
 * device's SMs, so that a user's kernel holding every SM cannot starve the
 * requests it waits for: moves go to the copy engines (vc_batcher_set_dma),
 * GPU cleaning defers to tail eviction, a shrink evicts instead of moving.
 * What it cannot cover is in docs/GPUFS.md. */
void eng_gfs_quiet(vc_cache *c, bool on);
/* Writes the cache made to v's backing file so far (write-through writes,
 * write-backs), counted after each is done. Close-to-open tells the
 * cache's own changes of a file from someone else's with it: a file whose
 * stat changed while this count stayed put was changed outside. *begun
 * (unless NULL): the writes begun (vc_backing_writes). */
uint64_t eng_gfs_writes(vc_volume *v, uint64_t *begun);
/* vc_volume_flush, less the backing sync when the cache wrote nothing to
 * v's backing since the sync that *synced records (a gclose after others
 * with no write between them costs no fdatasync): 0 or -errno; *synced is
 * advanced (atomically, never back) when it synced; *did says whether. */
int eng_gfs_flush(vc_volume *v, _Atomic uint64_t *synced, bool *did);
/* Whether the backing file holds every acknowledged write of the cache's
 * volumes (write-through, or read-only): then a page read from the OS
 * page cache equals the cached one, and kernels may read uncached pages
 * straight from the file's mapping (docs/GPUFS.md, step 4). */
bool eng_gfs_file_current(vc_volume *v);
/* Whether page idx of v is in the cache now (either tier): lock-free, a
 * hint (it may change at once). */
bool eng_gfs_cached(vc_volume *v, uint64_t idx);
/* What sleepers in the engine may wait for, for a revoke pass: the wait
 * buckets (pw_bucket) that have sleepers or whose page a sleeper could
 * not claim (c->pin_want, cleared here), as bits set in sel[PW_BUCKETS /
 * 32] (the caller zeroes it); in *stalls the count of waits so far for
 * room that pins kept from being made (c->pin_stalls); in *resource
 * whether anyone sleeps for a resource now (staging, slots, I/O: mostly
 * not a grant's doing). The number of buckets set. O(buckets), no lock. */
uint32_t eng_gfs_wait_sel(vc_cache *c, uint32_t *sel, uint64_t *stalls, bool *resource);

#endif
