/* The engine: a page cache over backing stores with a host tier and a GPU
 * tier under one replacement policy (GRAM, Zhong & He, ICCS 2011), the GPU
 * tier a log of segments with a device-side cleaner (BAG, Chen et al.,
 * TPDS 2014). This header holds the engine's state, its lock rules and the
 * prototypes each room exports, grouped by the file that owns them.
 *
 * Rooms (src/engine/):
 *   api.c        configuration, open/close of caches and volumes, statistics
 *   access.c     page access: the lock-free hit path, GPU-tier hits served in
 *                place, acquire() for everything else, reads and writes
 *   moves.c      tier moves: misses, demotions, GRAM swaps, dropping pages
 *   gpuspace.c   GPU space: tail-segment eviction, cleaning, early release
 *   gpusize.c    the GPU tier's size at run time: chunks given back, taken again
 *   writeback.c  dirty pages to the store: single pages, GPU batches, and
 *                flushes of ranges walking the volume's dirty set
 *   flusher.c    background write-back above the dirty limit's mark
 *   range.c      drop, prefetch and extent over byte ranges
 *   resize.c     a volume's store changing size (vc_volume_resize)
 *   batcher.c    page moves through the device queue (or launched batches)
 *   dedup.c      block deduplication of the GPU tier (vc_config.dedup)
 *   index.c      the entry pool and the page index over it (page.h)
 *   place.c      which part of the GPU tier a page goes to   } gpus.h: the
 *   multigpu.c   a part that fails, pages moved between parts } tier's parts
 *
 * The data path:
 *   read hit, host tier   copy out of the pinned host slot (no lock)
 *   read hit, GPU tier    pin, copy over PCIe into the thread's bounce pages
 *                         (no lock; the page stays: VC_GPU_HITS_SERVE), or
 *                         GRAM's swap up to the host tier (VC_GPU_HITS_SWAP)
 *   miss                  load into a free host slot (no lock: acquire_fast);
 *                         when none is free, under c->mu, demote a batch of
 *                         host victims to the head of the GPU tier, whose own
 *                         space comes back by cleaning or tail eviction
 *                         (gpuspace.c)
 *   write                 own (EXCL) the host page, copy in; write-through
 *                         writes the store before returning; no lock unless
 *                         the page is in the GPU tier or turns dirty
 *
 * Page numbers: base/pageno.h (volume << 48 | page index), the key of the
 * index, the policy and the traces alike.
 *
 * Lock rules.
 *   c->mu         guards removals from the index, the GPU log, victim
 *                 choice and tier moves, settled page entries' fields (see
 *                 page.h for who else writes them), the dirty counts and
 *                 c->st. Not on the paths of hits, of misses while the host
 *                 tier has free slots, or of writes to host pages: index
 *                 lookups and inserts, both free lists (host slots, page
 *                 entries: lock-free stacks) and the per-thread counters
 *                 and policy queues need no lock. Data never moves under
 *                 it: a page whose data is in flight is BUSY, and whoever
 *                 needs it sleeps (eng_wait_page, bounded by
 *                 WAIT_GUARD_NS) and looks it up again on waking: its
 *                 entry may have been freed and reused.
 *   page st       one atomic word per page (page.h): pins, BUSY, EXCL, and
 *                 the tier it is settled in. Readers pin without the lock;
 *                 the engine claims (vc_page_claim) only pages with no pins.
 *   c->opq        the policy's queue layer has its own lock, taken inside
 *                 c->mu or alone (lock-free hits), never the other way.
 *   v->dirty      each volume's dirty set (index/dirtyset.h: page indexes,
 *                 O(log) add, del, next, collect) has its own lock, a leaf:
 *                 taken inside c->mu or alone, and nothing is taken inside
 *                 it. Invariant: every dirty page of the volume is in it.
 *                 A writer adds its page, owned (EXCL) and still clean,
 *                 before it copies anything in (dirty_reserve), so a
 *                 failed add (-ENOMEM) fails the write with nothing lost;
 *                 the page turns dirty before the writer lets go
 *                 (dirty_mark, lock-free: the owner alone may set it, and
 *                 whoever clears it holds a pin or BUSY, which EXCL
 *                 excludes). So a member is dirty, or owned by such a
 *                 writer, and readers of the set (flush, extent) treat
 *                 members as candidates: flush looks each up under c->mu
 *                 and skips clean ones, and extent counts them as data.
 *                 A member leaves only under c->mu together with p->dirty
 *                 (dirty_clear), after its write-back completed or with
 *                 its page dropped, so a flush's walk that starts after a
 *                 write was acknowledged meets that write's page, unless
 *                 the store has it already or it was discarded. v->ndirty
 *                 counts the dirty pages: the set's count but for writers
 *                 between reserve and mark. Costs: a flush of a range
 *                 holds c->mu per round for O(batch_pages) lookups, never
 *                 for a pass over the pool; an extent takes no c->mu.
 *   batcher, device queue, backing store: their own locks, taken inside
 *                 c->mu or alone; none calls back into the engine.
 *   dedup trip   a trip down (eng_dd_down) runs unlocked between two to
 *                 four short holds of c->mu, the first and last its
 *                 caller's (dedup_down.c): its pages BUSY, their
 *                 slots reserved (dd.resv), the stored blocks it compares
 *                 against pinned (eng_blk.pins: not moved, evicted or
 *                 freed), re-checked under c->mu before sharing.
 * Store errors and the dirty limit: engine/dirty.h.
 *
 * Order: c->mu, then the policy queue's lock, then the device's locks;
 * a dirty set's lock innermost.
 * Deadlock freedom: a thread holds at most one pin or ownership while it
 * may wait for a victim (a run of pins on the hit path never waits), and
 * nobody waits for anything while a page it marked busy is in flight,
 * except the device and the backing store.
 */
#ifndef VC_ENGINE_H
#define VC_ENGINE_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backing/backing.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/hash.h"
#include "base/lockcheck.h"
#include "base/mutex.h"
#include "base/pageno.h"
#include "base/gmac.h"
#include "base/secret.h"
#include "device/device.h"
#include "device/fp.h"
#include "device/xts.h"
#include "engine/batcher.h"
#include "engine/dedup_state.h"
#include "engine/gpus.h"
#include "engine/page.h"
#include "index/dirtyset.h"
#include "policy/policy.h"
#include "tier/logstore.h"
#include "tier/tier.h"
#include "vramcache.h"

#define HOST VC_TIER_HOST
#define GPU VC_TIER_GPU

/* Staging pages for write-backs of single GPU pages (evictions, drops).
 * Each holder keeps one for one device move plus one backing write; 16
 * lets 16 threads evict dirty GPU pages at once, for 64 KiB of pinned
 * memory at 4 KiB pages. */
#define WB_STAGING_PAGES 16

/* The host tier must hold more pages than threads pin at once (one each),
 * or evictions could find nothing to evict; 16 keeps small tests honest. */
#define MIN_HOST_PAGES 16

/* Longest sleep on c->cv before re-checking: bounds the cost of a wakeup
 * lost to a lock-free unpin racing with a sleeper's check. */
#define WAIT_GUARD_NS 2000000

/* Buckets of per-page waits: 256 condition variables (12 KiB) make two
 * pages share a bucket rarely while a few dozen threads wait. */
#define PW_BUCKETS 256

/* Handles for threads' policy-update queues; threads past this many take
 * the lock for their hits. */
#define MAX_QUEUE_THREADS 128

struct vc_volume {
	struct vc_cache *c;
	struct vc_backing *bk;
	/* The store's size: set at open and by vc_volume_resize (resize.c),
	 * which runs with no other call on the volume and no page of it
	 * cached at or past the lower of the two sizes. Atomic because other
	 * volumes' evictions read it (page_len) for this volume's cached
	 * pages, whose length the change cannot alter. */
	_Atomic uint64_t size;
	uint64_t base; /* id << VC_PNO_VOL_SHIFT: the volume's first page number */
	uint32_t id;
	bool readonly;
	_Atomic uint64_t ndirty; /* its dirty pages (dirty_mark, dirty_clear) */
	/* The store's last refusal of a write-back (dirty.h, "Store errors"): when
	 * (eng_now_mark: never 0 once set; 0: none since the store last took
	 * a write) and its final error. Without the lock. */
	_Atomic uint64_t refused_ns;
	_Atomic int refused_err;
	uint64_t wb_pos; /* the background write-back's place in the dirty set (under fl.mu) */
	struct vc_dset *dirty; /* their page indexes (pno - base): see the lock rules */
	/* Dedup (dedup.c): whether this volume's pages are deduplicated now
	 * (written under dd.mu; read without it, relaxed, by a load deciding
	 * whether to note the page's fingerprint: eng_dd_note_load, and by
	 * a trip's classes), and the sampled estimate's window. Reads and
	 * writes of sampled pages are counted without a lock (atomics); the
	 * rest under dd.mu (engine's struct eng_dedup). */
	_Atomic bool dd_on;
	_Atomic uint64_t dd_reads, dd_writes;
	uint64_t dd_in;                   /* blocks fed to the estimate since its last decision */
	/* The last decision's estimates (the factor: adaptive mode only). */
	double dd_est_factor, dd_est_upd;
	/* Which trip its blocks take down (dedup.c, trip_rate): direct
	 * into fresh slots while few recent blocks shared, else staged, or
	 * the known trip where their fingerprints were noted at load, which
	 * happens only while it is not direct (read there without the lock,
	 * relaxed: a stale value costs a hash, or a trip of step 7). The
	 * recent blocks looked up and shared (under dd.mu). */
	_Atomic bool dd_direct;
	uint32_t dd_look, dd_match;
};

/* Bounce pages per thread for GPU-tier reads served in place: one 128 KiB
 * read (32 pages of 4 KiB) travels in one device submission. Threads past
 * BOUNCE_TOTAL / 128 KiB (128 at 4 KiB pages; fewer for large pages, at
 * least 16) have none and promote instead. */
#define BOUNCE_BYTES (128u << 10)
#define BOUNCE_TOTAL (16u << 20)

/* A GPU prefetch's workers at most (c->prefetchers; range.c), and the
 * bulk staging's pinned bytes at most unless one batch needs more (api.c). */
#define PREFETCHERS_MAX 4u
#define STAGE_BULK_BYTES (64ull << 20)

/* A thread's state for one cache (the pthread key's value). */
struct tstate {
	_Atomic bool used;
	uint32_t idx;            /* in c->ts[]; its bounce pages if < bounce_threads */
	struct vc_opq_local *l;  /* its policy-update queue, or NULL */
	_Atomic uint64_t hits[VC_TIER_COUNT]; /* lock-free hits (counters only grow) */
	_Atomic uint64_t misses, rd_bytes;    /* lock-free misses, bytes they loaded */
	_Atomic uint64_t wr_bytes;            /* lock-free writes' bytes to the store */
	_Atomic uint64_t d2h;    /* bytes read in place from the GPU tier */
	_Atomic uint64_t gpu_hits[VC_GPUS_MAX]; /* of those, pages by part */
};

struct vc_cache {
	pthread_mutex_t mu;
	uint64_t mu_spin_ns; /* eng_lock's spin before it sleeps (base/mutex.h); set at open */
	pthread_cond_t cv; /* page flags or resources changed */
	_Atomic uint32_t nwaiters;
	/* Waits for free host slots while demotions are in flight: woken
	 * under c->mu only (eng_wake), not by lock-free unpins, so that a
	 * queue of missing threads does not pull every unpin into c->mu. */
	pthread_cond_t slot_cv;
	_Atomic uint32_t slot_waiters;
	/* Waits for room that found no victim (pins or moves in the way):
	 * GPUfs's reaper revokes grants when it grows (eng_gfs_wait_sel); and
	 * the wait buckets (pw_bucket) of pages a sleeper could not claim for
	 * a pin, which that reaper takes and clears. */
	_Atomic uint64_t pin_stalls;
	_Atomic uint32_t pin_want[PW_BUCKETS / 32];
	struct vc_opq *opq;      /* queued policy updates over pol */
	struct vc_opq_local *lk; /* the lock holders' queue handle */
	pthread_key_t tls;       /* each thread's own handle */
	bool tls_ok;
	struct tstate ts[MAX_QUEUE_THREADS];

	uint32_t page_size;
	unsigned pshift;
	int write_mode;
	uint32_t batch_pages;
	uint64_t latency_ns; /* added to every backing call of every volume */

	/* vols[id]: set and cleared under mu. Read without it only for a
	 * page that is cached, whose volume cannot close meanwhile
	 * (vc_volume_close drops its pages first, waiting for busy ones). */
	struct vc_volume *vols[VC_VOLUMES_MAX];
	struct vc_tiermem *host;
	/* The GPU tier: ngpus parts (0 without one), and what they share.
	 * ngpus is set at open. */
	struct vc_gpu gpus[VC_GPUS_MAX];
	uint32_t ngpus;
	struct eng_gtier gt;
	struct eng_dedup dd;
	struct vc_policy *pol;
	struct vc_index ix;

	_Atomic uint64_t ndirty; /* dirty pages, every volume (dirty_mark, dirty_clear) */
	/* The dirty limit (dirty.h, "Store errors"): pages dirty or reserved by a
	 * writer (dirty_charge), at most dirty_max. Without the lock. */
	_Atomic uint64_t dirty_charged;
	uint64_t dirty_max;             /* set at open */
	uint64_t dirty_bg;              /* background write-back above this (flusher.c) */
	struct eng_flusher {
		pthread_t t;
		pthread_mutex_t mu; /* flusher.c's lock rules */
		pthread_cond_t cv;
		_Atomic bool sleeping;
		bool inited, running, stop;
		uint32_t vol; /* the next volume to look at */
	} fl;
	_Atomic uint64_t writes_limited; /* page writes sent through by the limit */
	_Atomic uint64_t refusals;       /* write-backs of evictions the stores refused */
	pthread_cond_t pw_cv[PW_BUCKETS];        /* per-page waits (see pw_bucket) */
	_Atomic uint32_t pw_waiters[PW_BUCKETS];
	uint32_t demoters;     /* demotion batches in flight (moves.c) */
	uint32_t demoters_max; /* ... at most; set at open (VC_DEMOTERS) */
	uint32_t demote_batch; /* host victims per demotion; set at open */
	uint32_t prefetchers;  /* a GPU prefetch's workers, 1..PREFETCHERS_MAX; set at open
				* (VC_PREFETCHERS; range.c) */
	bool miss_fast;        /* lock-free misses and writes (acquire_fast); set at open */
	/* The lock's own record (under mu): when the holder took it, who it
	 * is (VC_DEBUG_LOCKS builds), and how long each hold lasted. */
	uint64_t mu_t0;
	pthread_t mu_owner;
	uint64_t lock_holds, lock_hist[VC_LOCK_HIST], lock_max_ns;
	/* VC_LOCK_PROFILE=US (environment, read at open; fractions too,
	 * 0.001 for every hold): holds of US microseconds or more are
	 * counted by the function that ended them, and vc_close (or
	 * eng_debug_lock_profile, for a phase) prints the table to stderr:
	 * where the lock's time goes. */
	uint64_t lock_prof_ns;
	struct lock_site {
		const char *fn;
		uint64_t n, total_ns, max_ns;
	} lock_sites[16];
	struct {
		uint64_t hits[VC_TIER_COUNT], misses, evictions[VC_TIER_COUNT];
		uint64_t writebacks, h2d, d2h, rd_bytes, wr_bytes;
	} st;
};


enum acq_mode {
	ACQ_READ,       /* shared pin, data loaded */
	ACQ_WRITE,      /* exclusive, data loaded (partial overwrite) */
	ACQ_WRITE_FULL, /* exclusive, old data not needed */
};

/* A round of flush or GPU prefetch: up to batch_pages pages, each with a
 * backing request and, for pages that pass through the GPU tier, a bulk
 * staging page. */
struct bulk {
	struct bulk_job {
		struct vc_page *p;
		uint32_t stage;
		bool staged; /* holds a staging page */
		bool bad;    /* came up failing its integrity check (eng_bulk_move) */
	} *jobs;
	struct vc_bio *bios;
	struct vc_move *moves;
	struct vc_ticket *tickets;
	uint8_t *mpart;           /* each move's part (eng_fan) */
	int perr[VC_GPUS_MAX];    /* the last eng_bulk_move's status by part */
	bool lost;                /* a flush met dirty pages of a failed part */
	unsigned n;
};

static inline uint64_t st_of(const struct vc_page *p)
{
	return vc_page_st(p);
}

/* Pins (READ) or owns (WRITE*) page p if it is settled in a tier of
 * `settled`, not busy or owned, and (for a writer) unpinned; with or
 * without c->mu: false if not (lock-free writers and misses change BUSY
 * and EXCL too). One compare-and-swap. */
static inline bool eng_grab(struct vc_page *p, int mode, uint64_t settled)
{
	const uint64_t no = VC_ST_BUSY | VC_ST_EXCL | (mode == ACQ_READ ? 0 : VC_ST_PINS);
	uint64_t s = st_of(p);
	do {
		if (!(s & settled) || (s & no) || (s & VC_ST_PINS) == VC_ST_PINS)
			return false;
	} while (!atomic_compare_exchange_weak(&p->st, &s,
					       s + (mode == ACQ_READ ? VC_ST_PIN1 : VC_ST_EXCL)));
	return true;
}

/* Per-page waits. A thread waiting for one page to settle (BUSY, EXCL or
 * pins to go) sleeps on the condition variable of the page's bucket, one
 * of PW_BUCKETS hashed by page number, not on c->cv: a page's change then
 * wakes those who wait for pages of its bucket, not every sleeper. The
 * state changes below wake the bucket (under c->mu, so a sleeper that
 * checked under c->mu cannot miss it); lock-free changes (unpins, lock-free
 * misses and writes: eng_wake_nolock) take c->mu to do so only when the
 * bucket has sleepers. c->cv stays for waits on
 * resources (free slots, staging pages, log space, victims). Sleeps are
 * bounded by WAIT_GUARD_NS either way. A sleeper passes the state it saw
 * and re-reads it after counting itself in (eng_wait_page), so a wakeup of
 * a lock-free change is not lost. */
static inline uint32_t pw_bucket(uint64_t pno)
{
	return (uint32_t)(vc_mix64(pno) & (PW_BUCKETS - 1));
}

/* Under c->mu (lock-free changes wake through eng_wake_nolock). */
static inline void eng_wake_page(struct vc_cache *c, uint64_t pno)
{
	uint32_t b = pw_bucket(pno);
	if (atomic_load_explicit(&c->pw_waiters[b], memory_order_relaxed))
		pthread_cond_broadcast(&c->pw_cv[b]);
}

/* Under c->mu: clears state bits and wakes the page's waiters. */
static inline void st_clear(struct vc_cache *c, struct vc_page *p, uint64_t bits)
{
	atomic_fetch_and_explicit(&p->st, ~bits, memory_order_acq_rel);
	eng_wake_page(c, p->pno);
}

/* Under c->mu: the page settles in state st (ours till now: no pins), and
 * its waiters wake. Release: what the settler wrote comes first. */
static inline void st_settle(struct vc_cache *c, struct vc_page *p, uint64_t st)
{
	atomic_store_explicit(&p->st, st, memory_order_release);
	eng_wake_page(c, p->pno);
}

static inline struct vc_volume *vol_of(const struct vc_cache *c, uint64_t pno)
{
	return c->vols[pno >> VC_PNO_VOL_SHIFT];
}

/* Byte offset of page pno in its volume's backing store. */
static inline uint64_t page_off(const struct vc_cache *c, uint64_t pno)
{
	return (pno & VC_PNO_INDEX_MASK) << c->pshift;
}

/* Bytes of page pno that lie inside its backing store. */
static inline uint32_t page_len(const struct vc_cache *c, uint64_t pno)
{
	uint64_t left = vol_of(c, pno)->size - page_off(c, pno);
	return left < c->page_size ? (uint32_t)left : c->page_size;
}

#include "engine/dirty.h" /* write-back's dirty pages and store errors */

/* A page's id: its entry's place in the pool, stable while it is cached.
 * The GPU log names slot owners by it. */
static inline uint32_t page_id(const struct vc_cache *c, const struct vc_page *p)
{
	return (uint32_t)(p - c->ix.pool);
}

/* The part that holds GPU page p (in the GPU tier, or going down with its
 * slot appended: eng_gpu_append set p->gpu). */
static inline struct vc_gpu *gpu_of(struct vc_cache *c, const struct vc_page *p)
{
	return &c->gpus[p->gpu];
}

static inline const struct vc_gpu *gpu_ofc(const struct vc_cache *c, const struct vc_page *p)
{
	return &c->gpus[p->gpu];
}

/* A GPU-tier page's slot in its part's log: kept by the log store
 * (where[]), which the device cleaner updates in place, so cleaning costs
 * the engine no work per moved page. */
static inline uint32_t gpu_slot(const struct vc_cache *c, const struct vc_page *p)
{
	return vc_ls_where(gpu_ofc(c, p)->ls, page_id(c, p));
}

static inline uint64_t slot_addr(const struct vc_cache *c, const struct vc_page *p)
{
	return p->tier == GPU ? vc_ls_addr(gpu_ofc(c, p)->ls, gpu_slot(c, p))
			      : vc_tier_addr(c->host, p->slot);
}

/* A GPU-tier page's device address; for a pinned page without the lock
 * (cleaning and eviction claim the pages whose slots they change). */
static inline uint64_t slot_addr_gpu(const struct vc_cache *c, const struct vc_page *p)
{
	return vc_ls_addr(gpu_ofc(c, p)->ls, gpu_slot(c, p));
}

/* Dedup on (the GPU tier stores blocks; dedup.c). Only with one part,
 * c->gpus[0] (vc_open refuses more). */
static inline bool eng_dd(const struct vc_cache *c)
{
	return c->dd.mode != 0;
}

/* Device moves per page between a host buffer and the GPU tier: D with
 * dedup (a block each), else 1. */
static inline uint32_t eng_mpp(const struct vc_cache *c)
{
	return eng_dd(c) ? c->dd.D : 1;
}

/* Free slots at part g's log head that nobody has promised: with dedup,
 * the pages on their way down hold dd.resv of them (eng_gpu_append)
 * until their blocks are placed, and a shrink about to drain chunks holds
 * their room (dd.hold). Under c->mu. */
static inline uint64_t eng_gpu_free(const struct vc_cache *c, const struct vc_gpu *g)
{
	uint64_t r = vc_ls_room(g->ls), p = c->dd.resv + c->dd.hold;
	return r > p ? r - p : 0;
}

/* The slot of a GPU page's first block (its page's own slot without
 * dedup): where the tail eviction looks for its segment. */
static inline uint32_t gpu_slot0(const struct vc_cache *c, const struct vc_page *p)
{
	return eng_dd(c) ? vc_ls_where(c->gpus[0].ls, c->dd.res[(uint64_t)page_id(c, p) * c->dd.D])
			 : gpu_slot(c, p);
}

/* Moves between the tiers (device.h). With encryption on (c->gt.cipher)
 * the GPU tier holds ciphertext only: a move down (host memory to a GPU
 * slot) encrypts, a move up (a GPU slot to host memory: a host slot, a
 * bounce or a staging page) decrypts, under the cache's key, with the
 * page's tweak. The tweak names the page, never its slot, so the cleaner
 * moves ciphertext as it is: unit k of page pno (units of min(page, 4
 * KiB), device.h) is unit number
 *     vol << 48 | (index * units_per_page + k)
 * of its volume, as dm-crypt's plain64 numbers 4 KiB sectors (vol_open
 * refuses a volume whose unit numbers would not fit 48 bits). */
static inline uint64_t page_tweak(const struct vc_cache *c, uint64_t pno)
{
	return (pno & ~VC_PNO_INDEX_MASK) |
	       ((vc_pno_index(pno) * c->gt.units_per_page) & VC_PNO_INDEX_MASK);
}

static inline struct vc_move eng_mv_down(const struct vc_cache *c, uint64_t host, uint64_t gpu,
					 uint64_t pno)
{
	return (struct vc_move){ .src = host, .dst = gpu,
				 .op = VC_MOVE_COPY | (c->gt.cipher ? VC_MOVE_ENCRYPT : 0),
				 .tweak = page_tweak(c, pno) };
}

static inline struct vc_move eng_mv_up(const struct vc_cache *c, uint64_t gpu, uint64_t host,
				       uint64_t pno)
{
	return (struct vc_move){ .src = gpu, .dst = host,
				 .op = VC_MOVE_COPY | (c->gt.cipher ? VC_MOVE_DECRYPT : 0),
				 .tweak = page_tweak(c, pno) };
}

/* Fills mv[0 .. eng_mpp(c)) with the moves of GPU page p (pinned, BUSY,
 * or under c->mu) between its GPU residence and the host buffer at `host`
 * (up: to the host, decrypting; else down, encrypting): one move, or with
 * dedup one per block, at host + j x block size, with the block's tweak.
 * Returns how many. */
uint32_t eng_mv_page(const struct vc_cache *c, const struct vc_page *p, uint64_t host, bool up,
		     struct vc_move *mv);

static inline unsigned char *host_data(const struct vc_cache *c, const struct vc_page *p)
{
	return vc_tier_host(c->host, p->slot);
}

/* Policy calls of lock holders, queued through c->lk. */
static inline void pol_insert(struct vc_cache *c, struct vc_page *p, int tier)
{
	vc_opq_insert(c->lk, &p->qn, tier);
}

static inline void pol_remove(struct vc_cache *c, struct vc_page *p)
{
	uint32_t g = vc_opq_gen(&p->qn);
	if (vc_opq_gen_live(g))
		vc_opq_remove(c->lk, &p->qn, g);
}

/* Before the host victims that make room for page pno are chosen: the
 * policy learns the incoming page (vc_opq_miss; ARC adapts p then, as its
 * paper orders it). Costs a drain and the queue lock only for a policy
 * with a miss() hook. */
static inline void pol_miss(struct vc_cache *c, uint64_t pno)
{
	vc_opq_miss(c->opq, pno, HOST);
}

static inline void pol_hit(struct vc_cache *c, struct vc_page *p)
{
	vc_opq_hit(c->lk, &p->qn, vc_opq_gen(&p->qn));
}

/* Bounce page i of thread state t: where GPU-tier pages it reads in place
 * land. Only threads with idx < c->gt.bounce_threads have them. */
static inline uint32_t bounce_slot(const struct vc_cache *c, const struct tstate *t, uint32_t i)
{
	return t->idx * c->gt.bounce_per + i;
}

/* ---- the engine lock ------------------------------------------------------
 * eng_lock/eng_unlock around every hold of c->mu: they time each hold (two
 * clock reads, ~40 ns) into c->lock_hist, which vc_get_stats reports, and in
 * VC_DEBUG_LOCKS builds record the owner, so that functions whose rule is
 * "under c->mu" can check it (eng_assert_locked), as LMDB's context
 * asserts do. eng_wait_cv ends a hold while it sleeps. */
void eng_lock_profile(struct vc_cache *c, const char *fn, uint64_t ns);
/* Under c->mu or idle (VC_LOCK_PROFILE): prints the holds counted since
 * the last print, labelled `what` (may be NULL), and starts again. */
void eng_lock_profile_print(struct vc_cache *c, const char *what);

/* `fn`: the function that ends the hold (for VC_LOCK_PROFILE). */
static inline void eng_lock_note(struct vc_cache *c, const char *fn)
{
	uint64_t ns = vc_now_ns() - c->mu_t0, us = ns / 1000;
	if (c->lock_prof_ns && ns >= c->lock_prof_ns)
		eng_lock_profile(c, fn, ns);
	int b = 0;
	while (us && b < VC_LOCK_HIST - 1) {
		us >>= 1;
		b++;
	}
	c->lock_hist[b]++;
	c->lock_holds++;
	if (ns > c->lock_max_ns)
		c->lock_max_ns = ns;
}

static inline void eng_lock(struct vc_cache *c)
{
	vc_mutex_lock_spin(&c->mu, c->mu_spin_ns);
	c->mu_t0 = vc_now_ns();
	VC_LOCK_TAKEN(c->mu_owner);
}

/* VC_DEBUG_LOCKS builds, at every end of a hold of c->mu: the slots
 * promised to the trips down in flight (dd.resv) lie in the tier's room
 * (dedup.c's invariant), so no trip's append can find none. Nothing in
 * other builds. */
static inline void eng_check_promises(const struct vc_cache *c)
{
#ifdef VC_DEBUG_LOCKS
	const struct vc_gpu *g = &c->gpus[0];
	if (eng_dd(c) && g->ls && !atomic_load(&g->off) && vc_ls_room(g->ls) < c->dd.resv) {
		fprintf(stderr, "dedup: rule broken: %llu slots of room, %llu promised\n",
			(unsigned long long)vc_ls_room(g->ls), (unsigned long long)c->dd.resv);
		abort();
	}
#else
	(void)c;
#endif
}

#define eng_unlock(c) eng_unlock_at((c), __func__)
static inline void eng_unlock_at(struct vc_cache *c, const char *fn)
{
	eng_check_promises(c);
	eng_lock_note(c, fn);
	VC_LOCK_LEFT(c->mu_owner);
	pthread_mutex_unlock(&c->mu);
}

/* Ends a hold and starts another, letting waiting threads in between (a
 * bare unlock and lock would mostly hand the lock back to its holder).
 * For long jobs whose state stays valid without the lock: they say why. */
static inline void eng_lock_pause(struct vc_cache *c)
{
	eng_unlock(c);
	sched_yield();
	eng_lock(c);
}

#define eng_assert_locked(c) VC_LOCK_HELD((c)->mu_owner, "c->mu")

/* --- access.c: page access --- */
void eng_wait_cv(struct vc_cache *c);
void eng_wait_slot(struct vc_cache *c);
void eng_wait_page(struct vc_cache *c, struct vc_page *p, uint64_t seen);
void eng_wake(struct vc_cache *c);
void eng_wake_nolock(struct vc_cache *c, uint64_t pno);
void eng_unpin(struct vc_cache *c, struct vc_page *p);
void eng_tstate_release(void *arg);
struct tstate *eng_tstate(struct vc_cache *c);
struct vc_page *eng_pin_fast(struct vc_cache *c, uint64_t pno, bool gpu, int *tier);
void eng_note_hit_fast(struct vc_cache *c, struct tstate *t, struct vc_page *p, int tier);
size_t eng_piece(const struct vc_volume *v, uint64_t pos, size_t left, uint64_t *pno,
		 uint32_t *in);
int eng_acquire(struct vc_cache *c, uint64_t pno, int mode, bool count, bool serve,
		   struct vc_page **out);

/* --- moves.c: tier moves --- */
bool eng_unevictable(const struct vc_pnode *n, void *arg);
void eng_page_forget(struct vc_cache *c, struct vc_page *p, bool drained);
void eng_page_drop_drained(struct vc_cache *c, struct vc_page *p, bool drained);
void eng_page_drop(struct vc_cache *c, struct vc_page *p);
/* Unlocked: one move on part g's queue, waited for. */
int eng_move1(struct vc_cache *c, struct vc_gpu *g, struct vc_move m);
/* Unlocked: n moves, move i on part part[i]'s queue (tk: n tickets of
 * room), fanned out: each part's moves in one add, every add before the
 * first wait, so the parts' links work at once. perr[k] gets part k's
 * status (0 for parts without moves); returns the first error. */
int eng_fan(struct vc_cache *c, const struct vc_move *mv, const uint8_t *part, uint32_t n,
	    struct vc_ticket *tk, int *perr);
/* eng_fan's work with the caller's scratch (sm: n moves, regrouped by
 * part; st: n tickets), for callers on a hot path that allocate nothing
 * (a read's run). */
int eng_fan_via(struct vc_cache *c, const struct vc_move *mv, const uint8_t *part, uint32_t n,
		struct vc_move *sm, struct vc_ticket *st, int *perr);
/* Under c->mu: fails the parts whose status in perr is a device error. */
void eng_fail_parts(struct vc_cache *c, const int *perr);
/* Unlocked: GPU page p (pinned or BUSY) up to host address `host`, as one
 * or D moves (eng_mv_page), waited for. */
int eng_move_up(struct vc_cache *c, const struct vc_page *p, uint64_t host);
int eng_load_page(struct vc_cache *c, uint64_t pno, unsigned char *buf);
int eng_host_slot_get(struct vc_cache *c, uint32_t *s);
int eng_promote(struct vc_cache *c, struct vc_page *p);

/* --- seal.c: the integrity mode (VC_ENCRYPT_XTS_GMAC) ---
 * Every move down (host memory to a GPU slot) seals the page: a fresh
 * nonce and the GMAC tag of its plaintext, kept in host memory under its
 * id (c->gt.seals); every move up (to a host slot, a bounce or a staging
 * page) checks the plaintext it brought against the seal before anything
 * uses it. A seal is written only by the holder of the page's BUSY claim
 * before the page settles in the GPU tier (release), and read by holders
 * of a pin or of BUSY (acquire): never torn. The tag covers the content;
 * the nonce (a 64-bit count, never reused under one key) makes every tag
 * a fresh GMAC, and the tweak already binds ciphertext to its page, so a
 * page's ciphertext moved into another's slot fails too. On a failed check
 * the caller fails its request with -EIO and, holding nothing of the page
 * any more, drops it (eng_integ_drop), unless the page changed since. */
struct eng_seal {
	uint64_t nonce;
	unsigned char tag[16];
};

static inline bool eng_integ(const struct vc_cache *c)
{
	return c->gt.mac != NULL;
}

int eng_integ_open(struct vc_cache *c, uint64_t npool);
void eng_integ_close(struct vc_cache *c);
/* Seals page p (its BUSY claim held) over its plaintext at `plain`. */
int eng_seal(struct vc_cache *c, const struct vc_page *p, const void *plain);
/* Checks the plaintext a move up brought for p (pinned or BUSY): 0, or
 * -EIO with a message naming the page; *nonce gets the seal it checked
 * against (for eng_integ_drop). Counts failures. */
int eng_check(struct vc_cache *c, const struct vc_page *p, const void *plain, uint64_t *nonce);
/* Under c->mu: drops page p, which failed eng_check as page pno sealed
 * with `nonce`, if it still is that (a GPU page of that seal) and nobody
 * holds it (owned: the caller holds its BUSY claim, and p is that page);
 * else leaves it to whoever holds it, who checks it too. */
void eng_integ_drop(struct vc_cache *c, struct vc_page *p, uint64_t pno, uint64_t nonce,
		    bool owned);
/* Integrity mode, after a move up into a staging page for write-back
 * (p BUSY, its plaintext at bio->buf): true if it fails its check, with
 * bio->result = -EIO so that the write-back leaves it out (writeback.c). */
bool eng_stage_bad(struct vc_cache *c, const struct vc_page *p, struct vc_bio *bio);
/* Counts a page dropped for its check (under c->mu, before the drop). */
void eng_integ_count_drop(struct vc_cache *c, const struct vc_page *p);
/* Unlocked: takes c->mu for eng_integ_drop. */
void eng_integ_drop_unlocked(struct vc_cache *c, struct vc_page *p, uint64_t pno,
			     uint64_t nonce);

/* --- dedup.c: block deduplication --- */
int eng_dd_open(struct vc_cache *c, const struct vc_config *cfg, uint64_t host_pages);
void eng_dd_close(struct vc_cache *c);
/* Under c->mu: reserves GPU residence at the log's head for n pages (BUSY,
 * not yet GPU): their slots appended; with dedup, n logical pages and
 * n x D slots promised (dd.resv), which eng_dd_down turns into blocks.
 * The caller made the room under this hold. 0, or -VC_EI_NOROOM with
 * nothing reserved. */
int eng_gpu_append(struct vc_cache *c, struct vc_gpu *g, uint32_t n,
		   struct vc_page *const *pages);
/* Under c->mu: page p leaves the GPU tier (or never reached it): its
 * slot is orphaned, or with dedup its uses released (a block left with
 * none is freed and its slot orphaned) and its unplaced uses' reserved
 * slots given back. */
void eng_gpu_release(struct vc_cache *c, struct vc_page *p);
/* Under c->mu, which it drops for the device work (and on the known
 * trip for its settle, under dd.mu alone) and holds again at
 * its return (two to four holds a trip, the first and last the caller's,
 * briefly; dedup_down.c's trip()): pages[0..n) (BUSY,
 * reserved by eng_gpu_append, sealed if integrity is on) go down with
 * dedup from their plaintext: plain[i] in host memory, at device-visible
 * address src[i], unchanged meanwhile. A block equal to a stored one
 * (fingerprint match, then bytes compared) or to an earlier one of the
 * trip shares it: on the staged trip it takes no slot, on the direct trip
 * (volumes whose recent blocks rarely shared) its slot dies after the
 * compare; the others get fresh blocks and slots. 0, or -errno
 * (the device's, -ENOMEM): then the caller releases every page
 * (eng_gpu_release), whatever part of it was placed. */
int eng_dd_down(struct vc_cache *c, uint32_t n, struct vc_page *const *pages,
		const unsigned char *const *plain, const uint64_t *src);
/* Under c->mu, dedup on: page p (BUSY, its uses linked, its plaintext
 * just copied into host slot s) came up (eng_promote): noted for its way
 * back (eng_dd_down), then released from the GPU tier as
 * eng_gpu_release does, in one hold of dd.mu. */
void eng_dd_up(struct vc_cache *c, const struct vc_page *p, uint32_t s);
/* Unlocked, dedup on: the lines eng_dd_up
 * will touch for page p (BUSY, the caller's: its uses hold still) and
 * host slot s, asked for before the caller takes c->mu, so that their
 * cache misses overlap the lock's wait rather than lengthen its hold. */
void eng_dd_up_prefetch(const struct vc_cache *c, const struct vc_page *p, uint32_t s);
/* Unlocked, dedup on: page p (BUSY, the caller's) was just loaded into
 * its host slot; its fingerprint noted (hostfp). O(page) on the host. */
void eng_dd_note_load(struct vc_cache *c, const struct vc_page *p);
/* Under c->mu, dedup on: host slot s is freed; its note goes. */
void eng_dd_back_clear(struct vc_cache *c, uint32_t s);
/* --- dedup_est.c: the data's dedup factor, sampled by content --- */
int eng_est_open(struct vc_cache *c);
void eng_est_close(struct vc_cache *c);
/* Under dd.mu: block j of page pno holds content fp now (a block going
 * down); counts towards the volume's next decision (dd_in). */
void eng_est_feed(struct vc_cache *c, uint64_t pno, uint32_t j, const struct vc_fp_digest *fp);
/* Under dd.mu: sampled locations / distinct contents, all volumes (1:
 * nothing sampled yet); and the same with volume v's locations, each
 * counting 1 / (locations of its content) physical. */
double eng_est_factor(const struct vc_cache *c);
double eng_est_factor_vol(const struct vc_cache *c, const struct vc_volume *v);
/* Unlocked: counts an access to page pno of v for the sampled update
 * ratio (a hash test, one atomic add for sampled pages). */
void eng_dd_note(struct vc_volume *v, uint64_t pno, uint64_t pages, bool write);
/* Under c->mu: claims (BUSY) every page that uses a block of the
 * segments, each once: *held (malloc'ed, the caller frees) and *nheld.
 * false (nothing claimed, *held NULL) when one cannot be claimed or on
 * memory failure. */
bool eng_dd_claim(struct vc_cache *c, uint32_t n, const uint32_t *segs, struct vc_page ***held,
		  uint32_t *nheld);
/* Under c->mu: the blocks stored in segment seg (sealed or taken) leave
 * the fingerprint table (they stay live for the pages using them), so no
 * trip down shares them from now on: a shrink's segment, about to be
 * emptied. O(segment). */
void eng_dd_unindex_seg(struct vc_cache *c, uint32_t seg);
/* Under c->mu, no trip in flight: eng_debug_dedup_check. */
int eng_dd_check(struct vc_cache *c);
/* Holding neither c->mu nor dd.mu: returns once the indexer's queue is
 * empty and its pass done (dedup_later.c), so that what the blocks
 * queued so far do (indexed, merged, counted) is done; at once without
 * an indexer. For the statistics, checks and close. */
void eng_dd_later_drain(struct vc_cache *c);
/* Holding neither lock, first at close: the indexer drains its queue and
 * stops (its merges need the engine lock and the device). */
void eng_dd_later_close(struct vc_cache *c);

/* --- gpuspace.c: GPU space and cleaning --- */
int eng_gpu_room(struct vc_cache *c, struct vc_gpu *g, uint32_t need, bool holding);
int eng_evict_seg(struct vc_cache *c, struct vc_gpu *g, uint32_t seg, uint64_t *evicted,
		  int *err);
bool eng_segs_claim(struct vc_cache *c, struct vc_gpu *g, uint32_t n, const uint32_t *segs,
		    struct vc_page **held, uint32_t *nheld);
/* Under c->mu: a cleaning job over the segments whose live pages are
 * held[0..n) (all of them, claimed) failed on the device: which copy is
 * current is unknown, so the pages are forgotten (dirty data in them is
 * lost, as in promote; with dedup their blocks die with them) and the GPU
 * tier takes no more demotions. */
void eng_clean_failed(struct vc_cache *c, struct vc_gpu *g, struct vc_page *const *held,
		      uint32_t n, int err);

/* --- gpusize.c: the GPU tier's size --- */
/* Waits for part g's shrink's page drops still running (close). */
void eng_gpu_resize_fini(struct vc_cache *c, struct vc_gpu *g);

/* The GPU tier takes demotions: some part does. Under c->mu. */
static inline bool eng_gpu_usable(const struct vc_cache *c)
{
	for (uint32_t i = 0; i < c->ngpus; i++)
		if (eng_part_usable(&c->gpus[i]))
			return true;
	return false;
}

/* place.c and multigpu.c: engine/gpus.h. */

/* --- writeback.c: write-back --- */
/* Under c->mu: a write-back of p (len bytes) completed: p is clean. */
void eng_note_written(struct vc_cache *c, struct vc_page *p, uint32_t len);
int eng_writeback_page(struct vc_cache *c, struct vc_page *p);
int eng_writeback_range(struct vc_volume *v, uint64_t first, uint64_t last);
/* One round of a walk over v's dirty set in [*pos, last] (page indexes):
 * up to batch_pages of its members written back (b: eng_bulk_init's, ids:
 * batch_pages entries), *pos past them. 1: a round ran, 0: no member left
 * in the range, or -errno (the store's: those pages stay dirty). Holds
 * nothing on entry or return. */
int eng_writeback_round(struct vc_volume *v, struct bulk *b, uint64_t *ids, uint64_t *pos,
			uint64_t last);
int eng_writeback_gpu(struct vc_cache *c, struct vc_page **pages, uint32_t n, bool *done);
int eng_writeback_gpu_via(struct vc_cache *c, struct vc_page **pages, uint32_t n, bool *done,
			  struct vc_tiermem *stage, uint32_t cap);
void eng_bulk_fini(struct bulk *b);
int eng_bulk_init(struct vc_cache *c, struct bulk *b);
int eng_bulk_move(struct vc_cache *c, struct bulk *b, bool to_stage);
/* range.c: loads the uncached pages among pno[0..n) (ascending, pages of
 * open volumes, inside them) into the GPU tier, batch_pages a round: one
 * backing submission per volume and one batched move each round. */
int eng_prefetch_gpu_list(struct vc_cache *c, const uint64_t *pno, uint32_t n, uint32_t *rounds,
			  uint32_t *loaded);

#endif
