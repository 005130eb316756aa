/* Device interface: what the engine needs from a GPU, with two backends.
 *
 *   cuda  device/cuda/   the CUDA runtime; every call checked and mapped to -VC_E*
 *   emu   device/emu/    device memory emulated in host memory, batches run
 *                        later on a worker thread (the same asynchrony as a stream)
 *
 * The engine runs the same code over both. Addresses are "device-visible"
 * 64-bit values: for host memory from host_alloc, the address the GPU uses
 * to reach it (zero-copy, mapped pinned memory); for device memory, the
 * device pointer. A move batch lists page copies and swaps between any two
 * such addresses, so one batch may carry H2D, D2H and exchanges together.
 */
#ifndef VC_DEVICE_H
#define VC_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vc_device;
struct vc_dq;

enum vc_move_op {
	VC_MOVE_COPY = 0, /* dst <- src */
	VC_MOVE_SWAP = 1, /* exchange the pages at src and dst */
};

/* A move's op word: the op in bits 0..3, and at most one cipher flag
 * (device/xts.h's AES-256-XTS under the batch's or queue's key), which
 * applies to COPY only:
 *   VC_MOVE_ENCRYPT  dst <- XTS-encrypt(src)
 *   VC_MOVE_DECRYPT  dst <- XTS-decrypt(src)
 * The page is min(page_size, 4 KiB)-byte data units; unit k of the page
 * has tweak `tweak + k` (dm-crypt numbers a bio's sectors so), which the
 * engine makes the page's first unit number, so that ciphertext is bound
 * to the page and not to the slot it sits in. The plaintext exists only
 * at the host side of the move, the cipher runs in the move itself: no
 * pass over device memory and no plaintext staged there. */
#define VC_MOVE_OP_MASK 0x0fu
#define VC_MOVE_ENCRYPT 0x10u
#define VC_MOVE_DECRYPT 0x20u
#define VC_MOVE_CIPHER (VC_MOVE_ENCRYPT | VC_MOVE_DECRYPT)
/* VC_MOVE_FP: the move also computes the lanes hash (device/fp_algo.h,
 * VC_FP_LANES) of the bytes it copies, from the registers they pass
 * through, and writes the 16-byte digest to host memory beside the move:
 * a launched batch's fp[i] (struct vc_dbatch), a queue ring's fp slot of
 * the move's ticket (device/queue.h). A COPY of one piece (a page of at
 * most 4 KiB), plain or VC_MOVE_ENCRYPT: the digest is always of the
 * plaintext (an encrypting move's source, hashed before the cipher), so
 * dedup's fingerprints do not depend on the key or the tweak (the blocks
 * are deduplicated before encryption, docs/DEDUP.md). Not with
 * VC_MOVE_DECRYPT or SWAP. Cost on CUDA: four 64-bit multiplies per 16
 * bytes per lane, five shuffle-adds and one 16-byte store per move (the
 * cipher kernels' split pieces: a shared-memory sum a piece). */
#define VC_MOVE_FP 0x40u

/* One page move. 32 bytes; trivially copyable, read by kernels in place. */
struct vc_move {
	uint64_t src;
	uint64_t dst;
	uint32_t op;    /* enum vc_move_op | VC_MOVE_ENCRYPT or VC_MOVE_DECRYPT */
	uint32_t _pad;
	uint64_t tweak; /* the first data unit's, with a cipher flag */
};

struct vc_xts_key;

/* Checks a move's op word against the key there is (NULL: none): a known
 * op, at most one cipher flag, only on a COPY, and only with a key;
 * VC_MOVE_FP only on a plain or encrypting COPY. 0 or -EINVAL with a
 * message. (Backends check VC_MOVE_FP's page size.) */
int vc_move_check(const struct vc_move *m, const struct vc_xts_key *key);

/* A device batch. The batcher owns `moves` (allocated with host_alloc, so
 * the GPU reads it in place) and fills n and page_size, and key where its
 * moves may carry a cipher flag (the key stays the caller's, unchanged,
 * until the batch completes); the backend owns the rest. Invariant: no two
 * moves of batches in flight touch the same page. */
struct vc_fp_digest;

struct vc_dbatch {
	struct vc_move *moves;
	uint64_t moves_dev; /* device-visible address of moves */
	/* cap digests (host_alloc'ed, 16-byte aligned), or NULL: fp[i] gets
	 * move i's fingerprint when it carries VC_MOVE_FP (a batch with such
	 * a move needs them, and page_size <= 4 KiB). */
	struct vc_fp_digest *fp;
	uint64_t fp_dev;
	uint32_t cap;
	uint32_t n;
	uint32_t page_size;
	const struct vc_xts_key *key; /* NULL: no cipher moves */
	/* Copy engines only, set by the owner before each submit: the
	 * batch's moves are plain COPY and SWAP (no cipher, no VC_MOVE_FP;
	 * -EINVAL otherwise) and the backend moves them without running
	 * anything on the device's SMs (CUDA: cudaMemcpyBatchAsync of the
	 * contiguous runs, a SWAP as three ordered copies through a scratch
	 * page of device memory set up at batch_init). For callers whose
	 * moves must make progress while other programs' kernels hold every
	 * SM (GPUfs, docs/GPUFS.md). */
	bool dma;
	void *priv; /* backend state, set by batch_init */
};

/* A log-store cleaning job (BAG's GPU garbage collector), run on the device.
 *
 * The store is nseg segments of per_seg slots of page_size bytes at `base`;
 * global slot g = seg * per_seg + slot lives at base + g * page_size. Two
 * per-slot tables live in mapped pinned host memory (host_alloc), so the
 * host keeps them current on every append at no transfer cost and the
 * device reads and writes them in place:
 *   key[g]    the owner of slot g (the engine's page id), VC_GC_DEAD if garbage
 *   stamp[g]  the owner's LRU stamp: smaller is older
 * and, optional, the inverse map, also mapped (where_dev 0: none):
 *   where[o]  the global slot of owner o, for o < nowners
 * The job takes every live slot of the source segments (src[0..nsrc)),
 * orders them by stamp, oldest first (stable: equal stamps keep source
 * order, src[0] first, then slot order), and moves rank r to destination
 * position dst_first + r, where position q is slot q % per_seg of segment
 * dst[q / per_seg]. For every moved page it copies the data, writes key
 * and stamp of the destination slot and, with a where table, where[owner]:
 * the index update is the device's, with no host work per page. Source
 * slots keep their key and stamp: the caller releases the source segments
 * (killing their keys on the host costs no PCIe traffic). `moved` returns
 * the number of pages moved.
 *
 * The caller states what its own bookkeeping knows, so that the device
 * needs no round trip to the host mid-job: `live`, the number of live
 * source slots, and [stamp_min, stamp_max], bounds on their stamps (the
 * tighter, the fewer sort passes). Both are verified on the device before
 * anything moves: a job whose statement is wrong returns -EINVAL and
 * changes nothing.
 *
 * Preconditions (the caller's, not checked on the device): destination
 * slots are free and outside the sources; no batch in flight touches a
 * source or destination page; owners are below nowners. Cost: O(live
 * pages) device work in a few launches (4 B of PCIe write per page for
 * where[], random), plus O(nsrc + ndst) host work; synchronous: the data
 * and the tables are final on return. */
#define VC_GC_DEAD UINT32_MAX
struct vc_gc_job {
	uint64_t base;
	uint32_t page_size, per_seg;
	uint32_t *key;     /* host view of key[] (host_alloc) */
	uint64_t key_dev;  /* its device-visible address */
	uint64_t *stamp;   /* host view of stamp[] (host_alloc) */
	uint64_t stamp_dev;
	uint32_t *where;   /* host view of where[] (host_alloc), or NULL */
	uint64_t where_dev;
	uint32_t nowners;  /* where[] entries */
	const uint32_t *src; /* host arrays of segment numbers */
	const uint32_t *dst;
	uint32_t nsrc, ndst;
	uint32_t dst_first; /* first free slot of dst[0] */
	uint32_t live;      /* live source slots, as the caller counts them */
	uint64_t stamp_min, stamp_max; /* bounds on their stamps (live > 0) */
	uint32_t moved;     /* out */
};

/* Bounds of one job: source positions (nsrc * per_seg) times 4 KiB pieces
 * per page (1 up to 4 KiB pages); destination segments. */
#define VC_GC_MAX_SLOTS (1u << 30)

/* Checks what a backend can check of a job before touching anything:
 * page_size a power of two in 512 B .. 2 MiB, base 16-byte aligned,
 * per_seg >= 1, the bounds above, the arrays present, dst_first <
 * per_seg (0 without destinations), live <= source slots, stamp_min <=
 * stamp_max when live > 0, and a where table with its size: 0 or -EINVAL.
 * -ENOSPC when `live` pages do not fit the destinations. Either way
 * nothing has changed. */
int vc_gc_check(const struct vc_gc_job *job);

struct vc_fp_job;
struct vc_cmp_job;

struct vc_device_ops {
	const char *name;
	void (*close)(struct vc_device *d);

	/* Pinned host memory the device can address; *dev_addr is its
	 * device-visible address. Alignment: at least 4096 bytes. */
	int (*host_alloc)(struct vc_device *d, size_t len, void **host, uint64_t *dev_addr);
	void (*host_free)(struct vc_device *d, void *host);
	/* Pins len bytes of a read-only mapping at host (a file's pages in
	 * the OS page cache: they stay resident until unregistered) and makes
	 * them device-readable at *dev_addr. -ENOTSUP where the device cannot
	 * (CUDA: no read-only registration). Cost: the pages are faulted in
	 * and pinned, about 0.03 s/GiB on the H100 host for cached pages. */
	int (*host_register)(struct vc_device *d, void *host, size_t len, uint64_t *dev_addr);
	void (*host_unregister)(struct vc_device *d, void *host);
	/* Device memory, aligned to at least 4096 bytes. */
	int (*mem_alloc)(struct vc_device *d, size_t len, uint64_t *dev_addr);
	void (*mem_free)(struct vc_device *d, uint64_t dev_addr);

	/* Backend state of one reusable batch (events, flags). */
	int (*batch_init)(struct vc_device *d, struct vc_dbatch *b);
	void (*batch_fini)(struct vc_device *d, struct vc_dbatch *b);
	/* Starts the batch; returns before it completes. */
	int (*batch_submit)(struct vc_device *d, struct vc_dbatch *b);
	/* Blocks until a submitted batch completes; returns its status. May be
	 * called by several threads at once, and again after completion. */
	int (*batch_wait)(struct vc_device *d, struct vc_dbatch *b);

	/* Synchronous copy between device-visible addresses, for bulk data,
	 * tests and benchmarks. */
	int (*memcpy_sync)(struct vc_device *d, uint64_t dst, uint64_t src, size_t len);

	/* Runs a cleaning job (struct vc_gc_job) to completion. */
	int (*gc_run)(struct vc_device *d, struct vc_gc_job *job);

	/* Fingerprints a job's blocks to completion (device/fp.h, which says
	 * what the job holds; callers use vc_fp_run, which checks it first).
	 * NULL: the backend has none. */
	int (*fp_run)(struct vc_device *d, const struct vc_fp_job *job);

	/* Starts a compare of a job's block pairs on the calling thread's
	 * stream, and waits for every compare the calling thread started
	 * (device/cmp.h; callers use vc_cmp_start and vc_cmp_wait, which
	 * check the job first). NULL: the backend has none. */
	int (*cmp_start)(struct vc_device *d, const struct vc_cmp_job *job);
	int (*cmp_wait)(struct vc_device *d);

	/* Device queues (device/queue.h): sets q->ops, q->lanes, q->spin_ns,
	 * q->nrings where it is 0, and q->priv. NULL: the backend has none. */
	int (*dq_init)(struct vc_device *d, struct vc_dq *q);

	/* Device memory that shrinks and grows (the GPU tier's chunks, BAG
	 * section 3.3.5): an address range reserved once, whose parts are
	 * backed and given back at run time while the rest keeps working.
	 * Addresses and lengths are multiples of d->map_granularity.
	 *   mem_reserve    the range, unbacked (touching it is a fault)
	 *   mem_map        backs [addr, addr + len): -ENOMEM, nothing mapped,
	 *                  when the device has no room
	 *   mem_unmap      overwrites the part with zeros (no cached byte
	 *                  reaches the memory's next owner), then gives it
	 *                  back to the device; nothing may be in flight on it
	 *   mem_unreserve  the whole range, every part unmapped first
	 * Costs: a map or unmap is a few driver calls (tens of us) plus, for
	 * unmap, a device memset of len; both pause the device queues. */
	int (*mem_reserve)(struct vc_device *d, size_t len, uint64_t *dev_addr);
	void (*mem_unreserve)(struct vc_device *d, uint64_t dev_addr, size_t len);
	int (*mem_map)(struct vc_device *d, uint64_t dev_addr, size_t len);
	int (*mem_unmap)(struct vc_device *d, uint64_t dev_addr, size_t len);
	/* mem_unmap of n parts at once: one pause of the device queues and
	 * one overwrite pass for them all (a shrink gives many chunks back).
	 * Returns the first error; every part is attempted. */
	int (*mem_unmap_n)(struct vc_device *d, const uint64_t *dev_addr, const uint64_t *len,
			   uint32_t n);
	/* The device's free and total memory now, every program's use
	 * counted (cudaMemGetInfo). */
	int (*mem_info)(struct vc_device *d, uint64_t *free_bytes, uint64_t *total_bytes);
	/* The device's UUID (CUDA's cuDeviceGetUuid; the emulated device's
	 * is fixed): what a program asking for memory back names. */
	int (*uuid)(struct vc_device *d, unsigned char out[16]);

	/* Several GPUs (docs/MULTIGPU.md). Callers use the vc_device_*
	 * wrappers below, which handle the ops' absence.
	 *
	 * peer_enable: moves submitted to d may from now on read and write
	 * device memory of `peer` (P2P: CUDA peer access both ways, and every
	 * part of peer's chunked memory, mapped now or later, made accessible
	 * to d, and d's to peer). Where both are the same GPU (two handles on
	 * one ordinal), 0 at once. -ENOTSUP (nothing changed) where the
	 * devices cannot reach each other (no P2P path) or belong to
	 * different backends. NULL: the backend's device memory is host
	 * memory (emu), reachable by any device of the backend. */
	int (*peer_enable)(struct vc_device *d, struct vc_device *peer);
	/* Test hook: the device fails from now on, as a GPU whose context
	 * died does: batches in flight and later, queue moves, cleaning,
	 * fingerprint and compare jobs, copies and maps all return
	 * -VC_EDEVICE (waiters are released, never left hanging). CUDA: a
	 * kernel that traps is launched on the device, so the failure is the
	 * driver's own sticky error, seen by every later call on that GPU's
	 * context (other handles on the same ordinal fail with it; other
	 * GPUs go on). emu: a flag of this handle that every entry point
	 * checks; what frees, unmaps and closes keeps working there. */
	int (*fault)(struct vc_device *d);
};

struct vc_device {
	const struct vc_device_ops *ops;
	char desc[128]; /* "NVIDIA H200 (sm_90, 132 SMs)" or "emulated" */
	uint64_t map_granularity; /* of mem_reserve/map/unmap: a power of two */
	int ordinal; /* CUDA's device number; emu: the number it was opened as */
};

/* Opens a backend: kind is enum vc_device_kind. AUTO tries CUDA, then emu. */
int vc_device_open(int kind, int ordinal, struct vc_device **out);
void vc_device_close(struct vc_device *d);

/* Devices of a kind the process can open: CUDA's device count (0 when
 * none is usable or CUDA is not built), VC_EMU_DEVICES for emu, and for
 * AUTO the CUDA count, or emu's when there is no GPU. */
#define VC_EMU_DEVICES 4
int vc_device_count(int kind);
/* Whether a and b are handles on one physical device (two logical parts
 * of one GPU): same backend and same ordinal (emulated devices of
 * different ordinals are different devices, as GPUs are). */
bool vc_device_same(const struct vc_device *a, const struct vc_device *b);
/* ops->peer_enable where the backend has it, else 0 for two devices of
 * the same backend; -ENOTSUP across backends. */
int vc_device_peer_enable(struct vc_device *d, struct vc_device *peer);
/* ops->fault; -ENOTSUP where the backend has none. */
int vc_device_fault(struct vc_device *d);

/* Backends. vc_cuda_open returns -VC_ENOTBUILT when CUDA was not compiled
 * in and -VC_ENODEVICE when no device is usable. vc_emu_open opens
 * emulated device `ordinal` (0 .. VC_EMU_DEVICES - 1, checked by
 * vc_device_open): its own memory, worker and UUID. vc_cuda_count is
 * cudaGetDeviceCount, 0 where that fails or CUDA is not built. */
int vc_emu_open(int ordinal, struct vc_device **out);
int vc_cuda_open(int ordinal, struct vc_device **out);
int vc_cuda_count(void);

#endif
