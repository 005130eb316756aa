/* Helpers shared by the test programs (header only: each test is one binary). */
#ifndef VC_TESTUTIL_H
#define VC_TESTUTIL_H

#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/hash.h"
#include "base/rand.h"
#include "vramcache.h"

#define T_SKIP 77

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

#define CHECK_OK(expr)                                                                     \
	do {                                                                               \
		long long r_ = (long long)(expr);                                          \
		if (r_ < 0) {                                                              \
			fprintf(stderr, "%s:%d: %s = %lld (%s; %s)\n", __FILE__, __LINE__, #expr, \
				r_, vc_strerror((int)r_), vc_last_error());                \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

/* The device this run asks for: VC_TEST_DEVICE=emu|cuda (default emu). */
static inline int t_device_kind(void)
{
	const char *s = getenv("VC_TEST_DEVICE");
	if (s && strcmp(s, "cuda") == 0)
		return VC_DEVICE_CUDA;
	return VC_DEVICE_EMU;
}

/* Exits 77 with a message when the asked-for device cannot be opened
 * because it is absent; any other failure is a test failure. */
static inline void t_skip_if_absent(int r, const char *what)
{
	if (r == -VC_ENODEVICE || r == -VC_ENOTBUILT) {
		fprintf(stderr, "SKIP %s: %s (%s)\n", what, vc_strerror(r), vc_last_error());
		exit(T_SKIP);
	}
}

/* vc_open, or the test's skip (t_skip_if_absent) where the device is
 * absent, or its failure. */
static inline vc_cache *t_open(const struct vc_config *cfg, const char *what)
{
	vc_cache *c = NULL;
	int e = vc_open(cfg, &c);
	t_skip_if_absent(e, what);
	CHECK_OK(e);
	return c;
}

/* A test in parts, each a few runs: ctest runs each part as a process of
 * its own (tests/CMakeLists.txt, vc_test_parts), side by side, so that no
 * test runs long. `alone`: runs only where named, never in the default
 * set. */
struct t_part {
	const char *name;
	void (*run)(int kind, int ops);
	bool alone;
};

/* main of a test in parts: `PROG [PART...]` runs the parts named, in the
 * table's order (whatever the order named), or with none every part but
 * the `alone` ones; `PROG --parts` lists them all, which ctest matches
 * against the list it registers. Each part gets the device VC_TEST_DEVICE
 * names and VC_TEST_OPS (default def_ops; def_ops 0: the parts take no
 * count, and get 0). Returns main's exit code. */
static inline int t_parts_main(int argc, char **argv, const struct t_part *parts, size_t n,
			       int def_ops, const char *what)
{
	if (argc == 2 && strcmp(argv[1], "--parts") == 0) {
		printf("parts:");
		for (size_t i = 0; i < n; i++)
			printf(" %s", parts[i].name);
		printf("\n");
		return 0;
	}
	CHECK(n <= 64);
	uint64_t want = 0;
	for (int a = 1; a < argc; a++) {
		size_t i = 0;
		while (i < n && strcmp(argv[a], parts[i].name) != 0)
			i++;
		if (i == n) {
			fprintf(stderr, "%s: no part %s (--parts lists them)\n", argv[0], argv[a]);
			return 2;
		}
		want |= 1ull << i;
	}
	for (size_t i = 0; i < n && argc == 1; i++)
		if (!parts[i].alone)
			want |= 1ull << i;
	const int kind = t_device_kind();
	const int ops = def_ops && getenv("VC_TEST_OPS") ? atoi(getenv("VC_TEST_OPS")) : def_ops;
	CHECK(ops > 0 || def_ops == 0);
	for (size_t i = 0; i < n; i++)
		if (want >> i & 1) {
			if (def_ops)
				fprintf(stderr, "%s: part %s, %d ops\n", what, parts[i].name, ops);
			else
				fprintf(stderr, "%s: part %s\n", what, parts[i].name);
			parts[i].run(kind, ops);
		}
	fprintf(stderr, "%s: all runs match\n", what);
	return 0;
}

static inline uint64_t t_rand(uint64_t *s)
{
	return vc_rand64(s);
}

/* Makes a temporary backing file of `size` bytes of seeded random data;
 * returns its path (static buffer per call site is the caller's). */
static inline void t_make_file(char *path, size_t pathlen, uint64_t size, uint64_t seed)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(path, pathlen, "%s/vc-test-XXXXXX", dir);
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unsigned char buf[65536];
	uint64_t done = 0;
	while (done < size) {
		size_t k = size - done < sizeof buf ? (size_t)(size - done) : sizeof buf;
		for (size_t i = 0; i < k; i += 8) {
			uint64_t v = t_rand(&seed);
			memcpy(buf + i, &v, k - i < 8 ? k - i : 8);
		}
		CHECK(write(fd, buf, k) == (ssize_t)k);
		done += k;
	}
	close(fd);
}

/* How a model test sets up the GPU log for a run (vc_config's seg_bytes
 * in pages, gc_policy, gc_segments, gc_watermark, gc_fragmentation). */
struct gcv {
	const char *name;
	uint32_t seg_pages; /* 0: the default */
	int policy;
	uint32_t segments;
	double watermark, frag;
};

static const struct gcv gc_default __attribute__((unused)) = {
	"default", 0, VC_GC_COST_BENEFIT, 4, 0.02, 0.25
};

/* Flushes, drops and prefetches (both tiers) random ranges of c's volume 0
 * of `size` bytes until *stop, 200 us apart: none of them may change a
 * byte, so model tests run it beside their writers. */
/* gpu_may_fail: the run fails GPUs; once every part has failed, a
 * prefetch into the GPU tier says so (-VC_EDEVICE), which is no error of
 * the cache's. */
static inline void t_chaos_x(vc_cache *c, uint64_t size, uint64_t seed, atomic_int *stop,
			     bool gpu_may_fail)
{
	while (!atomic_load(stop)) {
		uint64_t off = t_rand(&seed) % size, len = t_rand(&seed) % 65536;
		switch (t_rand(&seed) % 4) {
		case 0:
			CHECK_OK(vc_flush(c));
			break;
		case 1:
			CHECK_OK(vc_drop(c, off, len, 0));
			break;
		case 2: {
			int r = vc_prefetch(c, off, len, VC_TIER_GPU);
			if (!(gpu_may_fail && r == -VC_EDEVICE))
				CHECK_OK(r);
			break;
		}
		case 3:
			CHECK_OK(vc_prefetch(c, off, len, VC_TIER_HOST));
			break;
		}
		usleep(200);
	}
}

static inline void t_chaos(vc_cache *c, uint64_t size, uint64_t seed, atomic_int *stop)
{
	t_chaos_x(c, size, seed, stop, false);
}

/* The first `size` bytes of the file at path, in memory from malloc. */
static inline unsigned char *t_read_file(const char *path, uint64_t size)
{
	unsigned char *b = malloc(size ? size : 1);
	int fd = open(path, O_RDONLY);
	CHECK(b && fd >= 0 && pread(fd, b, size, 0) == (ssize_t)size);
	close(fd);
	return b;
}

/* The file at path must hold exactly shadow[0..size): the first
 * difference is reported and fails the test. */
static inline void t_check_file(const char *path, const unsigned char *shadow, uint64_t size)
{
	unsigned char *f = malloc(size ? size : 1);
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(pread(fd, f, size, 0) == (ssize_t)size);
	close(fd);
	for (uint64_t i = 0; i < size; i++)
		if (f[i] != shadow[i]) {
			fprintf(stderr, "backing byte %llu: %02x, model %02x\n", (unsigned long long)i,
				f[i], shadow[i]);
			CHECK(!"backing store differs from the model");
		}
	free(f);
}

/* Repeating contents for dedup runs (test_engine_model, test_gpusize):
 * 512-byte chunks drawn from a pool of T_POOL random ones; all chunks of
 * an even 4 KiB page from one entry (whole pages repeat), an odd page's
 * chunk by chunk (blocks repeat in new combinations). */
#define T_POOL 4
struct t_pool {
	unsigned char b[T_POOL][512];
};

static inline unsigned char t_pool_byte(const struct t_pool *p, uint64_t o)
{
	uint64_t ch = o / 512, pg = ch / 8;
	uint64_t k = pg % 2 == 0 ? vc_mix64(pg) % T_POOL : vc_mix64(ch) % T_POOL;
	return p->b[k][o % 512];
}

/* Puts [off, off + len) back to the pool's bytes, through the cache and
 * in the model shadow (blocks turn shared again); buf: len bytes of room. */
static inline void t_pool_write(vc_cache *c, const struct t_pool *p, unsigned char *shadow,
				unsigned char *buf, uint64_t off, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		buf[i] = t_pool_byte(p, off + i);
	CHECK(vc_write(c, buf, len, off) == (ssize_t)len);
	memcpy(shadow + off, buf, len);
}

/* Draws the pool from seed, and makes the file at path and shadow[0..size)
 * the pool's contents. */
static inline void t_pool_file(struct t_pool *p, uint64_t seed, const char *path,
			       unsigned char *shadow, uint64_t size)
{
	for (int k = 0; k < T_POOL; k++)
		for (int b = 0; b < 512; b++)
			p->b[k][b] = (unsigned char)t_rand(&seed);
	for (uint64_t o = 0; o < size; o++)
		shadow[o] = t_pool_byte(p, o);
	FILE *f = fopen(path, "r+b");
	CHECK(f && fwrite(shadow, 1, size, f) == size);
	fclose(f);
}

#endif
