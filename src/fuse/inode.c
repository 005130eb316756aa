/* The inode table: what a FUSE inode number stands for.
 *
 * Every inode the kernel knows (it looked the name up and has not
 * forgotten it) is one struct fs_inode holding an O_PATH | O_NOFOLLOW fd of
 * the object in SRC, found by (dev, ino) so that hard links share one. The
 * kernel's inode number is the struct's address (the root's is
 * FUSE_ROOT_ID). Every operation works relative to these fds with *at()
 * calls and AT_SYMLINK_NOFOLLOW / O_NOFOLLOW, so a symlink in SRC is never
 * followed by us: the kernel resolves it through the mount as it would any
 * other, and ".." is the kernel's too. Holding the fd keeps SRC's inode
 * number from being reused while the kernel may still name it.
 *
 * Cost: a lookup is one openat and one fstat plus an O(1) hash probe under
 * ino_mu; the table doubles when it holds twice its buckets.
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

int fs_inode_init(struct fs *fs, const char *src)
{
	pthread_mutex_init(&fs->ino_mu, NULL);
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
	fs->root = (struct fs_inode){ .fd = fd, .dev = st.st_dev, .ino = st.st_ino,
				      .type = S_IFDIR, .nlookup = 2 };
	return 0;
}

void fs_inode_fini(struct fs *fs)
{
	for (size_t b = 0; fs->ino_hash && b < fs->ino_nbuckets; b++) {
		struct fs_inode *in = fs->ino_hash[b];
		while (in) {
			struct fs_inode *next = in->next;
			close(in->fd);
			free(in);
			in = next;
		}
	}
	free(fs->ino_hash);
	if (fs->root.fd >= 0)
		close(fs->root.fd);
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
			size_t k = bucket(fs, in->dev, in->ino);
			in->next = h[k];
			h[k] = in;
		}
	free(old);
}

struct fs_inode *fs_inode_get(struct fs *fs, int fd, const struct stat *st)
{
	if (st->st_dev == fs->root.dev && st->st_ino == fs->root.ino) {
		close(fd); /* a hard link can't name a directory; a bind mount can */
		pthread_mutex_lock(&fs->ino_mu);
		fs->root.nlookup++;
		pthread_mutex_unlock(&fs->ino_mu);
		return &fs->root;
	}
	pthread_mutex_lock(&fs->ino_mu);
	size_t b = bucket(fs, st->st_dev, st->st_ino);
	for (struct fs_inode *in = fs->ino_hash[b]; in; in = in->next)
		if (in->dev == st->st_dev && in->ino == st->st_ino) {
			in->nlookup++;
			pthread_mutex_unlock(&fs->ino_mu);
			close(fd);
			return in;
		}
	struct fs_inode *in = calloc(1, sizeof *in);
	if (!in) {
		pthread_mutex_unlock(&fs->ino_mu);
		close(fd);
		return NULL;
	}
	*in = (struct fs_inode){ .fd = fd, .dev = st->st_dev, .ino = st->st_ino,
				 .type = st->st_mode & S_IFMT, .nlookup = 1, .next = fs->ino_hash[b] };
	fs->ino_hash[b] = in;
	if (++fs->ino_count > 2 * fs->ino_nbuckets)
		grow(fs);
	pthread_mutex_unlock(&fs->ino_mu);
	return in;
}

void fs_inode_forget(struct fs *fs, struct fs_inode *in, uint64_t n)
{
	pthread_mutex_lock(&fs->ino_mu);
	in->nlookup = n < in->nlookup ? in->nlookup - n : 0;
	if (in->nlookup || in == &fs->root) {
		pthread_mutex_unlock(&fs->ino_mu);
		return;
	}
	struct fs_inode **pp = &fs->ino_hash[bucket(fs, in->dev, in->ino)];
	while (*pp && *pp != in)
		pp = &(*pp)->next;
	if (*pp)
		*pp = in->next;
	fs->ino_count--;
	pthread_mutex_unlock(&fs->ino_mu);
	close(in->fd);
	free(in);
}

void fs_inode_name(const struct fs_inode *in, char buf[16])
{
	snprintf(buf, 16, "%d", in->fd);
}

int fs_inode_reopen(struct fs *fs, dev_t dev, ino_t ino, int flags)
{
	int fd = -ESTALE;
	pthread_mutex_lock(&fs->ino_mu);
	for (struct fs_inode *in = fs->ino_hash[bucket(fs, dev, ino)]; in; in = in->next)
		if (in->dev == dev && in->ino == ino) {
			char name[16];
			fs_inode_name(in, name);
			/* Under ino_mu: the O_PATH fd is not closed meanwhile. */
			fd = openat(fs->proc_fd, name, flags | O_CLOEXEC);
			if (fd < 0)
				fd = -errno;
			break;
		}
	pthread_mutex_unlock(&fs->ino_mu);
	return fd;
}
