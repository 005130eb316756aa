/* The fd cache: at most max_fds fds of files kept open for identities,
 * and the table that finds an identity by its slot for the files
 * volumes' I/O (slots.c).
 *
 * An identity (ident.c) needs an fd of its file to read misses, write
 * through or back, check it against SRC, truncate or sync it. Holding one
 * per identity for as long as its pages stay cached would bound the files
 * cached by RLIMIT_NOFILE, and keep a file deleted in SRC from freeing its
 * space. So an identity's fd is opened on demand, kept in an LRU of open
 * fds, and closed again when more than max_fds are open. Reopening goes
 * through the inode table's O_PATH fd of the same (dev, ino), which
 * exists while the kernel knows the inode: always while the file is open
 * through the mount (a handle), so reads, writes and checks always find
 * one. Without a handle the cache may still need the fd for one thing:
 * writing back dirty pages (write-back, an eviction or a flush after a
 * failed one). So an fd is never closed while its identity may hold dirty
 * pages (wgen != cgen: written since the last good flush); such fds may
 * take the count past max_fds, bounded by the files with unflushed writes.
 *
 * Cost: fs_fd_get and fs_fd_put take fd_mu once each, O(1); a reopen is
 * one openat under fd_mu and ino_mu (so opens of closed fds are
 * serialized: they come with misses, which pay a read of SRC anyway);
 * closing over the limit walks the LRU from its tail, moving fds in use or
 * pinned to its head, O(1) amortized per fd opened.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuse/fs.h"

size_t fs_pio(int fd, bool write, void *buf, size_t len, uint64_t off, int *err)
{
	char *b = buf;
	size_t done = 0;
	*err = 0;
	while (done < len) {
		ssize_t n = write ? pwrite(fd, b + done, len - done, (off_t)(off + done))
				  : pread(fd, b + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			*err = -errno;
			break;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return done;
}

void fs_fd_init(struct fs *fs)
{
	pthread_mutex_init(&fs->fd_mu, NULL);
	pthread_cond_init(&fs->fd_cv, NULL);
}

void fs_fd_fini(struct fs *fs)
{
	free(fs->slot_id);
	fs->slot_id = NULL;
	pthread_cond_destroy(&fs->fd_cv);
	pthread_mutex_destroy(&fs->fd_mu);
}

/* Under fd_mu. */
static void fd_unlink(struct fs *fs, struct fs_ident *id)
{
	if (id->fprev)
		id->fprev->fnext = id->fnext;
	else
		fs->fd_head = id->fnext;
	if (id->fnext)
		id->fnext->fprev = id->fprev;
	else
		fs->fd_tail = id->fprev;
	id->fprev = id->fnext = NULL;
}

static void fd_push(struct fs *fs, struct fs_ident *id)
{
	id->fprev = NULL;
	id->fnext = fs->fd_head;
	if (fs->fd_head)
		fs->fd_head->fprev = id;
	else
		fs->fd_tail = id;
	fs->fd_head = id;
}

/* Whether id's fd may close now (fd_mu held): nobody uses it, and no
 * dirty page of it may need it without a handle to reopen from. */
static bool closable(const struct fs *fs, const struct fs_ident *id)
{
	return id->fd_users == 0 && !fs_ident_unflushed(fs, id);
}

/* Under fd_mu: closes least recently used fds until at most max_fds are
 * open or none can close; each fd looked at once. */
static void trim(struct fs *fs)
{
	for (unsigned n = fs->nfds; fs->nfds > fs->o->max_fds && n; n--) {
		struct fs_ident *v = fs->fd_tail;
		fd_unlink(fs, v);
		if (!closable(fs, v)) {
			fd_push(fs, v);
			continue;
		}
		close(v->fd);
		v->fd = -1;
		fs->nfds--;
		atomic_fetch_add_explicit(&fs->fd_closes, 1, memory_order_relaxed);
	}
}

/* Under fd_mu: id's fd becomes fd (id had none). */
static void adopt(struct fs *fs, struct fs_ident *id, int fd)
{
	id->fd = fd;
	fd_push(fs, id);
	fs->nfds++;
}

/* Under fd_mu: id's fd, opened if need be, in use until fs_fd_put. */
static int get_locked(struct fs *fs, struct fs_ident *id)
{
	if (id->fd < 0) {
		int fd = fs_inode_reopen(fs, &id->key, id->ro ? O_RDONLY : O_RDWR);
		if (fd < 0)
			return fd;
		adopt(fs, id, fd);
		atomic_fetch_add_explicit(&fs->fd_opens, 1, memory_order_relaxed);
	} else if (fs->fd_head != id) {
		fd_unlink(fs, id);
		fd_push(fs, id);
	}
	id->fd_users++;
	trim(fs);
	return id->fd;
}

int fs_fd_get(struct fs *fs, struct fs_ident *id)
{
	pthread_mutex_lock(&fs->fd_mu);
	int fd = get_locked(fs, id);
	pthread_mutex_unlock(&fs->fd_mu);
	return fd;
}

int fs_fd_get_slot(struct fs *fs, uint32_t slot, struct fs_ident **out)
{
	pthread_mutex_lock(&fs->fd_mu);
	struct fs_ident *id = slot < fs->slot_cap ? fs->slot_id[slot] : NULL;
	int fd = id ? get_locked(fs, id) : -ESTALE;
	pthread_mutex_unlock(&fs->fd_mu);
	*out = id;
	return fd;
}

int fs_fd_bind(struct fs *fs, struct fs_ident *id)
{
	pthread_mutex_lock(&fs->fd_mu);
	if (id->slot >= fs->slot_cap) {
		uint64_t n = fs->slot_cap ? fs->slot_cap : 1024;
		while (n <= id->slot)
			n *= 2;
		struct fs_ident **t = realloc(fs->slot_id, n * sizeof *t);
		if (!t) {
			pthread_mutex_unlock(&fs->fd_mu);
			return -ENOMEM;
		}
		for (uint64_t i = fs->slot_cap; i < n; i++)
			t[i] = NULL;
		fs->slot_id = t;
		fs->slot_cap = n;
	}
	fs->slot_id[id->slot] = id;
	pthread_mutex_unlock(&fs->fd_mu);
	return 0;
}

void fs_fd_put(struct fs *fs, struct fs_ident *id)
{
	pthread_mutex_lock(&fs->fd_mu);
	if (--id->fd_users == 0) {
		pthread_cond_broadcast(&fs->fd_cv);
		trim(fs);
	}
	pthread_mutex_unlock(&fs->fd_mu);
}

/* Under fd_mu: waits until nobody uses id's fd, then closes it. */
static void close_idle(struct fs *fs, struct fs_ident *id)
{
	while (id->fd_users)
		pthread_cond_wait(&fs->fd_cv, &fs->fd_mu);
	if (id->fd >= 0) {
		fd_unlink(fs, id);
		close(id->fd);
		id->fd = -1;
		fs->nfds--;
	}
}

void fs_fd_offer(struct fs *fs, struct fs_ident *id, int fd, bool replace, bool ro)
{
	pthread_mutex_lock(&fs->fd_mu);
	if (replace)
		close_idle(fs, id);
	if (id->fd < 0) {
		id->ro = ro;
		adopt(fs, id, fd);
		trim(fs);
	} else {
		close(fd);
	}
	pthread_mutex_unlock(&fs->fd_mu);
}

void fs_fd_forget(struct fs *fs, struct fs_ident *id)
{
	pthread_mutex_lock(&fs->fd_mu);
	if (id->slot < fs->slot_cap && fs->slot_id[id->slot] == id)
		fs->slot_id[id->slot] = NULL;
	close_idle(fs, id);
	pthread_mutex_unlock(&fs->fd_mu);
}

int fs_fd_sync_slots(struct fs *fs, uint32_t first, uint32_t last)
{
	pthread_mutex_lock(&fs->fd_mu);
	struct fs_ident **ids = malloc((fs->nfds ? fs->nfds : 1) * sizeof *ids);
	unsigned n = 0;
	for (struct fs_ident *id = fs->fd_head; ids && id; id = id->fnext)
		if (id->slot >= first && id->slot <= last) {
			id->fd_users++;
			ids[n++] = id;
		}
	pthread_mutex_unlock(&fs->fd_mu);
	if (!ids)
		return -ENOMEM;
	int r = 0;
	for (unsigned i = 0; i < n; i++) {
		/* fd is stable while we use it: close_idle waits for users. */
		if (fdatasync(ids[i]->fd) < 0 && r == 0)
			r = -errno;
		fs_fd_put(fs, ids[i]);
	}
	free(ids);
	return r;
}
