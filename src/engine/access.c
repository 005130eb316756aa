/* Page access: finding a page and holding it while its bytes are copied.
 *
 * The hot path takes no lock (BAG): a read finds the page in the concurrent
 * index, pins it with one compare-and-swap on its state word (engine/page.h
 * says why that is safe against eviction and reuse) if it is settled in the
 * host tier, or in the GPU tier while the thread has bounce pages left, and
 * records the hit in its thread's queue of policy updates. Host pages are
 * copied out of their slot; a run of GPU pages comes back in one device-queue
 * submission into the thread's bounce pages and stays in the GPU tier
 * (GPU-tier hits served in place). Everything else, misses, writes, GPU hits
 * in GRAM's swap mode, takes acquire(), under the engine lock.
 */
#include "engine/engine.h"

/* Sleeps on cv, which c->mu guards, at most WAIT_GUARD_NS; the sleep is
 * not a hold of the lock. `count`: the sleepers' count the wakers read.
 * With p: returns at once if p->st is no longer `seen`, checked after the
 * count went up, so a lock-free waker (which changes st, then reads the
 * count, both sequentially consistent) either sees this sleeper and
 * broadcasts under c->mu, after it sleeps, or changed st before the check. */
static void sleep_on(struct vc_cache *c, pthread_cond_t *cv, _Atomic uint32_t *count,
		     struct vc_page *p, uint64_t seen)
{
	eng_assert_locked(c);
	atomic_fetch_add(count, 1);
	if (p && atomic_load(&p->st) != seen) {
		atomic_fetch_sub(count, 1);
		return;
	}
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += WAIT_GUARD_NS;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	eng_check_promises(c);
	eng_lock_note(c, __func__);
	VC_LOCK_LEFT(c->mu_owner);
	pthread_cond_timedwait(cv, &c->mu, &ts);
	c->mu_t0 = vc_now_ns();
	VC_LOCK_TAKEN(c->mu_owner);
	atomic_fetch_sub(count, 1);
}

/* Waits for a resource (a free slot, staging page, log space, victim). */
void eng_wait_cv(struct vc_cache *c)
{
	sleep_on(c, &c->cv, &c->nwaiters, NULL, 0);
}

/* Waits for free host slots (a demotion in flight will free some). */
void eng_wait_slot(struct vc_cache *c)
{
	sleep_on(c, &c->slot_cv, &c->slot_waiters, NULL, 0);
}

/* Waits for page p, found under c->mu with state `seen`, to change state
 * (engine.h: per-page waits). */
void eng_wait_page(struct vc_cache *c, struct vc_page *p, uint64_t seen)
{
	uint32_t b = pw_bucket(p->pno);
	sleep_on(c, &c->pw_cv[b], &c->pw_waiters[b], p, seen);
}

/* Under c->mu: wakes resource and slot waiters. */
void eng_wake(struct vc_cache *c)
{
	if (atomic_load(&c->nwaiters))
		pthread_cond_broadcast(&c->cv);
	if (atomic_load(&c->slot_waiters))
		pthread_cond_broadcast(&c->slot_cv);
}

/* After a lock-free change of page pno's state (sequentially consistent):
 * wakes its waiters and resource waiters (a promotion or a demotion waits
 * for a page's pins or ownership as one), taking c->mu only when there are
 * any. */
void eng_wake_nolock(struct vc_cache *c, uint64_t pno)
{
	uint32_t b = pw_bucket(pno);
	bool pw = atomic_load(&c->pw_waiters[b]), any = atomic_load(&c->nwaiters);
	if (pw || any) {
		eng_lock(c);
		if (pw)
			pthread_cond_broadcast(&c->pw_cv[b]);
		if (any)
			pthread_cond_broadcast(&c->cv);
		eng_unlock(c);
	}
}

/* Drops a pin; lock-free. */
void eng_unpin(struct vc_cache *c, struct vc_page *p)
{
	uint64_t pno = p->pno; /* the entry may be reused once unpinned */
	atomic_fetch_sub(&p->st, VC_ST_PIN1);
	eng_wake_nolock(c, pno);
}

/* Drops an ownership (EXCL) taken without the lock; lock-free. */
static void disown(struct vc_cache *c, struct vc_page *p)
{
	uint64_t pno = p->pno; /* as in eng_unpin */
	atomic_fetch_and(&p->st, ~VC_ST_EXCL);
	eng_wake_nolock(c, pno);
}

/* Pins (READ) or owns (WRITE*) p, which an index lookup of pno returned,
 * if it is settled in a tier of `settled` and free to take (eng_grab), and
 * still page pno: the entry may have been reused between the lookup and
 * the hold. Without the lock; false (nothing held) otherwise. */
static bool hold_fast(struct vc_cache *c, struct vc_page *p, uint64_t pno, int mode,
		      uint64_t settled)
{
	if (!eng_grab(p, mode, settled))
		return false;
	if (p->pno == pno)
		return true;
	if (mode == ACQ_READ)
		eng_unpin(c, p);
	else
		disown(c, p);
	return false;
}

/* The calling thread's state for c (tstate: its policy-update queue,
 * bounce pages and hit counters), taken on its first call; NULL when every
 * slot is taken (then hits take the lock). */
struct tstate *eng_tstate(struct vc_cache *c)
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
void eng_tstate_release(void *arg)
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
struct vc_page *eng_pin_fast(struct vc_cache *c, uint64_t pno, bool gpu, int *tier)
{
	struct vc_page *p = vc_index_peek(&c->ix, pno);
	if (!p || !hold_fast(c, p, pno, ACQ_READ, VC_ST_HOST | (gpu ? VC_ST_GPU : 0)))
		return NULL;
	*tier = st_of(p) & VC_ST_GPU ? GPU : HOST;
	/* A failed part's pages are never read: the locked path drops them. */
	if (*tier == GPU && atomic_load_explicit(&gpu_of(c, p)->off, memory_order_acquire)) {
		eng_unpin(c, p);
		return NULL;
	}
	return p;
}

/* Records a lock-free hit in `tier` on pinned page p. */
void eng_note_hit_fast(struct vc_cache *c, struct tstate *t, struct vc_page *p, int tier)
{
	if (t && t->l) {
		vc_opq_hit(t->l, &p->qn, vc_opq_gen(&p->qn)); /* stable while pinned */
		atomic_fetch_add_explicit(&t->hits[tier], 1, memory_order_relaxed);
	} else {
		eng_lock(c);
		pol_hit(c, p);
		c->st.hits[tier]++;
		eng_unlock(c);
	}
}

/* The miss and write-hit path without the engine lock, for threads with a
 * policy-update queue: a page settled in the host tier is pinned or owned
 * with one compare-and-swap; a page that is not cached is loaded into a
 * free host slot (both free lists are lock-free stacks), published by the
 * index's insert, which decides between racing misses, and entered in the
 * policy through the thread's queue. Whatever else (no free host slot: a
 * demotion is due; the page in the GPU tier, busy or owned; a load that
 * failed) goes to the locked path: -EAGAIN. Cost: one index lookup, two
 * pops and one index insert, plus the load. */
static int acquire_fast(struct vc_cache *c, struct tstate *t, uint64_t pno, int mode, bool count,
			struct vc_page **out)
{
	struct vc_page *p = vc_index_peek(&c->ix, pno);
	if (p) {
		if (!hold_fast(c, p, pno, mode, VC_ST_HOST))
			return -EAGAIN;
		vc_opq_hit(t->l, &p->qn, vc_opq_gen(&p->qn)); /* stable while held */
		if (count)
			atomic_fetch_add_explicit(&t->hits[HOST], 1, memory_order_relaxed);
		*out = p;
		return 0;
	}
	uint32_t s;
	if (vc_tier_alloc(c->host, &s) < 0)
		return -EAGAIN;
	int r = vc_index_insert(&c->ix, pno, HOST, s, VC_ST_BUSY, &p);
	if (r < 0) {
		vc_tier_free(c->host, s);
		return -EAGAIN; /* raced with another miss, or no entry free */
	}
	if (count)
		atomic_fetch_add_explicit(&t->misses, 1, memory_order_relaxed);
	if (mode != ACQ_WRITE_FULL) {
		r = eng_load_page(c, pno, host_data(c, p));
		if (r < 0) {
			eng_lock(c);
			eng_page_drop(c, p);
			eng_wake(c);
			eng_unlock(c);
			return r;
		}
		atomic_fetch_add_explicit(&t->rd_bytes, page_len(c, pno), memory_order_relaxed);
		if (eng_dd(c))
			eng_dd_note_load(c, p);
	}
	vc_opq_insert(t->l, &p->qn, HOST);
	/* Ours alone until now: nobody pins or claims a BUSY page. */
	atomic_store(&p->st, VC_ST_HOST | (mode == ACQ_READ ? VC_ST_PIN1 : VC_ST_EXCL));
	eng_wake_nolock(c, pno);
	*out = p;
	return 0;
}

/* Returns page pno in the host tier, pinned (READ) or owned (WRITE*).
 * `count`: record the access in the hit/miss statistics. `serve`: a READ
 * may return a pinned GPU-tier page, which the caller reads in place. */
int eng_acquire(struct vc_cache *c, uint64_t pno, int mode, bool count, bool serve,
		   struct vc_page **out)
{
	struct tstate *t = eng_tstate(c);
	int r;
	if (c->miss_fast && t && t->l && (r = acquire_fast(c, t, pno, mode, count, out)) != -EAGAIN)
		return r;
	eng_lock(c);
	for (;;) {
		r = 0; /* a retry's -EAGAIN is not the result */
		struct vc_page *p = vc_index_find(&c->ix, pno);
		if (p) {
			uint64_t st = st_of(p);
			if ((st & (VC_ST_BUSY | VC_ST_EXCL)) || (mode != ACQ_READ && (st & VC_ST_PINS))) {
				eng_wait_page(c, p, st);
				continue;
			}
			if (p->tier == GPU && atomic_load(&gpu_of(c, p)->off)) {
				/* Its part failed: it leaves the tier, and this
				 * access misses (dirty: lost, VC_GPU_DIRTY_KEEP). */
				if (!vc_page_claim(p, VC_ST_BUSY, 0)) {
					eng_wait_page(c, p, st_of(p));
					continue;
				}
				eng_gpu_lost(c, p);
				continue;
			}
			if (p->tier == HOST) {
				if (!eng_grab(p, mode, VC_ST_HOST)) {
					eng_wait_page(c, p, st_of(p));
					continue;
				}
				pol_hit(c, p);
				c->st.hits[HOST] += count;
				*out = p;
				break;
			}
			if (mode == ACQ_WRITE_FULL && !p->dirty) {
				/* Overwritten whole: its GPU copy need not travel.
				 * A dirty one does (promoted below): it stays dirty,
				 * and in the dirty set, until the new bytes are in, so
				 * a write that fails before (vc_volume_write) loses no
				 * acknowledged one. */
				if (!vc_page_claim(p, 0, VC_ST_GPU)) { /* read in place now */
					eng_wait_page(c, p, st_of(p));
					continue;
				}
				c->st.hits[GPU] += count;
				count = false;
				eng_page_drop(c, p);
				continue;
			}
			if (mode == ACQ_READ && serve) {
				/* Served where it is: the caller copies it out over
				 * PCIe; promotion is not a cost of every hit. */
				if (!eng_grab(p, ACQ_READ, VC_ST_GPU)) {
					eng_wait_page(c, p, st_of(p));
					continue;
				}
				pol_hit(c, p);
				c->st.hits[GPU] += count;
				gpu_of(c, p)->n_hits += count;
				*out = p;
				break;
			}
			const uint32_t part = p->gpu;
			r = eng_promote(c, p);
			if (r == -EAGAIN) {
				/* p pinned (a reader, or a GPUfs grant), or no victim. */
				uint32_t b = pw_bucket(p->pno);
				atomic_fetch_or(&c->pin_want[b / 32], 1u << (b % 32));
				atomic_fetch_add_explicit(&c->pin_stalls, 1, memory_order_relaxed);
				eng_wait_cv(c);
				continue;
			}
			if (r == 1) /* room made for it: look again */
				continue;
			if (r < 0)
				break;
			c->st.hits[GPU] += count;
			c->gpus[part].n_hits += count;
			count = false;
			if (!eng_grab(p, mode, VC_ST_HOST)) { /* a lock-free reader came first */
				eng_wait_page(c, p, st_of(p));
				continue;
			}
			*out = p;
			break;
		}
		uint32_t s;
		pol_miss(c, pno);
		r = eng_host_slot_get(c, &s);
		if (r < 0)
			break;
		r = vc_index_insert(&c->ix, pno, HOST, s, VC_ST_BUSY, &p);
		if (r < 0) {
			vc_tier_free(c->host, s);
			if (r == -VC_EI_NOROOM) /* entries of pages on their way out */
				eng_wait_cv(c);
			if (r == -EEXIST || r == -VC_EI_NOROOM) /* or loaded by another thread */
				continue;
			break;
		}
		c->st.misses += count;
		if (mode != ACQ_WRITE_FULL) {
			eng_unlock(c);
			r = eng_load_page(c, pno, host_data(c, p));
			if (r == 0 && eng_dd(c))
				eng_dd_note_load(c, p);
			eng_lock(c);
			if (r < 0) {
				eng_page_drop(c, p);
				eng_wake(c);
				break;
			}
			c->st.rd_bytes += page_len(c, pno);
		}
		pol_insert(c, p, HOST);
		/* Ours alone until now: nobody pins or claims a BUSY page. */
		st_settle(c, p, VC_ST_HOST | (mode == ACQ_READ ? VC_ST_PIN1 : VC_ST_EXCL));
		eng_wake(c);
		*out = p;
		break;
	}
	eng_unlock(c);
	return r;
}

/* Ends a write's ownership. `written`: bytes the caller wrote through to
 * the backing store. `dirtied`: the page is newer than the store now; the
 * caller reserved it in the dirty set if it was clean (dirty_reserve).
 * Without the lock unless the thread has no queue: the owner alone
 * changes version and marks it dirty, and the release is one atomic
 * and-not. */
static void release_write(struct vc_cache *c, struct tstate *t, struct vc_page *p, bool dirtied,
			  uint64_t written)
{
	p->version++;
	if (dirtied && !p->dirty)
		dirty_mark(c, p);
	if (c->miss_fast && t) {
		atomic_fetch_add_explicit(&t->wr_bytes, written, memory_order_relaxed);
		disown(c, p);
		return;
	}
	eng_lock(c);
	c->st.wr_bytes += written;
	st_clear(c, p, VC_ST_EXCL);
	eng_wake(c);
	eng_unlock(c);
}

/* Forgets a clean page the caller owns (EXCL): nobody else holds it. */
static void drop_owned(struct vc_cache *c, struct vc_page *p)
{
	eng_lock(c);
	eng_page_drop(c, p);
	eng_wake(c);
	eng_unlock(c);
}

/* Splits a byte range at page boundaries: the piece at pos, of at most
 * `left` bytes, lies in page *pno from offset *in; returns its length. */
size_t eng_piece(const struct vc_volume *v, uint64_t pos, size_t left, uint64_t *pno,
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
/* GPU pages in a run from which it is split over two rings. */
#define SPLIT_MIN 8

static ssize_t read_run(struct vc_volume *v, struct tstate *t, char *buf, size_t len, uint64_t off)
{
	struct vc_cache *c = v->c;
	struct vc_page *pin[RUN_MAX];
	struct vc_move mv[RUN_MAX * DD_DEGREE_MAX]; /* eng_mpp(c) a GPU page */
	struct vc_ticket tk[RUN_MAX * DD_DEGREE_MAX];
	const uint32_t mpp = eng_mpp(c);
	uint32_t in[RUN_MAX], n = 0, ng = 0;
	int gi[RUN_MAX];
	uint8_t gp[RUN_MAX]; /* each GPU page's part */
	bool mixed = false;  /* the GPU pages lie in more than one part */
	size_t k[RUN_MAX], done = 0;
	const uint32_t gmax = c->gt.serve && t && t->idx < c->gt.bounce_threads ? c->gt.bounce_per : 0;
	while (done < len && n < RUN_MAX) {
		uint64_t pno;
		int tier;
		k[n] = eng_piece(v, off + done, len - done, &pno, &in[n]);
		struct vc_page *p = eng_pin_fast(c, pno, ng < gmax, &tier);
		if (!p)
			break;
		gi[n] = -1;
		if (tier == GPU) {
			eng_mv_page(c, p, vc_tier_addr(c->gt.bounce, bounce_slot(c, t, ng)), true,
				    mv + (size_t)ng * mpp);
			gp[ng] = p->gpu; /* stable while pinned */
			mixed |= gp[ng] != gp[0];
			gi[n] = (int)ng++;
		}
		pin[n] = p;
		done += k[n++];
	}
	/* One part: a long run goes to two rings, whose servers move their
	 * halves at once; the first half is copied out while the second is in
	 * flight. Several parts: every part's moves at once, all waited for.
	 * Whatever was submitted is waited for before returning: the bounce
	 * pages are this thread's next read's. */
	struct vc_gpu *g = ng ? &c->gpus[gp[0]] : NULL;
	const uint32_t half = ng >= SPLIT_MIN && !mixed ? ng / 2 : ng;
	int r1 = 0, r2 = 0, r = 0, perr[VC_GPUS_MAX] = { 0 };
	if (ng && mixed) { /* mpp is 1 here: dedup has one part */
		struct vc_move sm[RUN_MAX];
		r = eng_fan_via(c, mv, gp, ng, sm, tk, perr);
	} else if (ng) {
		r1 = vc_batcher_add_n(g->bat, mv, half * mpp, tk);
		if (r1 == 0 && half < ng)
			r2 = vc_batcher_add_n_on(g->bat, 1, mv + half * mpp, (ng - half) * mpp,
						 tk + half * mpp);
		r = r1 ? r1 : vc_batcher_wait_n(g->bat, tk, half * mpp);
		if (r == 0)
			r = r2;
	}
	if (ng) {
		atomic_fetch_add_explicit(&t->d2h, (uint64_t)ng * c->page_size, memory_order_relaxed);
		if (!mixed) /* one add, not one a page */
			atomic_fetch_add_explicit(&t->gpu_hits[gp[0]], ng, memory_order_relaxed);
		for (uint32_t i = 0; mixed && i < ng; i++)
			atomic_fetch_add_explicit(&t->gpu_hits[gp[i]], 1, memory_order_relaxed);
	}
	bool second = mixed || !(r1 == 0 && r2 == 0 && half < ng); /* true: nothing left to wait for */
	size_t pos = 0;
	struct vc_page *bad = NULL; /* failed its integrity check: dropped once unpinned */
	uint64_t bad_pno = 0, bad_nonce = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (!second && gi[i] >= (int)half) {
			int e = vc_batcher_wait_n(g->bat, tk + half * mpp, (ng - half) * mpp);
			if (r == 0)
				r = e;
			second = true;
		}
		if (r == 0) {
			const unsigned char *src =
				gi[i] < 0 ? host_data(c, pin[i])
					  : vc_tier_host(c->gt.bounce, bounce_slot(c, t, (uint32_t)gi[i]));
			if (gi[i] >= 0 && eng_integ(c) &&
			    (r = eng_check(c, pin[i], src, &bad_nonce)) < 0) {
				bad = pin[i];
				bad_pno = pin[i]->pno;
			}
			if (r == 0) {
				memcpy(buf + pos, src + in[i], k[i]);
				eng_note_hit_fast(c, t, pin[i], gi[i] < 0 ? HOST : GPU);
			}
		}
		pos += k[i];
		eng_unpin(c, pin[i]);
	}
	if (!second)
		(void)vc_batcher_wait_n(g->bat, tk + half * mpp, (ng - half) * mpp);
	if (bad)
		eng_integ_drop_unlocked(c, bad, bad_pno, bad_nonce);
	if (eng_dev_err(r)) {
		/* A part failed under us: it is failed for everyone, its pages
		 * leave the tier, and the caller reads on by the locked path
		 * (misses now, from the store). Nothing of this run counts. */
		if (!mixed)
			perr[gp[0]] = r;
		eng_lock(c);
		eng_fail_parts(c, perr);
		eng_unlock(c);
		return 0;
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
	if (len)
		eng_dd_note(v, v->base + (off >> c->pshift),
			    ((off + len - 1) >> c->pshift) - (off >> c->pshift) + 1, false);
	struct tstate *t = eng_tstate(c);
	const bool serve = c->gt.serve && t && t->idx < c->gt.bounce_threads;
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
		size_t k = eng_piece(v, off + done, len - done, &pno, &in);
		struct vc_page *p;
		int r = eng_acquire(c, pno, ACQ_READ, true, serve, &p);
		if (r < 0)
			return r;
		const unsigned char *src = NULL;
		uint64_t nonce = 0;
		bool bad = false;
		struct vc_gpu *g = NULL;
		if (p->tier == HOST) { /* stable while pinned */
			src = host_data(c, p);
		} else {
			uint32_t b = bounce_slot(c, t, 0);
			g = gpu_of(c, p);
			r = eng_move_up(c, p, vc_tier_addr(c->gt.bounce, b));
			atomic_fetch_add_explicit(&t->d2h, c->page_size, memory_order_relaxed);
			src = vc_tier_host(c->gt.bounce, b);
			if (r == 0 && eng_integ(c))
				bad = (r = eng_check(c, p, src, &nonce)) < 0;
		}
		if (r == 0)
			memcpy((char *)buf + done, src + in, k);
		eng_unpin(c, p);
		if (bad)
			eng_integ_drop_unlocked(c, p, pno, nonce);
		if (g && eng_dev_err(r)) { /* its part failed: read the piece again */
			eng_gpu_fail_unlocked(c, g, r);
			continue;
		}
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
	if (len)
		eng_dd_note(v, v->base + (off >> c->pshift),
			    ((off + len - 1) >> c->pshift) - (off >> c->pshift) + 1, true);
	struct tstate *t = eng_tstate(c);
	size_t done = 0;
	while (done < len) {
		uint64_t pos = off + done, pno;
		uint32_t in;
		size_t k = eng_piece(v, pos, len - done, &pno, &in);
		int mode = (in == 0 && k == page_len(c, pno)) ? ACQ_WRITE_FULL : ACQ_WRITE;
		struct vc_page *p;
		int r = eng_acquire(c, pno, mode, true, false, &p);
		if (r < 0)
			return r;
		/* Owned (EXCL), p->dirty is stable: only the owner or a holder of
		 * a pin or BUSY, which EXCL excludes, changes it. A clean page
		 * that turns dirty is charged against the dirty limit, or at the
		 * limit written through; it joins the dirty set before it
		 * changes, so running out of memory there fails the write with
		 * the page as it was. */
		bool through = !wb;
		if (wb && !p->dirty) {
			if (!dirty_charge(c)) {
				through = true;
				atomic_fetch_add_explicit(&c->writes_limited, 1, memory_order_relaxed);
			} else if ((r = dirty_reserve(v, pno)) < 0) {
				/* Its bytes may be unloaded (a whole-page write skips
				 * the load); it is clean, so forgetting it loses
				 * nothing. */
				dirty_uncharge(c);
				drop_owned(c, p);
				return r;
			} else if (atomic_load_explicit(&c->dirty_charged, memory_order_relaxed) >
				   c->dirty_bg) {
				eng_flusher_kick(c);
			}
		}
		unsigned char *d = host_data(c, p);
		memcpy(d + in, (const char *)buf + done, k);
		if (mode == ACQ_WRITE_FULL && k < c->page_size)
			memset(d + k, 0, c->page_size - k);
		if (through) {
			r = vc_backing_write(v->bk, d + in, k, pos);
			if (r < 0) {
				drop_owned(c, p); /* it must not hold what the store refused */
				return r;
			}
			eng_store_ok(v);
		}
		release_write(c, t, p, !through, through ? k : 0);
		done += k;
	}
	return (ssize_t)len;
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
	struct tstate *t = eng_tstate(c);
	uint64_t p0 = v->base + (off >> c->pshift), p1 = v->base + ((off + len - 1) >> c->pshift);
	if (p1 - p0 >= VC_READ_HIT_PAGES)
		return -EAGAIN;
	unsigned n = 0;
	int tier;
	for (uint64_t pno = p0; pno <= p1; pno++, n++)
		if (!(pin[n] = eng_pin_fast(c, pno, false, &tier))) {
			while (n > 0)
				eng_unpin(c, pin[--n]);
			return -EAGAIN;
		}
	size_t done = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t pno;
		uint32_t in;
		size_t k = eng_piece(v, off + done, len - done, &pno, &in);
		memcpy((char *)buf + done, host_data(c, pin[i]) + in, k);
		eng_note_hit_fast(c, t, pin[i], HOST);
		eng_unpin(c, pin[i]);
		done += k;
	}
	return (ssize_t)len;
}
