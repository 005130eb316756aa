/* The operations that pass through to SRC: names, attributes, directories,
 * links, rename, statfs, extended attributes.
 *
 * Each works relative to an inode's O_PATH fd (inode.c) with *at() calls
 * that do not follow symlinks (AT_SYMLINK_NOFOLLOW, O_NOFOLLOW,
 * AT_EMPTY_PATH); calls that take no fd go through /proc/self/fd/N, which
 * names the object itself, not a path that could be swapped. The mount
 * runs as root with default_permissions: the kernel checks the caller's
 * permissions against the attributes we pass on before it asks us.
 * Errors are SRC's errno, unchanged. Three touch the cache: a size change
 * (truncate) goes through the file's identity so its cached pages follow;
 * a name's removal frees an idle identity of a file that no longer exists;
 * and getattr and lookup, whose attributes of a file open through the
 * mount may show that it changed in SRC, make its cache follow the change
 * before the kernel takes them (ident.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fuse/fs.h"

struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct fs_inode *in_of(fuse_req_t req, fuse_ino_t ino)
{
	return fs_inode(fs_of(req), ino);
}

int fs_lookup_entry(struct fs *fs, struct fs_inode *parent, const char *name,
		    struct fuse_entry_param *e)
{
	memset(e, 0, sizeof *e);
	e->attr_timeout = fs->o->attr_timeout;
	e->entry_timeout = fs->o->attr_timeout;
	int pfd = fs_inode_fd(fs, parent);
	if (pfd < 0)
		return pfd;
	int fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	int r = fd < 0 ? -errno : 0;
	fs_inode_put(fs, parent);
	if (r < 0)
		return r;
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	struct fs_keybuf kb;
	fs_key_of(fs, fd, &e->attr, &kb);
	struct fs_inode *in = fs_inode_get(fs, fd, &kb.k, &e->attr);
	if (!in)
		return -ENOMEM;
	/* The kernel takes these attributes for an inode it may have open
	 * (as getattr's). */
	if (S_ISREG(e->attr.st_mode))
		fs_ident_attr_check(fs, &kb.k, &e->attr);
	/* The kernel's write-back cache keeps the size and mtime of an inode
	 * it knows: a file changed in SRC behind our back (not while it is
	 * being written through us: then they change by our hand) is given
	 * to the kernel as another inode, which takes SRC's; the kernel
	 * drops the old one's name at once, and the old inode when no file
	 * is open on it. So sizes follow SRC within the attribute timeout,
	 * as other attributes do. */
	if (fs_inode_differs(fs, in, &e->attr) && !fs_ident_writing(fs, &kb.k)) {
		struct fs_inode *nu = fs_inode_renew(fs, in, &e->attr);
		if (nu)
			in = nu;
	}
	e->ino = in == &fs->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)in;
	return 0;
}

static void reply_entry(fuse_req_t req, struct fs_inode *parent, const char *name)
{
	struct fuse_entry_param e;
	int r = fs_lookup_entry(fs_of(req), parent, name, &e);
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_entry(req, &e);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int r = fs_lookup_entry(fs_of(req), in_of(req, parent), name, &e);
	if (r == -ENOENT) { /* a negative entry, cached as long as positive ones */
		memset(&e, 0, sizeof e);
		e.entry_timeout = fs_of(req)->o->attr_timeout;
		fuse_reply_entry(req, &e);
	} else if (r < 0) {
		fuse_reply_err(req, -r);
	} else {
		fuse_reply_entry(req, &e);
	}
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n)
{
	fs_inode_forget(fs_of(req), in_of(req, ino), n);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		fs_inode_forget(fs_of(req), in_of(req, f[i].ino), f[i].nlookup);
	fuse_reply_none(req);
}

/* in's fd for one call (fs_inode_fd); on failure the request is answered
 * with the error and -1 returned. */
static int fd_or_reply(fuse_req_t req, struct fs_inode *in)
{
	int fd = fs_inode_fd(fs_of(req), in);
	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return -1;
	}
	return fd;
}

/* Before the reply: a request is gone once answered. */
static void put(fuse_req_t req, struct fs_inode *in)
{
	fs_inode_put(fs_of(req), in);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct fs_inode *in = in_of(req, ino);
	int fd = fd_or_reply(req, in);
	if (fd < 0)
		return;
	struct stat st;
	int r = fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? errno : 0;
	put(req, in);
	/* A file open through the mount and changed in SRC: its cache
	 * follows before the kernel takes the new size. */
	if (!r && in->type == S_IFREG)
		fs_ident_attr_check(fs_of(req), &in->key, &st);
	if (r)
		fuse_reply_err(req, r);
	else
		fuse_reply_attr(req, &st, fs_of(req)->o->attr_timeout);
}

/* A regular file's attributes change under its identity's lock (held
 * exclusive), checked against SRC first, so that our own change (a new
 * size, ctime) is recorded as seen, not taken for a change behind our
 * back at the next open; a size change goes through the volume, whose
 * pages follow. A file without an identity changes with the identity
 * table locked, so that none appears meanwhile with the old attributes. */
struct attr_guard {
	struct fs_ident *id;
	bool ref;    /* we took a reference (no handle gave it) */
	bool table;  /* id_mu held: no identity */
};

static int guard_begin(struct fs *fs, struct fs_inode *in, struct fuse_file_info *fi,
		       struct attr_guard *g)
{
	*g = (struct attr_guard){ 0 };
	if (in->type != S_IFREG)
		return 0;
	g->id = fi ? ((struct fs_handle *)(uintptr_t)fi->fh)->id : NULL;
	if (!g->id) {
		g->id = fs_ident_find_or_lock(fs, &in->key);
		g->table = !g->id;
		g->ref = g->id != NULL;
	}
	if (!g->id)
		return 0;
	pthread_rwlock_wrlock(&g->id->lk);
	int r = fs_ident_check_locked(fs, g->id);
	return r < 0 ? r : 0;
}

static void guard_end(struct fs *fs, struct attr_guard *g)
{
	if (g->table)
		fs_ident_unlock_table(fs);
	if (!g->id)
		return;
	fs_ident_seen_locked(fs, g->id);
	pthread_rwlock_unlock(&g->id->lk);
	if (g->ref)
		fs_ident_put(fs, g->id);
}

static int set_size(struct fs *fs, const char *name, struct attr_guard *g, uint64_t size)
{
	if (g->id)
		return g->id->ro ? -EROFS : fs_ident_truncate_locked(fs, g->id, size);
	int fd = openat(fs->proc_fd, name, O_WRONLY | O_CLOEXEC);
	int r = fd < 0 || ftruncate(fd, (off_t)size) < 0 ? -errno : 0;
	if (fd >= 0)
		close(fd);
	return r;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fs_inode *in = in_of(req, ino);
	int fd = fd_or_reply(req, in);
	if (fd < 0)
		return;
	char name[16];
	fs_fd_name(fd, name);
	struct attr_guard g;
	int r = guard_begin(fs, in, fi, &g);
	if (r == 0 && (valid & FUSE_SET_ATTR_MODE)) {
		if (fchmodat(fs->proc_fd, name, attr->st_mode, 0) < 0)
			r = -errno;
	}
	if (r == 0 && (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))) {
		uid_t u = valid & FUSE_SET_ATTR_UID ? attr->st_uid : (uid_t)-1;
		gid_t gr = valid & FUSE_SET_ATTR_GID ? attr->st_gid : (gid_t)-1;
		if (fchownat(fd, "", u, gr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
			r = -errno;
	}
	if (r == 0 && (valid & FUSE_SET_ATTR_SIZE)) {
		if (fs->o->readonly)
			r = -EROFS;
		else if (in->type != S_IFREG)
			r = -EINVAL;
		else
			r = set_size(fs, name, &g, (uint64_t)attr->st_size);
	}
	/* Write-back: dirty pages written back after a time was set would
	 * set SRC's mtime again (cp -a, rsync -a, touch after a write): they
	 * go back first, after a size change in the same call (the kernel's
	 * write-back cache sends a truncate with the new mtime), whose
	 * dropped pages need not go back. */
	if (r == 0 && g.id && (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)))
		r = fs_ident_flush_locked(fs, g.id);
	if (r == 0 && (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		struct timespec tv[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } };
		if (valid & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_ATIME)
			tv[0] = attr->st_atim;
		if (valid & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_MTIME)
			tv[1] = attr->st_mtim;
		/* A symlink's own times: utimensat on its O_PATH fd. */
		if (in->type == S_IFLNK ? utimensat(fd, "", tv, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)
					: utimensat(fs->proc_fd, name, tv, 0))
			r = -errno;
	}
	guard_end(fs, &g);
	/* The kernel takes a size or times it set (kwb); with an identity,
	 * guard_end has recorded them. */
	struct stat st;
	if (r == 0 && !g.id && in->type == S_IFREG && atomic_load(&fs->kwb) &&
	    fstatat(fd, "", &st, AT_EMPTY_PATH) == 0)
		fs_inode_told(fs, &in->key, (uint64_t)st.st_size, st.st_mtim);
	fs_inode_put(fs, in);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	op_getattr(req, ino, fi);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct fs_inode *in = in_of(req, ino);
	int fd = fd_or_reply(req, in);
	if (fd < 0)
		return;
	char buf[PATH_MAX + 1];
	ssize_t n = readlinkat(fd, "", buf, sizeof buf);
	int e = errno;
	put(req, in);
	if (n < 0)
		fuse_reply_err(req, e);
	else if ((size_t)n >= sizeof buf)
		fuse_reply_err(req, ENAMETOOLONG);
	else {
		buf[n] = 0;
		fuse_reply_readlink(req, buf);
	}
}

void fs_own_new(fuse_req_t req, int pfd, int fd, const char *name)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	struct stat pst;
	if (c->uid == geteuid() && c->gid == getegid())
		return;
	/* In a setgid directory the group is the directory's, as SRC made it. */
	gid_t gid = fstat(pfd, &pst) == 0 && (pst.st_mode & S_ISGID) ? (gid_t)-1 : c->gid;
	/* Best effort: where SRC refuses (no chown there), the object is the
	 * mount's, as on any file system that ignores owners. */
	if (fd >= 0)
		(void)!fchown(fd, c->uid, gid);
	else
		(void)!fchownat(pfd, name, c->uid, gid, AT_SYMLINK_NOFOLLOW);
}

/* Names made in directory p (pfd): one call on pfd (its error: < 0),
 * then the owner of a new object (own; a link's stays), then the entry. */
static void reply_made(fuse_req_t req, struct fs_inode *p, int pfd, const char *name, int r,
		       bool own)
{
	struct fs *fs = fs_of(req); /* req is gone once answered */
	if (r < 0) {
		fuse_reply_err(req, errno);
	} else {
		if (own)
			fs_own_new(req, pfd, -1, name);
		reply_entry(req, p, name);
	}
	fs_inode_put(fs, p);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct fs_inode *p = in_of(req, parent);
	int fd = fd_or_reply(req, p);
	if (fd >= 0)
		reply_made(req, p, fd, name, mknodat(fd, name, mode, rdev), true);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fs_inode *p = in_of(req, parent);
	int fd = fd_or_reply(req, p);
	if (fd >= 0)
		reply_made(req, p, fd, name, mkdirat(fd, name, mode), true);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct fs_inode *p = in_of(req, parent);
	int fd = fd_or_reply(req, p);
	if (fd >= 0)
		reply_made(req, p, fd, name, symlinkat(link, fd, name), true);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	struct fs_inode *in = in_of(req, ino), *p = in_of(req, parent);
	int fd = fd_or_reply(req, in);
	if (fd < 0)
		return;
	int pfd = fd_or_reply(req, p);
	if (pfd >= 0)
		reply_made(req, p, pfd, name, linkat(fd, "", pfd, name, AT_EMPTY_PATH), false);
	fs_inode_put(fs, in);
}

/* The key of parent/name if it is a regular file with one link (its
 * removal frees it): *ok false otherwise. */
static void last_link(struct fs *fs, int pfd, const char *name, struct fs_keybuf *kb, bool *ok)
{
	struct stat st;
	int fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	*ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1;
	if (*ok)
		fs_key_of(fs, fd, &st, kb);
	if (fd >= 0)
		close(fd);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs_inode *p = in_of(req, parent);
	int pfd = fd_or_reply(req, p);
	if (pfd < 0)
		return;
	struct fs_keybuf kb;
	bool last;
	last_link(fs_of(req), pfd, name, &kb, &last);
	int r = unlinkat(pfd, name, 0) < 0 ? errno : 0;
	put(req, p);
	if (r == 0 && last)
		fs_ident_unlinked(fs_of(req), &kb.k);
	fuse_reply_err(req, r);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs_inode *p = in_of(req, parent);
	int pfd = fd_or_reply(req, p);
	if (pfd < 0)
		return;
	int r = unlinkat(pfd, name, AT_REMOVEDIR) < 0 ? errno : 0;
	put(req, p);
	fuse_reply_err(req, r);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct fs_inode *p = in_of(req, parent), *np = in_of(req, newparent);
	int pfd = fd_or_reply(req, p);
	if (pfd < 0)
		return;
	int npfd = fd_or_reply(req, np);
	if (npfd < 0) {
		put(req, p);
		return;
	}
	struct fs_keybuf kb;
	bool last;
	last_link(fs_of(req), npfd, newname, &kb, &last);
	int r = renameat2(pfd, name, npfd, newname, flags) < 0 ? errno : 0;
	put(req, np);
	put(req, p);
	if (r == 0 && last && !(flags & RENAME_EXCHANGE))
		fs_ident_unlinked(fs_of(req), &kb.k);
	fuse_reply_err(req, r);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs_inode *in = in_of(req, ino);
	int fd = fd_or_reply(req, in);
	if (fd < 0)
		return;
	struct statvfs sv;
	int r = fstatvfs(fd, &sv) < 0 ? errno : 0;
	put(req, in);
	if (r)
		fuse_reply_err(req, r);
	else
		fuse_reply_statfs(req, &sv);
}

/* Directories: a DIR stream per open directory (fi->fh), with telldir
 * offsets as FUSE's. */
struct fs_dir {
	DIR *dp;
	struct dirent *entry; /* read but not yet returned (the buffer was full) */
	off_t offset;
};

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs_inode *in = in_of(req, ino);
	int pfd = fd_or_reply(req, in);
	if (pfd < 0)
		return;
	struct fs_dir *d = calloc(1, sizeof *d);
	int fd = d ? openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	put(req, in);
	if (fd < 0 || !(d->dp = fdopendir(fd))) {
		int e = d ? errno : ENOMEM;
		if (fd >= 0)
			close(fd);
		free(d);
		fuse_reply_err(req, e);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	fuse_reply_open(req, fi);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
		       struct fuse_file_info *fi)
{
	(void)ino;
	struct fs_dir *d = (struct fs_dir *)(uintptr_t)fi->fh;
	char *buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (offset != d->offset) {
		seekdir(d->dp, offset);
		d->entry = NULL;
		d->offset = offset;
	}
	size_t used = 0;
	int err = 0;
	for (;;) {
		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dp);
			if (!d->entry) {
				err = errno;
				break;
			}
		}
		struct stat st = { .st_ino = d->entry->d_ino, .st_mode = (mode_t)d->entry->d_type << 12 };
		off_t next = telldir(d->dp);
		size_t k = fuse_add_direntry(req, buf + used, size - used, d->entry->d_name, &st, next);
		if (k > size - used)
			break; /* kept in d->entry for the next call */
		used += k;
		d->entry = NULL;
		d->offset = next;
	}
	if (err && used == 0)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct fs_dir *d = (struct fs_dir *)(uintptr_t)fi->fh;
	closedir(d->dp);
	free(d);
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	int fd = dirfd(((struct fs_dir *)(uintptr_t)fi->fh)->dp);
	int r = datasync ? fdatasync(fd) : fsync(fd);
	fuse_reply_err(req, r < 0 ? errno : 0);
}

/* Extended attributes, through /proc/self/fd/N (an O_PATH fd takes no
 * f*xattr call). Symlinks have none that users may set: refused. */
static void proc_path(int fd, char path[32])
{
	snprintf(path, 32, "/proc/self/fd/%d", fd);
}

/* The inode an attribute change applies to, and its path through
 * /proc/self/fd; NULL when it replied (a symlink: EPERM, as user.*
 * attributes are not allowed there; or no fd). The caller puts it. */
static struct fs_inode *xattr_target(fuse_req_t req, fuse_ino_t ino, char path[32])
{
	struct fs_inode *in = in_of(req, ino);
	if (in->type == S_IFLNK) {
		fuse_reply_err(req, EPERM);
		return NULL;
	}
	int fd = fd_or_reply(req, in);
	if (fd < 0)
		return NULL;
	proc_path(fd, path);
	return in;
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	char path[32];
	struct fs_inode *in = xattr_target(req, ino, path);
	if (!in)
		return;
	int r = setxattr(path, name, value, size, flags) < 0 ? errno : 0;
	put(req, in);
	fuse_reply_err(req, r);
}

static void reply_xattr(fuse_req_t req, size_t size, ssize_t (*get)(const char *, const char *,
								    void *, size_t),
			ssize_t (*list)(const char *, char *, size_t), struct fs_inode *in,
			const char *name)
{
	if (in->type == S_IFLNK) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	char *buf = size ? malloc(size) : NULL;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int fd = fd_or_reply(req, in);
	if (fd < 0) {
		free(buf);
		return;
	}
	char path[32];
	proc_path(fd, path);
	ssize_t n = get ? get(path, name, buf, size) : list(path, buf, size);
	int e = errno;
	put(req, in);
	if (n < 0)
		fuse_reply_err(req, e);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	if (strcmp(name, FS_STATS_XATTR) == 0) { /* ours, not SRC's (stats.c) */
		char *j = fs_stats_json(fs_of(req), in_of(req, ino));
		size_t n = j ? strlen(j) : 0;
		if (!j)
			fuse_reply_err(req, ENOMEM);
		else if (size == 0)
			fuse_reply_xattr(req, n);
		else if (size < n)
			fuse_reply_err(req, ERANGE);
		else
			fuse_reply_buf(req, j, n);
		free(j);
		return;
	}
	reply_xattr(req, size, getxattr, NULL, in_of(req, ino), name);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct fs_inode *in = in_of(req, ino);
	if (in->type == S_IFLNK) { /* no attributes: an empty list */
		if (size == 0)
			fuse_reply_xattr(req, 0);
		else
			fuse_reply_buf(req, NULL, 0);
		return;
	}
	reply_xattr(req, size, NULL, listxattr, in, NULL);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	char path[32];
	struct fs_inode *in = xattr_target(req, ino, path);
	if (!in)
		return;
	int r = removexattr(path, name) < 0 ? errno : 0;
	put(req, in);
	fuse_reply_err(req, r);
}

void fs_ops_meta(struct fuse_lowlevel_ops *ops)
{
	ops->lookup = op_lookup;
	ops->forget = op_forget;
	ops->forget_multi = op_forget_multi;
	ops->getattr = op_getattr;
	ops->setattr = op_setattr;
	ops->readlink = op_readlink;
	ops->mknod = op_mknod;
	ops->mkdir = op_mkdir;
	ops->symlink = op_symlink;
	ops->link = op_link;
	ops->unlink = op_unlink;
	ops->rmdir = op_rmdir;
	ops->rename = op_rename;
	ops->statfs = op_statfs;
	ops->opendir = op_opendir;
	ops->readdir = op_readdir;
	ops->releasedir = op_releasedir;
	ops->fsyncdir = op_fsyncdir;
	ops->setxattr = op_setxattr;
	ops->getxattr = op_getxattr;
	ops->listxattr = op_listxattr;
	ops->removexattr = op_removexattr;
}
