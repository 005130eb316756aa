/* The trip down's state (dedup_down.c, dedup_pair.c) and its scratch
 * (dedup_scratch.c): what the three share; private to them. */
#ifndef VC_ENGINE_DEDUP_TRIP_H
#define VC_ENGINE_DEDUP_TRIP_H

#include <stdbool.h>
#include <stdint.h>

#include "device/device.h"
#include "engine/engine.h"

/* A trip's scratch for up to scr_blocks blocks (a demotion batch or a
 * prefetch round): device-visible host memory (one host_alloc) for
 * addresses (8 B a block), digests (16), pairs (16), results (1), and with
 * encryption either the device compare's job (its pairs, tweaks and
 * results, compacted: 25 B a block; dev_cmp) or a bounce for the stored
 * blocks' plaintext (a block each; VC_DD_DEV_CMP=0);
 * where staged blocks move before their lookup (dd_stage_moves()), staging
 * blocks in device memory (mem_alloc, a block each; encrypted, they hold
 * ciphertext); and the trip's host-side arrays (struct down), so that a
 * trip allocates nothing. */
struct dd_scratch {
	struct dd_scratch *next; /* on d->scr_free */
	void *mem;
	uint64_t dev;
	uint64_t stage; /* device memory (plain only), else 0 */
	struct down *g;
};

struct scratch {
	uint64_t *addr, addr_dev;
	struct vc_fp_digest *fp;
	uint64_t fp_dev;
	uint64_t *pair, pair_dev;
	uint8_t *eq;
	uint64_t eq_dev;
	unsigned char *buf; /* the bounce (!dev_cmp) */
	uint64_t buf_dev;
	/* The device compare's job (dev_cmp): pair t is the plaintext of
	 * block pk[xq[t]] against its stored block's slot, with that block's
	 * tweak, result in xeq[t]. In the bounce's place. */
	uint64_t *xpair, xpair_dev;
	uint64_t *xtw, xtw_dev;
	uint8_t *xeq;
	uint64_t xeq_dev;
	uint64_t stage;
};

/* One trip down (eng_dd_down) of n pages, at most scr_blocks / D. Of
 * its n x D blocks, the m selected for dedup are block k = 0..m-1, block
 * sel[k] % D of page sel[k] / D, in page order; dir[k]: on the direct trip
 * (its page's class PG_DIRECT), else staged. */
struct down {
	uint32_t n, m, np, nu, nstage, nknown;
	uint32_t nkey; /* the known trip's fresh blocks, key[0..nkey), to append */
	bool later;    /* every page direct: its blocks for the indexer (staged_begin) */
	/* Uses linked under dd.mu alone whose reserved slots c->mu gives
	 * back (dd_give_back()); stored blocks whose last unpin waits for c->mu
	 * (late[0..nlate): they lost their last use while compared). */
	uint32_t placed, nlate;
	uint32_t *late;
	uint32_t *sel;           /* [m] */
	uint32_t *tix;           /* [m]: its first move's index in mv (DD_NIL: none) */
	uint8_t *cls;            /* [n]: PG_* */
	bool *dir;               /* [m] */
	struct vc_fp_digest *fp; /* [m] */
	/* Pair q: block pk[q] against stored block cand[q], or, local[q],
	 * against block cand[q] of this trip (its leader: the first staged
	 * block of the trip with that fingerprint that matched nothing stored). */
	uint32_t *pk, *cand;
	bool *local;
	bool *lead; /* [m]: a staged leader (indexed once placed, if still first) */
	bool *hit;  /* [m]: shares a block (stored or a leader's) */
	uint32_t *blk;  /* [m]: the block its use names (direct: from the start) */
	uint64_t *tw;   /* [m]: a staged block's tweak, encrypted into staging */
	uint32_t *ltab; /* the trip's own fingerprints: k + 1, 0 empty */
	uint32_t lmask;
	uint32_t *key, *slot, *uk; /* appends: block ids, their slots, block k of each */
	uint32_t *xq;              /* [m]: the device compare's pair t is pair xq[t] */
	struct vc_fp_digest *pfp, *dfp; /* [n x D]: by page and block; by move */
	bool *ok, *have;                /* [n x D]: dfp read; [n]: page's pfp known */
	struct vc_move *mv;        /* [n x D], and their tickets */
	struct vc_ticket *tk;
	struct scratch s;
};

/* Staged blocks move into staging before their lookup, fingerprinted on
 * the way (plain: any hash, the job after the move for MurmurHash3/MD5;
 * encrypted: the lanes hash in the encrypting move, the ciphertext
 * staged under a tweak of its own, which becomes the stored block's if it
 * is unique). Encrypted with MurmurHash3/MD5 they are hashed on the host
 * and move once, only if unique, from the plaintext. */
static inline bool dd_stage_moves(const struct vc_cache *c)
{
	return !c->gt.cipher || c->dd.fp_move;
}

/* Under c->mu: a scratch off the free list, or (dropping c->mu for the
 * allocation) a new one. NULL on failure. */
struct dd_scratch *dd_scratch_get(struct vc_cache *c);
/* Under c->mu: back on the free list for the next trip. */
void dd_scratch_put(struct vc_cache *c, struct dd_scratch *sc);

/* Block b's slot's device address (its where[] entry: b pinned or BUSY,
 * or c->mu held). */
static inline uint64_t dd_blk_addr(const struct vc_cache *c, uint32_t b)
{
	return vc_ls_addr(c->gpus[0].ls, vc_ls_where(c->gpus[0].ls, b));
}

/* The use of selected block k (page sel[k] / D, block sel[k] % D). */
static inline uint64_t dd_use_of(const struct vc_cache *c, const struct down *g,
				 struct vc_page *const *pages, uint32_t k)
{
	return (uint64_t)page_id(c, pages[g->sel[k] / c->dd.D]) * c->dd.D + g->sel[k] % c->dd.D;
}

/* Selected block k's plaintext in host memory. */
static inline const unsigned char *dd_plain_of(const struct eng_dedup *d, const struct down *g,
					       const unsigned char *const *plain, uint32_t k)
{
	return plain[g->sel[k] / d->D] + (g->sel[k] % d->D) * d->bsize;
}

/* The pairs (dedup_pair.c): lookups, the compare of a match's bytes,
 * the settle. */

/* Under c->mu: the reserved slots of the uses linked under dd.mu alone
 * go back to the tier's free room (dd.resv; dd_use_place's count). */
void dd_give_back(struct vc_cache *c, struct down *g);

/* The m lookups' loads (a table slot, then its block's fingerprint,
 * then a match's slot in the log's where[], for the compare's address)
 * miss the caches at tier sizes (the tables are megabytes), each miss
 * waiting for the one before: asked for ahead, a trip's misses overlap
 * (measured on the H100 host: 130 ns a block in the lookup hold,
 * docs/DEDUP.md step 6). Under dd.mu. */
void dd_lookup_prefetch(const struct vc_cache *c, const struct vc_fp_digest *fp, uint32_t m);

/* The trip's own table (g->ltab): the earlier block of this trip that
 * leads fingerprint g->fp[k] (its index), or DD_NIL, and then block k
 * leads it (g->lead[k]). */
uint32_t dd_trip_leader(const struct eng_dedup *d, struct down *g, uint32_t k);

/* The trip's own table empty again for the next trip: every entry is a
 * leader's, found by probing past entries already cleared. With `uk`,
 * the leaders listed in g->uk[0..g->nu). */
void dd_trip_leaders_clear(const struct eng_dedup *d, struct down *g, bool uk);

/* Under c->mu and dd.mu: the verdict on the m fingerprinted blocks. A block whose
 * fingerprint the table names pairs with that stored block, pinned (its
 * slot's address, or with encryption its tweak and slot, noted for the
 * unlocked compare). Else a direct block, its bytes in its slot already,
 * enters the table (so later blocks, of this trip or another, can match
 * it); a staged block pairs with an earlier staged block of this trip
 * that has it (the trip's own table), or leads: a leader gets its fresh
 * block, slot and placement move here (fresh(), g->mv[0..g->nu)), and is
 * indexed once its bytes are in place (dd_settle). 0 or fresh()'s -VC_EI_NOROOM. */
int dd_lookup(struct vc_cache *c, struct down *g, struct vc_page *const *pages,
	      const uint64_t *src);

/* Unlocked, with encryption and dev_cmp: the pairs against stored blocks
 * in one device job with the key (device/cmp.h), compacted into g->s.x*:
 * each block's plaintext, read where its move down reads it (src: host
 * memory the device sees), against the stored block's ciphertext in its
 * slot, decrypted with the stored block's tweak (the tweak names the
 * stored block) in the compare itself, so no plaintext rests in GPU
 * memory and none crosses back; only a result byte a pair is written.
 * The pairs within the trip compare their plaintexts on the host. 0 or
 * the device's error. */
int dd_compare_dev(struct vc_cache *c, struct down *g, const unsigned char *const *plain,
		   const uint64_t *src);

/* Unlocked: compares the np pairs into g->s.eq[q] (its moves, if any,
 * from g->mv[busy] on: the placement's are before them). Without encryption one
 * device job over the trip's blocks (staging or direct slots) and the
 * stored ones. With it, one device job with the key (dd_compare_dev), or
 * with VC_DD_DEV_CMP=0 the stored blocks come up decrypted into the
 * bounce (one batch of moves) and are compared with the plaintext on the
 * host, as are the pairs within the trip. 0 or the device's error (then
 * nothing is shared). */
int dd_compare(struct vc_cache *c, struct down *g, const unsigned char *const *plain,
	       const uint64_t *src, uint32_t busy);

/* Under dd.mu (alone on the known trip; inside c->mu on the others),
 * after the compare and the leaders' placement (rc: the first error of
 * the two; then nothing is shared, nothing indexed, and the trip ends
 * with rc, its pages released by the caller): settles the pairs. A
 * direct block equal to a stored one that still has a use moves its use
 * there and its fresh block dies (its slot dead, for cleaning: c->mu
 * held, direct pairs being on the staged trip only). A staged block equal
 * to its pair shares (a stored block only if it still has a use: it may
 * have lost its last while we compared; a leader, placed), its use
 * linked, its reserved slot for dd_give_back(). The placed leaders enter the
 * fingerprint table (if the fingerprint is still free). A staged block
 * that shares nothing (a collision, or its stored block died) is listed
 * in g->uk[0..nu) for dd_settle_end(). Unpins (blk_unpin_soft), counts
 * collisions and hits. 0 or rc. A direct block that was indexed has no
 * pair of its own, so no block another pair names dies here. The known
 * trip's pairs and leaders are as staged ones (their blocks' moves, if
 * they share nothing, from the plaintext). */
int dd_settle(struct vc_cache *c, struct down *g, struct vc_page *const *pages, int rc);

/* Under c->mu and dd.mu, after dd_settle() (r: its result): the reserved
 * slots back, the late unpins, and the blocks that shared nothing get
 * fresh blocks and a move each into g->mv (fresh(); *nmv of them). r,
 * or fresh()'s -VC_EI_NOROOM. */
int dd_settle_end(struct vc_cache *c, struct down *g, struct vc_page *const *pages,
		  const uint64_t *src, int r, uint32_t *nmv);

#endif
