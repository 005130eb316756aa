/* The inode table: what a FUSE inode number stands for.
 *
 * Every inode the kernel knows (it looked the name up and has not
 * forgotten it) is one struct fs_inode, found by its key (fs.h: dev, ino
 * and, where SRC gives them, the file handle), so that hard links share
 * one and a file whose inode number SRC reused is another. The kernel's
 * inode number is the struct's address (the root's is FUSE_ROOT_ID).
 *
 * Fds. Every operation works relative to an O_PATH | O_NOFOLLOW fd of the
 * object with *at() calls and AT_SYMLINK_NOFOLLOW / O_NOFOLLOW, so a
 * symlink in SRC is never followed by us: the kernel resolves it through
 * the mount as it would any other, and ".." is the kernel's too. Where SRC
 * gives file handles (name_to_handle_at, probed at start), an inode holds
 * its fd only while it is used (fs_inode_fd .. fs_inode_put, or a handle
 * open on the file: a file deleted in SRC while open through the mount
 * stays readable) and in an LRU of at most max_path_fds idle ones;
 * fs_inode_fd reopens a closed one by its handle (open_by_handle_at), so
 * the fds held are bounded by the calls in flight, the files open and
 * max_path_fds, not by the inodes the kernel knows (a walk over millions
 * of files). Where SRC gives no handles (fs->handles false, with a message
 * at start) or the object is on another mount under SRC, the inode keeps
 * its fd from lookup to forget, as libfuse's passthrough_ll does: an
 * inode costs an fd then.
 *
 * Lock rules: ino_mu guards the hash, lookup counts, fds, users and the
 * LRU; a leaf. Reopens by handle run without it.
 *
 * Cost: a lookup is one openat, one fstat, one name_to_handle_at and an
 * O(1) hash probe under ino_mu; the table doubles when it holds twice its
 * buckets; fs_inode_fd is O(1), plus an open_by_handle_at when the fd was
 * closed; closing over the limit walks the LRU's tail, whose entries are
 * all idle (an inode in use is not in it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuse/fs.h"

static size_t bucket(const struct fs *fs, dev_t dev, ino_t ino)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev;
	return (size_t)(h ^ (h >> 29)) & (fs->ino_nbuckets - 1);
}

bool fs_key_eq(const struct fs_key *a, const struct fs_key *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->fh_len == b->fh_len &&
	       a->fh_type == b->fh_type && (a->fh_len == 0 || memcmp(a->fh, b->fh, a->fh_len) == 0);
}

void fs_key_of(struct fs *fs, int fd, const struct stat *st, struct fs_keybuf *kb)
{
	kb->k = (struct fs_key){ .dev = st->st_dev, .ino = st->st_ino, .fh = kb->b };
	if (!fs->handles)
		return;
	union {
		struct file_handle fh;
		char buf[sizeof(struct file_handle) + FS_FH_MAX];
	} u;
	u.fh.handle_bytes = FS_FH_MAX;
	int mnt;
	/* Another mount under SRC (its handles need its own mount fd): none. */
	if (name_to_handle_at(fd, "", &u.fh, &mnt, AT_EMPTY_PATH) < 0 || mnt != fs->mount_id)
		return;
	kb->k.fh_type = u.fh.handle_type;
	kb->k.fh_len = u.fh.handle_bytes;
	memcpy(kb->b, u.fh.f_handle, u.fh.handle_bytes);
}

/* open_by_handle_at of key k (it has a handle). */
static int open_handle(struct fs *fs, const struct fs_key *k, int flags)
{
	union {
		struct file_handle fh;
		char buf[sizeof(struct file_handle) + FS_FH_MAX];
	} u;
	u.fh.handle_bytes = k->fh_len;
	u.fh.handle_type = k->fh_type;
	memcpy(u.fh.f_handle, k->fh, k->fh_len);
	int fd = open_by_handle_at(fs->mount_fd, &u.fh, flags | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Whether SRC gives handles that open again (root may open them:
 * CAP_DAC_READ_SEARCH). Says why not on stderr. */
static bool probe_handles(struct fs *fs, const char *src)
{
	union {
		struct file_handle fh;
		char buf[sizeof(struct file_handle) + FS_FH_MAX];
	} u;
	u.fh.handle_bytes = FS_FH_MAX;
	int fd = -1;
	const char *why = NULL;
	if (name_to_handle_at(fs->mount_fd, "", &u.fh, &fs->mount_id, AT_EMPTY_PATH) < 0)
		why = "name_to_handle_at";
	else if ((fd = open_by_handle_at(fs->mount_fd, &u.fh, O_PATH | O_CLOEXEC)) < 0)
		why = "open_by_handle_at";
	if (fd >= 0)
		close(fd);
	if (why)
		fprintf(stderr,
			"vramcache mount: %s: no file handles here (%s: %s): every file and "
			"directory the kernel knows holds an fd, so walking more of them than "
			"the fd limit fails with EMFILE (raise `ulimit -n`)\n",
			src, why, strerror(errno));
	return !why;
}

int fs_inode_init(struct fs *fs, const char *src, bool handles)
{
	pthread_mutex_init(&fs->ino_mu, NULL);
	fs->mount_fd = -1;
	fs->ino_nbuckets = 1024;
	fs->ino_hash = calloc(fs->ino_nbuckets, sizeof *fs->ino_hash);
	if (!fs->ino_hash)
		return -ENOMEM;
	int fd = open(src, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	fs->root = (struct fs_inode){ .fd = fd, .key = { .dev = st.st_dev, .ino = st.st_ino },
				      .type = S_IFDIR, .nlookup = 2 };
	/* open_by_handle_at takes no O_PATH fd for the mount. */
	fs->mount_fd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->mount_fd < 0)
		return -errno;
	fs->handles = handles && probe_handles(fs, src);
	return 0;
}

void fs_inode_fini(struct fs *fs)
{
	for (size_t b = 0; fs->ino_hash && b < fs->ino_nbuckets; b++) {
		struct fs_inode *in = fs->ino_hash[b];
		while (in) {
			struct fs_inode *next = in->next;
			if (in->fd >= 0)
				close(in->fd);
			free(in);
			in = next;
		}
	}
	free(fs->ino_hash);
	if (fs->root.fd >= 0)
		close(fs->root.fd);
	if (fs->mount_fd >= 0)
		close(fs->mount_fd);
	pthread_mutex_destroy(&fs->ino_mu);
}

struct fs_inode *fs_inode(struct fs *fs, fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? &fs->root : (struct fs_inode *)(uintptr_t)ino;
}

/* Under ino_mu: twice the buckets, when the table holds twice as many
 * inodes (a failed allocation keeps the old table: chains grow). */
static void grow(struct fs *fs)
{
	size_t n = fs->ino_nbuckets * 2;
	struct fs_inode **h = calloc(n, sizeof *h);
	if (!h)
		return;
	struct fs_inode **old = fs->ino_hash;
	size_t oldn = fs->ino_nbuckets;
	fs->ino_hash = h;
	fs->ino_nbuckets = n;
	for (size_t b = 0; b < oldn; b++)
		for (struct fs_inode *in = old[b], *next; in; in = next) {
			next = in->next;
			size_t k = bucket(fs, in->key.dev, in->key.ino);
			in->next = h[k];
			h[k] = in;
		}
	free(old);
}

/* The LRU of idle fds that may close (under ino_mu): inodes with a handle,
 * an fd, and no user. */
static void lru_unlink(struct fs *fs, struct fs_inode *in)
{
	if (in->fprev)
		in->fprev->fnext = in->fnext;
	else if (fs->ino_lru_head == in)
		fs->ino_lru_head = in->fnext;
	else
		return; /* not in it */
	if (in->fnext)
		in->fnext->fprev = in->fprev;
	else
		fs->ino_lru_tail = in->fprev;
	in->fprev = in->fnext = NULL;
	fs->ino_idle_fds--;
}

static void lru_push(struct fs *fs, struct fs_inode *in)
{
	in->fprev = NULL;
	in->fnext = fs->ino_lru_head;
	if (fs->ino_lru_head)
		fs->ino_lru_head->fprev = in;
	else
		fs->ino_lru_tail = in;
	fs->ino_lru_head = in;
	fs->ino_idle_fds++;
}

/* Under ino_mu: closes the least recently used idle fds past the limit;
 * up to 2 a call (each call adds at most one), so none waits long. The
 * fds are returned to close outside the lock. */
static unsigned trim(struct fs *fs, int out[2])
{
	unsigned n = 0;
	while (n < 2 && fs->ino_idle_fds > fs->o->max_path_fds) {
		struct fs_inode *v = fs->ino_lru_tail;
		lru_unlink(fs, v);
		out[n++] = v->fd;
		v->fd = -1;
		fs->ino_fds--;
		atomic_fetch_add_explicit(&fs->ino_fd_closes, 1, memory_order_relaxed);
	}
	return n;
}

static void close_all(const int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
}

/* Under ino_mu: an inode's user is done with its fd. Returns the inode to
 * free (forgotten meanwhile), or NULL. */
static struct fs_inode *unuse_locked(struct fs *fs, struct fs_inode *in)
{
	if (--in->users)
		return NULL;
	if (in->nlookup == 0 && in != &fs->root)
		return in; /* forgotten while in use: out of the table already */
	if (in->fd >= 0 && in->key.fh_len)
		lru_push(fs, in);
	return NULL;
}

static void free_inode(struct fs_inode *in)
{
	if (in->fd >= 0)
		close(in->fd);
	free(in);
}

static void set_told(struct fs_inode *in, const struct stat *st)
{
	in->ksize = (uint64_t)st->st_size;
	in->kmtime = st->st_mtim;
}

/* Under ino_mu: a new inode of key k (fd its O_PATH fd, ours now) in the
 * table with one lookup; NULL: out of memory (fd not closed). */
static struct fs_inode *inode_add(struct fs *fs, int fd, const struct fs_key *k,
				  const struct stat *st)
{
	struct fs_inode *in = calloc(1, sizeof *in + k->fh_len);
	if (!in)
		return NULL;
	size_t b = bucket(fs, k->dev, k->ino);
	*in = (struct fs_inode){ .fd = fd, .key = *k, .type = st->st_mode & S_IFMT, .nlookup = 1,
				 .next = fs->ino_hash[b] };
	in->key.fh = (unsigned char *)(in + 1);
	memcpy(in->key.fh, k->fh, k->fh_len);
	set_told(in, st);
	fs->ino_hash[b] = in;
	fs->ino_fds++;
	if (in->key.fh_len)
		lru_push(fs, in);
	if (++fs->ino_count > 2 * fs->ino_nbuckets)
		grow(fs);
	return in;
}

/* Under ino_mu: the inode of key k in the table, or NULL. */
static struct fs_inode *inode_find(struct fs *fs, const struct fs_key *k)
{
	struct fs_inode *in = fs->ino_hash[bucket(fs, k->dev, k->ino)];
	while (in && !fs_key_eq(&in->key, k))
		in = in->next;
	return in;
}

/* Under ino_mu: in leaves the table (forgotten, or renewed). */
static void unhash(struct fs *fs, struct fs_inode *in)
{
	struct fs_inode **pp = &fs->ino_hash[bucket(fs, in->key.dev, in->key.ino)];
	while (*pp && *pp != in)
		pp = &(*pp)->next;
	if (*pp)
		*pp = in->next;
	fs->ino_count--;
	in->unhashed = true;
}

struct fs_inode *fs_inode_get(struct fs *fs, int fd, const struct fs_key *k,
			      const struct stat *st)
{
	if (k->dev == fs->root.key.dev && k->ino == fs->root.key.ino) {
		close(fd); /* a hard link can't name a directory; a bind mount can */
		pthread_mutex_lock(&fs->ino_mu);
		fs->root.nlookup++;
		pthread_mutex_unlock(&fs->ino_mu);
		return &fs->root;
	}
	int closing[3];
	unsigned nc = 0;
	pthread_mutex_lock(&fs->ino_mu);
	struct fs_inode *in = inode_find(fs, k);
	if (in) {
			in->nlookup++;
			if (in->fd < 0) { /* keep it: the kernel's next call is on it */
				in->fd = fd;
				fs->ino_fds++;
				if (!in->users)
					lru_push(fs, in);
				nc = trim(fs, closing);
			} else {
				closing[nc++] = fd;
			}
			pthread_mutex_unlock(&fs->ino_mu);
			close_all(closing, nc);
			return in;
	}
	if (!(in = inode_add(fs, fd, k, st))) {
		pthread_mutex_unlock(&fs->ino_mu);
		close(fd);
		return NULL;
	}
	nc = trim(fs, closing);
	pthread_mutex_unlock(&fs->ino_mu);
	close_all(closing, nc);
	return in;
}

bool fs_inode_differs(struct fs *fs, struct fs_inode *in, const struct stat *st)
{
	if (!atomic_load(&fs->kwb) || in->type != S_IFREG)
		return false;
	pthread_mutex_lock(&fs->ino_mu);
	bool d = in->ksize != (uint64_t)st->st_size || in->kmtime.tv_sec != st->st_mtim.tv_sec ||
		 in->kmtime.tv_nsec != st->st_mtim.tv_nsec;
	pthread_mutex_unlock(&fs->ino_mu);
	return d;
}

void fs_inode_told(struct fs *fs, const struct fs_key *k, uint64_t size, struct timespec mtime)
{
	if (!atomic_load(&fs->kwb))
		return;
	pthread_mutex_lock(&fs->ino_mu);
	struct fs_inode *in = inode_find(fs, k);
	if (in) {
		in->ksize = size;
		in->kmtime = mtime;
	}
	pthread_mutex_unlock(&fs->ino_mu);
}

struct fs_inode *fs_inode_renew(struct fs *fs, struct fs_inode *in, const struct stat *st)
{
	/* An fd of its own: dup of the old inode's, else by the handle. */
	int fd = fs_inode_fd(fs, in);
	if (fd >= 0) {
		fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		fd = fd < 0 ? -errno : fd;
		fs_inode_put(fs, in);
	}
	if (fd < 0)
		return NULL;
	struct fs_inode *dead = NULL, *nu;
	pthread_mutex_lock(&fs->ino_mu);
	if (!in->unhashed)
		unhash(fs, in);
	/* A concurrent lookup renewed it first: that inode takes this one's
	 * lookup too (its attributes are as new). */
	if ((nu = inode_find(fs, &in->key))) {
		nu->nlookup++;
		set_told(nu, st);
	} else {
		nu = inode_add(fs, fd, &in->key, st);
		fd = -1;
	}
	if (nu) {
		in->nlookup--;
		if (in->nlookup == 0) {
			lru_unlink(fs, in);
			if (in->fd >= 0)
				fs->ino_fds--;
			dead = in->users ? NULL : in;
		}
	}
	pthread_mutex_unlock(&fs->ino_mu);
	if (fd >= 0)
		close(fd);
	if (dead)
		free_inode(dead);
	return nu;
}

void fs_inode_forget(struct fs *fs, struct fs_inode *in, uint64_t n)
{
	pthread_mutex_lock(&fs->ino_mu);
	in->nlookup = n < in->nlookup ? in->nlookup - n : 0;
	if (in->nlookup || in == &fs->root) {
		pthread_mutex_unlock(&fs->ino_mu);
		return;
	}
	if (!in->unhashed)
		unhash(fs, in);
	lru_unlink(fs, in);
	if (in->fd >= 0)
		fs->ino_fds--;
	bool idle = in->users == 0;
	pthread_mutex_unlock(&fs->ino_mu);
	if (idle)
		free_inode(in); /* else its last user frees it (unuse_locked) */
}

int fs_inode_fd(struct fs *fs, struct fs_inode *in)
{
	pthread_mutex_lock(&fs->ino_mu);
	if (in->fd >= 0) {
		if (in->users++ == 0)
			lru_unlink(fs, in);
		int fd = in->fd;
		pthread_mutex_unlock(&fs->ino_mu);
		return fd;
	}
	in->users++;
	pthread_mutex_unlock(&fs->ino_mu);
	/* Closed only where there is a handle to reopen it by. */
	int fd = in->key.fh_len ? open_handle(fs, &in->key, O_PATH | O_NOFOLLOW) : -ESTALE;
	int closing[3];
	unsigned nc = 0;
	pthread_mutex_lock(&fs->ino_mu);
	if (fd < 0) {
		struct fs_inode *dead = unuse_locked(fs, in);
		pthread_mutex_unlock(&fs->ino_mu);
		if (dead)
			free_inode(dead);
		return fd;
	}
	atomic_fetch_add_explicit(&fs->ino_fd_opens, 1, memory_order_relaxed);
	if (in->fd < 0) {
		in->fd = fd;
		fs->ino_fds++;
	} else {
		closing[nc++] = fd; /* another user reopened it meanwhile */
	}
	fd = in->fd;
	nc += trim(fs, closing + nc);
	pthread_mutex_unlock(&fs->ino_mu);
	close_all(closing, nc);
	return fd;
}

void fs_inode_put(struct fs *fs, struct fs_inode *in)
{
	int closing[2];
	pthread_mutex_lock(&fs->ino_mu);
	struct fs_inode *dead = unuse_locked(fs, in);
	unsigned nc = trim(fs, closing);
	pthread_mutex_unlock(&fs->ino_mu);
	close_all(closing, nc);
	if (dead)
		free_inode(dead);
}

void fs_fd_name(int fd, char buf[16])
{
	snprintf(buf, 16, "%d", fd);
}

int fs_inode_reopen(struct fs *fs, const struct fs_key *k, int flags)
{
	int fd = -ESTALE;
	bool found = false;
	pthread_mutex_lock(&fs->ino_mu);
	for (struct fs_inode *in = fs->ino_hash[bucket(fs, k->dev, k->ino)]; in; in = in->next)
		if (fs_key_eq(&in->key, k) && in->fd >= 0) {
			char name[16];
			fs_fd_name(in->fd, name);
			/* Under ino_mu: the O_PATH fd is not closed meanwhile. */
			fd = openat(fs->proc_fd, name, flags | O_CLOEXEC);
			if (fd < 0)
				fd = -errno;
			found = true;
			break;
		}
	pthread_mutex_unlock(&fs->ino_mu);
	if (!found && k->fh_len)
		fd = open_handle(fs, k, flags);
	return fd;
}
