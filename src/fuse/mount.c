/* The mount's life: the cache, the FUSE session, the loop, the teardown.
 *
 * Order. A daemon forks first (before vc_open: a CUDA context does not
 * survive fork) and the parent waits until the child has mounted, so that
 * `vramcache mount` returns with the mount usable, or fails with the
 * child's message. The session: libfuse's low-level API, a multi-threaded
 * loop with a /dev/fuse clone per thread (clone_fd: no thread wakes for
 * another's request), requests of up to 1 MiB (max_read, max_write and
 * with them max_pages = 256, FUSE's largest), default_permissions (the
 * kernel checks access against SRC's attributes; we run as root), no
 * atomic O_TRUNC (a truncate at open comes as setattr, through the
 * identity), and the kernel's write-back cache only when asked
 * (--kernel-writeback: see ops_data.c; by default writes reach us, and
 * so the cache's write mode, at once). Unmounting (umount, fusermount3 -u)
 * or SIGTERM/SIGINT/SIGHUP ends the loop, the latter after a write-back
 * while serving (stop.c); then readahead stops, every dirty page is
 * written back (or, where SRC refuses, kept and tried again, or logged
 * lost: stop.c), every identity closes and the cache closes. The state is
 * static: the forced end's watchdog may read it until the process exits.
 *
 * Volume 0, which every cache has, is an empty memfd: files live in the
 * files volumes' slots (slots.c). The fd cache outlives the cache: the
 * last write-back at vc_close may need files' fds.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fuse/fs.h"

/* Requests and reads ahead of the kernel: FUSE's largest, 1 MiB. */
#define FS_MAX_IO (1u << 20)

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fs *fs = userdata;
	conn->max_read = FS_MAX_IO; /* as the max_read mount option says */
	conn->max_write = FS_MAX_IO;
	conn->max_readahead = FS_MAX_IO;
	conn->want &= ~(unsigned)(FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_WRITEBACK_CACHE);
	/* The kernel drops its page cache of a file whose attributes come
	 * back with another size or mtime (libfuse's default, asked for
	 * here since the mount relies on it: ident.c's attribute check). */
	conn->want |= conn->capable & FUSE_CAP_AUTO_INVAL_DATA;
	if (!fs->o->kernel_writeback)
		return;
	if (conn->capable & FUSE_CAP_WRITEBACK_CACHE) {
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
		atomic_store(&fs->kwb, true);
	} else {
		fprintf(stderr, "vramcache mount: the kernel has no FUSE write-back cache: "
				"--kernel-writeback ignored\n");
	}
}

/* Open files need fds: the fd cache keeps up to max_fds, the inode table
 * up to max_path_fds idle ones (without file handles: one per inode the
 * kernel knows). The soft limit goes up to the hard one; the
 * result. */
static uint64_t raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 1024;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
		(void)getrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
}

/* Defaults that follow the machine. max_files: one identity per 16 KiB of
 * cache (an identity costs ~400 bytes of host memory: 2.5% of what its
 * pages take when files average 16 KiB; a cache of smaller files keeps
 * the most recently used ones), at least 4096. max_fds: half the fd
 * limit; max_path_fds: a quarter (the inode table's idle O_PATH fds; a
 * walk's directories and the files it stats again stay open); the last
 * quarter for fds in use (calls in flight, files and directories open)
 * and FUSE's own. Each at most 65536 (the kernel's file table is shared
 * with everything else), at least 16. */
static unsigned clamp_fds(uint64_t n)
{
	return n < 16 ? 16 : n > 65536 ? 65536 : (unsigned)n;
}

static void defaults(struct vc_fuse_opts *o, uint64_t nofile)
{
	if (!o->max_files) {
		uint64_t n = (o->cfg.host_bytes + o->cfg.gpu_bytes) >> 14;
		o->max_files = n < 4096 ? 4096 : n > (1u << 30) ? 1u << 30 : (unsigned)n;
	}
	if (!o->max_fds)
		o->max_fds = clamp_fds(nofile / 2);
	if (!o->max_path_fds)
		o->max_path_fds = clamp_fds(nofile / 4);
}

/* The daemon's parent side: waits for the child's "mounted" byte. Returns
 * in the child only (with *ready_fd to write to); the parent exits. */
static int daemonize(int *ready_fd)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		char c;
		ssize_t n;
		while ((n = read(p[0], &c, 1)) < 0 && errno == EINTR)
			;
		_exit(n == 1 ? 0 : 1);
	}
	close(p[0]);
	setsid();
	*ready_fd = p[1];
	return 0;
}

static void detach(int ready_fd)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		close(null);
	}
	if (chdir("/") < 0) {
		/* nothing relative is used from here on */
	}
	if (write(ready_fd, "x", 1) != 1) {
		/* the parent is gone: nobody to tell */
	}
	close(ready_fd);
}

static int write_pidfile(const char *path)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return -errno;
	fprintf(f, "%ld\n", (long)getpid());
	return fclose(f) ? -errno : 0;
}

static int fail(const char *what, int r)
{
	fprintf(stderr, "vramcache mount: %s: %s\n", what, r == -1 ? "failed" : vc_strerror(r));
	return 1;
}

int vc_fuse_main(const struct vc_fuse_opts *given)
{
	static struct vc_fuse_opts oo;
	static char mnt[PATH_MAX];
	static struct fs fs;
	oo = *given;
	const struct vc_fuse_opts *o = &oo;
	if (!realpath(o->mnt, mnt)) {
		fprintf(stderr, "vramcache mount: %s: %s\n", o->mnt, strerror(errno));
		return 1;
	}
	defaults(&oo, raise_nofile());
	int ready = -1, r;
	if (!o->foreground && (r = daemonize(&ready)) < 0)
		return fail("fork", r);

	fs = (struct fs){ .o = o, .mnt = mnt, .proc_fd = -1, .root.fd = -1, .mount_fd = -1 };
	struct fuse_session *se = NULL;
	struct fuse_loop_config *lc = NULL;
	int status = 1, vol0 = -1;
	bool fd_ready = false;
	bool mounted = false;
	/* Before the first thread (vc_open's): every thread blocks the
	 * signals that the signal thread takes. */
	if ((r = fs_stop_init(&fs)) < 0)
		return fail("blocking signals", r);
	fs_handles_init(&fs);
	fs.proc_fd = open("/proc/self/fd", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fs.proc_fd < 0) {
		fprintf(stderr, "vramcache mount: /proc/self/fd: %s (is /proc mounted?)\n",
			strerror(errno));
		goto out;
	}
	if ((r = fs_inode_init(&fs, o->src, !o->no_handles)) < 0) {
		fprintf(stderr, "vramcache mount: %s: %s\n", o->src, strerror(-r));
		goto out;
	}
	struct vc_config cfg = o->cfg;
	vol0 = memfd_create("vramcache-mount-vol0", MFD_CLOEXEC);
	if (vol0 < 0) {
		fprintf(stderr, "vramcache mount: memfd_create: %s\n", strerror(errno));
		goto out;
	}
	cfg.backing_path = NULL;
	cfg.backing_fd = vol0;
	if ((r = vc_open(&cfg, &fs.c)) < 0) {
		fprintf(stderr, "vramcache mount: %s\n", vc_last_error());
		goto out;
	}
	fs_fd_init(&fs);
	fd_ready = true;
	if ((r = fs_ident_init(&fs)) < 0 || (r = fs_ra_init(&fs)) < 0) {
		fail("setting up", r);
		goto out;
	}

	struct fuse_lowlevel_ops ops = { .init = op_init };
	fs_ops_meta(&ops);
	fs_ops_data(&ops);
	char opts[256];
	snprintf(opts, sizeof opts,
		 "fsname=vramcache,subtype=vramcache,default_permissions,max_read=%u%s%s", FS_MAX_IO,
		 o->allow_other ? ",allow_other" : "", o->readonly ? ",ro" : "");
	char *argv[] = { "vramcache", "-o", opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	se = fuse_session_new(&args, &ops, sizeof ops, &fs);
	fuse_opt_free_args(&args);
	if (!se) {
		fprintf(stderr, "vramcache mount: the FUSE session could not be set up\n");
		goto out;
	}
	fs.se = se;
	if (fuse_session_mount(se, mnt) < 0) {
		fprintf(stderr, "vramcache mount: mounting on %s failed (is /dev/fuse usable? "
				"are we root, or is fusermount3 installed?)\n", mnt);
		goto out;
	}
	mounted = true;
	if (o->pidfile && (r = write_pidfile(o->pidfile)) < 0) {
		fprintf(stderr, "vramcache mount: %s: %s\n", o->pidfile, strerror(-r));
		goto out;
	}
	if (ready >= 0) {
		detach(ready);
		ready = -1;
	}
	/* libfuse's loop ends its workers with pthread_cancel, for which
	 * glibc loads libgcc_s at the first use: it needs a free fd then. A
	 * mount that has run out of fds (EMFILE: a walk of a large tree
	 * without file handles) must still unmount and write back, so it is
	 * loaded now (where it exists; a later dlopen of it opens nothing). */
	(void)dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NODELETE);
	lc = fuse_loop_cfg_create();
	if (!lc) {
		fprintf(stderr, "vramcache mount: out of memory\n");
		goto out;
	}
	fuse_loop_cfg_set_clone_fd(lc, 1);
	fuse_loop_cfg_set_max_threads(lc, o->threads);
	if ((r = fs_stop_start(&fs)) < 0) {
		fail("starting the signal thread", r);
		goto out;
	}
	r = fuse_session_loop_mt(se, lc);
	fs_stop_loop_done(&fs);
	status = r < 0 ? 1 : 0;
	if (r < 0)
		fprintf(stderr, "vramcache mount: the FUSE loop failed: %s\n", strerror(-r));
out:
	if (lc)
		fuse_loop_cfg_destroy(lc);
	if (mounted)
		fuse_session_unmount(se);
	if (se)
		fuse_session_destroy(se);
	fs_handles_fini(&fs);
	if (fs.c) {
		fs_ra_fini(&fs);
		if (fs_stop_writeback(&fs) < 0)
			status = 1;
		fs_stop_closing(&fs);
		if (fs_ident_fini(&fs) < 0)
			status = 1;
		if (vc_close(fs.c) < 0) {
			fprintf(stderr, "vramcache mount: writing back at unmount: %s\n",
				vc_last_error());
			status = 1;
		}
	}
	fs_stop_fini(&fs);
	if (fd_ready)
		fs_fd_fini(&fs);
	fs_inode_fini(&fs);
	if (vol0 >= 0)
		close(vol0);
	if (fs.proc_fd >= 0)
		close(fs.proc_fd);
	if (o->pidfile && mounted)
		unlink(o->pidfile);
	return status;
}
