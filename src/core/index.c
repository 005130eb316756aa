#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/page.h"

static uint64_t bucket_of(const struct vc_index *ix, uint64_t pno)
{
	/* Fibonacci hashing: sequential page numbers spread over buckets. */
	return (pno * 0x9E3779B97F4A7C15ull >> 20) & ix->mask;
}

int vc_index_init(struct vc_index *ix, uint64_t npool)
{
	memset(ix, 0, sizeof *ix);
	uint64_t nb = 16;
	while (nb < 2 * npool)
		nb <<= 1;
	ix->pool = calloc(npool ? npool : 1, sizeof *ix->pool);
	ix->buckets = calloc(nb, sizeof *ix->buckets);
	if (!ix->pool || !ix->buckets) {
		free(ix->pool);
		free(ix->buckets);
		return vc_err(-ENOMEM, "out of memory for an index of %llu pages",
			      (unsigned long long)npool);
	}
	ix->npool = npool;
	ix->mask = nb - 1;
	for (uint64_t i = npool; i-- > 0;) {
		ix->pool[i].hnext = ix->free;
		ix->pool[i].pn.tier = VC_PNODE_NONE;
		ix->free = &ix->pool[i];
	}
	return 0;
}

void vc_index_fini(struct vc_index *ix)
{
	free(ix->pool);
	free(ix->buckets);
	memset(ix, 0, sizeof *ix);
}

struct vc_page *vc_index_find(const struct vc_index *ix, uint64_t pno)
{
	for (struct vc_page *p = ix->buckets[bucket_of(ix, pno)]; p; p = p->hnext)
		if (p->pno == pno)
			return p;
	return NULL;
}

struct vc_page *vc_index_insert(struct vc_index *ix, uint64_t pno)
{
	struct vc_page *p = ix->free;
	if (!p)
		return NULL;
	ix->free = p->hnext;
	memset(p, 0, sizeof *p);
	p->pn.tier = VC_PNODE_NONE;
	p->pno = pno;
	p->used = 1;
	struct vc_page **b = &ix->buckets[bucket_of(ix, pno)];
	p->hnext = *b;
	*b = p;
	ix->live++;
	return p;
}

void vc_index_remove(struct vc_index *ix, struct vc_page *p)
{
	struct vc_page **pp = &ix->buckets[bucket_of(ix, p->pno)];
	while (*pp != p)
		pp = &(*pp)->hnext;
	*pp = p->hnext;
	p->used = 0;
	p->hnext = ix->free;
	ix->free = p;
	ix->live--;
}
