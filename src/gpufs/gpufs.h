/* GPUfs's host half (docs/GPUFS.md): a front end over the public API and
 * the engine's GPUfs room (engine/gpufs.h).
 *
 *   host.c   the context: create, release, destroy, stats, and the
 *            request ring's service threads
 *   files.c  the file table: opens by path (close-to-open), syncs, closes
 *   revoke.c the reaper: the unpin ring's drains and the revoke passes
 *   direct.c direct reads from the OS page cache, and hinted admissions
 *   emu.c    the emulated device's runner
 *
 * Lock rules. g->mu guards the ring's head (which tickets a service thread
 * takes) and the file table's slots (open, close); a file's rw lock is
 * taken shared by its reads and writes and exclusive by what changes its
 * size or drops its pages (truncate, a reopen that found it changed). The
 * engine is called with neither g->mu held, so an engine sleep never
 * blocks another service thread's ticket claims. Order: f->rw, then g->mu.
 */
#ifndef VC_GPUFS_HOST_H
#define VC_GPUFS_HOST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <time.h>

#include "vramcache.h"
#include "vramcache/gpufs.h"

struct gfs_file {
	char *path;      /* NULL: the slot is free */
	int fd;          /* the host fd (the volume does not close it) */
	vc_volume *v;
	uint32_t flags;  /* VC_GO_RDWR when writable */
	uint32_t version;
	int opens;
	/* Close-to-open: the file's stat as of the last open or our last
	 * change, and the cache's writes to it then (eng_gfs_writes): a stat
	 * that differs while that count stayed put is someone else's change.
	 * Under stmu (taken inside rw, never across an engine call). */
	struct stat st;
	uint64_t wseen;
	pthread_mutex_t stmu;
	_Atomic uint64_t synced; /* eng_gfs_writes as of the last backing sync */
	pthread_rwlock_t rw;
	/* Direct reads (direct.c; set once under rw exclusive, dlen only
	 * shrinks, under rw exclusive): the read-only mapping, its device
	 * address, the bytes the device may read from it, and the device's
	 * bitmap of pages cached at the open. */
	void *map;
	uint64_t map_len, dmap, dlen, res_dev;
	uint32_t *res_host; /* the host's copy of res (bits it set; under admit_mu) */
	bool dstale;        /* changed outside since the mapping: no direct reads
			       until vc_gpufs_open maps it again */
};

struct vc_gpufs {
	vc_cache *c;
	struct vc_device *dev;
	bool emu;
	bool quiet; /* holds the engine's quiet mode (VC_GPUFS_QUIET=off: not) */
	struct vc_gfs_ctx ctx; /* device-visible addresses */
	/* host views */
	struct vc_gfs_req *ring, *uring;
	unsigned char *data;
	uint64_t uhead; /* the unpin ring's next ticket (the reaper's alone) */
	void *ring_mem;                /* host_alloc'ed: ring, then data */
	uint64_t ctl_dev, tab_dev, files_dev;
	uint32_t nring, ntab;
	uint32_t page_shift;
	/* The revoke pass's output, mapped: ids, then the count, then the
	 * number of the pass done (ctx.rev). */
	uint32_t *rev;
	uint64_t rev_dev;
	void *rev_stream; /* CUDA: the context's non-blocking stream (gpufs.c) */
	/* The pass in progress (the reaper's; under revoke_mu): its number
	 * (ctl.rev_req), when it was asked for, whether the fallback kernel
	 * (emu: the reaper itself) was sent after it; rev_seen: ctl.rev_n as
	 * of the last pass taken (its ids end there). sig: the pinned
	 * words the host copies to ctl.rev_sel and ctl.rev_req (CUDA),
	 * unchanged while a pass runs. */
	struct {
		uint32_t sel[VC_GFS_BUCKETS / 32];
		uint32_t gen;
	} *sig;
	uint64_t sig_dev;
	uint64_t ack_dev; /* ctx.ack: the request ring's ack words (device memory) */
	uint32_t rev_gen, rev_seen;
	uint32_t rev_eighth; /* the eighth of the buckets the next room pass takes */
	uint64_t rev_stalls; /* the engine's pin stalls as of the last pass chosen */
	uint32_t rev_resource; /* looks in a row that found resource sleepers */
	bool rev_active, rev_fallback;
	uint64_t rev_t0;

	pthread_mutex_t mu;
	uint64_t head; /* next ticket to serve (under mu) */
	_Atomic uint32_t busy; /* service threads working on tickets */
	struct gfs_file files[VC_GFS_MAX_FILES];

	_Atomic uint32_t *held;    /* engine pins held, per page id */
	uint64_t npool;
	_Atomic uint64_t ncached, nheld;
	uint32_t max_cached;
	bool no_direct;       /* VC_GPUFS_NO_DIRECT */
	/* The hint ring (ctx.hints; mapped), its next slot to take, and the
	 * lock of one admitter at a time (admit_mu: hint_head, res_host). */
	uint64_t *hints;
	uint32_t nhint;
	uint64_t hint_head;
	pthread_mutex_t admit_mu;
	uint64_t direct_max;  /* a file's bytes at most, for direct reads */
	uint64_t direct_done; /* ctl.direct summed over released kernels' runs */
	_Atomic bool stop;
	_Atomic bool want_revoke;
	pthread_t *svc;
	uint32_t nsvc;
	pthread_t reaper;
	bool reaper_on;
	pthread_mutex_t revoke_mu; /* one revoke pass at a time */

	struct {
		_Atomic uint64_t requests, batches, gets, get_cached, revokes, revoked, writes, opens;
		_Atomic uint64_t rev_fallbacks, miss_rounds, miss_pages, reopen_drops, syncs;
		_Atomic uint64_t direct_files, admitted;
		_Atomic uint64_t pass_t0; /* the pass in progress's start (0: none), for stats */
	} st;
};

/* Helpers of host.c and revoke.c. Sleep ns nanoseconds; a ring word read
 * with acquire, written with release (the device's side of the ring pairs
 * with them). */
static inline void gfs_nap(long ns)
{
	struct timespec ts = { 0, ns };
	nanosleep(&ts, NULL);
}

static inline uint64_t gfs_ld64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void gfs_st64(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* files.c: the file table. Open: an open of path, as vc_gpufs_open or a
 * kernel's vc_gopen asks; the fd or -errno, *out the file (also when a
 * reopen failed to drop or resize: then the opens count is unchanged).
 * Takes g->mu and f->rw itself (neither held by the caller) and may sleep
 * in the engine (close-to-open drops). Restat: records f's stat as our own
 * change (f->rw held, exclusive where the size changed). Sync: f's writes,
 * durable; 0 or -errno (f->rw held shared). Of: the open file of fd, or
 * NULL (takes g->mu). Close: one close, which flushes; the opens left or
 * -errno (takes f->rw shared, then g->mu; neither held by the caller). */
int gfs_file_open(struct vc_gpufs *g, const char *path, int flags, struct gfs_file **out);
void gfs_file_restat(struct gfs_file *f);
int gfs_file_sync(struct vc_gpufs *g, struct gfs_file *f);
struct gfs_file *gfs_file_of(struct vc_gpufs *g, uint32_t fd);
int gfs_file_close(struct vc_gpufs *g, struct gfs_file *f);

/* revoke.c: the reaper. Main: the reaper thread (arg: the context) until
 * g->stop; it takes revoke_mu for each look. Drain unpins: serves the
 * unpin ring's published requests, dropping their pins (revoke_mu held;
 * never sleeps in the engine). Pass settle: at release, after the user's
 * kernels ended, leaves no revoke pass in progress and resets the pass
 * words (revoke_mu held; waits for a fallback kernel still running). */
void *gfs_reaper_main(void *arg);
void gfs_drain_unpins(struct vc_gpufs *g);
void gfs_pass_settle(struct vc_gpufs *g);

/* direct.c: a file's direct reads. Open: maps and registers f (rw held
 * exclusive, between kernels) when the context allows and f is read-only,
 * again if it went stale; 0 also when it does not (then there are none),
 * -errno on a device error. Stale: no more direct reads of f (rw held
 * exclusive: it changed outside the cache, and pages the registration
 * pins may have left the file). Close: undoes open. Admit: loads pages
 * that warps hinted into the GPU tier and marks them in their files' res
 * (a service thread with nothing to serve); whether it found hints. */
int gfs_direct_open(struct vc_gpufs *g, struct gfs_file *f);
void gfs_direct_stale(struct vc_gpufs *g, struct gfs_file *f);
void gfs_direct_close(struct vc_gpufs *g, struct gfs_file *f);
bool gfs_admit(struct vc_gpufs *g);

#endif
