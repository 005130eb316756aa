/* vramcache: GPU memory as a cache tier for file and block I/O.
 *
 * Public C API of libvramcache. Every function that can fail returns 0 (or a
 * byte count) on success and a negative code on failure: -errno, or -VC_E*
 * from the reserved range below. No function touches the global errno. After
 * a failure, vc_last_error() gives a message for the calling thread.
 *
 * Thread safety: vc_read, vc_write, vc_flush, vc_drop, vc_prefetch and
 * vc_get_stats may be called from many threads on one cache at once.
 * vc_open and vc_close may not race with other calls on the same cache.
 */
#ifndef VRAMCACHE_H
#define VRAMCACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VC_VERSION_MAJOR 0
#define VC_VERSION_MINOR 1

/* Our own error codes live in [VC_E_FIRST, VC_E_LAST], far above any errno.
 * Functions return them negated, like errno values. */
#define VC_E_FIRST 16384
#define VC_EDEVICE (VC_E_FIRST + 0)  /* the GPU (or its driver) failed */
#define VC_ENODEVICE (VC_E_FIRST + 1) /* a CUDA device was asked for, none is usable */
#define VC_ECONFIG (VC_E_FIRST + 2)  /* the config struct is malformed */
#define VC_ENOTBUILT (VC_E_FIRST + 3) /* the backend was not compiled in */
#define VC_E_LAST (VC_E_FIRST + 3)

/* Message for any code this library returns (negative or positive). */
const char *vc_strerror(int err);
/* Message for the last failure in the calling thread; "" if none. */
const char *vc_last_error(void);

enum vc_device_kind {
	VC_DEVICE_AUTO = 0, /* CUDA when a device is usable, else emulated */
	VC_DEVICE_EMU = 1,  /* device memory emulated in host memory */
	VC_DEVICE_CUDA = 2, /* the CUDA runtime; fails with -VC_ENODEVICE without a GPU */
};

/* "auto", "cuda" or "emu" -> enum vc_device_kind; -EINVAL otherwise. */
int vc_device_parse(const char *name);

enum vc_write_mode {
	VC_WRITE_THROUGH = 0, /* a write returns after the backing store has it */
	VC_WRITE_BACK = 1,    /* dirty pages are written on eviction and on vc_flush */
};

enum vc_tier {
	VC_TIER_HOST = 0, /* pinned host memory, mapped for the GPU */
	VC_TIER_GPU = 1,  /* device memory */
	VC_TIER_COUNT = 2,
};

/* Open flags. */
#define VC_OPEN_READONLY (1u << 0) /* writes fail with -EROFS */

/* How the GPU tier's log cleaner chooses segments (vc_config.gc_policy). */
enum vc_gc_policy {
	VC_GC_OLDEST = 0,       /* BAG: the oldest segments first */
	VC_GC_COST_BENEFIT = 1, /* RAMCloud: (1 - u) * age / (1 + u), u = live share */
	VC_GC_OFF = 2,          /* never clean: space comes back by tail eviction only */
};

/* A read that hits the GPU tier (vc_config.gpu_hits). */
enum vc_gpu_hits {
	VC_GPU_HITS_SERVE = 0, /* copied over PCIe to the caller; the page stays in the GPU
				  tier (one transfer, no host slot, no victim) */
	VC_GPU_HITS_SWAP = 1,  /* GRAM: the page moves up to the host tier, the host tier's
				  victim takes its GPU slot (two transfers) */
};

/* Encryption of the pages the GPU tier holds (vc_config.encrypt; BAG
 * section 3.5). docs/ENCRYPTION.md says what it protects and where key
 * bytes live. */
enum vc_encrypt {
	VC_ENCRYPT_OFF = 0,
	VC_ENCRYPT_XTS = 1, /* AES-256-XTS (dm-crypt's aes-xts-plain64), the tweak naming the
			       page: no plaintext of cached data rests in GPU memory */
	VC_ENCRYPT_XTS_GMAC = 2, /* XTS as above, and every page the GPU tier holds
				    authenticated: an AES-256-GMAC tag of its content
				    (fresh nonce per move to the GPU) kept in host memory
				    and checked on every move back. A page changed in GPU
				    memory is never returned: the read fails with -EIO
				    and the page is dropped (vc_stats.integrity_*), so a
				    read after that comes from the backing store */
};

/* Versioned configuration. `size` and `version` come first; fields are only
 * ever added at the end. Always start from vc_config_init(). */
#define VC_CONFIG_VERSION 8
struct vc_config {
	uint32_t size;    /* sizeof(struct vc_config) as the caller compiled it */
	uint32_t version; /* VC_CONFIG_VERSION */

	/* Backing store: a path (regular file or block device), or, when path
	 * is NULL, an open fd that the cache does not close. */
	const char *backing_path;
	int backing_fd;
	uint32_t flags; /* VC_OPEN_* */

	uint32_t page_size;  /* power of two, 512 B .. 2 MiB; default 4096 */
	uint64_t host_bytes; /* host tier capacity; default 64 MiB */
	uint64_t gpu_bytes;  /* GPU tier capacity; 0 disables it; default 256 MiB */

	int device;         /* enum vc_device_kind */
	int device_ordinal; /* CUDA device number; default 0 */
	int write_mode;     /* enum vc_write_mode */

	uint32_t batch_pages;      /* a move batch closes at this size; default 256 */
	uint32_t batch_timeout_us; /* ... or this long after it opened; default 50 */
	const char *policy;        /* replacement policy: "s3fifo+lru" (NULL: S3-FIFO
				    * in the host tier, LRU in the GPU tier), "lru",
				    * "clock", "sieve", "s3fifo", "2q" or "arc" */

	/* Test and model knob: extra latency added to every backing read and
	 * write (nanoseconds), to emulate a slower device. Default 0. */
	uint64_t backing_latency_ns;

	/* Version 2: the GPU tier is a log of segments (BAG). Space comes back
	 * by evicting whole segments from the tail (dirty pages written back
	 * first) or by cleaning: live pages of fragmented segments move to
	 * the head, in LRU order, on the device. */
	uint32_t seg_bytes;      /* power of two >= page_size; 0 (default): 4 MiB, or
				    less so that the tier has at least 16 segments */
	int gc_policy;           /* enum vc_gc_policy; default VC_GC_COST_BENEFIT */
	uint32_t gc_segments;    /* segments per cleaning step: bounds a pause; default 4 */
	double gc_watermark;     /* reclaim when free segments fall below this share
				    (at least one segment is kept free); default 0.02:
				    free segments are capacity the tier does not use */
	double gc_fragmentation; /* clean rather than evict when dead slots exceed this
				    share of used ones; default 0.25 */
	double early_release;    /* once below the watermark, evict up to this share of
				    the GPU tier's live pages ahead of need; default 0.10 */

	/* Version 3: what a read that hits the GPU tier does, and how many
	 * host victims go down to the GPU tier together when a miss finds
	 * the host tier full (1 to 256; 0: 32). More per batch costs fewer
	 * device round trips per miss but leaves the host tier that many
	 * pages short of full; 1 is GRAM's exact one-for-one (as `vramcache
	 * sim` models it). */
	int gpu_hits; /* enum vc_gpu_hits; default VC_GPU_HITS_SERVE */
	uint32_t demote_batch;

	/* Version 4: the GPU tier's memory comes in chunks of this many bytes,
	 * each given back to the device and taken again whole (vc_gpu_shrink,
	 * vc_gpu_grow). A multiple of the segment size and of the device's
	 * mapping granularity (2 MiB on CUDA); 0 (default): 256 MiB, or less
	 * so that the tier has at least 4 chunks. Where the device cannot map
	 * by chunks (no CUDA virtual memory management) the tier is one
	 * allocation of fixed size. */
	uint64_t gpu_chunk_bytes;

	/* Version 5: encryption of the GPU tier (enum vc_encrypt; default
	 * off). The host tier holds plaintext, the GPU tier ciphertext only:
	 * pages are encrypted inside the move to the GPU and decrypted inside
	 * the move back. key_file: a file of exactly 64 raw bytes (two
	 * different AES-256 keys), owned by the user, mode 0600 or stricter;
	 * NULL (default): a random key per open, from the kernel's random
	 * source (the GPU tier does not outlive the cache, so nothing needs
	 * it later). Either way the key stays in locked host memory and is
	 * zeroed at close. */
	int encrypt;
	const char *key_file;

	/* Version 6: block deduplication in the GPU tier (DEDU; enum
	 * vc_dedup, default off; docs/DEDUP.md). A page going down is split
	 * into dedup_degree blocks (1, 2, 4 or 8; 0: blocks of 4 KiB, so 1
	 * at the default page size: the degree that costs the moves least,
	 * measured on the GPU machine, docs/DEDUP.md), each fingerprinted (dedup_algo, enum
	 * vc_dedup_algo) and,
	 * when an equal block is already stored (fingerprint match, then a
	 * byte compare), shared instead of stored again. Blocks (page size /
	 * degree) must be 512 B to 4 KiB.
	 * dedup_max_factor bounds the logical pages the GPU tier may hold:
	 * at most that many times its physical pages (1 to 64; 0: 8). Each
	 * logical page costs a page entry in host memory (about 100 + 12 x
	 * degree bytes), whether or not the data repeat that much. Each host
	 * page costs 40 bytes more (notes for its way down: at degree 1 its
	 * fingerprint, taken on the host as it is loaded, so that a
	 * duplicate goes down without moving; with VC_GPU_HITS_SWAP, 12 x
	 * degree more: the blocks it came up from, so that a page that comes
	 * up unwritten goes back by reference). */
	int dedup;
	uint32_t dedup_degree;
	int dedup_algo;
	uint32_t dedup_max_factor;

	/* Version 7: the GPU tier over several GPUs (docs/MULTIGPU.md).
	 * gpus: NULL (default) for one GPU, device_ordinal; else "all" (every
	 * device of the kind: CUDA's count, or VC_EMU_DEVICES emulated ones)
	 * or a list of parts "ORD[:WEIGHT],...", such as "0,1" or "0:2,1:1",
	 * at most VC_GPUS_MAX. Each part is a share of the GPU tier with its
	 * own log, cleaner, move queues and streams on device ORD; a device
	 * may hold several parts ("0,0": one GPU cut in two, for testing).
	 * gpu_bytes is the whole tier, split over the parts by WEIGHT
	 * (default 1 each; a positive number). A page's part is chosen by a
	 * stable hash of its page number over 64 KiB chunks, weighted by the
	 * parts' shares (rendezvous hashing), so adding or losing a part
	 * moves only that part's share. Not with dedup (one GPU only).
	 * gpu_dirty: whether dirty pages (write-back) may live in the GPU
	 * tier (enum vc_gpu_dirty). */
	const char *gpus;
	int gpu_dirty;

	/* Version 8: the dirty limit (write-back). Dirty pages never exceed
	 * this share of the host tier's pages: a write that would dirty one
	 * page more writes that page through to the store instead (and fails
	 * with the store's error if the store refuses it). So the host tier
	 * always holds pages that can leave without a write-back, and reads
	 * go on while a store refuses writes (a full file system): a
	 * write-back that only makes room and fails leaves its page dirty in
	 * the cache, and flushes report the store's error. 0.01 to 0.9; 0
	 * (default): 0.5.
	 * dirty_background_ratio: a thread of the cache writes dirty pages
	 * back, in batches, while they are more than this share of the host
	 * tier, so that writers below the limit need no store write of their
	 * own. 0 (default): half of dirty_ratio; dirty_ratio or more: no such
	 * thread (pages are written back when evicted or flushed). */
	double dirty_ratio;
	double dirty_background_ratio;
};

/* vc_config.gpu_dirty. A GPU that fails (a CUDA error on it) loses what it
 * held: clean pages are read again from the store, dirty ones are gone. */
enum vc_gpu_dirty {
	VC_GPU_DIRTY_AUTO = 0,  /* KEEP with one GPU, CLEAN with several parts */
	VC_GPU_DIRTY_KEEP = 1,  /* dirty pages go down as they are and are written back
				   when evicted from the GPU tier or flushed: a failed GPU
				   loses them (vc_stats.gpu_dirty_lost, reads of them then
				   return the store's older bytes). With background
				   write-back on, past half its mark they are written
				   back as they go down, as with CLEAN */
	VC_GPU_DIRTY_CLEAN = 2, /* a dirty page is written back as it goes down, so the
				   GPU tier holds clean pages only and a failed GPU loses
				   nothing acknowledged */
};

/* Parts of a GPU tier, at most. */
#define VC_GPUS_MAX 16

/* vc_config.dedup. */
enum vc_dedup {
	VC_DEDUP_OFF = 0,
	VC_DEDUP_ON = 1,       /* every volume, always */
	VC_DEDUP_ADAPTIVE = 2, /* per volume, on while a sampled estimate says it pays
				  (dedup factor >= ~1.15 and update ratio <= ~0.35),
				  off below ~1.05 or above ~0.5 */
};

/* vc_config.dedup_algo: the fingerprint (docs/DEDUP.md). The lanes hash
 * is computed by the move that brings a block down (no pass of its own);
 * MurmurHash3 and MD5 run as a separate device job after the move, for
 * the paper's experiments. (Before the lanes hash, 0 named MurmurHash3.) */
enum vc_dedup_algo {
	VC_DEDUP_LANES = 0,   /* the lanes hash: the default */
	VC_DEDUP_MD5 = 1,     /* as the DEDU paper */
	VC_DEDUP_MURMUR3 = 2, /* MurmurHash3_x64_128 */
};

void vc_config_init(struct vc_config *cfg);

typedef struct vc_cache vc_cache;

/* Opens a cache over the backing store. On success *out is the handle. */
int vc_open(const struct vc_config *cfg, vc_cache **out);
/* Flushes dirty pages (write-back), then frees everything. Returns the
 * flush's result; the handle is gone either way. NULL is a no-op. */
int vc_close(vc_cache *c);

/* Reads up to len bytes at any offset. Returns the count read: short only at
 * the end of the backing store, 0 at or past it. */
ssize_t vc_read(vc_cache *c, void *buf, size_t len, uint64_t off);
/* Writes len bytes at any offset; a range past the end of the backing store
 * fails with -ENOSPC and changes nothing. Returns len. */
ssize_t vc_write(vc_cache *c, const void *buf, size_t len, uint64_t off);
/* Makes every write acknowledged before the call durable on the backing store. */
int vc_flush(vc_cache *c);

/* vc_drop flags. */
#define VC_DROP_DISCARD (1u << 0) /* throw dirty data away instead of writing it back */
/* Invalidates the cached pages that overlap [off, off+len); dirty ones are
 * written back first unless VC_DROP_DISCARD. len 0 means "to the end". */
int vc_drop(vc_cache *c, uint64_t off, uint64_t len, unsigned flags);
/* Loads the pages that overlap [off, off+len) into `tier` (enum vc_tier).
 * VC_TIER_HOST: every page ends in the host tier (from the GPU tier or the
 * backing store). VC_TIER_GPU: uncached pages are read into the GPU tier
 * in batches, a batch_pages run of the range at a time on each of up to 4
 * threads of the call (VC_PREFETCHERS=1..4 in the environment at vc_open;
 * their store reads and moves overlap); pages already cached in either
 * tier stay where they are. On an error the call returns it once the
 * threads stopped; the pages loaded stay. Prefetches do not count as hits
 * or misses. */
int vc_prefetch(vc_cache *c, uint64_t off, uint64_t len, int tier);

/* Size in bytes of the backing store; page size in effect. */
uint64_t vc_size(const vc_cache *c);
uint32_t vc_page_size(const vc_cache *c);
/* "cuda" or "emu": the device backend the cache runs on. */
const char *vc_device_name(const vc_cache *c);
/* The device in words, e.g. "NVIDIA H200 (sm_90, 132 SMs)" or "emulated". */
const char *vc_device_desc(const vc_cache *c);

/* ---- Volumes: several backing stores sharing one cache -----------------
 * The store vc_open opened is volume 0, and the calls above act on it. More
 * stores join the same tiers, index and replacement policy as further
 * volumes: their pages compete for the same memory, so a cache sized once
 * serves, say, all of a host's VM images. Each volume has the calls above,
 * with the same meaning, on its own store. vc_flush covers every volume;
 * vc_volume_flush covers one. vc_volume_open and vc_volume_close may run
 * while other volumes are in use, but not while any call runs on the volume
 * being closed, nor concurrently with each other, vc_flush or vc_close. */
#define VC_VOLUMES_MAX 1024
typedef struct vc_volume vc_volume;

/* Volume 0 of c. Never NULL for an open cache; it closes with the cache. */
vc_volume *vc_volume_default(vc_cache *c);
/* Opens a store (path, or when path is NULL an fd the cache does not
 * close) as a new volume; flags: VC_OPEN_READONLY. -EMFILE past
 * VC_VOLUMES_MAX. */
int vc_volume_open(vc_cache *c, const char *path, int fd, uint32_t flags, vc_volume **out);
/* Writes back the volume's dirty pages, syncs, drops its pages and closes
 * it. On failure the volume stays open and nothing is lost. Volume 0:
 * -EINVAL (vc_close closes it). NULL is a no-op. */
int vc_volume_close(vc_volume *v);
ssize_t vc_volume_read(vc_volume *v, void *buf, size_t len, uint64_t off);
ssize_t vc_volume_write(vc_volume *v, const void *buf, size_t len, uint64_t off);
/* vc_volume_read, but only when every page of the range is in the host
 * tier now: never blocks or sleeps, takes no lock. -EAGAIN otherwise (and
 * for ranges of more than VC_READ_HIT_PAGES pages), having copied nothing
 * and counted nothing. For servers that answer hits on the thread that
 * reads requests and hand the rest to workers. */
#define VC_READ_HIT_PAGES 32
ssize_t vc_volume_read_hit(vc_volume *v, void *buf, size_t len, uint64_t off);
int vc_volume_flush(vc_volume *v);
/* Makes every write acknowledged before the call that overlaps [off,
 * off+len) durable: writes back the volume's dirty pages in that range,
 * then syncs the store (fdatasync). len 0 means "to the end"; a range past
 * the end is clipped. Dirty pages outside the range stay dirty. For a
 * write's FUA: in write-through the write is in the store already and this
 * is the sync. Read-only volume, or off at or past the end: 0, nothing to
 * do. NULL volume, or off + len past 2^64: -EINVAL. Cost: O(log) plus the
 * dirty pages in the range and their writes, not O(cache). */
int vc_volume_flush_range(vc_volume *v, uint64_t off, uint64_t len);
/* vc_volume_flush_range without the sync: the range's dirty pages written
 * to the store, which then holds what was acknowledged as a file holds a
 * write(2) before fsync (for a file system front end's close). */
int vc_volume_writeback(vc_volume *v, uint64_t off, uint64_t len);
int vc_volume_drop(vc_volume *v, uint64_t off, uint64_t len, unsigned flags);
int vc_volume_prefetch(vc_volume *v, uint64_t off, uint64_t len, int tier);
uint64_t vc_volume_size(const vc_volume *v);
/* The volume's store has changed size, or is about to (a file system front
 * end's append or truncate): reads and writes are checked against `size`
 * from now on. A shrink drops the cached pages past the new end without
 * writing them back; the page holding the lower of the two ends, when
 * partial, is written back if dirty and dropped. The store itself is the
 * caller's to truncate or extend (a read past the file's end reads zeros,
 * a write there extends it). No other call may run on the volume
 * meanwhile (as for vc_volume_close). -EFBIG past 2^48 pages; a failed
 * write-back leaves the size as it was. Cost: O(pages past the lower end,
 * at most the cache's) lookups and one write-back. */
int vc_volume_resize(vc_volume *v, uint64_t size);

/* ---- Volumes over a store of the caller's ------------------------------
 * A volume whose backing store is a set of callbacks instead of a file:
 * for a front end that maps one address space onto many objects (the
 * FUSE mount puts many files at fixed offsets of one volume, so the
 * volume table does not bound how many files stay cached). The cache
 * calls them from any of its threads, many at once, and sometimes while
 * another volume's caller waits on it: they must not call into this
 * cache, and every call must lie inside [0, bytes). Each returns 0 or
 * -errno; read and write move the whole range (bytes the store lacks
 * read as zeros). The struct is copied at open; ctx must outlive the
 * volume. vc_volume_extent reports such a volume as data throughout. */
#define VC_STORE_VERSION 1
struct vc_store {
	uint32_t size;    /* sizeof(struct vc_store) as the caller compiled it */
	uint32_t version; /* VC_STORE_VERSION */
	void *ctx;
	uint64_t bytes;   /* the store's size, as vc_volume_size reports it */
	int (*read)(void *ctx, void *buf, size_t len, uint64_t off);
	int (*write)(void *ctx, const void *buf, size_t len, uint64_t off);
	/* Makes what was written to [off, off+len) durable; len 0: to the
	 * end (vc_volume_flush_range passes its range on). */
	int (*sync)(void *ctx, uint64_t off, uint64_t len);
};
/* vc_volume_open over a store of the caller's; flags: VC_OPEN_READONLY
 * (write may then be NULL). -EINVAL for a malformed struct, -EMFILE past
 * VC_VOLUMES_MAX, -EFBIG past 2^48 pages. */
int vc_volume_open_store(vc_cache *c, const struct vc_store *store, uint32_t flags,
			 vc_volume **out);

/* vc_volume_extent results. */
#define VC_EXTENT_DATA 0 /* allocated, or the store cannot say */
#define VC_EXTENT_HOLE 1 /* unallocated in the store and not written since: reads as zeroes */
/* Allocation of the extent at off, as the store will hold it once every
 * write acknowledged so far reaches it (dirty cached pages are data): the
 * extent's length goes to *ext_len (> 0, at most len, clipped to the end).
 * Returns VC_EXTENT_* or -errno; off past the end or len 0: -EINVAL.
 * Cost: two lseeks and one O(log) look in the volume's set of dirty pages
 * (empty in write-through), whatever the size of the range or the cache. */
int vc_volume_extent(vc_volume *v, uint64_t off, uint64_t len, uint64_t *ext_len);
/* The first run of pages at or after byte off that the cache may hold
 * newer than the store (write-back: acknowledged, not yet written back):
 * 1 and the run's bytes [*start, *start + *len), clipped to the volume's
 * end; 0 when there is none. For saying what a failed flush left behind
 * (a full store at shutdown). Cost: O(log) per page of the run. */
int vc_volume_dirty_next(vc_volume *v, uint64_t off, uint64_t *start, uint64_t *len);

/* ---- Asynchronous I/O ----------------------------------------------------
 * A vc_aio is a submission and completion queue, used by one thread at a
 * time (like an io_uring): one thread keeps many requests in flight and
 * collects them as they complete, in any order. Reads whose pages are all
 * cached complete without a thread of their own: host-tier pages are copied
 * at submission, and the GPU-tier pages of all requests submitted together
 * travel in one device submission and are copied out when reaped. Requests
 * that must wait for the backing store or for other callers (misses,
 * writes, flushes, reads of more than VC_AIO_FAST_PAGES pages) run on the
 * queue's own helper threads (`helpers` of them, started on first need),
 * with the semantics of the synchronous calls.
 *
 * A request struct belongs to the caller; from its submission until
 * vc_aio_reap returns it, the library owns it and its buffer. Requests in
 * flight at the same time may overlap; their order is unspecified (as with
 * NBD), except that a flush covers every write completed before it was
 * submitted. GPU-tier pages being read stay pinned until the read is
 * reaped: a queue's owner reaps promptly, and vc_aio_close waits. */
typedef struct vc_aio vc_aio;

enum vc_aio_op {
	VC_AIO_READ = 0,
	VC_AIO_WRITE = 1,
	VC_AIO_FLUSH = 2, /* vc_volume_flush of req->vol; off and len are ignored */
};
#define VC_AIO_FUA (1u << 0) /* a write is durable on the store when it completes */

/* Reads of at most this many pages may complete without a helper. */
#define VC_AIO_FAST_PAGES 32

struct vc_aio_req {
	vc_volume *vol;
	void *buf;      /* READ: filled; WRITE: read from */
	uint64_t off;
	uint64_t len;
	uint32_t op;    /* enum vc_aio_op */
	uint32_t flags; /* VC_AIO_* */
	void *user;     /* the caller's; the library never touches it */
	int64_t result; /* on completion: bytes (as vc_volume_read/write), 0, or -errno */
	void *_priv[4]; /* the library's while the request is in flight */
};

/* Opens a queue on c for up to `depth` requests in flight (1 .. 65536),
 * with up to `helpers` threads for requests that must wait (0: 4). */
int vc_aio_open(vc_cache *c, unsigned depth, unsigned helpers, vc_aio **out);
/* Waits for every request in flight (their results are dropped), then
 * frees the queue. NULL is a no-op. */
void vc_aio_close(vc_aio *q);
/* Takes up to n requests; returns how many it took (fewer when the queue
 * holds `depth` requests), or -errno for a malformed first request (the
 * rest untaken). A request that fails its check (bad op, NULL buffer,
 * read-only volume) is taken and completes with that error. */
int vc_aio_submit(vc_aio *q, struct vc_aio_req *const *reqs, unsigned n);
/* Collects completed requests into out[0..max): waits until at least
 * `min` are there or timeout_ns has passed (< 0: no limit; 0: no wait).
 * Returns how many it stored, or -EINVAL (min > max, or min larger than
 * what is in flight). */
int vc_aio_reap(vc_aio *q, struct vc_aio_req **out, unsigned min, unsigned max,
		int64_t timeout_ns);
/* Requests taken and not yet reaped. */
unsigned vc_aio_inflight(const vc_aio *q);

#define VC_BATCH_HIST 14 /* histogram buckets: [1], [2,3], [4,7], ... [8192, inf) */
#define VC_LOCK_HIST 16 /* lock-hold buckets: [0, 1 us), [1, 2), [2, 4) ... [16 ms, inf) */
#define VC_STATS_VERSION 8
struct vc_stats {
	uint32_t size; /* set by the caller: sizeof(struct vc_stats) */
	uint32_t version;

	uint64_t hits[VC_TIER_COUNT];      /* page accesses served by each tier */
	uint64_t misses;                   /* page accesses that went to the backing store */
	uint64_t evictions[VC_TIER_COUNT]; /* pages pushed out of each tier */
	uint64_t writebacks;               /* dirty pages written to the backing store */
	uint64_t h2d_bytes, d2h_bytes;     /* bytes moved host->GPU and GPU->host */
	uint64_t backing_read_bytes, backing_write_bytes;
	uint64_t backing_wait_ns; /* time spent in backing store reads, writes and syncs */
	uint64_t batches;         /* device batches submitted */
	uint64_t batch_pages;     /* pages in them (with dedup: blocks moved / degree; a
				     unique block going down moves twice: to staging, to its slot) */
	uint64_t batch_hist[VC_BATCH_HIST]; /* moves per batch (with dedup, blocks) */
	uint64_t batch_wait_ns;   /* time threads spent waiting for device batches */
	uint64_t pages_cached[VC_TIER_COUNT]; /* occupancy now */
	uint64_t pages_capacity[VC_TIER_COUNT];
	uint64_t dirty_pages; /* now */

	/* Version 2: the GPU tier's log. */
	uint64_t gpu_segments, gpu_segments_free; /* now */
	double gpu_fragmentation;                 /* now: dead share of used slots */
	uint64_t gc_runs, gc_pages_moved;         /* cleaning steps, pages they moved */
	uint64_t gc_ns; /* time in cleaning steps (engine lock held), fruitless attempts included */
	uint64_t gpu_segments_evicted;            /* segments dropped from the tail */
	uint64_t early_releases;                  /* pages evicted ahead of need */

	/* Version 3: the engine lock (misses, writes, page moves, cleaning):
	 * how long each hold lasted. Lock-free paths (cached reads) take none. */
	uint64_t lock_holds;
	uint64_t lock_hold_hist[VC_LOCK_HIST];
	uint64_t lock_hold_max_ns;

	/* Version 4: the GPU tier's size at run time (vc_gpu_shrink/grow). */
	uint64_t gpu_bytes, gpu_bytes_max; /* device memory held now; configured */
	uint64_t gpu_chunk_bytes;          /* what it is given back and taken again by */
	uint64_t gpu_chunks_released, gpu_chunks_regained;
	uint64_t gpu_bytes_released;           /* by every shrink */
	uint64_t gpu_bytes_released_requested; /* by shrinks other programs asked for */
	uint64_t gpu_shrink_pages_moved;       /* pages kept by moving them on the device */
	uint64_t gpu_shrinks;                  /* calls */
	uint64_t gpu_shrink_ns_total, gpu_shrink_ns_max, gpu_shrink_ns_last; /* to memory given back */
	uint64_t gpu_shrink_drop_ns_total; /* forgetting the pages, after (in the background) */

	/* Version 5: the integrity mode (VC_ENCRYPT_XTS_GMAC). */
	uint64_t integrity_failures;   /* moves out of the GPU tier whose page failed its tag */
	uint64_t integrity_drops;      /* pages dropped for it */
	uint64_t integrity_dirty_lost; /* of those, dirty ones: writes the store never got */

	/* Version 6: block deduplication (vc_config.dedup). With it on,
	 * pages_cached[GPU] counts logical pages and pages_capacity[GPU] the
	 * blocks' worth of pages the tier holds without sharing. */
	uint64_t dedup_pages;        /* now: logical pages in the GPU tier */
	uint64_t dedup_blocks;       /* now: physical blocks stored */
	double dedup_factor;         /* now: block uses / blocks stored (1: no sharing) */
	uint64_t dedup_blocks_in;    /* blocks fingerprinted on their way down */
	uint64_t dedup_hits;         /* of those, shared with a stored block */
	uint64_t dedup_collisions;   /* fingerprint matches whose bytes differed */
	double dedup_est_factor;     /* sampled estimate (SHARDS-style), all volumes */
	double dedup_est_update_ratio; /* sampled writes / accesses, all volumes */
	uint64_t dedup_volumes_on;   /* volumes deduplicating now */
	uint64_t dedup_switches;     /* adaptive on/off changes */

	/* Version 7: several GPUs (vc_config.gpus; vc_get_gpu_stats has each
	 * part's figures). */
	uint64_t gpus;            /* parts of the GPU tier (1 with one GPU, 0 without a tier) */
	uint64_t gpus_failed;     /* parts lost to a device error */
	uint64_t gpu_dirty_lost;  /* dirty pages a failed part held (VC_GPU_DIRTY_KEEP) */
	uint64_t gpu_peer_pages;  /* pages moved between parts (rebalance, evacuation) */

	/* Version 8: the dirty limit and refusing stores (vc_config.dirty_ratio). */
	uint64_t dirty_limit;        /* dirty pages at most */
	uint64_t writes_limited;     /* page writes sent through to the store by the limit */
	uint64_t writeback_refusals; /* page write-backs a store refused (the pages stayed
					dirty and cached) */
};

/* Fills *st (whose size field the caller sets). Counters only grow. */
int vc_get_stats(vc_cache *c, struct vc_stats *st);

/* The GPU tier's size at run time, for a cache that shares its GPU with
 * other programs (BAG's memory evacuation).
 *
 * vc_gpu_shrink gives at least `bytes` of device memory back, in whole
 * chunks (vc_config.gpu_chunk_bytes), choosing the chunks that cache the
 * least: their hottest pages move into the rest of the tier where it has
 * room, dirty pages are written back, the rest are dropped, and each
 * chunk is overwritten with zeros before it goes back to the device.
 * Reads and writes continue meanwhile; nothing acknowledged is lost.
 * *released (may be NULL) says how much went back: more than asked by up
 * to a chunk, less when the tier holds less (it may shrink to nothing:
 * the cache then works as if it had no GPU tier). A chunk whose
 * write-back fails stays, with the error returned. Flags:
 * VC_SHRINK_REQUESTED counts the bytes as released on another program's
 * request (vc_stats). One shrink or grow runs at a time.
 *
 * vc_gpu_grow takes back up to `bytes` (whole chunks, never past the
 * configured size) while the device has room; *grown (may be NULL) says
 * how much. -ENOMEM when not even one chunk fits.
 *
 * Both: -EINVAL without a GPU tier, -EOPNOTSUPP where the device cannot
 * map memory by chunks. */
#define VC_SHRINK_REQUESTED 1u
int vc_gpu_shrink(vc_cache *c, uint64_t bytes, unsigned flags, uint64_t *released);
int vc_gpu_grow(vc_cache *c, uint64_t bytes, uint64_t *grown);
/* The cache's GPU: its free and total memory now, every program's use
 * counted (cudaMemGetInfo), and its UUID (cuDeviceGetUuid), which is what
 * a program asking for memory back names. */
int vc_gpu_mem_info(vc_cache *c, uint64_t *free_bytes, uint64_t *total_bytes);
int vc_gpu_uuid(vc_cache *c, unsigned char uuid[16]);
/* A GPU tier over several parts (vc_config.gpus): the four calls above for
 * part `gpu` (its chunks, its device's memory and UUID); each part shrinks
 * and grows on its own, its hottest pages moving within the part. The
 * calls without a part act on part 0 and are -EOPNOTSUPP (shrink, grow)
 * with several parts. -EINVAL: no such part. */
int vc_gpu_shrink_on(vc_cache *c, unsigned gpu, uint64_t bytes, unsigned flags,
		     uint64_t *released);
int vc_gpu_grow_on(vc_cache *c, unsigned gpu, uint64_t bytes, uint64_t *grown);
int vc_gpu_mem_info_on(vc_cache *c, unsigned gpu, uint64_t *free_bytes, uint64_t *total_bytes);
int vc_gpu_uuid_on(vc_cache *c, unsigned gpu, unsigned char uuid[16]);

/* ---- several GPUs (vc_config.gpus; docs/MULTIGPU.md) ----------------------
 * Parts are numbered 0 .. vc_gpu_count() - 1 in the order vc_config.gpus
 * names them. */
unsigned vc_gpu_count(const vc_cache *c);

#define VC_GPU_STATS_VERSION 1
struct vc_gpu_stats {
	uint32_t size; /* set by the caller: sizeof(struct vc_gpu_stats) */
	uint32_t version;
	int ordinal;              /* the part's device */
	uint32_t failed;          /* 1: lost to a device error, holds nothing */
	double weight;            /* its share of new pages now (0: evacuated) */
	uint64_t pages_cached, pages_capacity; /* now */
	uint64_t bytes;           /* device memory it holds now */
	uint64_t hits;            /* reads served from it (pages) */
	uint64_t h2d_bytes, d2h_bytes; /* host-facing moves to and from it */
	uint64_t evictions;       /* pages evicted from it */
	uint64_t gc_runs, gc_pages_moved;
	uint64_t peer_in, peer_out; /* pages moved to and from other parts */
	uint64_t peer_direct;     /* of peer_in, pages that came GPU to GPU (P2P) */
	char desc[128];           /* the device, as vc_device_desc */
};
/* Fills *st for part `gpu`: 0, or -EINVAL (no such part). */
int vc_get_gpu_stats(vc_cache *c, unsigned gpu, struct vc_gpu_stats *st);

/* A part's share of new pages: weight > 0 (or 0: none; its pages stay
 * until moved or evicted). Pages already in the tier stay where they are
 * until vc_gpu_rebalance. -EINVAL: no such part, a failed one, or a weight
 * that is negative, not finite, or would leave no part a share. */
int vc_gpu_set_weight(vc_cache *c, unsigned gpu, double weight);
/* Moves every page that is not on the part its placement names now to
 * that part: GPU to GPU where the devices reach each other (P2P), else
 * through host memory; a page whose part has no room is evicted as usual
 * (dirty ones written back first). Reads and writes go on meanwhile.
 * *moved (may be NULL): pages moved. */
int vc_gpu_rebalance(vc_cache *c, uint64_t *moved);
/* Empties part `gpu` into the others: its weight goes to 0 and its pages
 * move (vc_gpu_rebalance); pages held by readers or moves in flight are
 * waited for. vc_gpu_set_weight gives it a share again. -EINVAL as for
 * vc_gpu_set_weight (the last part with a share); -EBUSY when no page
 * left the part for 10 s (its weight stays 0). */
int vc_gpu_evacuate(vc_cache *c, unsigned gpu, uint64_t *moved);

/* ---- GPUfs: a file API for GPU kernels over this cache ---------------------
 * (docs/GPUFS.md; the device half is include/vramcache/gpufs.h, and
 * vramcache/gpufs.cuh for CUDA kernels.) A vc_gpufs binds to one cache: its
 * host threads serve kernels' requests from the cache's own index and
 * tiers, so a page CPU clients cached is a hit for a kernel, and what a
 * kernel writes goes through the cache (vc_volume_write) to CPU readers.
 * Files are opened by path, each as a volume of the cache. Not with dedup
 * or encryption on (-ENOTSUP). Calls on one vc_gpufs may come from many
 * threads, but vc_gpufs_release and vc_gpufs_destroy only while no kernel
 * uses its context. */
typedef struct vc_gpufs vc_gpufs;
struct vc_gfs_ctx;

#define VC_GPUFS_CONFIG_VERSION 2
/* vc_gpufs_config.flags */
#define VC_GPUFS_NO_DIRECT 1u /* no direct reads (every uncached page is a GET) */
#define VC_GPUFS_NO_ADMIT 2u  /* direct reads never load pages into the GPU tier */
struct vc_gpufs_config {
	uint32_t size;    /* sizeof(struct vc_gpufs_config) */
	uint32_t version; /* VC_GPUFS_CONFIG_VERSION (1: the fields up to timeout_ns) */
	uint32_t ring_slots;      /* requests in flight: a power of two; 0: 256 */
	uint32_t table_entries;   /* device table entries: a power of two; 0: 16384 */
	uint32_t max_cached;      /* engine pins the table may hold; 0: entries / 2 */
	uint32_t service_threads; /* host threads serving requests; 0: 2 */
	uint64_t timeout_ns;      /* a device call's bound; 0: 30 s */
	/* version 2: direct reads (vramcache/gpufs.h, struct vc_gfs_file). A
	 * file opened with vc_gpufs_open in a write-through or read-only cache
	 * is mapped and registered whole when it is at most direct_max bytes:
	 * its pages stay in the OS page cache, pinned, until the context is
	 * destroyed, and it must be read-only in the context. Kernels then
	 * read pages the cache does not hold from there, and one such read in
	 * admit_every hints the page to the host, which loads it into the GPU
	 * tier when idle: later reads of it are GPU-tier hits. */
	uint32_t flags;       /* VC_GPUFS_* */
	uint32_t admit_every; /* a power of two; 0: 8; 1: every direct read hints */
	uint64_t direct_max;  /* bytes; 0: half of the machine's memory */
};
void vc_gpufs_config_init(struct vc_gpufs_config *cfg);
/* cfg NULL: defaults. */
int vc_gpufs_create(vc_cache *c, const struct vc_gpufs_config *cfg, vc_gpufs **out);
/* Releases everything (vc_gpufs_release), closes the files (their dirty
 * pages written back) and frees the context. NULL is a no-op. */
int vc_gpufs_destroy(vc_gpufs *g);
/* The view kernels receive by value (struct vc_gfs_ctx, vramcache/gpufs.h). */
int vc_gpufs_ctx(const vc_gpufs *g, struct vc_gfs_ctx *out);
/* After the kernels using the context completed: drops every engine pin the
 * device table holds (pages stay cached) and resets the request ring, a
 * broken context included. O(table + page entries). */
int vc_gpufs_release(vc_gpufs *g);
/* Opens a file on the host as a kernel's vc_gopen would (the same fd, one
 * more open, and the fd's device entry written): kernels may be handed the
 * fd instead of opening the file (a gopen is a request to the host), and
 * CPU threads share the file with kernels through vc_gpufs_volume. Call
 * it between kernels: the device entry is written with a copy that waits
 * for kernels on the default stream. */
int vc_gpufs_open(vc_gpufs *g, const char *path, int flags);
int vc_gpufs_close(vc_gpufs *g, int fd);
/* The cache volume of an open fd (NULL: not open): CPU reads and writes of
 * the file must go through it to share the page cache with kernels. */
vc_volume *vc_gpufs_volume(vc_gpufs *g, int fd);
/* Emulated device only: runs fn for warps 0 .. nwarps-1 on `threads` CPU
 * threads (one warp at a time each), each with its own copy of the view,
 * and returns when all are done: a kernel launch, for tests and CI.
 * -ENOTSUP on a CUDA cache (launch a kernel). */
int vc_gpufs_emu_run(vc_gpufs *g, unsigned nwarps, unsigned threads,
		     void (*fn)(const struct vc_gfs_ctx *ctx, unsigned warp, void *arg), void *arg);
struct vc_gpufs_stats {
	uint64_t requests, batches;  /* served; service rounds that found work */
	uint64_t gets, get_cached;   /* GET requests; granted for the table */
	uint64_t revokes, revoked;   /* revoke passes; entries they revoked */
	uint64_t writes, opens;
	uint64_t held;               /* engine pins held now */
	uint64_t rev_fallbacks;      /* passes no warp finished in time: the
					fallback kernel (emu: the reaper) took the rest */
	uint64_t miss_rounds, miss_pages; /* GET misses loaded together: backing
					     read rounds, pages they loaded */
	uint64_t reopen_drops;       /* gopens that found the file changed outside
					the cache: a new version, its pages dropped */
	uint64_t syncs;              /* backing syncs at gclose/gfsync (a close with
					nothing written since the last one syncs nothing) */
	uint64_t pass_age_ns;        /* the revoke pass in progress: how long ago it
					was asked for (0: none); a pass that never ends
					would stall every engine sleeper on the table */
	uint64_t direct_files;       /* files mapped for direct reads */
	uint64_t direct_reads;       /* pages kernels read from those mappings (counted
					on the device) */
	uint64_t admitted;           /* hinted pages loaded into the GPU tier */
};
int vc_gpufs_stats(vc_gpufs *g, struct vc_gpufs_stats *st);

#ifdef __cplusplus
}
#endif
#endif
