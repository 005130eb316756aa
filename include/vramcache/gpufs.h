/* vramcache GPUfs: a file API for GPU code over the cache's one page cache
 * (docs/GPUFS.md has the design; include/vramcache.h the host half).
 *
 * This header is the device half, written once for two compilers:
 *   nvcc (__CUDACC__)  every function is __device__ and is called by all
 *                      active lanes of a warp together, with the same
 *                      arguments (warp-level semantics, GPUfs'16 §4.3.2);
 *                      one lane does the bookkeeping, every lane copies
 *   a C11/C++ host     the same functions as plain inline code, called by
 *                      one CPU thread standing in for a warp of one lane
 *                      (vc_gpufs_emu_run on the emulated device), so that
 *                      CI runs the API's logic without a GPU
 * Only the macros of the "portability" section differ between the two.
 *
 * Every call returns a count or 0 on success and a negative errno on
 * failure; none traps and none waits without a bound (ctx.timeout_ns; a
 * call that runs out of it returns -ETIMEDOUT and marks the context
 * broken: later calls return -EIO until the host's vc_gpufs_release).
 *
 * Data structures (all named by the context view, struct vc_gfs_ctx, which
 * kernels receive by value):
 *   tab    device memory: the device table, an open-addressing hash table
 *          of pages the device may use without asking the host (key: the
 *          engine's page number; value: the page's engine id, the
 *          device-visible address of its bytes in the engine's own slot,
 *          the file version it was granted under, and a pin count). Each
 *          VALID entry stands for one engine pin the host holds, so the
 *          engine neither moves nor evicts the page while it is there.
 *   files  device memory: per fd, the engine volume's first page number,
 *          the size, the version and the open flags, written by the warp
 *          that received the host's answer to its gopen.
 *   ring   mapped pinned host memory: request slots (struct vc_gfs_req)
 *          and a data area per slot, claimed with one device-scope atomic
 *          add on ctl->tail; host service threads take published slots in
 *          ticket order, as many as are there (opportunistic batching).
 *   uring  the same for UNPIN alone (pins handed back), drained by a host
 *          thread that never sleeps in the engine.
 * Lock rules (device side): no locks. A table entry's st word is changed
 * only by compare-and-swap: pin/unpin (pins < VC_GFS_PINS), FILL (an
 * inserter owns the entry), VALID, DEAD (revoked: the host will drop its
 * engine pin). Its other words change only while it is FILL, so a reader
 * that pinned a VALID entry re-reads the key and trusts it if it matches.
 */
#ifndef VRAMCACHE_GPUFS_H
#define VRAMCACHE_GPUFS_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#ifndef __CUDACC__
#include <string.h>
#include <time.h>
#endif

/* ---- the layout shared by host and device -------------------------------- */

#define VC_GFS_MAX_FILES 64           /* fds per context */
#define VC_GFS_SLOT_DATA (64u << 10)  /* bytes one request carries (gwrite pieces, paths) */
#define VC_GFS_IDS 16                 /* engine pins one UNPIN hands back */
#define VC_GFS_PROBES 32              /* table probes before a lookup gives up */
#define VC_GFS_BUCKETS 256            /* the engine's per-page wait buckets (PW_BUCKETS) */

/* gopen flags: Linux's values, so O_* may be passed as they are. */
#define VC_GO_RDONLY 0x0
#define VC_GO_RDWR 0x2
#define VC_GO_CREAT 0x40
#define VC_GO_TRUNC 0x200

/* gmmap prot. */
#define VC_GPROT_READ 0x1
#define VC_GPROT_WRITE 0x2

enum vc_gfs_op {
	VC_GFS_OP_NOP = 0,
	VC_GFS_OP_OPEN = 1,  /* data: the path; flags: VC_GO_*; -> fd, base, size, version */
	VC_GFS_OP_GET = 2,   /* fd, off: page index -> id, addr, version, rflags */
	VC_GFS_OP_UNPIN = 3, /* ids[0..nids): engine pins to drop; flags: VC_GFS_R_CACHE
				if they were granted for the table. No answer is read */
	VC_GFS_OP_WRITE = 4, /* fd, off, len, data */
	VC_GFS_OP_FSYNC = 5, /* fd */
	VC_GFS_OP_CLOSE = 6, /* fd */
	VC_GFS_OP_TRUNC = 7, /* fd, off: the new size -> size */
};

#define VC_GFS_R_CACHE 1u /* GET: the grant may go into the table */
#define VC_GFS_F_MAP 2u   /* GET for gmmap: a long pin, in the host tier (docs/GPUFS.md) */

/* One request slot in mapped pinned host memory. seq, done and ack hold
 * ticket + 1 of the slot's latest use: seq once the device wrote the
 * request, done once the host wrote the answer, ack once the device read
 * it (or at once, by the host, for ops nobody waits on). Ticket t may use
 * slot t % R when its ack says t - R + 1. The request ring's acks are
 * kept in device memory instead (ctx.ack); this one is the unpin ring's. */
struct vc_gfs_req {
	uint64_t seq, done, ack;
	uint32_t op, fd;
	uint64_t off, len;
	uint32_t flags, nids;
	uint32_t ids[VC_GFS_IDS];
	/* the answer */
	int64_t result;
	uint64_t addr, size, base;
	uint32_t id, version, rflags, _pad;
	uint64_t dlen, res; /* OPEN, TRUNC: vc_gfs_file's dlen and res */
};

/* A device table entry: 32 bytes. */
struct vc_gfs_ent {
	uint64_t key;  /* page number (volume << 48 | index); meaningful while VALID */
	uint64_t addr; /* device-visible address of the page's bytes */
	uint32_t st;   /* pins | VC_GFS_E_* */
	uint32_t id;   /* the engine's page id (its pin) */
	uint32_t version, _pad;
};

#define VC_GFS_FD_OPEN 0x80000000u /* vc_gfs_file.flags: the fd is open */

#define VC_GFS_PINS 0xffffu
#define VC_GFS_E_VALID (1u << 16)
#define VC_GFS_E_FILL (1u << 17)
#define VC_GFS_E_DEAD (1u << 18)

/* Direct reads (step 4). A file the context opened read-only (the cache
 * writes nothing to it, so its pages in the OS page cache are the cached
 * ones' equals) may be mapped and registered by the host (vc_gpufs_open):
 * a page that no table entry grants and that the res bitmap does not
 * mark cached is then read by the warp straight from the OS page cache
 * over PCIe, with no request to the host. One such read in
 * ctx.admit_mask + 1 also drops the page's number into the hint ring
 * (lossy, never waited for): the host loads hinted pages into the GPU tier
 * when it is idle and marks them in res, so that the next read of one asks
 * the host for a grant (GET) and the reads after it are GPU-tier hits. */
struct vc_gfs_file {
	uint64_t base;    /* volume << 48: the file's first page number */
	uint64_t size;
	uint32_t version; /* close-to-open: bumped by the host when the file changed
			     outside the cache since the last gopen */
	uint32_t flags;   /* VC_GO_* of the first open; 0 when closed */
	uint64_t direct;  /* device address of the registered mapping's byte 0 */
	uint64_t dlen;    /* bytes of it to read directly (whole pages; 0: none).
			     Only shrinks: a truncation cuts it, and pages past it
			     are never read from the mapping again */
	uint64_t res;     /* device address of dlen / page bits: the page is
			     cached (set at the open, by the host when it loaded a
			     hinted page, and by warps whose GET the host
			     answered): ask the host for it */
};

#define VC_GFS_ID_DIRECT 0xffffffffu /* a grant's id: read from the mapping, no pin */

/* Device-memory words of a context. The revoke pass's counters never go
 * back (step 3): pass P (1, 2, ...) owns chunk numbers [(P-1) x nch, P x
 * nch), nch = entries / VC_GFS_REV_CHUNK; the host asks for pass P by
 * storing rev_req = P (one 4-byte write through the copy engines: no
 * kernel, no SM), and only after it has taken pass P - 1's output. Warps
 * claim a chunk with a compare-and-swap that never takes rev_next past
 * rev_req x nch, so every claim belongs to the pass its number says, and
 * a warp that read the words long ago cannot take or finish a chunk of
 * another pass. (Step 2 reset the counters for each pass with a copy,
 * while warps of the pass before could still add to them: a late claim
 * landed in the next pass before its rev_req did, finished it under the
 * old number, and the pass never ended; its ids could go past the output
 * array. docs/GPUFS.md, step 3.) */
struct vc_gfs_ctl {
	uint64_t tail;     /* next ticket */
	uint64_t utail;    /* next ticket of the unpin ring */
	uint32_t broken;   /* a call timed out: the ring may be stuck */
	uint32_t rev_req;  /* passes asked for (host-written) */
	uint64_t rev_next; /* chunks claimed, over every pass (CAS, <= rev_req x nch) */
	uint64_t rev_fin;  /* chunks finished, over every pass */
	uint32_t rev_n;    /* ids written, over every pass (mod 2^32; slot n & tab_mask) */
	uint32_t _pad;
	/* The pass's selection (host-written before its rev_req, in the same
	 * stream: a warp that claimed a chunk of pass P reads P's): bit b set
	 * = entries whose page is in the engine's wait bucket b
	 * (vc_gfs_bucket) are revoked; the others stay. */
	uint32_t rev_sel[VC_GFS_BUCKETS / 32];
	uint64_t direct; /* pages read from a mapping (direct reads), for stats */
	uint64_t hint_tail; /* hints posted (slot tail & hint_mask) */
};

/* A revoke pass's share: table entries a chunk. */
#define VC_GFS_REV_CHUNK 256u

/* The context view: trivially copyable, passed to kernels by value. The
 * host object (vc_gpufs) owns everything it points to. */
struct vc_gfs_ctx {
	struct vc_gfs_req *ring;   /* R slots, mapped pinned host memory */
	struct vc_gfs_req *uring;  /* R slots for UNPIN only (mapped): the host drains
				      them on a thread that never sleeps in the engine,
				      so a pin handed back is never queued behind a
				      request that waits for it */
	unsigned char *data;       /* R x VC_GFS_SLOT_DATA, mapped pinned host memory */
	struct vc_gfs_ctl *ctl;    /* device memory */
	struct vc_gfs_ent *tab;    /* device memory */
	struct vc_gfs_file *files; /* device memory, VC_GFS_MAX_FILES */
	uint32_t *rev;             /* mapped: revoke passes' output: engine ids of
				      the entries they revoked [0, entries), written at
				      rev_n & tab_mask; rev_n as of the last pass done
				      [entries], that pass's number [entries + 1] */
	uint64_t *ack;             /* device memory, R words: ring slot i was last
				      answered and read for ticket ack[i] - 1. In device
				      memory because warps waiting for a free slot poll
				      it: thousands of them polling mapped memory fill
				      the link with reads (step 3) */
	uint32_t ring_mask;        /* R - 1 */
	uint32_t tab_mask;         /* entries - 1 */
	uint32_t page_shift;
	uint32_t admit_mask;       /* direct reads: 1 in admit_mask + 1 posts a hint */
	uint64_t timeout_ns;       /* a call's bound */
	uint64_t *hints;           /* mapped: the hint ring, page number + 1 a slot
				      (0: empty; the host zeroes what it took) */
	uint32_t hint_mask;        /* hint slots - 1 */
	uint32_t _pad2;
};

/* A mapping from vc_gmmap: the page stays pinned until vc_gmunmap. */
struct vc_gmap {
	const void *ptr;
	uint64_t len;
	uint32_t ent; /* table entry + 1, or 0: an uncached grant */
	uint32_t id;  /* its engine pin */
};

/* ---- portability -----------------------------------------------------------
 * VC_GFS_FN           the functions' qualifiers
 * VC_GFS_LD/ST        acquire load / release store of a word another agent
 *                     (host thread, other warp) writes or reads; on the
 *                     device at system scope (the host reads it over PCIe)
 * VC_GFS_LDD/STD      the same for words in device memory (device scope)
 * VC_GFS_CAS32, _ADD  device-scope atomics, acquire and release (words in
 *                     device memory only): a pin's CAS orders the entry's
 *                     reads after it, an unpin orders the page's reads
 *                     before it
 * VC_GFS_FENCE        orders a warp's plain stores before what follows
 * struct vc_gfs_warp  the calling warp: its active mask, this lane's rank
 *                     among the active lanes, their number; BCAST hands the
 *                     leader's value to every lane. On the host a warp is
 *                     one lane. */
#ifdef __CUDACC__
#define VC_GFS_FN static __device__ __forceinline__
#define VC_GFS_LD(p) vc_gfs_ld_((const volatile void *)(p), sizeof *(p), true)
#define VC_GFS_ST(p, v) vc_gfs_st_((volatile void *)(p), sizeof *(p), (uint64_t)(v), true)
#define VC_GFS_LDD(p) vc_gfs_ld_((const volatile void *)(p), sizeof *(p), false)
#define VC_GFS_STD(p, v) vc_gfs_st_((volatile void *)(p), sizeof *(p), (uint64_t)(v), false)
#define VC_GFS_CAS32(p, e, d) (vc_gfs_cas32_((uint32_t *)(p), (uint32_t)(e), (uint32_t)(d)) == (uint32_t)(e))
#define VC_GFS_ADD32(p, v) vc_gfs_add32_((uint32_t *)(p), (uint32_t)(v))
#define VC_GFS_SUB32(p, v) vc_gfs_add32_((uint32_t *)(p), 0u - (uint32_t)(v))
#define VC_GFS_ADD64(p, v) vc_gfs_add64_((uint64_t *)(p), (uint64_t)(v))
#define VC_GFS_OR32(p, v) atomicOr((unsigned int *)(p), (unsigned int)(v))
#define VC_GFS_STR(p, v) (*(volatile uint64_t *)(p) = (v)) /* no order needed */
#define VC_GFS_CAS64(p, e, d) (vc_gfs_cas64_((uint64_t *)(p), (uint64_t)(e), (uint64_t)(d)) == (uint64_t)(e))
#define VC_GFS_FENCE() __threadfence_system()
#define VC_GFS_PAUSE() __nanosleep(200)

/* `sys`: the word is in mapped host memory (system scope), else in device
 * memory (device scope). Acquire loads and release stores (PTX ISA 6.0,
 * sm_70): the ordering the protocol needs, without the full fence after
 * every load that step 3 paid (a membar per word read on every table hit;
 * docs/GPUFS.md, step 4). */
static __device__ __forceinline__ uint64_t vc_gfs_ld_(const volatile void *p, size_t n, bool sys)
{
	uint64_t v;
	uint32_t x;
	if (n == 8) {
		if (sys)
			asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
		else
			asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
		return v;
	}
	if (sys)
		asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(x) : "l"(p) : "memory");
	else
		asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(x) : "l"(p) : "memory");
	return x;
}

static __device__ __forceinline__ uint32_t vc_gfs_cas32_(uint32_t *p, uint32_t e, uint32_t d)
{
	uint32_t o;
	asm volatile("atom.acq_rel.gpu.cas.b32 %0, [%1], %2, %3;" : "=r"(o) : "l"(p), "r"(e), "r"(d) : "memory");
	return o;
}

static __device__ __forceinline__ uint64_t vc_gfs_cas64_(uint64_t *p, uint64_t e, uint64_t d)
{
	uint64_t o;
	asm volatile("atom.acq_rel.gpu.cas.b64 %0, [%1], %2, %3;" : "=l"(o) : "l"(p), "l"(e), "l"(d) : "memory");
	return o;
}

static __device__ __forceinline__ uint32_t vc_gfs_add32_(uint32_t *p, uint32_t v)
{
	uint32_t o;
	asm volatile("atom.acq_rel.gpu.add.u32 %0, [%1], %2;" : "=r"(o) : "l"(p), "r"(v) : "memory");
	return o;
}

static __device__ __forceinline__ uint64_t vc_gfs_add64_(uint64_t *p, uint64_t v)
{
	uint64_t o;
	asm volatile("atom.acq_rel.gpu.add.u64 %0, [%1], %2;" : "=l"(o) : "l"(p), "l"(v) : "memory");
	return o;
}

static __device__ __forceinline__ void vc_gfs_st_(volatile void *p, size_t n, uint64_t v, bool sys)
{
	uint32_t x = (uint32_t)v;
	if (n == 8) {
		if (sys)
			asm volatile("st.release.sys.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
		else
			asm volatile("st.release.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
	} else if (sys) {
		asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(x) : "memory");
	} else {
		asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(p), "r"(x) : "memory");
	}
}

static __device__ __forceinline__ uint64_t vc_gfs_now_ns(void)
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

struct vc_gfs_warp {
	unsigned mask, rank, n, leader_lane;
};

static __device__ __forceinline__ struct vc_gfs_warp vc_gfs_warp_self(void)
{
	struct vc_gfs_warp w;
	unsigned lane;
	asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
	w.mask = __activemask();
	w.rank = __popc(w.mask & ((1u << lane) - 1));
	w.n = __popc(w.mask);
	w.leader_lane = __ffs(w.mask) - 1;
	return w;
}

/* The calling lane alone, as a warp (a leader inside a wait). */
static __device__ __forceinline__ struct vc_gfs_warp vc_gfs_solo_(void)
{
	struct vc_gfs_warp w;
	unsigned lane;
	asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
	w.mask = 1u << lane;
	w.rank = 0;
	w.n = 1;
	w.leader_lane = lane;
	return w;
}

#define VC_GFS_LEADER(w) ((w).rank == 0)
#define VC_GFS_BCAST(w, x) __shfl_sync((w).mask, (x), (w).leader_lane)
#define VC_GFS_SYNCWARP(w) __syncwarp((w).mask)
#else
#define VC_GFS_FN static inline
#define VC_GFS_LD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define VC_GFS_ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define VC_GFS_LDD(p) VC_GFS_LD(p)
#define VC_GFS_STD(p, v) VC_GFS_ST(p, v)
#define VC_GFS_CAS32(p, e, d) vc_gfs_cas32_((p), (e), (d))
#define VC_GFS_ADD32(p, v) __atomic_fetch_add((p), (v), __ATOMIC_ACQ_REL)
#define VC_GFS_SUB32(p, v) __atomic_fetch_sub((p), (v), __ATOMIC_ACQ_REL)
#define VC_GFS_ADD64(p, v) __atomic_fetch_add((p), (v), __ATOMIC_ACQ_REL)
#define VC_GFS_OR32(p, v) __atomic_fetch_or((p), (v), __ATOMIC_RELAXED)
#define VC_GFS_STR(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define VC_GFS_CAS64(p, e, d) vc_gfs_cas64_((p), (e), (d))
/* Nothing: on the host the release store that publishes (VC_GFS_ST) orders
 * the plain stores before it. */
#define VC_GFS_FENCE() ((void)0)
/* A CPU warp waiting for the host sleeps a little: on a few cores a spin
 * would take the time the host's service threads need. */
#define VC_GFS_PAUSE() vc_gfs_nap_()

static inline void vc_gfs_nap_(void)
{
	struct timespec ts = { 0, 20000 };
	nanosleep(&ts, NULL);
}

static inline int vc_gfs_cas32_(uint32_t *p, uint32_t e, uint32_t d)
{
	return __atomic_compare_exchange_n(p, &e, d, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

static inline int vc_gfs_cas64_(uint64_t *p, uint64_t e, uint64_t d)
{
	return __atomic_compare_exchange_n(p, &e, d, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

static inline uint64_t vc_gfs_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct vc_gfs_warp {
	unsigned rank, n;
};

static inline struct vc_gfs_warp vc_gfs_warp_self(void)
{
	struct vc_gfs_warp w = { 0, 1 };
	return w;
}

static inline struct vc_gfs_warp vc_gfs_solo_(void)
{
	return vc_gfs_warp_self();
}

#define VC_GFS_LEADER(w) ((w).rank == 0)
#define VC_GFS_BCAST(w, x) (x)
#define VC_GFS_SYNCWARP(w) ((void)(w))
#endif

/* ---- internals: the table -------------------------------------------------- */

VC_GFS_FN uint32_t vc_gfs_hash_(uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	return (uint32_t)key;
}

/* Leader: pins a VALID entry for key of `version`; its index, or -1. A
 * stale entry (older version) that nobody pins is revoked on the way, its
 * engine pin reported in *stale_id (UINT32_MAX: none). Cost: up to
 * VC_GFS_PROBES entries read, one CAS per match. */
VC_GFS_FN int32_t vc_gfs_tab_pin_(const struct vc_gfs_ctx *g, uint64_t key, uint32_t version,
				  uint32_t *stale_id)
{
	uint32_t h = vc_gfs_hash_(key);
	for (uint32_t i = 0; i < VC_GFS_PROBES; i++) {
		uint32_t x = (h + i) & g->tab_mask;
		struct vc_gfs_ent *e = &g->tab[x];
		uint32_t st = (uint32_t)VC_GFS_LDD(&e->st);
		if (st == 0)
			return -1; /* never used: the probe sequence ends here */
		if (!(st & VC_GFS_E_VALID) || VC_GFS_LDD(&e->key) != key)
			continue;
		if ((st & VC_GFS_PINS) == VC_GFS_PINS || !VC_GFS_CAS32(&e->st, st, st + 1)) {
			i--; /* changed under us: look again */
			continue;
		}
		/* Pinned VALID: key, version and addr hold still now. */
		if (VC_GFS_LDD(&e->key) == key) {
			if ((uint32_t)VC_GFS_LDD(&e->version) == version)
				return (int32_t)x;
			if (*stale_id == UINT32_MAX &&
			    VC_GFS_CAS32(&e->st, st + 1, (st & ~(VC_GFS_E_VALID | VC_GFS_PINS)) | VC_GFS_E_DEAD)) {
				*stale_id = (uint32_t)VC_GFS_LDD(&e->id);
				continue;
			}
		}
		VC_GFS_SUB32(&e->st, 1);
	}
	return -1;
}

/* Leader: enters a grant, pinned once for the caller; its index, or -1
 * when no entry within VC_GFS_PROBES is free (never used or DEAD). */
VC_GFS_FN int32_t vc_gfs_tab_insert_(const struct vc_gfs_ctx *g, uint64_t key, uint64_t addr,
				     uint32_t id, uint32_t version)
{
	uint32_t h = vc_gfs_hash_(key);
	for (uint32_t i = 0; i < VC_GFS_PROBES; i++) {
		uint32_t x = (h + i) & g->tab_mask;
		struct vc_gfs_ent *e = &g->tab[x];
		uint32_t st = (uint32_t)VC_GFS_LDD(&e->st);
		if ((st != 0 && st != VC_GFS_E_DEAD) || !VC_GFS_CAS32(&e->st, st, VC_GFS_E_FILL))
			continue;
		VC_GFS_STD(&e->key, key);
		VC_GFS_STD(&e->addr, addr);
		VC_GFS_STD(&e->id, id);
		VC_GFS_STD(&e->version, version);
		VC_GFS_STD(&e->st, VC_GFS_E_VALID | 1u);
		return (int32_t)x;
	}
	return -1;
}

/* The engine's wait bucket of page number key: equal to the engine's
 * pw_bucket() (vc_mix64 of the page number; test_gpufs checks it), so that
 * a revoke pass can take just the entries a sleeper may wait for. */
VC_GFS_FN uint32_t vc_gfs_bucket(uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	key *= 0xc4ceb9fe1a85ec53ull;
	key ^= key >> 33;
	return (uint32_t)(key & (VC_GFS_BUCKETS - 1));
}

/* Revokes entry x if nobody pins it: true and its engine id. */
VC_GFS_FN int vc_gfs_tab_revoke_(const struct vc_gfs_ctx *g, uint32_t x, uint32_t *id)
{
	struct vc_gfs_ent *e = &g->tab[x];
	uint32_t st = (uint32_t)VC_GFS_LDD(&e->st);
	if (st != VC_GFS_E_VALID || !VC_GFS_CAS32(&e->st, st, VC_GFS_E_DEAD))
		return 0;
	*id = (uint32_t)VC_GFS_LDD(&e->id);
	return 1;
}

/* A warp's share of the host's revoke passes (every active lane; a lone
 * leader passes vc_gfs_solo_()): while a chunk of an asked-for pass is
 * left (rev_next < rev_req x nch), claims it and revokes every VALID
 * entry of it that nobody pins and whose wait bucket the pass selects
 * (ctl->rev_sel), writing its engine id to g->rev[]; the
 * warp that finishes a pass's last chunk publishes the ids' running count
 * and the pass's number there, for the host. Warps call it at each call's
 * start and while they wait for the host, so a pass needs no kernel and
 * no free SM; the host's fallback kernel (and the emulated device's
 * reaper) call it the same way. Lock-free; each chunk is claimed once,
 * by a CAS that cannot run past the passes asked for (ctl's comment), and
 * nothing in it waits. Cost when no chunk is left: two loads of device
 * memory. A pass: one 4-byte read per entry, one CAS and one 4-byte PCIe
 * write per revoked entry, shared by the warps. */
VC_GFS_FN void vc_gfs_revoke_help(const struct vc_gfs_ctx *g, struct vc_gfs_warp w)
{
	struct vc_gfs_ctl *ctl = g->ctl;
	const uint64_t nch = ((uint64_t)g->tab_mask + VC_GFS_REV_CHUNK) / VC_GFS_REV_CHUNK;
	for (;;) {
		unsigned long long c = ~0ull;
		if (VC_GFS_LEADER(w)) {
			uint64_t lim = (uint64_t)(uint32_t)VC_GFS_LDD(&ctl->rev_req) * nch;
			uint64_t next = VC_GFS_LDD(&ctl->rev_next);
			while (next < lim) {
				if (VC_GFS_CAS64(&ctl->rev_next, next, next + 1)) {
					c = next;
					break;
				}
				next = VC_GFS_LDD(&ctl->rev_next);
			}
		}
		c = VC_GFS_BCAST(w, c);
		if (c == ~0ull)
			return;
		uint64_t first = (c % nch) * VC_GFS_REV_CHUNK, end = first + VC_GFS_REV_CHUNK;
		if (end > (uint64_t)g->tab_mask + 1)
			end = (uint64_t)g->tab_mask + 1;
		uint32_t sel[VC_GFS_BUCKETS / 32];
		for (unsigned i = 0; i < VC_GFS_BUCKETS / 32; i++)
			sel[i] = (uint32_t)VC_GFS_LDD(&ctl->rev_sel[i]);
		for (uint64_t x = first + w.rank; x < end; x += w.n) {
			uint32_t id, b, st = (uint32_t)VC_GFS_LDD(&g->tab[x].st);
			if (st != VC_GFS_E_VALID)
				continue;
			/* The key may change under us (the entry's next life):
			 * then an entry goes that need not, which is harmless. */
			b = vc_gfs_bucket(VC_GFS_LDD(&g->tab[x].key));
			if ((sel[b / 32] >> (b % 32)) & 1u && vc_gfs_tab_revoke_(g, (uint32_t)x, &id))
				VC_GFS_ST(&g->rev[VC_GFS_ADD32(&ctl->rev_n, 1) & g->tab_mask], id);
		}
		VC_GFS_FENCE(); /* this lane's ids before the chunk counts as done */
		VC_GFS_SYNCWARP(w);
		uint64_t pass = c / nch + 1;
		if (VC_GFS_LEADER(w) && VC_GFS_ADD64(&ctl->rev_fin, 1) + 1 == pass * nch) {
			/* The pass's last chunk: every id of it is out (each
			 * finisher fenced before its count), and none of the next
			 * pass's is (not asked for before the host reads these). */
			VC_GFS_ST(&g->rev[g->tab_mask + 1], (uint32_t)VC_GFS_LDD(&ctl->rev_n));
			VC_GFS_ST(&g->rev[g->tab_mask + 2], (uint32_t)pass);
		}
	}
}

/* ---- internals: requests --------------------------------------------------- */

VC_GFS_FN int vc_gfs_broken_(const struct vc_gfs_ctx *g)
{
	return VC_GFS_LDD(&g->ctl->broken) != 0;
}

VC_GFS_FN int64_t vc_gfs_timeout_(const struct vc_gfs_ctx *g)
{
	VC_GFS_STD(&g->ctl->broken, 1u);
	return -ETIMEDOUT;
}

/* Leader: claims a ticket and waits until its slot is free (the slot's
 * ack word says t - R + 1: in device memory for the request ring, the
 * slot's own, host-written, for the unpin ring); the slot, or NULL (timed
 * out: the context is broken). */
VC_GFS_FN struct vc_gfs_req *vc_gfs_claim_on_(const struct vc_gfs_ctx *g, struct vc_gfs_req *ring,
					      uint64_t *tail, uint64_t *ticket, uint64_t t0)
{
	uint64_t t = VC_GFS_ADD64(tail, 1);
	struct vc_gfs_req *s = &ring[t & g->ring_mask];
	uint64_t prev = t > g->ring_mask ? t - g->ring_mask : 0; /* t - R + 1 */
	const int dev = ring == g->ring;
	uint64_t *ack = dev ? &g->ack[t & g->ring_mask] : &s->ack;
	while ((dev ? VC_GFS_LDD(ack) : VC_GFS_LD(ack)) < prev) {
		if (vc_gfs_now_ns() - t0 > g->timeout_ns)
			return NULL;
		vc_gfs_revoke_help(g, vc_gfs_solo_());
		VC_GFS_PAUSE();
	}
	*ticket = t;
	return s;
}

VC_GFS_FN struct vc_gfs_req *vc_gfs_claim_(const struct vc_gfs_ctx *g, uint64_t *ticket,
					   uint64_t t0)
{
	return vc_gfs_claim_on_(g, g->ring, &g->ctl->tail, ticket, t0);
}

/* Leader: publishes the request written into s (the data area first) and,
 * with `wait`, waits for its answer; 0, or -ETIMEDOUT. */
VC_GFS_FN int64_t vc_gfs_post_(const struct vc_gfs_ctx *g, struct vc_gfs_req *s, uint64_t t,
			       int wait, uint64_t t0)
{
	VC_GFS_FENCE();
	VC_GFS_ST(&s->seq, t + 1);
	if (!wait)
		return 0;
	while (VC_GFS_LD(&s->done) != t + 1) {
		if (vc_gfs_now_ns() - t0 > g->timeout_ns)
			return vc_gfs_timeout_(g);
		vc_gfs_revoke_help(g, vc_gfs_solo_());
		VC_GFS_PAUSE();
	}
	return 0;
}

/* Leader: the request ring's slot of ticket t: its answer was read, the
 * slot is free. */
VC_GFS_FN void vc_gfs_release_slot_(const struct vc_gfs_ctx *g, uint64_t t)
{
	VC_GFS_STD(&g->ack[t & g->ring_mask], t + 1);
}

VC_GFS_FN void vc_gfs_fill_(struct vc_gfs_req *s, uint32_t op, uint32_t fd, uint64_t off,
			    uint64_t len, uint32_t flags)
{
	s->op = op;
	s->fd = fd;
	s->off = off;
	s->len = len;
	s->flags = flags;
	s->nids = 0;
}

/* Leader: hands engine pins back (fire and forget, on the unpin ring). */
VC_GFS_FN int64_t vc_gfs_unpin_(const struct vc_gfs_ctx *g, const uint32_t *ids, uint32_t n,
				uint32_t flags)
{
	uint64_t t0 = vc_gfs_now_ns(), t;
	while (n) {
		struct vc_gfs_req *s = vc_gfs_claim_on_(g, g->uring, &g->ctl->utail, &t, t0);
		if (!s)
			return vc_gfs_timeout_(g);
		uint32_t k = n < VC_GFS_IDS ? n : VC_GFS_IDS;
		vc_gfs_fill_(s, VC_GFS_OP_UNPIN, 0, 0, 0, flags);
		for (uint32_t i = 0; i < k; i++)
			s->ids[i] = ids[i];
		s->nids = k;
		vc_gfs_post_(g, s, t, 0, t0);
		ids += k;
		n -= k;
	}
	return 0;
}

/* Leader: a simple op (OPEN's path already in the slot's data area is the
 * caller's): the answer's result, and the slot's answer copied to *a. */
VC_GFS_FN int64_t vc_gfs_rpc_(const struct vc_gfs_ctx *g, uint32_t op, uint32_t fd, uint64_t off,
			      uint64_t len, uint32_t flags, struct vc_gfs_req *a)
{
	uint64_t t0 = vc_gfs_now_ns(), t;
	if (vc_gfs_broken_(g))
		return -EIO;
	struct vc_gfs_req *s = vc_gfs_claim_(g, &t, t0);
	if (!s)
		return vc_gfs_timeout_(g);
	vc_gfs_fill_(s, op, fd, off, len, flags);
	int64_t r = vc_gfs_post_(g, s, t, 1, t0);
	if (r < 0)
		return r;
	a->result = (int64_t)VC_GFS_LD((uint64_t *)&s->result);
	a->size = VC_GFS_LD(&s->size);
	a->base = VC_GFS_LD(&s->base);
	a->version = (uint32_t)VC_GFS_LD(&s->version);
	a->addr = VC_GFS_LD(&s->addr);
	a->id = (uint32_t)VC_GFS_LD(&s->id);
	a->rflags = (uint32_t)VC_GFS_LD(&s->rflags);
	a->dlen = VC_GFS_LD(&s->dlen);
	vc_gfs_release_slot_(g, t);
	return a->result;
}

VC_GFS_FN int vc_gfs_fd_ok_(const struct vc_gfs_ctx *g, int fd)
{
	return fd >= 0 && fd < VC_GFS_MAX_FILES && VC_GFS_LDD(&g->files[fd].flags) != 0;
}

#define VC_GFS_ENT_LOOSE 0x80000000u

/* Leader: a usable grant for page `idx` of fd: pinned in the table (*ent =
 * index + 1) or, when the table has no room, pinned for this call alone
 * (*ent = 0; the caller hands *id back). 0 or negative. */
VC_GFS_FN int64_t vc_gfs_get_(const struct vc_gfs_ctx *g, int fd, uint64_t idx, uint32_t flags,
			      uint64_t *addr, uint32_t *ent, uint32_t *id)
{
	struct vc_gfs_file *f = &g->files[fd];
	uint64_t key = VC_GFS_LDD(&f->base) | idx;
	uint32_t version = (uint32_t)VC_GFS_LDD(&f->version), stale = UINT32_MAX;
	int32_t x = (flags & VC_GFS_F_MAP) ? -1 : vc_gfs_tab_pin_(g, key, version, &stale);
	if (stale != UINT32_MAX) {
		int64_t r = vc_gfs_unpin_(g, &stale, 1, VC_GFS_R_CACHE);
		if (r < 0) {
			if (x >= 0)
				VC_GFS_SUB32(&g->tab[x].st, 1);
			return r;
		}
	}
	if (x >= 0) {
		*addr = VC_GFS_LDD(&g->tab[x].addr);
		*ent = (uint32_t)x + 1;
		*id = (uint32_t)VC_GFS_LDD(&g->tab[x].id);
		return 0;
	}
	/* A miss of the table. Direct read (vc_gfs_file's comment): a whole
	 * page inside the mapping that the cache does not hold. Cost: a
	 * bitmap word read and a counter add; a hint adds one add and one
	 * 8-byte PCIe write. */
	uint64_t dlen = VC_GFS_LDD(&f->dlen);
	if (!(flags & VC_GFS_F_MAP) && ((idx + 1) << g->page_shift) <= dlen) {
		const uint32_t *res = (const uint32_t *)(uintptr_t)VC_GFS_LDD(&f->res);
		if (!(VC_GFS_LDD(&res[idx / 32]) & (1u << (idx % 32)))) {
			*addr = VC_GFS_LDD(&f->direct) + (idx << g->page_shift);
			*ent = 0;
			*id = VC_GFS_ID_DIRECT;
			VC_GFS_ADD64(&g->ctl->direct, 1);
			if (g->admit_mask != ~0u && (vc_gfs_hash_(key ^ vc_gfs_now_ns()) & g->admit_mask) == 0) {
				uint64_t t = VC_GFS_ADD64(&g->ctl->hint_tail, 1);
				VC_GFS_STR(&g->hints[t & g->hint_mask], key + 1);
			}
			return 0;
		}
	}
	/* The host pins the page in the engine (loading it into the GPU tier
	 * when it is not cached) and says where it is. */
	struct vc_gfs_req a;
	int64_t r = vc_gfs_rpc_(g, VC_GFS_OP_GET, (uint32_t)fd, idx, 0, flags, &a);
	if (r < 0)
		return r;
	if (((idx + 1) << g->page_shift) <= dlen) /* cached now: ask again next time */
		VC_GFS_OR32((uint32_t *)(uintptr_t)VC_GFS_LDD(&f->res) + idx / 32, 1u << (idx % 32));
	*addr = a.addr;
	*id = a.id;
	uint32_t rf = a.rflags;
	x = (rf & VC_GFS_R_CACHE) ? vc_gfs_tab_insert_(g, key, a.addr, a.id, a.version) : -1;
	/* Granted for the table but no entry was free: kept for this call
	 * alone, and handed back as a table grant (the host counts those). */
	*ent = x >= 0 ? (uint32_t)x + 1 : (rf & VC_GFS_R_CACHE) ? VC_GFS_ENT_LOOSE : 0;
	return 0;
}

/* Leader: lets a grant go (the table's pin, or the engine pin itself). */
VC_GFS_FN int64_t vc_gfs_put_(const struct vc_gfs_ctx *g, uint32_t ent, uint32_t id)
{
	if (!ent && id == VC_GFS_ID_DIRECT)
		return 0;
	if (ent && ent != VC_GFS_ENT_LOOSE) {
		VC_GFS_SUB32(&g->tab[ent - 1].st, 1);
		return 0;
	}
	return vc_gfs_unpin_(g, &id, 1, ent ? VC_GFS_R_CACHE : 0);
}

/* All lanes: copies n bytes, 16 at a time where all three allow it. */
VC_GFS_FN void vc_gfs_copy_(struct vc_gfs_warp w, void *dst, const void *src, uint64_t n)
{
	unsigned char *d = (unsigned char *)dst;
	const unsigned char *s = (const unsigned char *)src;
#ifdef __CUDACC__
	if ((((uintptr_t)d | (uintptr_t)s | n) & 15) == 0) {
		for (uint64_t i = (uint64_t)w.rank * 16; i < n; i += (uint64_t)w.n * 16)
			*(uint4 *)(d + i) = *(const uint4 *)(s + i);
		return;
	}
	for (uint64_t i = w.rank; i < n; i += w.n)
		d[i] = s[i];
#else
	(void)w;
	memcpy(d, s, n);
#endif
}

/* ---- the API: called by every active lane of a warp, same arguments ------- */

/* Opens `path` (host-side path, NUL-terminated, shorter than 1024 bytes)
 * with VC_GO_* flags: the fd (shared by every opener of the path), or
 * -errno (-ENOENT, -EACCES, -EMFILE past VC_GFS_MAX_FILES, ...). */
VC_GFS_FN int vc_gopen(const struct vc_gfs_ctx *g, const char *path, int flags)
{
	struct vc_gfs_warp w = vc_gfs_warp_self();
	int64_t r = 0;
	if (VC_GFS_LEADER(w)) {
		uint64_t t0 = vc_gfs_now_ns(), t, n = 0;
		struct vc_gfs_req *s = NULL;
		while (n < 1024 && path[n])
			n++;
		if (n == 0 || n >= 1024)
			r = n ? -ENAMETOOLONG : -ENOENT;
		else if (vc_gfs_broken_(g))
			r = -EIO;
		else if (!(s = vc_gfs_claim_(g, &t, t0)))
			r = vc_gfs_timeout_(g);
		if (r == 0) {
			unsigned char *d = g->data + (t & g->ring_mask) * (uint64_t)VC_GFS_SLOT_DATA;
			for (uint64_t i = 0; i <= n; i++)
				d[i] = (unsigned char)path[i];
			vc_gfs_fill_(s, VC_GFS_OP_OPEN, 0, 0, n, (uint32_t)flags);
			r = vc_gfs_post_(g, s, t, 1, t0);
		}
		if (r == 0) {
			r = (int64_t)VC_GFS_LD((uint64_t *)&s->result);
			if (r >= 0 && r < VC_GFS_MAX_FILES) {
				struct vc_gfs_file *f = &g->files[r];
				VC_GFS_STD(&f->base, VC_GFS_LD(&s->base));
				VC_GFS_STD(&f->size, VC_GFS_LD(&s->size));
				VC_GFS_STD(&f->version, (uint32_t)VC_GFS_LD(&s->version));
				VC_GFS_STD(&f->direct, VC_GFS_LD(&s->addr));
				VC_GFS_STD(&f->res, VC_GFS_LD(&s->res));
				VC_GFS_STD(&f->dlen, VC_GFS_LD(&s->dlen));
				VC_GFS_STD(&f->flags, (uint32_t)VC_GFS_LD(&s->flags) | VC_GFS_FD_OPEN);
			}
			vc_gfs_release_slot_(g, t);
		}
	}
	return (int)VC_GFS_BCAST(w, (long long)r);
}

/* The file's size as this context knows it. */
VC_GFS_FN int64_t vc_gfsize(const struct vc_gfs_ctx *g, int fd)
{
	return vc_gfs_fd_ok_(g, fd) ? (int64_t)VC_GFS_LDD(&g->files[fd].size) : -EBADF;
}

/* Reads up to len bytes at off into buf (any memory the warp can write):
 * the count (short at the end of the file, 0 past it), or -errno. Every
 * page is read where the cache holds it: in the GPU tier at HBM speed, in
 * the host tier over PCIe; a page not cached is loaded into the GPU tier
 * first. */
VC_GFS_FN int64_t vc_gread(const struct vc_gfs_ctx *g, int fd, uint64_t off, uint64_t len,
			   void *buf)
{
	struct vc_gfs_warp w = vc_gfs_warp_self();
	vc_gfs_revoke_help(g, w); /* the host may wait for entries */
	if (!vc_gfs_fd_ok_(g, fd))
		return -EBADF;
	uint64_t size = VC_GFS_LDD(&g->files[fd].size);
	if (off >= size)
		return 0;
	if (len > size - off)
		len = size - off;
	const uint64_t psz = 1ull << g->page_shift;
	uint64_t done = 0;
	while (done < len) {
		uint64_t pos = off + done, in = pos & (psz - 1);
		uint64_t k = psz - in < len - done ? psz - in : len - done;
		int64_t r = 0;
		unsigned long long addr = 0;
		uint32_t ent = 0, id = 0;
		if (VC_GFS_LEADER(w)) {
			uint64_t a = 0;
			r = vc_gfs_get_(g, fd, pos >> g->page_shift, 0, &a, &ent, &id);
			addr = a;
		}
		r = (int64_t)VC_GFS_BCAST(w, (long long)r);
		if (r < 0)
			return done ? (int64_t)done : r;
		addr = VC_GFS_BCAST(w, addr);
		vc_gfs_copy_(w, (unsigned char *)buf + done, (const unsigned char *)(uintptr_t)addr + in, k);
		VC_GFS_SYNCWARP(w); /* every lane's copy is done before the pin goes */
		if (VC_GFS_LEADER(w))
			r = vc_gfs_put_(g, ent, id);
		r = (int64_t)VC_GFS_BCAST(w, (long long)r);
		if (r < 0)
			return r;
		done += k;
	}
	return (int64_t)done;
}

/* Writes len bytes at off, inside the file (extend it with vc_gftruncate
 * first: -EFBIG otherwise): the count or -errno (-EBADF on a read-only
 * fd). Through the host: each piece of up to VC_GFS_SLOT_DATA bytes is
 * staged in its request's data area and written with vc_volume_write, so
 * CPU readers see it when the call returns; the pages' table entries are
 * revoked first (waiting, within the timeout, for other warps' reads). */
VC_GFS_FN int64_t vc_gwrite(const struct vc_gfs_ctx *g, int fd, uint64_t off, uint64_t len,
			    const void *buf)
{
	struct vc_gfs_warp w = vc_gfs_warp_self();
	vc_gfs_revoke_help(g, w); /* the host may wait for entries */
	if (!vc_gfs_fd_ok_(g, fd))
		return -EBADF;
	if (!(VC_GFS_LDD(&g->files[fd].flags) & VC_GO_RDWR))
		return -EBADF;
	uint64_t size = VC_GFS_LDD(&g->files[fd].size);
	if (off > size || len > size - off)
		return -EFBIG;
	uint64_t done = 0;
	while (done < len) {
		uint64_t k = len - done < VC_GFS_SLOT_DATA ? len - done : VC_GFS_SLOT_DATA;
		uint64_t pos = off + done, t0 = vc_gfs_now_ns();
		int64_t r = 0;
		unsigned long long t = 0, sp = 0;
		uint32_t ids[VC_GFS_IDS], n = 0;
		if (VC_GFS_LEADER(w)) {
			/* The piece's pages leave the table first (engine pins the
			 * host's write would wait for), waiting for reads in flight;
			 * their pins go back on the unpin ring, never behind the
			 * write itself (a write queued behind another that waits
			 * for them would wait for ever). */
			uint64_t base = VC_GFS_LDD(&g->files[fd].base);
			if (vc_gfs_broken_(g))
				r = -EIO;
			for (uint64_t p = pos >> g->page_shift; p <= (pos + k - 1) >> g->page_shift && r == 0; p++) {
				uint32_t h = vc_gfs_hash_(base | p);
				for (uint32_t i = 0; i < VC_GFS_PROBES && r == 0; i++) {
					uint32_t x = (h + i) & g->tab_mask;
					struct vc_gfs_ent *e = &g->tab[x];
					uint32_t st = (uint32_t)VC_GFS_LDD(&e->st);
					if (st == 0)
						break;
					if (!(st & VC_GFS_E_VALID) || VC_GFS_LDD(&e->key) != (base | p))
						continue;
					if (!vc_gfs_tab_revoke_(g, x, &ids[n])) {
						if (vc_gfs_now_ns() - t0 > g->timeout_ns)
							r = vc_gfs_timeout_(g);
						vc_gfs_revoke_help(g, vc_gfs_solo_());
						VC_GFS_PAUSE();
						i--; /* pinned (a read in flight, a mapping) or changing */
						continue;
					}
					if (++n == VC_GFS_IDS) {
						r = vc_gfs_unpin_(g, ids, n, VC_GFS_R_CACHE);
						n = 0;
					}
				}
			}
			if (r == 0 && n)
				r = vc_gfs_unpin_(g, ids, n, VC_GFS_R_CACHE);
			struct vc_gfs_req *s = NULL;
			if (r == 0 && !(s = vc_gfs_claim_(g, (uint64_t *)&t, t0)))
				r = vc_gfs_timeout_(g);
			sp = (unsigned long long)(uintptr_t)s;
		}
		r = (int64_t)VC_GFS_BCAST(w, (long long)r);
		if (r < 0)
			return done ? (int64_t)done : r;
		t = VC_GFS_BCAST(w, t);
		vc_gfs_copy_(w, g->data + (t & g->ring_mask) * (uint64_t)VC_GFS_SLOT_DATA,
			     (const unsigned char *)buf + done, k);
		VC_GFS_SYNCWARP(w);
		if (VC_GFS_LEADER(w)) {
			struct vc_gfs_req *s = (struct vc_gfs_req *)(uintptr_t)sp;
			vc_gfs_fill_(s, VC_GFS_OP_WRITE, (uint32_t)fd, pos, k, 0);
			r = vc_gfs_post_(g, s, t, 1, t0);
			if (r == 0) {
				r = (int64_t)VC_GFS_LD((uint64_t *)&s->result);
				vc_gfs_release_slot_(g, t);
			}
		}
		r = (int64_t)VC_GFS_BCAST(w, (long long)r);
		if (r < 0)
			return done ? (int64_t)done : r;
		done += k;
	}
	return (int64_t)done;
}

/* Maps [off, off + len) read-only, up to the end of off's page (pages of
 * the cache are not contiguous): the bytes mapped (> 0) and m, or -errno
 * (-ENXIO at or past the end, -ENOTSUP for VC_GPROT_WRITE). The page stays
 * pinned (neither moved nor evicted) until vc_gmunmap(m). It is pinned in
 * the host tier (read over PCIe): the GPU tier's log evicts whole segments
 * from its tail, where a long pin would stall every miss behind it. */
VC_GFS_FN int64_t vc_gmmap(const struct vc_gfs_ctx *g, int fd, uint64_t off, uint64_t len,
			   int prot, struct vc_gmap *m)
{
	struct vc_gfs_warp w = vc_gfs_warp_self();
	vc_gfs_revoke_help(g, w); /* the host may wait for entries */
	if (!vc_gfs_fd_ok_(g, fd))
		return -EBADF;
	if (prot & VC_GPROT_WRITE)
		return -ENOTSUP;
	uint64_t size = VC_GFS_LDD(&g->files[fd].size);
	if (off >= size || len == 0)
		return -ENXIO;
	const uint64_t psz = 1ull << g->page_shift, in = off & (psz - 1);
	if (len > size - off)
		len = size - off;
	if (len > psz - in)
		len = psz - in;
	int64_t r = 0;
	unsigned long long addr = 0;
	uint32_t ent = 0, id = 0;
	if (VC_GFS_LEADER(w)) {
		uint64_t a = 0;
		r = vc_gfs_get_(g, fd, off >> g->page_shift, VC_GFS_F_MAP, &a, &ent, &id);
		addr = a;
	}
	r = (int64_t)VC_GFS_BCAST(w, (long long)r);
	if (r < 0)
		return r;
	m->ptr = (const unsigned char *)(uintptr_t)VC_GFS_BCAST(w, addr) + in;
	m->len = len;
	m->ent = (uint32_t)VC_GFS_BCAST(w, ent);
	m->id = (uint32_t)VC_GFS_BCAST(w, id);
	return (int64_t)len;
}

VC_GFS_FN int vc_gmunmap(const struct vc_gfs_ctx *g, struct vc_gmap *m)
{
	struct vc_gfs_warp w = vc_gfs_warp_self();
	VC_GFS_SYNCWARP(w);
	int64_t r = 0;
	if (VC_GFS_LEADER(w) && m->ptr)
		r = vc_gfs_put_(g, m->ent, m->id);
	m->ptr = 0;
	return (int)VC_GFS_BCAST(w, (long long)r);
}

/* Simple calls through the host. */
VC_GFS_FN int64_t vc_gfs_simple_(const struct vc_gfs_ctx *g, uint32_t op, int fd, uint64_t arg)
{
	struct vc_gfs_warp w = vc_gfs_warp_self();
	if (!vc_gfs_fd_ok_(g, fd))
		return -EBADF;
	int64_t r = 0;
	if (VC_GFS_LEADER(w)) {
		struct vc_gfs_req a;
		r = vc_gfs_rpc_(g, op, (uint32_t)fd, arg, 0, 0, &a);
		if (r >= 0 && op == VC_GFS_OP_TRUNC) {
			VC_GFS_STD(&g->files[fd].size, a.size);
			VC_GFS_STD(&g->files[fd].dlen, a.dlen);
		}
		if (r == 0 && op == VC_GFS_OP_CLOSE) /* the last close: r = opens left */
			VC_GFS_STD(&g->files[fd].flags, 0u);
	}
	return (int64_t)VC_GFS_BCAST(w, (long long)r);
}

/* Makes the fd's writes durable (vc_volume_flush): 0 or -errno. */
VC_GFS_FN int vc_gfsync(const struct vc_gfs_ctx *g, int fd)
{
	return (int)vc_gfs_simple_(g, VC_GFS_OP_FSYNC, fd, 0);
}

/* Sets the file's size (writes back and drops what a shrink cuts off):
 * 0 or -errno (-EBADF read-only). No other call may use the fd meanwhile. */
VC_GFS_FN int vc_gftruncate(const struct vc_gfs_ctx *g, int fd, uint64_t size)
{
	if (vc_gfs_fd_ok_(g, fd) && !(VC_GFS_LDD(&g->files[fd].flags) & VC_GO_RDWR))
		return -EBADF;
	return (int)vc_gfs_simple_(g, VC_GFS_OP_TRUNC, fd, size);
}

/* Closes one open of fd (each vc_gopen counts one): the file's writes are
 * durable when it returns (close-to-open). 0 or -errno. */
VC_GFS_FN int vc_gclose(const struct vc_gfs_ctx *g, int fd)
{
	int64_t r = vc_gfs_simple_(g, VC_GFS_OP_CLOSE, fd, 0);
	return r < 0 ? (int)r : 0;
}

#endif
