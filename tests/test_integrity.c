/* The integrity mode (VC_ENCRYPT_XTS_GMAC), seen from outside: a byte of a
 * GPU-resident page changed behind the cache's back (engine/debug.h's
 * poke, as another user of the GPU's memory could) is never returned.
 *
 * Each way a page comes up is tampered once: a one-page read and a run of
 * pages read in place, an asynchronous read, a promotion (GRAM's swap
 * mode), a flush and a drop that write dirty pages back. Each fails with
 * -EIO, the page leaves the cache (vc_stats.integrity_*), and the next read
 * returns the backing file's bytes; pages around it read right; a dirty
 * page found changed never reaches the file. Controls, so the test can
 * fail: with encryption off the read returns the poked byte, and with XTS
 * alone it returns changed bytes without an error.
 */
#include <errno.h>
#include <stdbool.h>

#include "engine/debug.h"
#include "testutil.h"

#define PS 4096u
#define PAGES 256u

static char path[256];
static unsigned char *file; /* the backing file as it is */

static vc_cache *open_cache(int kind, int encrypt, int write_mode, int gpu_hits)
{
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.device = kind;
	cfg.page_size = PS;
	cfg.host_bytes = 32 * PS;
	cfg.gpu_bytes = 4u << 20; /* the whole file fits */
	cfg.write_mode = write_mode;
	cfg.dirty_background_ratio = 1; /* the dirty pages stay until flushed or evicted */
	cfg.gpu_hits = gpu_hits;
	cfg.encrypt = encrypt;
	vc_cache *c = t_open(&cfg, "integrity test");
	return c;
}

static void stats(vc_cache *c, struct vc_stats *st)
{
	st->size = sizeof *st;
	CHECK_OK(vc_get_stats(c, st));
}

static void read_ok(vc_cache *c, uint32_t page, uint32_t n)
{
	unsigned char *b = malloc((size_t)n * PS);
	CHECK(b);
	CHECK(vc_read(c, b, (size_t)n * PS, (uint64_t)page * PS) == (ssize_t)n * PS);
	CHECK(memcmp(b, file + (uint64_t)page * PS, (size_t)n * PS) == 0);
	free(b);
}

static ssize_t read_at(vc_cache *c, uint32_t page, uint32_t n, unsigned char *b)
{
	return vc_read(c, b, (size_t)n * PS, (uint64_t)page * PS);
}

static void poke(vc_cache *c, uint32_t page, uint32_t at)
{
	CHECK_OK(eng_debug_gpu_poke(vc_volume_default(c), (uint64_t)page * PS + at, 0x5a));
}

/* Reads of GPU-tier pages: a one-page read, a run, an asynchronous read. */
static void reads(int kind, int gpu_hits)
{
	vc_cache *c = open_cache(kind, VC_ENCRYPT_XTS_GMAC, VC_WRITE_THROUGH, gpu_hits);
	CHECK_OK(vc_prefetch(c, 0, (uint64_t)PAGES * PS, VC_TIER_GPU));
	unsigned char b[16 * PS];
	struct vc_stats st;

	poke(c, 10, 100);
	CHECK(read_at(c, 10, 1, b) == -EIO);
	fprintf(stderr, "  one page: %s\n", vc_last_error());
	stats(c, &st);
	CHECK(st.integrity_failures == 1 && st.integrity_drops == 1 && st.integrity_dirty_lost == 0);
	read_ok(c, 10, 1); /* from the file now */
	read_ok(c, 9, 1);
	read_ok(c, 11, 1);

	poke(c, 37, PS - 1);
	CHECK(read_at(c, 30, 16, b) == -EIO);
	stats(c, &st);
	CHECK(st.integrity_failures == 2 && st.integrity_drops == 2);
	read_ok(c, 30, 16);

	if (gpu_hits == VC_GPU_HITS_SERVE) {
		vc_aio *q;
		CHECK_OK(vc_aio_open(c, 8, 1, &q));
		poke(c, 70, 0);
		struct vc_aio_req r = { .vol = vc_volume_default(c), .buf = b, .off = 68 * PS,
					.len = 4 * PS, .op = VC_AIO_READ };
		struct vc_aio_req *rp = &r, *done;
		CHECK(vc_aio_submit(q, &rp, 1) == 1);
		CHECK(vc_aio_reap(q, &done, 1, 1, -1) == 1 && done == &r);
		CHECK(r.result == -EIO);
		vc_aio_close(q);
		stats(c, &st);
		CHECK(st.integrity_failures == 3 && st.integrity_drops == 3);
		read_ok(c, 68, 4);
	}
	read_ok(c, 0, PAGES / 16); /* the rest is untouched */
	stats(c, &st);
	CHECK(st.integrity_failures == (gpu_hits == VC_GPU_HITS_SERVE ? 3u : 2u));
	CHECK_OK(vc_close(c));
}

/* The first of pages [from, to) that the GPU tier holds, poked. */
static uint32_t poke_gpu_page(vc_cache *c, uint32_t from, uint32_t to)
{
	for (uint32_t p = from; p < to; p++) {
		int e = eng_debug_gpu_poke(vc_volume_default(c), (uint64_t)p * PS + 7, 0x01);
		if (e == 0)
			return p;
		CHECK(e == -ENOENT);
	}
	CHECK(!"no page of the range in the GPU tier");
	return 0;
}

/* New bytes for pages 0..99. */
static void fresh(unsigned char *want, uint64_t *seed)
{
	for (uint32_t i = 0; i < 100 * PS / 8; i++) {
		uint64_t v = t_rand(seed);
		memcpy(want + (uint64_t)i * 8, &v, 8);
	}
}

/* Write-back: dirty pages demoted to the GPU tier, one changed there; a
 * flush, then a drop, meet them. (The pages a write dirties are its
 * first, up to the dirty limit.) */
static void dirty(int kind)
{
	vc_cache *c = open_cache(kind, VC_ENCRYPT_XTS_GMAC, VC_WRITE_BACK, VC_GPU_HITS_SERVE);
	unsigned char *want = malloc((size_t)PAGES * PS);
	CHECK(want);
	memcpy(want, file, (size_t)PAGES * PS);
	uint64_t seed = 99;
	fresh(want, &seed);
	/* 32 host pages: most go down. The first 16 (the dirty limit) stay
	 * dirty, the rest are written through. */
	CHECK(vc_write(c, want, 100 * PS, 0) == 100 * PS);
	struct vc_stats st;
	stats(c, &st);
	const uint32_t nd = (uint32_t)st.dirty_limit;
	CHECK(nd == 16 && st.dirty_pages == nd && st.pages_cached[VC_TIER_GPU] >= 50);

	uint32_t lost = poke_gpu_page(c, 0, nd);
	CHECK(vc_flush(c) == -EIO);
	fprintf(stderr, "  flush: %s\n", vc_last_error());
	stats(c, &st);
	CHECK(st.integrity_failures == 1 && st.integrity_drops == 1 && st.integrity_dirty_lost == 1);
	CHECK(st.dirty_pages == 0); /* the others were written */
	/* The lost page reads as the file has it: the write never got there. */
	memcpy(want + (uint64_t)lost * PS, file + (uint64_t)lost * PS, PS);
	t_check_file(path, want, (uint64_t)PAGES * PS);
	unsigned char b[PS];
	CHECK(read_at(c, lost, 1, b) == PS && memcmp(b, file + (uint64_t)lost * PS, PS) == 0);

	/* New bytes, down again, one changed, dropped (a write-back first). */
	fresh(want, &seed);
	CHECK(vc_write(c, want, 100 * PS, 0) == 100 * PS);
	for (uint32_t p = 100; p < 200; p++) /* push them down */
		CHECK(read_at(c, p, 1, b) == PS);
	uint32_t p2 = poke_gpu_page(c, 0, nd);
	CHECK(vc_drop(c, (uint64_t)p2 * PS, PS, 0) == -EIO);
	stats(c, &st);
	CHECK(st.integrity_failures == 2 && st.integrity_dirty_lost == 2);
	CHECK_OK(vc_flush(c));
	CHECK(read_at(c, p2, 1, b) == PS);
	CHECK(memcmp(b, want + (uint64_t)p2 * PS, PS) != 0); /* lost: the file's older bytes */

	/* New bytes, down again, one changed, and the GPU tier given back:
	 * the shrink writes dirty pages back (eng_writeback_gpu_via), drops
	 * the changed one unwritten, and goes on. */
	unsigned char *disk = t_read_file(path, (uint64_t)PAGES * PS); /* all clean now */
	fresh(want, &seed);
	CHECK(vc_write(c, want, 100 * PS, 0) == 100 * PS);
	for (uint32_t p = 100; p < 200; p++)
		CHECK(read_at(c, p, 1, b) == PS);
	uint32_t p3 = poke_gpu_page(c, 0, nd);
	int e = vc_gpu_shrink(c, 8u << 20, 0, NULL);
	if (e == -EOPNOTSUPP) {
		fprintf(stderr, "  (no shrink on this device: %s)\n", vc_last_error());
	} else {
		CHECK_OK(e);
		stats(c, &st);
		CHECK(st.integrity_failures == 3 && st.integrity_dirty_lost == 3);
		CHECK_OK(vc_flush(c));
		unsigned char old[PS];
		memcpy(old, disk + (uint64_t)p3 * PS, PS);
		memcpy(disk, want, 100 * PS);
		memcpy(disk + (uint64_t)p3 * PS, old, PS); /* the write that was lost */
		t_check_file(path, disk, (uint64_t)PAGES * PS);
		CHECK(read_at(c, p3, 1, b) == PS && memcmp(b, disk + (uint64_t)p3 * PS, PS) == 0);
	}
	free(disk);
	CHECK_OK(vc_close(c));
	free(want);
	free(file);
	file = t_read_file(path, (uint64_t)PAGES * PS);
}

/* Controls: the poke reaches the data (off: the byte comes back changed;
 * XTS alone: the block comes back garbled, and no error). */
static void controls(int kind)
{
	unsigned char b[PS];
	vc_cache *c = open_cache(kind, VC_ENCRYPT_OFF, VC_WRITE_THROUGH, VC_GPU_HITS_SERVE);
	CHECK_OK(vc_prefetch(c, 0, (uint64_t)PAGES * PS, VC_TIER_GPU));
	poke(c, 10, 100);
	CHECK(read_at(c, 10, 1, b) == PS);
	CHECK(b[100] == (file[10 * PS + 100] ^ 0x5a));
	b[100] ^= 0x5a;
	CHECK(memcmp(b, file + 10 * PS, PS) == 0);
	CHECK_OK(vc_close(c));

	c = open_cache(kind, VC_ENCRYPT_XTS, VC_WRITE_THROUGH, VC_GPU_HITS_SERVE);
	CHECK_OK(vc_prefetch(c, 0, (uint64_t)PAGES * PS, VC_TIER_GPU));
	poke(c, 10, 100);
	CHECK(read_at(c, 10, 1, b) == PS);
	uint32_t diff = 0;
	for (uint32_t i = 0; i < PS; i++)
		diff += b[i] != file[10 * PS + i];
	fprintf(stderr, "  XTS alone: the read succeeds with %u bytes changed (block 6)\n", diff);
	CHECK(diff > 8 && memcmp(b, file + 10 * PS, 96) == 0 &&
	      memcmp(b + 112, file + 10 * PS + 112, PS - 112) == 0);
	CHECK_OK(vc_close(c));
}

int main(void)
{
	const int kind = t_device_kind();
	t_make_file(path, sizeof path, (uint64_t)PAGES * PS, 0x1e9);
	file = t_read_file(path, (uint64_t)PAGES * PS);
	controls(kind);
	fprintf(stderr, "reads, pages served in place:\n");
	reads(kind, VC_GPU_HITS_SERVE);
	fprintf(stderr, "reads, swap mode (promotions):\n");
	reads(kind, VC_GPU_HITS_SWAP);
	fprintf(stderr, "write-back:\n");
	dirty(kind);
	unlink(path);
	free(file);
	fprintf(stderr, "test_integrity: ok\n");
	return 0;
}
