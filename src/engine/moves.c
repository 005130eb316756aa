/* Tier moves: bringing pages into the host tier and pushing its victims
 * down, one page at a time, through the batcher (the device queue).
 *
 *   miss                  load into a host slot; the host victim moves to the
 *                         head of the GPU tier (eng_evict_host_one)
 *   GPU hit, swap mode    bring the page to the host tier; if the host tier
 *                         is full, its victim takes the page's GPU slot in
 *                         the same move (a SWAP: no GPU eviction)
 *
 * All under c->mu, which they drop while data moves (the pages BUSY).
 */
#include "engine/engine.h"

bool eng_unevictable(const struct vc_pnode *n, void *arg)
{
	(void)arg;
	return st_of((const struct vc_page *)n) & (VC_ST_PINS | VC_ST_BUSY | VC_ST_EXCL);
}

/* The host tier's victim (the GPU tier evicts by segment, not by page).
 * Exact LRU: the queue layer drains first. */
static struct vc_page *host_victim(struct vc_cache *c)
{
	struct vc_opq_node *n = vc_opq_victim(c->opq, HOST, eng_unevictable, NULL);
	return n ? vc_page_of(&n->pn) : NULL;
}

/* Forgets a page: policy, slot, index. Its data is gone. The policy hears
 * of it at once, after what is queued (the order the policy sees is the
 * order of events), not through the queue: the entry may be reused for
 * another page before a queued removal would be applied, and policies with
 * ghost lists read the key at removal. `drained`: the caller drained the
 * queues since it last queued anything (evict_seg drops a segment's pages
 * after one drain). */
void eng_page_drop_drained(struct vc_cache *c, struct vc_page *p, bool drained)
{
	uint32_t g = vc_opq_gen(&p->qn);
	if (vc_opq_gen_live(g)) {
		if (!drained)
			vc_opq_drain(c->opq);
		vc_opq_remove_now(c->opq, &p->qn, g);
	}
	if (p->tier == GPU)
		vc_ls_orphan(c->gpu.ls, gpu_slot(c, p));
	else
		vc_tier_free(c->host, p->slot);
	if (p->dirty)
		dirty_clear(c, p);
	vc_index_remove(&c->ix, p);
}

void eng_page_drop(struct vc_cache *c, struct vc_page *p)
{
	eng_page_drop_drained(c, p, false);
}

/* One page move, unlocked: add to the open batch and wait for it. */
int eng_move1(struct vc_cache *c, int op, uint64_t src, uint64_t dst)
{
	struct vc_move m = { .src = src, .dst = dst, .op = (uint32_t)op };
	struct vc_ticket t;
	int r = vc_batcher_add(c->gpu.bat, &m, &t);
	return r < 0 ? r : vc_batcher_wait(c->gpu.bat, &t);
}

/* Loads page pno from the backing store into buf (unlocked); the part past
 * the end of the store reads as zeros. */
int eng_load_page(struct vc_cache *c, uint64_t pno, unsigned char *buf)
{
	uint32_t len = page_len(c, pno);
	int r = vc_backing_read(vol_of(c, pno)->bk, buf, len, page_off(c, pno));
	if (len < c->page_size)
		memset(buf + len, 0, c->page_size - len);
	return r;
}

/* Frees one host slot: the host victim moves to the head of the GPU tier
 * (or is dropped, after a write-back if dirty, when there is no GPU tier). */
static int evict_host_one(struct vc_cache *c)
{
	int r;
	bool to_gpu = c->gpu.ls && !c->gpu.off;
	if (to_gpu && (r = eng_gpu_room(c, 1, false)) < 0)
		return r;
	struct vc_page *v = host_victim(c);
	if (!v)
		return -EAGAIN;
	if (!to_gpu) {
		if (v->dirty) {
			r = eng_writeback_page(c, v);
			if (r < 0)
				return r;
		}
		/* Unlocked meanwhile: drop it only if still unused. */
		if (!v->used || v->tier != HOST || v->dirty || !vc_page_claim(v, 0, VC_ST_HOST))
			return 0;
		eng_page_drop(c, v);
		c->st.evictions[HOST]++;
		return 0;
	}
	if (!vc_page_claim(v, VC_ST_BUSY, 0))
		return -EAGAIN; /* a lock-free reader pinned it since */
	uint32_t key = page_id(c, v), g;
	if (vc_ls_append(c->gpu.ls, 1, &key, ++c->gpu.clock, &g) < 0) {
		st_clear(v, VC_ST_BUSY);
		return -EAGAIN; /* not reached: gpu_room made room under this hold */
	}
	pol_remove(c, v);
	uint64_t src = slot_addr(c, v);
	pthread_mutex_unlock(&c->mu);
	r = eng_move1(c, VC_MOVE_COPY, src, vc_ls_addr(c->gpu.ls, g));
	pthread_mutex_lock(&c->mu);
	if (r < 0) {
		vc_ls_orphan(c->gpu.ls, g);
		pol_insert(c, v, HOST);
		st_clear(v, VC_ST_BUSY);
		eng_wake(c);
		return r;
	}
	vc_tier_free(c->host, v->slot);
	v->tier = GPU; /* at slot g: vc_ls_append recorded it */
	/* Published last (ours till now: BUSY, no pins). */
	atomic_store_explicit(&v->st, VC_ST_GPU, memory_order_release);
	pol_insert(c, v, GPU);
	c->st.evictions[HOST]++;
	c->st.h2d += c->page_size;
	eng_wake(c);
	return 0;
}

/* A free host slot, evicting as needed; may sleep. */
int eng_host_slot_get(struct vc_cache *c, uint32_t *s)
{
	for (;;) {
		if (vc_tier_alloc(c->host, s) == 0)
			return 0;
		int r = evict_host_one(c);
		if (r == -EAGAIN)
			eng_wait_cv(c);
		else if (r < 0)
			return r;
	}
}

/* Brings a GPU-tier page (not busy) to the host tier. */
int eng_promote(struct vc_cache *c, struct vc_page *p)
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
	int r = v ? eng_move1(c, VC_MOVE_SWAP, haddr, gaddr) : eng_move1(c, VC_MOVE_COPY, gaddr, haddr);
	pthread_mutex_lock(&c->mu);
	if (r < 0) {
		/* The device failed mid-move: the slots' contents are unknown, so
		 * neither page can be trusted. Dirty data in them is lost. */
		if (!v)
			vc_tier_free(c->host, s);
		eng_page_drop(c, p);
		if (v)
			eng_page_drop(c, v);
		eng_wake(c);
		return r;
	}
	if (v) {
		/* The host victim took p's GPU slot: it owns it from now, with
		 * a fresh stamp (its place in the log is p's, an approximation
		 * that cleaning corrects: it orders by stamp). */
		uint32_t hs = v->slot;
		v->tier = GPU;
		vc_ls_rekey(c->gpu.ls, gpu_slot(c, p), page_id(c, v), ++c->gpu.clock);
		/* Published last: a reader that pins it reads where[] next. */
		atomic_store_explicit(&v->st, VC_ST_GPU, memory_order_release);
		pol_insert(c, v, GPU);
		c->st.evictions[HOST]++;
		c->st.h2d += c->page_size;
		s = hs;
	} else {
		vc_ls_orphan(c->gpu.ls, gpu_slot(c, p));
	}
	p->tier = HOST;
	p->slot = s;
	pol_insert(c, p, HOST);
	atomic_store_explicit(&p->st, VC_ST_HOST, memory_order_release); /* not busy */
	c->st.d2h += c->page_size;
	eng_wake(c);
	return 0;
}
