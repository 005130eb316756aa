/* The trip down's state (dedup_down.c) and its scratch (dedup_scratch.c):
 * what the two share; private to them. */
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
	 * back (give_back()); stored blocks whose last unpin waits for c->mu
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

#endif
