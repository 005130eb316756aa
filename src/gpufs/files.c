/* GPUfs's file table (gpufs.h's struct gfs_file, g->files): the files that
 * vc_gpufs_open and the kernels' vc_gopen open by path, with close-to-open
 * consistency (a change from outside since the last open drops the
 * file's cached pages), their backing syncs and their closes. The lock
 * rules are gpufs.h's; docs/GPUFS.md has the design.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "engine/gpufs.h"
#include "gpufs/gpufs.h"

/* ---- files ----------------------------------------------------------------- */

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Our own change: the next open must not take it for someone else's. The
 * record keeps the writes *done* before the stat: a write in flight then
 * (its change may land after the stat) counts as one after the record. */
void gfs_file_restat(struct gfs_file *f)
{
	pthread_mutex_lock(&f->stmu);
	f->wseen = eng_gfs_writes(f->v, NULL);
	fstat(f->fd, &f->st);
	pthread_mutex_unlock(&f->stmu);
}

/* Whether path changed outside the cache since the record (f->rw held,
 * either way): its stat differs, and the cache neither began a write of
 * it since the record nor has one in flight (the counts are read after
 * the stat, so every write whose change the stat shows has begun). A
 * difference the cache's writes explain moves the record. The cost of
 * telling them apart so: a change from outside that lands between two
 * gopens together with a write of the cache to the same file is taken
 * for the cache's own (NFS's weak cache consistency has the same gap). */
static bool file_changed(struct gfs_file *f, const char *path, struct stat *st)
{
	uint64_t done0 = eng_gfs_writes(f->v, NULL); /* the new record's, as gfs_file_restat */
	if (stat(path, st) != 0)
		return false;
	uint64_t begun, done = eng_gfs_writes(f->v, &begun);
	pthread_mutex_lock(&f->stmu);
	bool differs = !same_file(st, &f->st);
	if (differs && (begun != f->wseen || begun != done)) {
		f->st = *st;
		f->wseen = done0;
		differs = false;
	}
	pthread_mutex_unlock(&f->stmu);
	return differs;
}

/* An open of path: fd or -errno; *f the file. Close-to-open: a file that
 * changed outside the cache since its last open gets a new version (the
 * device ignores table entries of older ones) and its cached pages are
 * written back and dropped, so every page is read anew, lazily. */
int gfs_file_open(struct vc_gpufs *g, const char *path, int flags, struct gfs_file **out)
{
	if (flags & ~(VC_GO_RDWR | VC_GO_CREAT | VC_GO_TRUNC))
		return vc_err(-EINVAL, "gpufs: open flags %#x not supported", (unsigned)flags);
	pthread_mutex_lock(&g->mu);
	int fd = -1, freefd = -1;
	for (int i = 0; i < VC_GFS_MAX_FILES; i++) {
		if (g->files[i].path && strcmp(g->files[i].path, path) == 0)
			fd = i;
		else if (!g->files[i].path && freefd < 0)
			freefd = i;
	}
	struct gfs_file *f;
	int r = 0;
	if (fd >= 0) {
		f = &g->files[fd];
		pthread_mutex_unlock(&g->mu);
		if ((flags & VC_GO_RDWR) && !(f->flags & VC_GO_RDWR))
			return vc_err(-EACCES, "gpufs: %s is open read-only", path);
		if (flags & VC_GO_TRUNC)
			return vc_err(-EBUSY, "gpufs: O_TRUNC of %s, which is open", path);
		/* A stat that differs from the record is our change when the
		 * cache wrote the file since (file_changed): the record moves,
		 * nothing is dropped, no exclusive lock. Else it is someone
		 * else's: under f->rw alone, checked again, a new version. */
		struct stat st;
		pthread_rwlock_rdlock(&f->rw);
		bool changed = file_changed(f, path, &st);
		pthread_rwlock_unlock(&f->rw);
		if (changed)
			pthread_rwlock_wrlock(&f->rw);
		else
			pthread_rwlock_rdlock(&f->rw);
		if (changed && file_changed(f, path, &st)) {
			f->version++;
			atomic_fetch_add_explicit(&g->st.reopen_drops, 1, memory_order_relaxed);
			r = vc_volume_drop(f->v, 0, 0, 0);
			gfs_direct_stale(g, f);
			if (r == 0 && (uint64_t)st.st_size != vc_volume_size(f->v))
				r = vc_volume_resize(f->v, (uint64_t)st.st_size);
			if (r == 0)
				gfs_file_restat(f);
		}
		if (r == 0) {
			pthread_mutex_lock(&g->mu);
			f->opens++;
			pthread_mutex_unlock(&g->mu);
		}
		pthread_rwlock_unlock(&f->rw);
		*out = f;
		return r < 0 ? r : fd;
	}
	if (freefd < 0) {
		pthread_mutex_unlock(&g->mu);
		return vc_err(-EMFILE, "gpufs: %d files open already", VC_GFS_MAX_FILES);
	}
	f = &g->files[freefd];
	int ofl = O_CLOEXEC | ((flags & VC_GO_RDWR) ? O_RDWR : O_RDONLY) |
		  ((flags & VC_GO_CREAT) ? O_CREAT : 0) | ((flags & VC_GO_TRUNC) ? O_TRUNC : 0);
	int hfd = open(path, ofl, 0644);
	if (hfd < 0) {
		r = -errno;
		pthread_mutex_unlock(&g->mu);
		return vc_err(r, "gpufs: open %s: %s", path, strerror(-r));
	}
	char *p = strdup(path);
	if (!p || fstat(hfd, &f->st) < 0) {
		r = p ? -errno : -ENOMEM;
		goto fail;
	}
	if (!S_ISREG(f->st.st_mode)) {
		r = vc_err(-EINVAL, "gpufs: %s is not a regular file", path);
		goto fail;
	}
	r = vc_volume_open(g->c, NULL, hfd, (flags & VC_GO_RDWR) ? 0 : VC_OPEN_READONLY, &f->v);
	if (r < 0)
		goto fail;
	f->path = p;
	f->fd = hfd;
	f->flags = (uint32_t)flags & VC_GO_RDWR;
	f->version = 1;
	f->opens = 1;
	f->wseen = eng_gfs_writes(f->v, NULL);
	atomic_store(&f->synced, f->wseen);
	pthread_mutex_unlock(&g->mu);
	*out = f;
	return freefd;
fail:
	free(p);
	close(hfd);
	pthread_mutex_unlock(&g->mu);
	return r;
}

/* The file's writes, durable: 0 or -errno (f->rw held shared). */
int gfs_file_sync(struct vc_gpufs *g, struct gfs_file *f)
{
	if (!(f->flags & VC_GO_RDWR))
		return 0;
	bool did;
	int r = eng_gfs_flush(f->v, &f->synced, &did);
	if (did)
		atomic_fetch_add_explicit(&g->st.syncs, 1, memory_order_relaxed);
	return r;
}

struct gfs_file *gfs_file_of(struct vc_gpufs *g, uint32_t fd)
{
	if (fd >= VC_GFS_MAX_FILES)
		return NULL;
	pthread_mutex_lock(&g->mu);
	struct gfs_file *f = g->files[fd].path ? &g->files[fd] : NULL;
	pthread_mutex_unlock(&g->mu);
	return f;
}

/* One close: flushes (close-to-open: the writes are durable and visible;
 * no backing sync when the cache wrote nothing since the last, so the
 * closes of many warps after one write cost one fdatasync), returns the
 * opens left. Shared f->rw: a flush changes no size and drops nothing.
 * The volume stays open (its pages cached) until the context is
 * destroyed. */
int gfs_file_close(struct vc_gpufs *g, struct gfs_file *f)
{
	pthread_rwlock_rdlock(&f->rw);
	int r = gfs_file_sync(g, f);
	pthread_mutex_lock(&g->mu);
	if (r == 0 && f->opens > 0)
		r = --f->opens;
	pthread_mutex_unlock(&g->mu);
	pthread_rwlock_unlock(&f->rw);
	return r;
}
