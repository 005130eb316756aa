/* The engine against a reference model.
 *
 * A shadow copy of the backing store is the model. Threads do random
 * aligned and unaligned reads and writes, each on byte regions it alone
 * owns (regions are 1000 bytes, so owners share pages and every page sees
 * concurrent read-modify-writes), and check every byte they read against
 * the shadow. Another thread flushes, drops and prefetches at random, which
 * must not change any byte. Tiers are tiny and batches small, so pages move
 * between tiers, get evicted and written back all the time. Runs for both
 * write modes and two page sizes, on the device named by VC_TEST_DEVICE,
 * and with the GPU log's cleaner forced to run often (tiny segments, high
 * watermarks, low fragmentation thresholds) under both cleaning policies,
 * and switched off.
 * After each run the backing file itself must equal the shadow.
 * With dedup on, the file's contents repeat (t_pool_byte: whole pages and
 * 512-byte blocks drawn from a pool of four), and a third of the writes
 * put a range back to its pool bytes, so blocks are shared, unshared by
 * the random writes and shared again, while cleaning and tail eviction run.
 * The indexer (dedup_later.c, on unless VC_DD_LATER=0) takes the direct
 * trips' blocks meanwhile, merging their duplicates late.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "base/hash.h"
#include "device/device.h"
#include "engine/debug.h"
#include "policy/policy.h"
#include "testutil.h"

#define NTHREADS 4
#define REGION 1000

struct run {
	vc_cache *c;
	const struct t_pool *pool; /* dedup runs: contents repeat (t_pool_byte), or NULL */
	unsigned char *shadow;
	uint64_t size;
	int ops;
	int write_mode;
	atomic_int stop;
	atomic_int done_ops; /* the workers' operations so far */
	int fault;           /* several GPUs: fail part fault - 1 a third into the run (0: none) */
	int kind;            /* the device kind */
	bool shuffle;        /* several GPUs: evacuate, re-weight and rebalance parts meanwhile */
	uint64_t evacuations;
};

struct worker {
	struct run *run;
	int id;
	uint64_t seed;
};

static uint64_t nregions(const struct run *r)
{
	return r->size / REGION;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->run;
	unsigned char *buf = malloc(4 * REGION);
	uint64_t nreg = nregions(r);
	for (int op = 0; op < r->ops; op++) {
		/* Half the ops on the first eighth of the file: a hot set that
		 * fits the two tiers, so pages come back from the GPU tier. */
		uint64_t span = nreg / NTHREADS;
		if (t_rand(&w->seed) % 2)
			span /= 8;
		uint64_t reg = t_rand(&w->seed) % span * NTHREADS + (uint64_t)w->id;
		uint64_t base = reg * REGION;
		uint64_t a = t_rand(&w->seed) % REGION, b = t_rand(&w->seed) % REGION;
		if (a > b) {
			uint64_t t = a;
			a = b;
			b = t;
		}
		uint64_t off = base + a, len = b - a + 1;
		if (r->pool && t_rand(&w->seed) % 3 == 0) {
			t_pool_write(r->c, r->pool, r->shadow, buf, off, len);
		} else if (t_rand(&w->seed) % 3 == 0) {
			for (uint64_t i = 0; i < len; i++)
				buf[i] = (unsigned char)t_rand(&w->seed);
			ssize_t n = vc_write(r->c, buf, len, off);
			CHECK_OK(n);
			CHECK((uint64_t)n == len);
			memcpy(r->shadow + off, buf, len);
		} else {
			atomic_fetch_add(&r->done_ops, 1);
			memset(buf, 0xEE, len);
			ssize_t n = vc_read(r->c, buf, len, off);
			CHECK_OK(n);
			CHECK((uint64_t)n == len);
			if (memcmp(buf, r->shadow + off, len) != 0) {
				for (uint64_t i = 0; i < len; i++)
					if (buf[i] != r->shadow[off + i]) {
						fprintf(stderr, "byte %llu: got %02x want %02x\n",
							(unsigned long long)(off + i), buf[i],
							r->shadow[off + i]);
						break;
					}
				CHECK(!"read returned wrong bytes");
			}
		}
	}
	free(buf);
	return NULL;
}

/* Flush, drop and prefetch at random while the workers run: none of them
 * may change a byte. */
static void *chaos_main(void *arg)
{
	struct run *r = arg;
	t_chaos_x(r->c, r->size, 99, &r->stop, r->fault != 0);
	return NULL;
}

/* Several GPUs: a third into the run one part's device fails (the engine
 * must go on with the rest, every byte right), and/or parts are emptied
 * into the others, given their share back and rebalanced, over and over
 * (pages move between parts under the workers' reads and writes). */
static void *parts_main(void *arg)
{
	struct run *r = arg;
	const int third = r->ops * NTHREADS / 3;
	bool faulted = r->fault == 0;
	const unsigned n = vc_gpu_count(r->c);
	for (unsigned i = 0; !atomic_load(&r->stop); i++) {
		if (!faulted && atomic_load(&r->done_ops) >= third) {
			CHECK_OK(eng_debug_gpu_fault(r->c, (unsigned)r->fault - 1));
			faulted = true;
		}
		if (r->shuffle && faulted) {
			unsigned k = i % n;
			struct vc_gpu_stats gs = { .size = sizeof gs };
			CHECK_OK(vc_get_gpu_stats(r->c, k, &gs));
			if (!gs.failed) {
				uint64_t moved = 0;
				int e = vc_gpu_evacuate(r->c, k, &moved);
				/* The last part that takes pages may not be emptied. */
				if (e != 0 && e != -EINVAL)
					fprintf(stderr, "vc_gpu_evacuate(%u): %d (%s)\n", k, e,
						vc_last_error());
				CHECK(e == 0 || e == -EINVAL);
				if (e == 0) {
					CHECK_OK(vc_get_gpu_stats(r->c, k, &gs));
					CHECK(gs.pages_cached == 0 && gs.weight == 0);
					r->evacuations++;
					CHECK_OK(vc_gpu_set_weight(r->c, k, 1));
				}
				CHECK_OK(vc_gpu_rebalance(r->c, &moved));
			}
		}
		usleep(2000);
	}
	return NULL;
}


/* Single-threaded large operations: multi-page unaligned reads and writes,
 * the partial last page, reads past the end, a write past the end. */
static void big_ops(struct run *r, uint64_t *seed)
{
	uint64_t size = r->size;
	unsigned char *buf = malloc(300000);
	for (int i = 0; i < 40; i++) {
		uint64_t len = 1 + t_rand(seed) % 300000;
		uint64_t off = t_rand(seed) % (size - len);
		if (i % 2) {
			for (uint64_t k = 0; k < len; k++)
				buf[k] = (unsigned char)t_rand(seed);
			CHECK(vc_write(r->c, buf, len, off) == (ssize_t)len);
			memcpy(r->shadow + off, buf, len);
		} else {
			CHECK(vc_read(r->c, buf, len, off) == (ssize_t)len);
			CHECK(memcmp(buf, r->shadow + off, len) == 0);
		}
	}
	/* The last, partial page. */
	CHECK(vc_read(r->c, buf, 5000, size - 100) == 100);
	CHECK(memcmp(buf, r->shadow + size - 100, 100) == 0);
	CHECK(vc_read(r->c, buf, 10, size) == 0);
	CHECK(vc_read(r->c, buf, 10, size + 12345) == 0);
	memset(buf, 0x5A, 300);
	CHECK(vc_write(r->c, buf, 300, size - 300) == 300);
	memcpy(r->shadow + size - 300, buf, 300);
	CHECK(vc_write(r->c, buf, 301, size - 300) == -ENOSPC);
	CHECK(vc_write(r->c, buf, 1, size) == -ENOSPC);
	CHECK(vc_write(r->c, buf, 1, UINT64_MAX) == -ENOSPC);
	CHECK(vc_read(r->c, buf, 300, size - 300) == 300);
	CHECK(memcmp(buf, r->shadow + size - 300, 300) == 0);
	/* Drop everything (dirty pages written back first), then re-read all. */
	CHECK_OK(vc_drop(r->c, 0, 0, 0));
	for (uint64_t off = 0; off < size; off += 300000) {
		uint64_t len = size - off < 300000 ? size - off : 300000;
		CHECK(vc_read(r->c, buf, len, off) == (ssize_t)len);
		CHECK(memcmp(buf, r->shadow + off, len) == 0);
	}
	free(buf);
}


/* What a run changes beyond the above: encryption of the GPU tier and
 * GRAM's swap mode. */
struct extra {
	int encrypt;
	int gpu_hits;
	int dedup;          /* enum vc_dedup: the run's file repeats (t_pool_byte) */
	uint32_t degree;
	bool collide;       /* every fingerprint equal (eng_debug_dedup_collide) */
	const char *gpus;   /* vc_config.gpus: the GPU tier over several parts */
	int fault;          /* fail part fault - 1 mid-run (0: none) */
	bool shuffle;       /* evacuate and rebalance parts meanwhile */
	int gpu_dirty;      /* vc_config.gpu_dirty */
	bool no_p2p;        /* moves between parts through host memory (VC_GPU_P2P=off) */
};

/* A run over several parts: each part's figures add up to the tier's,
 * every part that did not fail served hits, a failed part lost nothing
 * acknowledged, and moves between parts happened where asked. */
static void check_parts(struct run *r, const struct extra *x, const struct vc_stats *st)
{
	const unsigned n = vc_gpu_count(r->c);
	uint64_t cached = 0, cap = 0, peer = 0, failed = 0;
	fprintf(stderr, "  %u parts (%s):", n, x->gpus);
	for (unsigned k = 0; k < n; k++) {
		struct vc_gpu_stats gs = { .size = sizeof gs };
		CHECK_OK(vc_get_gpu_stats(r->c, k, &gs));
		CHECK(gs.version == VC_GPU_STATS_VERSION);
		fprintf(stderr, " [%u%s: %llu/%llu pages, hits %llu, h2d %llu MiB, evicted %llu, "
				"peer in %llu (direct %llu) out %llu]",
			k, gs.failed ? " failed" : "", (unsigned long long)gs.pages_cached,
			(unsigned long long)gs.pages_capacity, (unsigned long long)gs.hits,
			(unsigned long long)(gs.h2d_bytes >> 20), (unsigned long long)gs.evictions,
			(unsigned long long)gs.peer_in, (unsigned long long)gs.peer_direct,
			(unsigned long long)gs.peer_out);
		cached += gs.pages_cached;
		cap += gs.pages_capacity;
		peer += gs.peer_in;
		/* emu: the part that failed, alone. CUDA: a fault is the driver's
		 * sticky error, which on the two-H200 machine took every GPU of
		 * the process with it (docs/MULTIGPU.md): the others may fail too. */
		if (r->kind != VC_DEVICE_CUDA)
			CHECK(gs.failed == (x->fault == (int)k + 1));
		else if (x->fault == (int)k + 1)
			CHECK(gs.failed);
		failed += gs.failed;
		if ((!gs.failed || x->fault) && r->ops >= 1000)
			CHECK(gs.hits > 0 && gs.h2d_bytes > 0);
		if (x->no_p2p)
			CHECK(gs.peer_direct == 0);
	}
	fprintf(stderr, "\n");
	CHECK(st->gpus == n);
	CHECK(cached == st->pages_cached[VC_TIER_GPU] && cap == st->pages_capacity[VC_TIER_GPU]);
	CHECK(st->gpus_failed == failed && (x->fault ? failed >= 1 : failed == 0));
	CHECK(st->gpu_dirty_lost == 0); /* clean-down or write-through: nothing dirty was lost */
	CHECK(st->gpu_peer_pages == peer);
	if (x->shuffle && r->ops >= 1000)
		CHECK(r->evacuations > 0 && peer > 0);
	if (x->shuffle && !x->no_p2p && r->ops >= 1000)
		for (unsigned k = 0; k < n; k++) {
			struct vc_gpu_stats gs = { .size = sizeof gs };
			CHECK_OK(vc_get_gpu_stats(r->c, k, &gs));
			CHECK(gs.peer_in == 0 || gs.peer_direct > 0);
		}
}

static void one_run_x(int kind, int write_mode, uint32_t page_size, int ops, const struct gcv *gv,
		      const char *policy, const struct extra *x)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* Not page aligned: the last page is partial. */
	uint64_t size = 3 * 1024 * 1024 + 1234;
	char path[256];
	uint64_t seed = 0x1234 + write_mode * 7 + page_size;
	t_make_file(path, sizeof path, size, seed);
	struct run r = { .size = size, .ops = ops, .write_mode = write_mode, .kind = kind };
	r.shadow = t_read_file(path, size);
	static struct t_pool pool;
	if (x && x->dedup) {
		t_pool_file(&pool, seed, path, r.shadow, size);
		r.pool = &pool;
	}

	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.page_size = page_size;
	cfg.host_bytes = 24 * (uint64_t)page_size; /* 24 pages */
	cfg.gpu_bytes = 96 * (uint64_t)page_size;  /* 96 pages: far below the file */
	cfg.device = kind;
	cfg.write_mode = write_mode;
	cfg.batch_pages = 8;
	cfg.batch_timeout_us = 20;
	cfg.seg_bytes = gv->seg_pages * page_size;
	cfg.gc_policy = gv->policy;
	cfg.gc_segments = gv->segments;
	cfg.gc_watermark = gv->watermark;
	cfg.gc_fragmentation = gv->frag;
	cfg.policy = policy;
	if (x) {
		cfg.encrypt = x->encrypt;
		cfg.gpu_hits = x->gpu_hits;
		cfg.dedup = x->dedup;
		cfg.dedup_degree = x->degree;
		cfg.gpus = x->gpus;
		cfg.gpu_dirty = x->gpu_dirty;
		r.fault = x->fault;
		r.shuffle = x->shuffle;
	}
	if (x && x->no_p2p)
		setenv("VC_GPU_P2P", "off", 1);
	int e = vc_open(&cfg, &r.c);
	unsetenv("VC_GPU_P2P");
	if (e == -VC_ENOTBUILT) {
		fprintf(stderr, "SKIP: %s\n", vc_last_error());
		exit(77);
	}
	t_skip_if_absent(e, "engine model test on CUDA");
	CHECK_OK(e);
	if (x && x->collide)
		CHECK_OK(eng_debug_dedup_collide(r.c, true));

	pthread_t th[NTHREADS], chaos;
	struct worker w[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){ .run = &r, .id = i, .seed = seed + 1000 * (uint64_t)i + 1 };
		CHECK(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
	}
	CHECK(pthread_create(&chaos, NULL, chaos_main, &r) == 0);
	pthread_t parts;
	const bool with_parts = r.fault || r.shuffle;
	if (with_parts)
		CHECK(pthread_create(&parts, NULL, parts_main, &r) == 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	atomic_store(&r.stop, 1);
	pthread_join(chaos, NULL);
	if (with_parts)
		pthread_join(parts, NULL);

	if (write_mode == VC_WRITE_THROUGH)
		t_check_file(path, r.shadow, size); /* no flush needed */
	big_ops(&r, &seed);
	if (write_mode == VC_WRITE_THROUGH)
		t_check_file(path, r.shadow, size);

	struct vc_stats st = { .size = sizeof st };
	CHECK_OK(vc_get_stats(r.c, &st));
	clock_gettime(CLOCK_MONOTONIC, &t1); /* the workload and big_ops, for CI's logs */
	fprintf(stderr,
		"%s%s %s%s ps=%u log %s: hits host %llu gpu %llu, misses %llu, evict host %llu gpu %llu, "
		"writebacks %llu, h2d %llu d2h %llu, batches %llu (%llu pages), dirty %llu, "
		"gc runs %llu moved %llu, segments evicted %llu, early releases %llu, "
		"fragmentation %.2f; %.1f s\n",
		vc_device_name(r.c),
		x && x->encrypt ? (x->encrypt == VC_ENCRYPT_XTS_GMAC ? " encrypted+mac" : " encrypted") : "",
		write_mode ? "write-back" : "write-through",
		x && x->gpu_hits == VC_GPU_HITS_SWAP ? " swap" : "", page_size, gv->name,
		(unsigned long long)st.hits[0], (unsigned long long)st.hits[1],
		(unsigned long long)st.misses, (unsigned long long)st.evictions[0],
		(unsigned long long)st.evictions[1], (unsigned long long)st.writebacks,
		(unsigned long long)st.h2d_bytes, (unsigned long long)st.d2h_bytes,
		(unsigned long long)st.batches, (unsigned long long)st.batch_pages,
		(unsigned long long)st.dirty_pages, (unsigned long long)st.gc_runs,
		(unsigned long long)st.gc_pages_moved, (unsigned long long)st.gpu_segments_evicted,
		(unsigned long long)st.early_releases, st.gpu_fragmentation,
		(double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	/* The run must really have exercised both tiers. */
	CHECK(st.hits[VC_TIER_HOST] > 0 && st.hits[VC_TIER_GPU] > 0 && st.misses > 0);
	CHECK(st.evictions[VC_TIER_HOST] > 0 && st.evictions[VC_TIER_GPU] > 0);
	CHECK(st.h2d_bytes > 0 && st.d2h_bytes > 0 && st.batches > 0);
	CHECK(st.pages_cached[VC_TIER_HOST] <= st.pages_capacity[VC_TIER_HOST]);
	if (x && x->dedup) {
		/* Logical pages may pass the capacity (that is the point);
		 * blocks may not. */
		const uint32_t d = x->degree ? x->degree : page_size > 4096 ? page_size / 4096 : 1;
		fprintf(stderr, "  dedup degree %u: pages %llu blocks %llu factor %.2f, in %llu hits "
				"%llu collisions %llu, est factor %.2f update %.2f, on %llu, switches %llu\n",
			d, (unsigned long long)st.dedup_pages, (unsigned long long)st.dedup_blocks,
			st.dedup_factor, (unsigned long long)st.dedup_blocks_in,
			(unsigned long long)st.dedup_hits, (unsigned long long)st.dedup_collisions,
			st.dedup_est_factor, st.dedup_est_update_ratio,
			(unsigned long long)st.dedup_volumes_on, (unsigned long long)st.dedup_switches);
		CHECK(st.dedup_blocks <= st.pages_capacity[VC_TIER_GPU] * d);
		CHECK(st.dedup_pages == st.pages_cached[VC_TIER_GPU]);
		CHECK_OK(eng_debug_dedup_check(r.c)); /* the run's threads are done */
		uint64_t kept_back = 0, kept_freed = 0;
		CHECK_OK(eng_debug_dedup_kept(r.c, &kept_back, &kept_freed));
		uint64_t direct = 0, late = 0, later = 0;
		CHECK_OK(eng_debug_dedup_trips(r.c, &direct, &late));
		CHECK_OK(eng_debug_dedup_later(r.c, &later));
		fprintf(stderr, "  kept blocks: %llu gone back to, %llu freed by claims; direct %llu, "
				"indexed later %llu, merged late %llu\n",
			(unsigned long long)kept_back, (unsigned long long)kept_freed,
			(unsigned long long)direct, (unsigned long long)later, (unsigned long long)late);
		if (ops >= 1000 && x->dedup == VC_DEDUP_ON)
			CHECK(st.dedup_hits > 0 && st.dedup_blocks_in > 0);
		if (x->collide && ops >= 1000)
			CHECK(st.dedup_collisions > 0);
		else if (!x->collide)
			CHECK(st.dedup_collisions == 0);
	} else {
		CHECK(st.pages_cached[VC_TIER_GPU] <= st.pages_capacity[VC_TIER_GPU]);
	}
	CHECK(st.gpu_segments_evicted > 0 && st.gpu_segments_free <= st.gpu_segments);
	if (!(x && x->gpus)) /* parts size their default segments to their own share */
		CHECK(st.gpu_segments * (gv->seg_pages ? gv->seg_pages : 4) ==
		      st.pages_capacity[VC_TIER_GPU]);
	if (gv->policy == VC_GC_OFF)
		CHECK(st.gc_runs == 0 && st.gc_pages_moved == 0);
	/* Short runs (memcheck's) may not get that far. */
	if (gv->policy != VC_GC_OFF && gv != &gc_default && ops >= 1000)
		CHECK(st.gc_runs > 0 && st.gc_pages_moved > 0);
	if (gv->watermark >= 0.2 && ops >= 1000)
		CHECK(st.early_releases > 0);
	if (write_mode == VC_WRITE_BACK)
		CHECK(st.writebacks > 0);
	CHECK(strcmp(vc_device_name(r.c), kind == VC_DEVICE_CUDA ? "cuda" : "emu") == 0);
	if (x && x->gpus)
		check_parts(&r, x, &st);

	CHECK_OK(vc_flush(r.c));
	t_check_file(path, r.shadow, size);
	CHECK_OK(vc_get_stats(r.c, &st));
	CHECK(st.dirty_pages == 0);
	/* Nobody changed GPU memory: no check may have failed. */
	CHECK(st.integrity_failures == 0 && st.integrity_drops == 0);

	/* Dirty data left in the cache at close is written by vc_close. */
	unsigned char tail[3000];
	for (int i = 0; i < 3000; i++)
		tail[i] = (unsigned char)(i * 7);
	CHECK(vc_write(r.c, tail, sizeof tail, 4097) == (ssize_t)sizeof tail);
	memcpy(r.shadow + 4097, tail, sizeof tail);
	CHECK_OK(vc_close(r.c));
	t_check_file(path, r.shadow, size);
	unlink(path);
	free(r.shadow);
}

static void one_run(int kind, int write_mode, uint32_t page_size, int ops, const struct gcv *gv,
		    const char *policy)
{
	one_run_x(kind, write_mode, page_size, ops, gv, policy, NULL);
}

/* The GPU log's cleaner forced to run often (tiny segments, high
 * watermarks, low fragmentation thresholds) under both cleaning policies,
 * and switched off. */
static const struct gcv forced[] = {
	{ "oldest/2-page segments", 2, VC_GC_OLDEST, 3, 0.3, 0.0 },
	{ "cost-benefit/8-page segments", 8, VC_GC_COST_BENEFIT, 2, 0.25, 0.01 },
	{ "off", 2, VC_GC_OFF, 4, 0.2, 0.0 },
};

/* Both write modes' runs at 4096- and 512-byte pages, cleaning at its
 * default, forced and off. */
static void plain_runs(int kind, int wm, int ops)
{
	one_run(kind, wm, 4096, ops, &gc_default, NULL);
	one_run(kind, wm, 512, ops, &gc_default, NULL);
	for (size_t i = 0; i < sizeof forced / sizeof forced[0]; i++)
		one_run(kind, wm, i == 1 ? 512 : 4096, ops, &forced[i], NULL);
}

static void part_plain_wt(int kind, int ops)
{
	plain_runs(kind, VC_WRITE_THROUGH, ops);
}

static void part_plain_wb(int kind, int ops)
{
	plain_runs(kind, VC_WRITE_BACK, ops);
}

/* Every other policy under the same load (the runs above use the
 * default, VC_POLICY_DEFAULT): pinned and busy pages are skipped by
 * victim(), evictions and moves interleave across threads. */
static void part_policies(int kind, int ops)
{
	for (const struct vc_policy_ops *const *o = vc_policies; *o; o++)
		if (strcmp((*o)->name, VC_POLICY_DEFAULT) != 0)
			one_run(kind, VC_WRITE_BACK, 4096, ops / 2, &gc_default, (*o)->name);
}

/* Encryption on (AES-256-XTS): every move down encrypts and every move up
 * decrypts, cleaning moves ciphertext as it is and tail eviction writes
 * back through a decrypting move; a wrong tweak or a missed direction
 * anywhere shows as wrong bytes. Pages of one cipher unit (4 KiB), smaller
 * (512 B) and of two units (8 KiB), and GRAM's swap mode, which makes room
 * instead of swapping. The emulated device skips them where the build has
 * no OpenSSL. */
static void part_enc(int kind, int ops)
{
	const struct extra enc = { .encrypt = VC_ENCRYPT_XTS, .gpu_hits = VC_GPU_HITS_SERVE };
	const struct extra enc_swap = { .encrypt = VC_ENCRYPT_XTS, .gpu_hits = VC_GPU_HITS_SWAP };
	for (int wm = 0; wm < 2; wm++) {
		one_run_x(kind, wm, 4096, ops, &forced[0], NULL, &enc);
		one_run_x(kind, wm, 512, ops, &forced[1], NULL, &enc);
	}
	one_run_x(kind, VC_WRITE_BACK, 8192, ops, &gc_default, NULL, &enc);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops, &forced[0], NULL, &enc_swap);
}

/* The integrity mode: every page checked on every move up, under the same
 * load (no check may fail: one_run_x asks). */
static void part_mac(int kind, int ops)
{
	const struct extra mac = { .encrypt = VC_ENCRYPT_XTS_GMAC, .gpu_hits = VC_GPU_HITS_SERVE };
	const struct extra mac_swap = { .encrypt = VC_ENCRYPT_XTS_GMAC, .gpu_hits = VC_GPU_HITS_SWAP };
	one_run_x(kind, VC_WRITE_BACK, 4096, ops, &forced[0], NULL, &mac);
	one_run_x(kind, VC_WRITE_THROUGH, 512, ops, &forced[1], NULL, &mac);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops, &gc_default, NULL, &mac_swap);
}

/* Dedup (the file repeats: t_pool_byte): degrees 4 and 8, both write
 * modes, cleaning forced under both policies. */
static void part_dedup(int kind, int ops)
{
	const struct extra dd4 = { .dedup = VC_DEDUP_ON, .degree = 4 };
	const struct extra dd8 = { .dedup = VC_DEDUP_ON, .degree = 8 };
	for (int wm = 0; wm < 2; wm++) {
		one_run_x(kind, wm, 4096, ops, &forced[0], NULL, &dd4);
		one_run_x(kind, wm, 4096, ops, &forced[1], NULL, &dd8);
	}
}

/* Dedup at degree 1 (512-byte pages), cleaning off with GRAM's swap mode
 * (which makes room instead, and sends pages that came up unwritten back
 * by reference, plain at D = 2), and the adaptive mode. */
static void part_dedup_modes(int kind, int ops)
{
	const struct extra dd1 = { .dedup = VC_DEDUP_ON, .degree = 1 };
	const struct extra dd2_swap = { .gpu_hits = VC_GPU_HITS_SWAP, .dedup = VC_DEDUP_ON, .degree = 2 };
	const struct extra dd_adapt = { .dedup = VC_DEDUP_ADAPTIVE, .degree = 4 };
	one_run_x(kind, VC_WRITE_BACK, 512, ops, &forced[1], NULL, &dd1);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops, &forced[2], NULL, &dd2_swap);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops, &gc_default, NULL, &dd_adapt);
}

/* Dedup with encryption and integrity (the host-side fingerprints and
 * compares), swap mode sending pages back by reference encrypted at
 * D = 1. */
static void part_dedup_enc(int kind, int ops)
{
	const struct extra dd1_enc_swap = { .encrypt = VC_ENCRYPT_XTS, .gpu_hits = VC_GPU_HITS_SWAP,
					    .dedup = VC_DEDUP_ON, .degree = 1 };
	const struct extra dd_enc = { .encrypt = VC_ENCRYPT_XTS, .dedup = VC_DEDUP_ON, .degree = 4 };
	const struct extra dd_mac = { .encrypt = VC_ENCRYPT_XTS_GMAC, .dedup = VC_DEDUP_ON, .degree = 8 };
	one_run_x(kind, VC_WRITE_THROUGH, 4096, ops, &forced[0], NULL, &dd1_enc_swap);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops, &forced[0], NULL, &dd_enc);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops, &forced[1], NULL, &dd_mac);
}

/* The collision hook (every fingerprint equal), where only the byte
 * compare keeps blocks apart, plain and encrypted. */
static void part_dedup_collide(int kind, int ops)
{
	const struct extra dd_collide = { .dedup = VC_DEDUP_ON, .degree = 4, .collide = true };
	const struct extra dd_enc_collide = { .encrypt = VC_ENCRYPT_XTS, .dedup = VC_DEDUP_ON,
					      .degree = 2, .collide = true };
	one_run_x(kind, VC_WRITE_THROUGH, 4096, ops, &forced[0], NULL, &dd_collide);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops, &forced[0], NULL, &dd_enc_collide);
}

/* The GPU tier over several parts (vc_config.gpus): on emu, 2 and 3
 * emulated devices; on CUDA the GPUs there are (VC_TEST_GPUS2 and
 * VC_TEST_GPUS3 override), a GPU cut in logical parts where there is one.
 * A part fails mid-run only where it is alone on its device (a CUDA fault
 * kills every handle on that GPU): `fault` names it (part fault - 1), or
 * 0 where none is. */
struct gpu_shape {
	const char *two, *three, *weighted;
	int fault;
};

static struct gpu_shape gpu_shape(int kind)
{
	int ngpu = kind == VC_DEVICE_CUDA ? vc_device_count(VC_DEVICE_CUDA) : 3;
	if (ngpu <= 0) {
		fprintf(stderr, "SKIP: engine model test on CUDA: no CUDA device (%d)\n", ngpu);
		exit(77);
	}
	struct gpu_shape g = {
		.two = getenv("VC_TEST_GPUS2"),
		.three = getenv("VC_TEST_GPUS3"),
		.weighted = kind == VC_DEVICE_CUDA && ngpu < 2 ? "0:2,0:1" : "0:2,1:1",
		.fault = getenv("VC_TEST_NO_FAULT") ? 0 /* compute-sanitizer runs */
			 : kind != VC_DEVICE_CUDA ? 2 : ngpu >= 2 ? 3 : 0,
	};
	if (!g.two)
		g.two = ngpu >= 2 ? "0,1" : "0,0";
	if (!g.three)
		g.three = ngpu >= 3 ? "0,1,2" : ngpu == 2 ? "0,0,1" : "0,0,0";
	return g;
}

/* 2 and 3 parts, both write modes, page sizes 4096 and 512. */
static void part_gpus(int kind, int ops)
{
	const struct gpu_shape g = gpu_shape(kind);
	const struct extra two_wt = { .gpus = g.two };
	const struct extra three_w = { .gpus = g.three };
	for (int wm = 0; wm < 2; wm++) {
		one_run_x(kind, wm, 4096, ops, &gc_default, NULL, &two_wt);
		one_run_x(kind, wm, 512, ops / 2, &forced[1], NULL, &three_w);
	}
}

/* Parts evacuated, re-weighted and rebalanced under the load, GPU to GPU
 * and through host memory, plain and with AES-XTS + GMAC;
 * VC_GPU_DIRTY_KEEP; weighted parts; clean-down on one GPU. */
static void part_gpus_moves(int kind, int ops)
{
	const struct gpu_shape g = gpu_shape(kind);
	const struct extra two_shuffle = { .gpus = g.two, .shuffle = true };
	const struct extra two_shuffle_host = { .gpus = g.two, .shuffle = true, .no_p2p = true };
	const struct extra two_enc_shuffle = { .gpus = g.two, .shuffle = true,
					       .encrypt = VC_ENCRYPT_XTS_GMAC };
	const struct extra two_keep = { .gpus = g.two, .gpu_dirty = VC_GPU_DIRTY_KEEP };
	const struct extra weighted = { .gpus = g.weighted };
	const struct extra one_clean = { .gpu_dirty = VC_GPU_DIRTY_CLEAN };
	one_run_x(kind, VC_WRITE_BACK, 4096, ops, &forced[0], NULL, &two_shuffle);
	one_run_x(kind, VC_WRITE_THROUGH, 4096, ops / 2, &gc_default, NULL, &two_shuffle_host);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops / 2, &forced[1], NULL, &two_enc_shuffle);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops / 2, &forced[2], NULL, &two_keep);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops / 2, &gc_default, NULL, &weighted);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops / 2, &forced[0], NULL, &one_clean);
}

/* A part's device fails a third into the run (3 parts): every byte still
 * right, nothing acknowledged lost. On CUDA a fault kills its GPU's context
 * for the rest of the process, and on the two-H200 machine a trap on one
 * GPU took every GPU of the process (docs/MULTIGPU.md): there this part
 * runs last (main) and once a process, in the write mode
 * VC_MODEL_FAULT_WM names (default 1, write-back); emu runs both. */
static void part_fault(int kind, int ops)
{
	const struct gpu_shape g = gpu_shape(kind);
	if (!g.fault) {
		fprintf(stderr, "SKIP: engine model test: one GPU, cut in parts: no part fails "
				"alone (or VC_TEST_NO_FAULT)\n");
		exit(77);
	}
	const struct extra three_fault = { .gpus = g.three, .fault = g.fault };
	const char *fwm = getenv("VC_MODEL_FAULT_WM");
	for (int wm = 0; wm < 2; wm++)
		if (kind != VC_DEVICE_CUDA || wm == (fwm ? atoi(fwm) : VC_WRITE_BACK))
			one_run_x(kind, wm, 4096, ops, &forced[0], NULL, &three_fault);
}

/* The runs in parts of 2 to 6 runs' work, a process each under ctest.
 * The runs over several GPUs, which on CUDA ask for the machine's GPUs, and
 * the fault, which must end its process there, run only where named. */
static const struct t_part parts[] = {
	{ "plain_wt", part_plain_wt, false },
	{ "plain_wb", part_plain_wb, false },
	{ "policies", part_policies, false },
	{ "enc", part_enc, false },
	{ "mac", part_mac, false },
	{ "dedup", part_dedup, false },
	{ "dedup_modes", part_dedup_modes, false },
	{ "dedup_enc", part_dedup_enc, false },
	{ "dedup_collide", part_dedup_collide, false },
	{ "gpus", part_gpus, true },
	{ "gpus_moves", part_gpus_moves, true },
	{ "fault", part_fault, true }, /* last: on CUDA a fault ends the process's GPUs */
};

/* VC_TEST_OPS: operations per worker thread of a full run (default 4000;
 * some runs do half). */
int main(int argc, char **argv)
{
	return t_parts_main(argc, argv, parts, sizeof parts / sizeof parts[0], 4000, "engine model");
}
