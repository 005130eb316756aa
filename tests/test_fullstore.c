/* A write-back cache over a store that refuses writes (a full file system):
 * reads of data the cache or the store holds must still succeed.
 *
 * The store refuses every write past its first quarter: the test lowers
 * RLIMIT_FSIZE below the file's size (writes past the limit fail with
 * EFBIG, SIGXFSZ ignored), which is how a full disk looks to the cache:
 * write-backs fail, and so do the evictions of dirty pages that misses
 * need. The test writes new bytes to pages past the limit until writes
 * fail (the cache fills with dirty pages it cannot evict), then reads
 * every page of the file, twice, from several threads: acknowledged
 * writes must read back (they are only in the cache), and every other page
 * must read as the store has it, though no slot can be freed for it. With
 * and without a GPU tier (the eviction paths differ: a GPU segment's, or a
 * host page's alone). Before the fix, the reads failed with the
 * write-backs' error. vc_volume_dirty_next must then report runs that
 * hold every acknowledged write, none below the limit.
 *
 * Exit 0 pass, 1 fail, 77 skip (no CUDA where asked).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "testutil.h"
#include "vramcache.h"

#define PS 4096u
#define PAGES 1024u          /* the file: 4 MiB */
#define LIMIT (PAGES / 4)    /* writes below this page succeed */
#define READERS 4

struct reader {
	vc_cache *c;
	const unsigned char *want;
	int id;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	unsigned char buf[3 * PS];
	uint64_t seed = 77 + (uint64_t)r->id;
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = 0; i < PAGES; i++) {
			/* Page-sized reads in order, and unaligned ones at random. */
			uint32_t pg = (i + (uint32_t)r->id * 97) % PAGES;
			CHECK(vc_read(r->c, buf, PS, (uint64_t)pg * PS) == PS);
			CHECK(memcmp(buf, r->want + (size_t)pg * PS, PS) == 0);
			uint64_t off = t_rand(&seed) % ((uint64_t)PAGES * PS - 2 * PS);
			size_t len = 1 + t_rand(&seed) % (2 * PS);
			CHECK(vc_read(r->c, buf, len, off) == (ssize_t)len);
			CHECK(memcmp(buf, r->want + off, len) == 0);
		}
	return NULL;
}

static void run(int kind, uint64_t gpu_pages)
{
	char path[256];
	const uint64_t size = (uint64_t)PAGES * PS;
	t_make_file(path, sizeof path, size, 11);
	unsigned char *want = malloc(size);
	CHECK(want);
	FILE *f = fopen(path, "rb");
	CHECK(f && fread(want, 1, size, f) == size);
	fclose(f);

	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.device = kind;
	cfg.write_mode = VC_WRITE_BACK;
	cfg.host_bytes = 64 * PS;
	cfg.gpu_bytes = gpu_pages * PS;
	cfg.seg_bytes = 16 * PS;
	vc_cache *c;
	int e = vc_open(&cfg, &c);
	if (e == -VC_ENODEVICE || e == -VC_ENOTBUILT) {
		free(want);
		unlink(path);
	}
	t_skip_if_absent(e, "full-store test on CUDA");
	CHECK_OK(e);

	/* The store is full from here on. */
	struct rlimit old, lim = { .rlim_cur = (rlim_t)LIMIT * PS, .rlim_max = RLIM_INFINITY };
	CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
	lim.rlim_max = old.rlim_max;
	CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);

	/* Whole pages past the limit, new bytes each, until the cache is full
	 * of pages it cannot write back. */
	unsigned char page[PS];
	uint32_t acked = 0, refused = 0;
	bool *is_acked = calloc(PAGES, 1);
	CHECK(is_acked);
	for (uint32_t pg = LIMIT; pg < PAGES && refused < 8; pg++) {
		for (uint32_t k = 0; k < PS; k++)
			page[k] = (unsigned char)(pg * 31 + k * 7 + 1);
		ssize_t w = vc_write(c, page, PS, (uint64_t)pg * PS);
		if (w == PS) {
			memcpy(want + (size_t)pg * PS, page, PS);
			is_acked[pg] = true;
			acked++;
		} else {
			CHECK(w == -EFBIG || w == -ENOSPC);
			refused++;
		}
	}
	CHECK(acked > 0 && refused > 0); /* the cache did fill */
	/* A flush cannot complete, and says so. */
	CHECK(vc_flush(c) < 0);
	/* What it left: runs of dirty pages that hold every acknowledged
	 * write, all past the limit (nothing below it was written). */
	bool *in_run = calloc(PAGES, 1);
	CHECK(in_run);
	uint64_t at = 0, start, len;
	vc_volume *v = vc_volume_default(c);
	int runs = 0;
	while (vc_volume_dirty_next(v, at, &start, &len) == 1) {
		CHECK(len > 0 && start % PS == 0 && start >= at && start >= (uint64_t)LIMIT * PS);
		CHECK(start + len <= size);
		for (uint64_t o = start; o < start + len; o += PS)
			in_run[o / PS] = true;
		at = start + len;
		runs++;
	}
	for (uint32_t pg = 0; pg < PAGES; pg++)
		if (is_acked[pg])
			CHECK(in_run[pg]);
	free(in_run);
	CHECK(runs > 0);
	CHECK(vc_volume_dirty_next(v, size, &start, &len) == 0);

	struct reader rd[READERS];
	pthread_t th[READERS];
	for (int i = 0; i < READERS; i++) {
		rd[i] = (struct reader){ .c = c, .want = want, .id = i };
		CHECK(pthread_create(&th[i], NULL, reader_main, &rd[i]) == 0);
	}
	for (int i = 0; i < READERS; i++)
		CHECK(pthread_join(th[i], NULL) == 0);
	fprintf(stderr, "%s, GPU tier %llu pages: %u writes acknowledged, %u refused; every page "
			"reads back\n", kind == VC_DEVICE_CUDA ? "cuda" : "emu",
		(unsigned long long)gpu_pages, acked, refused);

	/* Room again: the flush writes what was acknowledged. */
	CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
	CHECK_OK(vc_flush(c));
	vc_close(c);
	t_check_file(path, want, size);
	free(want);
	free(is_acked);
	unlink(path);
}

static void part_host(int kind, int ops)
{
	(void)ops;
	run(kind, 0);
}

static void part_gpu(int kind, int ops)
{
	(void)ops;
	run(kind, 128);
}

/* Arguments: the parts to run (both by default), a process each under
 * ctest: without and with a GPU tier of 128 pages. */
static const struct t_part parts[] = {
	{ "host", part_host, false },
	{ "gpu", part_gpu, false },
};

int main(int argc, char **argv)
{
	signal(SIGXFSZ, SIG_IGN);
	return t_parts_main(argc, argv, parts, sizeof parts / sizeof parts[0], 0, "fullstore");
}
