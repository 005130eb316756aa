/* Public API: configuration checks, error codes and messages, read-only
 * caches, drop with and without discard, prefetch into each tier, and
 * statistics, on the device named by VC_TEST_DEVICE. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "testutil.h"

static int kind;
static char path[256];
static const uint64_t SIZE = 1 << 20;

static void base_cfg(struct vc_config *cfg)
{
	vc_config_init(cfg);
	cfg->backing_path = path;
	cfg->host_bytes = 32 * 4096;
	cfg->gpu_bytes = 64 * 4096;
	cfg->device = kind;
}

static int open_expect(const struct vc_config *cfg, int want, const char *msg_part)
{
	vc_cache *c = NULL;
	int r = vc_open(cfg, &c);
	if (r != want) {
		fprintf(stderr, "vc_open returned %d (%s), wanted %d\n", r, vc_last_error(), want);
		exit(1);
	}
	if (msg_part && !strstr(vc_last_error(), msg_part)) {
		fprintf(stderr, "message '%s' lacks '%s'\n", vc_last_error(), msg_part);
		exit(1);
	}
	if (r == 0)
		vc_close(c);
	return r;
}

static void config_errors(void)
{
	struct vc_config cfg;
	base_cfg(&cfg);
	vc_cache *c;
	int r = vc_open(&cfg, &c);
	t_skip_if_absent(r, "API test on CUDA");
	CHECK_OK(r);
	vc_close(c);

	CHECK(vc_open(NULL, &c) == -EINVAL);
	base_cfg(&cfg);
	cfg.version = 99;
	open_expect(&cfg, -VC_ECONFIG, "version");
	base_cfg(&cfg);
	cfg.size = 8;
	open_expect(&cfg, -VC_ECONFIG, NULL);
	base_cfg(&cfg);
	cfg.page_size = 3000;
	open_expect(&cfg, -EINVAL, "power of two");
	cfg.page_size = 256;
	open_expect(&cfg, -EINVAL, "page size");
	cfg.page_size = 4u << 20;
	open_expect(&cfg, -EINVAL, "page size");
	base_cfg(&cfg);
	cfg.host_bytes = 4096 * 4;
	open_expect(&cfg, -EINVAL, "host tier");
	base_cfg(&cfg);
	cfg.policy = "no-such-policy";
	open_expect(&cfg, -EINVAL, "no-such-policy");
	base_cfg(&cfg);
	cfg.write_mode = 7;
	open_expect(&cfg, -EINVAL, "write mode");
	base_cfg(&cfg);
	cfg.batch_pages = 0;
	open_expect(&cfg, -EINVAL, "batch");
	base_cfg(&cfg);
	cfg.backing_path = "/nonexistent/dir/file.img";
	open_expect(&cfg, -ENOENT, "/nonexistent/dir/file.img");
	base_cfg(&cfg);
	cfg.backing_path = NULL;
	open_expect(&cfg, -EINVAL, "backing");
	base_cfg(&cfg);
	cfg.device = 42;
	open_expect(&cfg, -VC_ECONFIG, "device");
	base_cfg(&cfg);
	cfg.seg_bytes = 3000;
	open_expect(&cfg, -EINVAL, "segments");
	cfg.seg_bytes = 2048;
	open_expect(&cfg, -EINVAL, "segments");
	cfg.seg_bytes = 0;
	cfg.gpu_bytes = 4096;
	open_expect(&cfg, -EINVAL, "at least 2");
	base_cfg(&cfg);
	cfg.gc_policy = 9;
	open_expect(&cfg, -EINVAL, "GC policy");
	base_cfg(&cfg);
	cfg.gc_segments = 0;
	open_expect(&cfg, -EINVAL, "GC step");
	base_cfg(&cfg);
	cfg.gc_watermark = 1.0;
	open_expect(&cfg, -EINVAL, "watermark");
	base_cfg(&cfg);
	cfg.early_release = -0.5;
	open_expect(&cfg, -EINVAL, "early-release");
	/* A version-1 caller (no GPU log fields) gets the log's defaults. */
	base_cfg(&cfg);
	cfg.size = offsetof(struct vc_config, seg_bytes);
	cfg.version = 1;
	cfg.gc_policy = 9; /* past its size: never read */
	open_expect(&cfg, 0, NULL);

	/* An older caller's smaller struct is accepted: the missing fields
	 * take their defaults. A newer caller's unknown non-zero field is not. */
	struct {
		struct vc_config cfg;
		uint64_t future_field;
	} big;
	memset(&big, 0, sizeof big);
	base_cfg(&big.cfg);
	big.cfg.size = sizeof big;
	open_expect(&big.cfg, 0, NULL);
	big.future_field = 1;
	open_expect(&big.cfg, -VC_ECONFIG, "fields");

	CHECK(vc_close(NULL) == 0);
	CHECK(strstr(vc_strerror(-VC_EDEVICE), "GPU") != NULL);
	CHECK(strcmp(vc_strerror(-ENOENT), vc_strerror(ENOENT)) == 0);
}

static void read_only(void)
{
	struct vc_config cfg;
	base_cfg(&cfg);
	cfg.flags = VC_OPEN_READONLY;
	vc_cache *c;
	CHECK_OK(vc_open(&cfg, &c));
	char b[100] = { 0 };
	CHECK(vc_write(c, b, sizeof b, 0) == -EROFS);
	CHECK(strstr(vc_last_error(), "read-only") != NULL);
	CHECK(vc_read(c, b, sizeof b, 10) == (ssize_t)sizeof b);
	CHECK_OK(vc_flush(c));
	CHECK_OK(vc_close(c));
}

/* A backing store given as an open fd: used, not closed by vc_close. */
static void by_fd(void)
{
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	struct vc_config cfg;
	base_cfg(&cfg);
	cfg.backing_path = NULL;
	cfg.backing_fd = fd;
	vc_cache *c;
	CHECK_OK(vc_open(&cfg, &c));
	unsigned char a[5000], b[5000];
	for (size_t i = 0; i < sizeof a; i++)
		a[i] = (unsigned char)(i * 13 + 1);
	CHECK(vc_write(c, a, sizeof a, 70001) == (ssize_t)sizeof a);
	CHECK_OK(vc_close(c));
	CHECK(pread(fd, b, sizeof b, 70001) == (ssize_t)sizeof b); /* fd still open */
	CHECK(memcmp(a, b, sizeof a) == 0);
	close(fd);
	/* A read-only fd cannot back a writable cache. */
	fd = open(path, O_RDONLY);
	cfg.backing_fd = fd;
	CHECK(vc_open(&cfg, &c) < 0);
	cfg.flags = VC_OPEN_READONLY;
	CHECK_OK(vc_open(&cfg, &c));
	CHECK(vc_read(c, b, 100, 70001) == 100 && memcmp(a, b, 100) == 0);
	CHECK_OK(vc_close(c));
	close(fd);
}

static void drop_and_prefetch(int write_mode)
{
	unsigned char orig[8192], mine[8192], got[8192];
	int fd = open(path, O_RDONLY);
	CHECK(pread(fd, orig, sizeof orig, 40960) == (ssize_t)sizeof orig);
	close(fd);

	struct vc_config cfg;
	base_cfg(&cfg);
	cfg.write_mode = write_mode;
	vc_cache *c;
	CHECK_OK(vc_open(&cfg, &c));
	CHECK(vc_size(c) == SIZE && vc_page_size(c) == 4096);
	for (size_t i = 0; i < sizeof mine; i++)
		mine[i] = (unsigned char)(orig[i] ^ 0xFF);

	/* Write-back + discard: the write is thrown away, the store unchanged. */
	CHECK(vc_write(c, mine, sizeof mine, 40960) == (ssize_t)sizeof mine);
	CHECK_OK(vc_drop(c, 40960, sizeof mine, VC_DROP_DISCARD));
	CHECK(vc_read(c, got, sizeof got, 40960) == (ssize_t)sizeof got);
	if (write_mode == VC_WRITE_BACK)
		CHECK(memcmp(got, orig, sizeof got) == 0);
	else
		CHECK(memcmp(got, mine, sizeof got) == 0); /* already on the store */

	/* Without discard, drop writes back first: nothing is lost. */
	CHECK(vc_write(c, orig, sizeof orig, 40960) == (ssize_t)sizeof orig);
	CHECK(vc_write(c, mine, 100, 40960 + 5) == 100);
	memcpy(orig + 5, mine, 100);
	CHECK_OK(vc_drop(c, 0, 0, 0));
	struct vc_stats st = { .size = sizeof st };
	CHECK_OK(vc_get_stats(c, &st));
	CHECK(st.pages_cached[VC_TIER_HOST] == 0 && st.pages_cached[VC_TIER_GPU] == 0);
	CHECK(st.dirty_pages == 0);
	fd = open(path, O_RDONLY);
	CHECK(pread(fd, got, sizeof got, 40960) == (ssize_t)sizeof got);
	close(fd);
	CHECK(memcmp(got, orig, sizeof got) == 0);

	/* Prefetch into the GPU tier: the pages land there, later reads hit it. */
	CHECK_OK(vc_prefetch(c, 0, 20 * 4096, VC_TIER_GPU));
	CHECK_OK(vc_get_stats(c, &st));
	CHECK(st.pages_cached[VC_TIER_GPU] == 20 && st.pages_cached[VC_TIER_HOST] == 0);
	/* 2 + 2 + 2 + 1 page accesses above; prefetches are not counted. */
	CHECK(st.hits[0] + st.hits[1] + st.misses == 7);
	uint64_t gpu_hits = st.hits[VC_TIER_GPU], d2h = st.d2h_bytes;
	CHECK(vc_read(c, got, 4096, 3 * 4096) == 4096);
	CHECK_OK(vc_get_stats(c, &st));
	CHECK(st.hits[VC_TIER_GPU] == gpu_hits + 1);
	/* Served in place (the default): one page over PCIe, and it stays. */
	CHECK(st.pages_cached[VC_TIER_HOST] == 0 && st.pages_cached[VC_TIER_GPU] == 20);
	CHECK(st.d2h_bytes == d2h + 4096);
	/* A read that straddles host and GPU pages, and a partial page. */
	unsigned char two[3 * 4096];
	CHECK(vc_read(c, two, sizeof two - 100, 2 * 4096 + 50) == (ssize_t)sizeof two - 100);
	int fd2 = open(path, O_RDONLY);
	unsigned char want[3 * 4096];
	CHECK(pread(fd2, want, sizeof want - 100, 2 * 4096 + 50) == (ssize_t)sizeof want - 100);
	close(fd2);
	CHECK(memcmp(two, want, sizeof want - 100) == 0);
	CHECK_OK(vc_get_stats(c, &st));
	CHECK(st.pages_cached[VC_TIER_HOST] == 0 && st.pages_cached[VC_TIER_GPU] == 20);

	/* Prefetch into the host tier brings GPU pages up too. */
	CHECK_OK(vc_prefetch(c, 0, 10 * 4096, VC_TIER_HOST));
	CHECK_OK(vc_get_stats(c, &st));
	CHECK(st.pages_cached[VC_TIER_HOST] == 10 && st.pages_cached[VC_TIER_GPU] == 10);
	/* More than the GPU tier holds: it wraps, evicting its own oldest. */
	CHECK_OK(vc_prefetch(c, 0, SIZE, VC_TIER_GPU));
	CHECK_OK(vc_get_stats(c, &st));
	/* Below the watermark early release keeps some segments free. */
	CHECK(st.pages_cached[VC_TIER_GPU] > 48 && st.pages_cached[VC_TIER_GPU] <= 64);
	CHECK(st.gpu_segments_evicted > 0 && st.early_releases > 0 && st.gc_runs == 0);
	CHECK(vc_prefetch(c, 0, 4096, 5) == -EINVAL);
	CHECK(vc_prefetch(c, SIZE + 1, 4096, VC_TIER_GPU) == 0);
	CHECK(vc_read(c, got, sizeof got, 40960) == (ssize_t)sizeof got);
	CHECK(memcmp(got, orig, sizeof got) == 0);

	/* Statistics: an older, smaller struct gets its prefix only. */
	struct vc_stats small;
	memset(&small, 0xAB, sizeof small);
	small.size = offsetof(struct vc_stats, misses);
	CHECK_OK(vc_get_stats(c, &small));
	CHECK(small.version == VC_STATS_VERSION);
	CHECK(small.misses == 0xABABABABABABABABull);
	CHECK_OK(vc_close(c));

	/* No GPU tier: prefetch into it is an error that says why. */
	base_cfg(&cfg);
	cfg.gpu_bytes = 0;
	CHECK_OK(vc_open(&cfg, &c));
	CHECK(vc_prefetch(c, 0, 4096, VC_TIER_GPU) == -EINVAL);
	CHECK(strstr(vc_last_error(), "disabled") != NULL);
	CHECK(vc_read(c, got, 100, 0) == 100);
	CHECK_OK(vc_close(c));
}

int main(void)
{
	kind = t_device_kind();
	t_make_file(path, sizeof path, SIZE, 7);
	config_errors();
	read_only();
	by_fd();
	drop_and_prefetch(VC_WRITE_BACK);
	drop_and_prefetch(VC_WRITE_THROUGH);
	unlink(path);
	fprintf(stderr, "engine API: ok\n");
	return 0;
}
