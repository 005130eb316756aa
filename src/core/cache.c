/* The engine: a page cache over a backing store with a host tier and a GPU
 * tier under one replacement policy (GRAM, Zhong & He, ICCS 2011).
 *
 *   read hit, host tier   copy out of the pinned host slot
 *   read hit, GPU tier    bring the page to the host tier; if the host tier is
 *                         full, its victim takes the page's GPU slot in the same
 *                         move (a SWAP: one batch entry, no GPU eviction)
 *   miss                  load into a host slot; the host victim moves to the
 *                         head of the GPU tier, whose own victim is dropped,
 *                         after a write-back if dirty
 *
 * So the host queue and the GPU queue form one virtual LRU queue, and the GPU
 * tier is a victim cache. Every host<->GPU move goes through the batcher.
 *
 * The GPU tier is a log of segments (BAG; tier/logstore.h). Host victims
 * append at its head with their demotion stamp; a page that leaves the GPU
 * tier orphans its slot; a swap hands the slot to the host victim, which
 * takes a fresh stamp. Space comes back by reclaim(): cleaning (the device
 * moves the live pages of fragmented segments to the head in stamp order,
 * i.e. LRU order) when the log is fragmented enough for it to gain, else
 * eviction of the whole tail segment, dirty pages written back first. Below
 * the watermark, the thread that notices releases up to early_release of
 * the live pages at once, so that later demotions find room.
 *
 * Locking: one mutex (c->mu) guards changes to the index, the tiers' slot
 * stacks, the log and page entries. Data never moves under it: a page
 * whose data is in flight is BUSY, and anyone who needs it sleeps on c->cv
 * and looks it up again on waking (its entry may have been freed and
 * reused). A reader pins the host slot (shared), a writer owns it (EXCL); a
 * pinned, owned or busy page is never chosen as a victim.
 *
 * The hot path takes no lock (BAG): a read that hits the host tier finds
 * the page in the concurrent index (index/cindex.h, lock-free lookups),
 * pins it with one compare-and-swap on its state word (core/page.h says
 * why that is safe against eviction and reuse), records the hit in its
 * thread's queue of policy updates (policy/opqueue.h: the LRU list is only
 * touched in stamp-ordered batches) and unpins with one atomic add. The
 * locked paths record their policy calls through one handle of their own
 * (c->lk, used only under c->mu) and ask for victims through the queue
 * layer, which drains first so the order is exact. An unpin wakes sleepers
 * only when there are any; a sleeper that checked a pin just before it
 * dropped re-checks within WAIT_GUARD_NS.
 *
 * Deadlock freedom: a thread holds at most one pin or ownership while it
 * may wait for a victim, and nobody waits for anything while a page it
 * marked busy is in flight, except the device and the backing store.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backing/backing.h"
#include "core/batcher.h"
#include "base/clock.h"
#include "base/error.h"
#include "core/page.h"
#include "device/device.h"
#include "policy/policy.h"
#include "tier/logstore.h"
#include "tier/tier.h"
#include "vramcache.h"

#define HOST VC_TIER_HOST
#define GPU VC_TIER_GPU

/* Staging pages for write-backs of single GPU pages (evictions, drops).
 * Each holder keeps one for one device move plus one backing write; 16
 * lets 16 threads evict dirty GPU pages at once, for 64 KiB of pinned
 * memory at 4 KiB pages. */
#define WB_STAGING_PAGES 16

/* The host tier must hold more pages than threads pin at once (one each),
 * or evictions could find nothing to evict; 16 keeps small tests honest. */
#define MIN_HOST_PAGES 16

/* Longest sleep on c->cv before re-checking: bounds the cost of a wakeup
 * lost to a lock-free unpin racing with a sleeper's check. */
#define WAIT_GUARD_NS 2000000

/* Handles for threads' policy-update queues; threads past this many take
 * the lock for their hits. */
#define MAX_QUEUE_THREADS 128

/* Volumes share the tiers, the index and the policy: a page's number (its
 * key everywhere in the engine) is its volume id in the top VOL_BITS bits
 * over its page index in the volume. 48 index bits cover 2^57 bytes at the
 * smallest (512 B) page, so no real store is refused; the rest leaves room
 * for far more volumes than VC_VOLUMES_MAX. */
#define VOL_SHIFT 48
#define PAGE_MASK ((1ull << VOL_SHIFT) - 1)

struct vc_volume {
	struct vc_cache *c;
	struct vc_backing *bk;
	uint64_t size;
	uint64_t base; /* id << VOL_SHIFT: the volume's first page number */
	uint32_t id;
	bool readonly;
	uint64_t ndirty; /* its dirty pages (under c->mu) */
};

/* Bounce pages per thread for GPU-tier reads served in place: one 128 KiB
 * read (32 pages of 4 KiB) travels in one device submission. Threads past
 * BOUNCE_TOTAL / 128 KiB (128 at 4 KiB pages; fewer for large pages, at
 * least 16) have none and promote instead. */
#define BOUNCE_BYTES (128u << 10)
#define BOUNCE_TOTAL (16u << 20)

/* A thread's state for one cache (the pthread key's value). */
struct tstate {
	_Atomic bool used;
	uint32_t idx;            /* in c->ts[]; its bounce pages if < bounce_threads */
	struct vc_opq_local *l;  /* its policy-update queue, or NULL */
	_Atomic uint64_t hits[VC_TIER_COUNT]; /* lock-free hits (counters only grow) */
	_Atomic uint64_t d2h;    /* bytes read in place from the GPU tier */
};

struct vc_cache {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* page flags or slots changed */
	_Atomic uint32_t nwaiters;
	struct vc_opq *opq;      /* queued policy updates over pol */
	struct vc_opq_local *lk; /* the lock holders' queue handle */
	pthread_key_t tls;       /* each thread's own handle */
	bool tls_ok;
	struct tstate ts[MAX_QUEUE_THREADS];
	bool serve;               /* GPU-tier reads served in place (VC_GPU_HITS_SERVE) */
	struct vc_tiermem *bounce; /* bounce_threads x bounce_per pinned pages */
	uint32_t bounce_per, bounce_threads;

	uint32_t page_size;
	unsigned pshift;
	int write_mode;
	uint32_t batch_pages;
	uint64_t latency_ns; /* added to every backing call of every volume */

	/* vols[id]: set and cleared under mu. Read without it only for a
	 * page that is cached, whose volume cannot close meanwhile
	 * (vc_volume_close drops its pages first, waiting for busy ones). */
	struct vc_volume *vols[VC_VOLUMES_MAX];
	struct vc_device *dev;
	struct vc_tiermem *host;
	struct vc_ls *ls; /* the GPU tier; NULL when it is disabled */
	bool gpu_off;     /* the device failed while cleaning: no more demotions */
	bool reclaiming;  /* a thread is releasing early */
	uint64_t clock;   /* demotion stamps: the GPU tier's LRU order */
	int gc_policy;
	uint32_t gc_segments;
	double gc_frag;
	uint64_t gc_ns;   /* in cleaning steps under c->mu, attempts included */
	struct vc_page **gc_held; /* pages a cleaning step claimed: gc_segments x per segment */
	struct vc_tiermem *stage_wb;   /* see WB_STAGING_PAGES */
	struct vc_tiermem *stage_bulk; /* flush and GPU prefetch; batch_pages pages */
	struct vc_batcher *bat;
	struct vc_policy *pol;
	struct vc_index ix;

	uint64_t ndirty;
	struct {
		uint64_t hits[VC_TIER_COUNT], misses, evictions[VC_TIER_COUNT];
		uint64_t writebacks, h2d, d2h, rd_bytes, wr_bytes;
	} st;
};

/* ---- small helpers (under c->mu unless said) --------------------------- */

static void wait_cv(struct vc_cache *c)
{
	atomic_fetch_add(&c->nwaiters, 1);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += WAIT_GUARD_NS;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&c->cv, &c->mu, &ts);
	atomic_fetch_sub(&c->nwaiters, 1);
}

static void wake(struct vc_cache *c)
{
	if (atomic_load(&c->nwaiters))
		pthread_cond_broadcast(&c->cv);
}

static uint64_t st_of(const struct vc_page *p)
{
	return vc_page_st(p);
}

static void st_clear(struct vc_page *p, uint64_t bits)
{
	atomic_fetch_and_explicit(&p->st, ~bits, memory_order_acq_rel);
}

/* Drops a pin; lock-free. */
static void unpin(struct vc_cache *c, struct vc_page *p)
{
	atomic_fetch_sub(&p->st, VC_ST_PIN1);
	if (atomic_load(&c->nwaiters)) {
		pthread_mutex_lock(&c->mu);
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
	}
}

static struct vc_volume *vol_of(const struct vc_cache *c, uint64_t pno)
{
	return c->vols[pno >> VOL_SHIFT];
}

/* Byte offset of page pno in its volume's backing store. */
static uint64_t page_off(const struct vc_cache *c, uint64_t pno)
{
	return (pno & PAGE_MASK) << c->pshift;
}

/* Bytes of page pno that lie inside its backing store. */
static uint32_t page_len(const struct vc_cache *c, uint64_t pno)
{
	uint64_t left = vol_of(c, pno)->size - page_off(c, pno);
	return left < c->page_size ? (uint32_t)left : c->page_size;
}

static void dirty_add(struct vc_cache *c, struct vc_page *p, int d)
{
	c->ndirty += (uint64_t)(int64_t)d;
	vol_of(c, p->pno)->ndirty += (uint64_t)(int64_t)d;
}

/* A page's id: its entry's place in the pool, stable while it is cached.
 * The GPU log names slot owners by it. */
static uint32_t page_id(const struct vc_cache *c, const struct vc_page *p)
{
	return (uint32_t)(p - c->ix.pool);
}

/* A GPU-tier page's slot in the log: kept by the log store (where[]), which
 * the device cleaner updates in place, so cleaning costs the engine no
 * work per moved page. */
static uint32_t gpu_slot(const struct vc_cache *c, const struct vc_page *p)
{
	return vc_ls_where(c->ls, page_id(c, p));
}

static uint64_t slot_addr(const struct vc_cache *c, const struct vc_page *p)
{
	return p->tier == GPU ? vc_ls_addr(c->ls, gpu_slot(c, p)) : vc_tier_addr(c->host, p->slot);
}

/* A GPU-tier page's device address; for a pinned page without the lock
 * (cleaning and eviction claim the pages whose slots they change). */
static uint64_t slot_addr_gpu(const struct vc_cache *c, const struct vc_page *p)
{
	return vc_ls_addr(c->ls, gpu_slot(c, p));
}

static unsigned char *host_data(const struct vc_cache *c, const struct vc_page *p)
{
	return vc_tier_host(c->host, p->slot);
}

static void note_written(struct vc_cache *c, struct vc_page *p, uint32_t len)
{
	p->dirty = 0;
	dirty_add(c, p, -1);
	c->st.writebacks++;
	c->st.wr_bytes += len;
}

/* Policy calls of lock holders, queued through c->lk. */
static void pol_insert(struct vc_cache *c, struct vc_page *p, int tier)
{
	vc_opq_insert(c->lk, &p->qn, tier);
}

static void pol_remove(struct vc_cache *c, struct vc_page *p)
{
	uint32_t g = vc_opq_gen(&p->qn);
	if (vc_opq_gen_live(g))
		vc_opq_remove(c->lk, &p->qn, g);
}

static void pol_hit(struct vc_cache *c, struct vc_page *p)
{
	vc_opq_hit(c->lk, &p->qn, vc_opq_gen(&p->qn));
}

static bool unevictable(const struct vc_pnode *n, void *arg)
{
	(void)arg;
	return st_of((const struct vc_page *)n) & (VC_ST_PINS | VC_ST_BUSY | VC_ST_EXCL);
}

/* The host tier's victim (the GPU tier evicts by segment, not by page).
 * Exact LRU: the queue layer drains first. */
static struct vc_page *host_victim(struct vc_cache *c)
{
	struct vc_opq_node *n = vc_opq_victim(c->opq, HOST, unevictable, NULL);
	return n ? vc_page_of(&n->pn) : NULL;
}

/* Forgets a page: policy, slot, index. Its data is gone. The policy hears
 * of it at once, after what is queued (the order the policy sees is the
 * order of events), not through the queue: the entry may be reused for
 * another page before a queued removal would be applied, and policies with
 * ghost lists read the key at removal. `drained`: the caller drained the
 * queues since it last queued anything (evict_seg drops a segment's pages
 * after one drain). */
static void page_drop_drained(struct vc_cache *c, struct vc_page *p, bool drained)
{
	uint32_t g = vc_opq_gen(&p->qn);
	if (vc_opq_gen_live(g)) {
		if (!drained)
			vc_opq_drain(c->opq);
		vc_opq_remove_now(c->opq, &p->qn, g);
	}
	if (p->tier == GPU)
		vc_ls_orphan(c->ls, gpu_slot(c, p));
	else
		vc_tier_free(c->host, p->slot);
	if (p->dirty)
		dirty_add(c, p, -1);
	vc_index_remove(&c->ix, p);
}

static void page_drop(struct vc_cache *c, struct vc_page *p)
{
	page_drop_drained(c, p, false);
}

/* One page move, unlocked: add to the open batch and wait for it. */
static int move1(struct vc_cache *c, int op, uint64_t src, uint64_t dst)
{
	struct vc_move m = { .src = src, .dst = dst, .op = (uint32_t)op };
	struct vc_ticket t;
	int r = vc_batcher_add(c->bat, &m, &t);
	return r < 0 ? r : vc_batcher_wait(c->bat, &t);
}

/* Loads page pno from the backing store into buf (unlocked); the part past
 * the end of the store reads as zeros. */
static int load_page(struct vc_cache *c, uint64_t pno, unsigned char *buf)
{
	uint32_t len = page_len(c, pno);
	int r = vc_backing_read(vol_of(c, pno)->bk, buf, len, page_off(c, pno));
	if (len < c->page_size)
		memset(buf + len, 0, c->page_size - len);
	return r;
}

/* ---- write-back and eviction (under c->mu; they drop it while data moves) */

/* Writes a dirty page that is not busy, pinned or owned to the backing store
 * and marks it clean. It stays cached. -EAGAIN: no staging page free now. */
static int writeback_page(struct vc_cache *c, struct vc_page *p)
{
	uint32_t s = 0;
	bool on_gpu = p->tier == GPU;
	if (on_gpu && vc_tier_alloc(c->stage_wb, &s) < 0)
		return -EAGAIN;
	if (!vc_page_claim(p, VC_ST_BUSY, 0)) { /* a lock-free reader pinned it */
		if (on_gpu)
			vc_tier_free(c->stage_wb, s);
		return -EAGAIN;
	}
	uint64_t pno = p->pno, src = slot_addr(c, p);
	unsigned char *buf = on_gpu ? vc_tier_host(c->stage_wb, s) : host_data(c, p);
	pthread_mutex_unlock(&c->mu);
	int r = on_gpu ? move1(c, VC_MOVE_COPY, src, vc_tier_addr(c->stage_wb, s)) : 0;
	if (r == 0)
		r = vc_backing_write(vol_of(c, pno)->bk, buf, page_len(c, pno), page_off(c, pno));
	pthread_mutex_lock(&c->mu);
	if (on_gpu) {
		vc_tier_free(c->stage_wb, s);
		c->st.d2h += c->page_size;
	}
	st_clear(p, VC_ST_BUSY);
	if (r == 0)
		note_written(c, p, page_len(c, pno));
	wake(c);
	return r;
}

/* Writes back dirty GPU pages that the caller marked busy, WB_STAGING_PAGES
 * at a time: one device batch to the staging pages, then one backing
 * submission. Unlocked while data moves. done[i] tells which succeeded;
 * returns the first error. Never sleeps holding staging pages. */
static int writeback_gpu(struct vc_cache *c, struct vc_page **pages, uint32_t n, bool *done)
{
	struct vc_move mv[WB_STAGING_PAGES];
	struct vc_ticket tk[WB_STAGING_PAGES];
	struct vc_bio io[WB_STAGING_PAGES];
	uint32_t st[WB_STAGING_PAGES];
	int err = 0;
	for (uint32_t i = 0; i < n;) {
		uint32_t k = 0;
		while (k < WB_STAGING_PAGES && i + k < n && vc_tier_alloc(c->stage_wb, &st[k]) == 0)
			k++;
		if (k == 0) { /* single-page write-backs hold them; they never wait */
			wait_cv(c);
			continue;
		}
		for (uint32_t j = 0; j < k; j++) {
			struct vc_page *p = pages[i + j];
			mv[j] = (struct vc_move){ .src = slot_addr(c, p),
						  .dst = vc_tier_addr(c->stage_wb, st[j]),
						  .op = VC_MOVE_COPY };
			io[j] = (struct vc_bio){ .buf = vc_tier_host(c->stage_wb, st[j]),
						 .off = page_off(c, p->pno),
						 .len = page_len(c, p->pno),
						 .write = 1 };
		}
		pthread_mutex_unlock(&c->mu);
		int r = vc_batcher_add_n(c->bat, mv, k, tk);
		if (r == 0)
			r = vc_batcher_wait_n(c->bat, tk, k);
		/* One submission per volume: a segment mixes them. */
		for (uint32_t j = 0, e; r == 0 && j < k; j = e) {
			struct vc_volume *v = vol_of(c, pages[i + j]->pno);
			for (e = j + 1; e < k && vol_of(c, pages[i + e]->pno) == v; e++)
				;
			r = vc_backing_submit(v->bk, io + j, e - j);
		}
		pthread_mutex_lock(&c->mu);
		for (uint32_t j = 0; j < k; j++) {
			vc_tier_free(c->stage_wb, st[j]);
			done[i + j] = r == 0 && io[j].result == 0;
			if (done[i + j])
				note_written(c, pages[i + j], io[j].len);
			else if (!err)
				err = r < 0 ? r : io[j].result;
		}
		c->st.d2h += (uint64_t)k * c->page_size;
		i += k;
	}
	wake(c);
	return err;
}

/* Evicts a whole segment of the GPU log: the one that holds the policy's
 * GPU victim. Pages reach the GPU tier only as demotions and leave it on
 * a hit, so under LRU the victim is the oldest demotion and its segment
 * the log's tail; other policies choose by their own order, and with
 * one-page segments the tier is exactly the policy's victim cache (what
 * `vramcache sim` models). Clean pages are dropped at once, dirty ones
 * written back in batches first. -EAGAIN when there is no victim, its
 * segment is taken, or one of its pages is in flight (the caller waits,
 * or, holding busy pages of its own, gives up); *evicted counts pages. */
static int evict_seg(struct vc_cache *c, uint32_t seg, uint64_t *evicted);

static int evict_tail(struct vc_cache *c, uint64_t *evicted)
{
	struct vc_opq_node *n = vc_opq_victim(c->opq, GPU, unevictable, NULL);
	if (!n)
		return -EAGAIN;
	uint32_t seg = gpu_slot(c, vc_page_of(&n->pn)) / vc_ls_slots_per_seg(c->ls);
	if (vc_ls_take(c->ls, seg) < 0)
		return -EAGAIN;
	return evict_seg(c, seg, evicted);
}

/* Evicts taken segment seg (see evict_tail). Every live page is claimed
 * (BUSY) first, so no reader is copying one out in place; a page that
 * cannot be claimed makes it -EAGAIN with nothing changed. */
static int evict_seg(struct vc_cache *c, uint32_t seg, uint64_t *evicted)
{
	uint32_t per = vc_ls_slots_per_seg(c->ls);
	uint32_t *g = malloc(per * sizeof *g);
	struct vc_page **dirty = malloc(per * sizeof *dirty);
	struct vc_page **held = malloc(per * sizeof *held);
	bool *done = malloc(per * sizeof *done);
	if (!g || !dirty || !held || !done) {
		vc_ls_unpick(c->ls, 1, &seg);
		free(g);
		free(dirty);
		free(held);
		free(done);
		return vc_err(-ENOMEM, "out of memory");
	}
	uint32_t n = vc_ls_live(c->ls, seg, g, per), nd = 0, nh = 0;
	int r = 0;
	for (uint32_t i = 0; i < n && r == 0; i++) {
		struct vc_page *p = &c->ix.pool[vc_ls_key(c->ls, g[i])];
		if (vc_page_claim(p, VC_ST_BUSY, 0))
			held[nh++] = p;
		else
			r = -EAGAIN; /* in flight, or a reader holds it */
	}
	if (r < 0) {
		while (nh > 0)
			st_clear(held[--nh], VC_ST_BUSY);
	} else {
		vc_opq_drain(c->opq); /* once for the segment (page_drop_drained) */
	}
	for (uint32_t i = 0; i < nh; i++) {
		struct vc_page *p = held[i];
		if (p->dirty) {
			dirty[nd++] = p;
		} else {
			page_drop_drained(c, p, true);
			(*evicted)++;
			c->st.evictions[GPU]++;
		}
	}
	if (r == 0 && nd) {
		r = writeback_gpu(c, dirty, nd, done);
		vc_opq_drain(c->opq);
		for (uint32_t i = 0; i < nd; i++) {
			if (done[i]) { /* dropped while still BUSY: nobody pins it meanwhile */
				page_drop_drained(c, dirty[i], true);
				(*evicted)++;
				c->st.evictions[GPU]++;
			} else {
				st_clear(dirty[i], VC_ST_BUSY);
			}
		}
	}
	/* Pages whose write-back failed keep the segment. */
	if (vc_ls_seg_live(c->ls, seg) == 0) {
		vc_ls_release(c->ls, seg, true);
	} else {
		vc_ls_unpick(c->ls, 1, &seg);
	}
	free(g);
	free(dirty);
	free(held);
	free(done);
	wake(c);
	return r;
}

/* Claims (BUSY) every live page of the segments, so that none is in
 * flight or being read in place while the device moves it; on the first
 * that cannot be claimed, gives back those claimed and returns false.
 * held[] gets the claimed pages (room: n x slots per segment). O(live). */
static bool segs_claim(struct vc_cache *c, uint32_t n, const uint32_t *segs,
		       struct vc_page **held, uint32_t *nheld)
{
	const uint32_t per = vc_ls_slots_per_seg(c->ls);
	uint32_t nh = 0;
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t s = 0; s < per; s++) {
			uint32_t k = vc_ls_key(c->ls, segs[i] * per + s);
			if (k == VC_LS_DEAD)
				continue;
			struct vc_page *p = &c->ix.pool[k];
			if (!vc_page_claim(p, VC_ST_BUSY, 0)) {
				while (nh > 0)
					st_clear(held[--nh], VC_ST_BUSY);
				return false;
			}
			held[nh++] = p;
		}
	*nheld = nh;
	return true;
}

/* One cleaning step: up to gc_segments segments chosen by the policy, if
 * cleaning them frees space and none of their pages is in flight (else
 * -EAGAIN). Runs under c->mu: the pause is one device job over those
 * segments' live pages, plus the check that none is in flight. */
static int gc_step_locked(struct vc_cache *c)
{
	uint32_t segs[64];
	uint32_t max = c->gc_segments < 64 ? c->gc_segments : 64;
	uint32_t n = vc_ls_pick(c->ls, c->gc_policy == VC_GC_OLDEST ? VC_LS_CLEAN_OLDEST
								   : VC_LS_CLEAN_COST_BENEFIT,
				max, segs);
	/* The best segments first: drop the worst ones until cleaning the
	 * rest fits the free space and frees some. */
	while (n > 0 && vc_ls_clean_gain(c->ls, n, segs) <= 0)
		vc_ls_unpick(c->ls, 1, &segs[--n]);
	if (n == 0)
		return -EAGAIN;
	uint32_t per = vc_ls_slots_per_seg(c->ls), nheld = 0;
	if (!segs_claim(c, n, segs, c->gc_held, &nheld)) {
		vc_ls_unpick(c->ls, n, segs);
		return -EAGAIN;
	}
	int r = vc_ls_clean(c->ls, n, segs);
	if (r == -ENOSPC) {
		for (uint32_t i = 0; i < nheld; i++)
			st_clear(c->gc_held[i], VC_ST_BUSY);
		vc_ls_unpick(c->ls, n, segs);
		return -EAGAIN;
	}
	if (r < 0) {
		/* The device failed mid-job: which copy of these pages is
		 * current is unknown. Forget them (dirty data in them is lost,
		 * as in promote) and demote nothing more. */
		for (uint32_t i = 0; i < n; i++)
			for (uint32_t s = 0; s < per; s++) {
				uint32_t k = vc_ls_key(c->ls, segs[i] * per + s);
				if (k == VC_LS_DEAD)
					continue;
				struct vc_page *p = &c->ix.pool[k];
				pol_remove(c, p);
				if (p->dirty)
					dirty_add(c, p, -1);
				vc_index_remove(&c->ix, p);
			}
		for (uint32_t i = 0; i < nheld; i++) /* those still cached: not the dropped */
			if (c->gc_held[i]->used)
				st_clear(c->gc_held[i], VC_ST_BUSY);
		c->gpu_off = true;
		wake(c);
		return r;
	}
	for (uint32_t i = 0; i < nheld; i++)
		st_clear(c->gc_held[i], VC_ST_BUSY); /* moved: where[] has their new slots */
	wake(c);
	return 0;
}

/* The step's time, whatever its outcome, is GC time (vc_stats.gc_ns). */
static int gc_step(struct vc_cache *c)
{
	uint64_t t0 = vc_now_ns();
	int r = gc_step_locked(c);
	c->gc_ns += vc_now_ns() - t0;
	return r;
}

/* Frees GPU log space once: a cleaning step when the log is fragmented
 * past gc_fragmentation and cleaning gains, else the tail segment's
 * eviction. -EAGAIN: nothing can be freed now. */
static int reclaim(struct vc_cache *c, uint64_t *evicted)
{
	if (c->gc_policy != VC_GC_OFF && vc_ls_fragmentation(c->ls) >= c->gc_frag) {
		int r = gc_step(c);
		if (r != -EAGAIN)
			return r;
	}
	return evict_tail(c, evicted);
}

/* Makes room for `need` slots at the GPU log's head; may sleep and drop
 * the lock. Below the watermark, one thread at a time releases early: up
 * to early_release of the live pages, or until the watermark is met.
 * `holding`: the caller has busy pages of its own in flight, so it must
 * not sleep for pages to settle: -EAGAIN instead. */
static int gpu_room(struct vc_cache *c, uint32_t need, bool holding)
{
	if (vc_ls_low(c->ls) && !c->reclaiming) {
		c->reclaiming = true;
		uint64_t budget = vc_ls_early_budget(c->ls), released = 0;
		int r = 0;
		while (vc_ls_low(c->ls) && released <= budget && r == 0) {
			uint64_t ev = 0;
			r = reclaim(c, &ev);
			released += ev;
		}
		vc_ls_note_early_release(c->ls, released);
		c->reclaiming = false;
		if (r < 0 && r != -EAGAIN)
			return r;
	}
	while (vc_ls_room(c->ls) < need) {
		uint64_t ev = 0;
		int r = reclaim(c, &ev);
		if (r == -EAGAIN) {
			if (holding)
				return r;
			wait_cv(c);
		} else if (r < 0) {
			return r;
		}
	}
	return 0;
}

/* Frees one host slot: the host victim moves to the head of the GPU tier
 * (or is dropped, after a write-back if dirty, when there is no GPU tier). */
static int evict_host_one(struct vc_cache *c)
{
	int r;
	bool to_gpu = c->ls && !c->gpu_off;
	if (to_gpu && (r = gpu_room(c, 1, false)) < 0)
		return r;
	struct vc_page *v = host_victim(c);
	if (!v)
		return -EAGAIN;
	if (!to_gpu) {
		if (v->dirty) {
			r = writeback_page(c, v);
			if (r < 0)
				return r;
		}
		/* Unlocked meanwhile: drop it only if still unused. */
		if (!v->used || v->tier != HOST || v->dirty || !vc_page_claim(v, 0, VC_ST_HOST))
			return 0;
		page_drop(c, v);
		c->st.evictions[HOST]++;
		return 0;
	}
	if (!vc_page_claim(v, VC_ST_BUSY, 0))
		return -EAGAIN; /* a lock-free reader pinned it since */
	uint32_t key = page_id(c, v), g;
	if (vc_ls_append(c->ls, 1, &key, ++c->clock, &g) < 0) {
		st_clear(v, VC_ST_BUSY);
		return -EAGAIN; /* not reached: gpu_room made room under this hold */
	}
	pol_remove(c, v);
	uint64_t src = slot_addr(c, v);
	pthread_mutex_unlock(&c->mu);
	r = move1(c, VC_MOVE_COPY, src, vc_ls_addr(c->ls, g));
	pthread_mutex_lock(&c->mu);
	if (r < 0) {
		vc_ls_orphan(c->ls, g);
		pol_insert(c, v, HOST);
		st_clear(v, VC_ST_BUSY);
		wake(c);
		return r;
	}
	vc_tier_free(c->host, v->slot);
	v->tier = GPU; /* at slot g: vc_ls_append recorded it */
	/* Published last (ours till now: BUSY, no pins). */
	atomic_store_explicit(&v->st, VC_ST_GPU, memory_order_release);
	pol_insert(c, v, GPU);
	c->st.evictions[HOST]++;
	c->st.h2d += c->page_size;
	wake(c);
	return 0;
}

/* A free host slot, evicting as needed; may sleep. */
static int host_slot_get(struct vc_cache *c, uint32_t *s)
{
	for (;;) {
		if (vc_tier_alloc(c->host, s) == 0)
			return 0;
		int r = evict_host_one(c);
		if (r == -EAGAIN)
			wait_cv(c);
		else if (r < 0)
			return r;
	}
}

/* Brings a GPU-tier page (not busy) to the host tier. */
static int promote(struct vc_cache *c, struct vc_page *p)
{
	uint32_t s = 0;
	struct vc_page *v = NULL;
	if (!vc_page_claim(p, VC_ST_BUSY, 0))
		return -EAGAIN; /* a reader is copying it out in place */
	if (vc_tier_alloc(c->host, &s) < 0) {
		v = host_victim(c);
		if (!v || !vc_page_claim(v, VC_ST_BUSY, 0)) {
			st_clear(p, VC_ST_BUSY);
			return -EAGAIN;
		}
		pol_remove(c, v);
	}
	pol_remove(c, p);
	uint64_t gaddr = slot_addr(c, p);
	uint64_t haddr = v ? slot_addr(c, v) : vc_tier_addr(c->host, s);
	pthread_mutex_unlock(&c->mu);
	int r = v ? move1(c, VC_MOVE_SWAP, haddr, gaddr) : move1(c, VC_MOVE_COPY, gaddr, haddr);
	pthread_mutex_lock(&c->mu);
	if (r < 0) {
		/* The device failed mid-move: the slots' contents are unknown, so
		 * neither page can be trusted. Dirty data in them is lost. */
		if (!v)
			vc_tier_free(c->host, s);
		page_drop(c, p);
		if (v)
			page_drop(c, v);
		wake(c);
		return r;
	}
	if (v) {
		/* The host victim took p's GPU slot: it owns it from now, with
		 * a fresh stamp (its place in the log is p's, an approximation
		 * that cleaning corrects: it orders by stamp). */
		uint32_t hs = v->slot;
		v->tier = GPU;
		vc_ls_rekey(c->ls, gpu_slot(c, p), page_id(c, v), ++c->clock);
		/* Published last: a reader that pins it reads where[] next. */
		atomic_store_explicit(&v->st, VC_ST_GPU, memory_order_release);
		pol_insert(c, v, GPU);
		c->st.evictions[HOST]++;
		c->st.h2d += c->page_size;
		s = hs;
	} else {
		vc_ls_orphan(c->ls, gpu_slot(c, p));
	}
	p->tier = HOST;
	p->slot = s;
	pol_insert(c, p, HOST);
	atomic_store_explicit(&p->st, VC_ST_HOST, memory_order_release); /* not busy */
	c->st.d2h += c->page_size;
	wake(c);
	return 0;
}

/* ---- page access ------------------------------------------------------- */

enum acq_mode {
	ACQ_READ,       /* shared pin, data loaded */
	ACQ_WRITE,      /* exclusive, data loaded (partial overwrite) */
	ACQ_WRITE_FULL, /* exclusive, old data not needed */
};

/* Pins (READ) or owns (WRITE*) a host page that is not busy or owned,
 * under c->mu. A writer needs it unpinned: false if a lock-free reader
 * holds a pin (wait and retry). */
static bool grab(struct vc_page *p, int mode)
{
	if (mode != ACQ_READ)
		return vc_page_claim(p, VC_ST_EXCL, 0);
	atomic_fetch_add(&p->st, VC_ST_PIN1); /* BUSY and EXCL change only under c->mu */
	return true;
}

/* The calling thread's state for c (tstate: its policy-update queue,
 * bounce pages and hit counters), taken on its first call; NULL when every
 * slot is taken (then hits take the lock). */
static struct tstate *tstate(struct vc_cache *c)
{
	if (!c->tls_ok)
		return NULL;
	struct tstate *t = pthread_getspecific(c->tls);
	if (t)
		return t;
	for (uint32_t i = 0; i < MAX_QUEUE_THREADS && !t; i++) {
		bool f = false;
		if (!atomic_load_explicit(&c->ts[i].used, memory_order_relaxed) &&
		    atomic_compare_exchange_strong(&c->ts[i].used, &f, true))
			t = &c->ts[i];
	}
	if (!t)
		return NULL;
	t->l = vc_opq_attach(c->opq); /* NULL: hits take the lock */
	pthread_setspecific(c->tls, t);
	return t;
}

/* The key's destructor, at thread exit: the slot and queue go back. */
static void tstate_release(void *arg)
{
	struct tstate *t = arg;
	if (t->l)
		vc_opq_detach(t->l);
	t->l = NULL;
	atomic_store(&t->used, false);
}

/* Pins page pno if it is settled in the host tier, or with `gpu` in the
 * GPU tier, and free to read, without the lock and without recording a
 * hit; NULL otherwise. *tier: where it is. Lock-free: an index lookup and
 * one compare-and-swap. */
static struct vc_page *pin_fast(struct vc_cache *c, uint64_t pno, bool gpu, int *tier)
{
	struct vc_page *p = vc_index_peek(&c->ix, pno);
	if (!p)
		return NULL;
	const uint64_t settled = VC_ST_HOST | (gpu ? VC_ST_GPU : 0);
	uint64_t s = st_of(p);
	do {
		if (!(s & settled) || (s & (VC_ST_BUSY | VC_ST_EXCL)) ||
		    (s & VC_ST_PINS) == VC_ST_PINS)
			return NULL;
	} while (!atomic_compare_exchange_weak_explicit(&p->st, &s, s + VC_ST_PIN1,
							memory_order_acq_rel, memory_order_acquire));
	/* Pinned: the entry cannot be freed or reused now, but it may have
	 * been reused for another page between the lookup and the pin. */
	if (p->pno != pno) {
		unpin(c, p);
		return NULL;
	}
	*tier = s & VC_ST_GPU ? GPU : HOST;
	return p;
}

/* Records a lock-free hit in `tier` on pinned page p. */
static void note_hit_fast(struct vc_cache *c, struct tstate *t, struct vc_page *p, int tier)
{
	if (t && t->l) {
		vc_opq_hit(t->l, &p->qn, vc_opq_gen(&p->qn)); /* stable while pinned */
		atomic_fetch_add_explicit(&t->hits[tier], 1, memory_order_relaxed);
	} else {
		pthread_mutex_lock(&c->mu);
		pol_hit(c, p);
		c->st.hits[tier]++;
		pthread_mutex_unlock(&c->mu);
	}
}

/* Bounce page i of thread state t: where GPU-tier pages it reads in place
 * land. Only threads with idx < c->bounce_threads have them. */
static uint32_t bounce_slot(const struct vc_cache *c, const struct tstate *t, uint32_t i)
{
	return t->idx * c->bounce_per + i;
}

/* Returns page pno in the host tier, pinned (READ) or owned (WRITE*).
 * `count`: record the access in the hit/miss statistics. `serve`: a READ
 * may return a pinned GPU-tier page, which the caller reads in place. */
static int acquire(struct vc_cache *c, uint64_t pno, int mode, bool count, bool serve,
		   struct vc_page **out)
{
	int r = 0;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		struct vc_page *p = vc_index_find(&c->ix, pno);
		if (p) {
			uint64_t st = st_of(p);
			if ((st & (VC_ST_BUSY | VC_ST_EXCL)) || (mode != ACQ_READ && (st & VC_ST_PINS))) {
				wait_cv(c);
				continue;
			}
			if (p->tier == HOST) {
				if (!grab(p, mode)) {
					wait_cv(c);
					continue;
				}
				pol_hit(c, p);
				c->st.hits[HOST] += count;
				*out = p;
				break;
			}
			if (mode == ACQ_WRITE_FULL) {
				/* Overwritten whole: its GPU copy need not travel. */
				if (!vc_page_claim(p, 0, VC_ST_GPU)) { /* read in place now */
					wait_cv(c);
					continue;
				}
				c->st.hits[GPU] += count;
				count = false;
				page_drop(c, p);
				continue;
			}
			if (mode == ACQ_READ && serve) {
				/* Served where it is: the caller copies it out over
				 * PCIe; promotion is not a cost of every hit. */
				grab(p, ACQ_READ);
				pol_hit(c, p);
				c->st.hits[GPU] += count;
				*out = p;
				break;
			}
			r = promote(c, p);
			if (r == -EAGAIN) {
				wait_cv(c);
				continue;
			}
			if (r < 0)
				break;
			c->st.hits[GPU] += count;
			count = false;
			if (!grab(p, mode)) { /* a lock-free reader came first */
				wait_cv(c);
				continue;
			}
			*out = p;
			break;
		}
		uint32_t s;
		r = host_slot_get(c, &s);
		if (r < 0)
			break;
		if (vc_index_find(&c->ix, pno)) { /* loaded by another thread meanwhile */
			vc_tier_free(c->host, s);
			continue;
		}
		p = vc_index_insert(&c->ix, pno);
		p->tier = HOST;
		p->slot = s;
		c->st.misses += count;
		if (mode != ACQ_WRITE_FULL) {
			atomic_store_explicit(&p->st, VC_ST_BUSY, memory_order_release);
			pthread_mutex_unlock(&c->mu);
			r = load_page(c, pno, host_data(c, p));
			pthread_mutex_lock(&c->mu);
			if (r < 0) {
				page_drop(c, p);
				wake(c);
				break;
			}
			c->st.rd_bytes += page_len(c, pno);
		}
		pol_insert(c, p, HOST);
		/* Ours alone until now: nobody pins a BUSY or HOST-less page. */
		atomic_store_explicit(&p->st, VC_ST_HOST | (mode == ACQ_READ ? VC_ST_PIN1 : VC_ST_EXCL),
				      memory_order_release);
		wake(c);
		*out = p;
		break;
	}
	pthread_mutex_unlock(&c->mu);
	return r;
}

/* Ends a write's ownership. `written`: bytes the caller wrote through to
 * the backing store, counted here so a write takes the lock once per page. */
static void release_write(struct vc_cache *c, struct vc_page *p, bool dirtied, uint64_t written)
{
	pthread_mutex_lock(&c->mu);
	c->st.wr_bytes += written;
	p->version++;
	if (dirtied && !p->dirty) {
		p->dirty = 1;
		dirty_add(c, p, 1);
	}
	st_clear(p, VC_ST_EXCL);
	wake(c);
	pthread_mutex_unlock(&c->mu);
}

/* ---- public API ---------------------------------------------------------- */

void vc_config_init(struct vc_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->size = sizeof *cfg;
	cfg->version = VC_CONFIG_VERSION;
	cfg->backing_fd = -1;
	cfg->page_size = 4096;
	cfg->host_bytes = 64ull << 20;
	cfg->gpu_bytes = 256ull << 20;
	cfg->device = VC_DEVICE_AUTO;
	cfg->write_mode = VC_WRITE_THROUGH;
	cfg->batch_pages = 256;
	cfg->batch_timeout_us = 50;
	cfg->gc_policy = VC_GC_COST_BENEFIT;
	cfg->gc_segments = 4;
	cfg->gc_watermark = 0.02;
	cfg->gc_fragmentation = 0.25;
	cfg->early_release = 0.10;
	cfg->gpu_hits = VC_GPU_HITS_SERVE;
}

/* The GPU log's segment size: the configured one, or 4 MiB halved until
 * the tier has 16 segments (not below one page). */
static uint32_t seg_bytes(const struct vc_config *cfg)
{
	if (cfg->seg_bytes)
		return cfg->seg_bytes;
	uint32_t sb = 4u << 20;
	while (sb > cfg->page_size && cfg->gpu_bytes / sb < 16)
		sb >>= 1;
	return sb < cfg->page_size ? cfg->page_size : sb;
}

/* Reads the caller's config, which may be older (smaller) than ours: the
 * fields it lacks keep their defaults. A newer caller's extra fields must
 * be zero, so nothing it asked for is silently ignored. */
static int config_read(const struct vc_config *in, struct vc_config *cfg)
{
	vc_config_init(cfg);
	if (!in)
		return vc_err(-EINVAL, "config is NULL");
	size_t min = offsetof(struct vc_config, backing_latency_ns) + sizeof in->backing_latency_ns;
	if (in->size < min || in->version == 0 || in->version > VC_CONFIG_VERSION)
		return vc_err(-VC_ECONFIG,
			      "config size %u / version %u not understood (this library: size %zu, "
			      "version %d); start from vc_config_init()",
			      in->size, in->version, sizeof *cfg, VC_CONFIG_VERSION);
	for (size_t i = sizeof *cfg; i < in->size; i++)
		if (((const unsigned char *)in)[i])
			return vc_err(-VC_ECONFIG, "config has fields this library does not know");
	memcpy(cfg, in, in->size < sizeof *cfg ? in->size : sizeof *cfg);
	cfg->size = sizeof *cfg;
	return 0;
}

static int config_check(const struct vc_config *cfg)
{
	uint32_t ps = cfg->page_size;
	if (ps < 512 || ps > (2u << 20) || (ps & (ps - 1)))
		return vc_err(-EINVAL, "page size %u: must be a power of two from 512 B to 2 MiB", ps);
	if (cfg->host_bytes / ps < MIN_HOST_PAGES)
		return vc_err(-EINVAL, "host tier of %llu bytes holds fewer than %d pages of %u bytes",
			      (unsigned long long)cfg->host_bytes, MIN_HOST_PAGES, ps);
	if (cfg->batch_pages == 0 || cfg->batch_pages > 65536)
		return vc_err(-EINVAL, "batch size %u pages: must be 1 to 65536", cfg->batch_pages);
	if (cfg->write_mode != VC_WRITE_THROUGH && cfg->write_mode != VC_WRITE_BACK)
		return vc_err(-EINVAL, "unknown write mode %d", cfg->write_mode);
	if (!cfg->backing_path && cfg->backing_fd < 0)
		return vc_err(-EINVAL, "no backing store: set backing_path or backing_fd");
	if (!vc_policy_find(cfg->policy))
		return vc_err(-EINVAL, "unknown replacement policy \"%s\"", cfg->policy);
	uint32_t sb = seg_bytes(cfg);
	if (cfg->gpu_bytes && (sb < ps || (sb & (sb - 1)) || cfg->gpu_bytes / sb < 2))
		return vc_err(-EINVAL, "GPU tier of %llu bytes in segments of %u bytes: segments must "
				       "be a power of two >= the page size, and the tier must hold "
				       "at least 2", (unsigned long long)cfg->gpu_bytes, sb);
	if ((cfg->host_bytes + cfg->gpu_bytes) / ps >= UINT32_MAX)
		return vc_err(-EINVAL, "tiers of %llu pages: at most 2^32 - 2 pages in all",
			      (unsigned long long)((cfg->host_bytes + cfg->gpu_bytes) / ps));
	if (cfg->gpu_hits != VC_GPU_HITS_SERVE && cfg->gpu_hits != VC_GPU_HITS_SWAP)
		return vc_err(-EINVAL, "unknown GPU-hit mode %d", cfg->gpu_hits);
	if (cfg->gc_policy < VC_GC_OLDEST || cfg->gc_policy > VC_GC_OFF)
		return vc_err(-EINVAL, "unknown GC policy %d", cfg->gc_policy);
	if (cfg->gc_segments == 0 || cfg->gc_segments > 64)
		return vc_err(-EINVAL, "GC step of %u segments: must be 1 to 64", cfg->gc_segments);
	if (!(cfg->gc_watermark >= 0 && cfg->gc_watermark < 1) ||
	    !(cfg->gc_fragmentation >= 0 && cfg->gc_fragmentation <= 1) ||
	    !(cfg->early_release >= 0 && cfg->early_release <= 1))
		return vc_err(-EINVAL, "GC watermark must be in [0, 1), fragmentation threshold and "
				       "early-release share in [0, 1]");
	return 0;
}

static void vol_free(struct vc_volume *v)
{
	vc_backing_close(v->bk);
	free(v);
}

/* Opens a backing store as volume id (a free slot) and publishes it. */
static int vol_open(struct vc_cache *c, uint32_t id, const char *path, int fd, uint32_t flags)
{
	struct vc_volume *v = calloc(1, sizeof *v);
	if (!v)
		return vc_err(-ENOMEM, "out of memory");
	*v = (struct vc_volume){ .c = c, .id = id, .base = (uint64_t)id << VOL_SHIFT,
				 .readonly = flags & VC_OPEN_READONLY };
	int r = vc_backing_open(path, path ? -1 : fd, v->readonly, c->latency_ns, &v->bk);
	if (r < 0) {
		free(v);
		return r;
	}
	v->size = vc_backing_size(v->bk);
	if (v->size >> c->pshift > PAGE_MASK) {
		unsigned long long sz = v->size;
		vol_free(v);
		return vc_err(-EFBIG, "backing store of %llu bytes: more than 2^%d pages", sz,
			      VOL_SHIFT);
	}
	pthread_mutex_lock(&c->mu);
	c->vols[id] = v;
	pthread_mutex_unlock(&c->mu);
	return 0;
}

int vc_open(const struct vc_config *in, vc_cache **out)
{
	struct vc_config cfg;
	int r = config_read(in, &cfg);
	if (r == 0)
		r = config_check(&cfg);
	if (r < 0)
		return r;
	if (!out)
		return vc_err(-EINVAL, "out is NULL");
	struct vc_cache *c = calloc(1, sizeof *c);
	if (!c)
		return vc_err(-ENOMEM, "out of memory");
	pthread_mutex_init(&c->mu, NULL);
	vc_cond_init_monotonic(&c->cv);
	c->page_size = cfg.page_size;
	c->pshift = (unsigned)__builtin_ctz(cfg.page_size);
	c->write_mode = cfg.write_mode;
	c->latency_ns = cfg.backing_latency_ns;
	c->batch_pages = cfg.batch_pages;
	c->gc_policy = cfg.gc_policy;
	c->gc_segments = cfg.gc_segments;
	c->gc_frag = cfg.gc_fragmentation;
	uint64_t host_pages = cfg.host_bytes >> c->pshift;
	uint64_t gpu_pages = cfg.gpu_bytes >> c->pshift;

	r = vol_open(c, 0, cfg.backing_path, cfg.backing_path ? -1 : cfg.backing_fd, cfg.flags);
	if (r == 0)
		r = vc_device_open(cfg.device, cfg.device_ordinal, &c->dev);
	if (r == 0)
		r = vc_tier_open(c->dev, HOST, host_pages, c->page_size, &c->host);
	if (r == 0 && cfg.gpu_bytes) {
		struct vc_ls_config lc = { .page_size = c->page_size,
					   .seg_bytes = seg_bytes(&cfg),
					   .total_bytes = cfg.gpu_bytes,
					   .free_watermark = cfg.gc_watermark,
					   .early_release = cfg.early_release,
					   /* page ids: the pool, sized below */
					   .owners = (uint32_t)(host_pages + gpu_pages) };
		r = vc_ls_open(c->dev, &lc, &c->ls);
		if (r == 0)
			gpu_pages = vc_ls_capacity(c->ls);
	}
	if (r == 0)
		r = vc_tier_open(c->dev, HOST, WB_STAGING_PAGES, c->page_size, &c->stage_wb);
	if (r == 0)
		r = vc_tier_open(c->dev, HOST, cfg.batch_pages, c->page_size, &c->stage_bulk);
	if (r == 0)
		r = vc_batcher_create(c->dev, c->page_size, cfg.batch_pages, cfg.batch_timeout_us,
				      &c->bat);
	c->serve = cfg.gpu_hits == VC_GPU_HITS_SERVE && c->ls;
	if (r == 0 && c->serve) {
		c->bounce_per = BOUNCE_BYTES / c->page_size ? BOUNCE_BYTES / c->page_size : 1;
		uint64_t threads = BOUNCE_TOTAL / ((uint64_t)c->bounce_per * c->page_size);
		c->bounce_threads = threads < 16 ? 16 : threads > MAX_QUEUE_THREADS ? MAX_QUEUE_THREADS
										 : (uint32_t)threads;
		r = vc_tier_open(c->dev, HOST, (uint64_t)c->bounce_threads * c->bounce_per,
				 c->page_size, &c->bounce);
	}
	if (r == 0 && c->ls) {
		uint64_t held = (uint64_t)c->gc_segments * vc_ls_slots_per_seg(c->ls);
		if (!(c->gc_held = malloc(held * sizeof *c->gc_held)))
			r = vc_err(-ENOMEM, "out of memory");
	}
	for (uint32_t i = 0; i < MAX_QUEUE_THREADS; i++)
		c->ts[i].idx = i;
	if (r == 0)
		r = vc_index_init(&c->ix, host_pages + gpu_pages);
	if (r == 0) {
		uint64_t cap[VC_TIER_COUNT] = { host_pages, gpu_pages };
		const struct vc_policy_ops *ops = vc_policy_find(cfg.policy);
		c->pol = ops->create(cap, VC_TIER_COUNT);
		if (!c->pol)
			r = vc_err(-ENOMEM, "out of memory for the policy");
		if (r == 0)
			r = vc_opq_create(ops, c->pol, MAX_QUEUE_THREADS + 1, 0, &c->opq);
		if (r == 0 && !(c->lk = vc_opq_attach(c->opq)))
			r = vc_err(-ENOMEM, "out of memory for the policy queues");
		if (r == 0)
			c->tls_ok = pthread_key_create(&c->tls, tstate_release) == 0;
	}
	if (r < 0) {
		c->write_mode = VC_WRITE_THROUGH; /* nothing to flush */
		vc_close(c);
		return r;
	}
	*out = c;
	return 0;
}

int vc_close(vc_cache *c)
{
	if (!c)
		return 0;
	int r = 0;
	if (c->lk && c->ndirty)
		r = vc_flush(c);
	/* After the key's deletion no thread's handle is detached at its
	 * exit: vc_opq_destroy frees them all. */
	if (c->tls_ok)
		pthread_key_delete(c->tls);
	if (c->opq)
		vc_opq_destroy(c->opq);
	if (c->pol)
		c->pol->ops->destroy(c->pol);
	if (c->ix.pool)
		vc_index_fini(&c->ix);
	vc_batcher_destroy(c->bat);
	vc_tier_close(c->bounce);
	free(c->gc_held);
	vc_tier_close(c->stage_bulk);
	vc_tier_close(c->stage_wb);
	vc_ls_close(c->ls);
	vc_tier_close(c->host);
	vc_device_close(c->dev);
	for (uint32_t i = 0; i < VC_VOLUMES_MAX; i++)
		if (c->vols[i])
			vol_free(c->vols[i]);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
	return r;
}

uint64_t vc_size(const vc_cache *c)
{
	return c->vols[0]->size;
}

vc_volume *vc_volume_default(vc_cache *c)
{
	return c ? c->vols[0] : NULL;
}

uint64_t vc_volume_size(const vc_volume *v)
{
	return v->size;
}

int vc_volume_open(vc_cache *c, const char *path, int fd, uint32_t flags, vc_volume **out)
{
	if (!c || !out || (!path && fd < 0))
		return vc_err(-EINVAL, "vc_volume_open: NULL argument or no backing store");
	if (flags & ~(uint32_t)VC_OPEN_READONLY)
		return vc_err(-EINVAL, "vc_volume_open: unknown flags %#x", flags);
	pthread_mutex_lock(&c->mu);
	uint32_t id = 1;
	while (id < VC_VOLUMES_MAX && c->vols[id])
		id++;
	pthread_mutex_unlock(&c->mu);
	/* Opening unlocked is safe: volume calls may not race with each other's
	 * open and close (header), so nobody else takes this slot meanwhile. */
	if (id == VC_VOLUMES_MAX)
		return vc_err(-EMFILE, "a cache holds at most %d volumes", VC_VOLUMES_MAX);
	int r = vol_open(c, id, path, fd, flags);
	if (r == 0)
		*out = c->vols[id];
	return r;
}

uint32_t vc_page_size(const vc_cache *c)
{
	return c->page_size;
}

const char *vc_device_name(const vc_cache *c)
{
	return c->dev->ops->name;
}

const char *vc_device_desc(const vc_cache *c)
{
	return c->dev->desc;
}

/* Splits a byte range at page boundaries: the piece at pos, of at most
 * `left` bytes, lies in page *pno from offset *in; returns its length. */
static size_t piece(const struct vc_volume *v, uint64_t pos, size_t left, uint64_t *pno,
		    uint32_t *in)
{
	const struct vc_cache *c = v->c;
	*pno = v->base + (pos >> c->pshift);
	*in = (uint32_t)(pos & (c->page_size - 1));
	return c->page_size - *in < left ? c->page_size - *in : left;
}

/* A run of consecutive pages read without the lock: each pinned if it is
 * settled in the host tier, or in the GPU tier while the thread has bounce
 * pages left; the GPU-tier pages of the run come back in one device
 * submission, straight into the bounce pages, and stay where they are.
 * Stops at the first page that cannot be pinned so (0: the first). Pins
 * never wait, so holding a run of them is safe. Bytes read, or -errno. */
#define RUN_MAX VC_READ_HIT_PAGES
static ssize_t read_run(struct vc_volume *v, struct tstate *t, char *buf, size_t len, uint64_t off)
{
	struct vc_cache *c = v->c;
	struct vc_page *pin[RUN_MAX];
	struct vc_move mv[RUN_MAX];
	struct vc_ticket tk[RUN_MAX];
	uint32_t in[RUN_MAX], n = 0, ng = 0;
	int gi[RUN_MAX];
	size_t k[RUN_MAX], done = 0;
	const uint32_t gmax = c->serve && t && t->idx < c->bounce_threads ? c->bounce_per : 0;
	while (done < len && n < RUN_MAX) {
		uint64_t pno;
		int tier;
		k[n] = piece(v, off + done, len - done, &pno, &in[n]);
		struct vc_page *p = pin_fast(c, pno, ng < gmax, &tier);
		if (!p)
			break;
		gi[n] = -1;
		if (tier == GPU) {
			mv[ng] = (struct vc_move){ .src = slot_addr_gpu(c, p),
						   .dst = vc_tier_addr(c->bounce, bounce_slot(c, t, ng)),
						   .op = VC_MOVE_COPY };
			gi[n] = (int)ng++;
		}
		pin[n] = p;
		done += k[n++];
	}
	int r = 0;
	if (ng) {
		r = vc_batcher_add_n(c->bat, mv, ng, tk);
		if (r == 0)
			r = vc_batcher_wait_n(c->bat, tk, ng);
		atomic_fetch_add_explicit(&t->d2h, (uint64_t)ng * c->page_size, memory_order_relaxed);
	}
	size_t pos = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (r == 0) {
			const unsigned char *src =
				gi[i] < 0 ? host_data(c, pin[i])
					  : vc_tier_host(c->bounce, bounce_slot(c, t, (uint32_t)gi[i]));
			memcpy(buf + pos, src + in[i], k[i]);
			note_hit_fast(c, t, pin[i], gi[i] < 0 ? HOST : GPU);
		}
		pos += k[i];
		unpin(c, pin[i]);
	}
	return r < 0 ? r : (ssize_t)done;
}

ssize_t vc_volume_read(vc_volume *v, void *buf, size_t len, uint64_t off)
{
	if (!v || (!buf && len))
		return vc_err(-EINVAL, "vc_read: NULL argument");
	struct vc_cache *c = v->c;
	if (off >= v->size)
		return 0;
	if (len > v->size - off)
		len = (size_t)(v->size - off);
	struct tstate *t = tstate(c);
	const bool serve = c->serve && t && t->idx < c->bounce_threads;
	size_t done = 0;
	while (done < len) {
		ssize_t got = read_run(v, t, (char *)buf + done, len - done, off + done);
		if (got < 0)
			return got;
		if (got > 0) {
			done += (size_t)got;
			continue;
		}
		/* The slow path, one page, holding nothing else. */
		uint64_t pno;
		uint32_t in;
		size_t k = piece(v, off + done, len - done, &pno, &in);
		struct vc_page *p;
		int r = acquire(c, pno, ACQ_READ, true, serve, &p);
		if (r < 0)
			return r;
		const unsigned char *src = NULL;
		if (p->tier == HOST) { /* stable while pinned */
			src = host_data(c, p);
		} else {
			uint32_t b = bounce_slot(c, t, 0);
			r = move1(c, VC_MOVE_COPY, slot_addr_gpu(c, p), vc_tier_addr(c->bounce, b));
			atomic_fetch_add_explicit(&t->d2h, c->page_size, memory_order_relaxed);
			src = vc_tier_host(c->bounce, b);
		}
		if (r == 0)
			memcpy((char *)buf + done, src + in, k);
		unpin(c, p);
		if (r < 0)
			return r;
		done += k;
	}
	return (ssize_t)len;
}

ssize_t vc_volume_write(vc_volume *v, const void *buf, size_t len, uint64_t off)
{
	if (!v || (!buf && len))
		return vc_err(-EINVAL, "vc_write: NULL argument");
	struct vc_cache *c = v->c;
	if (v->readonly)
		return vc_err(-EROFS, "cache was opened read-only");
	if (off > v->size || len > v->size - off)
		return vc_err(-ENOSPC, "write of %zu bytes at %llu passes the end of the backing store "
				       "(%llu bytes)", len, (unsigned long long)off,
			      (unsigned long long)v->size);
	bool wb = c->write_mode == VC_WRITE_BACK;
	size_t done = 0;
	while (done < len) {
		uint64_t pos = off + done, pno;
		uint32_t in;
		size_t k = piece(v, pos, len - done, &pno, &in);
		int mode = (in == 0 && k == page_len(c, pno)) ? ACQ_WRITE_FULL : ACQ_WRITE;
		struct vc_page *p;
		int r = acquire(c, pno, mode, true, false, &p);
		if (r < 0)
			return r;
		unsigned char *d = host_data(c, p);
		memcpy(d + in, (const char *)buf + done, k);
		if (mode == ACQ_WRITE_FULL && k < c->page_size)
			memset(d + k, 0, c->page_size - k);
		if (!wb) {
			r = vc_backing_write(v->bk, d + in, k, pos);
			if (r < 0) {
				/* The cache must not hold what the store refused. */
				pthread_mutex_lock(&c->mu);
				page_drop(c, p); /* ours (EXCL): nobody else holds it */
				wake(c);
				pthread_mutex_unlock(&c->mu);
				return r;
			}
		}
		release_write(c, p, wb, wb ? 0 : k);
		done += k;
	}
	return (ssize_t)len;
}

/* A round of flush or GPU prefetch: up to batch_pages pages, each with a
 * backing request and, for pages that pass through the GPU tier, a bulk
 * staging page. */
struct bulk {
	struct bulk_job {
		struct vc_page *p;
		uint32_t stage;
		bool staged; /* holds a staging page */
	} *jobs;
	struct vc_bio *bios;
	struct vc_move *moves;
	struct vc_ticket *tickets;
	unsigned n;
};

static void bulk_fini(struct bulk *b)
{
	free(b->jobs);
	free(b->bios);
	free(b->moves);
	free(b->tickets);
}

static int bulk_init(struct vc_cache *c, struct bulk *b)
{
	b->n = 0;
	b->jobs = calloc(c->batch_pages, sizeof *b->jobs);
	b->bios = calloc(c->batch_pages, sizeof *b->bios);
	b->moves = calloc(c->batch_pages, sizeof *b->moves);
	b->tickets = calloc(c->batch_pages, sizeof *b->tickets);
	if (b->jobs && b->bios && b->moves && b->tickets)
		return 0;
	bulk_fini(b);
	return vc_err(-ENOMEM, "out of memory");
}

/* Unlocked: moves every staged job whose request has not failed between
 * its GPU slot and its staging page (toward the staging page when
 * to_stage), as one batch. On a device failure every such request fails. */
static int bulk_move(struct vc_cache *c, struct bulk *b, bool to_stage)
{
	uint32_t m = 0;
	for (unsigned i = 0; i < b->n; i++) {
		struct bulk_job *j = &b->jobs[i];
		if (!j->staged || b->bios[i].result < 0)
			continue;
		uint64_t slot = slot_addr(c, j->p), st = vc_tier_addr(c->stage_bulk, j->stage);
		b->moves[m++] = (struct vc_move){ .src = to_stage ? slot : st,
						  .dst = to_stage ? st : slot,
						  .op = VC_MOVE_COPY };
	}
	if (m == 0)
		return 0;
	int r = vc_batcher_add_n(c->bat, b->moves, m, b->tickets);
	if (r == 0)
		r = vc_batcher_wait_n(c->bat, b->tickets, m);
	for (unsigned i = 0; r < 0 && i < b->n; i++)
		if (b->jobs[i].staged)
			b->bios[i].result = r;
	return r;
}

/* One round of a volume's flush: writes back up to batch_pages of its dirty
 * pages found at or after *pos in the entry pool, advancing *pos. Host
 * pages are pinned (readers go on, writers wait); GPU pages are busy while
 * they travel through the bulk staging pages. */
static int flush_round(struct vc_volume *v, uint64_t *pos)
{
	struct vc_cache *c = v->c;
	struct bulk b;
	int r = bulk_init(c, &b);
	if (r < 0)
		return r;
	pthread_mutex_lock(&c->mu);
	while (*pos < c->ix.npool && b.n < c->batch_pages) {
		struct vc_page *p = &c->ix.pool[*pos];
		if (!p->used || !p->dirty || vol_of(c, p->pno) != v) {
			(*pos)++;
			continue;
		}
		if (st_of(p) & (VC_ST_BUSY | VC_ST_EXCL)) {
			if (b.n)
				break; /* write what we hold before sleeping */
			wait_cv(c);
			continue;
		}
		struct bulk_job *j = &b.jobs[b.n];
		struct vc_bio *io = &b.bios[b.n];
		j->p = p;
		if (p->tier == GPU) {
			if (!vc_page_claim(p, VC_ST_BUSY, 0)) { /* read in place now */
				if (b.n)
					break;
				wait_cv(c);
				continue;
			}
			if (vc_tier_alloc(c->stage_bulk, &j->stage) < 0) {
				st_clear(p, VC_ST_BUSY);
				if (b.n)
					break;
				wait_cv(c); /* another flush or prefetch holds them */
				continue;
			}
			j->staged = true;
			io->buf = vc_tier_host(c->stage_bulk, j->stage);
		} else {
			atomic_fetch_add(&p->st, VC_ST_PIN1); /* readers go on, writers wait */
			io->buf = host_data(c, p);
		}
		io->off = page_off(c, p->pno);
		io->len = page_len(c, p->pno);
		io->write = 1;
		b.n++;
		(*pos)++;
	}
	pthread_mutex_unlock(&c->mu);

	r = bulk_move(c, &b, true);
	if (r == 0 && b.n)
		r = vc_backing_submit(v->bk, b.bios, b.n);

	pthread_mutex_lock(&c->mu);
	for (unsigned i = 0; i < b.n; i++) {
		struct vc_page *p = b.jobs[i].p;
		if (b.jobs[i].staged) {
			vc_tier_free(c->stage_bulk, b.jobs[i].stage);
			c->st.d2h += c->page_size;
			st_clear(p, VC_ST_BUSY);
		} else {
			atomic_fetch_sub(&p->st, VC_ST_PIN1);
		}
		if (b.bios[i].result == 0)
			note_written(c, p, b.bios[i].len);
	}
	wake(c);
	pthread_mutex_unlock(&c->mu);
	bulk_fini(&b);
	return r;
}

/* Cost: one pass over the entry pool per volume with dirty pages, plus
 * the writes and one sync. */
int vc_volume_flush(vc_volume *v)
{
	if (!v)
		return vc_err(-EINVAL, "vc_flush: NULL cache");
	struct vc_cache *c = v->c;
	pthread_mutex_lock(&c->mu);
	bool dirty = v->ndirty > 0;
	pthread_mutex_unlock(&c->mu);
	if (dirty && c->write_mode == VC_WRITE_BACK) {
		uint64_t pos = 0;
		while (pos < c->ix.npool) {
			int r = flush_round(v, &pos);
			if (r < 0)
				return r;
		}
	}
	return v->readonly ? 0 : vc_backing_sync(v->bk);
}

int vc_flush(vc_cache *c)
{
	if (!c)
		return vc_err(-EINVAL, "vc_flush: NULL cache");
	int r = 0;
	for (uint32_t i = 0; i < VC_VOLUMES_MAX && r == 0; i++) {
		pthread_mutex_lock(&c->mu);
		struct vc_volume *v = c->vols[i];
		pthread_mutex_unlock(&c->mu);
		if (v)
			r = vc_volume_flush(v);
	}
	return r;
}

/* Drops page pno if cached (under c->mu; may sleep and write back). */
static int drop_page(struct vc_cache *c, uint64_t pno, bool discard)
{
	for (;;) {
		struct vc_page *p = vc_index_find(&c->ix, pno);
		if (!p)
			return 0;
		if (st_of(p) & (VC_ST_BUSY | VC_ST_PINS | VC_ST_EXCL)) {
			wait_cv(c);
			continue;
		}
		if (p->dirty && !discard) {
			int r = writeback_page(c, p);
			if (r == -EAGAIN)
				wait_cv(c);
			else if (r < 0)
				return r;
			continue;
		}
		if (!vc_page_claim(p, 0, VC_ST_HOST | VC_ST_GPU)) { /* a lock-free reader pinned it */
			wait_cv(c);
			continue;
		}
		page_drop(c, p);
		return 0;
	}
}

int vc_volume_drop(vc_volume *v, uint64_t off, uint64_t len, unsigned flags)
{
	if (!v)
		return vc_err(-EINVAL, "vc_drop: NULL cache");
	struct vc_cache *c = v->c;
	if (off >= v->size)
		return 0;
	if (len == 0 || len > v->size - off)
		len = v->size - off;
	uint64_t p0 = v->base + (off >> c->pshift), p1 = v->base + ((off + len - 1) >> c->pshift);
	bool discard = flags & VC_DROP_DISCARD;
	int r = 0;
	pthread_mutex_lock(&c->mu);
	if (p1 - p0 < c->ix.npool) {
		for (uint64_t pno = p0; pno <= p1 && r == 0; pno++)
			r = drop_page(c, pno, discard);
	} else {
		/* A range wider than the cache: visit the cached pages instead. */
		for (uint64_t i = 0; i < c->ix.npool && r == 0; i++) {
			struct vc_page *p = &c->ix.pool[i];
			if (p->used && p->pno >= p0 && p->pno <= p1)
				r = drop_page(c, p->pno, discard);
		}
	}
	wake(c);
	pthread_mutex_unlock(&c->mu);
	return r;
}

/* Loads uncached pages [*pno, p1] straight into the GPU tier, up to one
 * batch at a time, through the bulk staging pages. */
static int prefetch_gpu_round(struct vc_volume *v, uint64_t *pno, uint64_t p1)
{
	struct vc_cache *c = v->c;
	struct bulk b;
	int r = bulk_init(c, &b);
	if (r < 0)
		return r;
	pthread_mutex_lock(&c->mu);
	while (*pno <= p1 && b.n < c->batch_pages) {
		if (vc_index_find(&c->ix, *pno)) {
			(*pno)++;
			continue;
		}
		uint32_t s, g;
		if (vc_tier_alloc(c->stage_bulk, &s) < 0) {
			if (b.n)
				break;
			wait_cv(c);
			continue;
		}
		/* Room at the log's head. With pages of this round in flight
		 * (busy, unqueued) reclaiming may find nothing but them, so
		 * write those first instead of sleeping on ourselves. */
		r = gpu_room(c, 1, b.n > 0);
		if (r < 0 || vc_index_find(&c->ix, *pno)) { /* or raced while reclaiming */
			vc_tier_free(c->stage_bulk, s);
			if (r == -EAGAIN)
				r = 0;
			if (r < 0 || b.n)
				break;
			continue;
		}
		struct vc_page *p = vc_index_insert(&c->ix, *pno);
		uint32_t key = page_id(c, p);
		if (vc_ls_append(c->ls, 1, &key, ++c->clock, &g) < 0) {
			vc_index_remove(&c->ix, p); /* not reached: room was made under this hold */
			vc_tier_free(c->stage_bulk, s);
			break;
		}
		p->tier = GPU; /* at slot g: vc_ls_append recorded it */
		atomic_store_explicit(&p->st, VC_ST_BUSY, memory_order_release);
		b.jobs[b.n] = (struct bulk_job){ .p = p, .stage = s, .staged = true };
		struct vc_bio *io = &b.bios[b.n];
		io->buf = vc_tier_host(c->stage_bulk, s);
		io->off = page_off(c, *pno);
		io->len = page_len(c, *pno);
		if (io->len < c->page_size)
			memset((char *)io->buf + io->len, 0, c->page_size - io->len);
		b.n++;
		(*pno)++;
	}
	pthread_mutex_unlock(&c->mu);

	int e = b.n ? vc_backing_submit(v->bk, b.bios, b.n) : 0;
	int dev_r = bulk_move(c, &b, false);
	pthread_mutex_lock(&c->mu);
	for (unsigned i = 0; i < b.n; i++) {
		struct vc_page *p = b.jobs[i].p;
		vc_tier_free(c->stage_bulk, b.jobs[i].stage);
		if (b.bios[i].result < 0) {
			page_drop(c, p);
			continue;
		}
		atomic_store_explicit(&p->st, VC_ST_GPU, memory_order_release); /* settled */
		pol_insert(c, p, GPU);
		c->st.h2d += c->page_size;
		c->st.rd_bytes += b.bios[i].len;
	}
	wake(c);
	pthread_mutex_unlock(&c->mu);
	bulk_fini(&b);
	if (r == 0)
		r = e < 0 ? e : dev_r;
	return r;
}

int vc_volume_prefetch(vc_volume *v, uint64_t off, uint64_t len, int tier)
{
	if (!v)
		return vc_err(-EINVAL, "vc_prefetch: NULL cache");
	struct vc_cache *c = v->c;
	if (tier != HOST && tier != GPU)
		return vc_err(-EINVAL, "prefetch: unknown tier %d", tier);
	if (tier == GPU && !c->ls)
		return vc_err(-EINVAL, "prefetch into the GPU tier, but it is disabled (size 0)");
	if (tier == GPU && c->gpu_off)
		return vc_err(-VC_EDEVICE, "prefetch into the GPU tier, but it is off after a device "
					   "failure");
	if (off >= v->size || len == 0)
		return 0;
	if (len > v->size - off)
		len = v->size - off;
	uint64_t p0 = v->base + (off >> c->pshift), p1 = v->base + ((off + len - 1) >> c->pshift);
	if (tier == GPU) {
		while (p0 <= p1) {
			int r = prefetch_gpu_round(v, &p0, p1);
			if (r < 0)
				return r;
		}
		return 0;
	}
	for (uint64_t pno = p0; pno <= p1; pno++) {
		struct vc_page *p;
		int r = acquire(c, pno, ACQ_READ, false, false, &p);
		if (r < 0)
			return r;
		unpin(c, p);
	}
	return 0;
}

int vc_get_stats(vc_cache *c, struct vc_stats *out)
{
	if (!c || !out || out->size < offsetof(struct vc_stats, hits))
		return vc_err(-EINVAL, "vc_get_stats: NULL argument or size not set");
	struct vc_stats st;
	memset(&st, 0, sizeof st);
	st.size = out->size < sizeof st ? out->size : (uint32_t)sizeof st;
	st.version = VC_STATS_VERSION;
	struct vc_batcher_stats bs;
	vc_batcher_get_stats(c->bat, &bs);
	pthread_mutex_lock(&c->mu);
	for (int t = 0; t < VC_TIER_COUNT; t++) {
		st.hits[t] = c->st.hits[t];
		st.evictions[t] = c->st.evictions[t];
		for (uint32_t i = 0; i < MAX_QUEUE_THREADS; i++)
			st.hits[t] += atomic_load_explicit(&c->ts[i].hits[t], memory_order_relaxed);
	}
	st.pages_cached[HOST] = vc_tier_used(c->host);
	st.pages_capacity[HOST] = vc_tier_capacity(c->host);
	if (c->ls) {
		struct vc_ls_stats ls;
		vc_ls_get_stats(c->ls, &ls);
		st.pages_cached[GPU] = ls.slots_live;
		st.pages_capacity[GPU] = vc_ls_capacity(c->ls);
		st.gpu_segments = ls.segs_total;
		st.gpu_segments_free = ls.segs_free;
		st.gpu_fragmentation = ls.fragmentation;
		st.gc_runs = ls.gc_runs;
		st.gc_pages_moved = ls.gc_pages_moved;
		st.gc_ns = c->gc_ns;
		st.gpu_segments_evicted = ls.segs_evicted;
		st.early_releases = ls.early_releases;
	}
	st.misses = c->st.misses;
	st.writebacks = c->st.writebacks;
	st.h2d_bytes = c->st.h2d;
	st.d2h_bytes = c->st.d2h;
	for (uint32_t i = 0; i < MAX_QUEUE_THREADS; i++)
		st.d2h_bytes += atomic_load_explicit(&c->ts[i].d2h, memory_order_relaxed);
	st.backing_read_bytes = c->st.rd_bytes;
	st.backing_write_bytes = c->st.wr_bytes;
	st.dirty_pages = c->ndirty;
	for (uint32_t i = 0; i < VC_VOLUMES_MAX; i++)
		if (c->vols[i])
			st.backing_wait_ns += vc_backing_wait_ns(c->vols[i]->bk);
	pthread_mutex_unlock(&c->mu);
	st.batches = bs.batches;
	st.batch_pages = bs.pages;
	memcpy(st.batch_hist, bs.hist, sizeof st.batch_hist);
	st.batch_wait_ns = bs.wait_ns;
	memcpy(out, &st, st.size);
	return 0;
}

int vc_volume_close(vc_volume *v)
{
	if (!v)
		return 0;
	struct vc_cache *c = v->c;
	if (v->id == 0)
		return vc_err(-EINVAL, "volume 0 is the cache's own: vc_close closes it");
	/* Write back, then forget its pages, so no page names the slot when
	 * it is reused. On failure the volume stays open and nothing is lost. */
	int r = vc_volume_flush(v);
	if (r == 0)
		r = vc_volume_drop(v, 0, 0, 0);
	if (r < 0)
		return r;
	pthread_mutex_lock(&c->mu);
	c->vols[v->id] = NULL;
	pthread_mutex_unlock(&c->mu);
	vol_free(v);
	return 0;
}

/* First dirty page in pages [p0, p1] (one volume's), or UINT64_MAX. Under c->mu.
 * Cost: O(min(p1 - p0 + 1, pool entries)). */
static uint64_t first_dirty(struct vc_cache *c, uint64_t p0, uint64_t p1)
{
	uint64_t best = UINT64_MAX;
	if (p1 - p0 < c->ix.npool) {
		for (uint64_t pno = p0; pno <= p1; pno++) {
			struct vc_page *p = vc_index_find(&c->ix, pno);
			if (p && p->dirty)
				return pno;
		}
		return best;
	}
	for (uint64_t i = 0; i < c->ix.npool; i++) {
		struct vc_page *p = &c->ix.pool[i];
		if (p->used && p->dirty && p->pno >= p0 && p->pno <= p1 && p->pno < best)
			best = p->pno;
	}
	return best;
}

int vc_volume_extent(vc_volume *v, uint64_t off, uint64_t len, uint64_t *ext_len)
{
	if (!v || !ext_len)
		return vc_err(-EINVAL, "vc_volume_extent: NULL argument");
	if (off >= v->size || len == 0)
		return vc_err(-EINVAL, "vc_volume_extent: empty range or offset %llu past the end",
			      (unsigned long long)off);
	struct vc_cache *c = v->c;
	if (len > v->size - off)
		len = v->size - off;
	uint64_t end;
	bool hole;
	int r = vc_backing_extent(v->bk, off, &end, &hole);
	if (r < 0)
		return r;
	if (end > off + len)
		end = off + len;
	if (hole) {
		/* The store's hole may hold dirty cached pages (write-back):
		 * those are data, and end the hole. */
		pthread_mutex_lock(&c->mu);
		uint64_t d = first_dirty(c, v->base + (off >> c->pshift),
					 v->base + ((end - 1) >> c->pshift));
		pthread_mutex_unlock(&c->mu);
		if (d != UINT64_MAX) {
			uint64_t start = (d - v->base) << c->pshift;
			if (start <= off) {
				hole = false;
				start += c->page_size;
			}
			end = start < end ? start : end;
		}
	}
	*ext_len = end - off;
	return hole ? VC_EXTENT_HOLE : VC_EXTENT_DATA;
}

/* Pins every page first, so a read that cannot complete has recorded no
 * hit and copied nothing; pins never wait, so holding many is safe. */
ssize_t vc_volume_read_hit(vc_volume *v, void *buf, size_t len, uint64_t off)
{
	if (!v || (!buf && len))
		return vc_err(-EINVAL, "vc_read: NULL argument");
	struct vc_cache *c = v->c;
	if (off >= v->size || len == 0)
		return vc_volume_read(v, buf, len, off); /* nothing to wait for */
	if (len > v->size - off)
		len = (size_t)(v->size - off);
	struct vc_page *pin[VC_READ_HIT_PAGES];
	struct tstate *t = tstate(c);
	uint64_t p0 = v->base + (off >> c->pshift), p1 = v->base + ((off + len - 1) >> c->pshift);
	if (p1 - p0 >= VC_READ_HIT_PAGES)
		return -EAGAIN;
	unsigned n = 0;
	int tier;
	for (uint64_t pno = p0; pno <= p1; pno++, n++)
		if (!(pin[n] = pin_fast(c, pno, false, &tier))) {
			while (n > 0)
				unpin(c, pin[--n]);
			return -EAGAIN;
		}
	size_t done = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t pno;
		uint32_t in;
		size_t k = piece(v, off + done, len - done, &pno, &in);
		memcpy((char *)buf + done, host_data(c, pin[i]) + in, k);
		note_hit_fast(c, t, pin[i], HOST);
		unpin(c, pin[i]);
		done += k;
	}
	return (ssize_t)len;
}

/* The calls on a cache act on its volume 0, the store vc_open opened. */
ssize_t vc_read(vc_cache *c, void *buf, size_t len, uint64_t off)
{
	return vc_volume_read(c ? c->vols[0] : NULL, buf, len, off);
}

ssize_t vc_write(vc_cache *c, const void *buf, size_t len, uint64_t off)
{
	return vc_volume_write(c ? c->vols[0] : NULL, buf, len, off);
}

int vc_drop(vc_cache *c, uint64_t off, uint64_t len, unsigned flags)
{
	return vc_volume_drop(c ? c->vols[0] : NULL, off, len, flags);
}

int vc_prefetch(vc_cache *c, uint64_t off, uint64_t len, int tier)
{
	return vc_volume_prefetch(c ? c->vols[0] : NULL, off, len, tier);
}
