/* `vramcache mount SRC MNT`: a caching FUSE overlay. MNT shows SRC's tree;
 * file data goes through the cache (host and GPU tiers), page by page on
 * demand, while everything else (names, attributes, directories, links,
 * extended attributes) passes through to SRC. A front end: it uses the
 * public API only (vramcache.h), as src/nbd/ does. docs/MOUNT.md tells the
 * story; this header holds the state, the lock rules, and the prototypes
 * each file exports, grouped by the file that owns them.
 *
 * Files (src/fuse/):
 *   inode.c     the inode table: one O_PATH fd into SRC per inode the
 *               kernel knows, by (dev, ino), with its lookup count
 *   ident.c     cache identities: one engine volume per regular file
 *               (dev, ino) opened, kept after its last close in an LRU of
 *               idle identities, revalidated on open (close-to-open)
 *   ops_meta.c  the operations that pass through: lookup, attributes,
 *               directories, links, rename, statfs, xattrs
 *   ops_data.c  create, open, read, write, flush, fsync, release,
 *               fallocate: file data through the identity's volume
 *   readahead.c sequential streams per handle and per file, prefetched
 *               into the host tier by worker threads
 *   mount.c     options to a session: the cache, the mount, the
 *               multi-threaded loop, the teardown
 *   stats.c     per-file and per-directory statistics (an xattr)
 *
 * The identity of a file's cached pages is an engine volume over an fd of
 * the file (O_RDWR where SRC allows it), not the handle the application
 * opened: a volume outlives its handles, so a file opened again finds the
 * pages it left. At most max_files identities hold a volume (the engine's
 * VC_VOLUMES_MAX - 1, volume 0 being an empty placeholder); past that the
 * least recently closed idle one is closed (its pages written back and
 * dropped), and when every one is in use a file is served uncached
 * (pread/pwrite on its fd) until a slot frees. Files never opened cost
 * nothing: no identity, no fd beyond the inode's O_PATH one.
 *
 * Lock rules.
 *   fs->ino_mu   the inode table (hash chains, lookup counts). Leaf.
 *   fs->id_mu    the identity table: the hash, the LRU, refs, the volume
 *                count; also serializes every vc_volume_open and
 *                vc_volume_close (the engine's rule: not concurrent with
 *                each other). May be taken while holding an identity's lk
 *                (an upgrade to read-write swaps the volume), so nobody
 *                holding it ever waits for an lk: the identities it closes
 *                are idle (refs 0: nobody holds or waits for their lk).
 *   id->lk       a rwlock per identity. Shared: reads and writes inside
 *                the file's size, prefetches. Exclusive: whatever changes
 *                the volume's size or drops its pages (extending writes,
 *                truncate, fallocate, revalidation), so the engine's rule
 *                for vc_volume_resize (no other call on the volume) holds.
 *                id->size, id->seen and id->vol change only under it
 *                exclusive. An identity with refs > 0 is not closed.
 *   ra mutexes   a stream table's own (readahead.c); leaves.
 *   rq.mu        the prefetch queue; taken alone.
 */
#ifndef VC_FUSE_FS_H
#define VC_FUSE_FS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "vramcache.h"

/* How often a file is checked against SRC (vc_fuse_opts.revalidate_ms). */
#define FS_REVALIDATE_OPEN (-1) /* on open only: close-to-open (default) */
#define FS_REVALIDATE_NEVER (-2) /* never: SRC changes only through the mount */

struct vc_fuse_opts {
	const char *src, *mnt;
	struct vc_config cfg; /* the engine's; backing_* set by mount.c */
	int revalidate_ms;    /* FS_REVALIDATE_* or >= 0: also on a read when the last check
				 is older than this many ms (0: every read) */
	double attr_timeout;  /* seconds the kernel may keep attributes and names */
	bool kernel_cache;    /* keep the kernel's page cache across opens of an unchanged file */
	bool passthrough;     /* no cache: every file uncached (a benchmark's FUSE-only baseline) */
	bool readonly;
	bool allow_other;
	bool foreground;
	unsigned max_files;   /* identities with a volume: 1 .. VC_VOLUMES_MAX - 1 */
	unsigned threads;     /* FUSE worker threads at most */
	uint64_t readahead;   /* bytes prefetched ahead of a sequential stream; 0: off */
	const char *pidfile;
	const char *stat_socket;
};

/* Runs the mount until it is unmounted or signalled. Returns the exit
 * status for main (0, or 1 with the reason on stderr). */
int vc_fuse_main(const struct vc_fuse_opts *o);

/* --- inode.c --- */
struct fs_inode {
	int fd; /* O_PATH | O_NOFOLLOW into SRC; never followed out of it */
	dev_t dev;
	ino_t ino;
	mode_t type;      /* S_IFMT bits */
	uint64_t nlookup; /* the kernel's references (under ino_mu) */
	struct fs_inode *next;
};

/* A stream table (readahead.c): the last few sequential readers. */
#define RA_STREAMS 4
struct fs_ra {
	pthread_mutex_t mu;
	unsigned n; /* slots in use: 1 for a handle, RA_STREAMS for a file */
	struct ra_stream {
		uint64_t next;  /* where the stream's next read should start */
		uint64_t ahead; /* prefetched (or queued) up to here */
		uint32_t run;   /* reads in a row that continued it */
		uint64_t used;  /* fs->ra_clock at last use: the LRU slot goes */
	} s[RA_STREAMS];
};

/* What SRC said of a file when we last looked: a change of any of these
 * behind our back means the cached pages may be stale. */
struct fs_seen {
	uint64_t size;
	struct timespec mtime, ctime;
};

struct fs_ident {
	dev_t dev;
	ino_t ino;
	int fd;          /* the file itself, O_RDWR (or O_RDONLY: ro) */
	bool ro;
	vc_volume *vol;  /* NULL: served uncached (no volume slot was free) */
	pthread_rwlock_t lk;
	uint64_t size;   /* the volume's size = the file's, as we keep it (lk) */
	struct fs_seen seen;
	_Atomic uint64_t checked_ns; /* last check against SRC (revalidate_ms) */
	_Atomic bool wrote;          /* written through us since `seen` was taken */
	unsigned refs;   /* open handles and queued prefetches (id_mu) */
	bool gone;       /* unlinked: freed, not kept, at the last put (id_mu) */
	struct fs_ident *hnext, *prev, *lnext; /* hash chain; LRU (idle only) */
	struct fs_ra ra;
	/* Statistics (vramcache stat): bytes read through the mount, bytes
	 * of them whose pages were all in the host tier (a hit there), and
	 * bytes prefetched. */
	_Atomic uint64_t rd_bytes, rd_host_bytes, wr_bytes, ra_bytes, opens, drops;
};

/* An open file (fi->fh). */
struct fs_handle {
	struct fs_ident *id;
	_Atomic bool wrote; /* concurrent writes on one handle set it */
	struct fs_ra ra; /* one slot: this handle's stream */
};

struct fs_prefetch {
	struct fs_ident *id;
	uint64_t off, len;
};

/* Prefetch jobs queued at most: a ring this long, drops when full. 64 jobs
 * of a readahead window each keep two workers busy for tens of ms, long
 * past the kernel's own readahead; more queued would be stale by then. */
#define RQ_LEN 64
/* Prefetch worker threads: 2 overlap one stream's SRC reads with another's. */
#define RQ_WORKERS 2

struct fs {
	const struct vc_fuse_opts *o;
	vc_cache *c;
	struct fuse_session *se;
	int proc_fd; /* /proc/self/fd, to reopen O_PATH fds */

	pthread_mutex_t ino_mu;
	struct fs_inode root;
	struct fs_inode **ino_hash;
	size_t ino_nbuckets, ino_count;

	pthread_mutex_t id_mu;
	struct fs_ident **id_hash;
	size_t id_nbuckets, id_count;
	struct fs_ident *lru_head, *lru_tail; /* idle identities, most recent first */
	unsigned nvols; /* identities holding a volume */
	_Atomic uint64_t ids_evicted, ids_uncached;

	_Atomic uint64_t ra_clock;
	struct {
		pthread_mutex_t mu;
		pthread_cond_t cv;
		struct fs_prefetch q[RQ_LEN];
		unsigned head, n;
		bool stop;
		pthread_t tid[RQ_WORKERS];
		unsigned nthreads;
		_Atomic uint64_t queued, dropped;
	} rq;
};

/* --- inode.c --- */
int fs_inode_init(struct fs *fs, const char *src);
void fs_inode_fini(struct fs *fs);
struct fs_inode *fs_inode(struct fs *fs, fuse_ino_t ino);
/* The inode of fd (O_PATH, ours now) with attributes st: found (fd is
 * closed) or added; one lookup counted. NULL: out of memory (fd closed). */
struct fs_inode *fs_inode_get(struct fs *fs, int fd, const struct stat *st);
void fs_inode_forget(struct fs *fs, struct fs_inode *in, uint64_t n);
/* "/proc/self/fd/N"-relative name of an inode's fd, for calls that take
 * no fd (relative to fs->proc_fd). */
void fs_inode_name(const struct fs_inode *in, char buf[16]);

/* --- ident.c --- */
int fs_ident_init(struct fs *fs);
/* Closes every identity (writing dirty pages back). 0 or the first error. */
int fs_ident_fini(struct fs *fs);
/* The identity of regular file `in`, with one reference, revalidated
 * against SRC (close-to-open); write: it must be writable (-EROFS,
 * -EACCES... from SRC otherwise). *changed: the file changed behind our
 * back since the last look (the kernel's page cache must go too). */
int fs_ident_open(struct fs *fs, struct fs_inode *in, bool write, struct fs_ident **out,
		  bool *changed);
/* Drops a reference; the last one parks the identity in the LRU (or frees
 * it: unlinked, or no volume). */
void fs_ident_put(struct fs *fs, struct fs_ident *id);
/* The identity of (dev, ino) if there is one, referenced; else NULL with
 * fs->id_mu HELD, so that the caller can change the file in SRC before
 * any identity of it appears (then fs_ident_unlock_table). */
struct fs_ident *fs_ident_find_or_lock(struct fs *fs, dev_t dev, ino_t ino);
void fs_ident_unlock_table(struct fs *fs);
/* SRC's file (dev, ino) lost a name: if that was its last one and the
 * identity is idle, it is freed (dirty pages discarded) now, else at its
 * last put. */
void fs_ident_unlinked(struct fs *fs, dev_t dev, ino_t ino);
/* With id->lk held exclusive: compares SRC's file with id->seen and, if
 * it changed, drops every cached page (written back first if dirty) and
 * takes the new size. 1 changed, 0 not, -errno. */
int fs_ident_check_locked(struct fs *fs, struct fs_ident *id);
/* With id->lk held exclusive, after a change made through us: id->seen
 * becomes SRC's file as it is now. */
void fs_ident_seen_locked(struct fs_ident *id);
/* The strict mode (revalidate_ms >= 0): called by reads with nothing
 * held; checks when the last check is older than the limit. */
void fs_ident_maybe_check(struct fs *fs, struct fs_ident *id);
/* Changes the file's size: the volume first (a shrink drops pages past
 * the end), then SRC's file. id->lk held exclusive. 0 or -errno. */
int fs_ident_truncate_locked(struct fs *fs, struct fs_ident *id, uint64_t size);

/* --- readahead.c --- */
int fs_ra_init(struct fs *fs);
void fs_ra_fini(struct fs *fs);
void fs_ra_table_init(struct fs_ra *ra, unsigned n);
void fs_ra_table_fini(struct fs_ra *ra);
/* A read of [off, off+len) through handle h: queues a prefetch when it
 * continues a sequential stream of the handle or of the file. */
void fs_ra_note(struct fs *fs, struct fs_handle *h, uint64_t off, uint64_t len);

/* --- ops_meta.c, ops_data.c --- */
void fs_ops_meta(struct fuse_lowlevel_ops *ops);
void fs_ops_data(struct fuse_lowlevel_ops *ops);
/* The identity of a regular file that may be open (setattr's truncate),
 * and an fd of it for calls that need one. */
struct fs *fs_of(fuse_req_t req);
/* Reply helpers: the entry for an object just created or looked up. */
int fs_lookup_entry(struct fs *fs, struct fs_inode *parent, const char *name,
		    struct fuse_entry_param *e);

/* --- stats.c --- */
/* The extended attribute that answers with a file's or directory's
 * statistics (vramcache stat PATH). */
#define FS_STATS_XATTR "user.vramcache.stats"
/* Its value: JSON, malloc'd; NULL without memory. */
char *fs_stats_json(struct fs *fs, struct fs_inode *in);

#endif
