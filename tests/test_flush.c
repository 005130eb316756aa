/* Flushing by range and extents in write-back, through the dirty set.
 *
 *   ranges     dirty pages in four ranges, some demoted to the GPU tier;
 *              vc_volume_flush_range on one writes exactly that range to
 *              the store (read back with pread on the file), and the other
 *              ranges keep their old bytes there: it does not flush
 *              everything. Then one to the end (len 0), then vc_flush;
 *              vc_stats.dirty_pages follows each step.
 *   racing     writers own disjoint regions and make some writes durable
 *              with flush_range (an NBD FUA), then read the file: their
 *              bytes must be there, while another thread flushes, drops,
 *              asks for extents and flushes ranges at random, in a cache
 *              small enough that pages are evicted and cleaned throughout.
 *   extents    a 64 GiB sparse store with a few dirty pages: the pages are
 *              data, the rest holes, and a range far from them one hole.
 *              The dirty set answers in O(log), so this costs no scan of
 *              16M pages or of the cache.
 *   arguments  NULL, a wrapping range, past the end, read-only, and
 *              write-through (where FUA is only the sync).
 *   background the cache's own write-back takes dirty pages down to its
 *              mark without a flush, and is off at the limit.
 * Runs on VC_TEST_DEVICE; VC_TEST_QUICK=1 runs fewer racing operations.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include "testutil.h"

#define PS 4096u

static uint64_t dirty_pages(vc_cache *c)
{
	struct vc_stats st = { .size = sizeof st };
	CHECK_OK(vc_get_stats(c, &st));
	return st.dirty_pages;
}

static void file_read(const char *path, void *buf, uint64_t len, uint64_t off)
{
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0 && pread(fd, buf, len, (off_t)off) == (ssize_t)len);
	close(fd);
}

static void *read_all(const char *path, uint64_t size)
{
	void *b = malloc(size);
	CHECK(b);
	file_read(path, b, size, 0);
	return b;
}

/* A write-back cache over path: host and GPU tiers of so many pages,
 * batches of 8 (so a flush takes several rounds, and partial ones). */
static struct vc_config wb_config(int kind, const char *path, uint64_t host, uint64_t gpu)
{
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.device = kind;
	cfg.write_mode = VC_WRITE_BACK;
	cfg.host_bytes = host * PS;
	cfg.gpu_bytes = gpu * PS;
	cfg.batch_pages = 8;
	return cfg;
}

/* A range of bytes written, and the pages it touches. */
struct range {
	uint64_t off, len;
};

static uint64_t first_page(struct range r)
{
	return r.off / PS;
}

static uint64_t npages(struct range r)
{
	return (r.off + r.len - 1) / PS - r.off / PS + 1;
}

/* The pages of r in the file of `size` bytes hold `want`'s bytes (whole
 * pages: a partly written page is loaded first, so the rest of it is the
 * old bytes). */
static bool store_has(const char *path, uint64_t size, struct range r, const unsigned char *want)
{
	uint64_t o = first_page(r) * PS, n = npages(r) * PS;
	if (n > size - o)
		n = size - o;
	unsigned char *b = malloc(n);
	file_read(path, b, n, o);
	bool eq = memcmp(b, want + o, n) == 0;
	free(b);
	return eq;
}

static void ranges(int kind)
{
	const uint64_t size = 4096 * PS + 123; /* a partial last page */
	char path[256];
	t_make_file(path, sizeof path, size, 7);
	unsigned char *orig = read_all(path, size), *shadow = malloc(size);
	memcpy(shadow, orig, size);

	/* 16 GPU segments of 32 pages: room for every page this touches. The
	 * dirty limit (0.9 of 320 host pages) lets every written page stay
	 * dirty, and no background write-back takes any. */
	struct vc_config cfg = wb_config(kind, path, 320, 512);
	cfg.dirty_ratio = 0.9;
	cfg.dirty_background_ratio = 1; /* off: nothing goes back on its own */
	vc_cache *c;
	int e = vc_open(&cfg, &c);
	if (e == -VC_ENODEVICE || e == -VC_ENOTBUILT) { /* nothing left behind */
		free(orig);
		free(shadow);
		unlink(path);
	}
	t_skip_if_absent(e, "flush test on CUDA");
	CHECK_OK(e);
	vc_volume *v = vc_volume_default(c);

	/* B first, so the later reads and writes push it down to the GPU
	 * tier. Ends are unaligned; ranges share no page. The last reaches
	 * the end. */
	struct range rg[4] = {
		{ 1000 * PS + 300, 70 * PS + 500 },   /* B: flushed alone */
		{ 10 * PS + 4000, 60 * PS },          /* A */
		{ 2000 * PS, 50 * PS + 100 },         /* C */
		{ 4000 * PS + 17, size - 4000 * PS - 17 }, /* D */
	};
	uint64_t seed = 99;
	for (int i = 0; i < 4; i++) {
		for (uint64_t k = 0; k < rg[i].len; k++)
			shadow[rg[i].off + k] = (unsigned char)t_rand(&seed);
		CHECK(vc_write(c, shadow + rg[i].off, rg[i].len, rg[i].off) == (ssize_t)rg[i].len);
		CHECK(!store_has(path, size, rg[i], shadow)); /* random bytes: not there yet */
		if (i == 0) { /* 200 clean pages after B: the host tier overflows */
			unsigned char *b = malloc(200 * PS);
			CHECK(b && vc_read(c, b, 200 * PS, 3000 * PS) == 200 * PS);
			free(b);
		}
	}
	struct range B = rg[0], A = rg[1], C = rg[2], D = rg[3];
	struct vc_stats st = { .size = sizeof st };
	CHECK_OK(vc_get_stats(c, &st));
	/* Nothing went back on its own, and B is (partly) in the GPU tier. */
	CHECK(st.writebacks == 0 && st.evictions[VC_TIER_GPU] == 0);
	CHECK(st.pages_cached[VC_TIER_GPU] >= npages(B));
	CHECK(st.dirty_pages == npages(A) + npages(B) + npages(C) + npages(D));

	/* B alone. */
	CHECK_OK(vc_volume_flush_range(v, B.off, B.len));
	CHECK(store_has(path, size, B, shadow));
	CHECK(store_has(path, size, A, orig) && store_has(path, size, C, orig) && store_has(path, size, D, orig));
	CHECK(dirty_pages(c) == npages(A) + npages(C) + npages(D));

	/* A range between the written ones: nothing to write back. */
	CHECK_OK(vc_volume_flush_range(v, 1500 * PS, 400 * PS));
	CHECK(dirty_pages(c) == npages(A) + npages(C) + npages(D));
	/* One byte of A's last page: that page only. */
	struct range a_last = { A.off + A.len - 1, 1 };
	CHECK_OK(vc_volume_flush_range(v, a_last.off, 1));
	CHECK(store_has(path, size, a_last, shadow));
	CHECK(dirty_pages(c) == npages(A) - 1 + npages(C) + npages(D));

	/* From C to the end (len 0): C and D, not A. */
	CHECK_OK(vc_volume_flush_range(v, C.off, 0));
	CHECK(store_has(path, size, C, shadow) && store_has(path, size, D, shadow));
	struct range a_rest = { A.off, first_page(a_last) * PS - A.off };
	CHECK(store_has(path, size, a_rest, orig));
	CHECK(dirty_pages(c) == npages(A) - 1);

	CHECK_OK(vc_flush(c));
	CHECK(dirty_pages(c) == 0);
	unsigned char *now = read_all(path, size);
	CHECK(memcmp(now, shadow, size) == 0);
	free(now);

	/* Arguments. */
	CHECK(vc_volume_flush_range(NULL, 0, 1) == -EINVAL);
	CHECK(vc_volume_flush_range(v, 2, UINT64_MAX - 1) == -EINVAL);
	CHECK(vc_volume_flush_range(v, size, 10) == 0);
	CHECK(vc_volume_flush_range(v, size + PS, 0) == 0);
	CHECK(vc_volume_flush_range(v, size - 1, 100) == 0); /* clipped */
	vc_volume *ro;
	CHECK_OK(vc_volume_open(c, path, -1, VC_OPEN_READONLY, &ro));
	CHECK(vc_volume_flush_range(ro, 0, 0) == 0);
	CHECK_OK(vc_volume_close(ro));
	CHECK_OK(vc_close(c));

	/* Write-through: the store has every write at once; FUA is the sync. */
	cfg.write_mode = VC_WRITE_THROUGH;
	CHECK_OK(vc_open(&cfg, &c));
	struct range w = { 77 * PS + 5, 3 * PS };
	for (uint64_t k = 0; k < w.len; k++)
		shadow[w.off + k] = (unsigned char)t_rand(&seed);
	CHECK(vc_write(c, shadow + w.off, w.len, w.off) == (ssize_t)w.len);
	CHECK(dirty_pages(c) == 0 && store_has(path, size, w, shadow));
	CHECK_OK(vc_volume_flush_range(vc_volume_default(c), w.off, w.len));
	CHECK_OK(vc_close(c));

	unlink(path);
	free(orig);
	free(shadow);
}

/* --- racing: FUA-style writes against flushes, drops and evictions --- */

#define WRITERS 3
#define REGION (256 * PS)

struct writer {
	vc_cache *c;
	const char *path;
	unsigned char *shadow; /* the whole file's; this writer touches its region only */
	uint64_t base, seed;
	int ops;
};

static atomic_int stop;

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	vc_volume *v = vc_volume_default(w->c);
	unsigned char buf[20000], got[20000];
	for (int op = 0; op < w->ops; op++) {
		uint64_t len = 1 + t_rand(&w->seed) % sizeof buf;
		uint64_t off = w->base + t_rand(&w->seed) % (REGION - len);
		for (uint64_t i = 0; i < len; i++)
			buf[i] = (unsigned char)t_rand(&w->seed);
		CHECK(vc_write(w->c, buf, len, off) == (ssize_t)len);
		memcpy(w->shadow + off, buf, len);
		if (t_rand(&w->seed) % 2) {
			/* FUA: this write is in the store on return. */
			CHECK_OK(vc_volume_flush_range(v, off, len));
			file_read(w->path, got, len, off);
			CHECK(memcmp(got, buf, len) == 0);
		}
	}
	return NULL;
}

static void *chaos_main(void *arg)
{
	struct writer *w = arg; /* for c and a seed */
	vc_volume *v = vc_volume_default(w->c);
	const uint64_t size = vc_volume_size(v);
	uint64_t seed = w->seed, n;
	while (!atomic_load(&stop)) {
		uint64_t off = t_rand(&seed) % size, len = 1 + t_rand(&seed) % (64 * PS);
		switch (t_rand(&seed) % 5) {
		case 0:
			CHECK_OK(vc_flush(w->c));
			break;
		case 1:
			CHECK_OK(vc_volume_flush_range(v, off, len));
			break;
		case 2:
			CHECK_OK(vc_drop(w->c, off, len, 0)); /* writes dirty pages back first */
			break;
		case 3:
			CHECK_OK(vc_volume_extent(v, off, len, &n));
			CHECK(n > 0 && n <= len);
			break;
		default:
			CHECK_OK(vc_volume_flush_range(v, off, 0));
			break;
		}
	}
	return NULL;
}

static void racing(int kind)
{
	const bool quick = getenv("VC_TEST_QUICK") && atoi(getenv("VC_TEST_QUICK")) > 0;
	const uint64_t size = WRITERS * REGION;
	char path[256];
	t_make_file(path, sizeof path, size, 8);
	unsigned char *shadow = read_all(path, size);

	struct vc_config cfg = wb_config(kind, path, 32, 96);
	cfg.seg_bytes = 4 * PS; /* many segments: evictions and cleaning throughout */
	vc_cache *c;
	CHECK_OK(vc_open(&cfg, &c));

	struct writer w[WRITERS + 1];
	pthread_t th[WRITERS + 1];
	atomic_store(&stop, 0);
	for (int i = 0; i <= WRITERS; i++) {
		w[i] = (struct writer){ .c = c, .path = path, .shadow = shadow,
					.base = (uint64_t)i * REGION, .seed = 1000 + (uint64_t)i,
					.ops = quick ? 300 : 1500 };
		if (i < WRITERS)
			CHECK(pthread_create(&th[i], NULL, writer_main, &w[i]) == 0);
	}
	CHECK(pthread_create(&th[WRITERS], NULL, chaos_main, &w[WRITERS]) == 0);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(th[i], NULL);
	atomic_store(&stop, 1);
	pthread_join(th[WRITERS], NULL);

	struct vc_stats st = { .size = sizeof st };
	CHECK_OK(vc_get_stats(c, &st));
	CHECK(st.evictions[VC_TIER_GPU] > 0); /* dirty pages left by eviction too */
	CHECK_OK(vc_flush(c));
	CHECK(dirty_pages(c) == 0);
	unsigned char *now = read_all(path, size);
	CHECK(memcmp(now, shadow, size) == 0);
	free(now);
	CHECK_OK(vc_close(c));
	unlink(path);
	free(shadow);
}

/* --- extents over a 64 GiB sparse store --- */

#define GiB (1ull << 30)

static void extents(int kind)
{
	const uint64_t size = 64 * GiB;
	char path[256];
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(path, sizeof path, "%s/vc-sparse-XXXXXX", dir);
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	bool sparse = ftruncate(fd, (off_t)size) == 0;
	close(fd);
	vc_cache *c = NULL;
	uint64_t n = 0;
	if (sparse) {
		struct vc_config cfg = wb_config(kind, path, 64, 256);
		CHECK_OK(vc_open(&cfg, &c));
		sparse = vc_volume_extent(vc_volume_default(c), 0, size, &n) == VC_EXTENT_HOLE;
	}
	if (!sparse) { /* all data is the right answer where holes are unknown */
		fprintf(stderr, "note: %s has no 64 GiB sparse files or does not report holes; "
				"extent checks skipped\n", dir);
		CHECK_OK(vc_close(c));
		unlink(path);
		return;
	}
	CHECK(n == size);
	vc_volume *v = vc_volume_default(c);

	/* Dirty pages: 1 GiB (whole), 1 GiB + 8 KiB (100 bytes inside, so
	 * the page is loaded: zeroes, then dirty), 40 GiB, the last page. */
	unsigned char d[PS];
	memset(d, 0xcd, sizeof d);
	CHECK(vc_write(c, d, PS, 1 * GiB) == PS);
	CHECK(vc_write(c, d, 100, 1 * GiB + 2 * PS + 50) == 100);
	CHECK(vc_write(c, d, PS, 40 * GiB) == PS);
	CHECK(vc_write(c, d, 10, size - 10) == 10);
	CHECK(dirty_pages(c) == 4);

	CHECK(vc_volume_extent(v, 0, size, &n) == VC_EXTENT_HOLE && n == 1 * GiB);
	CHECK(vc_volume_extent(v, 1 * GiB, size, &n) == VC_EXTENT_DATA && n == PS);
	CHECK(vc_volume_extent(v, 1 * GiB + 100, 10, &n) == VC_EXTENT_DATA && n == 10);
	CHECK(vc_volume_extent(v, 1 * GiB + PS, size, &n) == VC_EXTENT_HOLE && n == PS);
	CHECK(vc_volume_extent(v, 1 * GiB + 2 * PS, size, &n) == VC_EXTENT_DATA && n == PS);
	CHECK(vc_volume_extent(v, 1 * GiB + 3 * PS, size, &n) == VC_EXTENT_HOLE &&
	      n == 39 * GiB - 3 * PS);
	/* Far from every dirty page: one hole, whatever its width. */
	CHECK(vc_volume_extent(v, 2 * GiB, 36 * GiB, &n) == VC_EXTENT_HOLE && n == 36 * GiB);
	CHECK(vc_volume_extent(v, 40 * GiB + PS, size, &n) == VC_EXTENT_HOLE &&
	      n == 24 * GiB - 2 * PS);
	CHECK(vc_volume_extent(v, size - PS, PS, &n) == VC_EXTENT_DATA && n == PS);
	CHECK(vc_volume_extent(v, size - 1, 1, &n) == VC_EXTENT_DATA && n == 1);

	/* One page to the store: data there now, from the store's side. */
	CHECK_OK(vc_volume_flush_range(v, 40 * GiB, PS));
	CHECK(dirty_pages(c) == 3);
	CHECK(vc_volume_extent(v, 40 * GiB, PS, &n) == VC_EXTENT_DATA && n == PS);
	CHECK(vc_volume_extent(v, 2 * GiB, 36 * GiB, &n) == VC_EXTENT_HOLE && n == 36 * GiB);
	unsigned char got[PS];
	file_read(path, got, PS, 40 * GiB);
	CHECK(memcmp(got, d, PS) == 0);
	file_read(path, got, PS, 1 * GiB); /* not flushed: still the hole's zeroes */
	CHECK(got[0] == 0 && got[PS - 1] == 0);

	CHECK_OK(vc_flush(c));
	CHECK(dirty_pages(c) == 0);
	CHECK(vc_volume_extent(v, 1 * GiB + 2 * PS, PS, &n) == VC_EXTENT_DATA);
	CHECK(vc_volume_extent(v, 2 * GiB, 36 * GiB, &n) == VC_EXTENT_HOLE && n == 36 * GiB);
	file_read(path, got, PS, 1 * GiB);
	CHECK(memcmp(got, d, PS) == 0);
	CHECK_OK(vc_close(c));
	unlink(path);
}

/* --- background: the cache's own write-back above the mark --- */

/* 30 pages written into a write-back cache of 64 host pages (dirty limit
 * 32, background mark 16): every write lands dirty (none is sent through),
 * and without a flush the background write-back takes the dirty pages
 * down to the mark within a bounded wait, the store getting their bytes.
 * With the mark at the limit (off), they all stay dirty. */
static void background(int kind)
{
	const uint64_t size = 256 * PS;
	char path[256];
	t_make_file(path, sizeof path, size, 3);
	unsigned char *want = read_all(path, size);
	for (int off = 0; off < 2; off++) {
		struct vc_config cfg = wb_config(kind, path, 64, 0);
		cfg.dirty_background_ratio = off ? 1 : 0;
		vc_cache *c;
		int e = vc_open(&cfg, &c);
		if (e == -VC_ENODEVICE || e == -VC_ENOTBUILT)
			unlink(path);
		t_skip_if_absent(e, "flush test on CUDA");
		CHECK_OK(e);
		uint64_t seed = 5 + (uint64_t)off;
		for (uint64_t k = 0; k < 30 * PS; k++)
			want[k] = (unsigned char)t_rand(&seed);
		CHECK(vc_write(c, want, 30 * PS, 0) == 30 * PS);
		struct vc_stats st = { .size = sizeof st };
		CHECK_OK(vc_get_stats(c, &st));
		CHECK(st.dirty_limit == 32 && st.writes_limited == 0);
		if (off) {
			usleep(300 * 1000);
			CHECK(dirty_pages(c) == 30);
		} else {
			for (int i = 0; i < 1000 && dirty_pages(c) > 16; i++)
				usleep(10 * 1000);
			CHECK_OK(vc_get_stats(c, &st));
			CHECK(st.dirty_pages <= 16 && st.writebacks >= 14);
			/* The pages written back are in the store: at least 14. */
			unsigned char *now = read_all(path, size);
			unsigned in_store = 0;
			for (uint64_t pg = 0; pg < 30; pg++)
				in_store += memcmp(now + pg * PS, want + pg * PS, PS) == 0;
			free(now);
			CHECK(in_store >= 14);
		}
		CHECK_OK(vc_close(c));
	}
	free(want);
	unlink(path);
}

int main(void)
{
	int kind = t_device_kind();
	background(kind);
	ranges(kind);
	racing(kind);
	extents(kind);
	printf("flush: ok\n");
	return 0;
}
