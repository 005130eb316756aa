/* Backing store over a regular file or a block device, or over a store
 * of the caller's (struct vc_store: callbacks, vc_volume_open_store).
 *
 * Reads and writes are pread/pwrite loops; a batch (vc_backing_submit) goes
 * through io_uring where the library was built with it and the kernel lets
 * us set up a ring, else through the same loops in turn.
 *
 * Size is set at open (st_size, or BLKGETSIZE64 for a block device), and
 * changed only by vc_backing_resize; every request must lie inside it
 * (-EINVAL otherwise). Should a file shrink
 * under us, a read that meets the new end early returns zeros for the rest,
 * as a hole would read: the engine asked within the size it was given, and
 * failing the read would turn someone else's truncate into cache errors.
 * A write there extends the file again.
 *
 * Injected latency (latency_ns) models a slower device that has internal
 * parallelism: each vc_backing_read/write sleeps it once; a submit of n
 * requests sleeps it once per round of up to QD requests, whichever path
 * ran the batch.
 *
 * Thread safety: every call may run from many threads on one backing. The
 * fd is only used with positional I/O; the ring pool has its own mutex and
 * a ring is used by one submit at a time.
 */
#include "backing/backing.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef VC_HAVE_URING
#include <liburing.h>
#endif

#include "base/clock.h"
#include "base/error.h"

/* Requests in flight per submit: one ring's depth, and the unit of the
 * latency model ("a device that serves 64 requests at once"). 64 covers
 * NVMe and SATA NCQ (32) queue depths that matter for page-sized I/O, while
 * keeping a ring small (64 SQEs + 128 CQEs, about 8 KiB). */
#define QD 64

/* Idle rings kept for reuse. Setting up a ring costs a few syscalls and
 * mappings (tens of microseconds), comparable to a small batch, so rings are
 * pooled; 8 covers the threads we expect to submit at once. Extra
 * concurrent submitters still work: they set up and tear down their own. */
#define RING_POOL 8

/* One pread/pwrite moves at most this much. Linux moves at most
 * 0x7ffff000 bytes per call anyway; 1 GiB also stays below SSIZE_MAX on
 * 32-bit hosts, where larger counts are implementation defined. */
#define XFER_CHUNK (1u << 30)

/* The retry of a store's "not now" (backing.h's rule): EAGAIN from
 * pread/pwrite (an adopted fd with O_NONBLOCK on an unusual file) or from
 * a caller's store, and EBUSY. The pause doubles from the first to the
 * last; after STORE_RETRY_NS without progress the error is final, so a
 * store that never becomes ready fails instead of spinning. */
#define STORE_RETRY_PAUSE_NS 100000ull
#define STORE_RETRY_PAUSE_MAX_NS 10000000ull
#define STORE_RETRY_NS 1000000000ull

/* bio->result while a submit still owes the request; never returned. */
#define BIO_PENDING 1

struct vc_backing {
	int fd;                 /* -1 for a caller's store */
	bool has_store;
	struct vc_store store;  /* the caller's callbacks (has_store) */
	bool own_fd;
	bool readonly;
	bool blockdev;
	_Atomic uint64_t size; /* vc_backing_resize may change it while other calls run */
	uint64_t latency_ns;
	_Atomic uint64_t wait_ns;
	_Atomic uint64_t writes_begun, writes; /* write calls and batches begun, done */
#ifdef VC_HAVE_URING
	atomic_bool no_uring; /* set once ring setup fails: loops from then on */
	pthread_mutex_t pool_mu;
	struct io_uring *pool[RING_POOL]; /* idle rings, pool[0..npool) */
	int npool;
#endif
	char name[]; /* path, or "fd N": for messages */
};

/* Injected latency. Linux lets a sleep overrun by the thread's timer slack
 * (50 us by default), which made a 20 us device answer in about 70: the
 * sleeping thread's slack is set to 1 us the first time it sleeps here
 * (only threads that do injected-latency I/O, so only emulation pays). */
static void sleep_ns(uint64_t ns)
{
	static _Thread_local bool slack_set;
	if (!slack_set) {
		(void)prctl(PR_SET_TIMERSLACK, 1000ul, 0ul, 0ul, 0ul);
		slack_set = true;
	}
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void account(struct vc_backing *b, uint64_t t0)
{
	atomic_fetch_add_explicit(&b->wait_ns, vc_now_ns() - t0, memory_order_relaxed);
}

/* Whether [off, off+len) lies inside the backing store. */
static bool in_range(const struct vc_backing *b, uint64_t off, uint64_t len)
{
	const uint64_t size = b->size; /* once: a resize may run meanwhile */
	return off <= size && len <= size - off;
}

/* Whether error e (positive) is a store's "not now", retried a while. */
static bool transient(int e)
{
	return e == EAGAIN || e == EWOULDBLOCK || e == EBUSY;
}

/* After error e (positive) of a try: whether to try again, having slept
 * the pause the rule asks for. *pause and *waited start at
 * STORE_RETRY_PAUSE_NS and 0, and start there again after progress. */
static bool retry_after(int e, uint64_t *pause, uint64_t *waited)
{
	if (e == EINTR)
		return true;
	if (!transient(e) || *waited >= STORE_RETRY_NS)
		return false;
	sleep_ns(*pause);
	*waited += *pause;
	*pause = *pause * 2 < STORE_RETRY_PAUSE_MAX_NS ? *pause * 2 : STORE_RETRY_PAUSE_MAX_NS;
	return true;
}

/* A store's error as the final -errno the rule returns: a transient one
 * that outlasted its retries, or a code that is no errno, is -EIO. */
static int final_err(int64_t r)
{
	return r <= -4096 || transient((int)-r) ? -EIO : (int)r;
}

/* The message of a final error: what failed, and why. */
static const char *err_text(int64_t r)
{
	return r <= -4096 ? "not an errno (taken as EIO)"
	       : transient((int)-r) ? "the store stayed busy for a second (taken as EIO)"
				     : strerror((int)-r);
}

/* One try of the transfer from `done` bytes in: bytes moved (> 0), 0 at
 * end of file, or a negative code as the store gave it. A caller's store
 * moves the whole range or fails. */
static int64_t xfer_once(struct vc_backing *b, int write, unsigned char *p, uint64_t len,
			 uint64_t off, uint64_t done)
{
	if (b->has_store) {
		const struct vc_store *s = &b->store;
		int r = write ? s->write(s->ctx, p + done, (size_t)(len - done), off + done)
			      : s->read(s->ctx, p + done, (size_t)(len - done), off + done);
		return r < 0 ? r : (int64_t)(len - done);
	}
	size_t k = len - done < XFER_CHUNK ? (size_t)(len - done) : XFER_CHUNK;
	ssize_t r = write ? pwrite(b->fd, p + done, k, (off_t)(off + done))
			  : pread(b->fd, p + done, k, (off_t)(off + done));
	return r >= 0 ? r : -errno;
}

/* Moves len bytes at off (pread/pwrite, or the caller's store), from
 * `done` bytes in, under backing.h's rule: retries EINTR, the transient
 * errors (bounded) and short transfers; a read that meets end of file
 * zero-fills the rest. Returns 0 or a final -errno, with a message. */
static int xfer(struct vc_backing *b, int write, void *buf, uint64_t len, uint64_t off,
		uint64_t done)
{
	unsigned char *p = buf;
	uint64_t pause = STORE_RETRY_PAUSE_NS, waited = 0;
	while (done < len) {
		int64_t r = xfer_once(b, write, p, len, off, done);
		if (r > 0) {
			done += (uint64_t)r;
			pause = STORE_RETRY_PAUSE_NS;
			waited = 0;
			continue;
		}
		if (r == 0) {
			if (!write) {
				memset(p + done, 0, (size_t)(len - done));
				return 0;
			}
			return vc_err(-EIO, "backing %s: write at %llu made no progress", b->name,
				      (unsigned long long)(off + done));
		}
		if (r > -4096 && retry_after((int)-r, &pause, &waited))
			continue;
		return vc_err(final_err(r), "backing %s: %s of %llu bytes at %llu: %s", b->name,
			      write ? "write" : "read", (unsigned long long)(len - done),
			      (unsigned long long)(off + done), err_text(r));
	}
	return 0;
}

static int rw(struct vc_backing *b, int write, void *buf, size_t len, uint64_t off)
{
	if (write && b->readonly)
		return vc_err(-EROFS, "backing %s: opened read-only", b->name);
	if (!in_range(b, off, len))
		return vc_err(-EINVAL, "backing %s: %s of %zu bytes at %llu is past the end (%llu)",
			      b->name, write ? "write" : "read", len, (unsigned long long)off,
			      (unsigned long long)b->size);
	if (len == 0)
		return 0;
	uint64_t t0 = vc_now_ns();
	if (write) /* before it: a write in flight is seen as one */
		atomic_fetch_add_explicit(&b->writes_begun, 1, memory_order_seq_cst);
	int r = xfer(b, write, buf, len, off, 0);
	if (write) /* after it: a reader of the count sees the file changed */
		atomic_fetch_add_explicit(&b->writes, 1, memory_order_release);
	if (b->latency_ns)
		sleep_ns(b->latency_ns);
	account(b, t0);
	return r;
}

int vc_backing_read(struct vc_backing *b, void *buf, size_t len, uint64_t off)
{
	return rw(b, 0, buf, len, off);
}

int vc_backing_write(struct vc_backing *b, const void *buf, size_t len, uint64_t off)
{
	/* xfer only reads from buf when writing. */
	return rw(b, 1, (void *)buf, len, off);
}

/* --- batches ------------------------------------------------------------ */

static void submit_loop(struct vc_backing *b, struct vc_bio *bios, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (bios[i].result == BIO_PENDING)
			bios[i].result = xfer(b, bios[i].write, bios[i].buf, bios[i].len, bios[i].off, 0);
}

#ifdef VC_HAVE_URING

/* An idle ring from the pool, or a new one; NULL when io_uring cannot be
 * used (then, unless it was only out of memory, never tried again on this
 * backing). A ring is only kept when the kernel has IORING_OP_READ/WRITE
 * (5.6+); the probe is how older kernels are told apart. */
static struct io_uring *ring_get(struct vc_backing *b)
{
	struct io_uring *ring = NULL;
	pthread_mutex_lock(&b->pool_mu);
	if (b->npool > 0)
		ring = b->pool[--b->npool];
	pthread_mutex_unlock(&b->pool_mu);
	if (ring || atomic_load_explicit(&b->no_uring, memory_order_relaxed))
		return ring;

	ring = malloc(sizeof *ring);
	if (!ring)
		return NULL;
	if (io_uring_queue_init(QD, ring, 0) < 0) {
		/* seccomp, io_uring_disabled, RLIMIT_MEMLOCK, no kernel support */
		free(ring);
		atomic_store(&b->no_uring, true);
		return NULL;
	}
	struct io_uring_probe *pr = io_uring_get_probe_ring(ring);
	bool ok = pr && io_uring_opcode_supported(pr, IORING_OP_READ) &&
		  io_uring_opcode_supported(pr, IORING_OP_WRITE);
	if (pr)
		io_uring_free_probe(pr);
	if (!ok) {
		io_uring_queue_exit(ring);
		free(ring);
		atomic_store(&b->no_uring, true);
		return NULL;
	}
	return ring;
}

/* Returns a ring to the pool; a broken ring, or one beyond the pool's
 * size, is torn down. */
static void ring_put(struct vc_backing *b, struct io_uring *ring, bool broken)
{
	if (!broken) {
		pthread_mutex_lock(&b->pool_mu);
		if (b->npool < RING_POOL) {
			b->pool[b->npool++] = ring;
			ring = NULL;
		}
		pthread_mutex_unlock(&b->pool_mu);
	}
	if (ring) {
		io_uring_queue_exit(ring);
		free(ring);
	}
}

/* A request in flight: which bio, and how much of it is done. */
struct slot {
	unsigned bio;
	uint32_t done;
	bool active;
};

struct uring_run {
	struct vc_backing *b;
	struct io_uring *ring;
	struct vc_bio *bios;
	unsigned n, next; /* bios[next..n) not yet started */
	struct slot s[QD];
	int freel[QD], nfree;  /* idle slots */
	int ready[QD], nready; /* active slots to (re)queue */
	unsigned inflight;     /* SQEs queued whose CQE has not been reaped */
};

static void slot_finish(struct uring_run *u, int k, int result)
{
	u->bios[u->s[k].bio].result = result;
	u->s[k].active = false;
	u->freel[u->nfree++] = k;
}

/* Applies one CQE: progress, zero-fill at end of file, or a result.
 * -EINTR is requeued. -EAGAIN (io_uring gives it for fds opened
 * O_NONBLOCK, and when it cannot punt) and -EBUSY are finished here by the
 * blocking loop, under the rule's bounded retry, rather than requeued
 * into a spin. */
static void slot_complete(struct uring_run *u, int k, int res)
{
	struct slot *s = &u->s[k];
	struct vc_bio *bio = &u->bios[s->bio];
	if (res > 0) {
		s->done += (uint32_t)res;
		if (s->done < bio->len)
			u->ready[u->nready++] = k;
		else
			slot_finish(u, k, 0);
	} else if (res == 0) {
		if (bio->write) {
			slot_finish(u, k, -EIO);
		} else {
			memset((unsigned char *)bio->buf + s->done, 0, bio->len - s->done);
			slot_finish(u, k, 0);
		}
	} else if (res == -EINTR) {
		u->ready[u->nready++] = k;
	} else if (transient(-res)) {
		slot_finish(u, k, xfer(u->b, bio->write, bio->buf, bio->len, bio->off, s->done));
	} else {
		slot_finish(u, k, res);
	}
}

static void slot_prep(struct uring_run *u, struct io_uring_sqe *sqe, int k)
{
	const struct slot *s = &u->s[k];
	const struct vc_bio *bio = &u->bios[s->bio];
	unsigned char *p = (unsigned char *)bio->buf + s->done;
	if (bio->write)
		io_uring_prep_write(sqe, u->b->fd, p, bio->len - s->done, bio->off + s->done);
	else
		io_uring_prep_read(sqe, u->b->fd, p, bio->len - s->done, bio->off + s->done);
	io_uring_sqe_set_data(sqe, (void *)(uintptr_t)k);
}

static void reap(struct uring_run *u)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;
	io_uring_for_each_cqe(u->ring, head, cqe)
	{
		slot_complete(u, (int)(uintptr_t)io_uring_cqe_get_data(cqe), cqe->res);
		seen++;
	}
	io_uring_cq_advance(u->ring, seen);
	u->inflight -= seen;
}

/* The submit failed in a way retrying will not fix. The SQEs the kernel
 * consumed will complete: wait for exactly those, then finish every
 * request still owed (requeued, never consumed, or not started) with the
 * blocking loop. The caller tears the ring down, which discards the
 * unconsumed SQEs. Returns false if even waiting failed: the requests
 * still in the kernel are then failed with -EIO. */
static bool salvage(struct uring_run *u)
{
	unsigned owed = u->inflight - io_uring_sq_ready(u->ring);
	bool ok = true;
	while (owed > 0) {
		struct io_uring_cqe *cqe;
		int r = io_uring_wait_cqe(u->ring, &cqe);
		if (r == -EINTR || r == -EAGAIN)
			continue;
		if (r < 0) {
			ok = false;
			break;
		}
		u->inflight--;
		owed--;
		slot_complete(u, (int)(uintptr_t)io_uring_cqe_get_data(cqe), cqe->res);
		io_uring_cqe_seen(u->ring, cqe);
	}
	for (int k = 0; k < QD; k++) {
		if (!u->s[k].active)
			continue;
		struct vc_bio *bio = &u->bios[u->s[k].bio];
		/* A slot still active when waiting failed may be in the kernel. */
		slot_finish(u, k, ok ? xfer(u->b, bio->write, bio->buf, bio->len, bio->off, u->s[k].done)
				     : -EIO);
	}
	submit_loop(u->b, u->bios + u->next, u->n - u->next);
	return ok;
}

/* Runs the pending bios on `ring`, keeping up to QD in flight. Returns
 * false when the ring must not be reused. */
static bool submit_uring(struct vc_backing *b, struct io_uring *ring, struct vc_bio *bios,
			 unsigned n)
{
	struct uring_run u = { .b = b, .ring = ring, .bios = bios, .n = n };
	for (int k = 0; k < QD; k++)
		u.freel[u.nfree++] = QD - 1 - k;
	for (;;) {
		while (u.nfree > 0 && u.next < n) {
			unsigned i = u.next++;
			if (bios[i].result != BIO_PENDING)
				continue;
			int k = u.freel[--u.nfree];
			u.s[k] = (struct slot){ .bio = i, .done = 0, .active = true };
			u.ready[u.nready++] = k;
		}
		/* At most QD slots are active and the SQ holds QD entries, so
		 * get_sqe cannot run dry here. */
		while (u.nready > 0) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
			if (!sqe)
				break;
			slot_prep(&u, sqe, u.ready[--u.nready]);
			u.inflight++;
		}
		if (u.inflight == 0 && u.nready == 0 && u.next >= n)
			return true;
		int r = io_uring_submit_and_wait(ring, 1);
		/* EINTR: the wait was interrupted. EAGAIN, EBUSY: the kernel is
		 * short of request memory or has a CQ backlog; reaping and
		 * trying again is the cure. Unconsumed SQEs stay queued and go
		 * with the next submit. */
		if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
			salvage(&u);
			return false;
		}
		reap(&u);
	}
}

#endif /* VC_HAVE_URING */

int vc_backing_submit(struct vc_backing *b, struct vc_bio *bios, unsigned n)
{
	uint64_t t0 = vc_now_ns();
	unsigned todo = 0;
	for (unsigned i = 0; i < n; i++) {
		struct vc_bio *bio = &bios[i];
		if (bio->write && b->readonly)
			bio->result = -EROFS;
		else if (!in_range(b, bio->off, bio->len))
			bio->result = -EINVAL;
		else if (bio->len == 0)
			bio->result = 0;
		else {
			bio->result = BIO_PENDING;
			todo++;
		}
	}

	bool wr = false;
	for (unsigned i = 0; i < n && !wr; i++)
		wr = bios[i].write;
	if (wr) /* as rw: begun before, done after */
		atomic_fetch_add_explicit(&b->writes_begun, 1, memory_order_seq_cst);
	bool ran = false;
#ifdef VC_HAVE_URING
	/* A single request gains nothing from a ring; a caller's store has
	 * no fd to ring. */
	if (todo > 1 && !b->has_store) {
		struct io_uring *ring = ring_get(b);
		if (ring) {
			bool ok = submit_uring(b, ring, bios, n);
			if (!ok)
				atomic_store(&b->no_uring, true);
			ring_put(b, ring, !ok);
			ran = true;
		}
	}
#endif
	if (!ran && todo > 0)
		submit_loop(b, bios, n);

	if (wr)
		atomic_fetch_add_explicit(&b->writes, 1, memory_order_release);
	if (b->latency_ns && todo > 0)
		sleep_ns(b->latency_ns * ((todo + QD - 1) / QD));
	account(b, t0);

	for (unsigned i = 0; i < n; i++) {
		int r = bios[i].result;
		if (r < 0)
			return vc_err(r, "backing %s: request %u of %u (%s of %u bytes at %llu): %s",
				      b->name, i, n, bios[i].write ? "write" : "read", bios[i].len,
				      (unsigned long long)bios[i].off,
				      !in_range(b, bios[i].off, bios[i].len) ? "past the end"
				      : r == -EROFS ? "opened read-only" : strerror(-r));
	}
	return 0;
}

/* --- open, close, sync -------------------------------------------------- */

static const char *file_kind(mode_t m)
{
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISLNK(m))
		return "a symbolic link";
	return "not a file";
}

/* Checks that an adopted fd can do what the cache will ask of it, so that
 * a wrong fd fails here rather than at the first write-back. */
static int check_adopted(int fd, int readonly, const char *name)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return vc_err(-EBADF, "backing %s: not an open file descriptor", name);
	if (fl & O_PATH)
		return vc_err(-EBADF, "backing %s: opened with O_PATH, cannot do I/O", name);
	int acc = fl & O_ACCMODE;
	if (acc == O_WRONLY)
		return vc_err(-EBADF, "backing %s: opened write-only; the cache must read", name);
	if (acc == O_RDONLY && !readonly)
		return vc_err(-EBADF,
			      "backing %s: opened read-only; open it O_RDWR or open the cache read-only",
			      name);
	return 0;
}

/* Size of a regular file or block device; anything else is refused. */
static int probe_size(int fd, const char *name, uint64_t *size, bool *blockdev)
{
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		return vc_err(-e, "backing %s: fstat: %s", name, strerror(e));
	}
	*blockdev = false;
	if (S_ISREG(st.st_mode)) {
		*size = (uint64_t)st.st_size;
		return 0;
	}
	if (S_ISBLK(st.st_mode)) {
		uint64_t sz;
		if (ioctl(fd, BLKGETSIZE64, &sz) < 0) {
			int e = errno;
			return vc_err(-e, "backing %s: BLKGETSIZE64: %s", name, strerror(e));
		}
		*size = sz;
		*blockdev = true;
		return 0;
	}
	if (S_ISDIR(st.st_mode))
		return vc_err(-EISDIR,
			      "backing %s: is a directory; the backing store must be a regular file or a block device",
			      name);
	return vc_err(-EINVAL,
		      "backing %s: is %s; the backing store must be a regular file or a block device",
		      name, file_kind(st.st_mode));
}

int vc_backing_open(const char *path, int fd, int readonly, uint64_t latency_ns,
		    struct vc_backing **out)
{
	if (!out)
		return vc_err(-EINVAL, "backing: no place for the handle");
	*out = NULL;
	if (fd < 0 && !path)
		return vc_err(-EINVAL, "backing: neither a path nor an fd given");

	char fdname[32];
	const char *name = path;
	if (!name) {
		snprintf(fdname, sizeof fdname, "fd %d", fd);
		name = fdname;
	}

	bool own = fd < 0;
	int r;
	if (own) {
		/* O_NONBLOCK so that opening a FIFO cannot hang before we can
		 * refuse it; it is cleared once the file is known to be a file
		 * or block device. */
		int flags = (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
		do
			fd = open(path, flags);
		while (fd < 0 && errno == EINTR);
		if (fd < 0) {
			int e = errno;
			if (e == EISDIR)
				return vc_err(-e,
					      "backing %s: is a directory; the backing store must be a regular file or a block device",
					      path);
			return vc_err(-e, "backing %s: cannot open %s: %s%s", path,
				      readonly ? "read-only" : "read-write", strerror(e),
				      (e == EACCES || e == EROFS) && !readonly
					      ? " (open the cache read-only to use it without writes)"
					      : "");
		}
	} else {
		r = check_adopted(fd, readonly, name);
		if (r < 0)
			return r;
	}

	uint64_t size = 0;
	bool blockdev = false;
	r = probe_size(fd, name, &size, &blockdev);
	if (r == 0 && own) {
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
			int e = errno;
			r = vc_err(-e, "backing %s: fcntl: %s", name, strerror(e));
		}
	}
	struct vc_backing *b = NULL;
	if (r == 0) {
		b = calloc(1, sizeof *b + strlen(name) + 1);
		if (!b)
			r = vc_err(-ENOMEM, "backing %s: out of memory", name);
	}
#ifdef VC_HAVE_URING
	if (r == 0) {
		int e = pthread_mutex_init(&b->pool_mu, NULL);
		if (e) {
			free(b);
			r = vc_err(-e, "backing %s: pthread_mutex_init: %s", name, strerror(e));
		}
	}
#endif
	if (r < 0) {
		if (own)
			close(fd);
		return r;
	}
	b->fd = fd;
	b->own_fd = own;
	b->readonly = readonly != 0;
	b->blockdev = blockdev;
	b->size = size;
	b->latency_ns = latency_ns;
	atomic_init(&b->wait_ns, 0);
	atomic_init(&b->writes, 0);
	atomic_init(&b->writes_begun, 0);
#ifdef VC_HAVE_URING
	atomic_init(&b->no_uring, false);
#endif
	strcpy(b->name, name);
	*out = b;
	return 0;
}

int vc_backing_open_store(const struct vc_store *store, int readonly, uint64_t latency_ns,
			  struct vc_backing **out)
{
	static const char name[] = "(caller's store)";
	struct vc_backing *b = calloc(1, sizeof *b + sizeof name);
	if (!b)
		return vc_err(-ENOMEM, "backing: out of memory");
#ifdef VC_HAVE_URING
	int e = pthread_mutex_init(&b->pool_mu, NULL);
	if (e) {
		free(b);
		return vc_err(-e, "backing: pthread_mutex_init: %s", strerror(e));
	}
	atomic_init(&b->no_uring, true);
#endif
	b->fd = -1;
	b->has_store = true;
	/* Copied as far as the caller's struct reaches (it may be older). */
	memcpy(&b->store, store, store->size < sizeof b->store ? store->size : sizeof b->store);
	b->readonly = readonly != 0;
	b->size = store->bytes;
	b->latency_ns = latency_ns;
	atomic_init(&b->wait_ns, 0);
	atomic_init(&b->writes, 0);
	atomic_init(&b->writes_begun, 0);
	strcpy(b->name, name);
	*out = b;
	return 0;
}

void vc_backing_close(struct vc_backing *b)
{
	if (!b)
		return;
#ifdef VC_HAVE_URING
	for (int i = 0; i < b->npool; i++) {
		io_uring_queue_exit(b->pool[i]);
		free(b->pool[i]);
	}
	pthread_mutex_destroy(&b->pool_mu);
#endif
	if (b->own_fd)
		close(b->fd);
	free(b);
}

uint64_t vc_backing_size(const struct vc_backing *b)
{
	return b->size;
}

void vc_backing_resize(struct vc_backing *b, uint64_t size)
{
	b->size = size;
}

int vc_backing_sync(struct vc_backing *b)
{
	return vc_backing_sync_range(b, 0, 0);
}

/* One try of a sync: 0 or a negative code as the store gave it. */
static int sync_once(struct vc_backing *b, uint64_t off, uint64_t len)
{
	if (b->has_store)
		return b->store.sync(b->store.ctx, off, len);
	/* fdatasync on a block device would do, but fsync is the documented
	 * way to flush a device's write cache on every kernel we meet. */
	return (b->blockdev ? fsync(b->fd) : fdatasync(b->fd)) < 0 ? -errno : 0;
}

int vc_backing_sync_range(struct vc_backing *b, uint64_t off, uint64_t len)
{
	uint64_t t0 = vc_now_ns(), pause = STORE_RETRY_PAUSE_NS, waited = 0;
	int r;
	while ((r = sync_once(b, off, len)) < 0 && r > -4096 && retry_after(-r, &pause, &waited))
		;
	account(b, t0);
	if (r < 0)
		return vc_err(final_err(r), "backing %s: %s: %s", b->name,
			      b->has_store ? "sync" : b->blockdev ? "fsync" : "fdatasync", err_text(r));
	return 0;
}

uint64_t vc_backing_writes(const struct vc_backing *b, uint64_t *begun)
{
	uint64_t done = atomic_load_explicit(&b->writes, memory_order_seq_cst);
	if (begun)
		*begun = atomic_load_explicit(&b->writes_begun, memory_order_seq_cst);
	return done;
}

uint64_t vc_backing_wait_ns(const struct vc_backing *b)
{
	return atomic_load_explicit(&b->wait_ns, memory_order_relaxed);
}

int vc_backing_extent(struct vc_backing *b, uint64_t off, uint64_t *end, bool *hole)
{
	*end = b->size;
	*hole = false;
	if (b->blockdev || b->has_store)
		return 0;
	/* lseek moves the fd's offset, which nothing here uses (pread and
	 * pwrite take their own), so threads may call this at once. */
	off_t d = lseek(b->fd, (off_t)off, SEEK_DATA);
	if (d < 0) {
		if (errno == ENXIO) { /* no data at or after off: a hole to the end */
			*hole = true;
			return 0;
		}
		if (errno == EINVAL || errno == EOPNOTSUPP)
			return 0; /* cannot say: data */
		int e = errno;
		return vc_err(-e, "backing %s: lseek(SEEK_DATA): %s", b->name, strerror(e));
	}
	if ((uint64_t)d > off) {
		*hole = true;
		*end = (uint64_t)d < b->size ? (uint64_t)d : b->size;
		return 0;
	}
	off_t h = lseek(b->fd, (off_t)off, SEEK_HOLE);
	if (h < 0) {
		int e = errno;
		return vc_err(-e, "backing %s: lseek(SEEK_HOLE): %s", b->name, strerror(e));
	}
	if ((uint64_t)h > off && (uint64_t)h < b->size)
		*end = (uint64_t)h;
	return 0;
}
