/* libvramcache-shim.so's plumbing, on a machine without a GPU: the test
 * re-executes itself with the shim in LD_PRELOAD and a fake driver and
 * runtime (mock_cuda.c as libcuda.so.1, mock_cudart.c as libcudart.so.13)
 * first on LD_LIBRARY_PATH, runs a release server in-process whose
 * callback takes memory from the fake cache, and checks:
 *   - dlsym stays glibc's for everything else: RTLD_DEFAULT, and RTLD_NEXT
 *     from an interposer loaded after the shim (probe_a finds probe_b's
 *     definition, not its own), and an exported hook called before any
 *     driver is loaded fails cleanly;
 *   - the runtime's path to the driver: dlsym(handle, "cuGetProcAddress_v2"),
 *     then "cuGetProcAddress" and "cuMemAlloc" through it, each a hook;
 *   - an allocation that fits: no ask; one that does not: one ask for the
 *     size rounded up to 2 MiB on the current device's UUID, then one
 *     retry (succeeding, or failing when the cache gives too little);
 *     with no server: no ask, no retry, the failure returned as it was;
 *   - per-version and per-flag hooks: the _ptsz entry under the
 *     per-thread flag, cuMemAlloc below 3020 (32-bit) left alone, a
 *     version past our headers hooked only when the driver gives the same
 *     function, cuMemCreate asked for its own device or not at all (host
 *     memory), cuGetProcAddress v1, exported symbols found by dlsym;
 *   - both layers hooked (cudaMalloc over cuMemAlloc): one ask per
 *     allocation; a runtime allocation the driver hooks cannot see
 *     (cudaMallocManaged here) asked for once, and after its successful
 *     retry the runtime's last error cleared;
 *   - VRAMCACHE_SHIM_DEBUG's line, and the cost of a hook when the
 *     allocation fits (printed; checked only against a loose bound).
 * The real driver and runtime are the GPU machine's: tests/shim_gpu.sh. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "release/release.h"
#include "testutil.h"

#define MiB (1ull << 20)

typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*pitch_fn)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
typedef CUresult (*async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
			      unsigned long long);
typedef cudaError_t (*rt_alloc_fn)(void **, size_t);
typedef cudaError_t (*rt_managed_fn)(void **, size_t, unsigned int);
typedef cudaError_t (*rt_err_fn)(void);

int vc_probe_next(void); /* probe_a */

/* The fake driver's controls. */
static void (*mock_set)(uint64_t used, uint64_t cache);
static void (*mock_set_device)(int dev);
static uint64_t (*mock_cache_release)(uint64_t bytes);
static CUresult (*mock_gpa)(const char *, void **, int, cuuint64_t);
static int *mock_calls;
static const unsigned char (*mock_uuid)[16];

static char dir[64], sock[96];
static struct vc_release_server *srv;
static unsigned char last_uuid[16];
static uint64_t last_bytes;

static int fake_release(void *ctx, const unsigned char uuid[16], uint64_t bytes, uint64_t *released)
{
	(void)ctx;
	memcpy(last_uuid, uuid, 16);
	last_bytes = bytes;
	*released = memcmp(uuid, mock_uuid[0], 16) == 0 ? mock_cache_release(bytes) : 0;
	return 0;
}

static uint64_t asks(void)
{
	struct vc_release_server_stats st;
	vc_release_server_stats(srv, &st);
	return st.requests;
}

static bool in_shim(void *p)
{
	Dl_info i;
	return p && dladdr(p, &i) && i.dli_fname && strstr(i.dli_fname, "libvramcache-shim");
}

static void *need_sym(void *h, const char *name)
{
	void *p = dlsym(h, name);
	if (!p) {
		fprintf(stderr, "no %s: %s\n", name, dlerror());
		exit(1);
	}
	return p;
}

static void server_start(void)
{
	int r = vc_release_server_start(sock, fake_release, NULL, &srv);
	if (r < 0) {
		fprintf(stderr, "release server: %s\n", vc_last_error());
		exit(1);
	}
}

/* glibc's dlsym for what is not ours. */
static void test_dlsym_passthrough(void)
{
	size_t (*sl)(const char *) = (size_t(*)(const char *))dlsym(RTLD_DEFAULT, "strlen");
	CHECK(sl && sl("four") == 4);
	/* On a handle: what dlvsym (never hooked) finds there. */
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	void *v = libc ? dlvsym(libc, "strlen", "GLIBC_2.2.5") : NULL;
	if (!v && libc)
		v = dlvsym(libc, "strlen", "GLIBC_2.17");
	CHECK(v && dlsym(libc, "strlen") == v);
	CHECK(dlsym(libc, "no_such_symbol_anywhere") == NULL);
	CHECK(vc_probe_next() == 2);
	/* An exported hook before any driver is there: an error, not a crash. */
	alloc_fn early = (alloc_fn)dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
	CHECK(in_shim((void *)early));
	CUdeviceptr d;
	CHECK(early(&d, MiB) == CUDA_ERROR_NOT_INITIALIZED);
}

static gpa2_fn g2; /* what the runtime's path gives: the hooked cuGetProcAddress */

static void test_runtime_path(void *h)
{
	CUdriverProcAddressQueryResult st;
	void *p;
	gpa2_fn first = (gpa2_fn)need_sym(h, "cuGetProcAddress_v2");
	CHECK(in_shim((void *)first));
	CHECK(first("", &p, 0, 0, &st) == CUDA_ERROR_NOT_FOUND && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	CHECK(first("cuGetProcAddress", (void **)&g2, 12000, 0, &st) == CUDA_SUCCESS);
	CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS && in_shim((void *)g2));
	CHECK(g2("cuInit", &p, 12000, 0, &st) == CUDA_SUCCESS && !in_shim(p)); /* not ours: real */
}

static void test_alloc(void)
{
	alloc_fn alloc;
	CUdeviceptr d;
	CHECK(g2("cuMemAlloc", (void **)&alloc, 12000, 0, NULL) == CUDA_SUCCESS && in_shim((void *)alloc));
	/* Fits: the driver once, no ask. */
	mock_set(0, 768 * MiB);
	uint64_t a0 = asks();
	CHECK(alloc(&d, 100 * MiB) == CUDA_SUCCESS);
	CHECK(asks() == a0 && mock_calls[1] == 1);
	/* 156 MiB free: one ask, for the size rounded up to 2 MiB, then the retry. */
	CHECK(alloc(&d, 511 * MiB + 1) == CUDA_SUCCESS);
	CHECK(asks() == a0 + 1 && last_bytes == 512 * MiB && mock_calls[1] == 3);
	CHECK(memcmp(last_uuid, mock_uuid[0], 16) == 0);
	/* The cache has too little: one ask, one retry, the failure. */
	mock_set(512 * MiB, 256 * MiB);
	CHECK(alloc(&d, 1024 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
	CHECK(asks() == a0 + 2 && mock_calls[1] == 2);
	/* Another device: asked by its own UUID. */
	mock_set(1000 * MiB, 0);
	mock_set_device(1);
	CHECK(alloc(&d, 64 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
	CHECK(asks() == a0 + 3 && memcmp(last_uuid, mock_uuid[1], 16) == 0);
	mock_set_device(0);
	/* No server: no ask, no retry, the failure as the driver gave it. */
	vc_release_server_stop(srv);
	mock_set(1000 * MiB, 24 * MiB);
	CHECK(alloc(&d, 64 * MiB) == CUDA_ERROR_OUT_OF_MEMORY && mock_calls[1] == 1);
	setenv(VC_RELEASE_SOCKET_ENV, "/nonexistent/vc.sock", 1);
	CHECK(alloc(&d, 64 * MiB) == CUDA_ERROR_OUT_OF_MEMORY && mock_calls[1] == 2);
	setenv(VC_RELEASE_SOCKET_ENV, sock, 1);
	server_start();
}

static void test_variants(void *h)
{
	void *p, *q;
	CUdeviceptr d;
	uint64_t a0 = asks();
	/* Before 3020 cuMemAllocPitch is the 32-bit v1: not ours to wrap
	 * (asked first, while the v2 hook has no target yet). */
	CHECK(g2("cuMemAllocPitch", &p, 2000, 0, NULL) == 0 && !in_shim(p));
	/* Per-thread stream: its own hook, reaching the _ptsz entry. */
	CHECK(g2("cuMemAllocAsync", &p, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL) == 0);
	CHECK(g2("cuMemAllocAsync", &q, 12000, 0, NULL) == 0);
	CHECK(in_shim(p) && in_shim(q) && p != q);
	mock_set(960 * MiB, 64 * MiB);
	CHECK(((async_fn)p)(&d, 64 * MiB, NULL) == CUDA_SUCCESS && mock_calls[2] == 2 && asks() == a0 + 1);
	CHECK(g2("cuMemAllocFromPoolAsync", &p, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL) == 0);
	CHECK(in_shim(p));
	/* cuMemAlloc before 3020 is the 32-bit v1: not ours to wrap. */
	CHECK(g2("cuMemAlloc", &p, 2000, 0, NULL) == 0 && !in_shim(p));
	/* Past our headers: hooked when the driver gives the same function. */
	CHECK(g2("cuMemAlloc", &p, 14000, 0, NULL) == 0 && in_shim(p));
	CHECK(g2("cuMemAllocManaged", &p, 14000, 0, NULL) == 0 && !in_shim(p));
	CHECK(g2("cuMemAllocManaged", &p, 13000, 0, NULL) == 0 && in_shim(p));
	/* cuMemCreate: host memory is not asked for; device 1 by its UUID. */
	create_fn create;
	CHECK(g2("cuMemCreate", (void **)&create, 12000, 0, NULL) == 0 && in_shim((void *)create));
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED };
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
	CUmemGenericAllocationHandle mh;
	mock_set(960 * MiB, 64 * MiB);
	a0 = asks();
	CHECK(create(&mh, 64 * MiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY && asks() == a0 && mock_calls[0] == 1);
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 1;
	CHECK(create(&mh, 64 * MiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY && asks() == a0 + 1);
	CHECK(memcmp(last_uuid, mock_uuid[1], 16) == 0);
	prop.location.id = 0;
	CHECK(create(&mh, 64 * MiB, &prop, 0) == CUDA_SUCCESS && asks() == a0 + 2);
	/* Exported symbols found on the handle, and RTLD_DEFAULT's view of them. */
	alloc_fn sym = (alloc_fn)need_sym(h, "cuMemAlloc_v2");
	CHECK(in_shim((void *)sym) && dlsym(RTLD_DEFAULT, "cuMemAlloc_v2") == (void *)sym);
	mock_set(960 * MiB, 64 * MiB);
	CHECK(sym(&d, 30 * MiB) == CUDA_SUCCESS && mock_calls[0] == 2 && asks() == a0 + 3);
	/* cuGetProcAddress v1 (CUDA 11.3 to 11.8 runtimes). */
	gpa1_fn g1 = (gpa1_fn)need_sym(h, "cuGetProcAddress");
	CHECK(in_shim((void *)g1));
	CHECK(g1("cuGetProcAddress", &p, 11030, 0) == 0 && in_shim(p));
	pitch_fn pitch;
	CHECK(((gpa1_fn)p)("cuMemAllocPitch", (void **)&pitch, 11000, 0) == 0 && in_shim((void *)pitch));
	size_t pt;
	mock_set(960 * MiB, 64 * MiB);
	CHECK(pitch(&d, &pt, 1024, 40 * 1024, 4) == CUDA_SUCCESS && asks() == a0 + 4 && last_bytes == 40 * MiB);
}

/* cudaMalloc over the hooked cuMemAlloc: the driver hook asks, once. */
static void test_both_layers(void)
{
	void *hr = dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL);
	CHECK(hr);
	rt_alloc_fn cm = (rt_alloc_fn)need_sym(hr, "cudaMalloc");
	rt_managed_fn cmm = (rt_managed_fn)need_sym(hr, "cudaMallocManaged");
	rt_err_fn last = (rt_err_fn)need_sym(hr, "cudaGetLastError");
	void *(*entry)(void) = (void *(*)(void))need_sym(hr, "mock_cudart_driver_entry");
	CHECK(in_shim((void *)cm) && in_shim((void *)cmm) && !in_shim((void *)last));
	CHECK(dlsym(RTLD_DEFAULT, "cudaMalloc") == (void *)cm);
	CHECK(in_shim(entry())); /* the runtime's cuMemAlloc is our hook */
	void *p;
	uint64_t a0 = asks();
	mock_set(960 * MiB, 64 * MiB);
	CHECK(cm(&p, 64 * MiB) == cudaSuccess && asks() == a0 + 1 && mock_calls[1] == 2);
	CHECK(last() == cudaSuccess);
	mock_set(1000 * MiB, 10 * MiB);
	CHECK(cm(&p, 64 * MiB) == cudaErrorMemoryAllocation && asks() == a0 + 2 && mock_calls[1] == 2);
	CHECK(last() == cudaErrorMemoryAllocation);
	/* Reached through no driver hook: the runtime hook asks, and clears
	 * the error its first attempt left. */
	mock_set(960 * MiB, 64 * MiB);
	CHECK(cmm(&p, 64 * MiB, 1) == cudaSuccess && asks() == a0 + 3 && mock_calls[4] == 2);
	CHECK(last() == cudaSuccess);
	mock_set(1000 * MiB, 10 * MiB);
	CHECK(cmm(&p, 64 * MiB, 1) == cudaErrorMemoryAllocation && asks() == a0 + 4 && mock_calls[4] == 2);
	CHECK(last() == cudaErrorMemoryAllocation);
}

static void test_debug_line(void)
{
	char path[128], out[1024];
	snprintf(path, sizeof path, "%s/stderr", dir);
	alloc_fn alloc;
	CHECK(g2("cuMemAlloc", (void **)&alloc, 12000, 0, NULL) == 0);
	fflush(stderr);
	int saved = dup(2), fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
	CHECK(saved >= 0 && fd >= 0 && dup2(fd, 2) == 2);
	setenv("VRAMCACHE_SHIM_DEBUG", "1", 1);
	mock_set(900 * MiB, 100 * MiB);
	CUdeviceptr d;
	CHECK(alloc(&d, 3 * MiB) == CUDA_SUCCESS); /* fits: says nothing */
	CHECK(alloc(&d, 50 * MiB) == CUDA_SUCCESS);
	mock_set(1000 * MiB, 0);
	CHECK(alloc(&d, 50 * MiB) == CUDA_ERROR_OUT_OF_MEMORY);
	unsetenv("VRAMCACHE_SHIM_DEBUG");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	ssize_t n = pread(fd, out, sizeof out - 1, 0);
	close(fd);
	CHECK(n > 0);
	out[n] = 0;
	fputs(out, stderr);
	char want[512];
	snprintf(want, sizeof want,
		 "vramcache-shim: cuMemAlloc_v2 of 52428800 B: out of memory; asked %s for 52428800 B on "
		 "5e1f0001abcdef1032547698badcfeff: released 52428800 B; retry succeeded\n"
		 "vramcache-shim: cuMemAlloc_v2 of 52428800 B: out of memory; asked %s for 52428800 B on "
		 "5e1f0001abcdef1032547698badcfeff: released 0 B; retry failed\n",
		 sock, sock);
	CHECK(strcmp(out, want) == 0);
}

/* The fast path: a hooked allocation that fits against the driver's own
 * entry, 1-byte allocations (the fake's cost is a mutex). Printed; the
 * bound is loose because this machine is shared. */
static void test_cost(void)
{
	alloc_fn hooked, direct;
	CHECK(g2("cuMemAlloc", (void **)&hooked, 12000, 0, NULL) == 0 && in_shim((void *)hooked));
	CHECK(mock_gpa("cuMemAlloc", (void **)&direct, 12000, 0) == 0 && !in_shim((void *)direct));
	const int n = 200000;
	double best[2] = { 1e9, 1e9 };
	for (int round = 0; round < 10; round++) {
		for (int k = 0; k < 2; k++) {
			alloc_fn f = k ? hooked : direct;
			mock_set(0, 0);
			CUdeviceptr d;
			uint64_t t0 = vc_now_ns();
			for (int i = 0; i < n; i++)
				f(&d, 1);
			double ns = (double)(vc_now_ns() - t0) / n;
			if (ns < best[k])
				best[k] = ns;
		}
	}
	fprintf(stderr, "fast path: %.1f ns direct, %.1f ns hooked: %+.1f ns per allocation\n", best[0], best[1],
		best[1] - best[0]);
	CHECK(best[1] - best[0] < 1000);
}

int main(int argc, char **argv)
{
#ifndef VC_SHIM_PATH
	(void)argc;
	(void)argv;
	fprintf(stderr, "SKIP: the shim is not built (no CUDA headers)\n");
	return 77;
#else
	if (!getenv("VC_SHIM_TEST_CHILD")) {
		/* The shim must be there from the start, as LD_PRELOAD puts it. */
		setenv("VC_SHIM_TEST_CHILD", "1", 1);
		setenv("LD_PRELOAD", VC_SHIM_PATH, 1);
		setenv("LD_LIBRARY_PATH", VC_MOCK_DIR, 1);
		/* A sanitizer build's runtime cannot come first with a preload. */
		const char *asan = getenv("ASAN_OPTIONS");
		char opts[512];
		snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan ? asan : "", asan ? ":" : "");
		setenv("ASAN_OPTIONS", opts, 1);
		execv("/proc/self/exe", argv);
		perror("execv");
		return 1;
	}
	(void)argc;
	unsetenv("VRAMCACHE_SHIM_DEBUG");
	snprintf(dir, sizeof dir, "%s/vc-shim-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	CHECK(mkdtemp(dir));
	snprintf(sock, sizeof sock, "%s/r.sock", dir);
	setenv(VC_RELEASE_SOCKET_ENV, sock, 1);
	test_dlsym_passthrough();
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CHECK(h);
	mock_set = (void (*)(uint64_t, uint64_t))need_sym(h, "mock_set");
	mock_set_device = (void (*)(int))need_sym(h, "mock_set_device");
	mock_cache_release = (uint64_t(*)(uint64_t))need_sym(h, "mock_cache_release");
	mock_gpa = (CUresult(*)(const char *, void **, int, cuuint64_t))need_sym(h, "mock_gpa");
	mock_calls = (int *)need_sym(h, "mock_calls");
	mock_uuid = (const unsigned char(*)[16])need_sym(h, "mock_uuid");
	server_start();
	test_runtime_path(h);
	test_alloc();
	test_variants(h);
	test_both_layers();
	test_debug_line();
	test_cost();
	vc_release_server_stop(srv);
	unlink(sock);
	char path[128];
	snprintf(path, sizeof path, "%s/stderr", dir);
	unlink(path);
	rmdir(dir);
	fprintf(stderr, "shim plumbing: ok\n");
	return 0;
#endif
}
