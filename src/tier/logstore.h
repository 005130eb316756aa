/* Log-structured store for the GPU tier (BAG, Chen et al., TPDS 2014,
 * section 3.3; cleaning policies after RAMCloud, Rumble et al., FAST 2014).
 *
 * Device memory is cut into segments of seg_bytes (a power of two, several
 * MiB), which form a log ordered by their log sequence number (lsn): the
 * head is the open segment that appends fill, the tail the oldest sealed
 * one. A batch of appended pages lands in contiguous slots of the head, so
 * it can travel as one DMA copy. Slots are named by their global number
 * g = seg * slots_per_seg + slot.
 *
 *   append     reserves slots at the head (opening free segments as needed)
 *              for owners with an LRU stamp each
 *   orphan     a re-written or invalidated page leaves its old slot dead;
 *              each segment keeps a live count
 *   tail       eviction takes whole aged segments from the tail; the caller
 *              writes back the dirty live pages and releases the segment
 *   clean      the cleaner picks segments (oldest first, or RAMCloud's
 *              cost-benefit: (1 - u) * age / (1 + u)) and the device moves
 *              their live pages to the head in stamp (LRU) order, oldest
 *              first, so the tail stays the oldest (device op gc_run)
 *
 * Per-slot metadata is the owner (the engine's page id) and its stamp, in
 * mapped pinned host memory: the host writes them on append at no transfer
 * cost, and the device cleaner reads and rewrites them in place. So is the
 * inverse, where[owner] = slot, the GPU tier's index: the cleaner updates
 * it on the device, and the host has no work per moved page. Per-page
 * metadata that must not move with the data (content signature, block
 * pointer, encryption tweak, version) belongs to the owner, not the slot.
 *
 * Not thread safe: the engine calls it under its lock. Costs: append,
 * orphan and rekey O(1) per page; tail and pick O(segments); clean O(live
 * pages moved) on the device, O(segments cleaned) on the host. Metadata:
 * 12 bytes per slot and 4 per owner (pinned), 56 per segment.
 */
#ifndef VC_LOGSTORE_H
#define VC_LOGSTORE_H

#include <stdbool.h>
#include <stdint.h>

#include "device/device.h"

#define VC_LS_DEAD VC_GC_DEAD /* owner of an orphaned or never-written slot */

enum vc_ls_clean_policy {
	VC_LS_CLEAN_OLDEST = 0,       /* BAG: age order, whole tail first */
	VC_LS_CLEAN_COST_BENEFIT = 1, /* RAMCloud: (1 - u) * age / (1 + u) */
};

struct vc_ls_config {
	uint32_t page_size;
	uint32_t seg_bytes;    /* power of two, >= page_size */
	uint64_t total_bytes;  /* rounded down to whole segments; >= 2 segments */
	double free_watermark; /* "low" when free segments fall below this share */
	double early_release;  /* share of live pages released early when low (BAG: 0.10) */
	uint32_t owners;       /* owner keys are < owners: the where[] table (0: none) */
	/* Device memory by chunks of this many bytes (a multiple of the
	 * segment size and of the device's map_granularity), each given back
	 * and taken again whole; 0, or a device that cannot map: one
	 * allocation, fixed. */
	uint64_t chunk_bytes;
};

struct vc_ls_stats {
	uint32_t segs_total, segs_free, segs_live, segs_cleaning;
	uint64_t slots_live, slots_dead; /* in sealed and open segments */
	double fragmentation;            /* dead / (live + dead) */
	uint64_t gc_runs, gc_pages_moved, early_releases, segs_evicted; /* GC time: the engine's */
};

struct vc_ls;

int vc_ls_open(struct vc_device *dev, const struct vc_ls_config *cfg, struct vc_ls **out);
void vc_ls_close(struct vc_ls *ls);

/* Reserves n slots at the head for owners keys[0..n), all with `stamp`;
 * out[i] is owner i's global slot. Consecutive slots of one segment are
 * contiguous in device memory. -ENOSPC (nothing reserved) when the free
 * segments cannot hold them: evict or clean first. */
int vc_ls_append(struct vc_ls *ls, uint32_t n, const uint32_t *keys, uint64_t stamp,
		 uint32_t *out);
/* The slot is garbage from now on. A sealed segment left with no live
 * slot returns to the free pool. */
void vc_ls_orphan(struct vc_ls *ls, uint32_t g);
/* The live slot g changes owner in place (a swap put another page's data
 * there), with a new stamp. */
void vc_ls_rekey(struct vc_ls *ls, uint32_t g, uint32_t key, uint64_t stamp);

uint64_t vc_ls_addr(const struct vc_ls *ls, uint32_t g);
/* Owner of slot g, VC_LS_DEAD if garbage. */
uint32_t vc_ls_key(const struct vc_ls *ls, uint32_t g);
/* The slot of a live owner key (< cfg.owners); anything for others. */
uint32_t vc_ls_where(const struct vc_ls *ls, uint32_t key);
/* Asks for the line of key's where[] entry ahead of a vc_ls_where (a
 * hint: nothing read, any key < cfg.owners). */
void vc_ls_where_prefetch(const struct vc_ls *ls, uint32_t key);
uint32_t vc_ls_slots_per_seg(const struct vc_ls *ls);
uint64_t vc_ls_capacity(const struct vc_ls *ls); /* slots */
uint64_t vc_ls_live_total(const struct vc_ls *ls);
/* Slots that appends can take now: the free segments and the rest of the head. */
uint64_t vc_ls_room(const struct vc_ls *ls);

/* True when free segments are below the watermark. */
bool vc_ls_low(const struct vc_ls *ls);
/* Share of dead slots among used ones. O(1). */
double vc_ls_fragmentation(const struct vc_ls *ls);
/* Takes the tail, the oldest sealed segment, for eviction (it is no longer
 * sealed: nobody else takes or cleans it); -ENOENT if none. */
int vc_ls_take_tail(struct vc_ls *ls, uint32_t *seg);
/* Takes segment seg for eviction: a sealed one, or the head (sealed
 * first). -EBUSY if it is free or already taken. */
int vc_ls_take(struct vc_ls *ls, uint32_t seg);
/* The part of vc_ls_room that vc_ls_take(seg) would kill: the head's
 * unwritten slots when seg is the head, else 0. */
uint64_t vc_ls_take_loss(const struct vc_ls *ls, uint32_t seg);
/* Live slots of a segment, in slot order; returns how many were written
 * to out (at most max). */
uint32_t vc_ls_live(const struct vc_ls *ls, uint32_t seg, uint32_t *out, uint32_t max);
/* Live pages in a segment. */
uint32_t vc_ls_seg_live(const struct vc_ls *ls, uint32_t seg);
/* Drops a whole taken segment (its live pages are gone: the caller has
 * written back or re-homed them) and returns it to the free pool. O(1):
 * the slots' keys are left for appends to overwrite. */
void vc_ls_release(struct vc_ls *ls, uint32_t seg, bool evicted);
/* Gives taken or picked segments back, sealed, unchanged. */
void vc_ls_unpick(struct vc_ls *ls, uint32_t n, const uint32_t *segs);

/* Chooses up to max sealed segments to clean, best first, and takes them.
 * Returns how many. Only segments whose cleaning frees space are chosen
 * (live < slots per segment). O(segments * max). */
uint32_t vc_ls_pick(struct vc_ls *ls, int policy, uint32_t max, uint32_t *segs);
/* Segments the cleaning of segs[0..n) would free: n minus the segments its
 * live pages fill at the head. <= 0 means cleaning them gains nothing;
 * -1 also when the free pool cannot take their live pages. */
int64_t vc_ls_clean_gain(const struct vc_ls *ls, uint32_t n, const uint32_t *segs);
/* Cleans taken segments: the device moves their live pages to the head in
 * stamp order (oldest first), updating where[] (vc_ls_where: the caller's
 * index of the GPU tier needs no update), and the segments return to the
 * free pool. The caller guarantees that nothing is in flight on those
 * pages. Returns pages moved, or -ENOSPC with nothing changed (segments
 * still taken) when the head cannot take them. The pause is O(live pages
 * of the n segments) on the device, with one host round trip. */
int vc_ls_clean(struct vc_ls *ls, uint32_t n, const uint32_t *segs);

/* Pages to release early once below the watermark: early_release of the
 * live pages (BAG: up to 10%), so later evictions need not stall. */
uint64_t vc_ls_early_budget(const struct vc_ls *ls);
/* Counts pages released early. */
void vc_ls_note_early_release(struct vc_ls *ls, uint64_t pages);

void vc_ls_get_stats(const struct vc_ls *ls, struct vc_ls_stats *st);

/* Shrinking and growing (BAG section 3.3.5): whole chunks of segments.
 *
 *   drain    an ON chunk leaves the log: its free segments leave the free
 *            stack, its head (if any) is sealed, and from then on each of
 *            its segments goes OFF when released (evicted, cleaned out,
 *            or emptied by orphans) instead of becoming free. Appends and
 *            cleaning never land in it; the caller empties its sealed
 *            segments (take + evict, or pick + clean to move the pages
 *            elsewhere).
 *   gone     once empty (every segment OFF) and its memory given back by
 *            the caller (mem_unmap of vc_ls_chunk_range, outside the
 *            engine lock: nothing refers to it any more). A segment may be
 *            condemned first (its pages claimed, to be dropped after the
 *            memory went: the chunk counts as empty meanwhile)
 *   online   an OFF chunk whose memory the caller mapped again: its
 *            segments join the free stack
 * Capacity (vc_ls_capacity), the watermark and the stats follow the ON
 * chunks. Costs: drain O(free segments + chunk), empty and sealed
 * O(chunk), online O(chunk); no device work here. */
enum { VC_LS_CHUNK_ON, VC_LS_CHUNK_DRAIN, VC_LS_CHUNK_OFF };
bool vc_ls_resizable(const struct vc_ls *ls);
uint32_t vc_ls_nchunks(const struct vc_ls *ls);
int vc_ls_chunk_state(const struct vc_ls *ls, uint32_t ch);
/* Segments of chunk ch: returns how many, *first the first one. */
uint32_t vc_ls_chunk_segs(const struct vc_ls *ls, uint32_t ch, uint32_t *first);
uint64_t vc_ls_chunk_live(const struct vc_ls *ls, uint32_t ch);
/* The part of vc_ls_room that lies in chunk ch (its free segments, the
 * rest of the head if the head is there): what draining it takes from the
 * room. O(chunk). */
uint64_t vc_ls_chunk_room(const struct vc_ls *ls, uint32_t ch);
uint64_t vc_ls_chunk_bytes(const struct vc_ls *ls, uint32_t ch);
void vc_ls_chunk_range(const struct vc_ls *ls, uint32_t ch, uint64_t *addr, uint64_t *len);
/* Device memory the store holds now (chunks not OFF). */
uint64_t vc_ls_bytes(const struct vc_ls *ls);
uint64_t vc_ls_bytes_max(const struct vc_ls *ls); /* every chunk's */
/* Slots of every chunk, ON or not: what the store was opened with. */
uint64_t vc_ls_capacity_max(const struct vc_ls *ls);
/* -EINVAL unless the store is resizable and the chunk ON. */
int vc_ls_chunk_drain(struct vc_ls *ls, uint32_t ch);
bool vc_ls_chunk_empty(const struct vc_ls *ls, uint32_t ch);
/* The chunk's sealed segments, youngest first (at most max); how many. */
int vc_ls_chunk_sealed(const struct vc_ls *ls, uint32_t ch, uint32_t *segs, uint32_t max);
/* A taken segment whose live pages the caller claimed to drop them after
 * the memory has gone: counts as empty for vc_ls_chunk_empty; the caller
 * drops the pages (orphans) and releases it later. */
void vc_ls_seg_condemn(struct vc_ls *ls, uint32_t seg);
/* Chunk ch's memory is being given back (vc_ls_bytes stops counting it);
 * gone follows once its segments are released. */
void vc_ls_chunk_unmapped(struct vc_ls *ls, uint32_t ch);
void vc_ls_chunk_gone(struct vc_ls *ls, uint32_t ch);
void vc_ls_chunk_online(struct vc_ls *ls, uint32_t ch);

#endif
