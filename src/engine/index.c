#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/pageno.h"
#include "engine/page.h"
#include "index/cindex.h"

/* A page number (base/pageno.h) is the index key as it is: its volume is
 * the key's backing id, so volumes never collide. */
static uint64_t key_of(uint64_t pno)
{
	return vc_ikey(vc_pno_vol(pno), vc_pno_index(pno));
}

int vc_index_init(struct vc_index *ix, uint64_t npool)
{
	memset(ix, 0, sizeof *ix);
	if (npool >= UINT32_MAX)
		return vc_err(-EINVAL, "an index of %llu pages is too large (limit 2^32-1)",
			      (unsigned long long)npool);
	ix->pool = calloc(npool ? npool : 1, sizeof *ix->pool);
	if (ix->pool)
		vc_mem_huge(ix->pool, (npool ? npool : 1) * sizeof *ix->pool);
	int r = ix->pool ? vc_cindex_create(npool ? npool : 1, &ix->map) : -ENOMEM;
	if (r == 0 && (r = vc_idstack_init(&ix->free, (uint32_t)npool, true)) < 0)
		vc_cindex_destroy(ix->map);
	if (r < 0) {
		free(ix->pool);
		return vc_err(r, "out of memory for an index of %llu pages",
			      (unsigned long long)npool);
	}
	ix->npool = npool;
	for (uint64_t i = 0; i < npool; i++) {
		ix->pool[i].qn.pn.tier = VC_PNODE_NONE;
		vc_opq_node_init(&ix->pool[i].qn);
	}
	return 0;
}

void vc_index_fini(struct vc_index *ix)
{
	vc_cindex_destroy(ix->map);
	vc_idstack_fini(&ix->free);
	free(ix->pool);
	memset(ix, 0, sizeof *ix);
}

struct vc_page *vc_index_peek(const struct vc_index *ix, uint64_t pno)
{
	uint64_t id;
	return vc_cindex_lookup(ix->map, key_of(pno), &id) ? &ix->pool[id] : NULL;
}

struct vc_page *vc_index_find(const struct vc_index *ix, uint64_t pno)
{
	return vc_index_peek(ix, pno);
}

int vc_index_insert(struct vc_index *ix, uint64_t pno, int tier, uint32_t slot, uint64_t st,
		    struct vc_page **out)
{
	uint32_t id;
	if (!vc_idstack_pop(&ix->free, &id))
		return -VC_EI_NOROOM;
	struct vc_page *p = &ix->pool[id];
	/* Ours alone until published: free entries are in no index, policy
	 * or log, and their st is 0, so nobody pins them. */
	p->pno = pno;
	/* The policy's copy of the key (ghost lists remember evicted keys),
	 * set once per entry use: queued policy calls of this entry's last
	 * page were all applied when it was dropped (page_drop drains). */
	p->qn.pn.key = pno;
	p->slot = slot;
	p->tier = (uint8_t)tier;
	p->dirty = 0;
	atomic_store_explicit(&p->st, st, memory_order_relaxed);
	/* Puts succeed up to the capacity, which the pool never exceeds; the
	 * add publishes (release) what was written above. */
	int r = vc_cindex_add(ix->map, key_of(pno), id);
	if (r < 0) {
		atomic_store_explicit(&p->st, 0, memory_order_relaxed);
		vc_idstack_push(&ix->free, id);
		return r == -EEXIST ? r : -VC_EI_NOROOM;
	}
	*out = p;
	return 0;
}

void vc_index_remove(struct vc_index *ix, struct vc_page *p)
{
	vc_cindex_delete(ix->map, key_of(p->pno));
	atomic_store_explicit(&p->st, 0, memory_order_release);
	vc_idstack_push(&ix->free, (uint32_t)(p - ix->pool));
}
