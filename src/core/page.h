/* A cached page's entry and the index that finds it by page number.
 *
 * Every entry holds exactly one tier slot (a page moving between tiers holds
 * its source slot until the move completes, and the destination slot is
 * reserved by the mover), so host_pages + gpu_pages entries always suffice
 * and the pool never grows.
 */
#ifndef VC_PAGE_H
#define VC_PAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/policy.h"

struct vc_page {
	struct vc_pnode pn; /* first: policy nodes map back to pages by cast */
	uint64_t pno;
	struct vc_page *hnext; /* hash chain, or free list */
	uint32_t slot;         /* slot in `tier` */
	uint16_t pins;         /* readers copying out of the host slot */
	uint8_t tier;          /* VC_TIER_HOST or VC_TIER_GPU */
	uint8_t busy : 1;      /* data in flight (load, move, write-back): wait */
	uint8_t excl : 1;      /* a writer owns the host slot */
	uint8_t dirty : 1;     /* newer than the backing store (write-back only) */
	uint8_t used : 1;      /* entry is live (in the index) */
};

static inline struct vc_page *vc_page_of(struct vc_pnode *n)
{
	return (struct vc_page *)n;
}

/* Chained hash over a fixed pool. Not thread safe (engine lock). Lookup is
 * O(1) expected: buckets are a power of two >= 2x the pool. */
struct vc_index {
	struct vc_page *pool;
	uint64_t npool;
	struct vc_page *free;
	struct vc_page **buckets;
	uint64_t mask;
	uint64_t live;
};

int vc_index_init(struct vc_index *ix, uint64_t npool);
void vc_index_fini(struct vc_index *ix);
struct vc_page *vc_index_find(const struct vc_index *ix, uint64_t pno);
/* Takes a free entry, keys it and links it; NULL when the pool is empty. */
struct vc_page *vc_index_insert(struct vc_index *ix, uint64_t pno);
void vc_index_remove(struct vc_index *ix, struct vc_page *p);

#endif
