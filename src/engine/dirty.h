/* Write-back's dirty pages and the store's errors: the engine's rule for
 * a store error, the dirty limit that makes it safe, a volume's refusing
 * state, the accounting of dirty pages, and the background write-back's
 * entry points (flusher.c). The lock rules of the dirty set are
 * engine.h's. Included by engine.h only, after the structures it reads
 * (struct vc_cache, vc_volume, vc_page).
 *
 * Store errors. They reach the engine final (backing.h's rule): the engine
 * never retries a store call, and its own "not now" codes (-EAGAIN,
 * -VC_EI_*) are never a store's. A final error
 *   - fails the call that needs the store now: a read that misses (the
 *     reader gets it), a write that writes through (the page is dropped,
 *     so the cache holds what the store holds), a flush (its pages stay
 *     dirty: nothing acknowledged is lost);
 *   - never fails a call because room had to be made for it: a write-back
 *     of an eviction or a demotion that fails leaves its page dirty where
 *     it is and its volume refusing (v->refused_ns) for REFUSE_RETRY_NS,
 *     during which victim choice passes over the volume's dirty pages
 *     (eng_unevictable) and no eviction tries them again; a write the
 *     store takes ends the refusal at once. Room comes from other pages;
 *     where the GPU tier can make none (-VC_EI_REFUSED), a miss frees a
 *     host slot without a demotion (moves.c, eng_host_slot_get).
 * The dirty limit makes the second point safe: dirty pages, with the
 * writers' reservations, never exceed c->dirty_max (vc_config.dirty_ratio
 * of the host tier's pages): a write that would dirty one page more writes
 * that page through to the store instead (dirty_charge). So the host tier
 * always holds host pages - dirty_max pages that leave without a
 * write-back, less the few that threads pin, and a miss always finds a
 * victim while the store refuses.
 */
#ifndef VC_ENGINE_DIRTY_H
#define VC_ENGINE_DIRTY_H
#ifndef VC_ENGINE_H
#error "engine/dirty.h is included by engine/engine.h"
#endif

/* vc_config.dirty_ratio's default: half the host tier may be dirty. Linux
 * allows 20 % of a machine's memory; the host tier is memory set aside for
 * the cache, and a larger share lets write-back absorb larger bursts,
 * while the other half still serves misses without a write-back when a
 * store refuses them. */
#define DIRTY_RATIO_DEFAULT 0.5

/* A refusal lasts this long ("Store errors"): evictions leave the
 * volume's dirty pages alone meanwhile, then try again; a full store
 * costs one failed write-back batch a second, not one a miss. */
#define REFUSE_RETRY_NS 1000000000ull

/* The volume's store refused a write-back with final error err. */
static inline void eng_store_refused(struct vc_volume *v, int err)
{
	atomic_store_explicit(&v->refused_err, err, memory_order_relaxed);
	atomic_store_explicit(&v->refused_ns, vc_now_ns() | 1, memory_order_release);
}

/* The volume's store took a write: no refusal stands. One relaxed load
 * when none did. */
static inline void eng_store_ok(struct vc_volume *v)
{
	if (atomic_load_explicit(&v->refused_ns, memory_order_relaxed))
		atomic_store_explicit(&v->refused_ns, 0, memory_order_relaxed);
}

/* Whether the volume's store refuses write-backs now: evictions pass
 * over its dirty pages. */
static inline bool eng_refusing(const struct vc_volume *v)
{
	uint64_t t = atomic_load_explicit(&v->refused_ns, memory_order_acquire);
	return t && vc_now_ns() - t < REFUSE_RETRY_NS;
}

/* Dirty pages (lock rules: v->dirty). Write-back only. */

/* Charges one page more against the dirty limit: false at the limit,
 * where the caller writes the page through instead. Lock-free. */
static inline bool dirty_charge(struct vc_cache *c)
{
	uint64_t n = atomic_load_explicit(&c->dirty_charged, memory_order_relaxed);
	do {
		if (n >= c->dirty_max)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&c->dirty_charged, &n, n + 1,
							memory_order_relaxed, memory_order_relaxed));
	return true;
}

static inline void dirty_uncharge(struct vc_cache *c)
{
	atomic_fetch_sub_explicit(&c->dirty_charged, 1, memory_order_relaxed);
}

/* Before a writer that owns page pno (EXCL) copies into it while it is
 * clean: puts pno in its volume's dirty set. 0, or -ENOMEM with the set
 * unchanged (the write must then fail before it changes the page). Takes
 * only the set's lock; O(log). */
static inline int dirty_reserve(struct vc_volume *v, uint64_t pno)
{
	int r = vc_dset_add(v->dirty, pno - v->base);
	return r < 0 ? r : 0;
}

/* The writer of a reserved page, its owner (EXCL), is about to let go:
 * the page is dirty. Lock-free; the release of EXCL publishes it. */
static inline void dirty_mark(struct vc_cache *c, struct vc_page *p)
{
	atomic_store_explicit(&p->dirty, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->ndirty, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&vol_of(c, p->pno)->ndirty, 1, memory_order_relaxed);
}

/* Dirty page p is clean (written back) or about to be dropped: out of the
 * counts and the set. Under c->mu; O(log). */
static inline void dirty_clear(struct vc_cache *c, struct vc_page *p)
{
	struct vc_volume *v = vol_of(c, p->pno);
	atomic_store_explicit(&p->dirty, 0, memory_order_relaxed);
	atomic_fetch_sub_explicit(&c->ndirty, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&v->ndirty, 1, memory_order_relaxed);
	dirty_uncharge(c);
	vc_dset_del(v->dirty, p->pno - v->base);
}

/* --- flusher.c: background write-back --- */
/* At the end of vc_open: starts the thread in write-back unless the
 * background mark is at the limit (then it is off). */
int eng_flusher_start(struct vc_cache *c);
/* First at vc_close: stops and joins it (safe on a cache half opened). */
void eng_flusher_stop(struct vc_cache *c);
/* A writer charged a page past c->dirty_bg: wakes the thread if it sleeps.
 * Lock-free unless it does. */
void eng_flusher_kick(struct vc_cache *c);

#endif
