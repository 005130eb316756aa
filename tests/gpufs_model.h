/* The GPUfs model test, written once for the emulated device (test_gpufs.c,
 * C11: a warp is a CPU thread) and for CUDA (test_gpufs_cuda.cu: a warp is
 * a warp). The warp bodies (GM_FN) use vramcache/gpufs.h as kernels do;
 * the harness (host code, C and C++) builds the files and their shadows,
 * runs "kernels" through a launcher the including test supplies, writes
 * through the cache from a CPU thread meanwhile, and checks every byte at
 * each consistency point.
 *
 * Files: R read-only (changed between kernels behind the cache's back, by
 * pwrite: close-to-open versions), A read-write (each warp owns a stripe
 * and reads and writes random ranges of it; changed between kernels
 * through the cache), C written by the CPU thread page by page during the
 * kernels (each page a generation's pattern: a warp's read of a page must
 * see one generation whole, since a grant pins the page against writers).
 */
#ifndef VC_TEST_GPUFS_MODEL_H
#define VC_TEST_GPUFS_MODEL_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "vramcache.h"
#include "vramcache/gpufs.h"

#ifdef __CUDACC__
#define GM_FN __device__
#define GM_HD __host__ __device__
#define GM_WAIT() __nanosleep(10000)
#else
#define GM_FN static
#define GM_HD static
#define GM_WAIT() usleep(1000) /* a CPU warp that waits for others gives way */
#endif

#define GM_PAGE 4096u
#define GM_MAXLEN (3 * GM_PAGE)

struct gm_arg {
	char path_r[256], path_a[256], path_c[256];
	char path_t[256]; /* the truncation case's file: 6 pages, opened by the host */
	uint64_t size_r, size_a, size_c;
	const unsigned char *shadow_r; /* R as kernels must see it */
	unsigned char *result_a;       /* A: the start state, each warp applying its writes */
	unsigned char *scratch;        /* GM_MAXLEN per warp */
	uint64_t stripe;               /* bytes of A per warp */
	unsigned ops, seed, nwarps;
	int host_fd_a; /* A as the host opened it (vc_gpufs_open): usable without a gopen */
	/* out (device-scope atomics) */
	unsigned long long errors, checked, calls_failed;
	long long first_err;           /* the first failing call's result */
	/* gmmap test */
	unsigned long long readers_done;
	unsigned nreaders;
	/* timeout test */
	uint64_t short_timeout_ns;
	unsigned long long writer_done, mapped;
	long long writer_result, after_result;
};

GM_HD uint64_t gm_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* C's page content for generation gen. */
GM_HD unsigned char gm_cbyte(uint32_t gen, uint64_t page, uint64_t i)
{
	return (unsigned char)(gen * 131u + page * 7u + i * 13u + (i >> 8));
}

GM_FN void gm_fail(struct gm_arg *a, long long r)
{
	struct vc_gfs_warp w = vc_gfs_warp_self();
	if (VC_GFS_LEADER(w)) {
		if (VC_GFS_ADD64(&a->calls_failed, 1) == 0)
			a->first_err = r;
	}
}

/* Every lane checks its share of n bytes; mismatches are counted. */
GM_FN void gm_cmp(struct gm_arg *a, const unsigned char *got, const unsigned char *want, uint64_t n)
{
	struct vc_gfs_warp w = vc_gfs_warp_self();
	unsigned long long bad = 0;
	for (uint64_t i = w.rank; i < n; i += w.n)
		bad += got[i] != want[i];
	if (bad) {
#ifndef __CUDACC__
		if (VC_GFS_ADD64(&a->errors, bad) == 0)
			for (uint64_t i = 0; i < n; i++)
				if (got[i] != want[i]) {
					fprintf(stderr, "first wrong byte: %llu of %llu (%s)\n",
						(unsigned long long)i, (unsigned long long)n,
						want >= a->shadow_r && want < a->shadow_r + a->size_r ? "R" : "A");
					break;
				}
#else
		VC_GFS_ADD64(&a->errors, bad);
#endif
	}
	if (VC_GFS_LEADER(w))
		VC_GFS_ADD64(&a->checked, n);
}

GM_FN void gm_model_warp(const struct vc_gfs_ctx *g, unsigned warp, struct gm_arg *a)
{
	struct vc_gfs_warp w = vc_gfs_warp_self();
	unsigned char *buf = a->scratch + (uint64_t)warp * GM_MAXLEN;
	int fr = vc_gopen(g, a->path_r, VC_GO_RDONLY);
	int fa = vc_gopen(g, a->path_a, VC_GO_RDWR);
	int fc = vc_gopen(g, a->path_c, VC_GO_RDONLY);
	if (fr < 0 || fa < 0 || fc < 0) {
		gm_fail(a, fr < 0 ? fr : fa < 0 ? fa : fc);
		return;
	}
	uint64_t s = a->seed * 1000003ull + warp, lo = (uint64_t)warp * a->stripe;
	for (unsigned i = 0; i < a->ops; i++) {
		unsigned op = (unsigned)(gm_rand(&s) % 10);
		uint64_t len = 1 + gm_rand(&s) % GM_MAXLEN;
		if (op < 4) { /* R anywhere */
			uint64_t off = gm_rand(&s) % a->size_r;
			int64_t r = vc_gread(g, fr, off, len, buf);
			uint64_t want = len < a->size_r - off ? len : a->size_r - off;
			if (r != (int64_t)want) {
				gm_fail(a, r);
				continue;
			}
			gm_cmp(a, buf, a->shadow_r + off, want);
		} else if (op < 6) { /* A, own stripe */
			if (len > a->stripe)
				len = a->stripe;
			uint64_t off = lo + gm_rand(&s) % (a->stripe - len + 1);
			int64_t r = vc_gread(g, fa, off, len, buf);
			if (r != (int64_t)len) {
				gm_fail(a, r);
				continue;
			}
			gm_cmp(a, buf, a->result_a + off, len);
		} else if (op < 8) { /* write A, own stripe */
			if (len > a->stripe)
				len = a->stripe;
			uint64_t off = lo + gm_rand(&s) % (a->stripe - len + 1), tag = gm_rand(&s);
			for (uint64_t k = w.rank; k < len; k += w.n)
				buf[k] = (unsigned char)(tag + k * 31 + (k >> 7));
			VC_GFS_SYNCWARP(w);
			int64_t r = vc_gwrite(g, fa, off, len, buf);
			if (r != (int64_t)len) {
				gm_fail(a, r);
				continue;
			}
			for (uint64_t k = w.rank; k < len; k += w.n)
				a->result_a[off + k] = buf[k];
			VC_GFS_SYNCWARP(w);
		} else { /* a page of C: one generation whole */
			uint64_t page = gm_rand(&s) % (a->size_c / GM_PAGE);
			int64_t r = vc_gread(g, fc, page * GM_PAGE, GM_PAGE, buf);
			if (r != GM_PAGE) {
				gm_fail(a, r);
				continue;
			}
			/* gen from byte 0: gen * 131 + page * 7 = b0 (mod 256); 131
			 * is odd, so its inverse mod 256 (43) gives gen mod 256. */
			uint32_t gen = (uint32_t)(((unsigned)buf[0] - (unsigned)(page * 7u)) * 43u) & 0xff;
			unsigned long long bad = 0;
			for (uint64_t k = w.rank; k < GM_PAGE; k += w.n)
				bad += buf[k] != gm_cbyte(gen, page, k);
			if (bad)
				VC_GFS_ADD64(&a->errors, bad);
			if (VC_GFS_LEADER(w))
				VC_GFS_ADD64(&a->checked, GM_PAGE);
		}
		VC_GFS_SYNCWARP(w); /* buf is the next op's */
	}
	int r1 = vc_gclose(g, fr), r2 = vc_gclose(g, fa), r3 = vc_gclose(g, fc);
	if (r1 < 0 || r2 < 0 || r3 < 0)
		gm_fail(a, r1 < 0 ? r1 : r2 < 0 ? r2 : r3);
}

/* gmmap under eviction pressure: warps below nreaders... no: warps >=
 * nreaders map a page each and hold it while the readers sweep the whole
 * of R (larger than both tiers), then check the mapping again. */
GM_FN void gm_mmap_warp(const struct vc_gfs_ctx *g, unsigned warp, struct gm_arg *a)
{
	struct vc_gfs_warp w = vc_gfs_warp_self();
	unsigned char *buf = a->scratch + (uint64_t)warp * GM_MAXLEN;
	int fr = vc_gopen(g, a->path_r, VC_GO_RDONLY);
	if (fr < 0) {
		gm_fail(a, fr);
		return;
	}
	if (warp < a->nreaders) {
		uint64_t pages = a->size_r / GM_PAGE, s = warp + 77;
		for (uint64_t k = 0; k < pages; k++) {
			uint64_t p = (k * 2654435761ull + gm_rand(&s) % 2) % pages;
			int64_t r = vc_gread(g, fr, p * GM_PAGE, GM_PAGE, buf);
			if (r != GM_PAGE) {
				gm_fail(a, r);
				break;
			}
			gm_cmp(a, buf, a->shadow_r + p * GM_PAGE, GM_PAGE);
			VC_GFS_SYNCWARP(w);
		}
		if (VC_GFS_LEADER(w))
			VC_GFS_ADD64(&a->readers_done, 1);
	} else {
		uint64_t off = ((uint64_t)warp * 37 % (a->size_r / GM_PAGE)) * GM_PAGE + 100;
		struct vc_gmap m;
		int64_t r = vc_gmmap(g, fr, off, 1000, VC_GPROT_READ, &m);
		if (r != 1000) {
			gm_fail(a, r);
			vc_gclose(g, fr);
			return;
		}
		gm_cmp(a, (const unsigned char *)m.ptr, a->shadow_r + off, 1000);
		uint64_t t0 = vc_gfs_now_ns();
		while (VC_GFS_LD(&a->readers_done) < a->nreaders && vc_gfs_now_ns() - t0 < 60000000000ull)
			GM_WAIT();
		gm_cmp(a, (const unsigned char *)m.ptr, a->shadow_r + off, 1000);
		r = vc_gmunmap(g, &m);
		if (r < 0)
			gm_fail(a, r);
	}
	int r = vc_gclose(g, fr);
	if (r < 0)
		gm_fail(a, r);
}

/* Errors: every case returns its code, none hangs. */
GM_FN void gm_errors_warp(const struct vc_gfs_ctx *g, unsigned warp, struct gm_arg *a)
{
	(void)warp;
	unsigned char *buf = a->scratch;
	long long got[15];
	got[0] = vc_gopen(g, "/nonexistent/gpufs-test", VC_GO_RDONLY);
	int fr = vc_gopen(g, a->path_r, VC_GO_RDONLY);
	got[1] = fr;
	got[2] = vc_gwrite(g, fr, 0, 10, buf);                       /* read-only fd */
	got[3] = vc_gopen(g, a->path_r, VC_GO_RDWR);                 /* open read-only already */
	got[4] = vc_gread(g, fr, a->size_r + 5, 10, buf);            /* past the end: 0 */
	struct vc_gmap m;
	got[5] = vc_gmmap(g, fr, a->size_r, 10, VC_GPROT_READ, &m);  /* past the end */
	got[6] = vc_gmmap(g, fr, 0, 10, VC_GPROT_READ | VC_GPROT_WRITE, &m);
	got[7] = vc_gread(g, 63, 0, 10, buf);                        /* not open */
	int fa = vc_gopen(g, a->path_a, VC_GO_RDWR);
	got[8] = vc_gwrite(g, fa, a->size_a - 5, 10, buf);           /* past the end */
	got[9] = vc_gread(g, fr, a->size_r - 3, 10, buf);            /* short: 3 */
	/* A truncation cuts what kernels may read from T's mapping (direct
	 * reads, where the device has them; T's pages were never cached, so
	 * they would be read from there): after a shrink and a growth back,
	 * the bytes past the shrink read as zeros, not as the pages the
	 * registration still pins (on CUDA; the emulated device reads the
	 * live mapping, where the OS gives zeros either way). */
	int fc = vc_gopen(g, a->path_t, VC_GO_RDWR);
	got[10] = vc_gftruncate(g, fc, 4 * GM_PAGE + 10);
	got[11] = vc_gread(g, fc, 5 * GM_PAGE, 100, buf);            /* past the new end: 0 */
	got[12] = vc_gftruncate(g, fc, 6 * GM_PAGE);
	got[13] = vc_gread(g, fc, 4 * GM_PAGE, 2 * GM_PAGE, buf);
	if (got[13] == 2 * GM_PAGE) {
		struct vc_gfs_warp w = vc_gfs_warp_self();
		unsigned long long bad = 0;
		for (uint64_t i = 10 + w.rank; i < 2 * GM_PAGE; i += w.n)
			bad += buf[i] != 0;
		if (bad)
			VC_GFS_ADD64(&a->errors, bad);
	}
	got[14] = vc_gftruncate(g, fr, 0);                            /* read-only fd */
	vc_gclose(g, fc);
	vc_gclose(g, fa);
	vc_gclose(g, fr);
	/* The host's fd, no gopen in this kernel: 100 bytes of A. */
	if (vc_gread(g, a->host_fd_a, 1000, 100, buf) != 100)
		gm_fail(a, -1);
	else
		gm_cmp(a, buf, a->result_a + 1000, 100);
	const long long want[15] = { -ENOENT, 0,      -EBADF, -EACCES, 0, -ENXIO, -ENOTSUP, -EBADF,
				     -EFBIG,  3,      0,      0,       0, 2 * GM_PAGE, -EBADF };
	struct vc_gfs_warp w = vc_gfs_warp_self();
	for (int i = 0; i < 15; i++) {
		bool ok = i == 1 ? got[i] >= 0 : got[i] == want[i];
		if (!ok && VC_GFS_LEADER(w)) {
			VC_GFS_ADD64(&a->errors, 1);
			if (VC_GFS_ADD64(&a->calls_failed, 1) == 0)
				a->first_err = i * 1000000 + got[i];
		}
	}
}

/* Never a hang: warp 1 writes a page that warp 0 keeps mapped (the host's
 * write waits for the mapping's pin), with a short timeout: the write
 * returns -ETIMEDOUT, the context is broken (the next call: -EIO), and
 * after vc_gpufs_release a kernel works again. */
GM_FN void gm_timeout_warp(const struct vc_gfs_ctx *g0, unsigned warp, struct gm_arg *a)
{
	struct vc_gfs_ctx g = *g0;
	g.timeout_ns = a->short_timeout_ns;
	struct vc_gfs_warp w = vc_gfs_warp_self();
	int fa = vc_gopen(&g, a->path_a, VC_GO_RDWR);
	if (fa < 0) {
		gm_fail(a, fa);
		return;
	}
	if (warp == 0) {
		struct vc_gmap m;
		int64_t r = vc_gmmap(&g, fa, 0, 100, VC_GPROT_READ, &m);
		if (r != 100) {
			gm_fail(a, r);
			VC_GFS_ST(&a->mapped, 2ull); /* let the writer go */
			return;
		}
		if (VC_GFS_LEADER(w))
			VC_GFS_ST(&a->mapped, 1ull);
		uint64_t t0 = vc_gfs_now_ns();
		while (VC_GFS_LD(&a->writer_done) == 0 && vc_gfs_now_ns() - t0 < 60000000000ull)
			GM_WAIT();
		vc_gmunmap(&g, &m); /* the context is broken by now: its result is -EIO */
	} else {
		unsigned char *buf = a->scratch;
		uint64_t t0 = vc_gfs_now_ns();
		while (VC_GFS_LD(&a->mapped) == 0 && vc_gfs_now_ns() - t0 < 60000000000ull)
			GM_WAIT();
		int64_t r = vc_gwrite(&g, fa, 10, 20, buf);
		int64_t r2 = vc_gread(&g, fa, 0, 10, buf);
		if (VC_GFS_LEADER(w)) {
			a->writer_result = r;
			a->after_result = r2;
			VC_GFS_ST(&a->writer_done, 1ull);
		}
	}
}

enum gm_kernel { GM_MODEL, GM_MMAP, GM_ERRORS, GM_TIMEOUT };

/* ---- the harness (host) ------------------------------------------------------ */

#define GM_CHECK(cond)                                                                        \
	do {                                                                                  \
		if (!(cond)) {                                                                \
			fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond, \
				vc_last_error());                                             \
			exit(1);                                                              \
		}                                                                             \
	} while (0)

/* What the including test provides. */
struct gm_env {
	int device; /* enum vc_device_kind */
	/* Memory the warps can reach (managed on CUDA) and its free. */
	void *(*alloc)(size_t n);
	void (*release)(void *p);
	/* Runs kernel k with nwarps warps over g's context; 0 or -errno. */
	int (*launch)(vc_gpufs *g, enum gm_kernel k, unsigned nwarps, struct gm_arg *a);
};

static uint64_t gm_hrand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void gm_write_file(const char *path, const unsigned char *b, uint64_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	GM_CHECK(fd >= 0);
	GM_CHECK(pwrite(fd, b, n, 0) == (ssize_t)n);
	close(fd);
}

static void gm_check_disk(const char *path, const unsigned char *want, uint64_t n)
{
	unsigned char *b = (unsigned char *)malloc(n);
	int fd = open(path, O_RDONLY);
	GM_CHECK(b && fd >= 0 && pread(fd, b, n, 0) == (ssize_t)n);
	close(fd);
	GM_CHECK(memcmp(b, want, n) == 0);
	free(b);
}

static void gm_check_cache(vc_volume *v, const unsigned char *want, uint64_t n)
{
	unsigned char *b = (unsigned char *)malloc(n);
	GM_CHECK(b && vc_volume_read(v, b, n, 0) == (ssize_t)n);
	for (uint64_t i = 0; i < n; i++)
		if (b[i] != want[i]) {
			fprintf(stderr, "cache differs at %llu: %u, want %u\n", (unsigned long long)i,
				b[i], want[i]);
			exit(1);
		}
	free(b);
}

struct gm_cpu {
	vc_volume *v;
	unsigned char *shadow;
	uint64_t size;
	uint32_t gen;
	volatile int stop;
	unsigned long long writes;
};

/* The CPU writer: whole pages of C through the cache, each a new
 * generation's pattern, while the kernel runs. */
static void *gm_cpu_main(void *p)
{
	struct gm_cpu *w = (struct gm_cpu *)p;
	uint64_t s = w->gen, pages = w->size / GM_PAGE;
	unsigned char page[GM_PAGE];
	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		uint64_t pg = gm_hrand(&s) % pages;
		uint32_t gen = ++w->gen;
		for (uint64_t i = 0; i < GM_PAGE; i++)
			page[i] = gm_cbyte(gen, pg, i);
		GM_CHECK(vc_volume_write(w->v, page, GM_PAGE, pg * GM_PAGE) == GM_PAGE);
		memcpy(w->shadow + pg * GM_PAGE, page, GM_PAGE);
		w->writes++;
		usleep(200);
	}
	return NULL;
}

struct gm_sweep {
	vc_volume *v;
	uint64_t size;
	volatile int stop;
	unsigned long long sweeps;
};

/* A CPU reader sweeping R through the cache during the gmmap kernel: it
 * churns the host tier, where mapped pages are pinned. */
static void *gm_sweep_main(void *p)
{
	struct gm_sweep *w = (struct gm_sweep *)p;
	unsigned char *b = (unsigned char *)malloc(64 * GM_PAGE);
	GM_CHECK(b);
	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		for (uint64_t off = 0; off < w->size; off += 64 * GM_PAGE)
			GM_CHECK(vc_volume_read(w->v, b, 64 * GM_PAGE, off) >= 0);
		w->sweeps++;
	}
	free(b);
	return NULL;
}

static void gm_report(const char *what, const struct gm_arg *a)
{
	fprintf(stderr, "%s: %llu bytes checked, %llu wrong, %llu calls failed (first %lld)\n", what,
		a->checked, a->errors, a->calls_failed, a->first_err);
}

/* A stalled test's host threads, each printing its own stack (glibc's
 * backtrace in a signal handler; offsets from the executable's start, for
 * addr2line on the same binary): where the service threads wait, on a
 * machine without gdb. Diagnosis only. */
#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>

static void gm_stack_handler(int sig)
{
	(void)sig;
	void *pc[32];
	int n = backtrace(pc, 32);
	char line[64 * 20 + 64];
	int k = snprintf(line, sizeof line, "stack tid %ld:", (long)syscall(SYS_gettid));
	for (int i = 0; i < n && k < (int)sizeof line - 24; i++)
		k += snprintf(line + k, sizeof line - k, " %#lx", (unsigned long)pc[i]);
	line[k++] = '\n';
	(void)!write(2, line, (size_t)k);
}

static void gm_dump_stacks(void)
{
	FILE *m = fopen("/proc/self/maps", "r");
	char ml[512];
	while (m && fgets(ml, sizeof ml, m))
		if (strstr(ml, "test_gpufs"))
			fprintf(stderr, "stacks: map %s", ml);
	if (m)
		fclose(m);
	signal(SIGUSR2, gm_stack_handler);
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.') {
			syscall(SYS_tgkill, getpid(), atoi(e->d_name), SIGUSR2);
			usleep(20000);
		}
	if (d)
		closedir(d);
}

struct gm_progress {
	vc_gpufs *g;
	const struct gm_arg *a;
	unsigned every_s;
	volatile int stop;
};

/* VC_GPUFS_PROGRESS=S: the context's counters every S seconds while the
 * test runs (diagnosis of a round that does not end: is the ring moving,
 * is a revoke pass stuck, are gopens dropping pages). Prints only. */
static void *gm_progress_main(void *p)
{
	struct gm_progress *pr = (struct gm_progress *)p;
	uint64_t last = 0;
	unsigned same = 0;
	for (unsigned k = 1; !__atomic_load_n(&pr->stop, __ATOMIC_ACQUIRE); k++) {
		for (unsigned i = 0; i < pr->every_s * 10 && !__atomic_load_n(&pr->stop, __ATOMIC_ACQUIRE); i++)
			usleep(100000);
		struct vc_gpufs_stats st;
		if (vc_gpufs_stats(pr->g, &st) != 0)
			continue;
		fprintf(stderr, "[%us] requests %llu batches %llu opens %llu gets %llu writes %llu syncs %llu "
				"reopen-drops %llu revokes %llu (fallback %llu) pass-age %.1f ms held %llu\n",
			k * pr->every_s, (unsigned long long)st.requests, (unsigned long long)st.batches,
			(unsigned long long)st.opens, (unsigned long long)st.gets,
			(unsigned long long)st.writes, (unsigned long long)st.syncs,
			(unsigned long long)st.reopen_drops, (unsigned long long)st.revokes,
			(unsigned long long)st.rev_fallbacks, st.pass_age_ns / 1e6,
			(unsigned long long)st.held);
		same = st.requests == last ? same + 1 : 0;
		last = st.requests;
		if (same == 2) {
			/* The request ring (mapped host memory, the same address
			 * on both sides): slots published and not answered, or
			 * answered. */
			struct vc_gfs_ctx x;
			if (vc_gpufs_ctx(pr->g, &x) == 0)
				for (uint32_t i = 0; i <= x.ring_mask; i++) {
					const struct vc_gfs_req *q = &x.ring[i];
					fprintf(stderr, "slot %u: seq %llu done %llu op %u fd %u off %llu result %lld\n",
						i, (unsigned long long)q->seq, (unsigned long long)q->done, q->op,
						q->fd, (unsigned long long)q->off, (long long)q->result);
				}
			gm_dump_stacks();
		}
	}
	return NULL;
}

/* The whole test: 0 pass, 77 skip. */
static int gm_main(const struct gm_env *env, unsigned nwarps, unsigned ops, unsigned rounds)
{
	char dir[] = "/tmp/vc-gpufs-XXXXXX";
	GM_CHECK(mkdtemp(dir));
	struct gm_arg *a = (struct gm_arg *)env->alloc(sizeof *a);
	GM_CHECK(a);
	memset(a, 0, sizeof *a);
	snprintf(a->path_r, sizeof a->path_r, "%s/r", dir);
	snprintf(a->path_a, sizeof a->path_a, "%s/a", dir);
	snprintf(a->path_c, sizeof a->path_c, "%s/c", dir);
	snprintf(a->path_t, sizeof a->path_t, "%s/t", dir);
	char path0[300];
	snprintf(path0, sizeof path0, "%s/vol0", dir);
	/* Sizes: R larger than both tiers together (eviction under the
	 * kernels), A a stripe per warp, C 1 MiB; none page-aligned but C. */
	a->size_r = 6u * 1024 * 1024 + 1234;
	a->stripe = 3 * GM_PAGE + 100;
	a->size_a = a->stripe * nwarps + 77;
	a->size_c = 1024 * 1024;
	a->nwarps = nwarps;
	a->ops = ops;
	unsigned char *sr = (unsigned char *)env->alloc(a->size_r);
	unsigned char *sa = (unsigned char *)env->alloc(a->size_a);
	unsigned char *sc = (unsigned char *)malloc(a->size_c);
	a->scratch = (unsigned char *)env->alloc((uint64_t)nwarps * GM_MAXLEN);
	GM_CHECK(sr && sa && sc && a->scratch);
	uint64_t s = 42;
	for (uint64_t i = 0; i < a->size_r; i++)
		sr[i] = (unsigned char)gm_hrand(&s);
	for (uint64_t i = 0; i < a->size_a; i++)
		sa[i] = (unsigned char)gm_hrand(&s);
	for (uint64_t i = 0; i < a->size_c; i++)
		sc[i] = gm_cbyte(0, i / GM_PAGE, i % GM_PAGE);
	a->shadow_r = sr;
	a->result_a = sa;
	gm_write_file(a->path_r, sr, a->size_r);
	gm_write_file(a->path_a, sa, a->size_a);
	gm_write_file(a->path_c, sc, a->size_c);
	gm_write_file(a->path_t, sc + GM_PAGE, 6 * GM_PAGE); /* mostly nonzero bytes */
	gm_write_file(path0, sc, GM_PAGE);

	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path0;
	cfg.device = env->device;
	cfg.host_bytes = 256 * GM_PAGE; /* 1 MiB */
	cfg.gpu_bytes = 1024 * GM_PAGE; /* 4 MiB */
	/* VC_GPUFS_GPU_PAGES=0: no GPU tier, every page in mapped host memory
	 * and no device work on the host's side (for compute-sanitizer). */
	const char *gp = getenv("VC_GPUFS_GPU_PAGES");
	if (gp)
		cfg.gpu_bytes = strtoull(gp, NULL, 0) * GM_PAGE;
	cfg.seg_bytes = 64 * GM_PAGE;
	vc_cache *c;
	int r = vc_open(&cfg, &c);
	if (r == -VC_ENODEVICE || r == -VC_ENOTBUILT) {
		fprintf(stderr, "SKIP: no usable device: %s\n", vc_last_error());
		return 77;
	}
	GM_CHECK(r == 0);
	struct vc_gpufs_config gc;
	vc_gpufs_config_init(&gc);
	gc.table_entries = 4096;
	gc.max_cached = 32; /* the table holds a few; most grants come and go */
	gc.timeout_ns = 120ull * 1000000000u;
	/* VC_GPUFS_RING=N: N request slots (a power of two), fewer than the
	 * warps in flight, so that claims wait for free slots (the ring's
	 * wrap, which the GPU's thousands of warps always exercise). */
	const char *rs = getenv("VC_GPUFS_RING");
	if (rs)
		gc.ring_slots = (uint32_t)strtoul(rs, NULL, 0);
	/* VC_GPUFS_DIRECT=off, VC_GPUFS_ADMIT=off: without direct reads, or
	 * without their hints (for A/B runs on the GPU). */
	const char *dv = getenv("VC_GPUFS_DIRECT"), *av = getenv("VC_GPUFS_ADMIT");
	const bool no_direct = dv && strcmp(dv, "off") == 0;
	if (no_direct)
		gc.flags |= VC_GPUFS_NO_DIRECT;
	if (av && strcmp(av, "off") == 0)
		gc.flags |= VC_GPUFS_NO_ADMIT;
	vc_gpufs *g;
	GM_CHECK(vc_gpufs_create(c, &gc, &g) == 0);
	int fc = vc_gpufs_open(g, a->path_c, VC_GO_RDWR);
	int fa = vc_gpufs_open(g, a->path_a, VC_GO_RDWR);
	GM_CHECK(fc >= 0 && fa >= 0);
	a->host_fd_a = fa;
	/* R read-only on the host first: kernels read what the cache does not
	 * hold straight from its mapping (direct reads), where the device can. */
	int frh = vc_gpufs_open(g, a->path_r, VC_GO_RDONLY);
	GM_CHECK(frh >= 0 && vc_gpufs_close(g, frh) == 0);
	struct gm_progress prog = { g, a, 0, 0 };
	pthread_t progt;
	const char *pe = getenv("VC_GPUFS_PROGRESS");
	prog.every_s = pe ? (unsigned)atoi(pe) : 0;
	if (prog.every_s)
		GM_CHECK(pthread_create(&progt, NULL, gm_progress_main, &prog) == 0);

	for (unsigned round = 0; round < rounds; round++) {
		a->seed = round + 1;
		a->errors = a->checked = a->calls_failed = 0;
		struct gm_cpu cpu;
		memset(&cpu, 0, sizeof cpu);
		cpu.v = vc_gpufs_volume(g, fc);
		cpu.shadow = sc;
		cpu.size = a->size_c;
		cpu.gen = round * 1000;
		pthread_t t;
		GM_CHECK(pthread_create(&t, NULL, gm_cpu_main, &cpu) == 0);
		struct timespec k0, k1;
		clock_gettime(CLOCK_MONOTONIC, &k0);
		r = env->launch(g, GM_MODEL, nwarps, a);
		clock_gettime(CLOCK_MONOTONIC, &k1);
		__atomic_store_n(&cpu.stop, 1, __ATOMIC_RELEASE);
		pthread_join(t, NULL);
		GM_CHECK(r == 0);
		gm_report("model", a);
		fprintf(stderr, "  round %u: %u warps x %u ops in %.2f s; CPU wrote %llu pages of C meanwhile\n",
			round, nwarps, ops, (k1.tv_sec - k0.tv_sec) + (k1.tv_nsec - k0.tv_nsec) * 1e-9,
			cpu.writes);
		GM_CHECK(a->errors == 0 && a->calls_failed == 0 && a->checked > 0);
		/* The consistency point: the kernel closed its files, so the
		 * cache and the disk (write-through) hold every write. */
		gm_check_cache(vc_gpufs_volume(g, fa), sa, a->size_a);
		gm_check_disk(a->path_a, sa, a->size_a);
		gm_check_cache(vc_gpufs_volume(g, fc), sc, a->size_c);
		gm_check_disk(a->path_c, sc, a->size_c);
		/* Between kernels: A changes through the cache, R behind its back
		 * (the next kernel's gopen sees a new version and re-reads). The
		 * device table keeps its grants across kernels in odd rounds. */
		if (round % 2 == 0)
			GM_CHECK(vc_gpufs_release(g) == 0);
		uint64_t off = gm_hrand(&s) % (a->size_a - 5000);
		for (unsigned i = 0; i < 5000; i++)
			sa[off + i] ^= 0x5a;
		GM_CHECK(vc_volume_write(vc_gpufs_volume(g, fa), sa + off, 5000, off) == 5000);
		off = gm_hrand(&s) % (a->size_r - 20000);
		for (unsigned i = 0; i < 20000; i++)
			sr[off + i] ^= 0xa5;
		int fd = open(a->path_r, O_WRONLY);
		GM_CHECK(fd >= 0 && pwrite(fd, sr + off, 20000, (off_t)off) == 20000);
		close(fd);
		/* The change ends R's direct reads (it may have cut pages the
		 * mapping pins). Even rounds: the host's open maps R anew before
		 * the next kernel; odd ones: the kernel's gopen finds the change
		 * and that kernel reads R through the cache. */
		if (round % 2 == 0) {
			frh = vc_gpufs_open(g, a->path_r, VC_GO_RDONLY);
			GM_CHECK(frh >= 0 && vc_gpufs_close(g, frh) == 0);
		}
	}

	/* gmmap under eviction pressure. */
	a->errors = a->checked = a->calls_failed = 0;
	a->nreaders = 4;
	a->readers_done = 0;
	int fr = vc_gpufs_open(g, a->path_r, VC_GO_RDONLY);
	GM_CHECK(fr >= 0);
	struct gm_sweep sw;
	memset(&sw, 0, sizeof sw);
	sw.v = vc_gpufs_volume(g, fr);
	sw.size = a->size_r;
	pthread_t swt;
	GM_CHECK(pthread_create(&swt, NULL, gm_sweep_main, &sw) == 0);
	r = env->launch(g, GM_MMAP, 12, a);
	__atomic_store_n(&sw.stop, 1, __ATOMIC_RELEASE);
	pthread_join(swt, NULL);
	GM_CHECK(r == 0 && vc_gpufs_close(g, fr) == 0);
	gm_report("gmmap under eviction", a);
	fprintf(stderr, "  the CPU swept R %llu times meanwhile\n", sw.sweeps);
	GM_CHECK(a->errors == 0 && a->calls_failed == 0 && a->checked > 0);
	GM_CHECK(vc_gpufs_release(g) == 0);

	/* Errors. */
	GM_CHECK(vc_gpufs_open(g, a->path_t, VC_GO_RDWR) >= 0);
	a->errors = a->checked = a->calls_failed = 0;
	GM_CHECK(env->launch(g, GM_ERRORS, 1, a) == 0);
	gm_report("errors", a);
	GM_CHECK(a->errors == 0 && a->calls_failed == 0 && a->checked == 100);

	/* Never a hang (the first kernel's warps must run together). */
	GM_CHECK(vc_gpufs_release(g) == 0);
	a->errors = a->checked = a->calls_failed = 0;
	a->short_timeout_ns = 300000000; /* 0.3 s */
	a->writer_done = a->mapped = 0;
	GM_CHECK(env->launch(g, GM_TIMEOUT, 2, a) == 0);
	fprintf(stderr, "timeout: the blocked write returned %lld, the next call %lld\n",
		a->writer_result, a->after_result);
	GM_CHECK(a->calls_failed == 0 && a->writer_result == -ETIMEDOUT && a->after_result == -EIO);
	GM_CHECK(vc_gpufs_release(g) == 0);
	a->errors = a->checked = a->calls_failed = 0;
	GM_CHECK(env->launch(g, GM_ERRORS, 1, a) == 0);
	gm_report("errors, after the release", a);
	GM_CHECK(a->errors == 0 && a->calls_failed == 0);
	/* The write the timed-out call left went through once the mapping
	 * went (release serves what was published): A's shadow is taken from
	 * the disk again, and the cache must agree with it. */
	{
		int afd = open(a->path_a, O_RDONLY);
		GM_CHECK(afd >= 0 && pread(afd, sa, a->size_a, 0) == (ssize_t)a->size_a);
		close(afd);
		gm_check_cache(vc_gpufs_volume(g, fa), sa, a->size_a);
	}

	if (prog.every_s) {
		__atomic_store_n(&prog.stop, 1, __ATOMIC_RELEASE);
		pthread_join(progt, NULL);
	}
	struct vc_gpufs_stats st;
	GM_CHECK(vc_gpufs_stats(g, &st) == 0);
	fprintf(stderr, "gpufs: %llu requests in %llu batches, %llu gets (%llu for the table), "
			"%llu revoke passes (%llu revoked, %llu by the fallback), %llu writes, %llu "
			"held; misses: %llu pages in %llu rounds\n",
		(unsigned long long)st.requests, (unsigned long long)st.batches,
		(unsigned long long)st.gets, (unsigned long long)st.get_cached,
		(unsigned long long)st.revokes, (unsigned long long)st.revoked,
		(unsigned long long)st.rev_fallbacks, (unsigned long long)st.writes,
		(unsigned long long)st.held, (unsigned long long)st.miss_pages,
		(unsigned long long)st.miss_rounds);
	/* The engine's own device work meanwhile: none on the SMs (quiet
	 * mode, eng_gfs_quiet): no cleaning job ran, the GPU tier made room
	 * by evicting. */
	struct vc_stats cs;
	memset(&cs, 0, sizeof cs);
	cs.size = sizeof cs;
	GM_CHECK(vc_get_stats(c, &cs) == 0);
	fprintf(stderr, "engine: %llu cleaning steps (%llu pages moved), %llu evictions from the "
			"GPU tier\n",
		(unsigned long long)cs.gc_runs, (unsigned long long)cs.gc_pages_moved,
		(unsigned long long)cs.evictions[VC_TIER_GPU]);
	GM_CHECK(cs.gc_runs == 0);
	/* Close-to-open tells changes apart: R changed outside the cache once
	 * a round, so four gopens found it changed and dropped its pages; A
	 * and C changed only through the cache (the CPU writer, the writes
	 * between kernels, the kernels' gwrites), which must cost no drop
	 * (without the engine's write count every gopen of C dropped C). The
	 * slack: a gopen that stats C between a write's pwrite and its count
	 * drops once, correctly but needlessly. */
	fprintf(stderr, "close-to-open: %llu gopens found a file changed outside the cache\n",
		(unsigned long long)st.reopen_drops);
	GM_CHECK(st.reopen_drops >= rounds && st.reopen_drops <= rounds + 4);
	/* Direct reads: R (read-only, vc_gpufs_open) is mapped where the
	 * device can register it (always on emu), four times (the first open,
	 * after rounds 0 and 2, and the gmmap case's open after round 3); kernels read uncached pages from there,
	 * and hinted pages are loaded (into the GPU tier: not without one).
	 * The writable files never are. */
	fprintf(stderr, "direct reads: %llu mappings, %llu pages read from them, %llu hinted pages "
			"loaded\n",
		(unsigned long long)st.direct_files, (unsigned long long)st.direct_reads,
		(unsigned long long)st.admitted);
	GM_CHECK(env->device != VC_DEVICE_EMU || st.direct_files == (no_direct ? 0 : 4));
	GM_CHECK(st.direct_files == 0 ||
		 (st.direct_reads > 0 && (st.admitted > 0 || !cfg.gpu_bytes || (gc.flags & VC_GPUFS_NO_ADMIT))));
	GM_CHECK(vc_gpufs_release(g) == 0);
	GM_CHECK(vc_gpufs_stats(g, &st) == 0 && st.held == 0);
	GM_CHECK(vc_gpufs_close(g, fc) == 0 && vc_gpufs_close(g, fa) == 0);
	GM_CHECK(vc_gpufs_destroy(g) == 0);
	GM_CHECK(vc_close(c) == 0);
	env->release(a->scratch);
	env->release(sr);
	env->release(sa);
	env->release(a);
	free(sc);
	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	GM_CHECK(system(cmd) == 0);
	return 0;
}

#endif
