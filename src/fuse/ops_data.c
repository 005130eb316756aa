/* File data: create, open, read, write, flush, fsync, release, fallocate.
 *
 * An open file is a handle on the file's cache identity (ident.c); reads
 * and writes go through the identity's volume, page by page on demand:
 * a read loads only the pages it covers (and readahead.c the next ones of
 * a sequential stream), never the whole file.
 *
 * Writes. Write-through (default): vc_volume_write writes SRC before the
 * reply, so a write the application saw succeed is in SRC (not yet
 * synced, as any file system's), and a failure (a read-only or full SRC)
 * is the write's error. Write-back (--write-back): a write lands in the
 * cache as dirty pages (up to the dirty limit; past it the engine writes
 * through); close (FUSE's flush, on every close(2) of the file) writes the
 * file's dirty pages back, as NFS's close-to-open does (SRC then holds
 * them as after a write(2): an fdatasync a close cost sqlite and cp -a a
 * sync per file), and fsync writes them back and syncs; their failure is
 * close's or fsync's error, and the pages stay dirty (nothing
 * acknowledged is lost while the mount runs). A write past the end grows the volume first
 * (exclusive lock) and, in write-back, SRC's file (ftruncate), so that the
 * size SRC shows is the one the application made.
 *
 * Reads and writes inside the file hold the identity's lock shared, so
 * many run at once (the engine's own locks order them per page); size
 * changes and drops hold it exclusive (fs.h). Read buffers: one per FUSE
 * thread (max_read bytes), kept for the thread's life. Nothing of a handle
 * is touched after its request's reply: the kernel may release it then.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuse/fs.h"

/* The largest read the kernel sends (max_read, mount.c): 1 MiB, FUSE's
 * largest request (256 pages). */
#define FS_MAX_READ (1u << 20)

static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;

static void buf_key_make(void)
{
	(void)pthread_key_create(&buf_key, free);
}

/* The calling thread's read buffer of FS_MAX_READ bytes; NULL: no memory. */
static char *thread_buf(void)
{
	pthread_once(&buf_once, buf_key_make);
	char *b = pthread_getspecific(buf_key);
	if (!b && (b = malloc(FS_MAX_READ)) && pthread_setspecific(buf_key, b) != 0) {
		free(b);
		b = NULL;
	}
	return b;
}

static struct fs_handle *fh_of(struct fuse_file_info *fi)
{
	return (struct fs_handle *)(uintptr_t)fi->fh;
}

void fs_handles_init(struct fs *fs)
{
	pthread_mutex_init(&fs->h_mu, NULL);
	fs->open_handles = NULL;
}

/* Frees the handles left open: their identities and inodes go wholesale
 * after (fs_ident_fini, fs_inode_fini). */
void fs_handles_fini(struct fs *fs)
{
	for (struct fs_handle *h = fs->open_handles, *next; h; h = next) {
		next = h->hnext;
		fs_ra_table_fini(&h->ra);
		free(h);
	}
	fs->open_handles = NULL;
	pthread_mutex_destroy(&fs->h_mu);
}

static void handle_link(struct fs *fs, struct fs_handle *h)
{
	pthread_mutex_lock(&fs->h_mu);
	h->hprev = NULL;
	h->hnext = fs->open_handles;
	if (h->hnext)
		h->hnext->hprev = h;
	fs->open_handles = h;
	pthread_mutex_unlock(&fs->h_mu);
}

static void handle_unlink(struct fs *fs, struct fs_handle *h)
{
	pthread_mutex_lock(&fs->h_mu);
	if (h->hprev)
		h->hprev->hnext = h->hnext;
	else
		fs->open_handles = h->hnext;
	if (h->hnext)
		h->hnext->hprev = h->hprev;
	pthread_mutex_unlock(&fs->h_mu);
}

/* A handle's end: out of the list, its identity and inode let go. */
static void handle_close(struct fs *fs, struct fs_handle *h)
{
	handle_unlink(fs, h);
	fs_ident_put(fs, h->id);
	fs_inode_put(fs, h->in);
	fs_ra_table_fini(&h->ra);
	free(h);
}

static void reply_open(fuse_req_t req, struct fs *fs, struct fs_inode *in,
		       struct fuse_file_info *fi, const struct fuse_entry_param *e)
{
	bool write = (fi->flags & O_ACCMODE) != O_RDONLY;
	if (write && fs->o->readonly) {
		fuse_reply_err(req, EROFS);
		return;
	}
	struct fs_handle *h = calloc(1, sizeof *h);
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* The inode's fd stays open while the file is (inode.c): a file
	 * deleted in SRC meanwhile is still there to reopen. */
	int r = fs_inode_fd(fs, in);
	bool changed;
	if (r >= 0 && (r = fs_ident_open(fs, in, write, &h->id, &changed)) < 0)
		fs_inode_put(fs, in);
	if (r < 0) {
		free(h);
		fuse_reply_err(req, -r);
		return;
	}
	h->in = in;
	h->writable = write;
	fs_ra_table_init(&h->ra, 1);
	fi->fh = (uint64_t)(uintptr_t)h;
	/* The kernel's page cache survives an open only when asked and the
	 * file has not changed; by default our tiers are the cache. */
	fi->keep_cache = fs->o->kernel_cache && !changed;
	fi->direct_io = 0;
	handle_link(fs, h); /* before the reply: the kernel may release h after it */
	if (e ? fuse_reply_create(req, e, fi) : fuse_reply_open(req, fi)) {
		/* The opener was interrupted: the kernel will not release it. */
		handle_close(fs, h);
	}
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fs_inode *in = fs_inode(fs, ino);
	if (in->type != S_IFREG) {
		fuse_reply_err(req, in->type == S_IFDIR ? EISDIR : ENXIO);
		return;
	}
	reply_open(req, fs, in, fi, NULL);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fs_inode *p = fs_inode(fs, parent);
	if (fs->o->readonly) {
		fuse_reply_err(req, EROFS);
		return;
	}
	/* O_NOFOLLOW: a symlink made in SRC since the kernel's lookup is not
	 * followed (out of SRC, perhaps). O_TRUNC of an existing file is
	 * seen by the identity's check at open. */
	int pfd = fs_inode_fd(fs, p);
	if (pfd < 0) {
		fuse_reply_err(req, -pfd);
		return;
	}
	/* Made here (O_EXCL) or there already (the kernel's negative entry
	 * was stale): only a file we made becomes the caller's. */
	const int flags = (fi->flags | O_NOFOLLOW | O_CLOEXEC) & ~(O_APPEND | O_CREAT | O_EXCL);
	bool made = true;
	int fd = openat(pfd, name, flags | O_CREAT | O_EXCL, mode);
	if (fd < 0 && errno == EEXIST && !(fi->flags & O_EXCL)) {
		made = false;
		fd = openat(pfd, name, flags);
	}
	int err = errno;
	if (made && fd >= 0)
		fs_own_new(req, pfd, fd, name);
	fs_inode_put(fs, p);
	if (fd < 0) {
		fuse_reply_err(req, err);
		return;
	}
	close(fd);
	struct fuse_entry_param e;
	int r = fs_lookup_entry(fs, p, name, &e);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	struct fs_inode *in = fs_inode(fs, e.ino);
	if (in->type != S_IFREG) { /* replaced meanwhile */
		fs_inode_forget(fs, in, 1);
		fuse_reply_err(req, EEXIST);
		return;
	}
	reply_open(req, fs, in, fi, &e);
}

/* Reads [off, off+len) of a cached file: in pieces the engine can answer
 * from the host tier without blocking (vc_volume_read_hit, up to
 * VC_READ_HIT_PAGES pages), counted as host hits, else vc_volume_read. */
static ssize_t read_cached(struct fs_ident *id, char *buf, size_t len, uint64_t off)
{
	const uint64_t size = atomic_load(&id->size);
	if (off >= size)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	/* Pieces end on page boundaries of VC_READ_HIT_PAGES pages of 4 KiB
	 * or larger: a piece of up to that many pages whatever the page size
	 * in effect (smaller pages give smaller pieces, still correct). */
	const size_t piece = VC_READ_HIT_PAGES * 4096u;
	size_t done = 0;
	while (done < len) {
		uint64_t pos = off + done;
		size_t k = piece - (size_t)(pos % piece);
		if (k > len - done)
			k = len - done;
		ssize_t n = vc_volume_read_hit(id->vol, buf + done, k, id->base + pos);
		if (n >= 0) {
			atomic_fetch_add_explicit(&id->rd_host_bytes, (uint64_t)n, memory_order_relaxed);
		} else if (n == -EAGAIN) {
			n = vc_volume_read(id->vol, buf + done, k, id->base + pos);
		}
		if (n < 0)
			return done ? (ssize_t)done : n;
		done += (size_t)n;
		if ((size_t)n < k)
			break;
	}
	return (ssize_t)done;
}

/* pread or pwrite of the whole range, for files served uncached: short
 * only at the end of the file (a read), or after a failure that came once
 * something had moved. */
static ssize_t rw_all(struct fs *fs, struct fs_ident *id, bool write, char *buf, size_t len,
		      uint64_t off)
{
	int fd = fs_fd_get(fs, id);
	if (fd < 0)
		return fd;
	int err;
	size_t done = fs_pio(fd, write, buf, len, off, &err);
	fs_fd_put(fs, id);
	return done || !err ? (ssize_t)done : err;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)ino;
	struct fs *fs = fs_of(req);
	struct fs_handle *h = fh_of(fi);
	struct fs_ident *id = h->id;
	char *buf = size <= FS_MAX_READ ? thread_buf() : NULL;
	char *own = NULL;
	if (!buf && !(buf = own = malloc(size ? size : 1))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fs_ident_maybe_check(fs, id);
	pthread_rwlock_rdlock(&id->lk);
	ssize_t n = id->vol ? read_cached(id, buf, size, (uint64_t)off)
			    : rw_all(fs, id, false, buf, size, (uint64_t)off);
	pthread_rwlock_unlock(&id->lk);
	if (n < 0) {
		fuse_reply_err(req, (int)-n);
	} else {
		/* Before the reply: after it the kernel may release h. */
		atomic_fetch_add_explicit(&id->rd_bytes, (uint64_t)n, memory_order_relaxed);
		if (n > 0)
			fs_ra_note(fs, h, (uint64_t)off, (uint64_t)n);
		fuse_reply_buf(req, buf, (size_t)n);
	}
	free(own);
}

/* With id->lk exclusive: grows the file to end for a write past its end
 * (past its slot: uncached from now on). Write-back also grows SRC's file
 * now (the data follows at write-back), so its size is the
 * application's; write-through's pwrite grows it. */
static int grow_locked(struct fs *fs, struct fs_ident *id, uint64_t end)
{
	if (fs->o->cfg.write_mode == VC_WRITE_BACK)
		return fs_ident_truncate_locked(fs, id, end);
	return fs_ident_resize_locked(fs, id, end);
}

/* With id->lk exclusive, after a write past the end failed: the file is
 * as long as SRC says (the write may have grown it partly). */
static void size_from_src_locked(struct fs *fs, struct fs_ident *id)
{
	int fd = fs_fd_get(fs, id);
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) == 0)
		(void)fs_ident_resize_locked(fs, id, (uint64_t)st.st_size);
	fs_fd_put(fs, id);
}

/* A write through the cache, [off, off + len) inside the file's size;
 * counted first for write-back's flush (fdcache.c: an fd stays open
 * while its file may have dirty pages). */
static ssize_t write_cached(struct fs_ident *id, const char *buf, size_t len, uint64_t off)
{
	atomic_fetch_add(&id->wgen, 1);
	return vc_volume_write(id->vol, buf, len, id->base + off);
}

/* A write past the file's old end `old`, the file grown to its end: its
 * pages wholly past the old end (from fs_page_up(old)) hold zeros, in the
 * cache and in SRC, so they are written whole, padded with zeros, and the
 * engine loads none of them (a partial page write loads its page: a store
 * read for every page an append of less than a page starts, as sqlite's
 * journal and the last page of every file cp writes made). The store
 * clips writes at the file's size, so the padding past the end never
 * reaches SRC. The part below fs_page_up(old) is an ordinary write.
 * Returns len, or -errno. */
static ssize_t write_append(struct fs *fs, struct fs_ident *id, const char *buf, size_t len,
			    uint64_t off, uint64_t old)
{
	const uint64_t ps = vc_page_size(fs->c), end = off + len;
	uint64_t a = fs_page_up(fs, old);
	if ((off & ~(ps - 1)) > a)
		a = off & ~(ps - 1); /* pages between are holes the write leaves alone */
	if (a >= end || (off <= a && end == fs_page_up(fs, end)))
		return write_cached(id, buf, len, off); /* nothing to pad */
	ssize_t n = off < a ? write_cached(id, buf, (size_t)(a - off), off) : 0;
	if (n < 0)
		return n;
	const uint64_t b = fs_page_up(fs, end);
	char *pad = calloc(1, (size_t)(b - a));
	if (!pad)
		return -ENOMEM;
	const uint64_t from = off > a ? off : a;
	memcpy(pad + (from - a), buf + (from - off), (size_t)(end - from));
	n = write_cached(id, pad, (size_t)(b - a), a);
	free(pad);
	return n < 0 ? n : (ssize_t)len;
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)ino;
	struct fs *fs = fs_of(req);
	struct fs_handle *h = fh_of(fi);
	struct fs_ident *id = h->id;
	const uint64_t end = (uint64_t)off + size;
	ssize_t n;
	/* Before SRC changes by this write: a getattr or lookup meanwhile
	 * must not take the change for one behind our back (ident.c). */
	h->wrote = true;
	atomic_store(&id->wrote, true);
	pthread_rwlock_rdlock(&id->lk);
	if (!id->vol) {
		n = rw_all(fs, id, true, (char *)buf, size, (uint64_t)off);
	} else if (end <= atomic_load(&id->size)) {
		n = write_cached(id, buf, size, (uint64_t)off);
	} else {
		pthread_rwlock_unlock(&id->lk);
		pthread_rwlock_wrlock(&id->lk);
		const uint64_t old = atomic_load(&id->size);
		n = id->vol && end > old ? grow_locked(fs, id, end) : 0;
		if (n == 0)
			n = !id->vol ? rw_all(fs, id, true, (char *)buf, size, (uint64_t)off)
			    : end > old ? write_append(fs, id, buf, size, (uint64_t)off, old)
					: write_cached(id, buf, size, (uint64_t)off);
		if (n < 0)
			size_from_src_locked(fs, id);
	}
	pthread_rwlock_unlock(&id->lk);
	if (n < 0) {
		fuse_reply_err(req, (int)-n);
		return;
	}
	atomic_fetch_add_explicit(&id->wr_bytes, (uint64_t)n, memory_order_relaxed);
	fuse_reply_write(req, (size_t)n);
}

/* Whether writes may have reached the file through handle h: it wrote,
 * or (the kernel's write-back cache) it is open for writing, since the
 * kernel sends a file's dirty pages through any handle open for writing,
 * so the one being closed may have dirtied pages another one carried. */
static bool wrote_through(struct fs *fs, struct fs_handle *h)
{
	return h->wrote || (h->writable && atomic_load(&fs->kwb));
}

/* Write-back: the file's dirty pages to SRC (not synced: fsync syncs).
 * Write-through: SRC has them already. */
static int write_back(struct fs *fs, struct fs_ident *id)
{
	if (fs->o->cfg.write_mode != VC_WRITE_BACK)
		return 0;
	pthread_rwlock_rdlock(&id->lk);
	int r = fs_ident_flush_locked(fs, id);
	pthread_rwlock_unlock(&id->lk);
	return r;
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct fs_handle *h = fh_of(fi);
	int r = wrote_through(fs_of(req), h) ? write_back(fs_of(req), h->id) : 0;
	fuse_reply_err(req, r < 0 ? -r : 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	struct fs_ident *id = fh_of(fi)->id;
	struct fs *fs = fs_of(req);
	int r = write_back(fs, id);
	int fd = r == 0 ? fs_fd_get(fs, id) : -1;
	if (r == 0 && fd < 0)
		r = fd;
	if (fd >= 0) {
		if ((datasync ? fdatasync(fd) : fsync(fd)) < 0)
			r = -errno;
		fs_fd_put(fs, id);
	}
	fuse_reply_err(req, r < 0 ? -r : 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct fs *fs = fs_of(req);
	struct fs_handle *h = fh_of(fi);
	/* Our own changes are no reason to drop pages at the next open. */
	if (wrote_through(fs, h) && (h->wrote || atomic_load(&h->id->wrote))) {
		pthread_rwlock_wrlock(&h->id->lk);
		fs_ident_seen_locked(fs, h->id);
		pthread_rwlock_unlock(&h->id->lk);
	}
	handle_close(fs, h);
	fuse_reply_err(req, 0);
}

/* Punching, zeroing, collapsing or inserting a range changes bytes the
 * cache may hold: the range's pages (to the end for collapse and insert)
 * are written back if dirty and dropped first. Any mode may change the
 * size: the volume takes SRC's afterwards. */
static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	(void)ino;
	struct fs *fs = fs_of(req);
	struct fs_ident *id = fh_of(fi)->id;
	pthread_rwlock_wrlock(&id->lk);
	int r = 0;
	const uint64_t size = atomic_load(&id->size);
	if (id->vol && (uint64_t)off < size &&
	    (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE | FALLOC_FL_COLLAPSE_RANGE |
		     FALLOC_FL_INSERT_RANGE))) {
		/* Inside the slot: a range past the size has no pages. */
		bool to_end = mode & (FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE);
		uint64_t n = to_end || (uint64_t)len > size - (uint64_t)off ? size - (uint64_t)off
									     : (uint64_t)len;
		r = vc_volume_drop(id->vol, id->base + (uint64_t)off, n, 0);
	}
	int fd = r == 0 ? fs_fd_get(fs, id) : -1;
	if (r == 0 && fd < 0)
		r = fd;
	struct stat st;
	if (r == 0 && fallocate(fd, mode, off, len) < 0)
		r = -errno;
	if (r == 0 && fstat(fd, &st) < 0)
		r = -errno;
	if (fd >= 0)
		fs_fd_put(fs, id);
	if (r == 0)
		r = fs_ident_resize_locked(fs, id, (uint64_t)st.st_size);
	fs_ident_seen_locked(fs, id);
	pthread_rwlock_unlock(&id->lk);
	fh_of(fi)->wrote = true;
	fuse_reply_err(req, r < 0 ? -r : 0);
}

void fs_ops_data(struct fuse_lowlevel_ops *ops)
{
	ops->create = op_create;
	ops->open = op_open;
	ops->read = op_read;
	ops->write = op_write;
	ops->flush = op_flush;
	ops->fsync = op_fsync;
	ops->release = op_release;
	ops->fallocate = op_fallocate;
}
