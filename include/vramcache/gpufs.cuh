/* vramcache GPUfs for CUDA kernels: the warp-level calls of
 * vramcache/gpufs.h as __device__ functions, and threadblock-level
 * wrappers (GPUfs's original semantics: every thread of the block calls
 * together, with the same arguments).
 *
 * A kernel receives the context by value and passes its address:
 *
 *   __global__ void k(struct vc_gfs_ctx g, ...)
 *   {
 *       int fd = vc_gopen(&g, "/data/records.bin", VC_GO_RDONLY);
 *       int64_t n = vc_gread(&g, fd, off, 4096, buf);   // every lane of the warp
 *       vc_gclose(&g, fd);
 *   }
 *
 * Host side (include/vramcache.h): vc_gpufs_create(cache, NULL, &gfs),
 * vc_gpufs_ctx(gfs, &view), launch, synchronize, vc_gpufs_release(gfs).
 * Kernels must be compiled for sm_70 or later (__nanosleep, independent
 * thread scheduling) and link nothing: the calls are inline. */
#ifndef VRAMCACHE_GPUFS_CUH
#define VRAMCACHE_GPUFS_CUH

#include <cuda_runtime.h>

#include "vramcache/gpufs.h"

/* Threads of the block, and this thread's warp among them. */
static __device__ __forceinline__ unsigned vc_gfs_block_tid_(void)
{
	return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

static __device__ __forceinline__ unsigned vc_gfs_block_warps_(void)
{
	return (blockDim.x * blockDim.y * blockDim.z + 31) / 32;
}

/* Warp 0 makes the call, every thread gets its result. */
#define VC_GFS_BLOCK_CALL_(expr)                                      \
	do {                                                          \
		__shared__ long long vc_gfs_r_;                       \
		__syncthreads();                                      \
		if (vc_gfs_block_tid_() < 32) {                       \
			long long x_ = (long long)(expr);             \
			if (vc_gfs_block_tid_() == 0)                 \
				vc_gfs_r_ = x_;                       \
		}                                                     \
		__syncthreads();                                      \
		return vc_gfs_r_;                                     \
	} while (0)

static __device__ int vc_gopen_block(const struct vc_gfs_ctx *g, const char *path, int flags)
{
	VC_GFS_BLOCK_CALL_(vc_gopen(g, path, flags));
}

static __device__ int vc_gclose_block(const struct vc_gfs_ctx *g, int fd)
{
	VC_GFS_BLOCK_CALL_(vc_gclose(g, fd));
}

static __device__ int vc_gfsync_block(const struct vc_gfs_ctx *g, int fd)
{
	VC_GFS_BLOCK_CALL_(vc_gfsync(g, fd));
}

static __device__ int vc_gftruncate_block(const struct vc_gfs_ctx *g, int fd, uint64_t size)
{
	VC_GFS_BLOCK_CALL_(vc_gftruncate(g, fd, size));
}

/* Reads and writes split the range over the block's warps, each a
 * page-aligned share, so that a block moves pages in parallel. The result
 * is the bytes done, or the first error. */
static __device__ int64_t vc_gfs_block_rw_(const struct vc_gfs_ctx *g, int fd, uint64_t off,
					   uint64_t len, void *rbuf, const void *wbuf)
{
	__shared__ long long vc_gfs_err_;
	__shared__ unsigned long long vc_gfs_done_;
	__syncthreads();
	if (vc_gfs_block_tid_() == 0) {
		vc_gfs_err_ = 0;
		vc_gfs_done_ = 0;
	}
	__syncthreads();
	if (rbuf) { /* clip to the end first: shares past it read nothing */
		int64_t size = vc_gfsize(g, fd);
		if (size < 0)
			len = 0;
		else if (off >= (uint64_t)size)
			len = 0;
		else if (len > (uint64_t)size - off)
			len = (uint64_t)size - off;
	}
	const uint64_t psz = 1ull << g->page_shift;
	const unsigned nw = vc_gfs_block_warps_(), wi = vc_gfs_block_tid_() / 32;
	uint64_t pages = len ? ((off + len - 1) / psz - off / psz + 1) : 0;
	uint64_t per = (pages + nw - 1) / nw;
	uint64_t lo = (off / psz + (uint64_t)wi * per) * psz, hi = lo + per * psz;
	if (lo < off)
		lo = off;
	if (hi > off + len)
		hi = off + len;
	if (lo < hi) {
		int64_t r = rbuf ? vc_gread(g, fd, lo, hi - lo, (unsigned char *)rbuf + (lo - off))
				 : vc_gwrite(g, fd, lo, hi - lo, (const unsigned char *)wbuf + (lo - off));
		if ((threadIdx.x & 31) == 0) {
			if (r < 0)
				atomicCAS((unsigned long long *)&vc_gfs_err_, 0ull, (unsigned long long)r);
			else
				atomicAdd(&vc_gfs_done_, (unsigned long long)r);
		}
	}
	__syncthreads();
	return vc_gfs_err_ ? (int64_t)vc_gfs_err_ : (int64_t)vc_gfs_done_;
}

static __device__ int64_t vc_gread_block(const struct vc_gfs_ctx *g, int fd, uint64_t off, uint64_t len,
					 void *buf)
{
	if (len == 0)
		return vc_gfs_fd_ok_(g, fd) ? 0 : -EBADF;
	return vc_gfs_block_rw_(g, fd, off, len, buf, NULL);
}

static __device__ int64_t vc_gwrite_block(const struct vc_gfs_ctx *g, int fd, uint64_t off,
					  uint64_t len, const void *buf)
{
	if (len == 0)
		return vc_gfs_fd_ok_(g, fd) ? 0 : -EBADF;
	return vc_gfs_block_rw_(g, fd, off, len, NULL, buf);
}

#endif
