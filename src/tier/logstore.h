/* Log-structured store for the GPU tier (BAG, Chen et al., TPDS 2014,
 * section 3.3; cleaning policies after RAMCloud, Rumble et al., FAST 2014).
 *
 * Device memory is cut into segments of seg_bytes (a power of two, several
 * MiB), which form a log ordered by their log sequence number (lsn): the
 * head is the open segment that appends fill, the tail the oldest sealed
 * one. A batch of appended pages lands in contiguous slots of the head, so
 * it can travel as one DMA copy.
 *
 *   append     reserves slots at the head (opening free segments as needed)
 *   orphan     a re-written or invalidated page leaves its old slot dead;
 *              each segment keeps a live count
 *   tail       eviction drops whole aged segments from the tail; the caller
 *              first writes back the dirty live pages it lists
 *   clean      the cleaner picks segments (oldest first, or RAMCloud's
 *              cost-benefit: (1 - u) * age / (1 + u)), and plans device-to-
 *              device moves of their live pages to the head in the order the
 *              caller gives (its LRU order), so the tail stays the oldest
 *
 * Per-slot metadata keeps room for what comes next: the page key, a version
 * for consistency, a content signature and block pointer for dedup, and a
 * tweak for encryption.
 *
 * Not thread safe: the engine calls it under its lock. Costs: append and
 * orphan O(1) per page; tail and pick O(segments); a cleaning plan O(live
 * pages moved). Metadata: 48 bytes per slot, 32 per segment.
 */
#ifndef VC_LOGSTORE_H
#define VC_LOGSTORE_H

#include <stdbool.h>
#include <stdint.h>

#include "device/device.h"

#define VC_LS_DEAD UINT64_MAX /* key of an orphaned or never-written slot */

struct vc_lsloc {
	uint32_t seg;
	uint32_t slot;
};

struct vc_lsmeta {
	uint64_t key;     /* page key, VC_LS_DEAD when the slot is garbage */
	uint32_t version; /* bumped by the owner on every rewrite */
	uint32_t flags;   /* VC_LSF_* */
	uint8_t sig[16];  /* content signature (dedup) */
	uint64_t block;   /* dedup block pointer */
	uint64_t tweak;   /* encryption tweak / IV */
};
#define VC_LSF_DIRTY 1u

enum vc_ls_clean_policy {
	VC_LS_CLEAN_OLDEST = 0,       /* BAG: age order, whole tail first */
	VC_LS_CLEAN_COST_BENEFIT = 1, /* RAMCloud: (1 - u) * age / (1 + u) */
};

struct vc_ls_config {
	uint32_t page_size;
	uint32_t seg_bytes;     /* power of two, >= page_size */
	uint64_t total_bytes;   /* rounded down to whole segments */
	double free_watermark;  /* clean / release when free segments fall below this share */
	double early_release;   /* share of aged pages released early (BAG: 0.10) */
};

struct vc_ls_stats {
	uint32_t segs_total, segs_free, segs_live, segs_cleaning;
	uint64_t slots_live, slots_dead; /* in sealed and open segments */
	double fragmentation;            /* dead / (live + dead) */
	uint64_t gc_runs, gc_pages_moved, gc_ns, early_releases, segs_evicted;
};

struct vc_ls;

int vc_ls_open(struct vc_device *dev, const struct vc_ls_config *cfg, struct vc_ls **out);
void vc_ls_close(struct vc_ls *ls);

/* Reserves n slots at the head for the given keys, in order; out[i] is
 * key i's slot. Consecutive slots of one segment are contiguous in device
 * memory. -ENOSPC (nothing reserved) when the free segments cannot hold
 * them: evict or clean first. */
int vc_ls_append(struct vc_ls *ls, uint32_t n, const uint64_t *keys, struct vc_lsloc *out);
/* The slot is garbage from now on. */
void vc_ls_orphan(struct vc_ls *ls, struct vc_lsloc loc);

uint64_t vc_ls_addr(const struct vc_ls *ls, struct vc_lsloc loc);
struct vc_lsmeta *vc_ls_meta(struct vc_ls *ls, struct vc_lsloc loc);
uint32_t vc_ls_slots_per_seg(const struct vc_ls *ls);

/* True when free segments are below the watermark. */
bool vc_ls_low(const struct vc_ls *ls);
/* The tail: the oldest sealed segment not being cleaned; -ENOENT if none. */
int vc_ls_tail(const struct vc_ls *ls, uint32_t *seg);
/* Live slots of a segment, in slot order; returns how many were written
 * to out (at most max). */
uint32_t vc_ls_live(const struct vc_ls *ls, uint32_t seg, struct vc_lsloc *out, uint32_t max);
/* Drops a whole segment (its live pages are gone: the caller has written
 * back or re-homed them) and returns it to the free pool. */
void vc_ls_release(struct vc_ls *ls, uint32_t seg, bool evicted);

/* Chooses up to max sealed segments to clean, best first, and marks them
 * cleaning. Returns how many. */
uint32_t vc_ls_pick(struct vc_ls *ls, int policy, uint32_t max, uint32_t *segs);
/* Plans moving the live pages `from` (in the caller's order, typically LRU
 * from oldest to newest) to fresh slots at the head: fills moves[i] (device
 * to device COPY), to[i] and copies their metadata. The old slots become
 * dead. -ENOSPC when the head cannot take them. */
int vc_ls_relocate(struct vc_ls *ls, uint32_t n, const struct vc_lsloc *from, struct vc_lsloc *to,
		   struct vc_move *moves);
struct vc_batcher;

/* One incremental cleaning step, the whole GC cycle for up to max_segs
 * segments: picks them by `policy`, lets `order` arrange their live pages
 * (the caller's LRU order, oldest first; NULL keeps slot order), moves the
 * pages device-to-device to the head in batches through `bat`, reports the
 * relocations to `moved` in bulk (the caller updates its index), and frees
 * the segments. Returns pages moved; -ENOSPC, with nothing changed, when
 * the head cannot take them. The pause is bounded by max_segs segments. */
int vc_ls_clean(struct vc_ls *ls, struct vc_batcher *bat, int policy, uint32_t max_segs,
		void (*order)(void *arg, struct vc_lsloc *locs, uint32_t n),
		void (*moved)(void *arg, const struct vc_lsloc *from, const struct vc_lsloc *to,
			      uint32_t n),
		void *arg);

/* Records a finished cleaning run: pages moved and time taken. */
void vc_ls_note_gc(struct vc_ls *ls, uint64_t pages, uint64_t ns);
/* Pages to release early once below the watermark: early_release of the
 * live pages (BAG: up to 10%), so later evictions need not stall. */
uint64_t vc_ls_early_budget(const struct vc_ls *ls);
/* Counts pages released early. */
void vc_ls_note_early_release(struct vc_ls *ls, uint64_t pages);

void vc_ls_get_stats(const struct vc_ls *ls, struct vc_ls_stats *st);

#endif
