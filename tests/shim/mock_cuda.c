/* A fake CUDA driver, built as libcuda.so.1 in its own directory, for
 * test_shim: the shim's hooks against a driver of known behaviour, on a
 * machine without a GPU. Not a driver: the functions the shim hooks or
 * calls, with the device memory a counter.
 *
 * Memory: MOCK_TOTAL bytes, of which the program's allocations hold
 * `used` and the cache (the test's release server) holds `cache`; an
 * allocation fits when used + cache + n <= total. The test moves memory
 * with mock_set and the server's callback with mock_cache_release.
 *
 * cuGetProcAddress behaves as the real one does where the shim depends on
 * it: it takes base names ("cuMemAlloc"), chooses the signature by the
 * caller's cudaVersion (cuMemAlloc below 3020 is the 32-bit v1), the
 * _ptsz entries by the per-thread-stream flag, and returns internal
 * functions, not the exported symbols' addresses (so a hook sees two
 * addresses for one function), except for cuMemCreate and the _ptsz
 * entries: their addresses, taken through the GOT, are the shim's
 * exports, which interpose ours. From version 14000 on, cuMemAllocManaged
 * is given a different function, as a future signature change would be. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOCK_EXPORT __attribute__((visibility("default")))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t total = 1ull << 30, used, cache;
static uint64_t next_ptr = 0x100000000ull;

/* Calls that reached each allocation function: [0] exported symbols,
 * [1] internal entries (from cuGetProcAddress), [2] _ptsz, [3] v1, [4] private. */
MOCK_EXPORT int mock_calls[5];
MOCK_EXPORT const unsigned char mock_uuid[2][16] = {
	{ 0x5e, 0x1f, 0x00, 0x01, 0xab, 0xcd, 0xef, 0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe, 0xff },
	{ 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00 },
};
static __thread int current_dev; /* the "context": set by mock_set_device */

MOCK_EXPORT void mock_set(uint64_t program_used, uint64_t cache_held)
{
	pthread_mutex_lock(&lock);
	used = program_used;
	cache = cache_held;
	memset(mock_calls, 0, sizeof mock_calls);
	pthread_mutex_unlock(&lock);
}

MOCK_EXPORT void mock_set_device(int dev)
{
	current_dev = dev;
}

MOCK_EXPORT uint64_t mock_cache_release(uint64_t bytes)
{
	pthread_mutex_lock(&lock);
	uint64_t n = bytes < cache ? bytes : cache;
	cache -= n;
	pthread_mutex_unlock(&lock);
	return n;
}

static CUresult take(CUdeviceptr *p, uint64_t n, int which)
{
	pthread_mutex_lock(&lock);
	mock_calls[which]++;
	CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
	if (n <= total - used - cache) {
		used += n;
		*p = next_ptr;
		next_ptr += n;
		r = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

MOCK_EXPORT CUresult cuInit(unsigned int flags)
{
	(void)flags;
	return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
	*dev = current_dev;
	return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice dev)
{
	if (dev < 0 || dev > 1)
		return CUDA_ERROR_INVALID_DEVICE;
	memcpy(u->bytes, mock_uuid[dev], 16);
	return CUDA_SUCCESS;
}

MOCK_EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
	(void)p;
	return CUDA_SUCCESS;
}

/* An allocation function twice: the exported symbol, what a program
 * linked with -lcuda or a dlsym on the handle reaches (counted in
 * mock_calls[0]), and i_NAME, the internal entry cuGetProcAddress hands
 * out ([1]); `pre` handles the other arguments. */
#define ALLOC_TWICE(name, params, size, pre)            \
	MOCK_EXPORT CUresult name params                \
	{                                               \
		pre;                                    \
		return take(p, (size), 0);              \
	}                                               \
	static CUresult i_##name params                 \
	{                                               \
		pre;                                    \
		return take(p, (size), 1);              \
	}

ALLOC_TWICE(cuMemAlloc_v2, (CUdeviceptr *p, size_t n), n, (void)0)
ALLOC_TWICE(cuMemAllocPitch_v2, (CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned int e),
	    (uint64_t)w * h, ((void)e, *pitch = w))
ALLOC_TWICE(cuMemAllocManaged, (CUdeviceptr *p, size_t n, unsigned int flags), n, (void)flags)
ALLOC_TWICE(cuMemAllocAsync, (CUdeviceptr *p, size_t n, CUstream s), n, (void)s)
ALLOC_TWICE(cuMemAllocFromPoolAsync, (CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s), n,
	    ((void)pool, (void)s))

/* The signature a future cudaVersion might bring (the same here). */
static CUresult i_managed_future(CUdeviceptr *p, size_t n, unsigned int flags)
{
	return i_cuMemAllocManaged(p, n, flags);
}

/* The _ptsz variants ([2]) and the 32-bit v1 entries ([3]). */
MOCK_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s)
{
	(void)s;
	return take(p, n, 2);
}
MOCK_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s)
{
	(void)pool;
	return cuMemAllocAsync_ptsz(p, n, s);
}
MOCK_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *p, unsigned int n)
{
	CUdeviceptr q = 0;
	CUresult r = take(&q, n, 3);
	*p = (CUdeviceptr_v1)q;
	return r;
}
MOCK_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *p, unsigned int *pitch, unsigned int w, unsigned int h,
				     unsigned int e)
{
	(void)e;
	*pitch = w;
	return cuMemAlloc(p, w * h);
}
MOCK_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop,
				 unsigned long long flags)
{
	(void)flags;
	CUdeviceptr p = 0;
	int saved = current_dev;
	if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
		current_dev = prop->location.id;
	CUresult r = take(&p, n, 0);
	current_dev = saved;
	*h = p;
	return r;
}

/* A driver entry no hook knows: the mock runtime's cudaMallocManaged uses
 * it, so that only the runtime-level hook sees that allocation ([4]). */
MOCK_EXPORT CUresult mock_private_alloc(CUdeviceptr *p, size_t n)
{
	return take(p, n, 4);
}

/* With MOCK_CUDA_CALLERS set: cuGetProcAddress lookups from outside this
 * library, and those of them not made by the shim, printed at exit. The
 * shim_real_runtime tests run the real CUDA runtime against this driver:
 * every lookup it makes must come through the shim. */
static int lookups, not_shim;

static void count_caller(void *ret)
{
	Dl_info self, caller;
	if (!getenv("MOCK_CUDA_CALLERS") || !dladdr((void *)count_caller, &self) || !dladdr(ret, &caller))
		return;
	if (caller.dli_fbase == self.dli_fbase)
		return;
	pthread_mutex_lock(&lock);
	lookups++;
	if (!caller.dli_fname || !strstr(caller.dli_fname, "libvramcache-shim"))
		not_shim++;
	pthread_mutex_unlock(&lock);
}

__attribute__((destructor)) static void report_callers(void)
{
	if (getenv("MOCK_CUDA_CALLERS"))
		fprintf(stderr, "mock libcuda: %d cuGetProcAddress lookups, %d not through the shim\n", lookups,
			not_shim);
}

static CUresult i_gpa2(const char *symbol, void **pfn, int ver, cuuint64_t flags,
		       CUdriverProcAddressQueryResult *st);
static CUresult i_gpa1(const char *symbol, void **pfn, int ver, cuuint64_t flags);

/* cuGetProcAddress; `caller` (a return address, or NULL) is counted. */
static CUresult gpa(const char *symbol, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st,
		    void *caller)
{
	if (caller)
		count_caller(caller);
	bool ptds = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
	void *p = NULL;
	if (!strcmp(symbol, "cuMemAlloc"))
		p = ver >= 3020 ? (void *)i_cuMemAlloc_v2 : (void *)cuMemAlloc;
	else if (!strcmp(symbol, "cuMemAllocPitch"))
		p = ver >= 3020 ? (void *)i_cuMemAllocPitch_v2 : (void *)cuMemAllocPitch;
	else if (!strcmp(symbol, "cuMemAllocManaged") && ver >= 6000)
		p = ver >= 14000 ? (void *)i_managed_future : (void *)i_cuMemAllocManaged;
	else if (!strcmp(symbol, "cuMemCreate") && ver >= 10020)
		p = (void *)cuMemCreate;
	else if (!strcmp(symbol, "cuMemAllocAsync") && ver >= 11020)
		p = ptds ? (void *)cuMemAllocAsync_ptsz : (void *)i_cuMemAllocAsync;
	else if (!strcmp(symbol, "cuMemAllocFromPoolAsync") && ver >= 11020)
		p = ptds ? (void *)cuMemAllocFromPoolAsync_ptsz : (void *)i_cuMemAllocFromPoolAsync;
	else if (!strcmp(symbol, "cuGetProcAddress") && ver >= 11030)
		p = ver >= 12000 ? (void *)i_gpa2 : (void *)i_gpa1;
	else if (!strcmp(symbol, "cuInit"))
		p = (void *)cuInit;
	if (st)
		*st = p ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	*pfn = p;
	return p ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* The entries cuGetProcAddress hands out for "cuGetProcAddress". */
static CUresult i_gpa2(const char *symbol, void **pfn, int ver, cuuint64_t flags,
		       CUdriverProcAddressQueryResult *st)
{
	return gpa(symbol, pfn, ver, flags, st, __builtin_return_address(0));
}

static CUresult i_gpa1(const char *symbol, void **pfn, int ver, cuuint64_t flags)
{
	return gpa(symbol, pfn, ver, flags, NULL, __builtin_return_address(0));
}

/* The real lookup, past any hook: the test's baseline for timing. */
MOCK_EXPORT CUresult mock_gpa(const char *symbol, void **pfn, int ver, cuuint64_t flags)
{
	return gpa(symbol, pfn, ver, flags, NULL, NULL);
}

MOCK_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int ver, cuuint64_t flags,
					 CUdriverProcAddressQueryResult *st)
{
	return gpa(symbol, pfn, ver, flags, st, __builtin_return_address(0));
}

MOCK_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int ver, cuuint64_t flags)
{
	return gpa(symbol, pfn, ver, flags, NULL, __builtin_return_address(0));
}
