/* The public API's entry points that are not page access: configuration,
 * opening and closing caches and volumes, sizes, statistics.
 */
#include <stdio.h>

#include "base/env.h"
#include "engine/engine.h"

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

/* The GPU log's segment size for a part of `bytes`: the configured one,
 * or 4 MiB halved until the part has 16 segments (not below one page). */
static uint32_t seg_bytes(const struct vc_config *cfg, uint64_t bytes)
{
	if (cfg->seg_bytes)
		return cfg->seg_bytes;
	uint32_t sb = 4u << 20;
	while (sb > cfg->page_size && bytes / sb < 16)
		sb >>= 1;
	return sb < cfg->page_size ? cfg->page_size : sb;
}

/* A part's chunk: the configured size, or 256 MiB halved until the part
 * has 4 chunks, not below a segment or the device's mapping granularity
 * (whichever is larger; 0 where the device cannot map: one allocation). */
static uint64_t chunk_bytes(const struct vc_config *cfg, const struct vc_device *dev,
			    uint64_t bytes)
{
	uint64_t g = dev->map_granularity;
	if (!g || !dev->ops->mem_reserve)
		return 0;
	if (cfg->gpu_chunk_bytes)
		return cfg->gpu_chunk_bytes;
	uint64_t unit = g > seg_bytes(cfg, bytes) ? g : seg_bytes(cfg, bytes), cb = 256ull << 20;
	while (cb > unit && bytes / cb < 4)
		cb >>= 1;
	return cb < unit ? unit : cb;
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
	uint32_t sb = seg_bytes(cfg, cfg->gpu_bytes);
	if (cfg->gpu_bytes && (sb < ps || (sb & (sb - 1)) || cfg->gpu_bytes / sb < 2))
		return vc_err(-EINVAL, "GPU tier of %llu bytes in segments of %u bytes: segments must "
				       "be a power of two >= the page size, and the tier must hold "
				       "at least 2", (unsigned long long)cfg->gpu_bytes, sb);
	if (cfg->gpu_dirty < VC_GPU_DIRTY_AUTO || cfg->gpu_dirty > VC_GPU_DIRTY_CLEAN)
		return vc_err(-EINVAL, "unknown gpu_dirty mode %d", cfg->gpu_dirty);
	if ((cfg->host_bytes + cfg->gpu_bytes) / ps >= UINT32_MAX)
		return vc_err(-EINVAL, "tiers of %llu pages: at most 2^32 - 2 pages in all",
			      (unsigned long long)((cfg->host_bytes + cfg->gpu_bytes) / ps));
	if (cfg->demote_batch > 256)
		return vc_err(-EINVAL, "demotion batch of %u pages: 1 to 256 (0: the default)",
			      cfg->demote_batch);
	if (cfg->gpu_hits != VC_GPU_HITS_SERVE && cfg->gpu_hits != VC_GPU_HITS_SWAP)
		return vc_err(-EINVAL, "unknown GPU-hit mode %d", cfg->gpu_hits);
	if (cfg->encrypt != VC_ENCRYPT_OFF && cfg->encrypt != VC_ENCRYPT_XTS &&
	    cfg->encrypt != VC_ENCRYPT_XTS_GMAC)
		return vc_err(-EINVAL, "unknown encryption mode %d", cfg->encrypt);
	if (cfg->key_file && cfg->encrypt == VC_ENCRYPT_OFF)
		return vc_err(-EINVAL, "a key file (%s) but encryption is off", cfg->key_file);
	if (cfg->dedup != VC_DEDUP_OFF && cfg->dedup != VC_DEDUP_ON && cfg->dedup != VC_DEDUP_ADAPTIVE)
		return vc_err(-EINVAL, "unknown dedup mode %d", cfg->dedup);
	if (cfg->dedup_algo != VC_DEDUP_LANES && cfg->dedup_algo != VC_DEDUP_MURMUR3 &&
	    cfg->dedup_algo != VC_DEDUP_MD5)
		return vc_err(-EINVAL, "unknown dedup hash %d", cfg->dedup_algo);
	uint32_t dd = eng_dd_degree(ps, cfg->dedup_degree);
	if ((cfg->dedup_degree || cfg->dedup) && dd != 1 && dd != 2 && dd != 4 && dd != 8)
		return vc_err(-EINVAL, "dedup degree %u: 1, 2, 4 or 8 blocks per page", dd);
	if (cfg->dedup && (ps / dd < VC_FP_BLOCK_MIN || ps / dd > VC_FP_BLOCK_MAX))
		return vc_err(-EINVAL, "dedup blocks of %u bytes (page %u / degree %u): must be %u B "
				       "to %u KiB", ps / dd, ps, dd, VC_FP_BLOCK_MIN,
			      VC_FP_BLOCK_MAX >> 10);
	if (cfg->dirty_ratio != 0 && !(cfg->dirty_ratio >= 0.01 && cfg->dirty_ratio <= 0.9))
		return vc_err(-EINVAL, "dirty ratio %g: 0.01 to 0.9 of the host tier (0: 0.5)",
			      cfg->dirty_ratio);
	if (!(cfg->dirty_background_ratio >= 0 && cfg->dirty_background_ratio <= 1))
		return vc_err(-EINVAL, "dirty background ratio %g: 0 to 1 of the host tier",
			      cfg->dirty_background_ratio);
	if (cfg->dedup_max_factor > 64)
		return vc_err(-EINVAL, "dedup max factor %u: 1 to 64 (0: 8)", cfg->dedup_max_factor);
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
	vc_dset_destroy(v->dirty);
	free(v);
}

/* Opens a backing store (path, fd, or the caller's store when `store` is
 * not NULL) as volume id (a free slot) and publishes it. */
static int vol_open(struct vc_cache *c, uint32_t id, const char *path, int fd,
		    const struct vc_store *store, uint32_t flags)
{
	struct vc_volume *v = calloc(1, sizeof *v);
	if (!v)
		return vc_err(-ENOMEM, "out of memory");
	*v = (struct vc_volume){ .c = c, .id = id, .base = (uint64_t)id << VC_PNO_VOL_SHIFT,
				 .readonly = flags & VC_OPEN_READONLY, .dd_on = true,
				 .dd_est_factor = 1 };
	int r = vc_dset_create(&v->dirty);
	if (r == 0)
		r = store ? vc_backing_open_store(store, v->readonly, c->latency_ns, &v->bk)
			  : vc_backing_open(path, path ? -1 : fd, v->readonly, c->latency_ns, &v->bk);
	if (r < 0) {
		vol_free(v);
		return r;
	}
	v->size = vc_backing_size(v->bk);
	/* Pages, and with encryption the cipher's units (engine.h's
	 * page_tweak), are numbered in 48 bits. */
	const uint64_t units = (v->size >> c->pshift) * (c->gt.cipher ? c->gt.units_per_page : 1);
	if (units > VC_PNO_INDEX_MASK || v->size >> c->pshift > VC_PNO_INDEX_MASK) {
		unsigned long long sz = v->size;
		vol_free(v);
		return vc_err(-EFBIG, "backing store of %llu bytes: more than 2^%d pages%s", sz,
			      VC_PNO_VOL_SHIFT, c->gt.cipher ? " or cipher units" : "");
	}
	eng_lock(c);
	c->vols[id] = v;
	eng_unlock(c);
	return 0;
}

/* The size of every device move: a page, or with dedup a block (the
 * cipher's data unit then, its tweak the block's). */
static uint32_t move_size(const struct vc_cache *c)
{
	return c->dd.mode ? c->page_size / c->dd.D : c->page_size;
}

/* The GPU tier's key (vc_config.encrypt): from the key file or random,
 * in locked memory (base/secret.h), checked as the cipher requires. */
static int key_open(struct vc_cache *c, const struct vc_config *cfg)
{
	if (cfg->encrypt == VC_ENCRYPT_OFF || !cfg->gpu_bytes)
		return 0;
	c->gt.units_per_page = c->page_size > VC_XTS_UNIT_MAX ? c->page_size / VC_XTS_UNIT_MAX : 1;
	int r = cfg->key_file ? vc_secret_load(cfg->key_file, VC_XTS_KEY_BYTES, &c->gt.key)
			      : vc_secret_random(VC_XTS_KEY_BYTES, &c->gt.key);
	if (r < 0)
		return r;
	c->gt.xkey = (const struct vc_xts_key *)c->gt.key->bytes;
	r = vc_xts_check(c->gt.xkey, move_size(c) < VC_XTS_UNIT_MAX ? move_size(c) : VC_XTS_UNIT_MAX);
	if (r < 0 && cfg->key_file) {
		char why[256];
		snprintf(why, sizeof why, "%s", vc_last_error());
		return vc_err(r, "key file %s: %s", cfg->key_file, why);
	}
	c->gt.cipher = r == 0;
	return r;
}

/* Part i's device: the configured kind for part 0, then part 0's backend
 * for the others (AUTO must not open CUDA for one part and fall back to
 * emu for another). */
static int part_dev_open(struct vc_cache *c, int kind, uint32_t i, int ord)
{
	if (i > 0)
		kind = strcmp(c->gpus[0].dev->ops->name, "cuda") == 0 ? VC_DEVICE_CUDA : VC_DEVICE_EMU;
	return vc_device_open(kind, ord, &c->gpus[i].dev);
}

/* Which parts each part's moves reach (vc_gpu.peers): itself, parts on
 * the same device, and parts whose devices enabled peer access. A pair
 * that cannot is not an error: moves between them go through host memory. */
static void parts_link(struct vc_cache *c)
{
	for (uint32_t i = 0; i < c->ngpus; i++)
		c->gpus[i].peers |= 1u << i;
	/* VC_GPU_P2P=off: every move between parts through host memory (for
	 * tests and measuring one path against the other). */
	const char *p2p = getenv("VC_GPU_P2P");
	if (p2p && strcmp(p2p, "off") == 0)
		return;
	for (uint32_t i = 0; i < c->ngpus; i++)
		for (uint32_t j = i + 1; j < c->ngpus; j++) {
			struct vc_gpu *a = &c->gpus[i], *b = &c->gpus[j];
			if (vc_device_same(a->dev, b->dev) || vc_device_peer_enable(a->dev, b->dev) == 0) {
				a->peers |= 1u << j;
				b->peers |= 1u << i;
			}
		}
}

/* Part g's share of the tier: its log store (`bytes`), staging pages,
 * move queue and cleaning scratch. *pages: the log's capacity. */
static int part_open(struct vc_cache *c, const struct vc_config *cfg, struct vc_gpu *g,
		     uint64_t bytes, uint32_t owners, uint64_t *pages)
{
	uint32_t sb = seg_bytes(cfg, bytes);
	if (bytes && bytes / sb < 2)
		return vc_err(-EINVAL, "GPU part %u of %llu bytes holds fewer than 2 segments of %u "
				       "bytes: give the tier more bytes or the part more weight",
			      g->idx, (unsigned long long)bytes, sb);
	struct vc_ls_config lc = { .page_size = move_size(c),
				   .seg_bytes = sb,
				   .total_bytes = bytes,
				   .free_watermark = cfg->gc_watermark,
				   .early_release = cfg->early_release,
				   /* page ids: the pool's (every part's where[] covers
				    * every page id); or block ids: a block a slot */
				   .owners = owners,
				   .chunk_bytes = chunk_bytes(cfg, g->dev, bytes) };
	int r = bytes ? vc_ls_open(g->dev, &lc, &g->ls) : 0; /* no tier: staging and moves still */
	if (r == 0)
		*pages = g->ls ? vc_ls_capacity(g->ls) : 0;
	if (r == 0)
		r = vc_tier_open(g->dev, HOST, WB_STAGING_PAGES, c->page_size, &g->stage_wb);
	/* A batch for each of a prefetch's workers, whose rounds overlap;
	 * past one batch, at most STAGE_BULK_BYTES (workers beyond it share
	 * the pages: their rounds take fewer, or wait for them). */
	uint64_t stage = (uint64_t)cfg->batch_pages * c->prefetchers;
	if (stage * c->page_size > STAGE_BULK_BYTES)
		stage = STAGE_BULK_BYTES / c->page_size;
	if (stage < cfg->batch_pages)
		stage = cfg->batch_pages;
	if (r == 0)
		r = vc_tier_open(g->dev, HOST, (uint32_t)stage, c->page_size, &g->stage_bulk);
	if (r == 0)
		r = vc_batcher_create(g->dev, move_size(c), cfg->batch_pages, cfg->batch_timeout_us,
				      c->gt.xkey, &g->bat);
	if (r == 0 && g->ls) {
		uint64_t held = (uint64_t)c->gt.gc_segments * vc_ls_slots_per_seg(g->ls);
		/* With dedup a segment's blocks have any number of pages:
		 * eng_dd_claim allocates for each step instead. */
		if (!(g->gc_held = malloc(held * sizeof *g->gc_held)))
			r = vc_err(-ENOMEM, "out of memory");
	}
	return r;
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
	uint32_t nparts = 0;
	int ord[VC_GPUS_MAX];
	double w[VC_GPUS_MAX], wsum = 0;
	if ((r = eng_gpus_parse(cfg.gpus, cfg.device, cfg.device_ordinal, &nparts, ord, w)) < 0)
		return r;
	if (nparts > 1 && cfg.dedup)
		return vc_err(-VC_ECONFIG, "dedup stores blocks on one GPU: it does not span %u parts "
					   "(vc_config.gpus)", nparts);
	for (uint32_t i = 0; i < nparts; i++)
		wsum += w[i];
	struct vc_cache *c = calloc(1, sizeof *c);
	if (!c)
		return vc_err(-ENOMEM, "out of memory");
	/* The engine lock spins a while before it sleeps (base/mutex.h):
	 * that a sleeper's wake-up cost each contended acquisition 12-20 us
	 * made tier moves bound by the acquisitions' number more than by the
	 * holds' length (docs/DEDUP.md, step 9: dedup off, demote and swap
	 * 15-45 % faster). */
	vc_mutex_init_spin(&c->mu);
	c->mu_spin_ns = vc_mutex_spin_ns();
	vc_cond_init_monotonic(&c->cv);
	vc_cond_init_monotonic(&c->slot_cv);
	for (int b = 0; b < PW_BUCKETS; b++)
		vc_cond_init_monotonic(&c->pw_cv[b]);
	c->page_size = cfg.page_size;
	c->pshift = (unsigned)__builtin_ctz(cfg.page_size);
	c->write_mode = cfg.write_mode;
	c->latency_ns = cfg.backing_latency_ns;
	c->batch_pages = cfg.batch_pages;
	c->gt.gc_policy = cfg.gc_policy;
	c->gt.gc_segments = cfg.gc_segments;
	c->gt.gc_frag = cfg.gc_fragmentation;
	c->gt.clean_down = cfg.write_mode == VC_WRITE_BACK &&
			   (cfg.gpu_dirty == VC_GPU_DIRTY_CLEAN ||
			    (cfg.gpu_dirty == VC_GPU_DIRTY_AUTO && nparts > 1));
	c->ngpus = nparts;
	c->demote_batch = cfg.demote_batch ? cfg.demote_batch : 32;
	c->demoters_max = vc_env_u32("VC_DEMOTERS", 8, 1, 16);
	c->prefetchers = vc_env_u32("VC_PREFETCHERS", 4, 1, PREFETCHERS_MAX);
	const bool prof = getenv("VC_GPU_SHRINK_PROFILE") != NULL;
	for (uint32_t i = 0; i < nparts; i++) {
		struct vc_gpu *g = &c->gpus[i];
		g->idx = i;
		g->weight = w[i];
		g->profile = prof;
		pthread_mutex_init(&g->resize_mu, NULL);
	}
	if (cfg.dedup && cfg.gpu_bytes) { /* the degree for move_size; eng_dd_open the rest */
		c->dd.mode = cfg.dedup;
		c->dd.D = eng_dd_degree(c->page_size, cfg.dedup_degree);
	}
	uint64_t host_pages = cfg.host_bytes >> c->pshift;
	uint64_t gpu_pages = 0;
	/* At least one page, at most host_pages - MIN_HOST_PAGES / 2: clean
	 * pages enough for the threads that pin some while the store refuses. */
	const double ratio = cfg.dirty_ratio ? cfg.dirty_ratio : DIRTY_RATIO_DEFAULT;
	c->dirty_max = (uint64_t)((double)host_pages * ratio);
	if (c->dirty_max > host_pages - MIN_HOST_PAGES / 2)
		c->dirty_max = host_pages - MIN_HOST_PAGES / 2;
	if (c->dirty_max == 0)
		c->dirty_max = 1;
	c->dirty_bg = cfg.dirty_background_ratio == 0 ? c->dirty_max / 2
		      : cfg.dirty_background_ratio >= ratio
			  ? c->dirty_max
			  : (uint64_t)((double)host_pages * cfg.dirty_background_ratio);

	r = key_open(c, &cfg);
	if (r == 0)
		r = vol_open(c, 0, cfg.backing_path, cfg.backing_path ? -1 : cfg.backing_fd, NULL,
			     cfg.flags);
	for (uint32_t i = 0; r == 0 && i < nparts; i++)
		r = part_dev_open(c, cfg.device, i, ord[i]);
	/* The emulated device encrypts with OpenSSL, which a build may lack:
	 * a cipher call of no pages says so. */
	if (r == 0 && c->gt.cipher && strcmp(c->gpus[0].dev->ops->name, "emu") == 0)
		r = vc_emu_xts_pages(c->gt.xkey, NULL, NULL, 0, move_size(c) < VC_XTS_UNIT_MAX ?
							 move_size(c) : VC_XTS_UNIT_MAX, 1);
	if (r == 0)
		parts_link(c);
	/* Pinned host memory comes from part 0's device; it is portable
	 * (every device reaches it at the same address). */
	if (r == 0)
		r = vc_tier_open(c->gpus[0].dev, HOST, host_pages, c->page_size, &c->host);
	const uint32_t owners = (uint32_t)(c->dd.mode ? cfg.gpu_bytes / move_size(c)
						      : host_pages + (cfg.gpu_bytes >> c->pshift));
	for (uint32_t i = 0; r == 0 && i < nparts; i++) {
		uint64_t bytes = (uint64_t)((double)cfg.gpu_bytes * (w[i] / wsum));
		uint64_t pages = 0;
		r = part_open(c, &cfg, &c->gpus[i], bytes, owners, &pages);
		gpu_pages += pages;
	}
	if (r == 0 && cfg.gpu_bytes) {
		r = eng_dd_open(c, &cfg, host_pages);
		if (r == 0 && eng_dd(c))
			gpu_pages = c->dd.page_cap; /* logical pages: the pool's share */
	}
	c->gt.serve = cfg.gpu_hits == VC_GPU_HITS_SERVE && cfg.gpu_bytes;
	/* VC_MISS_PATH=locked: misses and writes take the engine lock as
	 * before the lock-free path (for measuring one against the other). */
	const char *lp = getenv("VC_LOCK_PROFILE");
	c->lock_prof_ns = lp ? (uint64_t)(strtod(lp, NULL) * 1000) : 0;
	const char *mp = getenv("VC_MISS_PATH");
	c->miss_fast = !(mp && strcmp(mp, "locked") == 0);
	if (r == 0 && c->gt.serve) {
		c->gt.bounce_per = BOUNCE_BYTES / c->page_size ? BOUNCE_BYTES / c->page_size : 1;
		uint64_t threads = BOUNCE_TOTAL / ((uint64_t)c->gt.bounce_per * c->page_size);
		c->gt.bounce_threads = threads < 16 ? 16 : threads > MAX_QUEUE_THREADS ? MAX_QUEUE_THREADS
										 : (uint32_t)threads;
		r = vc_tier_open(c->gpus[0].dev, HOST,
				 (uint64_t)c->gt.bounce_threads * c->gt.bounce_per, c->page_size,
				 &c->gt.bounce);
	}
	for (uint32_t i = 0; i < MAX_QUEUE_THREADS; i++)
		c->ts[i].idx = i;
	if (r == 0)
		r = vc_index_init(&c->ix, host_pages + gpu_pages);
	if (r == 0 && c->gt.cipher && cfg.encrypt == VC_ENCRYPT_XTS_GMAC)
		r = eng_integ_open(c, host_pages + gpu_pages);
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
			c->tls_ok = pthread_key_create(&c->tls, eng_tstate_release) == 0;
	}
	if (r == 0)
		r = eng_flusher_start(c);
	if (r < 0) {
		c->write_mode = VC_WRITE_THROUGH; /* nothing to flush */
		vc_close(c);
		return r;
	}
	*out = c;
	return 0;
}

/* Under c->mu (VC_LOCK_PROFILE): one long hold ended by fn. Sites are
 * string literals (__func__), so compared by address; the table keeps the
 * first 16. */
void eng_lock_profile(struct vc_cache *c, const char *fn, uint64_t ns)
{
	for (int i = 0; i < 16; i++) {
		struct lock_site *s = &c->lock_sites[i];
		if (s->fn && s->fn != fn)
			continue;
		s->fn = fn;
		s->n++;
		s->total_ns += ns;
		if (ns > s->max_ns)
			s->max_ns = ns;
		return;
	}
}

void eng_lock_profile_print(struct vc_cache *c, const char *what)
{
	fprintf(stderr, "engine lock%s%s: %llu holds; those of %.3f us or more, by the function "
			"that ended them:\n",
		what ? ", " : "", what ? what : "", (unsigned long long)c->lock_holds,
		(double)c->lock_prof_ns / 1e3);
	for (int i = 0; i < 16 && c->lock_sites[i].fn; i++) {
		const struct lock_site *s = &c->lock_sites[i];
		fprintf(stderr, "  %-24s %10llu holds, mean %7.2f us, max %7.1f us, total %8.2f ms\n",
			s->fn, (unsigned long long)s->n, (double)s->total_ns / 1e3 / (double)s->n,
			(double)s->max_ns / 1e3, (double)s->total_ns / 1e6);
	}
	memset(c->lock_sites, 0, sizeof c->lock_sites);
}

int vc_close(vc_cache *c)
{
	if (!c)
		return 0;
	int r = 0;
	eng_flusher_stop(c);
	eng_dd_later_close(c);
	for (uint32_t i = 0; i < c->ngpus; i++)
		if (c->gpus[i].ls)
			eng_gpu_resize_fini(c, &c->gpus[i]); /* a shrink's drops, still running */
	if (c->lk && c->ndirty)
		r = vc_flush(c);
	if (c->lock_prof_ns)
		eng_lock_profile_print(c, NULL);
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
	for (uint32_t i = 0; i < c->ngpus; i++)
		vc_batcher_destroy(c->gpus[i].bat);
	vc_tier_close(c->gt.bounce);
	eng_dd_close(c);
	for (uint32_t i = 0; i < c->ngpus; i++) {
		struct vc_gpu *g = &c->gpus[i];
		free(g->gc_held);
		vc_tier_close(g->stage_bulk);
		vc_tier_close(g->stage_wb);
		vc_ls_close(g->ls);
	}
	vc_tier_close(c->host);
	/* Part 0's device last: it holds the host tier's memory (closed
	 * above) and, on CUDA, others share its context where they share its
	 * ordinal. */
	for (uint32_t i = c->ngpus; i-- > 0;) {
		vc_device_close(c->gpus[i].dev);
		pthread_mutex_destroy(&c->gpus[i].resize_mu);
	}
	vc_secret_free(c->gt.key);
	eng_integ_close(c);
	for (uint32_t i = 0; i < VC_VOLUMES_MAX; i++)
		if (c->vols[i])
			vol_free(c->vols[i]);
	pthread_cond_destroy(&c->cv);
	pthread_cond_destroy(&c->slot_cv);
	for (int b = 0; b < PW_BUCKETS; b++)
		pthread_cond_destroy(&c->pw_cv[b]);
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

/* A free volume slot past 0, or VC_VOLUMES_MAX. Finding it unlocked
 * against opens is safe: volume calls may not race with each other's open
 * and close (header), so nobody else takes the slot before vol_open. */
static uint32_t vol_free_slot(struct vc_cache *c)
{
	eng_lock(c);
	uint32_t id = 1;
	while (id < VC_VOLUMES_MAX && c->vols[id])
		id++;
	eng_unlock(c);
	return id;
}

static int vol_open_any(vc_cache *c, const char *path, int fd, const struct vc_store *store,
			uint32_t flags, vc_volume **out)
{
	if (flags & ~(uint32_t)VC_OPEN_READONLY)
		return vc_err(-EINVAL, "vc_volume_open: unknown flags %#x", flags);
	uint32_t id = vol_free_slot(c);
	if (id == VC_VOLUMES_MAX)
		return vc_err(-EMFILE, "a cache holds at most %d volumes", VC_VOLUMES_MAX);
	int r = vol_open(c, id, path, fd, store, flags);
	if (r == 0)
		*out = c->vols[id];
	return r;
}

int vc_volume_open(vc_cache *c, const char *path, int fd, uint32_t flags, vc_volume **out)
{
	if (!c || !out || (!path && fd < 0))
		return vc_err(-EINVAL, "vc_volume_open: NULL argument or no backing store");
	return vol_open_any(c, path, fd, NULL, flags, out);
}

int vc_volume_open_store(vc_cache *c, const struct vc_store *store, uint32_t flags,
			 vc_volume **out)
{
	if (!c || !out || !store)
		return vc_err(-EINVAL, "vc_volume_open_store: NULL argument");
	if (store->size < offsetof(struct vc_store, sync) + sizeof store->sync || store->version < 1)
		return vc_err(-EINVAL, "vc_volume_open_store: struct vc_store of %u bytes, "
				       "version %u: start from VC_STORE_VERSION",
			      store->size, store->version);
	if (!store->read || !store->sync || (!store->write && !(flags & VC_OPEN_READONLY)))
		return vc_err(-EINVAL, "vc_volume_open_store: a read, write or sync callback "
				       "is missing");
	return vol_open_any(c, NULL, -1, store, flags, out);
}

uint32_t vc_page_size(const vc_cache *c)
{
	return c->page_size;
}

const char *vc_device_name(const vc_cache *c)
{
	return c->gpus[0].dev->ops->name;
}

const char *vc_device_desc(const vc_cache *c)
{
	return c->gpus[0].dev->desc;
}

/* Under c->mu, which takes dd.mu: the dedup figures (vc_stats v6);
 * blocks: live slots, of which dd.kept hold no page (kept for pages that
 * are up, GRAM swap) and are not counted. */
static void dd_stats(struct vc_cache *c, uint64_t blocks, struct vc_stats *st)
{
	struct eng_dedup *d = &c->dd;
	dd_lock(d);
	blocks = blocks > d->kept ? blocks - d->kept : 0;
	st->dedup_pages = d->pages;
	st->dedup_blocks = blocks;
	st->dedup_factor = blocks ? (double)(d->pages * d->D) / (double)blocks : 1;
	st->dedup_blocks_in = d->blocks_in;
	st->dedup_hits = d->hits;
	st->dedup_collisions = d->collisions;
	st->dedup_switches = d->switches;
	/* The data's factor (sampled by content over every volume: the
	 * sharing between volumes counts) and the update ratio, the
	 * volumes' mean. */
	double u = 0;
	uint32_t nv = 0;
	for (uint32_t i = 0; i < VC_VOLUMES_MAX; i++) {
		const struct vc_volume *v = c->vols[i];
		if (!v)
			continue;
		st->dedup_volumes_on += v->dd_on || d->mode == VC_DEDUP_ON;
		u += v->dd_est_upd;
		nv++;
	}
	st->dedup_est_factor = eng_est_factor(c);
	dd_unlock(d);
	st->dedup_est_update_ratio = nv ? u / nv : 0;
}

int vc_get_stats(vc_cache *c, struct vc_stats *out)
{
	if (!c || !out || out->size < offsetof(struct vc_stats, hits))
		return vc_err(-EINVAL, "vc_get_stats: NULL argument or size not set");
	struct vc_stats st;
	memset(&st, 0, sizeof st);
	st.size = out->size < sizeof st ? out->size : (uint32_t)sizeof st;
	st.version = VC_STATS_VERSION;
	for (uint32_t i = 0; i < c->ngpus; i++) {
		struct vc_batcher_stats bs;
		vc_batcher_get_stats(c->gpus[i].bat, &bs);
		st.batches += bs.batches;
		/* The batcher counts moves of its unit, a block with dedup:
		 * pages are D of them. */
		st.batch_pages += bs.pages * move_size(c) / c->page_size;
		for (int h = 0; h < VC_BATCH_HIST; h++)
			st.batch_hist[h] += bs.hist[h];
		st.batch_wait_ns += bs.wait_ns;
	}
	eng_dd_later_drain(c); /* the dedup figures count every block down so far */
	eng_lock(c);
	for (int t = 0; t < VC_TIER_COUNT; t++) {
		st.hits[t] = c->st.hits[t];
		st.evictions[t] = c->st.evictions[t];
		for (uint32_t i = 0; i < MAX_QUEUE_THREADS; i++)
			st.hits[t] += atomic_load_explicit(&c->ts[i].hits[t], memory_order_relaxed);
	}
	st.pages_cached[HOST] = vc_tier_used(c->host);
	st.pages_capacity[HOST] = vc_tier_capacity(c->host);
	uint64_t used = 0; /* slots live or dead, every part: fragmentation's weight */
	for (uint32_t i = 0; i < c->ngpus && c->gpus[i].ls; i++) {
		const struct vc_gpu *g = &c->gpus[i];
		struct vc_ls_stats ls;
		vc_ls_get_stats(g->ls, &ls);
		used += ls.slots_live + ls.slots_dead;
		st.gpus++;
		st.pages_cached[GPU] += eng_dd(c) ? c->dd.pages : ls.slots_live;
		st.pages_capacity[GPU] += vc_ls_capacity(g->ls) / eng_mpp(c);
		if (eng_dd(c))
			dd_stats(c, ls.slots_live, &st);
		st.gpu_segments += ls.segs_total;
		st.gpu_segments_free += ls.segs_free;
		st.gc_runs += ls.gc_runs;
		st.gc_pages_moved += ls.gc_pages_moved;
		st.gc_ns += g->gc_ns;
		st.gpu_segments_evicted += ls.segs_evicted;
		st.early_releases += ls.early_releases;
		st.gpu_bytes += vc_ls_bytes(g->ls);
		st.gpu_bytes_max += vc_ls_bytes_max(g->ls);
		st.gpu_chunk_bytes = vc_ls_nchunks(g->ls) ? vc_ls_chunk_bytes(g->ls, 0) : 0;
		st.gpu_peer_pages += g->n_peer_in;
		/* The tier's fragmentation: dead slots over used ones, all parts. */
		st.gpu_fragmentation += ls.fragmentation * (double)(ls.slots_live + ls.slots_dead);
		st.gpu_chunks_released += atomic_load(&g->rs.chunks_released);
		st.gpu_chunks_regained += atomic_load(&g->rs.chunks_regained);
		st.gpu_bytes_released += atomic_load(&g->rs.bytes_released);
		st.gpu_bytes_released_requested += atomic_load(&g->rs.bytes_released_req);
		st.gpu_shrink_pages_moved += atomic_load(&g->rs.pages_moved);
		st.gpu_shrinks += atomic_load(&g->rs.shrinks);
		st.gpu_shrink_ns_total += atomic_load(&g->rs.shrink_ns_total);
		uint64_t mx = atomic_load(&g->rs.shrink_ns_max);
		st.gpu_shrink_ns_max = mx > st.gpu_shrink_ns_max ? mx : st.gpu_shrink_ns_max;
		st.gpu_shrink_ns_last = atomic_load(&g->rs.shrink_ns_last);
		st.gpu_shrink_drop_ns_total += atomic_load(&g->rs.drop_ns_total);
	}
	st.gpu_fragmentation = used ? st.gpu_fragmentation / (double)used : 0;
	st.gpus_failed = c->gt.failed;
	st.gpu_dirty_lost = c->gt.dirty_lost;
	st.dirty_limit = c->dirty_max;
	st.writes_limited = atomic_load(&c->writes_limited);
	st.writeback_refusals = atomic_load(&c->refusals);
	st.misses = c->st.misses;
	st.writebacks = c->st.writebacks;
	st.h2d_bytes = c->st.h2d;
	st.d2h_bytes = c->st.d2h;
	st.backing_read_bytes = c->st.rd_bytes;
	st.backing_write_bytes = c->st.wr_bytes;
	for (uint32_t i = 0; i < MAX_QUEUE_THREADS; i++) { /* the lock-free paths' counts */
		const struct tstate *t = &c->ts[i];
		st.d2h_bytes += atomic_load_explicit(&t->d2h, memory_order_relaxed);
		st.misses += atomic_load_explicit(&t->misses, memory_order_relaxed);
		st.backing_read_bytes += atomic_load_explicit(&t->rd_bytes, memory_order_relaxed);
		st.backing_write_bytes += atomic_load_explicit(&t->wr_bytes, memory_order_relaxed);
	}
	st.dirty_pages = c->ndirty;
	st.lock_holds = c->lock_holds;
	memcpy(st.lock_hold_hist, c->lock_hist, sizeof st.lock_hold_hist);
	st.lock_hold_max_ns = c->lock_max_ns;
	for (uint32_t i = 0; i < VC_VOLUMES_MAX; i++)
		if (c->vols[i])
			st.backing_wait_ns += vc_backing_wait_ns(c->vols[i]->bk);
	eng_unlock(c);
	st.integrity_failures = atomic_load(&c->gt.integ_failures);
	st.integrity_drops = atomic_load(&c->gt.integ_drops);
	st.integrity_dirty_lost = atomic_load(&c->gt.integ_dirty_lost);
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
	pthread_mutex_lock(&c->fl.mu); /* the background write-back's rounds use it */
	eng_lock(c);
	c->vols[v->id] = NULL;
	eng_unlock(c);
	pthread_mutex_unlock(&c->fl.mu);
	vol_free(v);
	return 0;
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
