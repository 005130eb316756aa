/* A volume whose store changes size: vc_volume_resize.
 *
 * A block device never changes size, but a file behind a file system front
 * end (src/fuse/) grows with appends and shrinks with truncate. The volume
 * keeps its id, its pages below the change and its dirty set; what a page
 * holds depends on the size only for the page that holds the old or the new
 * end, and past it. So the change is:
 *
 *   1. pages wholly past the new end (a shrink): dropped without write-back
 *      (their bytes are cut off anyway);
 *   2. the page holding the lower of the two ends, where that end is not a
 *      page boundary: written back if dirty (its bytes below the end are
 *      the caller's data) and dropped, because its length (page_len) and
 *      the zeros past the end change with the size;
 *   3. the store's size and the volume's, from then on.
 *
 * After step 2 no page of the volume is cached at or past the lower end,
 * and the caller guarantees that no other call runs on the volume, so no
 * page that other threads may touch (another volume's eviction writing
 * back one of ours) sees its length change: page_len of every page still
 * cached is a whole page under either size. Cost: the drops' (O(pages
 * past the lower end) or O(pool) lookups, engine lock held per page as
 * vc_volume_drop), one write-back at most.
 */
#include "engine/engine.h"

int vc_volume_resize(vc_volume *v, uint64_t size)
{
	if (!v)
		return vc_err(-EINVAL, "vc_volume_resize: NULL volume");
	struct vc_cache *c = v->c;
	const uint64_t old = v->size, ps = c->page_size;
	if (size == old)
		return 0;
	/* Pages, and with encryption the cipher's units, are numbered in
	 * 48 bits (as vol_open checks). */
	const uint64_t units = (size >> c->pshift) * (c->gt.cipher ? c->gt.units_per_page : 1);
	if (units > VC_PNO_INDEX_MASK || size >> c->pshift > VC_PNO_INDEX_MASK)
		return vc_err(-EFBIG, "volume of %llu bytes: more than 2^%d pages%s",
			      (unsigned long long)size, VC_PNO_VOL_SHIFT,
			      c->gt.cipher ? " or cipher units" : "");
	const uint64_t lo = size < old ? size : old;
	const uint64_t edge = lo & ~(ps - 1);      /* the page holding the lower end */
	const uint64_t past = (size + ps - 1) & ~(ps - 1); /* the first page wholly past */
	int r = 0;
	/* The background write-back is a call on the volume too: none of its
	 * rounds runs meanwhile (flusher.c). */
	pthread_mutex_lock(&c->fl.mu);
	if (past < old) /* 1: a shrink's pages wholly past the new end */
		r = vc_volume_drop(v, past, 0, VC_DROP_DISCARD);
	if (r == 0 && lo > edge) /* 2: a partial page at the lower end */
		r = vc_volume_drop(v, edge, ps, 0);
	if (r == 0) {
		vc_backing_resize(v->bk, size); /* 3 */
		v->size = size;
	}
	pthread_mutex_unlock(&c->fl.mu);
	return r;
}
