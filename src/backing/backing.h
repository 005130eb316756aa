/* Backing store: a regular file or block device with pread/pwrite semantics.
 *
 * Sizes are fixed at open (a block device cannot grow; a file is treated the
 * same way) unless the owner says otherwise (vc_backing_resize: a file
 * that a file system front end grows or truncates). Reads never go past
 * the end: the engine clips. Every call returns 0 or -errno. Thread safe:
 * calls on one backing may run from many threads at once.
 *
 * Store errors, the one rule: each error a store gives (a file's system
 * call, a caller's vc_store callback) is retried here or is final, and only
 * final ones leave this layer.
 *   retried  EINTR at once, without limit, and short transfers continued;
 *            EAGAIN (EWOULDBLOCK) and EBUSY, a store's "not now", after a
 *            pause that doubles from 100 us to 10 ms, for at most 1 s
 *            without progress (STORE_RETRY_NS): then final, as -EIO.
 *   final    everything else (ENOSPC, EDQUOT, EFBIG, EROFS, EIO, EPERM, ...),
 *            returned as the store gave it, with a message naming the
 *            store, the request and the error; a code that is no errno (a
 *            callback's 0 < -r or one of the library's own) is -EIO.
 * So no caller retries a store call, and none sees EAGAIN, EINTR, EBUSY
 * or an internal code from here: the engine's "not now" codes cannot be
 * a store's. What the engine does with a final error: engine.h, "Store
 * errors".
 */
#ifndef VC_BACKING_H
#define VC_BACKING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vramcache.h"

struct vc_backing;

/* One element of a batched request. */
struct vc_bio {
	void *buf;
	uint64_t off;
	uint32_t len;
	int write; /* 0 read, 1 write */
	int result; /* set on completion: 0 or -errno */
};

/* Opens by path (fd < 0) or adopts an open fd (path may be NULL; the fd
 * is not closed by vc_backing_close; it must be O_RDWR unless readonly). latency_ns is added to each read and
 * write, to model a slower device. */
int vc_backing_open(const char *path, int fd, int readonly, uint64_t latency_ns,
		    struct vc_backing **out);
/* A backing over the caller's callbacks (vc_volume_open_store; the
 * struct is copied, store->size bytes of it): every call below forwards
 * to them; batches run in turn, extents are data. */
int vc_backing_open_store(const struct vc_store *store, int readonly, uint64_t latency_ns,
			  struct vc_backing **out);
void vc_backing_close(struct vc_backing *b);

uint64_t vc_backing_size(const struct vc_backing *b);
/* The size requests are checked against from now on: the caller has
 * changed the file's size (or will: a read past the file's end reads
 * zeros, a write there extends it). Thread safe; requests in flight were
 * checked against the old size. */
void vc_backing_resize(struct vc_backing *b, uint64_t size);
int vc_backing_read(struct vc_backing *b, void *buf, size_t len, uint64_t off);
int vc_backing_write(struct vc_backing *b, const void *buf, size_t len, uint64_t off);
/* Runs many requests concurrently (io_uring where built, else in turn), in
 * no set order: overlapping ranges in one call give undefined results.
 * Every request must lie inside the store (-EINVAL otherwise).
 * Returns 0 if all succeeded, else the first failure; each bio has its own
 * result. */
int vc_backing_submit(struct vc_backing *b, struct vc_bio *bios, unsigned n);
/* Allocation at off (< size): *hole tells whether [off, *end) is a hole
 * (reads as zeroes, SEEK_HOLE) or data; *end > off. A store that cannot
 * say (no SEEK_DATA: a block device, some file systems) is data to its
 * end. 0 or -errno. Cost: at most two lseek calls. */
int vc_backing_extent(struct vc_backing *b, uint64_t off, uint64_t *end, bool *hole);
/* fdatasync, or fsync for a block device. */
int vc_backing_sync(struct vc_backing *b);
/* The same for what was written to [off, off+len) (len 0: to the end): a
 * file or device syncs whole; a caller's store gets the range. */
int vc_backing_sync_range(struct vc_backing *b, uint64_t off, uint64_t len);
/* Nanoseconds spent inside this backing's calls so far (all threads). */
uint64_t vc_backing_wait_ns(const struct vc_backing *b);
/* Writes this backing made so far (each vc_backing_write, each batch with
 * a write), counted after they are done; *begun (unless NULL): counted
 * before they start (read after the done count: begun >= done). A store
 * whose file changed while neither count moved, and with no write in
 * flight, was changed by someone else. */
uint64_t vc_backing_writes(const struct vc_backing *b, uint64_t *begun);

#endif
