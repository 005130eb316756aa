/* Cache identities: which engine volume holds a file's pages.
 *
 * One identity per regular file (dev, ino) that has been opened through
 * the mount: an fd of the file itself and a volume over it. It is made by
 * the first open, referenced by every open handle and queued prefetch, and
 * on its last reference parked at the head of an LRU of idle identities
 * instead of closed, so that reopening the file finds its pages. Why a
 * volume per file, and not one volume with a keyed namespace: a volume is
 * already the engine's unit of "pages of one store" (its own page numbers,
 * dirty set, flush, drop and resize), so the front end needs no change to
 * the engine's data path, and two files never alias. Its limit is the
 * engine's volume table (VC_VOLUMES_MAX): at most max_files identities
 * hold a volume; making one more closes the least recently used idle one
 * (O(pages it has cached) to drop them; nothing to write back, as every
 * close flushed). When all are open, a file is served uncached until a
 * slot frees. docs/MOUNT.md weighs this against a keyed namespace.
 *
 * Consistency with SRC (close-to-open, as NFS and GPUfs): each open
 * compares the file's size, mtime and ctime in SRC with what we saw last
 * (id->seen, taken after our own changes); any difference drops every
 * cached page and takes the new size. A file replaced in SRC (rename over
 * it, as editors and rsync do) is another inode, hence another identity.
 * The window: while a file is being written through us (from the first
 * write to the close that records `seen`) it is not checked, since its
 * times change by our own hand; a change behind our back in that window
 * goes unnoticed, as with NFS's weak cache consistency. Otherwise
 * revalidate_ms narrows the window between opens to that many ms.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "fuse/fs.h"

/* Buckets of the identity table: at most max_files (1023) idle ones plus
 * the open ones; 4096 keeps chains short for either. */
#define ID_BUCKETS 4096

static size_t id_bucket(dev_t dev, ino_t ino)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev;
	return (size_t)(h ^ (h >> 31)) & (ID_BUCKETS - 1);
}

int fs_ident_init(struct fs *fs)
{
	pthread_mutex_init(&fs->id_mu, NULL);
	fs->id_nbuckets = ID_BUCKETS;
	fs->id_hash = calloc(ID_BUCKETS, sizeof *fs->id_hash);
	return fs->id_hash ? 0 : -ENOMEM;
}

static bool seen_equal(const struct fs_seen *a, const struct stat *st)
{
	return a->size == (uint64_t)st->st_size && a->mtime.tv_sec == st->st_mtim.tv_sec &&
	       a->mtime.tv_nsec == st->st_mtim.tv_nsec && a->ctime.tv_sec == st->st_ctim.tv_sec &&
	       a->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

static void seen_set(struct fs_seen *s, const struct stat *st)
{
	*s = (struct fs_seen){ .size = (uint64_t)st->st_size, .mtime = st->st_mtim,
			       .ctime = st->st_ctim };
}

/* Under id_mu. */
static void lru_remove(struct fs *fs, struct fs_ident *id)
{
	if (id->prev)
		id->prev->lnext = id->lnext;
	else if (fs->lru_head == id)
		fs->lru_head = id->lnext;
	else
		return; /* not in the LRU */
	if (id->lnext)
		id->lnext->prev = id->prev;
	else
		fs->lru_tail = id->prev;
	id->prev = id->lnext = NULL;
}

static void lru_push(struct fs *fs, struct fs_ident *id)
{
	id->prev = NULL;
	id->lnext = fs->lru_head;
	if (fs->lru_head)
		fs->lru_head->prev = id;
	else
		fs->lru_tail = id;
	fs->lru_head = id;
}

static void hash_remove(struct fs *fs, struct fs_ident *id)
{
	struct fs_ident **pp = &fs->id_hash[id_bucket(id->dev, id->ino)];
	while (*pp && *pp != id)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = id->hnext;
	fs->id_count--;
}

/* Under id_mu, nobody else holding id: closes its volume (discard: drop
 * dirty pages instead of writing them, for a file that no longer exists).
 * On a failed write-back the volume stays and so does the error. */
static int vol_close(struct fs *fs, struct fs_ident *id, bool discard)
{
	if (!id->vol)
		return 0;
	if (discard)
		(void)vc_volume_drop(id->vol, 0, 0, VC_DROP_DISCARD);
	int r = vc_volume_close(id->vol);
	if (r < 0)
		return r;
	id->vol = NULL;
	fs->nvols--;
	return 0;
}

static void ident_free(struct fs_ident *id)
{
	close(id->fd);
	pthread_rwlock_destroy(&id->lk);
	fs_ra_table_fini(&id->ra);
	free(id);
}

/* Under id_mu: closes the least recently used idle identity that holds a
 * volume, freeing its slot. false when there is none (or its write-back
 * failed: it stays, with its dirty pages). */
static bool evict_one(struct fs *fs)
{
	for (struct fs_ident *v = fs->lru_tail; v; v = v->prev) {
		if (!v->vol)
			continue;
		if (vol_close(fs, v, false) < 0) {
			fprintf(stderr, "vramcache mount: closing an idle file's cache: %s\n",
				vc_last_error());
			continue;
		}
		lru_remove(fs, v);
		hash_remove(fs, v);
		ident_free(v);
		atomic_fetch_add(&fs->ids_evicted, 1);
		return true;
	}
	return false;
}

/* Under id_mu (volume opens and closes are serialized by it): gives id a
 * volume over its fd if a slot is free or can be freed. Without one the
 * file is served uncached. */
static void vol_attach(struct fs *fs, struct fs_ident *id)
{
	if (fs->o->passthrough)
		return;
	if (fs->nvols >= fs->o->max_files && !evict_one(fs)) {
		atomic_fetch_add(&fs->ids_uncached, 1);
		return;
	}
	if (vc_volume_open(fs->c, NULL, id->fd, id->ro ? VC_OPEN_READONLY : 0, &id->vol) < 0) {
		id->vol = NULL;
		atomic_fetch_add(&fs->ids_uncached, 1);
		return;
	}
	fs->nvols++;
}

/* An fd of the file itself (the inode's is O_PATH): read-write unless the
 * mount or SRC is read-only; *ro says which. */
static int file_open(struct fs *fs, struct fs_inode *in, bool write, bool *ro)
{
	char name[16];
	fs_inode_name(in, name);
	int fd = -1;
	*ro = fs->o->readonly;
	if (!*ro) {
		fd = openat(fs->proc_fd, name, O_RDWR | O_CLOEXEC);
		if (fd < 0 && !write && (errno == EROFS || errno == EACCES || errno == ETXTBSY ||
					 errno == EPERM))
			*ro = true;
		else if (fd < 0)
			return -errno;
	}
	if (fd < 0 && !write)
		fd = openat(fs->proc_fd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return write ? -EROFS : -errno;
	return fd;
}

int fs_ident_check_locked(struct fs *fs, struct fs_ident *id)
{
	(void)fs;
	/* Written through us since `seen` was taken: SRC's times (and in
	 * write-back, as dirty pages go back, its bytes) are changing by our
	 * own hand, so a difference proves nothing; the file is checked again
	 * once the writer's close has recorded `seen`. */
	if (atomic_load(&id->wrote))
		return 0;
	struct stat st;
	if (fstat(id->fd, &st) < 0)
		return -errno;
	atomic_store(&id->checked_ns, vc_now_ns());
	if (seen_equal(&id->seen, &st))
		return 0;
	if (id->vol) {
		int r = vc_volume_drop(id->vol, 0, 0, 0);
		if (r == 0)
			r = vc_volume_resize(id->vol, (uint64_t)st.st_size);
		if (r < 0)
			return r;
	}
	id->size = (uint64_t)st.st_size;
	seen_set(&id->seen, &st);
	atomic_store(&id->wrote, false);
	atomic_fetch_add(&id->drops, 1);
	return 1;
}

void fs_ident_seen_locked(struct fs_ident *id)
{
	struct stat st;
	if (fstat(id->fd, &st) == 0) {
		seen_set(&id->seen, &st);
		atomic_store(&id->wrote, false);
		atomic_store(&id->checked_ns, vc_now_ns());
	}
}

void fs_ident_maybe_check(struct fs *fs, struct fs_ident *id)
{
	int ms = fs->o->revalidate_ms;
	if (ms < 0 || vc_now_ns() - atomic_load(&id->checked_ns) < (uint64_t)ms * 1000000)
		return;
	pthread_rwlock_wrlock(&id->lk);
	(void)fs_ident_check_locked(fs, id);
	pthread_rwlock_unlock(&id->lk);
}

int fs_ident_truncate_locked(struct fs *fs, struct fs_ident *id, uint64_t size)
{
	(void)fs;
	const uint64_t old = id->size;
	int r = id->vol ? vc_volume_resize(id->vol, size) : 0;
	if (r < 0)
		return r;
	if (ftruncate(id->fd, (off_t)size) < 0) {
		r = -errno;
		if (id->vol)
			(void)vc_volume_resize(id->vol, old); /* SRC kept its size */
		return r;
	}
	id->size = size;
	return 0;
}

int fs_ident_open(struct fs *fs, struct fs_inode *in, bool write, struct fs_ident **out,
		  bool *changed)
{
	*changed = false;
	bool ro;
	int fd = file_open(fs, in, write, &ro);
	if (fd < 0)
		return fd;
	pthread_mutex_lock(&fs->id_mu);
	size_t b = id_bucket(in->dev, in->ino);
	struct fs_ident *id = fs->id_hash[b];
	while (id && !(id->dev == in->dev && id->ino == in->ino))
		id = id->hnext;
	if (!id) {
		struct stat st;
		if (fstat(fd, &st) < 0 || !(id = calloc(1, sizeof *id))) {
			int e = errno ? errno : ENOMEM;
			pthread_mutex_unlock(&fs->id_mu);
			close(fd);
			return -e;
		}
		id->dev = in->dev;
		id->ino = in->ino;
		id->fd = fd;
		id->ro = ro;
		pthread_rwlock_init(&id->lk, NULL);
		fs_ra_table_init(&id->ra, RA_STREAMS);
		vol_attach(fs, id);
		id->size = (uint64_t)st.st_size;
		seen_set(&id->seen, &st);
		atomic_store(&id->checked_ns, vc_now_ns());
		/* The volume measured the file itself; they agree unless it
		 * changed between, and then ours (just taken) wins. */
		if (id->vol && vc_volume_size(id->vol) != id->size &&
		    vc_volume_resize(id->vol, id->size) < 0) {
			(void)vol_close(fs, id, true);
		}
		id->refs = 1;
		id->hnext = fs->id_hash[b];
		fs->id_hash[b] = id;
		fs->id_count++;
		atomic_fetch_add(&id->opens, 1);
		pthread_mutex_unlock(&fs->id_mu);
		*out = id;
		return 0;
	}
	id->refs++;
	lru_remove(fs, id);
	pthread_mutex_unlock(&fs->id_mu);
	atomic_fetch_add(&id->opens, 1);

	/* Known: check it against SRC, and upgrade a read-only identity
	 * that is now opened for writing (SRC's permissions allow it now). */
	pthread_rwlock_wrlock(&id->lk);
	int r = 0;
	if (write && id->ro && !ro) {
		pthread_mutex_lock(&fs->id_mu); /* id_mu inside lk: see fs.h */
		r = vol_close(fs, id, false);
		if (r == 0) {
			close(id->fd);
			id->fd = fd;
			fd = -1;
			id->ro = false;
			vol_attach(fs, id);
			if (id->vol)
				r = vc_volume_resize(id->vol, id->size);
		}
		pthread_mutex_unlock(&fs->id_mu);
	} else if (!id->vol) {
		pthread_mutex_lock(&fs->id_mu);
		if (fs->nvols < fs->o->max_files)
			vol_attach(fs, id);
		if (id->vol)
			r = vc_volume_resize(id->vol, id->size);
		pthread_mutex_unlock(&fs->id_mu);
	}
	if (fd >= 0)
		close(fd);
	if (r == 0 && fs->o->revalidate_ms != FS_REVALIDATE_NEVER)
		r = fs_ident_check_locked(fs, id);
	pthread_rwlock_unlock(&id->lk);
	if (r < 0) {
		fs_ident_put(fs, id);
		return r;
	}
	*changed = r == 1;
	*out = id;
	return 0;
}

void fs_ident_put(struct fs *fs, struct fs_ident *id)
{
	pthread_mutex_lock(&fs->id_mu);
	if (--id->refs == 0) {
		if (id->gone || !id->vol) {
			hash_remove(fs, id);
			if (vol_close(fs, id, id->gone) == 0) {
				ident_free(id);
			} else {
				/* Its dirty pages could not be written: keep it,
				 * as an idle identity, so nothing is lost. */
				fprintf(stderr, "vramcache mount: %s\n", vc_last_error());
				id->hnext = fs->id_hash[id_bucket(id->dev, id->ino)];
				fs->id_hash[id_bucket(id->dev, id->ino)] = id;
				fs->id_count++;
				lru_push(fs, id);
			}
		} else {
			lru_push(fs, id);
		}
	}
	pthread_mutex_unlock(&fs->id_mu);
}

struct fs_ident *fs_ident_find_or_lock(struct fs *fs, dev_t dev, ino_t ino)
{
	pthread_mutex_lock(&fs->id_mu);
	struct fs_ident *id = fs->id_hash[id_bucket(dev, ino)];
	while (id && !(id->dev == dev && id->ino == ino))
		id = id->hnext;
	if (!id)
		return NULL; /* id_mu stays held */
	id->refs++;
	lru_remove(fs, id);
	pthread_mutex_unlock(&fs->id_mu);
	return id;
}

void fs_ident_unlock_table(struct fs *fs)
{
	pthread_mutex_unlock(&fs->id_mu);
}

void fs_ident_unlinked(struct fs *fs, dev_t dev, ino_t ino)
{
	pthread_mutex_lock(&fs->id_mu);
	struct fs_ident *id = fs->id_hash[id_bucket(dev, ino)];
	while (id && !(id->dev == dev && id->ino == ino))
		id = id->hnext;
	struct stat st;
	if (id && fstat(id->fd, &st) == 0 && st.st_nlink == 0) {
		id->gone = true;
		if (id->refs == 0) {
			lru_remove(fs, id);
			hash_remove(fs, id);
			(void)vol_close(fs, id, true);
			ident_free(id);
		}
	}
	pthread_mutex_unlock(&fs->id_mu);
}

int fs_ident_fini(struct fs *fs)
{
	int first = 0;
	for (size_t b = 0; fs->id_hash && b < fs->id_nbuckets; b++) {
		struct fs_ident *id = fs->id_hash[b];
		while (id) {
			struct fs_ident *next = id->hnext;
			int r = vol_close(fs, id, id->gone);
			if (r < 0) {
				fprintf(stderr, "vramcache mount: %s\n", vc_last_error());
				if (!first)
					first = r;
			} else {
				ident_free(id);
			}
			id = next;
		}
	}
	free(fs->id_hash);
	fs->id_hash = NULL;
	pthread_mutex_destroy(&fs->id_mu);
	return first;
}
