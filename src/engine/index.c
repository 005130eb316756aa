#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
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
	ix->pool = calloc(npool ? npool : 1, sizeof *ix->pool);
	int r = ix->pool ? vc_cindex_create(npool ? npool : 1, &ix->map) : -ENOMEM;
	if (r < 0) {
		free(ix->pool);
		return vc_err(r, "out of memory for an index of %llu pages",
			      (unsigned long long)npool);
	}
	ix->npool = npool;
	for (uint64_t i = npool; i-- > 0;) {
		ix->pool[i].next_free = ix->free;
		ix->pool[i].qn.pn.tier = VC_PNODE_NONE;
		vc_opq_node_init(&ix->pool[i].qn);
		ix->free = &ix->pool[i];
	}
	return 0;
}

void vc_index_fini(struct vc_index *ix)
{
	vc_cindex_destroy(ix->map);
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

struct vc_page *vc_index_insert(struct vc_index *ix, uint64_t pno)
{
	struct vc_page *p = ix->free;
	if (!p)
		return NULL;
	/* Puts succeed up to the capacity, which the pool never exceeds. */
	if (vc_cindex_put(ix->map, key_of(pno), (uint64_t)(p - ix->pool)) < 0)
		return NULL;
	ix->free = p->next_free;
	p->next_free = NULL;
	p->pno = pno;
	/* The policy's copy of the key (ghost lists remember evicted keys),
	 * set once per entry use: queued policy calls of this entry's last
	 * page were all applied when it was dropped (page_drop drains). */
	p->qn.pn.key = pno;
	p->slot = 0;
	p->tier = 0;
	p->dirty = 0;
	p->used = 1;
	ix->live++;
	return p;
}

void vc_index_remove(struct vc_index *ix, struct vc_page *p)
{
	vc_cindex_delete(ix->map, key_of(p->pno));
	atomic_store_explicit(&p->st, 0, memory_order_release);
	p->used = 0;
	p->next_free = ix->free;
	ix->free = p;
	ix->live--;
}
