/* The GPU tier shrinking and growing under load (vc_gpu_shrink/grow).
 *
 * A model run: threads read and write random byte ranges they own, each
 * read checked against a shadow copy of the store (as in
 * test_engine_model), chaos flushes, drops and prefetches beside them,
 * and a resizer thread shrinks the GPU tier by random amounts (at times to
 * nothing) and grows it back, in write-through and write-back, with page
 * sizes 4096 and 512, the cleaner forced on, and GRAM's swap on GPU
 * hits. In write-back the chunks given back hold dirty pages: the store
 * must equal the model after the final flush. On the emulated device a chunk given back is PROT_NONE, so
 * a page move, cleaning job or read that still touched one would crash
 * the test.
 *
 * With dedup on (modes on and adaptive, degrees 1 to 8, plain and XTS) the
 * file's contents repeat (t_pool_byte) and a third of the writes put a
 * range back to its pool bytes, so the chunks given back hold shared
 * blocks whose pages lie in other chunks too, and dirty pages that use
 * them; the chaos thread's GPU prefetches must never fail for a shrink
 * (a trip down keeps the slots it was promised).
 *
 * Then the edges: no GPU tier, bad flags, shrinking to nothing and asking
 * again, another program holding the device's memory (the emulated
 * device's VC_EMU_FOREIGN_FILE) so that growing finds no room, and the
 * statistics. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include "device/device.h"
#include "testutil.h"

#define NTHREADS 4
#define REGION 1000

struct run {
	vc_cache *c;
	unsigned char *shadow;
	uint64_t size;
	int ops;
	atomic_int stop;
	uint64_t max_bytes;
	uint32_t page_size;
	uint64_t shrinks, grows, zero; /* resizer's counts */
	unsigned nparts; /* parts of the GPU tier (vc_config.gpus): the resizer picks one a call */
	const struct t_pool *pool; /* dedup runs: contents repeat (t_pool_byte), or NULL */
};

/* Dedup for a run (NULL: off). */
struct ddx {
	int mode; /* enum vc_dedup */
	uint32_t degree;
	int encrypt;
};

struct worker {
	struct run *run;
	int id;
	uint64_t seed;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->run;
	unsigned char buf[REGION];
	uint64_t nreg = r->size / REGION;
	for (int op = 0; op < r->ops; op++) {
		uint64_t span = nreg / NTHREADS;
		if (t_rand(&w->seed) % 2)
			span /= 8; /* a hot set that fits the tiers: GPU hits */
		uint64_t reg = t_rand(&w->seed) % span * NTHREADS + (uint64_t)w->id;
		uint64_t a = t_rand(&w->seed) % REGION, b = t_rand(&w->seed) % REGION;
		if (a > b) {
			uint64_t t = a;
			a = b;
			b = t;
		}
		uint64_t off = reg * REGION + a, len = b - a + 1;
		if (r->pool && t_rand(&w->seed) % 3 == 0) {
			t_pool_write(r->c, r->pool, r->shadow, buf, off, len);
		} else if (t_rand(&w->seed) % 3 == 0) {
			for (uint64_t i = 0; i < len; i++)
				buf[i] = (unsigned char)t_rand(&w->seed);
			CHECK(vc_write(r->c, buf, len, off) == (ssize_t)len);
			memcpy(r->shadow + off, buf, len);
		} else {
			memset(buf, 0xEE, len);
			CHECK(vc_read(r->c, buf, len, off) == (ssize_t)len);
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
	return NULL;
}

static void *chaos_main(void *arg)
{
	struct run *r = arg;
	t_chaos(r->c, r->size, 77, &r->stop);
	return NULL;
}

/* Each part's device memory now (vc_get_gpu_stats). */
static void part_bytes(struct run *r, uint64_t *out)
{
	for (unsigned i = 0; i < r->nparts; i++) {
		struct vc_gpu_stats g = { .size = sizeof g };
		CHECK_OK(vc_get_gpu_stats(r->c, i, &g));
		out[i] = g.bytes;
	}
}

/* Shrinks by random amounts, sometimes everything, and grows back, until
 * the workers stop; every call's accounting checked against vc_stats. */
static void *resizer_main(void *arg)
{
	struct run *r = arg;
	uint64_t seed = 0x5eed;
	while (!atomic_load(&r->stop)) {
		struct vc_stats a = { .size = sizeof a }, b = { .size = sizeof b };
		CHECK_OK(vc_get_stats(r->c, &a));
		uint64_t ask = t_rand(&seed) % 4 == 0 ? UINT64_MAX / 2
						       : 1 + t_rand(&seed) % r->max_bytes / 2;
		uint64_t got = 0;
		/* Several parts: one of them, the others untouched. */
		const unsigned k = r->nparts > 1 ? (unsigned)(t_rand(&seed) % r->nparts) : 0;
		uint64_t part0[VC_GPUS_MAX], part1[VC_GPUS_MAX];
		part_bytes(r, part0);
		const uint64_t have = r->nparts > 1 ? part0[k] : a.gpu_bytes;
		const unsigned fl = t_rand(&seed) % 2 ? VC_SHRINK_REQUESTED : 0;
		CHECK_OK(r->nparts > 1 ? vc_gpu_shrink_on(r->c, k, ask, fl, &got)
				       : vc_gpu_shrink(r->c, ask, fl, &got));
		CHECK_OK(vc_get_stats(r->c, &b));
		CHECK(b.gpu_bytes == a.gpu_bytes - got);
		part_bytes(r, part1);
		for (unsigned i = 0; i < r->nparts; i++)
			CHECK(part1[i] == part0[i] - (i == k ? got : 0));
		/* All of it, or at least what was asked. */
		CHECK(got >= (ask < have ? ask : have));
		CHECK(b.gpu_bytes_released == a.gpu_bytes_released + got);
		CHECK(b.pages_capacity[VC_TIER_GPU] * r->page_size <= b.gpu_bytes);
		r->shrinks++;
		if (b.gpu_bytes == 0)
			r->zero++;
		usleep(100 + t_rand(&seed) % 1000);
		uint64_t grow = t_rand(&seed) % 3 == 0 ? r->max_bytes : 1 + t_rand(&seed) % r->max_bytes;
		CHECK_OK(r->nparts > 1 ? vc_gpu_grow_on(r->c, k, grow, &got)
				       : vc_gpu_grow(r->c, grow, &got));
		CHECK_OK(vc_get_stats(r->c, &a));
		CHECK(a.gpu_bytes == b.gpu_bytes + got && a.gpu_bytes <= a.gpu_bytes_max);
		r->grows++;
		usleep(100 + t_rand(&seed) % 1000);
	}
	return NULL;
}

/* vc_config.gpus of the runs (NULL: one GPU); main sets it for the runs
 * over several parts. */
static const char *run_gpus;

static void one_run_x(int kind, int write_mode, uint32_t page_size, int ops, const struct gcv *gv,
		      int gpu_hits, const struct ddx *dx)
{
	uint64_t size = 3 * 1024 * 1024 + 777;
	char path[256];
	uint64_t seed = 0x9100 + write_mode * 7 + page_size;
	t_make_file(path, sizeof path, size, seed);
	struct run r = { .size = size, .ops = ops, .page_size = page_size };
	r.shadow = t_read_file(path, size);
	static struct t_pool pool;
	if (dx) {
		t_pool_file(&pool, seed, path, r.shadow, size);
		r.pool = &pool;
	}

	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.page_size = page_size;
	cfg.host_bytes = 24 * (uint64_t)page_size;
	cfg.gpu_bytes = 256 * (uint64_t)page_size;
	cfg.device = kind;
	cfg.write_mode = write_mode;
	cfg.batch_pages = 8;
	cfg.seg_bytes = gv->seg_pages * page_size;
	cfg.gc_policy = gv->policy;
	cfg.gc_segments = gv->segments;
	cfg.gc_watermark = gv->watermark;
	cfg.gc_fragmentation = gv->frag;
	cfg.gpu_hits = gpu_hits;
	cfg.gpus = run_gpus;
	if (dx) {
		cfg.dedup = dx->mode;
		cfg.dedup_degree = dx->degree;
		cfg.encrypt = dx->encrypt;
	}
	/* Chunks of 32 pages (8 of them): the emulated device maps by 4 KiB;
	 * CUDA's 2 MiB granularity takes the default instead. */
	cfg.gpu_chunk_bytes = kind == VC_DEVICE_EMU ? 32 * (uint64_t)page_size : 0;
	if (kind == VC_DEVICE_CUDA) { /* chunks of 2 MiB, 8 of them */
		cfg.gpu_bytes = 16ull << 20;
		cfg.seg_bytes = 0;
	}
	int e = vc_open(&cfg, &r.c);
	t_skip_if_absent(e, "GPU tier resizing on CUDA");
	CHECK_OK(e);
	struct vc_stats st = { .size = sizeof st };
	CHECK_OK(vc_get_stats(r.c, &st));
	CHECK(st.gpu_bytes == st.gpu_bytes_max && st.gpu_bytes >= cfg.gpu_bytes / 2);
	r.max_bytes = st.gpu_bytes_max;
	r.nparts = vc_gpu_count(r.c);

	pthread_t th[NTHREADS], chaos, resizer;
	struct worker w[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){ .run = &r, .id = i, .seed = seed + 1000 * (uint64_t)i + 1 };
		CHECK(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
	}
	CHECK(pthread_create(&chaos, NULL, chaos_main, &r) == 0);
	CHECK(pthread_create(&resizer, NULL, resizer_main, &r) == 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	atomic_store(&r.stop, 1);
	pthread_join(chaos, NULL);
	pthread_join(resizer, NULL);

	/* Everything back, then the model holds and the tier still works. */
	uint64_t got;
	for (unsigned k = 0; k < r.nparts; k++)
		CHECK_OK(r.nparts > 1 ? vc_gpu_grow_on(r.c, k, UINT64_MAX, &got)
				      : vc_gpu_grow(r.c, UINT64_MAX, &got));
	CHECK_OK(vc_get_stats(r.c, &st));
	CHECK(st.gpu_bytes == st.gpu_bytes_max);
	if (write_mode == VC_WRITE_THROUGH)
		t_check_file(path, r.shadow, size);
	CHECK_OK(vc_flush(r.c));
	t_check_file(path, r.shadow, size);
	char dd[64] = "";
	if (dx)
		snprintf(dd, sizeof dd, ", dedup %s D=%u%s",
			 dx->mode == VC_DEDUP_ADAPTIVE ? "adaptive" : "on", dx->degree,
			 dx->encrypt ? " XTS" : "");
	fprintf(stderr,
		"%s%s%s %s ps=%u log %s%s%s: %llu shrinks (%llu to nothing), %llu grows; chunks released "
		"%llu regained %llu, %llu KiB released (%llu on request), %llu pages moved; "
		"shrink max %.2f ms; hits host %llu gpu %llu, misses %llu, writebacks %llu\n",
		vc_device_name(r.c), run_gpus ? " gpus " : "", run_gpus ? run_gpus : "",
		write_mode ? "write-back" : "write-through", page_size, gv->name,
		gpu_hits == VC_GPU_HITS_SWAP ? ", swap" : "", dd, (unsigned long long)r.shrinks, (unsigned long long)r.zero,
		(unsigned long long)r.grows, (unsigned long long)st.gpu_chunks_released,
		(unsigned long long)st.gpu_chunks_regained,
		(unsigned long long)(st.gpu_bytes_released >> 10),
		(unsigned long long)(st.gpu_bytes_released_requested >> 10),
		(unsigned long long)st.gpu_shrink_pages_moved, st.gpu_shrink_ns_max / 1e6,
		(unsigned long long)st.hits[0], (unsigned long long)st.hits[1],
		(unsigned long long)st.misses, (unsigned long long)st.writebacks);
	CHECK(r.shrinks > 0 && st.gpu_chunks_released > 0 && st.gpu_chunks_regained > 0);
	CHECK(st.gpu_shrinks == r.shrinks);
	CHECK(st.gpu_bytes_released_requested <= st.gpu_bytes_released);
	CHECK(st.hits[VC_TIER_GPU] > 0);
	if (write_mode == VC_WRITE_BACK && ops >= 1000)
		CHECK(st.writebacks > 0);
	if (dx) {
		fprintf(stderr, "  dedup: pages %llu blocks %llu factor %.2f, in %llu hits %llu "
				"collisions %llu\n",
			(unsigned long long)st.dedup_pages, (unsigned long long)st.dedup_blocks,
			st.dedup_factor, (unsigned long long)st.dedup_blocks_in,
			(unsigned long long)st.dedup_hits, (unsigned long long)st.dedup_collisions);
		CHECK(st.dedup_pages == st.pages_cached[VC_TIER_GPU]);
		CHECK(st.dedup_blocks <= st.pages_capacity[VC_TIER_GPU] * dx->degree);
		CHECK(st.dedup_collisions == 0);
		if (dx->mode == VC_DEDUP_ON && ops >= 1000)
			CHECK(st.dedup_hits > 0);
	}
	CHECK_OK(vc_close(r.c));
	t_check_file(path, r.shadow, size);
	unlink(path);
	free(r.shadow);
}

static void one_run(int kind, int write_mode, uint32_t page_size, int ops, const struct gcv *gv,
		    int gpu_hits)
{
	one_run_x(kind, write_mode, page_size, ops, gv, gpu_hits, NULL);
}

/* The calls' edges, single-threaded. */
static void edges(int kind)
{
	uint64_t size = 1 << 20;
	char path[256];
	t_make_file(path, sizeof path, size, 42);
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.device = kind;
	cfg.host_bytes = 64 * 4096;
	cfg.gpu_bytes = 0;
	vc_cache *c = t_open(&cfg, "GPU tier resizing on CUDA");
	uint64_t got = 7;
	CHECK(vc_gpu_shrink(c, 4096, 0, &got) == -EINVAL && got == 0); /* no GPU tier */
	CHECK(vc_gpu_grow(c, 4096, &got) == -EINVAL && got == 0);
	CHECK(vc_gpu_shrink(NULL, 4096, 0, NULL) == -EINVAL);
	CHECK_OK(vc_close(c));

	cfg.gpu_bytes = kind == VC_DEVICE_EMU ? 64 * 4096 : 8ull << 20;
	cfg.gpu_chunk_bytes = kind == VC_DEVICE_EMU ? 16 * 4096 : 2ull << 20;
	CHECK_OK(vc_open(&cfg, &c));
	struct vc_stats st = { .size = sizeof st };
	CHECK_OK(vc_get_stats(c, &st));
	const uint64_t max = st.gpu_bytes_max, chunk = cfg.gpu_chunk_bytes;
	CHECK(st.gpu_bytes == max && max == cfg.gpu_bytes);
	CHECK(vc_gpu_shrink(c, 4096, 2, &got) == -EINVAL); /* unknown flag */
	CHECK_OK(vc_gpu_shrink(c, 0, 0, &got));
	CHECK(got == 0);
	/* Fill the tier, then give back one byte's worth: a whole chunk. */
	CHECK_OK(vc_prefetch(c, 0, size, VC_TIER_GPU));
	CHECK_OK(vc_gpu_shrink(c, 1, VC_SHRINK_REQUESTED, &got));
	CHECK(got == chunk);
	/* More than exists: everything, and the cache still serves from the
	 * host tier and the store. */
	CHECK_OK(vc_gpu_shrink(c, UINT64_MAX, 0, &got));
	CHECK(got == max - chunk);
	CHECK_OK(vc_get_stats(c, &st));
	CHECK(st.gpu_bytes == 0 && st.pages_capacity[VC_TIER_GPU] == 0 &&
	      st.pages_cached[VC_TIER_GPU] == 0);
	CHECK(st.gpu_bytes_released_requested == chunk && st.gpu_bytes_released == max);
	CHECK_OK(vc_gpu_shrink(c, 4096, 0, &got));
	CHECK(got == 0);
	unsigned char *buf = malloc(size), *want = t_read_file(path, size);
	CHECK(vc_read(c, buf, size, 0) == (ssize_t)size); /* misses past the host tier */
	CHECK(memcmp(buf, want, size) == 0);
	CHECK_OK(vc_prefetch(c, 0, size, VC_TIER_GPU)); /* a hint, unheeded */
	/* Grow by part, then the rest; a full tier grows by nothing. */
	CHECK_OK(vc_gpu_grow(c, chunk + 1, &got));
	CHECK(got == 2 * chunk);
	CHECK_OK(vc_gpu_grow(c, UINT64_MAX, &got));
	CHECK(got == max - 2 * chunk);
	CHECK_OK(vc_gpu_grow(c, 4096, &got));
	CHECK(got == 0);
	CHECK(vc_read(c, buf, size, 0) == (ssize_t)size);
	CHECK(memcmp(buf, want, size) == 0);
	CHECK_OK(vc_get_stats(c, &st));
	CHECK(st.gpu_chunks_released == max / chunk && st.gpu_chunks_regained == max / chunk);
	CHECK(st.gpu_shrinks == 3 && st.gpu_shrink_ns_max >= st.gpu_shrink_ns_last);

	unsigned char uuid[16];
	CHECK_OK(vc_gpu_uuid(c, uuid));
	uint64_t fr, tot;
	CHECK_OK(vc_gpu_mem_info(c, &fr, &tot));
	CHECK(fr <= tot && tot > 0);
	if (kind == VC_DEVICE_EMU) {
		/* Another program takes all but half a chunk: growing finds
		 * no room and changes nothing; when it exits, growing works. */
		char fpath[] = "/tmp/vc-foreign-XXXXXX";
		int ffd = mkstemp(fpath);
		CHECK(ffd >= 0);
		CHECK(setenv("VC_EMU_FOREIGN_FILE", fpath, 1) == 0);
		CHECK_OK(vc_gpu_shrink(c, chunk, 0, &got));
		CHECK(got == chunk);
		CHECK_OK(vc_gpu_mem_info(c, &fr, &tot));
		char num[32];
		int n = snprintf(num, sizeof num, "%llu", (unsigned long long)(fr - chunk / 2));
		CHECK(pwrite(ffd, num, (size_t)n, 0) == n);
		CHECK_OK(vc_gpu_mem_info(c, &fr, &tot));
		CHECK(fr == chunk / 2);
		CHECK(vc_gpu_grow(c, chunk, &got) == -ENOMEM && got == 0);
		CHECK_OK(vc_get_stats(c, &st));
		CHECK(st.gpu_bytes == max - chunk);
		CHECK(ftruncate(ffd, 0) == 0);
		CHECK_OK(vc_gpu_grow(c, chunk, &got));
		CHECK(got == chunk);
		close(ffd);
		unlink(fpath);
		unsetenv("VC_EMU_FOREIGN_FILE");
	}
	CHECK(vc_read(c, buf, size, 0) == (ssize_t)size);
	CHECK(memcmp(buf, want, size) == 0);
	CHECK_OK(vc_close(c));

	/* Two parts: the calls without a part refuse, those with one act on
	 * it alone; a part emptied gives all its memory back and the other
	 * keeps serving its share. */
	cfg.gpus = kind == VC_DEVICE_CUDA && vc_device_count(VC_DEVICE_CUDA) < 2 ? "0,0" : "0,1";
	cfg.gpu_bytes *= 2;
	CHECK_OK(vc_open(&cfg, &c));
	CHECK(vc_gpu_shrink(c, chunk, 0, &got) == -EOPNOTSUPP && got == 0);
	CHECK(vc_gpu_grow(c, chunk, &got) == -EOPNOTSUPP && got == 0);
	CHECK(vc_gpu_shrink_on(c, 2, chunk, 0, &got) == -EINVAL);
	CHECK(vc_gpu_grow_on(c, 2, chunk, &got) == -EINVAL);
	CHECK(vc_gpu_mem_info_on(c, 2, &fr, &tot) == -EINVAL);
	CHECK_OK(vc_gpu_mem_info_on(c, 1, &fr, &tot));
	unsigned char u0[16], u1[16];
	CHECK_OK(vc_gpu_uuid_on(c, 0, u0));
	CHECK_OK(vc_gpu_uuid_on(c, 1, u1));
	CHECK((memcmp(u0, u1, 16) == 0) == (strcmp(cfg.gpus, "0,0") == 0));
	CHECK_OK(vc_prefetch(c, 0, size, VC_TIER_GPU));
	struct vc_gpu_stats g0 = { .size = sizeof g0 }, g1 = { .size = sizeof g1 };
	CHECK_OK(vc_get_gpu_stats(c, 0, &g0));
	const uint64_t part = g0.bytes;
	CHECK_OK(vc_gpu_shrink_on(c, 1, UINT64_MAX, 0, &got));
	CHECK_OK(vc_get_gpu_stats(c, 0, &g0));
	CHECK_OK(vc_get_gpu_stats(c, 1, &g1));
	CHECK(got == part && g1.bytes == 0 && g1.pages_cached == 0 && g0.bytes == part);
	CHECK(g0.pages_cached > 0);
	CHECK(vc_read(c, buf, size, 0) == (ssize_t)size);
	CHECK(memcmp(buf, want, size) == 0);
	CHECK_OK(vc_gpu_grow_on(c, 1, UINT64_MAX, &got));
	CHECK(got == part);
	CHECK_OK(vc_close(c));
	free(buf);
	free(want);
	unlink(path);
}

/* Dedup, single-threaded, where the layout is known: even pages repeat
 * (pool), odd ones are unique. Model m: page i's bytes. */
static void dd_model(unsigned char *m, uint64_t pages, const struct t_pool *pool, uint64_t seed)
{
	for (uint64_t i = 0; i < pages; i++)
		for (uint64_t o = i * 4096; o < (i + 1) * 4096; o++)
			m[o] = i % 2 == 0 ? t_pool_byte(pool, o + seed % 8 * 4096)
					  : (unsigned char)t_rand(&seed);
}

static void dd_read_all(vc_cache *c, const unsigned char *m, uint64_t size)
{
	unsigned char *buf = malloc(size);
	CHECK(vc_read(c, buf, size, 0) == (ssize_t)size);
	for (uint64_t i = 0; i < size; i++)
		if (buf[i] != m[i]) {
			fprintf(stderr, "byte %llu (page %llu): got %02x want %02x\n",
				(unsigned long long)i, (unsigned long long)(i / 4096), buf[i], m[i]);
			CHECK(!"read returned wrong bytes");
		}
	free(buf);
}

/* The dedup cases one at a time: shared blocks moved into the rest of the
 * tier (their pages follow), dirty pages using shared blocks written back
 * before their chunks go (read back from the store after a shrink to
 * nothing), a shrink to a fraction, growing back. */
static void dd_edges(int kind, uint32_t degree, int encrypt)
{
	/* Emulated: 128 pages of GPU tier in 4 chunks of 32; CUDA: 2048 in 4
	 * chunks of 2 MiB (its mapping granularity). The file: twice the
	 * tier's pages, which dedup holds whole (the pool pages share). */
	const uint64_t tier = kind == VC_DEVICE_EMU ? 128 : 2048, pages = 2 * tier,
		       size = pages * 4096, chunk = tier / 4 * 4096;
	char path[256];
	t_make_file(path, sizeof path, size, 7);
	struct t_pool pool;
	unsigned char *m = malloc(size);
	t_pool_file(&pool, 0xdd, path, m, size); /* draws the pool; the file is set below */
	int fd;
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.device = kind;
	cfg.host_bytes = 16 * 4096;
	cfg.gpu_bytes = tier * 4096;
	cfg.gpu_chunk_bytes = chunk;
	cfg.write_mode = VC_WRITE_BACK;
	cfg.dirty_background_ratio = 1; /* no background write-back: the dirty pages stay */
	cfg.dedup = VC_DEDUP_ON;
	cfg.dedup_degree = degree;
	cfg.encrypt = encrypt;
	setenv("VC_PREFETCHERS", "1", 1); /* the layout below needs the pages in order */
	vc_cache *c = t_open(&cfg, "GPU tier resizing on CUDA");
	unsetenv("VC_PREFETCHERS");
	struct vc_stats st = { .size = sizeof st };
	uint64_t got;

	/* 1. Clean pages straight into the tier, in page order, so that the
	 * first chunk X's slots take the pool pages' few shared blocks and
	 * the unique pages up to about tier / 2, and the next chunk Y the
	 * unique pages up to 5/8 x tier (a quarter of a chunk's slots).
	 * Dropping X's unique pages leaves X the fewest live blocks of the
	 * chunks that hold any, and Y free segments: asking for three
	 * chunks drains the two empty ones and X, whose blocks (the shared
	 * ones: every pool page uses one) move into Y, their pages with
	 * them. */
	dd_model(m, pages, &pool, 8); /* 8: the pool pages repeat whole (4 contents) */
	fd = open(path, O_WRONLY);
	CHECK(fd >= 0 && pwrite(fd, m, size, 0) == (ssize_t)size);
	close(fd);
	CHECK_OK(vc_prefetch(c, 0, tier / 8 * 5 * 4096, VC_TIER_GPU));
	for (uint64_t i = 1; i < tier / 2 - 4; i += 2)
		CHECK_OK(vc_drop(c, i * 4096, 4096, 0));
	CHECK_OK(vc_get_stats(c, &st));
	CHECK(st.dedup_hits > 0 && st.pages_cached[VC_TIER_GPU] > 0);
	CHECK_OK(vc_gpu_shrink(c, 3 * chunk, 0, &got));
	CHECK(got == 3 * chunk);
	CHECK_OK(vc_get_stats(c, &st));
	fprintf(stderr, "dedup D=%u%s: moved %llu pages, GPU pages %llu blocks %llu\n", degree,
		encrypt ? " XTS" : "", (unsigned long long)st.gpu_shrink_pages_moved,
		(unsigned long long)st.dedup_pages, (unsigned long long)st.dedup_blocks);
	/* At D = 4 the layout is the one above (segments of 32 blocks, 4 a
	 * chunk): every pool page below 5/8 x tier followed its shared
	 * block. Other degrees cut the tier into other segments, and the
	 * free segments are handed out from the last chunk down, so fewer
	 * pages move there. */
	CHECK(st.gpu_shrink_pages_moved >= (degree == 4 ? tier / 8 * 5 / 2 : 1));
	CHECK(st.dedup_pages > 0);
	CHECK(st.dedup_blocks <= st.pages_capacity[VC_TIER_GPU] * degree);
	dd_read_all(c, m, size);
	CHECK_OK(vc_gpu_grow(c, UINT64_MAX, &got));
	CHECK(got == 3 * chunk);

	/* 2. Dirty pages: the whole file rewritten (a new model) through
	 * the 16-page host tier, the pool pages sharing blocks: its first
	 * pages stay dirty up to the dirty limit, and go down dirty as the
	 * rest (written through) pass. A shrink to nothing must write them
	 * back: afterwards they can only come from the store. */
	dd_model(m, pages, &pool, 2);
	CHECK(vc_write(c, m, size, 0) == (ssize_t)size);
	CHECK_OK(vc_get_stats(c, &st));
	const uint64_t wb0 = st.writebacks;
	CHECK(st.dirty_pages == st.dirty_limit && st.pages_cached[VC_TIER_GPU] > 0 &&
	      st.dedup_hits > 0);
	CHECK_OK(vc_gpu_shrink(c, UINT64_MAX, 0, &got));
	CHECK(got == 4 * chunk);
	CHECK_OK(vc_get_stats(c, &st));
	CHECK(st.gpu_bytes == 0 && st.pages_cached[VC_TIER_GPU] == 0 && st.dedup_pages == 0 &&
	      st.dedup_blocks == 0 && st.dirty_pages <= 16 && st.writebacks > wb0);
	dd_read_all(c, m, size);

	/* 3. Again dirty, with a quarter of the tier left, then back. */
	CHECK_OK(vc_gpu_grow(c, UINT64_MAX, &got));
	CHECK(got == 4 * chunk);
	dd_model(m, pages, &pool, 3);
	CHECK(vc_write(c, m, size, 0) == (ssize_t)size);
	CHECK_OK(vc_gpu_shrink(c, 3 * chunk, VC_SHRINK_REQUESTED, &got));
	CHECK(got == 3 * chunk);
	dd_read_all(c, m, size);
	CHECK_OK(vc_gpu_grow(c, UINT64_MAX, &got));
	CHECK(got == 3 * chunk);
	dd_read_all(c, m, size);
	CHECK_OK(vc_flush(c));
	t_check_file(path, m, size);
	CHECK_OK(vc_close(c));
	t_check_file(path, m, size);
	unlink(path);
	free(m);
}

static const struct gcv forced = { "cost-benefit/2-page segments", 2, VC_GC_COST_BENEFIT, 2, 0.25,
				   0.01 };

/* The edges, then both write modes at 4096- and 512-byte pages and the
 * cleaner forced. */
static void part_plain(int kind, int ops)
{
	edges(kind);
	for (int wm = 0; wm < 2; wm++) {
		one_run(kind, wm, 4096, ops, &gc_default, VC_GPU_HITS_SERVE);
		one_run(kind, wm, 512, ops, &gc_default, VC_GPU_HITS_SERVE);
		one_run(kind, wm, 4096, ops, &forced, VC_GPU_HITS_SERVE);
	}
}

/* GRAM's swap: GPU hits rekey slots of the segments being claimed. Several
 * parts (vc_config.gpus): each shrinks and grows on its own
 * (vc_gpu_shrink_on) while the others serve; on CUDA one GPU cut in two,
 * or two GPUs. */
static void part_swap_gpus(int kind, int ops)
{
	one_run(kind, VC_WRITE_BACK, 4096, ops, &gc_default, VC_GPU_HITS_SWAP);
	run_gpus = kind == VC_DEVICE_CUDA && vc_device_count(VC_DEVICE_CUDA) < 2 ? "0,0" : "0,1";
	one_run(kind, VC_WRITE_BACK, 4096, ops, &forced, VC_GPU_HITS_SERVE);
	one_run(kind, VC_WRITE_THROUGH, 4096, ops / 2, &gc_default, VC_GPU_HITS_SERVE);
	run_gpus = NULL;
}

/* Dedup: shared blocks in the chunks given back, dirty pages using them
 * (write-back), the cleaner forced, XTS; degrees 1 to 8 and adaptive. */
static void part_dedup(int kind, int ops)
{
	static const struct ddx on1 = { VC_DEDUP_ON, 1, 0 }, on4 = { VC_DEDUP_ON, 4, 0 },
				on8 = { VC_DEDUP_ON, 8, 0 };
	dd_edges(kind, 4, VC_ENCRYPT_OFF);
	dd_edges(kind, 1, VC_ENCRYPT_OFF);
	dd_edges(kind, 8, VC_ENCRYPT_XTS);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops, &gc_default, VC_GPU_HITS_SERVE, &on1);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops, &gc_default, VC_GPU_HITS_SERVE, &on4);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops, &forced, VC_GPU_HITS_SERVE, &on8);
}

static void part_dedup_more(int kind, int ops)
{
	static const struct ddx on4 = { VC_DEDUP_ON, 4, 0 }, on2x = { VC_DEDUP_ON, 2, VC_ENCRYPT_XTS },
				ad4 = { VC_DEDUP_ADAPTIVE, 4, 0 };
	one_run_x(kind, VC_WRITE_THROUGH, 4096, ops, &forced, VC_GPU_HITS_SERVE, &on4);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops, &gc_default, VC_GPU_HITS_SERVE, &on2x);
	one_run_x(kind, VC_WRITE_BACK, 4096, ops, &gc_default, VC_GPU_HITS_SERVE, &ad4);
}

/* Arguments: the parts to run (all by default), a process each under
 * ctest. VC_TEST_OPS: operations per thread of a run (default 3000). */
static const struct t_part parts[] = {
	{ "plain", part_plain, false },
	{ "swap_gpus", part_swap_gpus, false },
	{ "dedup", part_dedup, false },
	{ "dedup_more", part_dedup_more, false },
};

int main(int argc, char **argv)
{
	return t_parts_main(argc, argv, parts, sizeof parts / sizeof parts[0], 3000, "gpusize");
}
