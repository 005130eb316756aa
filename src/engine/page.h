/* A cached page's entry and the index that finds it by page number.
 *
 * Every entry holds exactly one tier slot (a page moving between tiers holds
 * its source slot until the move completes, and the destination slot is
 * reserved by the mover), so host_pages + gpu_pages entries always suffice
 * and the pool never grows. An entry's place in the pool is the page's id:
 * the index maps page numbers to ids, and the GPU log names slot owners by
 * id, so cleaning moves a page by rewriting its entry, not the index.
 *
 * Page state `st` is one atomic word: pins, BUSY, EXCL, HOST and GPU.
 * The other fields are written by whoever takes a free entry (a miss, with
 * or without the engine lock) before the index publishes it, and then
 * under the engine lock or by the page's owner (EXCL, BUSY). Entries are
 * freed only under the engine lock; a lock-free miss may take a free one
 * at any time. So under the engine lock an entry found through the index,
 * through the policy or the GPU log, or whose `st` (acquire) shows HOST or
 * GPU is live and its fields hold still; of any other entry read nothing
 * but `st`: a lock-free miss may be filling it in. Readers that
 * find a page through the index without the lock pin it with one
 * compare-and-swap, and only while HOST or GPU is set (the page is settled
 * in that tier) and BUSY and EXCL are clear; the engine sets BUSY or EXCL,
 * or clears HOST or GPU, only with a compare-and-swap that sees no pins
 * (vc_page_claim). So a pinned page's tier, slot (a GPU page's where[]
 * entry: cleaning and eviction claim the pages they move), data and number
 * stay put until it is unpinned, and an entry being freed or reused cannot
 * be pinned. A pinned GPU page is read in place, over PCIe, into the
 * reader's bounce pages.
 */
#ifndef VC_PAGE_H
#define VC_PAGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/idstack.h"
#include "policy/opqueue.h"

#define VC_ST_PIN1 1ull
#define VC_ST_PINS 0xffffull           /* readers copying out of the host slot */
#define VC_ST_BUSY (1ull << 16)        /* data in flight (load, move, write-back): wait */
#define VC_ST_EXCL (1ull << 17)        /* a writer owns the host slot */
#define VC_ST_HOST (1ull << 18)        /* in the host tier: lock-free readers may pin */
#define VC_ST_GPU (1ull << 19)         /* settled in the GPU tier: lock-free readers may pin */

struct vc_page {
	struct vc_opq_node qn; /* first: policy nodes map back to pages by cast */
	uint64_t pno;
	_Atomic uint64_t st;
	uint32_t slot;    /* host-tier slot; a GPU page's is the log's where[id] */
	uint32_t version; /* bumped on every write: the consistency version */
	uint8_t tier;     /* VC_TIER_HOST or VC_TIER_GPU */
	/* Newer than the backing store (write-back only). Set by the page's
	 * owner (EXCL) without the lock, cleared under c->mu by a holder of
	 * a pin or BUSY: never both at once (engine.h, v->dirty). */
	_Atomic uint8_t dirty;
	uint8_t gpu;      /* a GPU page's part (engine.h: c->gpus[]); set with its slot */
};

/* Per-page metadata of features still to come (dedup: content signature
 * and block pointer; encryption: tweak) lives in arrays indexed by page id,
 * allocated by the feature that needs it, so entries stay small. */

static inline struct vc_page *vc_page_of(struct vc_pnode *n)
{
	return (struct vc_page *)n;
}

static inline uint64_t vc_page_st(const struct vc_page *p)
{
	return atomic_load_explicit(&p->st, memory_order_acquire);
}

/* Sets `set` and clears `clear` in p->st if it has no pins, BUSY or EXCL;
 * false (nothing changed) if it has. */
static inline bool vc_page_claim(struct vc_page *p, uint64_t set, uint64_t clear)
{
	uint64_t s = vc_page_st(p);
	do {
		if (s & (VC_ST_PINS | VC_ST_BUSY | VC_ST_EXCL))
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&p->st, &s, (s | set) & ~clear,
							memory_order_acq_rel, memory_order_acquire));
	return true;
}

/* The pool, its free list and the concurrent index over it. Lookups and
 * inserts take no engine lock (a lock-free stack of free entries, the
 * index's own striped locks); removals run under the engine lock. */
struct vc_cindex;
struct vc_index {
	struct vc_page *pool;
	uint64_t npool;
	struct vc_idstack free;  /* free entries' ids */
	struct vc_cindex *map;   /* page number -> page id */
};

int vc_index_init(struct vc_index *ix, uint64_t npool);
void vc_index_fini(struct vc_index *ix);
/* Under the engine lock. */
struct vc_page *vc_index_find(const struct vc_index *ix, uint64_t pno);
/* Lock-free: the entry the index names for pno, or NULL. The caller must
 * pin it and check its number before trusting anything in it. */
struct vc_page *vc_index_peek(const struct vc_index *ix, uint64_t pno);
/* Takes a free entry, fills it in (tier, slot, state st) and publishes it
 * under pno: 0 and *out; -EEXIST when pno is cached already (another
 * thread's miss came first); -VC_EI_NOROOM when no entry is free (not
 * reached: the pool has an entry for every slot of both tiers). Lock-free
 * but for the index's stripe; needs no engine lock. */
int vc_index_insert(struct vc_index *ix, uint64_t pno, int tier, uint32_t slot, uint64_t st,
		    struct vc_page **out);
/* Unpublishes p and frees its entry. Under the engine lock. */
void vc_index_remove(struct vc_index *ix, struct vc_page *p);

#endif
