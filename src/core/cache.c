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
 * Locking: one mutex (c->mu) guards the index, the policy, the tiers' slot
 * stacks and the page flags. Data never moves under it: a page whose data
 * is in flight is `busy`, and anyone who needs it sleeps on c->cv and looks
 * it up again on waking (its entry may have been freed and reused). A
 * reader pins the host slot (shared), a writer owns it (`excl`); a pinned,
 * owned or busy page is never chosen as a victim.
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

#include "backing/backing.h"
#include "core/batcher.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/page.h"
#include "device/device.h"
#include "policy/policy.h"
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

struct vc_cache {
	pthread_mutex_t mu;
	pthread_cond_t cv; /* page flags or slots changed */
	uint32_t nwaiters;

	uint32_t page_size;
	unsigned pshift;
	uint64_t size;
	int write_mode;
	bool readonly;
	uint32_t batch_pages;

	struct vc_device *dev;
	struct vc_backing *bk;
	struct vc_tiermem *tier[VC_TIER_COUNT];
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
	c->nwaiters++;
	pthread_cond_wait(&c->cv, &c->mu);
	c->nwaiters--;
}

static void wake(struct vc_cache *c)
{
	if (c->nwaiters)
		pthread_cond_broadcast(&c->cv);
}

/* Bytes of page pno that lie inside the backing store. */
static uint32_t page_len(const struct vc_cache *c, uint64_t pno)
{
	uint64_t start = pno << c->pshift;
	uint64_t left = c->size - start;
	return left < c->page_size ? (uint32_t)left : c->page_size;
}

static uint64_t slot_addr(const struct vc_cache *c, const struct vc_page *p)
{
	return vc_tier_addr(c->tier[p->tier], p->slot);
}

static unsigned char *host_data(const struct vc_cache *c, const struct vc_page *p)
{
	return vc_tier_host(c->tier[HOST], p->slot);
}

static void pol_insert(struct vc_cache *c, struct vc_page *p, int tier)
{
	p->pn.key = p->pno; /* ghost-list policies remember evicted keys */
	c->pol->ops->insert(c->pol, &p->pn, tier);
}

static void pol_remove(struct vc_cache *c, struct vc_page *p)
{
	if (p->pn.tier != VC_PNODE_NONE)
		c->pol->ops->remove(c->pol, &p->pn);
}

static bool unevictable(const struct vc_pnode *n, void *arg)
{
	(void)arg;
	const struct vc_page *p = (const struct vc_page *)n;
	return p->busy || p->pins || p->excl;
}

static struct vc_page *victim(struct vc_cache *c, int tier)
{
	struct vc_pnode *n = c->pol->ops->victim(c->pol, tier, unevictable, NULL);
	return n ? vc_page_of(n) : NULL;
}

/* Forgets a page: policy, slot, index. Its data is gone. */
static void page_drop(struct vc_cache *c, struct vc_page *p)
{
	pol_remove(c, p);
	vc_tier_free(c->tier[p->tier], p->slot);
	if (p->dirty)
		c->ndirty--;
	vc_index_remove(&c->ix, p);
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
	int r = vc_backing_read(c->bk, buf, len, pno << c->pshift);
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
	p->busy = 1;
	uint64_t pno = p->pno, src = slot_addr(c, p);
	unsigned char *buf = on_gpu ? vc_tier_host(c->stage_wb, s) : host_data(c, p);
	pthread_mutex_unlock(&c->mu);
	int r = on_gpu ? move1(c, VC_MOVE_COPY, src, vc_tier_addr(c->stage_wb, s)) : 0;
	if (r == 0)
		r = vc_backing_write(c->bk, buf, page_len(c, pno), pno << c->pshift);
	pthread_mutex_lock(&c->mu);
	if (on_gpu) {
		vc_tier_free(c->stage_wb, s);
		c->st.d2h += c->page_size;
	}
	p->busy = 0;
	if (r == 0) {
		p->dirty = 0;
		c->ndirty--;
		c->st.writebacks++;
		c->st.wr_bytes += page_len(c, pno);
	}
	wake(c);
	return r;
}

/* Frees one GPU slot by dropping the GPU tier's victim (written back first
 * if dirty). -EAGAIN: nothing evictable now; wait and retry. */
static int evict_gpu_one(struct vc_cache *c)
{
	struct vc_page *w = victim(c, GPU);
	if (!w)
		return -EAGAIN;
	if (w->dirty) {
		int r = writeback_page(c, w);
		if (r < 0)
			return r;
		/* Unlocked meanwhile: it may have been used again; let the
		 * caller retry, which picks the current victim. */
		if (w->pn.tier != GPU || w->pins || w->excl || w->busy)
			return 0;
	}
	page_drop(c, w);
	c->st.evictions[GPU]++;
	return 0;
}

/* Frees one host slot: the host victim moves to the head of the GPU tier
 * (or is dropped, after a write-back if dirty, when there is no GPU tier). */
static int evict_host_one(struct vc_cache *c)
{
	struct vc_tiermem *gt = c->tier[GPU];
	uint32_t g = 0;
	int r;
	bool to_gpu = vc_tier_capacity(gt) > 0;
	if (to_gpu) {
		while (vc_tier_alloc(gt, &g) < 0) {
			r = evict_gpu_one(c);
			if (r < 0)
				return r;
		}
	}
	struct vc_page *v = victim(c, HOST);
	if (!v) {
		if (to_gpu)
			vc_tier_free(gt, g);
		return -EAGAIN;
	}
	if (!to_gpu) {
		if (v->dirty) {
			r = writeback_page(c, v);
			if (r < 0 || v->pins || v->excl || v->busy)
				return r;
		}
		page_drop(c, v);
		c->st.evictions[HOST]++;
		return 0;
	}
	v->busy = 1;
	pol_remove(c, v);
	uint64_t src = slot_addr(c, v);
	pthread_mutex_unlock(&c->mu);
	r = move1(c, VC_MOVE_COPY, src, vc_tier_addr(gt, g));
	pthread_mutex_lock(&c->mu);
	v->busy = 0;
	if (r < 0) {
		vc_tier_free(gt, g);
		pol_insert(c, v, HOST);
		wake(c);
		return r;
	}
	vc_tier_free(c->tier[HOST], v->slot);
	v->tier = GPU;
	v->slot = g;
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
		if (vc_tier_alloc(c->tier[HOST], s) == 0)
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
	if (vc_tier_alloc(c->tier[HOST], &s) < 0) {
		v = victim(c, HOST);
		if (!v)
			return -EAGAIN;
		v->busy = 1;
		pol_remove(c, v);
	}
	p->busy = 1;
	pol_remove(c, p);
	uint64_t gaddr = slot_addr(c, p);
	uint64_t haddr = v ? slot_addr(c, v) : vc_tier_addr(c->tier[HOST], s);
	pthread_mutex_unlock(&c->mu);
	int r = v ? move1(c, VC_MOVE_SWAP, haddr, gaddr) : move1(c, VC_MOVE_COPY, gaddr, haddr);
	pthread_mutex_lock(&c->mu);
	p->busy = 0;
	if (v)
		v->busy = 0;
	if (r < 0) {
		/* The device failed mid-move: the slots' contents are unknown, so
		 * neither page can be trusted. Dirty data in them is lost. */
		if (!v)
			vc_tier_free(c->tier[HOST], s);
		page_drop(c, p);
		if (v)
			page_drop(c, v);
		wake(c);
		return r;
	}
	if (v) {
		uint32_t hs = v->slot;
		v->tier = GPU;
		v->slot = p->slot;
		pol_insert(c, v, GPU);
		c->st.evictions[HOST]++;
		c->st.h2d += c->page_size;
		s = hs;
	} else {
		vc_tier_free(c->tier[GPU], p->slot);
	}
	p->tier = HOST;
	p->slot = s;
	pol_insert(c, p, HOST);
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

static void grab(struct vc_page *p, int mode)
{
	if (mode == ACQ_READ)
		p->pins++;
	else
		p->excl = 1;
}

/* Returns page pno in the host tier, pinned (READ) or owned (WRITE*).
 * `count`: record the access in the hit/miss statistics. */
static int acquire(struct vc_cache *c, uint64_t pno, int mode, bool count, struct vc_page **out)
{
	int r = 0;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		struct vc_page *p = vc_index_find(&c->ix, pno);
		if (p) {
			if (p->busy || p->excl || (mode != ACQ_READ && p->pins)) {
				wait_cv(c);
				continue;
			}
			if (p->tier == HOST) {
				c->pol->ops->hit(c->pol, &p->pn);
				c->st.hits[HOST] += count;
				grab(p, mode);
				*out = p;
				break;
			}
			if (mode == ACQ_WRITE_FULL) {
				/* Overwritten whole: its GPU copy need not travel. */
				c->st.hits[GPU] += count;
				count = false;
				page_drop(c, p);
				continue;
			}
			r = promote(c, p);
			if (r == -EAGAIN) {
				wait_cv(c);
				continue;
			}
			if (r < 0)
				break;
			c->st.hits[GPU] += count;
			grab(p, mode);
			*out = p;
			break;
		}
		uint32_t s;
		r = host_slot_get(c, &s);
		if (r < 0)
			break;
		if (vc_index_find(&c->ix, pno)) { /* loaded by another thread meanwhile */
			vc_tier_free(c->tier[HOST], s);
			continue;
		}
		p = vc_index_insert(&c->ix, pno);
		p->tier = HOST;
		p->slot = s;
		c->st.misses += count;
		if (mode != ACQ_WRITE_FULL) {
			p->busy = 1;
			pthread_mutex_unlock(&c->mu);
			r = load_page(c, pno, host_data(c, p));
			pthread_mutex_lock(&c->mu);
			p->busy = 0;
			if (r < 0) {
				page_drop(c, p);
				wake(c);
				break;
			}
			c->st.rd_bytes += page_len(c, pno);
		}
		pol_insert(c, p, HOST);
		grab(p, mode);
		wake(c);
		*out = p;
		break;
	}
	pthread_mutex_unlock(&c->mu);
	return r;
}

/* Ends an acquire. `written`: bytes the caller wrote through to the
 * backing store, counted here so a write takes the lock once per page. */
static void release(struct vc_cache *c, struct vc_page *p, int mode, bool dirtied,
		    uint64_t written)
{
	pthread_mutex_lock(&c->mu);
	c->st.wr_bytes += written;
	if (mode == ACQ_READ)
		p->pins--;
	else
		p->excl = 0;
	if (dirtied && !p->dirty) {
		p->dirty = 1;
		c->ndirty++;
	}
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
	pthread_cond_init(&c->cv, NULL);
	c->page_size = cfg.page_size;
	c->pshift = (unsigned)__builtin_ctz(cfg.page_size);
	c->write_mode = cfg.write_mode;
	c->readonly = cfg.flags & VC_OPEN_READONLY;
	c->batch_pages = cfg.batch_pages;
	uint64_t host_pages = cfg.host_bytes >> c->pshift;
	uint64_t gpu_pages = cfg.gpu_bytes >> c->pshift;

	r = vc_backing_open(cfg.backing_path, cfg.backing_path ? -1 : cfg.backing_fd, c->readonly,
			    cfg.backing_latency_ns, &c->bk);
	if (r == 0) {
		c->size = vc_backing_size(c->bk);
		r = vc_device_open(cfg.device, cfg.device_ordinal, &c->dev);
	}
	if (r == 0)
		r = vc_tier_open(c->dev, HOST, host_pages, c->page_size, &c->tier[HOST]);
	if (r == 0)
		r = vc_tier_open(c->dev, GPU, gpu_pages, c->page_size, &c->tier[GPU]);
	if (r == 0)
		r = vc_tier_open(c->dev, HOST, WB_STAGING_PAGES, c->page_size, &c->stage_wb);
	if (r == 0)
		r = vc_tier_open(c->dev, HOST, cfg.batch_pages, c->page_size, &c->stage_bulk);
	if (r == 0)
		r = vc_batcher_create(c->dev, c->page_size, cfg.batch_pages, cfg.batch_timeout_us,
				      &c->bat);
	if (r == 0)
		r = vc_index_init(&c->ix, host_pages + gpu_pages);
	if (r == 0) {
		uint64_t cap[VC_TIER_COUNT] = { host_pages, gpu_pages };
		c->pol = vc_policy_find(cfg.policy)->create(cap, VC_TIER_COUNT);
		if (!c->pol)
			r = vc_err(-ENOMEM, "out of memory for the policy");
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
	if (c->pol && c->ndirty)
		r = vc_flush(c);
	if (c->pol)
		c->pol->ops->destroy(c->pol);
	if (c->ix.pool)
		vc_index_fini(&c->ix);
	vc_batcher_destroy(c->bat);
	vc_tier_close(c->stage_bulk);
	vc_tier_close(c->stage_wb);
	vc_tier_close(c->tier[GPU]);
	vc_tier_close(c->tier[HOST]);
	vc_device_close(c->dev);
	vc_backing_close(c->bk);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
	return r;
}

uint64_t vc_size(const vc_cache *c)
{
	return c->size;
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
static size_t piece(const struct vc_cache *c, uint64_t pos, size_t left, uint64_t *pno,
		    uint32_t *in)
{
	*pno = pos >> c->pshift;
	*in = (uint32_t)(pos & (c->page_size - 1));
	return c->page_size - *in < left ? c->page_size - *in : left;
}

ssize_t vc_read(vc_cache *c, void *buf, size_t len, uint64_t off)
{
	if (!c || (!buf && len))
		return vc_err(-EINVAL, "vc_read: NULL argument");
	if (off >= c->size)
		return 0;
	if (len > c->size - off)
		len = (size_t)(c->size - off);
	size_t done = 0;
	while (done < len) {
		uint64_t pno;
		uint32_t in;
		size_t k = piece(c, off + done, len - done, &pno, &in);
		struct vc_page *p;
		int r = acquire(c, pno, ACQ_READ, true, &p);
		if (r < 0)
			return r;
		memcpy((char *)buf + done, host_data(c, p) + in, k);
		release(c, p, ACQ_READ, false, 0);
		done += k;
	}
	return (ssize_t)len;
}

ssize_t vc_write(vc_cache *c, const void *buf, size_t len, uint64_t off)
{
	if (!c || (!buf && len))
		return vc_err(-EINVAL, "vc_write: NULL argument");
	if (c->readonly)
		return vc_err(-EROFS, "cache was opened read-only");
	if (off > c->size || len > c->size - off)
		return vc_err(-ENOSPC, "write of %zu bytes at %llu passes the end of the backing store "
				       "(%llu bytes)", len, (unsigned long long)off,
			      (unsigned long long)c->size);
	bool wb = c->write_mode == VC_WRITE_BACK;
	size_t done = 0;
	while (done < len) {
		uint64_t pos = off + done, pno;
		uint32_t in;
		size_t k = piece(c, pos, len - done, &pno, &in);
		int mode = (in == 0 && k == page_len(c, pno)) ? ACQ_WRITE_FULL : ACQ_WRITE;
		struct vc_page *p;
		int r = acquire(c, pno, mode, true, &p);
		if (r < 0)
			return r;
		unsigned char *d = host_data(c, p);
		memcpy(d + in, (const char *)buf + done, k);
		if (mode == ACQ_WRITE_FULL && k < c->page_size)
			memset(d + k, 0, c->page_size - k);
		if (!wb) {
			r = vc_backing_write(c->bk, d + in, k, pos);
			if (r < 0) {
				/* The cache must not hold what the store refused. */
				pthread_mutex_lock(&c->mu);
				p->excl = 0;
				page_drop(c, p);
				wake(c);
				pthread_mutex_unlock(&c->mu);
				return r;
			}
		}
		release(c, p, mode, wb, wb ? 0 : k);
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

/* One round of vc_flush: writes back up to batch_pages dirty pages found at
 * or after *pos in the entry pool, advancing *pos. Host pages are pinned
 * (readers go on, writers wait); GPU pages are busy while they travel
 * through the bulk staging pages. */
static int flush_round(struct vc_cache *c, uint64_t *pos)
{
	struct bulk b;
	int r = bulk_init(c, &b);
	if (r < 0)
		return r;
	pthread_mutex_lock(&c->mu);
	while (*pos < c->ix.npool && b.n < c->batch_pages) {
		struct vc_page *p = &c->ix.pool[*pos];
		if (!p->used || !p->dirty) {
			(*pos)++;
			continue;
		}
		if (p->busy || p->excl) {
			if (b.n)
				break; /* write what we hold before sleeping */
			wait_cv(c);
			continue;
		}
		struct bulk_job *j = &b.jobs[b.n];
		struct vc_bio *io = &b.bios[b.n];
		j->p = p;
		if (p->tier == GPU) {
			if (vc_tier_alloc(c->stage_bulk, &j->stage) < 0) {
				if (b.n)
					break;
				wait_cv(c); /* another flush or prefetch holds them */
				continue;
			}
			j->staged = true;
			p->busy = 1;
			io->buf = vc_tier_host(c->stage_bulk, j->stage);
		} else {
			p->pins++;
			io->buf = host_data(c, p);
		}
		io->off = p->pno << c->pshift;
		io->len = page_len(c, p->pno);
		io->write = 1;
		b.n++;
		(*pos)++;
	}
	pthread_mutex_unlock(&c->mu);

	r = bulk_move(c, &b, true);
	if (r == 0 && b.n)
		r = vc_backing_submit(c->bk, b.bios, b.n);

	pthread_mutex_lock(&c->mu);
	for (unsigned i = 0; i < b.n; i++) {
		struct vc_page *p = b.jobs[i].p;
		if (b.jobs[i].staged) {
			vc_tier_free(c->stage_bulk, b.jobs[i].stage);
			c->st.d2h += c->page_size;
			p->busy = 0;
		} else {
			p->pins--;
		}
		if (b.bios[i].result == 0) {
			p->dirty = 0;
			c->ndirty--;
			c->st.writebacks++;
			c->st.wr_bytes += b.bios[i].len;
		}
	}
	wake(c);
	pthread_mutex_unlock(&c->mu);
	bulk_fini(&b);
	return r;
}

int vc_flush(vc_cache *c)
{
	if (!c)
		return vc_err(-EINVAL, "vc_flush: NULL cache");
	if (c->write_mode == VC_WRITE_BACK) {
		uint64_t pos = 0;
		while (pos < c->ix.npool) {
			int r = flush_round(c, &pos);
			if (r < 0)
				return r;
		}
	}
	return c->readonly ? 0 : vc_backing_sync(c->bk);
}

/* Drops page pno if cached (under c->mu; may sleep and write back). */
static int drop_page(struct vc_cache *c, uint64_t pno, bool discard)
{
	for (;;) {
		struct vc_page *p = vc_index_find(&c->ix, pno);
		if (!p)
			return 0;
		if (p->busy || p->pins || p->excl) {
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
		page_drop(c, p);
		return 0;
	}
}

int vc_drop(vc_cache *c, uint64_t off, uint64_t len, unsigned flags)
{
	if (!c)
		return vc_err(-EINVAL, "vc_drop: NULL cache");
	if (off >= c->size)
		return 0;
	if (len == 0 || len > c->size - off)
		len = c->size - off;
	uint64_t p0 = off >> c->pshift, p1 = (off + len - 1) >> c->pshift;
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
static int prefetch_gpu_round(struct vc_cache *c, uint64_t *pno, uint64_t p1)
{
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
		/* A free GPU slot. With pages of this round in flight (busy,
		 * unqueued) a tiny GPU tier may have no victim but them, so
		 * write those first instead of sleeping on ourselves. */
		bool have = false;
		for (;;) {
			if (vc_tier_alloc(c->tier[GPU], &g) == 0) {
				have = true;
				break;
			}
			r = evict_gpu_one(c);
			if (r == -EAGAIN) {
				r = 0;
				if (b.n)
					break;
				wait_cv(c);
			} else if (r < 0) {
				break;
			}
		}
		if (!have) {
			vc_tier_free(c->stage_bulk, s);
			break;
		}
		if (vc_index_find(&c->ix, *pno)) { /* raced while evicting */
			vc_tier_free(c->stage_bulk, s);
			vc_tier_free(c->tier[GPU], g);
			continue;
		}
		struct vc_page *p = vc_index_insert(&c->ix, *pno);
		p->tier = GPU;
		p->slot = g;
		p->busy = 1;
		b.jobs[b.n] = (struct bulk_job){ .p = p, .stage = s, .staged = true };
		struct vc_bio *io = &b.bios[b.n];
		io->buf = vc_tier_host(c->stage_bulk, s);
		io->off = *pno << c->pshift;
		io->len = page_len(c, *pno);
		if (io->len < c->page_size)
			memset((char *)io->buf + io->len, 0, c->page_size - io->len);
		b.n++;
		(*pno)++;
	}
	pthread_mutex_unlock(&c->mu);

	int e = b.n ? vc_backing_submit(c->bk, b.bios, b.n) : 0;
	int dev_r = bulk_move(c, &b, false);
	pthread_mutex_lock(&c->mu);
	for (unsigned i = 0; i < b.n; i++) {
		struct vc_page *p = b.jobs[i].p;
		vc_tier_free(c->stage_bulk, b.jobs[i].stage);
		p->busy = 0;
		if (b.bios[i].result < 0) {
			page_drop(c, p);
			continue;
		}
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

int vc_prefetch(vc_cache *c, uint64_t off, uint64_t len, int tier)
{
	if (!c)
		return vc_err(-EINVAL, "vc_prefetch: NULL cache");
	if (tier != HOST && tier != GPU)
		return vc_err(-EINVAL, "prefetch: unknown tier %d", tier);
	if (tier == GPU && vc_tier_capacity(c->tier[GPU]) == 0)
		return vc_err(-EINVAL, "prefetch into the GPU tier, but it is disabled (size 0)");
	if (off >= c->size || len == 0)
		return 0;
	if (len > c->size - off)
		len = c->size - off;
	uint64_t p0 = off >> c->pshift, p1 = (off + len - 1) >> c->pshift;
	if (tier == GPU) {
		while (p0 <= p1) {
			int r = prefetch_gpu_round(c, &p0, p1);
			if (r < 0)
				return r;
		}
		return 0;
	}
	for (uint64_t pno = p0; pno <= p1; pno++) {
		struct vc_page *p;
		int r = acquire(c, pno, ACQ_READ, false, &p);
		if (r < 0)
			return r;
		release(c, p, ACQ_READ, false, 0);
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
		st.pages_cached[t] = vc_tier_used(c->tier[t]);
		st.pages_capacity[t] = vc_tier_capacity(c->tier[t]);
	}
	st.misses = c->st.misses;
	st.writebacks = c->st.writebacks;
	st.h2d_bytes = c->st.h2d;
	st.d2h_bytes = c->st.d2h;
	st.backing_read_bytes = c->st.rd_bytes;
	st.backing_write_bytes = c->st.wr_bytes;
	st.dirty_pages = c->ndirty;
	pthread_mutex_unlock(&c->mu);
	st.backing_wait_ns = vc_backing_wait_ns(c->bk);
	st.batches = bs.batches;
	st.batch_pages = bs.pages;
	memcpy(st.batch_hist, bs.hist, sizeof st.batch_hist);
	st.batch_wait_ns = bs.wait_ns;
	memcpy(out, &st, st.size);
	return 0;
}
