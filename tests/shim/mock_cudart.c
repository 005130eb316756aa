/* A fake CUDA runtime, built as libcudart.so.13 (symbols versioned
 * libcudart.so.13, as the real one's) beside the fake driver, for
 * test_shim. It reaches the driver as the real runtime does since CUDA
 * 12: dlopen("libcuda.so.1", RTLD_LOCAL), dlsym of "cuGetProcAddress_v2",
 * then "cuGetProcAddress" and every entry through that. cudaMalloc goes
 * through cuMemAlloc so found (the shim's driver hook sees it);
 * cudaMallocManaged through an entry no hook knows (only the shim's
 * runtime hook sees it). Failures are remembered for cudaGetLastError. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#define MOCK_EXPORT __attribute__((visibility("default")))

typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static gpa2_fn gpa;
static alloc_fn drv_alloc, drv_private;
static __thread cudaError_t last_error;

static void init(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	gpa2_fn first = h ? (gpa2_fn)dlsym(h, "cuGetProcAddress_v2") : NULL;
	if (!first || first("cuGetProcAddress", (void **)&gpa, 12000, 0, NULL) != CUDA_SUCCESS ||
	    gpa("cuMemAlloc", (void **)&drv_alloc, 12000, 0, NULL) != CUDA_SUCCESS)
		return;
	drv_private = (alloc_fn)dlsym(h, "mock_private_alloc");
}

static cudaError_t alloc(alloc_fn f, void **p, size_t n)
{
	pthread_once(&once, init);
	CUdeviceptr d;
	if (!f)
		return last_error = cudaErrorInitializationError;
	if (f(&d, n) != CUDA_SUCCESS)
		return last_error = cudaErrorMemoryAllocation;
	*p = (void *)d;
	return cudaSuccess;
}

MOCK_EXPORT cudaError_t cudaMalloc(void **p, size_t n)
{
	return alloc(drv_alloc, p, n);
}

MOCK_EXPORT cudaError_t cudaMallocManaged(void **p, size_t n, unsigned int flags)
{
	(void)flags;
	return alloc(drv_private, p, n);
}

MOCK_EXPORT cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error;
	last_error = cudaSuccess;
	return e;
}

/* What the runtime took from cuGetProcAddress, for the test to look at. */
MOCK_EXPORT void *mock_cudart_driver_entry(void)
{
	pthread_once(&once, init);
	return (void *)drv_alloc;
}
