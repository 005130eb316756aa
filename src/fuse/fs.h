/* `vramcache mount SRC MNT`: a caching FUSE overlay. MNT shows SRC's tree;
 * file data goes through the cache (host and GPU tiers), page by page on
 * demand, while everything else (names, attributes, directories, links,
 * extended attributes) passes through to SRC. A front end: it uses the
 * public API only (vramcache.h), as src/nbd/ does. docs/MOUNT.md tells the
 * story; this header holds the state, the lock rules, and the prototypes
 * each file exports, grouped by the file that owns them.
 *
 * Files (src/fuse/):
 *   inode.c     the inode table: each inode the kernel knows by its key
 *               (dev, ino, file handle), its lookup count, and an O_PATH
 *               fd into SRC while in use or recently used (reopened by
 *               its handle: the fds held do not grow with the tree)
 *   ident.c     cache identities: one per regular file (dev, ino) opened,
 *               with a slot for its pages, kept after its last close in an
 *               LRU of idle identities, revalidated on open (close-to-open)
 *   slots.c     the files volumes: each identity's pages in a slot (a
 *               fixed 1 TiB range) of a volume whose store is ours, so the
 *               engine's volume table does not bound the files cached
 *   fdcache.c   the fds of files, opened on demand and at most max_fds
 *               kept; the slot -> identity table the stores' I/O uses
 *   ops_meta.c  the operations that pass through: lookup, attributes,
 *               directories, links, rename, statfs, xattrs
 *   ops_data.c  create, open, read, write, flush, fsync, release,
 *               fallocate: file data through the identity's volume
 *   readahead.c sequential streams per handle and per file, prefetched
 *               into the host tier by worker threads
 *   mount.c     options to a session: the cache, the mount, the
 *               multi-threaded loop, the teardown
 *   stop.c      the end: signals (the first writes back while serving),
 *               an unmount from outside, the write-back before exit, the
 *               forced end's watchdog, reports of what SRC lacks by file
 *   stats.c     per-file and per-directory statistics (an xattr)
 *
 * The identity of a file's cached pages is a slot of a files volume
 * (slots.c), not the handle the application opened: it outlives its
 * handles, so a file opened again finds the pages it left. Identities are
 * kept up to max_files (a few hundred bytes each, no fd); past that the
 * least recently closed idle one goes (its pages dropped). Its fd is the
 * fd cache's to open and close (fdcache.c). Files never opened cost
 * nothing: no identity, and no fd once the inode's O_PATH one is closed.
 *
 * Lock rules.
 *   fs->ino_mu   the inode table (hash chains, lookup counts, the
 *                inodes' fds, users and fd LRU). Leaf.
 *   fs->id_mu    the identity table: the hash, the LRU, refs, the slots
 *                (slots.c); also serializes every vc_volume_open (the
 *                engine's rule: not concurrent with each other). Nobody
 *                holding it waits for an lk or calls the engine but to
 *                open a volume; identities leave the table under it and
 *                their pages are dropped after it is released.
 *   fs->fd_mu    the fd cache: each identity's fd, fd_users, ro, the fd
 *                LRU, the slot table. Taken by the stores' callbacks
 *                (from any engine thread), so nobody calls the engine
 *                holding it; inside it only ino_mu (a reopen).
 *   id->lk       a rwlock per identity. Shared: reads and writes inside
 *                the file's size, prefetches. Exclusive: whatever changes
 *                the volume's size or drops its pages (extending writes,
 *                truncate, fallocate, revalidation), so the engine's rule
 *                for vc_volume_resize (no other call on the volume) holds.
 *                id->size, id->seen and id->vol change only under
 *                it exclusive (id->size is atomic besides: the write
 *                callback clips at it). An identity with refs > 0 is not
 *                freed, and its slot's pages are dropped before it is.
 *   ra mutexes   a stream table's own (readahead.c); leaves.
 *   rq.mu        the prefetch queue; taken alone.
 *   stop.mu      the end's state (stop.c); a leaf.
 *   stop.report_mu  held while a report reads the volumes and identities
 *                (it takes id_mu and fd_mu inside, and calls the engine),
 *                and to set stop.closing before the teardown frees them.
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
	bool kernel_writeback; /* ask for the kernel's write-back cache (FUSE_CAP_WRITEBACK_CACHE) */
	bool passthrough;     /* no cache: every file uncached (a benchmark's FUSE-only baseline) */
	bool readonly;
	bool allow_other;
	bool foreground;
	unsigned max_files;   /* identities kept (with their cached pages) at most */
	unsigned max_fds;     /* fds of files kept open (fdcache.c), beyond those in use */
	unsigned max_path_fds; /* idle O_PATH fds of inodes kept (inode.c) */
	bool no_handles;      /* never use file handles (every inode holds its fd) */
	unsigned slots_per_volume; /* 0, or fewer slots a files volume (tests: many volumes) */
	unsigned threads;     /* FUSE worker threads at most */
	uint64_t readahead;   /* bytes prefetched ahead of a sequential stream; 0: off */
	const char *pidfile;
	const char *stat_socket;
};

/* Runs the mount until it is unmounted or signalled. Returns the exit
 * status for main (0, or 1 with the reason on stderr). */
int vc_fuse_main(const struct vc_fuse_opts *o);

/* --- inode.c --- */
/* A file's key in SRC: (dev, ino) and, where SRC gives file handles, its
 * handle (name_to_handle_at), which names the inode's generation too: a
 * file deleted in SRC and another created with its inode number have
 * other keys. fh_len 0: no handle (SRC gives none, or the object is on
 * another mount under SRC). fh points to the owner's bytes. */
#define FS_FH_MAX 128 /* MAX_HANDLE_SZ */
struct fs_key {
	dev_t dev;
	ino_t ino;
	int fh_type;
	unsigned fh_len;
	unsigned char *fh;
};
/* A key with room for its handle (on the stack). */
struct fs_keybuf {
	struct fs_key k;
	unsigned char b[FS_FH_MAX];
};

struct fs_inode {
	/* O_PATH | O_NOFOLLOW into SRC, never followed out of it; -1 when
	 * closed (only with a handle to reopen it). Under ino_mu. */
	int fd;
	unsigned users;   /* calls and open handles using fd (ino_mu) */
	struct fs_key key; /* its handle's bytes follow the struct */
	mode_t type;      /* S_IFMT bits */
	uint64_t nlookup; /* the kernel's references (under ino_mu) */
	struct fs_inode *next;
	struct fs_inode *fprev, *fnext; /* the LRU of idle fds (ino_mu) */
	/* The kernel's write-back cache (fs->kwb): a regular file's size and
	 * mtime as the kernel holds them (it takes them from us only when it
	 * makes the inode): SRC's at the lookup that made it, then after each
	 * change made through the mount. Under ino_mu. */
	uint64_t ksize;
	struct timespec kmtime;
	bool unhashed; /* replaced by another inode of its key (fs_inode_renew) */
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
	struct timespec mtime, ctime, btime; /* btime: 0 where SRC keeps none */
	uint32_t gen; /* FS_IOC_GETVERSION where SRC has it, else 0 */
};

struct fs_ident {
	struct fs_key key; /* its handle's bytes follow the struct */
	/* The fd cache's (fd_mu): the file itself, O_RDWR (or O_RDONLY: ro),
	 * or -1 (reopened on demand); calls using it now; the fd LRU. */
	int fd;
	bool ro;
	unsigned fd_users;
	struct fs_ident *fprev, *fnext;
	/* Where its pages are: bytes [base, base + FS_SLOT_BYTES) of vol,
	 * slot `slot` (slots.c). vol NULL: served uncached (passthrough, or
	 * larger than a slot); the slot stays its own until it is freed. */
	vc_volume *vol;
	uint64_t base;
	uint32_t slot;   /* FS_NO_SLOT: none */
	pthread_rwlock_t lk;
	_Atomic uint64_t size; /* the file's, as we keep it (changed under lk) */
	struct fs_seen seen;
	_Atomic uint64_t checked_ns; /* last check against SRC (revalidate_ms) */
	_Atomic bool wrote;          /* written through us since `seen` was taken */
	/* Writes begun through the cache, and that count when the last good
	 * flush began: equal, no dirty page (write-back; fdcache.c). */
	_Atomic uint64_t wgen, cgen;
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
	struct fs_inode *in; /* its fd held open (fs_inode_fd) until release */
	_Atomic bool wrote; /* concurrent writes on one handle set it */
	bool writable;      /* opened for writing */
	struct fs_ra ra; /* one slot: this handle's stream */
	struct fs_handle *hprev, *hnext; /* fs->open_handles, under fs->h_mu */
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

/* A file's slot (slots.c): 1 TiB of a files volume. Files larger are
 * served uncached. */
#define FS_SLOT_SHIFT 40
#define FS_SLOT_BYTES (1ull << FS_SLOT_SHIFT)
#define FS_NO_SLOT UINT32_MAX

struct fs;
/* A files volume: the store's context (slots.c). */
struct fs_fvol {
	struct fs *fs;
	vc_volume *vol;
	uint32_t first; /* its first slot */
};

/* The end (stop.c). Under mu but loop_done, main_tid and sig_tid (set
 * before the threads that read them start). */
struct fs_stop {
	pthread_mutex_t mu, report_mu;
	pthread_cond_t cv;     /* a signal forced the end, or the flusher is done */
	pthread_t main_tid;    /* the loop's thread: kicked to end it */
	pthread_t sig_tid, flusher;
	unsigned signals;      /* taken so far */
	int first_sig;
	bool inited, started;  /* fs_stop_init ran; the signal thread runs */
	bool serving;          /* the loop runs (fs_stop_start to fs_stop_loop_done) */
	bool flushing;         /* the first signal's write-back runs */
	bool flusher_joinable;
	bool forced;           /* ending whatever SRC says: the watchdog runs */
	bool closing;          /* under report_mu: no more reports */
	_Atomic bool loop_done;
};

struct fs {
	const struct vc_fuse_opts *o;
	const char *mnt; /* MNT's real path */
	vc_cache *c;
	struct fuse_session *se;
	int proc_fd; /* /proc/self/fd, to reopen O_PATH fds */
	/* The kernel's write-back cache is on (asked for and granted at
	 * init, before any request): writes reach us late, in pages, through
	 * any handle open for writing; the kernel keeps a file's size and
	 * times (ops_data.c). Atomic: set by the init request's thread. */
	_Atomic bool kwb;

	/* The open handles (ops_data.c): those the kernel never releases (a
	 * file still open when the mount ends) are freed at the end. */
	pthread_mutex_t h_mu;
	struct fs_handle *open_handles;

	pthread_mutex_t ino_mu;
	struct fs_inode root;
	struct fs_inode **ino_hash;
	size_t ino_nbuckets, ino_count;
	bool handles;   /* SRC gives file handles that open again */
	int mount_fd;   /* SRC's root, for open_by_handle_at */
	int mount_id;   /* SRC's mount (name_to_handle_at's) */
	struct fs_inode *ino_lru_head, *ino_lru_tail; /* idle fds, most recent first */
	unsigned ino_fds, ino_idle_fds; /* fds held by inodes; of them idle (ino_mu) */
	_Atomic uint64_t ino_fd_opens, ino_fd_closes;

	pthread_mutex_t id_mu;
	struct fs_ident **id_hash;
	size_t id_nbuckets, id_count;
	struct fs_ident *lru_head, *lru_tail; /* idle identities, most recent first */
	_Atomic uint64_t ids_evicted, ids_uncached;

	/* slots.c, under id_mu */
	struct fs_fvol fvols[VC_VOLUMES_MAX];
	unsigned nfvols;
	uint64_t slots_per_vol, slot_next, slots_used;
	uint32_t *slot_free;
	size_t nfree, free_cap;

	/* fdcache.c, under fd_mu */
	pthread_mutex_t fd_mu;
	pthread_cond_t fd_cv; /* an fd's last user is done */
	struct fs_ident *fd_head, *fd_tail; /* identities with an fd, most recent first */
	unsigned nfds;
	struct fs_ident **slot_id; /* slot -> identity */
	uint64_t slot_cap;
	_Atomic uint64_t fd_opens, fd_closes;

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

	struct fs_stop stop;
};

/* --- inode.c --- */
/* handles: use file handles where SRC gives them (else, or where it does
 * not, every inode holds its fd; said on stderr). */
int fs_inode_init(struct fs *fs, const char *src, bool handles);
void fs_inode_fini(struct fs *fs);
struct fs_inode *fs_inode(struct fs *fs, fuse_ino_t ino);
bool fs_key_eq(const struct fs_key *a, const struct fs_key *b);
/* The key of the object of fd (any fd of it) with attributes st. */
void fs_key_of(struct fs *fs, int fd, const struct stat *st, struct fs_keybuf *kb);
/* The inode of fd (O_PATH, ours now) with key k: found (fd kept if it had
 * none, else closed) or added; one lookup counted. NULL: out of memory
 * (fd closed). */
struct fs_inode *fs_inode_get(struct fs *fs, int fd, const struct fs_key *k,
			      const struct stat *st);
/* The kernel's write-back cache keeps a file's size and mtime while it
 * knows the inode, whatever getattr says: whether SRC's (st) differ from
 * what the kernel holds (kwb, regular files; else false). */
bool fs_inode_differs(struct fs *fs, struct fs_inode *in, const struct stat *st);
/* The kernel holds this size and mtime for k's file now (after a change
 * made through the mount; kwb only). */
void fs_inode_told(struct fs *fs, const struct fs_key *k, uint64_t size, struct timespec mtime);
/* in's file changed in SRC behind the mount's back while the kernel holds
 * its old size and mtime: a new inode of its key (another inode number,
 * attributes st) takes the lookup just counted on in, which leaves the
 * table (the kernel forgets it in time). NULL: out of memory (in kept). */
struct fs_inode *fs_inode_renew(struct fs *fs, struct fs_inode *in, const struct stat *st);
void fs_inode_forget(struct fs *fs, struct fs_inode *in, uint64_t n);
/* in's O_PATH fd, reopened by its handle if it was closed, held open
 * until fs_inode_put; or -errno (-ESTALE: the object is gone from SRC). */
int fs_inode_fd(struct fs *fs, struct fs_inode *in);
void fs_inode_put(struct fs *fs, struct fs_inode *in);
/* "/proc/self/fd/N"-relative name of fd, for calls that take no fd
 * (relative to fs->proc_fd). */
void fs_fd_name(int fd, char buf[16]);
/* A new fd (flags: O_RDONLY or O_RDWR) of the object of key k: through a
 * known inode's fd, else by k's handle; -ESTALE when neither is there. */
int fs_inode_reopen(struct fs *fs, const struct fs_key *k, int flags);

/* --- slots.c (under id_mu) --- */
void fs_slots_init(struct fs *fs);
/* A free slot for id (id->slot, vol, base): -ENOSPC when every volume is
 * full, or vc_volume_open_store's error. */
int fs_slot_alloc(struct fs *fs, struct fs_ident *id);
/* The slot's pages must be dropped already. */
void fs_slot_free(struct fs *fs, uint32_t slot);
/* Closes the files volumes (writing dirty pages back, through the
 * identities' fds: before they go). 0 or the first error. */
int fs_slots_fini(struct fs *fs);

/* --- fdcache.c --- */
/* pread (write false) or pwrite of [off, off + len) with fd, again after
 * EINTR and short transfers: the bytes moved, short only at the end of the
 * file (a read; a write that moves nothing) or at a failure, whose -errno
 * is *err (else 0). */
size_t fs_pio(int fd, bool write, void *buf, size_t len, uint64_t off, int *err);
void fs_fd_init(struct fs *fs);
void fs_fd_fini(struct fs *fs);
/* id's fd, opened if need be, in use (not closed) until fs_fd_put; or
 * -errno (-ESTALE: the kernel has forgotten the file and no fd is open). */
int fs_fd_get(struct fs *fs, struct fs_ident *id);
void fs_fd_put(struct fs *fs, struct fs_ident *id);
/* The same by slot (the stores' callbacks); *out the identity to put. */
int fs_fd_get_slot(struct fs *fs, uint32_t slot, struct fs_ident **out);
/* id's slot finds it from now on (before any I/O on the slot). */
int fs_fd_bind(struct fs *fs, struct fs_ident *id);
/* An fd just opened for id, of access ro: kept if id has none (or
 * `replace`: the old one closes once unused, an upgrade to read-write),
 * else closed. */
void fs_fd_offer(struct fs *fs, struct fs_ident *id, int fd, bool replace, bool ro);
/* id's slot no longer finds it; its fd closes once unused. */
void fs_fd_forget(struct fs *fs, struct fs_ident *id);
/* fdatasync of every open fd of slots first..last. */
int fs_fd_sync_slots(struct fs *fs, uint32_t first, uint32_t last);

/* --- ident.c --- */
/* Write-back: id may hold dirty pages, written since the start of its
 * last good flush (wgen, cgen). Such an identity keeps its fd (fdcache.c)
 * and its place in the table (never evicted), and is not checked against
 * SRC, whose times its write-backs change (ident.c). Write-through: never
 * (cgen does not move there). */
static inline bool fs_ident_unflushed(const struct fs *fs, const struct fs_ident *id)
{
	return fs->o->cfg.write_mode == VC_WRITE_BACK &&
	       atomic_load(&id->wgen) != atomic_load(&id->cgen);
}
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
/* The identity of key k if there is one, referenced; else NULL with
 * fs->id_mu HELD, so that the caller can change the file in SRC before
 * any identity of it appears (then fs_ident_unlock_table). */
struct fs_ident *fs_ident_find_or_lock(struct fs *fs, const struct fs_key *k);
void fs_ident_unlock_table(struct fs *fs);
/* Whether k's file is being written through the mount (its identity's
 * `wrote`: SRC's size and times change by our hand). */
bool fs_ident_writing(struct fs *fs, const struct fs_key *k);
/* SRC's file k lost a name: if that was its last one and the
 * identity is idle, it is freed (dirty pages discarded) now, else at its
 * last put. */
void fs_ident_unlinked(struct fs *fs, const struct fs_key *k);
/* With id->lk held exclusive: compares SRC's file with id->seen and, if
 * it changed, drops every cached page (written back first if dirty) and
 * takes the new size. 1 changed, 0 not, -errno. */
int fs_ident_check_locked(struct fs *fs, struct fs_ident *id);
/* With id->lk held exclusive, after a change made through us: id->seen
 * becomes SRC's file as it is now; a size in SRC other than id->size (a
 * change behind our back meanwhile) drops every cached page (dirty ones
 * written back first) and is taken. */
void fs_ident_seen_locked(struct fs *fs, struct fs_ident *id);
/* getattr and lookup, before the kernel gets SRC's attributes st of k's
 * file (nothing held): if the file is open through the mount and st's
 * size, mtime or ctime differ from id->seen, fs_ident_check_locked (every
 * cached page dropped, dirty ones written back first; the new size), so
 * that reads agree with the size the kernel is about to take, and the
 * kernel, finding another size or mtime, drops its own page cache
 * (auto_inval_data). Cost: id_mu and a hash lookup for a regular file,
 * the identity's lock shared if it is open; a statx and an ioctl only
 * when st shows a change. Not with --revalidate never. */
void fs_ident_attr_check(struct fs *fs, const struct fs_key *k, const struct stat *st);
/* The strict mode (revalidate_ms >= 0): called by reads with nothing
 * held; checks when the last check is older than the limit. */
void fs_ident_maybe_check(struct fs *fs, struct fs_ident *id);
/* Changes the file's size: the cached pages first (a shrink drops pages
 * past the end), then SRC's file. id->lk held exclusive. 0 or -errno. */
int fs_ident_truncate_locked(struct fs *fs, struct fs_ident *id, uint64_t size);
/* n rounded up to the cache's page size. */
static inline uint64_t fs_page_up(const struct fs *fs, uint64_t n)
{
	uint64_t ps = vc_page_size(fs->c);
	return (n + ps - 1) & ~(ps - 1);
}

/* The file's size is now `size` (SRC's file changed already, or will be
 * by the write that follows): drops the pages the change invalidates. A
 * size past a slot turns the file uncached. id->lk exclusive. */
int fs_ident_resize_locked(struct fs *fs, struct fs_ident *id, uint64_t size);
/* Write-back: the file's dirty pages to SRC, not synced (id->lk shared
 * or exclusive held). 0 in write-through. */
int fs_ident_flush_locked(struct fs *fs, struct fs_ident *id);

/* --- readahead.c --- */
int fs_ra_init(struct fs *fs);
void fs_ra_fini(struct fs *fs);
/* The open handles' list (ops_data.c): init before the session, fini
 * after it ends (no request runs), before the identities go. */
void fs_handles_init(struct fs *fs);
void fs_handles_fini(struct fs *fs);
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
/* An object just made by request req (in directory pfd, as name; or fd,
 * an fd of it) becomes the caller's, as the kernel would make it: we make
 * it as root. The group stays where the directory is setgid. */
void fs_own_new(fuse_req_t req, int pfd, int fd, const char *name);
/* Reply helpers: the entry for an object just created or looked up. */
int fs_lookup_entry(struct fs *fs, struct fs_inode *parent, const char *name,
		    struct fuse_entry_param *e);

/* --- stop.c --- */
/* The forced end (a second signal, or one after the mount stopped
 * serving) exits within this many seconds whatever SRC does: serve's
 * figure (SERVE_STOP_FORCE_S), long enough for a flush that SRC takes
 * and short enough for a service manager's stop timeout (systemd: 90 s). */
#define FS_STOP_FORCE_S 10
/* After an unmount from outside, a refused write-back is tried again this
 * often: one flush a second costs a dirty-set walk and a refused write,
 * and a user who made room waits a second at most. */
#define FS_STOP_RETRY_S 1
/* Blocks SIGTERM, SIGINT, SIGHUP and SIGUSR1 in the calling thread and so
 * in every thread it makes from now on (call it before the first), and
 * ignores SIGPIPE. 0 or -errno. */
int fs_stop_init(struct fs *fs);
/* From the loop's thread just before the loop: the signal thread starts
 * and the thread takes the kicks that end the loop. 0 or -errno. */
int fs_stop_start(struct fs *fs);
/* The loop has returned: no more kicks; a signal now forces the end. */
void fs_stop_loop_done(struct fs *fs);
/* After the loop and the unmount: every dirty page to SRC. If SRC
 * refuses, logs what it keeps and tries again every FS_STOP_RETRY_S
 * until SRC takes them or a signal forces the end, which logs them lost
 * and discards them. 0 or the last write-back's error. */
int fs_stop_writeback(struct fs *fs);
/* Logs head, then by file (its path in SRC) the byte ranges the cache
 * holds newer than SRC: at most 64 lines, then always a last line with
 * the count of all ("N ranges in all, B bytes"). Cost:
 * O(log) per dirty page (vc_volume_dirty_next). Nothing once closing. */
void fs_stop_report(struct fs *fs, const char *head);
/* The teardown is about to free the volumes and identities. */
void fs_stop_closing(struct fs *fs);
/* Ends the signal thread. */
void fs_stop_fini(struct fs *fs);

/* --- stats.c --- */
/* The extended attribute that answers with a file's or directory's
 * statistics (vramcache stat PATH). */
#define FS_STATS_XATTR "user.vramcache.stats"
/* Its value: JSON, malloc'd; NULL without memory. */
char *fs_stats_json(struct fs *fs, struct fs_inode *in);

#endif
