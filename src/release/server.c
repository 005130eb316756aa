/* The release protocol's server half (release.h): `vramcache serve` runs
 * one, and programs with libvramcache-shim.so preloaded ask it for GPU
 * memory when theirs runs out.
 *
 * Threads: one accepts; each connection gets its own thread from a table
 * of MAX_CONNS slots, so a client that trickles its line (or sends
 * nothing) holds only its slot, for at most READ_TIMEOUT_MS, and never
 * delays another client's answer beyond the release in progress. Past
 * MAX_CONNS a client is answered ERR EBUSY at once. Releases run one at a
 * time (release_lock): the engine gives memory back one chunk at a time,
 * and two concurrent asks would only race for the same chunks.
 *
 * Locks: `lock` guards slots[], stopping and the stats, and is never held
 * across I/O or fn; `release_lock` is held across one fn call and is taken
 * without `lock` held. The accept thread joins DONE slots, whose threads
 * have dropped `lock` for the last time, so the join waits only for the
 * thread's exit. A connection's fd is cleared from its slot under `lock`
 * before it is closed, so stop's shutdown() never reaches a reused fd. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "release/release.h"
#include "vramcache.h" /* vc_last_error */

/* Connections served at once. Each is a thread that waits at most
 * READ_TIMEOUT_MS for its line and then, for a RELEASE, its turn at
 * release_lock; more slots would only lengthen that queue. */
#define MAX_CONNS 16
/* How long a client has to send its whole line (the shim sends it at
 * once after connecting): bounds what a silent client holds. */
#define READ_TIMEOUT_MS 2000
/* A reply is one short line, which always fits the socket buffer; the
 * timeout only guards against the impossible. */
#define SEND_TIMEOUT_MS 1000
/* Supplementary groups of a peer looked at (SO_PEERGROUPS). */
#define MAX_PEER_GROUPS 256

enum slot_state { SLOT_FREE, SLOT_RUNNING, SLOT_DONE };

struct conn_slot {
	struct vc_release_server *srv;
	pthread_t thread;
	int fd; /* -1 once the thread is about to close it */
	enum slot_state state;
};

struct vc_release_server {
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int lfd;
	int wake[2]; /* stop writes a byte: the accept thread's poll returns */
	vc_release_fn fn;
	void *ctx;
	uid_t euid;
	dev_t sock_dev; /* the socket file we made: its group is re-read per */
	ino_t sock_ino; /* connection (chgrp after start works), if still ours */
	gid_t sock_gid;
	pthread_t accept_thread;
	pthread_mutex_t lock;
	pthread_mutex_t release_lock;
	bool stopping;
	struct conn_slot slots[MAX_CONNS];
	struct vc_release_server_stats st;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writes the reply; a client that has gone gets no SIGPIPE and no retry. */
static void reply(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reply(int fd, const char *fmt, ...)
{
	char buf[VC_RELEASE_LINE_MAX];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof buf - 2)
		n = (int)sizeof buf - 2; /* a long text is cut, the newline kept */
	for (int i = 0; i < n; i++)
		if ((unsigned char)buf[i] < 0x20)
			buf[i] = ' '; /* a message's own newline would end the line early */
	buf[n++] = '\n';
	for (int off = 0; off < n;) {
		ssize_t w = send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		off += (int)w;
	}
}

/* The socket file's group now: re-read so that an administrator's chgrp
 * after start counts, but only while the file is still the one we made. */
static gid_t sock_group(struct vc_release_server *s)
{
	struct stat st;
	if (lstat(s->path, &st) == 0 && st.st_dev == s->sock_dev && st.st_ino == s->sock_ino)
		return st.st_gid;
	return s->sock_gid;
}

/* Root, our own euid, or a member (primary or supplementary group) of the
 * socket file's group. Returns 0, or -EACCES with the reason in why[]. */
static int check_peer(struct vc_release_server *s, int fd, char *why, size_t len)
{
	struct ucred cr;
	socklen_t cl = sizeof cr;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
		snprintf(why, len, "cannot read peer credentials: %s", strerror(errno));
		return -EACCES;
	}
	if (cr.uid == 0 || cr.uid == s->euid)
		return 0;
	gid_t g = sock_group(s);
	if (cr.gid == g)
		return 0;
	gid_t groups[MAX_PEER_GROUPS];
	socklen_t gl = sizeof groups;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &gl) == 0) {
		for (size_t i = 0; i < gl / sizeof(gid_t); i++)
			if (groups[i] == g)
				return 0;
	}
	snprintf(why, len, "uid %u is not root, uid %u or in group %u", (unsigned)cr.uid, (unsigned)s->euid,
		 (unsigned)g);
	return -EACCES;
}

/* Reads one line (newline and a \r before it removed) within
 * READ_TIMEOUT_MS of the call. Returns its length, -EMSGSIZE for a line
 * longer than VC_RELEASE_LINE_MAX, -ETIMEDOUT, or -ECONNRESET when the
 * client hung up first (or stop shut the socket). */
static int read_line(int fd, char *buf, size_t cap)
{
	int64_t deadline = now_ms() + READ_TIMEOUT_MS;
	size_t got = 0;
	for (;;) {
		int len = vc_release_line_len(buf, got);
		if (len >= 0)
			return len;
		if (got == cap)
			return -EMSGSIZE;
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = poll(&p, 1, (int)left);
		if (n < 0 && errno != EINTR)
			return -ECONNRESET;
		if (n <= 0)
			continue;
		ssize_t k = recv(fd, buf + got, cap - got, 0);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k <= 0)
			return -ECONNRESET;
		got += (size_t)k;
	}
}

/* One connection, start to end. Returns true when it was answered OK. */
static bool serve_conn(struct vc_release_server *s, int fd)
{
	char line[VC_RELEASE_LINE_MAX], why[96];
	struct timeval tv = { .tv_sec = SEND_TIMEOUT_MS / 1000, .tv_usec = SEND_TIMEOUT_MS % 1000 * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (check_peer(s, fd, why, sizeof why) < 0) {
		reply(fd, "ERR EACCES %s", why);
		return false;
	}
	int len = read_line(fd, line, sizeof line);
	if (len == -EMSGSIZE) {
		reply(fd, "ERR EINVAL bad request: line longer than %d bytes", VC_RELEASE_LINE_MAX);
		return false;
	}
	if (len == -ETIMEDOUT) {
		reply(fd, "ERR ETIMEDOUT no request line in %d ms", READ_TIMEOUT_MS);
		return false;
	}
	if (len < 0)
		return false; /* the client left, or stop: nobody to answer */
	struct vc_release_req req;
	const char *bad;
	if (vc_release_parse(line, (size_t)len, &req, &bad) < 0) {
		reply(fd, "ERR EINVAL bad request: %s", bad);
		return false;
	}
	if (req.op == VC_RELEASE_OP_PING) {
		reply(fd, "OK 0");
		return true;
	}
	uint64_t released = 0;
	int r;
	pthread_mutex_lock(&s->release_lock);
	pthread_mutex_lock(&s->lock);
	bool stopping = s->stopping;
	pthread_mutex_unlock(&s->lock);
	if (stopping) {
		r = -ESHUTDOWN;
		vc_err(r, "the server is stopping");
	} else {
		vc_err_clear();
		r = s->fn(s->ctx, req.uuid, req.bytes, &released);
		if (r == 0 && released > req.bytes)
			released = req.bytes; /* fn's contract; the client would refuse more */
	}
	pthread_mutex_unlock(&s->release_lock);
	pthread_mutex_lock(&s->lock);
	s->st.bytes_asked += req.bytes;
	if (r == 0)
		s->st.bytes_released += released;
	pthread_mutex_unlock(&s->lock);
	if (r < 0) {
		const char *msg = vc_last_error();
		reply(fd, "ERR %s %s", vc_release_errno_name(r), *msg ? msg : strerror(-r));
		return false;
	}
	reply(fd, "OK %llu", (unsigned long long)released);
	return true;
}

static void *conn_main(void *arg)
{
	struct conn_slot *slot = arg;
	struct vc_release_server *s = slot->srv;
	int fd = slot->fd; /* set before this thread started, under lock */
	bool ok = serve_conn(s, fd);
	pthread_mutex_lock(&s->lock);
	if (!ok)
		s->st.refused++;
	slot->fd = -1;
	slot->state = SLOT_DONE;
	pthread_mutex_unlock(&s->lock);
	close(fd);
	return NULL;
}

/* Joins the finished connection threads; returns a free slot or NULL.
 * Called with s->lock held. */
static struct conn_slot *take_slot(struct vc_release_server *s)
{
	struct conn_slot *free_slot = NULL;
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn_slot *c = &s->slots[i];
		if (c->state == SLOT_DONE) {
			pthread_join(c->thread, NULL);
			c->state = SLOT_FREE;
		}
		if (c->state == SLOT_FREE && !free_slot)
			free_slot = c;
	}
	return free_slot;
}

/* Threads we start take no signals: the program's handlers run on its own
 * threads, and our poll and recv see no EINTR. */
static int start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -r;
}

static void *accept_main(void *arg)
{
	struct vc_release_server *s = arg;
	for (;;) {
		struct pollfd p[2] = { { .fd = s->lfd, .events = POLLIN }, { .fd = s->wake[0], .events = POLLIN } };
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue; /* the client left before we took it, or fds ran out for now */
		pthread_mutex_lock(&s->lock);
		s->st.requests++;
		struct conn_slot *c = s->stopping ? NULL : take_slot(s);
		int r = -EBUSY;
		if (c) {
			c->fd = fd;
			c->state = SLOT_RUNNING;
			r = start_thread(&c->thread, conn_main, c);
			if (r < 0) {
				c->fd = -1;
				c->state = SLOT_FREE;
			}
		}
		if (r < 0)
			s->st.refused++;
		bool stopping = s->stopping;
		pthread_mutex_unlock(&s->lock);
		if (r < 0) {
			/* Non-blocking: a client that does not read cannot hold us. */
			const char *m = stopping ? "ERR ESHUTDOWN the server is stopping\n"
				: r == -EBUSY	 ? "ERR EBUSY too many clients at once\n"
						 : "ERR EAGAIN cannot start a thread\n";
			if (send(fd, m, strlen(m), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
				/* gone already */
			}
			close(fd);
		}
	}
	return NULL;
}

/* Makes `path` free for our bind: nothing there, or a socket nobody
 * answers on (unlinked). Returns 0 or -errno with a message. */
static int claim_path(const char *path, const struct sockaddr_un *sa)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : vc_err(-errno, "%s: %s", path, strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return vc_err(-EEXIST, "%s exists and is not a socket: not replacing it", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return vc_err(-errno, "socket: %s", strerror(errno));
	int r = connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0 ? 0 : -errno;
	close(fd);
	if (r == 0 || r == -EAGAIN)
		return vc_err(-EADDRINUSE, "%s: another server answers on this socket", path);
	if (r != -ECONNREFUSED)
		return vc_err(r, "%s: cannot tell whether a server answers on it: %s", path, strerror(-r));
	if (unlink(path) < 0 && errno != ENOENT)
		return vc_err(-errno, "%s: removing the stale socket: %s", path, strerror(errno));
	return 0;
}

int vc_release_server_start(const char *path, vc_release_fn fn, void *ctx, struct vc_release_server **out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	*out = NULL;
	if (!path || !*path || !fn)
		return vc_err(-EINVAL, "release server: a socket path and a callback are needed");
	if (strlen(path) >= sizeof sa.sun_path)
		return vc_err(-ENAMETOOLONG, "release socket path too long: %s", path);
	strcpy(sa.sun_path, path);
	struct vc_release_server *s = calloc(1, sizeof *s);
	if (!s)
		return vc_err(-ENOMEM, "release server: out of memory");
	strcpy(s->path, path);
	s->fn = fn;
	s->ctx = ctx;
	s->euid = geteuid();
	s->lfd = s->wake[0] = s->wake[1] = -1;
	for (int i = 0; i < MAX_CONNS; i++)
		s->slots[i] = (struct conn_slot){ .srv = s, .fd = -1, .state = SLOT_FREE };
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->release_lock, NULL);
	int r = claim_path(path, &sa);
	if (r < 0)
		goto fail;
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->lfd < 0) {
		r = vc_err(-errno, "socket: %s", strerror(errno));
		goto fail;
	}
	mode_t old = umask(0117); /* born 0660: no window with wider permissions */
	r = bind(s->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 ? -errno : 0;
	umask(old);
	if (r < 0) {
		vc_err(r, "%s: %s", path, strerror(-r));
		goto fail;
	}
	struct stat st;
	if (listen(s->lfd, SOMAXCONN) < 0 || lstat(path, &st) < 0) {
		r = vc_err(-errno, "%s: %s", path, strerror(errno));
		unlink(path);
		goto fail;
	}
	s->sock_dev = st.st_dev;
	s->sock_ino = st.st_ino;
	s->sock_gid = st.st_gid;
	if (pipe2(s->wake, O_CLOEXEC) < 0) {
		r = vc_err(-errno, "pipe: %s", strerror(errno));
		unlink(path);
		goto fail;
	}
	r = start_thread(&s->accept_thread, accept_main, s);
	if (r < 0) {
		vc_err(r, "release server: cannot start a thread: %s", strerror(-r));
		unlink(path);
		goto fail;
	}
	*out = s;
	return 0;
fail:
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->wake[0] >= 0) {
		close(s->wake[0]);
		close(s->wake[1]);
	}
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->release_lock);
	free(s);
	return r;
}

void vc_release_server_stop(struct vc_release_server *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	/* Readers see EOF now; a release in progress still sends its reply. */
	for (int i = 0; i < MAX_CONNS; i++)
		if (s->slots[i].state == SLOT_RUNNING && s->slots[i].fd >= 0)
			shutdown(s->slots[i].fd, SHUT_RD);
	pthread_mutex_unlock(&s->lock);
	if (write(s->wake[1], "x", 1) < 0) {
		/* cannot fail: the pipe is empty and ours */
	}
	pthread_join(s->accept_thread, NULL);
	/* No thread starts now (only the accept thread started them); those
	 * running may still move to DONE, under the lock. */
	pthread_t running[MAX_CONNS];
	int n = 0;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < MAX_CONNS; i++)
		if (s->slots[i].state != SLOT_FREE)
			running[n++] = s->slots[i].thread;
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < n; i++)
		pthread_join(running[i], NULL);
	close(s->lfd);
	struct stat st;
	if (lstat(s->path, &st) == 0 && st.st_dev == s->sock_dev && st.st_ino == s->sock_ino)
		unlink(s->path); /* only our own: a successor's socket stays */
	close(s->wake[0]);
	close(s->wake[1]);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->release_lock);
	free(s);
}

void vc_release_server_stats(struct vc_release_server *s, struct vc_release_server_stats *st)
{
	pthread_mutex_lock(&s->lock);
	*st = s->st;
	pthread_mutex_unlock(&s->lock);
}
