/* Block deduplication's state in the cache (vc_config.dedup;
 * docs/DEDUP.md): the block store, the notes by host slot, and the lock
 * rules between it and the engine lock. struct vc_cache embeds struct
 * eng_dedup (engine.h, which includes this); the code is dedup.c (the
 * block store), dedup_down.c and dedup_pair.c (the trip down),
 * dedup_scratch.c,
 * dedup_est.c and dedup_prof.c, which share engine/dedup.h. */
#ifndef VC_ENGINE_DEDUP_STATE_H
#define VC_ENGINE_DEDUP_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/lockcheck.h"
#include "base/mutex.h"
#include "device/fp.h"

/* Block deduplication of the GPU tier (vc_config.dedup; dedup.c, which
 * says more). With it on the log store's slots are blocks of page / D
 * bytes and its owners block ids; a GPU page is D uses, use u = page id *
 * D + j naming block res[u]. Two locks (dedup.c's head comment):
 *   c->mu  the page counts and promises (pages, page_cap, resv, hold),
 *          the claim marks and the scratch list, with the log store
 *   mu     the block store: blocks, uses and their lists, the
 *          fingerprint table, free ids, serials, the estimate, the
 *          counters, and each volume's dd_in, dd_est_*, dd_look and
 *          dd_match
 * Order: c->mu, then mu. c->mu's holders take mu for block store work;
 * the known trip's settle (dedup_down.c) and the indexer
 * (dedup_later.c) take mu alone, so that their links, lookups, the
 * estimate's feed and the counts leave c->mu. Set at open: the rest. A
 * page's own uses (res[u]) and its host slot's note change only while
 * the page is BUSY, by its owner. */
#define DD_NIL UINT32_MAX
#define DD_DEGREE_MAX 8
/* vc_config.dedup_degree 0: blocks of 4 KiB (whole pages of 4 KiB and
 * less; 2 a page of 8 KiB, and so on). On the H100 (docs/DEDUP.md,
 * "The default degree") every path's move rate falls with the degree
 * (D moves, queue pieces and block uses a page), degree 4 keeping 0.52 to
 * 0.62 of the rate without dedup where degree 1 keeps 0.75 to 0.91, while
 * the factor finer blocks add is the data's: 1.34x more on the emulated
 * ext4 images at 1 KiB, nothing on whole-page repetition (Fig. 5, VM
 * images' file data). Finer degrees stay a choice for data known to
 * repeat within pages (bench/dedup_truth measures it). */
#define DD_DEGREE_BLOCK 4096u
static inline uint32_t eng_dd_degree(uint32_t page_size, uint32_t degree)
{
	return degree ? degree : page_size > DD_DEGREE_BLOCK ? page_size / DD_DEGREE_BLOCK : 1;
}

struct eng_blk {
	struct vc_fp_digest fp; /* of its plaintext (indexed or not) */
	uint64_t tweak;         /* cipher: its unit number, a serial never reused */
	uint32_t refs;          /* its uses (on its list) */
	uint32_t head;          /* its first use, DD_NIL: none */
	/* Trips comparing against it unlocked: while > 0 it is neither
	 * moved nor evicted (eng_dd_claim refuses its segments) nor freed
	 * (a block that loses its last use meanwhile dies at the last unpin). */
	uint32_t pins;
	/* Back notes holding it (GRAM swap: the page it came up with is in
	 * the host tier, unwritten so far, and may go back by reference):
	 * while > 0 it stays stored and indexed with no use (a kept block),
	 * unless a claim for cleaning, eviction or a shrink frees it first
	 * (eng_dd_claim). */
	uint32_t keeps;
	bool indexed;           /* the fingerprint table names it */
	bool later;             /* queued for the indexer (dedup_later.c), not yet looked up */
};

/* Whether block k is stored: it has a use or a note keeps it (a block
 * pinned after losing both is on its way out, its serial still set). */
static inline bool dd_blk_live(const struct eng_blk *k)
{
	return k->refs > 0 || k->keeps > 0;
}

struct dd_scratch;
struct dd_est;
struct dd_later;

struct eng_dedup {
	int mode;          /* enum vc_dedup; VC_DEDUP_OFF: nothing below exists */
	pthread_mutex_t mu; /* the block store (above); mu_ok: initialized */
	pthread_t mu_owner; /* its holder (VC_DEBUG_LOCKS builds) */
	uint64_t mu_spin_ns; /* dd_lock's spin before it sleeps (c->mu's) */
	bool mu_ok;
	uint32_t D, bsize; /* blocks per page, bytes per block */
	uint32_t algo;     /* enum vc_fp_algo */
	bool fp_move;      /* fingerprints come with the moves down (VC_MOVE_FP; encrypted too) */
	/* Encrypted pairs compared on the device against the stored
	 * ciphertext (vc_cmp_job with the key); false: the stored blocks
	 * decrypted into the host bounce and memcmp'd (VC_DD_DEV_CMP=0). */
	bool dev_cmp;
	uint32_t max_sms;  /* the fingerprint job's SM cap */
	uint32_t nblocks;  /* block ids < nblocks: the log store's owners */
	struct eng_blk *blk;
	uint32_t *free_ids, nfree; /* stack of free block ids */
	uint32_t *res, *next, *prev; /* [pool x D]: a use's block and its list links */
	uint32_t *tab;     /* fingerprint -> block id (open addressing, DD_NIL: empty) */
	uint32_t tab_mask;
	uint32_t *mark, mark_gen; /* per page id: claimed by the current walk (eng_dd_claim) */
	uint64_t pages, page_cap; /* logical GPU pages (resident or going down), their bound */
	/* Log slots promised to pages on their way down: one per use not yet
	 * placed (res[u] == DD_NIL) of a page counted in `pages`. */
	uint64_t resv;
	/* Slots of chunks a shrink is about to drain, kept from new promises
	 * while the trips in flight settle (gpusize.c: dd_hold_drain); 0
	 * otherwise. */
	uint64_t hold;
	uint64_t tweak_next;
	/* The trips' scratches, device-visible (host_alloc): block
	 * addresses, digests, pairs, results, and with encryption a plaintext
	 * bounce, without it staging blocks in device memory; one per trip
	 * running, kept on a free list for the next. */
	struct dd_scratch *scr_free;
	uint32_t scr_blocks;
	struct dd_est *est; /* the data's factor, sampled (dedup_est.c) */
	uint64_t blocks_in, hits, collisions, switches;
	uint64_t direct_in, merged_late; /* blocks down the direct trip; of those, shared after */
	/* The indexer (dedup_later.c): the direct trip's blocks looked up
	 * and indexed after the trip, under dd.mu alone; NULL: in the trip's
	 * own lookup hold (VC_DD_LATER=0). */
	struct dd_later *later;
	uint64_t later_in; /* blocks the indexer took off its queue, dead or not (dd.mu's) */
	/* Per block id, its deaths (dd_blk_free, under both locks): the
	 * indexer's entries name a block by id and generation, so that it
	 * reads nothing of an id that died (or was reborn) since. */
	uint32_t *gen;
	/* Notes by host slot on the page in it, for its trip down (valid
	 * while it is the same page, entry and number, unwritten since:
	 * version): `back`, it came up from the GPU tier (eng_promote, GRAM
	 * swap) and names the blocks it came from (back_blk, back_tw), so it
	 * can go back by reference (no move, no hash, no compare: begin());
	 * `hfp`, its fingerprint, taken on the host when it was loaded
	 * (eng_dd_note_load) or from the block it came up from, so its
	 * lookup needs no device round trip (the known trip). note[s].pno
	 * == UINT64_MAX: none. NULL when neither is on (back: gpu_hits SWAP,
	 * where reads promote; hostfp: D = 1, the lanes hash, and plain or
	 * the device compare). */
	struct dd_note {
		uint64_t pno;
		uint32_t id, ver;
		bool back, hfp;
		bool keep; /* holds a keep on each of its back blocks (eng_blk.keeps) */
		struct vc_fp_digest fp;
	} *note;
	bool hostfp;
	uint32_t *back_blk; /* [host slots x D] (NULL: no back notes) */
	uint64_t *back_tw;  /* [host slots x D]: the block's serial (eng_blk.tweak) then */
	uint64_t known_in;  /* blocks down the known trip (their fingerprints noted) */
	uint64_t back_in;   /* blocks that went down by reference */
	uint64_t kept;      /* blocks stored with no use, kept by notes (keeps > 0, refs 0) */
	uint64_t kept_back; /* of back_in, to blocks that were kept (no use left) */
	uint64_t kept_freed; /* kept blocks freed by claims (cleaning, eviction, a shrink) */
	/* Back notes keep their blocks (VC_DD_KEEP=0: never, for
	 * measuring), while the tier has more than a quarter of its slots
	 * free and unpromised (eng_dd_up). */
	bool keep;
	bool fp_same; /* test hook: every fingerprint equal (eng_debug_dedup_collide) */
	/* VC_DD_PROF=1 (for measuring): each trip phase's wall time, summed
	 * over trips (dedup.h's DDP_*), printed at close. */
	bool prof;
	_Atomic uint64_t prof_ns[8], prof_n[8], prof_blocks;
};

/* The block store's lock (above: inside c->mu where both are held).
 * Sanitizer builds (VC_DEBUG_LOCKS) record its holder, so that what needs
 * it can check (dd_assert_locked), as eng_assert_locked does c->mu. */
static inline void dd_lock(struct eng_dedup *d)
{
	vc_mutex_lock_spin(&d->mu, d->mu_spin_ns);
	VC_LOCK_TAKEN(d->mu_owner);
}

static inline void dd_unlock(struct eng_dedup *d)
{
	VC_LOCK_LEFT(d->mu_owner);
	pthread_mutex_unlock(&d->mu);
}

#define dd_assert_locked(d) VC_LOCK_HELD((d)->mu_owner, "dd.mu")

#endif
