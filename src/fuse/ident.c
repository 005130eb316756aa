/* Cache identities: which slot holds a file's pages.
 *
 * One identity per regular file (dev, ino) that has been opened through
 * the mount: a slot of a files volume for its pages (slots.c) and an fd
 * of the file when one is needed (fdcache.c). It is made by the first
 * open, referenced by every open handle and queued prefetch, and on its
 * last reference parked at the head of an LRU of idle identities, so that
 * reopening the file finds its pages. Identities are kept up to
 * max_files; making one more frees the least recently used idle one with
 * no unflushed write (O(pages it has cached) to drop them, after id_mu is
 * released). An identity costs a few hundred bytes and no fd, so
 * max_files can follow the cache's size (mount.c), not RLIMIT_NOFILE or
 * the engine's volume table. docs/MOUNT.md tells why slots.
 *
 * Consistency with SRC (close-to-open and attribute checks, as NFS): each
 * open, and each getattr or lookup of a file open through us, compares the
 * file's size, mtime and ctime in SRC with what we saw last (id->seen,
 * taken after our own changes); any difference drops every cached page
 * (dirty ones written back first) and takes the new size, so that reads
 * agree with the size the kernel is given. A file replaced in SRC (rename
 * over it, as editors and rsync do) is another inode, hence another
 * identity. An idle identity holds no fd, so SRC may reuse a deleted
 * file's inode number: with file handles the new file has another key
 * (the handle names the inode's generation), hence another identity, and
 * the old one goes at once (take_stale); without, `seen` tells them apart
 * by ctime, birth time and generation where SRC keeps them (seen_of). The
 * window: while a file is being written through us (from the first write
 * to the close that records `seen`) it is not checked, since its times
 * change by our own hand; a change behind our back in that window goes
 * unnoticed, as with NFS's weak cache consistency, but for its size, which
 * the close follows. revalidate_ms narrows the window between attribute
 * checks (--attr-timeout) to that many ms.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "fuse/fs.h"

/* Buckets of the identity table: it holds up to max_files idle ones plus
 * the open ones, and doubles when it holds twice its buckets. */
#define ID_BUCKETS_MIN 4096

static size_t id_bucket(const struct fs *fs, dev_t dev, ino_t ino)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev;
	return (size_t)(h ^ (h >> 31)) & (fs->id_nbuckets - 1);
}

int fs_ident_init(struct fs *fs)
{
	pthread_mutex_init(&fs->id_mu, NULL);
	fs->id_nbuckets = ID_BUCKETS_MIN;
	fs->id_hash = calloc(ID_BUCKETS_MIN, sizeof *fs->id_hash);
	fs_slots_init(fs);
	return fs->id_hash ? 0 : -ENOMEM;
}

static bool ts_equal(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

static bool seen_equal(const struct fs_seen *a, const struct fs_seen *b)
{
	return a->size == b->size && ts_equal(a->mtime, b->mtime) &&
	       ts_equal(a->ctime, b->ctime) && ts_equal(a->btime, b->btime) && a->gen == b->gen;
}

/* What SRC says of the file of fd (a file fd, not O_PATH: the ioctl).
 * Birth time and generation tell a file from another that reused its
 * inode number within one timestamp tick with the same size and mtime
 * (where SRC has no file handles, whose keys tell them apart already);
 * file systems without them give 0. 0 or -errno. */
static int seen_of(int fd, struct fs_seen *s, nlink_t *nlink)
{
	struct statx sx;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_BTIME, &sx) < 0)
		return -errno;
	*s = (struct fs_seen){
		.size = sx.stx_size,
		.mtime = { .tv_sec = sx.stx_mtime.tv_sec, .tv_nsec = sx.stx_mtime.tv_nsec },
		.ctime = { .tv_sec = sx.stx_ctime.tv_sec, .tv_nsec = sx.stx_ctime.tv_nsec },
	};
	if (sx.stx_mask & STATX_BTIME)
		s->btime = (struct timespec){ .tv_sec = sx.stx_btime.tv_sec,
					      .tv_nsec = sx.stx_btime.tv_nsec };
	int gen;
	if (ioctl(fd, FS_IOC_GETVERSION, &gen) == 0)
		s->gen = (uint32_t)gen;
	if (nlink)
		*nlink = sx.stx_nlink;
	return 0;
}

/* What SRC says of id's file, through the fd cache. 0 or -errno. */
static int ident_look(struct fs *fs, struct fs_ident *id, struct fs_seen *s, nlink_t *nlink)
{
	int fd = fs_fd_get(fs, id);
	if (fd < 0)
		return fd;
	int r = seen_of(fd, s, nlink);
	fs_fd_put(fs, id);
	return r;
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

static void hash_insert(struct fs *fs, struct fs_ident *id)
{
	size_t b = id_bucket(fs, id->key.dev, id->key.ino);
	id->hnext = fs->id_hash[b];
	fs->id_hash[b] = id;
	fs->id_count++;
}

static void hash_remove(struct fs *fs, struct fs_ident *id)
{
	struct fs_ident **pp = &fs->id_hash[id_bucket(fs, id->key.dev, id->key.ino)];
	while (*pp && *pp != id)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = id->hnext;
	fs->id_count--;
}

/* Under id_mu: twice the buckets once the table holds twice as many
 * identities (a failed allocation keeps the old table: chains grow). */
static void hash_grow(struct fs *fs)
{
	if (fs->id_count <= 2 * fs->id_nbuckets)
		return;
	size_t n = fs->id_nbuckets * 2, oldn = fs->id_nbuckets;
	struct fs_ident **h = calloc(n, sizeof *h), **old = fs->id_hash;
	if (!h)
		return;
	fs->id_hash = h;
	fs->id_nbuckets = n;
	for (size_t b = 0; b < oldn; b++)
		for (struct fs_ident *id = old[b], *next; id; id = next) {
			next = id->hnext;
			size_t k = id_bucket(fs, id->key.dev, id->key.ino);
			id->hnext = h[k];
			h[k] = id;
		}
	free(old);
}

static struct fs_ident *hash_find(struct fs *fs, const struct fs_key *k)
{
	struct fs_ident *id = fs->id_hash[id_bucket(fs, k->dev, k->ino)];
	while (id && !fs_key_eq(&id->key, k))
		id = id->hnext;
	return id;
}

/* Every cached page of id's slot (flags: VC_DROP_DISCARD or 0: dirty
 * ones written back first): those below its size, as no page of a slot is
 * cached at or past the page holding the file's end (reads stop at the
 * size; a shrink drops what lies past). Cost: O(the file's pages). */
static int drop_all(struct fs *fs, struct fs_ident *id, unsigned flags)
{
	uint64_t len = fs_page_up(fs, atomic_load(&id->size));
	return id->vol && len ? vc_volume_drop(id->vol, id->base, len, flags) : 0;
}

static void ident_free(struct fs_ident *id)
{
	pthread_rwlock_destroy(&id->lk);
	fs_ra_table_fini(&id->ra);
	free(id);
}

/* An identity that left the table (nobody references it): its pages
 * dropped (discard: unlinked, its dirty pages are of no file), its fd
 * closed, its slot freed. With nothing held. A failed write-back puts it
 * back, idle, so nothing is lost (unless a newer identity of the file
 * has appeared meanwhile: then its pages are discarded, as the newer
 * one reads SRC already). */
static void ident_destroy(struct fs *fs, struct fs_ident *id, bool discard)
{
	if (id->slot != FS_NO_SLOT && drop_all(fs, id, discard ? VC_DROP_DISCARD : 0) < 0) {
		fprintf(stderr, "vramcache mount: dropping a file's pages: %s\n", vc_last_error());
		pthread_mutex_lock(&fs->id_mu);
		bool newer = hash_find(fs, &id->key) != NULL;
		if (!newer) {
			hash_insert(fs, id);
			lru_push(fs, id);
		}
		pthread_mutex_unlock(&fs->id_mu);
		if (!newer)
			return;
		(void)drop_all(fs, id, VC_DROP_DISCARD);
	}
	fs_fd_forget(fs, id);
	if (id->slot != FS_NO_SLOT) {
		pthread_mutex_lock(&fs->id_mu);
		fs_slot_free(fs, id->slot);
		pthread_mutex_unlock(&fs->id_mu);
	}
	ident_free(id);
}

/* Evictions per open or close: 2 keeps the table at max_files (each call
 * adds at most one identity) and bounds the work of one call, as does
 * looking at no more than 8 idle identities (those with unflushed writes,
 * write-back's failed flushes, are passed over). */
#define EVICT_BATCH 2
#define EVICT_LOOK 8

/* Under id_mu: takes up to `max` idle identities out of the table while
 * it holds more than max_files, least recently used first, skipping those
 * with unflushed writes; the caller destroys them unlocked. */
static unsigned evict_some(struct fs *fs, struct fs_ident **out, unsigned max)
{
	unsigned n = 0, looked = 0;
	for (struct fs_ident *v = fs->lru_tail, *prev; v && n < max && looked++ < EVICT_LOOK &&
						       fs->id_count > fs->o->max_files;
	     v = prev) {
		prev = v->prev;
		if (fs_ident_unflushed(fs, v))
			continue;
		lru_remove(fs, v);
		hash_remove(fs, v);
		out[n++] = v;
		atomic_fetch_add(&fs->ids_evicted, 1);
	}
	return n;
}

/* Under id_mu: an idle identity of k's inode number whose key is not k's
 * (its file was deleted in SRC and the number reused; only handles tell),
 * taken out of the table for the caller to destroy, discarding its pages:
 * no name reaches its file. NULL: none. */
static struct fs_ident *take_stale(struct fs *fs, const struct fs_key *k)
{
	if (!k->fh_len)
		return NULL;
	struct fs_ident *id = fs->id_hash[id_bucket(fs, k->dev, k->ino)];
	while (id && !(id->key.dev == k->dev && id->key.ino == k->ino && id->refs == 0))
		id = id->hnext;
	if (id) {
		lru_remove(fs, id);
		hash_remove(fs, id);
	}
	return id;
}

static void destroy_all(struct fs *fs, struct fs_ident **v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		ident_destroy(fs, v[i], false);
}

/* An fd of the file itself (the inode's is O_PATH, named name under
 * /proc/self/fd): read-write unless the mount or SRC is read-only; *ro
 * says which. */
static int open_named(struct fs *fs, const char *name, bool write, bool *ro)
{
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

static int file_open(struct fs *fs, struct fs_inode *in, bool write, bool *ro)
{
	int path = fs_inode_fd(fs, in);
	if (path < 0)
		return path;
	char name[16];
	fs_fd_name(path, name);
	int fd = open_named(fs, name, write, ro);
	fs_inode_put(fs, in);
	return fd;
}

int fs_ident_resize_locked(struct fs *fs, struct fs_ident *id, uint64_t size)
{
	const uint64_t old = atomic_load(&id->size);
	if (size == old)
		return 0;
	if (id->vol && size > FS_SLOT_BYTES) {
		/* Larger than its slot: uncached from now on. */
		int r = drop_all(fs, id, 0);
		if (r < 0)
			return r;
		id->vol = NULL;
		atomic_fetch_add(&fs->ids_uncached, 1);
	}
	if (id->vol) {
		/* A shrink's pages wholly past the new end go unwritten, and
		 * the page holding the new end, when partial, is written back
		 * if dirty (clipped at the old size) and dropped, since its
		 * bytes past that end must read as zeros from now on. A growth
		 * keeps the page holding the old end: its bytes past that end
		 * are zeros already (loaded past SRC's end, or dropped by the
		 * shrink that made the end), as SRC's are, and a write-back
		 * clips at the size of its time. Appends then cost no reload
		 * of the last page (a store read a write, as sqlite's journal
		 * and cp's files made). */
		const uint64_t ps = vc_page_size(fs->c), lo = size < old ? size : old;
		const uint64_t edge = lo & ~(ps - 1), past = fs_page_up(fs, size), hw = fs_page_up(fs, old);
		int r = 0;
		if (past < hw)
			r = vc_volume_drop(id->vol, id->base + past, hw - past, VC_DROP_DISCARD);
		if (r == 0 && size < old && lo > edge)
			r = vc_volume_drop(id->vol, id->base + edge, ps, 0);
		if (r < 0)
			return r;
	}
	atomic_store(&id->size, size);
	return 0;
}

/* SRC's file changed behind our back and is now `size` long: every cached
 * page dropped, then the new size taken. Dirty pages are written back
 * first (clipped at the old size), so no acknowledged write is lost: the
 * pages they cover win over the change. Should that fail, they stay
 * dirty and the old size is kept (the next check tries again). With
 * id->lk exclusive. Cost: O(the file's pages). */
static int follow_src_locked(struct fs *fs, struct fs_ident *id, uint64_t size)
{
	int r = drop_all(fs, id, 0);
	if (r < 0)
		return r;
	if (id->vol && size > FS_SLOT_BYTES) {
		id->vol = NULL;
		atomic_fetch_add(&fs->ids_uncached, 1);
	}
	atomic_store(&id->size, size); /* nothing is cached now */
	atomic_fetch_add(&id->drops, 1);
	return 0;
}

int fs_ident_check_locked(struct fs *fs, struct fs_ident *id)
{
	/* Written through us since `seen` was taken: SRC's times (and in
	 * write-back, as dirty pages go back, its bytes) are changing by our
	 * own hand, so a difference proves nothing; the file is checked again
	 * once the writer's close has recorded `seen`. */
	if (atomic_load(&id->wrote))
		return 0;
	/* With writes not written back (a flush that SRC refused), the same:
	 * every later write-back of them, an eviction's or a flush's, changes
	 * SRC's times by our hand, and a drop would have to write them back
	 * first, failing the open, getattr or read that checked with SRC's
	 * error. Checked again once a flush took them. */
	if (fs_ident_unflushed(fs, id))
		return 0;
	struct fs_seen st;
	int r = ident_look(fs, id, &st, NULL);
	if (r < 0)
		return r;
	atomic_store(&id->checked_ns, vc_now_ns());
	if (seen_equal(&id->seen, &st))
		return 0;
	if ((r = follow_src_locked(fs, id, st.size)) < 0)
		return r;
	id->seen = st;
	atomic_store(&id->wrote, false);
	return 1;
}

void fs_ident_seen_locked(struct fs *fs, struct fs_ident *id)
{
	struct fs_seen st;
	if (ident_look(fs, id, &st, NULL) < 0)
		return;
	/* Our own changes leave SRC's size at id->size (a write past the end
	 * grows both under lk exclusive; a failed one takes SRC's). Another
	 * size: SRC changed behind our back while the file was written
	 * through us (the window, above). The cache follows, as the check
	 * would, our dirty pages written back first; should that fail,
	 * nothing is recorded and the next change through us tries again. */
	if (id->vol && st.size != atomic_load(&id->size) && follow_src_locked(fs, id, st.size) < 0)
		return;
	fs_inode_told(fs, &id->key, st.size, st.mtime);
	id->seen = st;
	atomic_store(&id->wrote, false);
	atomic_store(&id->checked_ns, vc_now_ns());
}

void fs_ident_attr_check(struct fs *fs, const struct fs_key *k, const struct stat *st)
{
	if (fs->o->revalidate_ms == FS_REVALIDATE_NEVER || !S_ISREG(st->st_mode))
		return;
	pthread_mutex_lock(&fs->id_mu);
	struct fs_ident *id = hash_find(fs, k);
	/* Idle: no handle reads it; the next open checks it. Being written
	 * through us: SRC changes by our hand (fs_ident_check_locked). */
	if (id && id->refs > 0 && !atomic_load(&id->wrote))
		id->refs++;
	else
		id = NULL;
	pthread_mutex_unlock(&fs->id_mu);
	if (!id)
		return;
	pthread_rwlock_rdlock(&id->lk);
	bool same = id->seen.size == (uint64_t)st->st_size && ts_equal(id->seen.mtime, st->st_mtim) &&
		    ts_equal(id->seen.ctime, st->st_ctim);
	pthread_rwlock_unlock(&id->lk);
	if (!same) {
		/* The check looks again (st may predate our own last change)
		 * and decides. */
		pthread_rwlock_wrlock(&id->lk);
		(void)fs_ident_check_locked(fs, id);
		pthread_rwlock_unlock(&id->lk);
	}
	fs_ident_put(fs, id);
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
	int r = fs_ident_resize_locked(fs, id, size);
	if (r < 0)
		return r;
	int fd = fs_fd_get(fs, id);
	if (fd < 0)
		return fd;
	r = ftruncate(fd, (off_t)size) < 0 ? -errno : 0;
	struct stat st;
	/* Failed: SRC kept its size (the pages dropped were only cache). */
	if (r < 0 && fstat(fd, &st) == 0)
		(void)fs_ident_resize_locked(fs, id, (uint64_t)st.st_size);
	fs_fd_put(fs, id);
	return r;
}

int fs_ident_flush_locked(struct fs *fs, struct fs_ident *id)
{
	if (fs->o->cfg.write_mode != VC_WRITE_BACK || !id->vol)
		return 0;
	uint64_t gen = atomic_load(&id->wgen), size = atomic_load(&id->size);
	/* Length at least 1: 0 would mean the whole volume. */
	int r = vc_volume_writeback(id->vol, id->base, size ? fs_page_up(fs, size) : 1);
	if (r == 0)
		atomic_store(&id->cgen, gen);
	return r;
}

/* A new identity of `in` with one reference, its fd `fd` (access ro);
 * not in the table yet. NULL: out of memory. Under id_mu (slots). */
static struct fs_ident *ident_new(struct fs *fs, struct fs_inode *in, const struct fs_seen *seen,
				  bool ro)
{
	struct fs_ident *id = calloc(1, sizeof *id + in->key.fh_len);
	if (!id)
		return NULL;
	id->key = in->key;
	id->key.fh = (unsigned char *)(id + 1);
	memcpy(id->key.fh, in->key.fh, in->key.fh_len);
	id->fd = -1;
	id->ro = ro;
	id->slot = FS_NO_SLOT;
	pthread_rwlock_init(&id->lk, NULL);
	fs_ra_table_init(&id->ra, RA_STREAMS);
	atomic_store(&id->size, seen->size);
	id->seen = *seen;
	atomic_store(&id->checked_ns, vc_now_ns());
	id->refs = 1;
	if (!fs->o->passthrough && seen->size <= FS_SLOT_BYTES) {
		if (fs_slot_alloc(fs, id) < 0 || fs_fd_bind(fs, id) < 0) {
			if (id->slot != FS_NO_SLOT)
				fs_slot_free(fs, id->slot);
			id->slot = FS_NO_SLOT;
			id->vol = NULL;
		}
	}
	if (!id->vol && !fs->o->passthrough)
		atomic_fetch_add(&fs->ids_uncached, 1);
	return id;
}

int fs_ident_open(struct fs *fs, struct fs_inode *in, bool write, struct fs_ident **out,
		  bool *changed)
{
	*changed = false;
	bool ro;
	int fd = file_open(fs, in, write, &ro);
	if (fd < 0)
		return fd;
	struct fs_ident *victims[EVICT_BATCH];
	struct fs_seen seen;
	int r = seen_of(fd, &seen, NULL);
	if (r < 0) {
		close(fd);
		return r;
	}
	pthread_mutex_lock(&fs->id_mu);
	struct fs_ident *id = hash_find(fs, &in->key);
	if (!id) {
		if (!(id = ident_new(fs, in, &seen, ro))) {
			pthread_mutex_unlock(&fs->id_mu);
			close(fd);
			return -ENOMEM;
		}
		struct fs_ident *old = take_stale(fs, &in->key);
		hash_insert(fs, id);
		hash_grow(fs);
		unsigned nv = evict_some(fs, victims, EVICT_BATCH);
		pthread_mutex_unlock(&fs->id_mu);
		fs_fd_offer(fs, id, fd, false, ro);
		if (old)
			ident_destroy(fs, old, true);
		destroy_all(fs, victims, nv);
		atomic_fetch_add(&id->opens, 1);
		*out = id;
		return 0;
	}
	id->refs++;
	lru_remove(fs, id);
	pthread_mutex_unlock(&fs->id_mu);
	atomic_fetch_add(&id->opens, 1);

	/* Known: check it against SRC; a read-only identity now opened for
	 * writing (SRC's permissions allow it now) takes the new fd. */
	pthread_rwlock_wrlock(&id->lk);
	fs_fd_offer(fs, id, fd, write && id->ro && !ro, ro);
	if (fs->o->revalidate_ms != FS_REVALIDATE_NEVER)
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
	struct fs_ident *victims[EVICT_BATCH];
	unsigned nv = 0;
	bool destroy = false;
	pthread_mutex_lock(&fs->id_mu);
	if (--id->refs == 0) {
		/* Unlinked, or uncached (nothing to keep): it goes now. */
		if (id->gone || !id->vol) {
			hash_remove(fs, id);
			destroy = true;
		} else {
			lru_push(fs, id);
			nv = evict_some(fs, victims, EVICT_BATCH);
		}
	}
	pthread_mutex_unlock(&fs->id_mu);
	if (destroy)
		ident_destroy(fs, id, id->gone);
	destroy_all(fs, victims, nv);
}

struct fs_ident *fs_ident_find_or_lock(struct fs *fs, const struct fs_key *k)
{
	pthread_mutex_lock(&fs->id_mu);
	struct fs_ident *id = hash_find(fs, k);
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

bool fs_ident_writing(struct fs *fs, const struct fs_key *k)
{
	pthread_mutex_lock(&fs->id_mu);
	struct fs_ident *id = hash_find(fs, k);
	bool w = id && atomic_load(&id->wrote);
	pthread_mutex_unlock(&fs->id_mu);
	return w;
}

void fs_ident_unlinked(struct fs *fs, const struct fs_key *k)
{
	struct fs_ident *id = fs_ident_find_or_lock(fs, k);
	if (!id) {
		fs_ident_unlock_table(fs);
		return;
	}
	struct fs_seen s;
	nlink_t nlink;
	/* Gone from SRC (its handle opens no more): freed too. */
	int r = ident_look(fs, id, &s, &nlink);
	if (r == -ESTALE || (r == 0 && nlink == 0)) {
		pthread_mutex_lock(&fs->id_mu);
		id->gone = true;
		pthread_mutex_unlock(&fs->id_mu);
	}
	fs_ident_put(fs, id); /* the last reference frees it, discarding its pages */
}

int fs_ident_fini(struct fs *fs)
{
	/* The volumes first: their write-back needs the identities' fds.
	 * Should it fail, the identities stay (vc_close tries again). */
	int first = fs_slots_fini(fs);
	for (size_t b = 0; first == 0 && fs->id_hash && b < fs->id_nbuckets; b++) {
		struct fs_ident *id = fs->id_hash[b];
		while (id) {
			struct fs_ident *next = id->hnext;
			fs_fd_forget(fs, id);
			ident_free(id);
			id = next;
		}
	}
	if (first == 0) {
		free(fs->id_hash);
		fs->id_hash = NULL;
		pthread_mutex_destroy(&fs->id_mu);
	}
	return first;
}
