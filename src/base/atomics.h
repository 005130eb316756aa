/* Portable atomics for structures that must run on the host now and on the
 * device later (the concurrent index, src/index/cindex.c).
 *
 * Everything shared is a 64-bit word, vc_aw64. On the host it is C11
 * `_Atomic uint64_t`, which on every target we build for is lock-free and
 * has the size, alignment and bits of a plain uint64_t, so a table of them
 * is a flat array of plain words: it can be zeroed, copied to the device and
 * back with a byte copy, and holds no pointers. On the device the same bytes
 * are plain `unsigned long long` reached through cuda::atomic_ref (or, with
 * VC_ATOMICS_NO_LIBCUDACXX, through volatile accesses, atomicCAS and __threadfence).
 *
 * Only the orderings the index needs are offered:
 *   relaxed and acquire loads, relaxed and release stores,
 *   compare-and-swap with acquire on success (taking a lock),
 *   an acquire fence (the seqlock-style validation of a reader).
 * Scope: device scope on the device. A table in device memory that the host
 * also touches while kernels run (mapped memory) would need system scope:
 * change VC_ATOMIC_SCOPE, not the callers.
 *
 * The __CUDACC__ branches are written for nvcc but not yet compiled by any
 * build (the CUDA build does not include src/index yet); they are marked
 * UNTESTED until the device-side index lands.
 */
#ifndef VC_ATOMICS_H
#define VC_ATOMICS_H

#include <stdint.h>

#if defined(__CUDACC__)
/* ------------------------------------------------------------------ device
 * UNTESTED: compiled by nvcc once the device-side index exists. */
#define VC_HD __host__ __device__ __forceinline__

#if !defined(VC_ATOMICS_NO_LIBCUDACXX) && __has_include(<cuda/atomic>)
#include <cuda/atomic>
#define VC_ATOMIC_SCOPE cuda::thread_scope_device
typedef unsigned long long vc_aw64;
#define VC_AREF(p) \
	cuda::atomic_ref<unsigned long long, VC_ATOMIC_SCOPE>(*const_cast<vc_aw64 *>(p))

VC_HD uint64_t vc_ld_relaxed(const vc_aw64 *p)
{
	return VC_AREF(p).load(cuda::memory_order_relaxed);
}
VC_HD uint64_t vc_ld_acquire(const vc_aw64 *p)
{
	return VC_AREF(p).load(cuda::memory_order_acquire);
}
VC_HD void vc_st_relaxed(vc_aw64 *p, uint64_t v)
{
	VC_AREF(p).store(v, cuda::memory_order_relaxed);
}
VC_HD void vc_st_release(vc_aw64 *p, uint64_t v)
{
	VC_AREF(p).store(v, cuda::memory_order_release);
}
VC_HD bool vc_cas_acquire(vc_aw64 *p, uint64_t *expect, uint64_t desired)
{
	unsigned long long e = *expect;
	bool ok = VC_AREF(p).compare_exchange_strong(e, desired, cuda::memory_order_acquire,
						     cuda::memory_order_relaxed);
	*expect = e;
	return ok;
}
VC_HD void vc_fence_acquire(void)
{
	cuda::atomic_thread_fence(cuda::memory_order_acquire, VC_ATOMIC_SCOPE);
}

#else /* atomicCAS + __threadfence: for toolkits without libcu++ */
typedef unsigned long long vc_aw64;
#undef VC_HD
#define VC_HD __device__ __forceinline__
/* Device code only: there is no host fallback in this branch. Volatile
 * accesses are single 64-bit transactions (aligned words) and are not
 * cached in registers; __threadfence orders them at device scope. */
VC_HD uint64_t vc_ld_relaxed(const vc_aw64 *p)
{
	return *(const volatile vc_aw64 *)p;
}
VC_HD uint64_t vc_ld_acquire(const vc_aw64 *p)
{
	uint64_t v = *(const volatile vc_aw64 *)p;
	__threadfence();
	return v;
}
VC_HD void vc_st_relaxed(vc_aw64 *p, uint64_t v)
{
	*(volatile vc_aw64 *)p = v;
}
VC_HD void vc_st_release(vc_aw64 *p, uint64_t v)
{
	__threadfence();
	*(volatile vc_aw64 *)p = v;
}
VC_HD bool vc_cas_acquire(vc_aw64 *p, uint64_t *expect, uint64_t desired)
{
	unsigned long long old = atomicCAS(p, (unsigned long long)*expect,
					   (unsigned long long)desired);
	bool ok = old == *expect;
	__threadfence();
	*expect = old;
	return ok;
}
VC_HD void vc_fence_acquire(void)
{
	__threadfence();
}
#endif

/* Spin-wait hints. On the device a spinning thread sleeps a little so the
 * lock holder's warp gets issue slots (sm_70+); there is nothing to yield
 * to, so vc_yield is the same. Independent thread scheduling (sm_70+) is
 * required for the spin locks: a lane must not spin on a lock held by a
 * lane of its own warp on older architectures. */
VC_HD void vc_cpu_relax(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
	__nanosleep(32);
#endif
}
VC_HD void vc_yield(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
	__nanosleep(1000);
#endif
}

#else
/* -------------------------------------------------------------------- host */
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#define VC_HD static inline

typedef _Atomic uint64_t vc_aw64;

/* The flat-array promise above rests on these. */
_Static_assert(sizeof(vc_aw64) == sizeof(uint64_t), "atomic word is not a plain word");
_Static_assert(_Alignof(vc_aw64) == _Alignof(uint64_t), "atomic word is not a plain word");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics are not lock-free");

/* ThreadSanitizer does not model standalone fences (GCC warns, -Wtsan).
 * Under it, relaxed loads become acquire loads and the acquire fence goes:
 * every relaxed load the callers order with a later acquire fence is then
 * an acquire itself, which is at least as strong, and TSan checks it. */
#if defined(__SANITIZE_THREAD__)
#define VC_ATOMICS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VC_ATOMICS_TSAN 1
#endif
#endif

VC_HD uint64_t vc_ld_relaxed(const vc_aw64 *p)
{
#ifdef VC_ATOMICS_TSAN
	return atomic_load_explicit((vc_aw64 *)p, memory_order_acquire);
#else
	return atomic_load_explicit((vc_aw64 *)p, memory_order_relaxed);
#endif
}
VC_HD uint64_t vc_ld_acquire(const vc_aw64 *p)
{
	return atomic_load_explicit((vc_aw64 *)p, memory_order_acquire);
}
VC_HD void vc_st_relaxed(vc_aw64 *p, uint64_t v)
{
	atomic_store_explicit(p, v, memory_order_relaxed);
}
VC_HD void vc_st_release(vc_aw64 *p, uint64_t v)
{
	atomic_store_explicit(p, v, memory_order_release);
}
/* On failure *expect receives the current value. */
VC_HD bool vc_cas_acquire(vc_aw64 *p, uint64_t *expect, uint64_t desired)
{
	return atomic_compare_exchange_strong_explicit(p, expect, desired, memory_order_acquire,
						       memory_order_relaxed);
}
VC_HD void vc_fence_acquire(void)
{
#ifdef VC_ATOMICS_TSAN
	atomic_signal_fence(memory_order_acquire);
#else
	atomic_thread_fence(memory_order_acquire);
#endif
}

VC_HD void vc_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}
/* Gives the core away: with more runnable threads than cores a spinner
 * would otherwise burn the lock holder's time slice. */
VC_HD void vc_yield(void)
{
	sched_yield();
}
#endif

/* Bit helpers (the device has its own intrinsics). */
#if defined(__CUDA_ARCH__)
VC_HD unsigned vc_ctz32(uint32_t x) { return (unsigned)(__ffs((int)x) - 1); }
VC_HD uint64_t vc_mulhi64(uint64_t a, uint64_t b) { return __umul64hi(a, b); }
#else
VC_HD unsigned vc_ctz32(uint32_t x)
{
	return (unsigned)__builtin_ctz(x);
}
VC_HD uint64_t vc_mulhi64(uint64_t a, uint64_t b)
{
	return (uint64_t)(((unsigned __int128)a * b) >> 64);
}
#endif

#endif
