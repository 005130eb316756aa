/* libvramcache-shim.so: lets other CUDA programs have the cache's GPU
 * memory when theirs runs out (issue 12, BAG §3.3.5).
 *
 *   LD_PRELOAD=libvramcache-shim.so python train.py
 *
 * Every device allocation goes to the real CUDA function first. Only when
 * that fails for lack of memory does the shim ask `vramcache serve` (the
 * release protocol, src/release/) for the bytes on the allocating device,
 * wait for the answer, retry once and return the retry's result. With no
 * cache answering it retries nothing and changes nothing.
 *
 * Where allocations are caught. Since CUDA 12 the runtime (libcudart.so,
 * or cudart_static inside the program, as most builds link it) reaches
 * the driver only through cuGetProcAddress: it dlopens libcuda.so.1 with
 * RTLD_LOCAL, takes dlsym(handle, "cuGetProcAddress_v2"), and asks that
 * for every other entry point, "cuGetProcAddress" itself included. An
 * LD_PRELOAD definition of cuMemAlloc_v2 is never looked at on that path
 * (a dlsym on a handle searches that library's own scope), so the shim
 * hooks three layers:
 *   1. dlsym: a lookup of one of the hooked names on any handle returns
 *      our wrapper, with the pointer the real dlsym found as its target;
 *   2. cuGetProcAddress and cuGetProcAddress_v2 (through 1, or linked):
 *      for the allocation functions, at a cudaVersion whose signature we
 *      know, they hand out our wrapper of what the driver returned (per
 *      flags: the _ptsz entries are separate hooks), and for
 *      "cuGetProcAddress" our own wrapper again;
 *   3. the exported symbols themselves (cuMemAlloc_v2 ..., cudaMalloc ...),
 *      for programs linked against libcuda.so or libcudart.so, whose real
 *      targets are looked up past us (RTLD_NEXT, or libcuda.so.1's own
 *      scope when it was loaded RTLD_LOCAL).
 * Each hook has two targets (struct hook): `sym_real`, the exported
 * symbol's address (1 and 3), and `proc_real`, what cuGetProcAddress gave
 * (2), which may be a different address for the same function. A target
 * is set once (compare-and-swap from NULL); a later lookup that finds a
 * different address gets the real pointer unwrapped: correct, only not
 * watched.
 *
 * One allocation, one ask. A runtime call (cudaMalloc) runs the driver
 * call (cuMemAlloc_v2) underneath, and both may be hooked. The driver
 * layer asks and retries; the runtime layer asks only when no driver hook
 * asked during its call (tls_asks unchanged), i.e. when the runtime's
 * driver entry was not ours. After a successful retry at the runtime
 * layer, cudaGetLastError clears the error the first attempt recorded, so
 * that a later check (PyTorch checks after every launch) does not report
 * an OOM that did not happen.
 *
 * Cost when the allocation fits: an atomic load of the target (a plain
 * load on x86), the call, a compare; the runtime layer adds one
 * initial-exec TLS load. No syscall, no lock, no getenv.
 *
 * dlsym itself. Our dlsym must call glibc's, found with dlvsym (never
 * hooked). glibc resolves RTLD_NEXT and RTLD_DEFAULT relative to the
 * caller's return address (the object after the caller; the caller's
 * local scope), so on x86-64 an assembly entry sends those two handles
 * straight on to glibc's dlsym with a tail jump, keeping the caller's
 * address: interposers loaded after us that use dlsym(RTLD_NEXT, ...)
 * still find the next object, not themselves. Only lookups on real
 * handles go through the C half, where the caller's identity does not
 * matter. Elsewhere a C definition forwards them with our address: a
 * known limitation for other interposers on those architectures.
 *
 * Environment: VRAMCACHE_RELEASE_SOCKET (the socket, see release.h),
 * VRAMCACHE_SHIM_DEBUG=1 (one line on stderr per release asked),
 * VRAMCACHE_SHIM_TIMEOUT_MS (how long to wait for the cache's answer).
 * All are read on the slow path only, at each ask. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "release/release.h"
#include "vramcache.h" /* vc_last_error: the shim's own hidden copy (base/error.c) */

#define VC_EXPORT __attribute__((visibility("default")))
#define UNPACK(...) __VA_ARGS__
#define LIKELY(x) __builtin_expect(!!(x), 1)

/* What the shim asks for: the request rounded up to 2 MiB, the page size
 * in which the driver maps device memory on current GPUs, so an n-byte
 * allocation needs ceil(n / 2 MiB) free pages. Asking for more would take
 * cache the program does not need; the cache frees whole chunks anyway. */
#define ASK_ALIGN (2ull << 20)
/* How long an allocation waits for the cache's answer by default. The
 * cache may have to write dirty GPU pages back before it frees them, so
 * this is generous; a dead server answers at once (connection refused). */
#define DEFAULT_TIMEOUT_MS 10000

/* Device to ask for: an ordinal, or one of these. */
#define DEV_CURRENT (-1) /* the current context's device */
#define DEV_NONE (-2)    /* not device memory: do not ask */

/* --- the hooks ---------------------------------------------------------- */

/* X(name, cuGetProcAddress's name for it, first cudaVersion with this
 *   signature, first one without it (0: none yet), per-thread stream) */
#define VC_SHIM_DRIVER_HOOKS(X)                                                    \
	X(cuGetProcAddress, "cuGetProcAddress", 11030, 12000, false)               \
	X(cuGetProcAddress_v2, "cuGetProcAddress", 12000, 0, false)                \
	X(cuMemAlloc_v2, "cuMemAlloc", 3020, 0, false)                             \
	X(cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0, false)                   \
	X(cuMemAllocManaged, "cuMemAllocManaged", 6000, 0, false)                  \
	X(cuMemCreate, "cuMemCreate", 10020, 0, false)                             \
	X(cuMemAllocAsync, "cuMemAllocAsync", 11020, 0, false)                     \
	X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, 0, true)                 \
	X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 11020, 0, false)     \
	X(cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 11020, 0, true)
/* X(name): the runtime's, reached by symbol only. */
#define VC_SHIM_RUNTIME_HOOKS(X)                                                   \
	X(cudaMalloc) X(cudaMallocManaged) X(cudaMallocPitch) X(cudaMalloc3D)      \
	X(cudaMallocAsync) X(cudaMallocAsync_ptsz) X(cudaMallocFromPoolAsync)      \
	X(cudaMallocFromPoolAsync_ptsz)

enum hook_id {
#define D(name, proc, lo, hi, ptsz) H_##name,
#define R(name) H_##name,
	VC_SHIM_DRIVER_HOOKS(D) VC_SHIM_RUNTIME_HOOKS(R)
#undef D
#undef R
	N_HOOKS
};

struct hook {
	const char *name; /* the exported symbol, as dlsym and the linker see it */
	const char *proc; /* its base name for cuGetProcAddress; NULL: runtime API */
	int min_ver, max_ver;
	bool ptsz;
	void *sym_wrap, *proc_wrap;   /* ours */
	_Atomic(void *) sym_real;     /* the exported symbol's target */
	_Atomic(void *) proc_real;    /* what cuGetProcAddress returned */
};

static struct hook hooks[N_HOOKS];

/* Counts this thread's asks, so a runtime hook can tell that the driver
 * hook under it already asked for this allocation. Initial-exec: a plain
 * %fs load on the runtime hooks' fast path (the shim is preloaded, so it
 * is in the static TLS block). */
static __thread unsigned tls_asks __attribute__((tls_model("initial-exec")));

/* --- the real dlsym ------------------------------------------------------ */

typedef void *(*dlsym_fn)(void *, const char *);
/* Read by the assembly entry below, hence not static (hidden). */
__attribute__((used)) dlsym_fn vc_shim_real_dlsym;

__attribute__((used)) dlsym_fn vc_shim_resolve_dlsym(void)
{
	/* glibc 2.34 moved dlsym into libc under a new version; the older
	 * versions are the first of each architecture (x86-64, aarch64). */
	static const char *const versions[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17" };
	dlsym_fn f = NULL;
	for (size_t i = 0; !f && i < sizeof versions / sizeof versions[0]; i++)
		f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
	if (f)
		__atomic_store_n(&vc_shim_real_dlsym, f, __ATOMIC_RELEASE);
	else
		fputs("vramcache-shim: cannot find the C library's dlsym\n", stderr);
	return f;
}

static dlsym_fn real_dlsym(void)
{
	dlsym_fn f = __atomic_load_n(&vc_shim_real_dlsym, __ATOMIC_ACQUIRE);
	return LIKELY(f) ? f : vc_shim_resolve_dlsym();
}

/* libcuda.so.1 when the process has loaded it (RTLD_LOCAL as the runtime
 * does, or not), else NULL; never loads it. */
static void *libcuda_handle(void)
{
	static _Atomic(void *) h;
	void *p = atomic_load_explicit(&h, memory_order_acquire);
	if (!p) {
		p = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
		if (p)
			atomic_store_explicit(&h, p, memory_order_release);
	}
	return p;
}

/* Sets *slot to p unless it holds another pointer: true when *slot is p. */
static bool claim(_Atomic(void *) *slot, void *p)
{
	void *cur = NULL;
	return atomic_compare_exchange_strong(slot, &cur, p) || cur == p;
}

/* The exported symbol's target on first use: the next definition past us,
 * or for the driver, libcuda.so.1's own when it was loaded RTLD_LOCAL. */
static __attribute__((noinline)) void *resolve_sym(enum hook_id id)
{
	struct hook *h = &hooks[id];
	dlsym_fn dls = real_dlsym();
	void *p = dls ? dls(RTLD_NEXT, h->name) : NULL;
	if (!p && dls && h->proc && libcuda_handle())
		p = dls(libcuda_handle(), h->name);
	if (!p || p == h->sym_wrap)
		return NULL;
	claim(&h->sym_real, p);
	return atomic_load_explicit(&h->sym_real, memory_order_acquire);
}

static inline void *sym_real(enum hook_id id)
{
	void *p = atomic_load_explicit(&hooks[id].sym_real, memory_order_acquire);
	return LIKELY(p) ? p : resolve_sym(id);
}

static inline void *proc_real(enum hook_id id)
{
	return atomic_load_explicit(&hooks[id].proc_real, memory_order_acquire);
}

static int find_by_name(const char *symbol)
{
	for (int i = 0; i < N_HOOKS; i++)
		if (strcmp(hooks[i].name, symbol) == 0)
			return i;
	return -1;
}

/* The hook for cuGetProcAddress(symbol, version, flags), or -1. A
 * per-thread-stream request takes the _ptsz hook where there is one. */
static int find_by_proc(const char *symbol, int ver, bool ptds)
{
	int plain = -1;
	for (int i = 0; i < N_HOOKS; i++) {
		const struct hook *h = &hooks[i];
		if (!h->proc || ver < h->min_ver || (h->max_ver && ver >= h->max_ver) || strcmp(h->proc, symbol))
			continue;
		if (h->ptsz == ptds)
			return i;
		if (!h->ptsz)
			plain = i;
	}
	return ptds ? plain : -1;
}

/* --- asking the cache (the slow path) ----------------------------------- */

typedef CUresult (*ctx_get_device_fn)(CUdevice *);
typedef CUresult (*get_uuid_fn)(CUuuid *, CUdevice);
typedef cudaError_t (*get_last_error_fn)(void);

static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static ctx_get_device_fn drv_ctx_get_device;
static get_uuid_fn drv_get_uuid;

/* By their exported names: those keep their signatures for ever, unlike
 * cuGetProcAddress's base names (cuCtxGetDevice took a context in 13.0). */
static void drv_init(void)
{
	void *h = libcuda_handle();
	dlsym_fn dls = real_dlsym();
	if (!h || !dls)
		return;
	drv_ctx_get_device = (ctx_get_device_fn)dls(h, "cuCtxGetDevice");
	drv_get_uuid = (get_uuid_fn)dls(h, "cuDeviceGetUuid_v2");
	if (!drv_get_uuid)
		drv_get_uuid = (get_uuid_fn)dls(h, "cuDeviceGetUuid");
}

struct ask {
	enum hook_id id;
	uint64_t size;     /* what the program asked for */
	uint64_t bytes;    /* what we asked the cache for */
	int r;             /* vc_release_ask's result; 1: not asked */
	uint64_t released;
	const char *why;   /* when not asked */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	unsigned char uuid[16];
};

static bool debug_on(void)
{
	const char *d = getenv("VRAMCACHE_SHIM_DEBUG");
	return d && *d && strcmp(d, "0") != 0;
}

/* Asks the cache for `size` bytes on device `dev`; true when it answered
 * (whatever it gave), so that a retry is worth it. Bounded by the timeout;
 * no lock held. */
static __attribute__((noinline, cold)) bool ask_cache(struct ask *a, enum hook_id id, uint64_t size, int dev)
{
	memset(a, 0, sizeof *a);
	a->id = id;
	a->size = size;
	a->r = 1;
	tls_asks++;
	if (dev == DEV_NONE) {
		a->why = "not device memory";
		return false;
	}
	if (size == 0 || size > UINT64_MAX - ASK_ALIGN) {
		a->why = "size out of range";
		return false;
	}
	a->bytes = (size + ASK_ALIGN - 1) & ~(ASK_ALIGN - 1);
	pthread_once(&drv_once, drv_init);
	CUdevice d = dev;
	if (!drv_get_uuid || (dev == DEV_CURRENT && (!drv_ctx_get_device || drv_ctx_get_device(&d) != CUDA_SUCCESS))) {
		a->why = "cannot tell the device";
		return false;
	}
	CUuuid u;
	if (drv_get_uuid(&u, d) != CUDA_SUCCESS) {
		a->why = "cannot read the device's UUID";
		return false;
	}
	memcpy(a->uuid, u.bytes, 16);
	if (!vc_release_default_path(a->path, sizeof a->path)) {
		a->why = "socket path too long";
		return false;
	}
	const char *t = getenv("VRAMCACHE_SHIM_TIMEOUT_MS");
	unsigned timeout = t && atoi(t) > 0 ? (unsigned)atoi(t) : DEFAULT_TIMEOUT_MS;
	a->r = vc_release_ask(a->path, a->uuid, a->bytes, timeout, &a->released);
	return a->r == 0;
}

/* The debug line: one per ask, with the retry's outcome. */
static __attribute__((noinline, cold)) void ask_done(const struct ask *a, bool retried, bool ok)
{
	if (!debug_on())
		return;
	char hex[VC_RELEASE_UUID_HEX + 1];
	if (a->r == 1) {
		fprintf(stderr, "vramcache-shim: %s of %llu B: out of memory; not asked: %s\n", hooks[a->id].name,
			(unsigned long long)a->size, a->why);
		return;
	}
	vc_release_uuid_hex(a->uuid, hex);
	if (a->r < 0)
		fprintf(stderr, "vramcache-shim: %s of %llu B: out of memory; asked %s for %llu B on %s: %s\n",
			hooks[a->id].name, (unsigned long long)a->size, a->path, (unsigned long long)a->bytes,
			hex, vc_last_error());
	else
		fprintf(stderr,
			"vramcache-shim: %s of %llu B: out of memory; asked %s for %llu B on %s: released %llu B;"
			" retry %s\n",
			hooks[a->id].name, (unsigned long long)a->size, a->path, (unsigned long long)a->bytes, hex,
			(unsigned long long)a->released, !retried ? "not made" : ok ? "succeeded" : "failed");
}

/* After a successful retry at the runtime layer: clears the runtime's
 * record of the first attempt's cudaErrorMemoryAllocation. Looked up in
 * the object that holds `real`, which may have been loaded RTLD_LOCAL. */
static void clear_runtime_error(void *real)
{
	Dl_info info;
	dlsym_fn dls = real_dlsym();
	void *h;
	if (!dls || !dladdr(real, &info) || !info.dli_fname ||
	    !(h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD)))
		return;
	get_last_error_fn f = (get_last_error_fn)dls(h, "cudaGetLastError");
	if (f)
		f();
	dlclose(h); /* only the reference NOLOAD took */
}

static uint64_t mul_or_zero(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_mul_overflow(a, b, &r) ? 0 : r;
}

/* --- driver wrappers ------------------------------------------------------ */

/* A driver allocation: the call, and on CUDA_ERROR_OUT_OF_MEMORY an ask
 * and one retry. name##_sym is the exported symbol (asm label: cuda.h's
 * macros rename some of these names), name##_procw what cuGetProcAddress
 * hands out. */
#define DRV_HOOK(name, params, args, size, dev)                                        \
	typedef CUresult (*name##_fn) params;                                          \
	static CUresult name##_body(void *real_, UNPACK params)                        \
	{                                                                              \
		CUresult r_ = ((name##_fn)real_) args;                                 \
		if (LIKELY(r_ != CUDA_ERROR_OUT_OF_MEMORY))                            \
			return r_;                                                     \
		struct ask a_;                                                         \
		bool asked_ = ask_cache(&a_, H_##name, (size), (dev));                 \
		if (asked_)                                                            \
			r_ = ((name##_fn)real_) args;                                  \
		ask_done(&a_, asked_, r_ == CUDA_SUCCESS);                             \
		return r_;                                                             \
	}                                                                              \
	VC_EXPORT CUresult name##_sym(UNPACK params) __asm__(#name);                   \
	CUresult name##_sym(UNPACK params)                                             \
	{                                                                              \
		void *real_ = sym_real(H_##name);                                      \
		return real_ ? name##_body(real_, UNPACK args) : CUDA_ERROR_NOT_INITIALIZED; \
	}                                                                              \
	static CUresult name##_procw(UNPACK params)                                    \
	{                                                                              \
		return name##_body(proc_real(H_##name), UNPACK args);                  \
	}

DRV_HOOK(cuMemAlloc_v2, (CUdeviceptr * dptr, size_t n), (dptr, n), n, DEV_CURRENT)
DRV_HOOK(cuMemAllocPitch_v2, (CUdeviceptr * dptr, size_t *pitch, size_t w, size_t h, unsigned int elem),
	 (dptr, pitch, w, h, elem), mul_or_zero(w, h), DEV_CURRENT)
DRV_HOOK(cuMemAllocManaged, (CUdeviceptr * dptr, size_t n, unsigned int flags), (dptr, n, flags), n,
	 DEV_CURRENT)
DRV_HOOK(cuMemCreate,
	 (CUmemGenericAllocationHandle * handle, size_t n, const CUmemAllocationProp *prop,
	  unsigned long long flags),
	 (handle, n, prop, flags), n,
	 prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : DEV_NONE)
DRV_HOOK(cuMemAllocAsync, (CUdeviceptr * dptr, size_t n, CUstream s), (dptr, n, s), n, DEV_CURRENT)
DRV_HOOK(cuMemAllocAsync_ptsz, (CUdeviceptr * dptr, size_t n, CUstream s), (dptr, n, s), n, DEV_CURRENT)
DRV_HOOK(cuMemAllocFromPoolAsync, (CUdeviceptr * dptr, size_t n, CUmemoryPool pool, CUstream s),
	 (dptr, n, pool, s), n, DEV_CURRENT)
DRV_HOOK(cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr * dptr, size_t n, CUmemoryPool pool, CUstream s),
	 (dptr, n, pool, s), n, DEV_CURRENT)

/* --- cuGetProcAddress ------------------------------------------------------ */

typedef CUresult (*gpa1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

/* What the caller of cuGetProcAddress gets for `symbol`: our wrapper of p
 * when the symbol is hooked at this version, else p. Past the CUDA version
 * of our headers a signature may have changed: then p is wrapped only if
 * the driver gives the same function for our version. */
static void *wrap_proc(const char *symbol, int ver, cuuint64_t flags, void *p, void *real, bool v2)
{
	if (symbol[0] != 'c' || symbol[1] != 'u')
		return p;
	int id = find_by_proc(symbol, ver, flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
	/* A driver that takes its own exported symbols' addresses through its
	 * GOT hands out our exports (we interpose them): already hooks. */
	if (id < 0 || p == hooks[id].proc_wrap || p == hooks[id].sym_wrap)
		return p;
	if (ver > CUDA_VERSION) {
		void *q = NULL;
		CUresult r = v2 ? ((gpa2_fn)real)(symbol, &q, CUDA_VERSION, flags, NULL)
				: ((gpa1_fn)real)(symbol, &q, CUDA_VERSION, flags);
		if (r != CUDA_SUCCESS || q != p)
			return p;
	}
	return claim(&hooks[id].proc_real, p) ? hooks[id].proc_wrap : p;
}

static CUresult gpa2_body(void *real, const char *symbol, void **pfn, int ver, cuuint64_t flags,
			  CUdriverProcAddressQueryResult *status)
{
	CUresult r = ((gpa2_fn)real)(symbol, pfn, ver, flags, status);
	if (r == CUDA_SUCCESS && symbol && pfn && *pfn)
		*pfn = wrap_proc(symbol, ver, flags, *pfn, real, true);
	return r;
}

static CUresult gpa1_body(void *real, const char *symbol, void **pfn, int ver, cuuint64_t flags)
{
	CUresult r = ((gpa1_fn)real)(symbol, pfn, ver, flags);
	if (r == CUDA_SUCCESS && symbol && pfn && *pfn)
		*pfn = wrap_proc(symbol, ver, flags, *pfn, real, false);
	return r;
}

VC_EXPORT CUresult cuGetProcAddress_v2_sym(const char *symbol, void **pfn, int ver, cuuint64_t flags,
					   CUdriverProcAddressQueryResult *status) __asm__("cuGetProcAddress_v2");
CUresult cuGetProcAddress_v2_sym(const char *symbol, void **pfn, int ver, cuuint64_t flags,
				 CUdriverProcAddressQueryResult *status)
{
	void *real = sym_real(H_cuGetProcAddress_v2);
	return real ? gpa2_body(real, symbol, pfn, ver, flags, status) : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult cuGetProcAddress_v2_procw(const char *symbol, void **pfn, int ver, cuuint64_t flags,
					  CUdriverProcAddressQueryResult *status)
{
	return gpa2_body(proc_real(H_cuGetProcAddress_v2), symbol, pfn, ver, flags, status);
}

VC_EXPORT CUresult cuGetProcAddress_sym(const char *symbol, void **pfn, int ver, cuuint64_t flags)
	__asm__("cuGetProcAddress");
CUresult cuGetProcAddress_sym(const char *symbol, void **pfn, int ver, cuuint64_t flags)
{
	void *real = sym_real(H_cuGetProcAddress);
	return real ? gpa1_body(real, symbol, pfn, ver, flags) : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult cuGetProcAddress_procw(const char *symbol, void **pfn, int ver, cuuint64_t flags)
{
	return gpa1_body(proc_real(H_cuGetProcAddress), symbol, pfn, ver, flags);
}

/* --- runtime wrappers ------------------------------------------------------ */

/* A runtime allocation, for programs linked against libcudart.so: asks
 * only when the driver hook under it did not (see "One allocation, one
 * ask" above). */
#define RT_HOOK(name, params, args, size)                                              \
	typedef cudaError_t (*name##_fn) params;                                       \
	VC_EXPORT cudaError_t name##_sym(UNPACK params) __asm__(#name);                \
	cudaError_t name##_sym(UNPACK params)                                          \
	{                                                                              \
		void *real_ = sym_real(H_##name);                                      \
		if (!real_)                                                            \
			return cudaErrorInitializationError;                           \
		unsigned seen_ = tls_asks;                                             \
		cudaError_t r_ = ((name##_fn)real_) args;                              \
		if (LIKELY(r_ != cudaErrorMemoryAllocation) || tls_asks != seen_)     \
			return r_;                                                     \
		struct ask a_;                                                         \
		bool asked_ = ask_cache(&a_, H_##name, (size), DEV_CURRENT);           \
		if (asked_) {                                                          \
			r_ = ((name##_fn)real_) args;                                  \
			if (r_ == cudaSuccess)                                         \
				clear_runtime_error(real_);                            \
		}                                                                      \
		ask_done(&a_, asked_, r_ == cudaSuccess);                              \
		return r_;                                                             \
	}

RT_HOOK(cudaMalloc, (void **p, size_t n), (p, n), n)
RT_HOOK(cudaMallocManaged, (void **p, size_t n, unsigned int flags), (p, n, flags), n)
RT_HOOK(cudaMallocPitch, (void **p, size_t *pitch, size_t w, size_t h), (p, pitch, w, h), mul_or_zero(w, h))
RT_HOOK(cudaMalloc3D, (struct cudaPitchedPtr * p, struct cudaExtent e), (p, e),
	mul_or_zero(mul_or_zero(e.width, e.height), e.depth))
RT_HOOK(cudaMallocAsync, (void **p, size_t n, cudaStream_t s), (p, n, s), n)
RT_HOOK(cudaMallocAsync_ptsz, (void **p, size_t n, cudaStream_t s), (p, n, s), n)
RT_HOOK(cudaMallocFromPoolAsync, (void **p, size_t n, cudaMemPool_t pool, cudaStream_t s), (p, n, pool, s), n)
RT_HOOK(cudaMallocFromPoolAsync_ptsz, (void **p, size_t n, cudaMemPool_t pool, cudaStream_t s),
	(p, n, pool, s), n)

static struct hook hooks[N_HOOKS] = {
#define D(name_, proc_, lo, hi, ptsz_)                                                       \
	[H_##name_] = { .name = #name_, .proc = proc_, .min_ver = lo, .max_ver = hi, .ptsz = ptsz_, \
			.sym_wrap = (void *)name_##_sym, .proc_wrap = (void *)name_##_procw },
#define R(name_) [H_##name_] = { .name = #name_, .sym_wrap = (void *)name_##_sym },
	VC_SHIM_DRIVER_HOOKS(D) VC_SHIM_RUNTIME_HOOKS(R)
#undef D
#undef R
};

/* --- dlsym ------------------------------------------------------------------ */

/* Lookups on a real handle: the real answer, or our wrapper of it. */
__attribute__((used)) void *vc_shim_dlsym(void *handle, const char *symbol)
{
	dlsym_fn dls = real_dlsym();
	if (!dls)
		return NULL;
	void *p = dls(handle, symbol);
	if (!p || !symbol || symbol[0] != 'c' || symbol[1] != 'u')
		return p;
	int id = find_by_name(symbol);
	if (id < 0 || p == hooks[id].sym_wrap) /* our own export, in the scope searched */
		return p;
	return claim(&hooks[id].sym_real, p) ? hooks[id].sym_wrap : p;
}

#if defined(__x86_64__)
/* RTLD_DEFAULT (0) and RTLD_NEXT (-1) tail-jump to glibc's dlsym, which
 * then sees our caller's return address; resolving it the first time
 * keeps the argument registers and the stack's 16-byte alignment. */
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	"	.cfi_startproc\n"
	"	endbr64\n"
	"	testq %rdi, %rdi\n"
	"	je 1f\n"
	"	cmpq $-1, %rdi\n"
	"	jne vc_shim_dlsym\n"
	"1:	movq vc_shim_real_dlsym(%rip), %rax\n"
	"	testq %rax, %rax\n"
	"	je 2f\n"
	"	jmp *%rax\n"
	"2:	pushq %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	pushq %rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	subq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	call vc_shim_resolve_dlsym\n"
	"	addq $8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rsi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	testq %rax, %rax\n"
	"	je 3f\n"
	"	jmp *%rax\n"
	"3:	ret\n"
	"	.cfi_endproc\n"
	".size dlsym, .-dlsym\n");
#else
VC_EXPORT void *dlsym(void *restrict handle, const char *restrict symbol)
{
	if (handle == RTLD_DEFAULT || handle == RTLD_NEXT) {
		dlsym_fn dls = real_dlsym();
		return dls ? dls(handle, symbol) : NULL; /* resolved as if from the shim */
	}
	return vc_shim_dlsym(handle, symbol);
}
#endif
