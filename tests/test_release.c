/* The release protocol (src/release/): a real server thread on a real Unix
 * socket, driven by vc_release_ask and by a raw client that sends what the
 * shim never does. The server's callback is a small fake cache of CACHE
 * bytes on one device (UUID_A): it grants what it still has, so an ask for
 * more than exists gets the rest, then 0; another device gets 0.
 *
 * Checks: a good request and a partial one, PING, the parser on its own
 * and through the socket for each kind of bad line (unknown command,
 * missing or bad uuid, zero, sign, garbage, overflow, extra spaces and
 * fields), the 128-byte line cap at its boundary, a \r\n line, a client
 * that leaves before and after sending (no crash, no SIGPIPE: the server
 * runs in this process), a silent client timed out while others are
 * served, the cap on connections, releases run one at a time, the
 * callback's error named in the reply, the socket path from the
 * environment, a stale socket file replaced, a live one not stolen, a
 * regular file left alone, peer credentials (as root: another uid is
 * refused, the socket's group is let in by primary or supplementary
 * group), stop with a silent client connected, and the statistics. */
#include <errno.h>
#include <grp.h>
#include <stdbool.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "base/clock.h"
#include "release/release.h"
#include "testutil.h"

#define MiB (1ull << 20)
#define CACHE (64 * MiB)

static const unsigned char UUID_A[16] = { 0x5e, 0x1f, 0x00, 0x01, 0xab, 0xcd, 0xef, 0x10,
					  0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe, 0xff };
static const unsigned char UUID_B[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
static const unsigned char UUID_FAIL[16] = { 0xee, 0xee };
static const char HEX_A[] = "5e1f0001abcdef1032547698badcfeff";

struct fake {
	pthread_mutex_t lock;
	uint64_t left;      /* what the fake cache still holds */
	int calls, inside, max_inside;
	uint64_t last_bytes;
	unsigned char last_uuid[16];
	int delay_ms;
};
static struct fake fake = { .lock = PTHREAD_MUTEX_INITIALIZER, .left = CACHE };

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

static int fake_release(void *ctx, const unsigned char uuid[16], uint64_t bytes, uint64_t *released)
{
	struct fake *f = ctx;
	pthread_mutex_lock(&f->lock);
	f->calls++;
	f->inside++;
	if (f->inside > f->max_inside)
		f->max_inside = f->inside;
	f->last_bytes = bytes;
	memcpy(f->last_uuid, uuid, 16);
	int delay = f->delay_ms;
	pthread_mutex_unlock(&f->lock);
	if (delay)
		sleep_ms(delay);
	pthread_mutex_lock(&f->lock);
	f->inside--;
	int r = 0;
	if (memcmp(uuid, UUID_FAIL, 16) == 0) {
		r = -ENOSPC;
	} else if (memcmp(uuid, UUID_A, 16) == 0) {
		*released = bytes < f->left ? bytes : f->left;
		f->left -= *released;
	} else {
		*released = 0;
	}
	pthread_mutex_unlock(&f->lock);
	return r;
}

static int fake_calls(void)
{
	pthread_mutex_lock(&fake.lock);
	int n = fake.calls;
	pthread_mutex_unlock(&fake.lock);
	return n;
}

static char dir[64], path[80];

static int raw_connect(const char *p)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", p);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	return fd;
}

/* Sends len bytes, reads the whole reply (to EOF) into out. */
static void raw_exchange(const void *msg, size_t len, char *out, size_t cap)
{
	int fd = raw_connect(path);
	CHECK(send(fd, msg, len, MSG_NOSIGNAL) == (ssize_t)len);
	size_t got = 0;
	ssize_t k;
	while (got < cap - 1 && (k = recv(fd, out + got, cap - 1 - got, 0)) > 0)
		got += (size_t)k;
	out[got] = '\0';
	close(fd);
}

static void expect_reply(const char *msg, const char *prefix)
{
	char out[512];
	raw_exchange(msg, strlen(msg), out, sizeof out);
	if (strncmp(out, prefix, strlen(prefix)) != 0 || !strchr(out, '\n') || strchr(out, '\n')[1]) {
		fprintf(stderr, "request %.60s: got reply '%s', wanted one line starting '%s'\n", msg, out,
			prefix);
		exit(1);
	}
}

static void test_parser(void)
{
	struct vc_release_req q;
	const char *why;
	char line[128];
	snprintf(line, sizeof line, "RELEASE 4096 %s", HEX_A);
	CHECK(vc_release_parse(line, strlen(line), &q, &why) == 0);
	CHECK(q.op == VC_RELEASE_OP_RELEASE && q.bytes == 4096 && memcmp(q.uuid, UUID_A, 16) == 0);
	snprintf(line, sizeof line, "RELEASE 18446744073709551615 %s", HEX_A);
	CHECK(vc_release_parse(line, strlen(line), &q, &why) == 0 && q.bytes == UINT64_MAX);
	CHECK(vc_release_parse("PING", 4, &q, &why) == 0 && q.op == VC_RELEASE_OP_PING);
	const char *bad[] = {
		"",
		"PING ",
		"ping",
		"RELEASE",
		"RELEASE ",
		"RELEASE 4096",
		"RELEASE 4096 ",
		"release 4096 5e1f0001abcdef1032547698badcfeff",
		"RELEASE 0 5e1f0001abcdef1032547698badcfeff",
		"RELEASE -1 5e1f0001abcdef1032547698badcfeff",
		"RELEASE +1 5e1f0001abcdef1032547698badcfeff",
		"RELEASE 0x10 5e1f0001abcdef1032547698badcfeff",
		"RELEASE 1e6 5e1f0001abcdef1032547698badcfeff",
		"RELEASE 18446744073709551616 5e1f0001abcdef1032547698badcfeff",
		"RELEASE 99999999999999999999999 5e1f0001abcdef1032547698badcfeff",
		"RELEASE  4096 5e1f0001abcdef1032547698badcfeff",
		"RELEASE 4096  5e1f0001abcdef1032547698badcfeff",
		"RELEASE 4096 5E1F0001ABCDEF1032547698BADCFEFF",
		"RELEASE 4096 5e1f0001abcdef1032547698badcfef",
		"RELEASE 4096 5e1f0001abcdef1032547698badcfeff0",
		"RELEASE 4096 5e1f0001-abcd-ef10-3254-7698badcfeff",
		"RELEASE 4096 5e1f0001abcdef1032547698badcfeff extra",
		"RELEASE 4096 5e1f0001abcdef1032547698badcfegg",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		why = NULL;
		if (vc_release_parse(bad[i], strlen(bad[i]), &q, &why) != -EINVAL || !why) {
			fprintf(stderr, "parser accepted '%s'\n", bad[i]);
			exit(1);
		}
	}
	/* A NUL inside the line is not the end of it. */
	const char nul[] = "RELEASE 40\0006 5e1f0001abcdef1032547698badcfeff";
	CHECK(vc_release_parse(nul, sizeof nul - 1, &q, &why) == -EINVAL);
	CHECK(strcmp(vc_release_errno_name(-ENOSPC), "ENOSPC") == 0);
	CHECK(vc_release_errno_value("EACCES", 6) == -EACCES && vc_release_errno_value("EWHAT", 5) == 0);
}

static void test_path_env(void)
{
	char buf[128];
	setenv(VC_RELEASE_SOCKET_ENV, "/x/explicit.sock", 1);
	setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
	CHECK(strcmp(vc_release_default_path(buf, sizeof buf), "/x/explicit.sock") == 0);
	setenv(VC_RELEASE_SOCKET_ENV, "", 1); /* empty: as unset */
	CHECK(strcmp(vc_release_default_path(buf, sizeof buf), "/run/user/1000/vramcache-release.sock") == 0);
	unsetenv(VC_RELEASE_SOCKET_ENV);
	CHECK(strcmp(vc_release_default_path(buf, sizeof buf), "/run/user/1000/vramcache-release.sock") == 0);
	unsetenv("XDG_RUNTIME_DIR");
	CHECK(strcmp(vc_release_default_path(buf, sizeof buf), "/run/vramcache/release.sock") == 0);
	CHECK(vc_release_default_path(buf, 10) == NULL);
}

static void test_good(void)
{
	uint64_t got = 1;
	int calls = fake_calls();
	CHECK_OK(vc_release_ask(path, UUID_A, 10 * MiB, 0, &got));
	CHECK(got == 10 * MiB);
	CHECK(fake_calls() == calls + 1 && fake.last_bytes == 10 * MiB && memcmp(fake.last_uuid, UUID_A, 16) == 0);
	/* More than the cache holds: the rest, then nothing. */
	CHECK_OK(vc_release_ask(path, UUID_A, CACHE, 0, &got));
	CHECK(got == CACHE - 10 * MiB);
	CHECK_OK(vc_release_ask(path, UUID_A, 4096, 0, &got));
	CHECK(got == 0);
	/* Not the cache's device. */
	got = 1;
	CHECK_OK(vc_release_ask(path, UUID_B, 4096, 0, &got));
	CHECK(got == 0 && memcmp(fake.last_uuid, UUID_B, 16) == 0);
	/* The callback's error comes back by name. */
	CHECK(vc_release_ask(path, UUID_FAIL, 4096, 0, &got) == -ENOSPC);
	CHECK(strstr(vc_last_error(), "ENOSPC"));
	pthread_mutex_lock(&fake.lock);
	fake.left = CACHE;
	pthread_mutex_unlock(&fake.lock);
	/* The protocol by hand, as socat would speak it, and with \r\n. */
	char req[128];
	snprintf(req, sizeof req, "RELEASE 4096 %s\n", HEX_A);
	expect_reply(req, "OK 4096\n");
	snprintf(req, sizeof req, "RELEASE 8192 %s\r\n", HEX_A);
	expect_reply(req, "OK 8192\n");
	CHECK(fake.left == CACHE - 12288);
	CHECK(vc_release_ping(path, 0) == 0);
	expect_reply("PING\n", "OK 0\n");
	CHECK(vc_release_ask(path, UUID_A, 0, 0, &got) == -EINVAL);
}

static void test_bad_lines(void)
{
	int calls = fake_calls();
	const char *bad[] = {
		"\n",
		"HELLO\n",
		"RELEASE\n",
		"RELEASE 4096\n",
		"RELEASE 0 5e1f0001abcdef1032547698badcfeff\n",
		"RELEASE -4096 5e1f0001abcdef1032547698badcfeff\n",
		"RELEASE 18446744073709551616 5e1f0001abcdef1032547698badcfeff\n",
		"RELEASE lots 5e1f0001abcdef1032547698badcfeff\n",
		"RELEASE 4096 not-a-uuid\n",
		"RELEASE 4096 5E1F0001ABCDEF1032547698BADCFEFF\n",
		"RELEASE 4096 5e1f0001abcdef1032547698badcfeff trailing\n",
		"\x01\x02\xff\xfe garbage\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		expect_reply(bad[i], "ERR EINVAL bad request: ");
	char out[256];
	const char nul[] = "RELEASE 40\0006 5e1f0001abcdef1032547698badcfeff\n";
	raw_exchange(nul, sizeof nul - 1, out, sizeof out);
	CHECK(strncmp(out, "ERR EINVAL ", 11) == 0);
	/* The cap: 127 bytes and a newline is a (bad) line; 128 and a newline is too long. */
	char big[300];
	memset(big, 'A', sizeof big);
	big[127] = '\n';
	raw_exchange(big, 128, out, sizeof out);
	CHECK(strncmp(out, "ERR EINVAL bad request: unknown command", 39) == 0);
	big[127] = 'A';
	big[128] = '\n';
	raw_exchange(big, 129, out, sizeof out);
	CHECK(strstr(out, "ERR EINVAL bad request: line longer than 128 bytes\n") == out);
	raw_exchange(big, sizeof big, out, sizeof out); /* no newline at all */
	CHECK(strstr(out, "ERR EINVAL bad request: line longer than 128 bytes\n") == out);
	CHECK(fake_calls() == calls);
	/* The client side refuses a bad reply (a server that is not ours). */
}

/* Clients that leave: before sending, in the middle of a line, and right
 * after sending a good request (the reply then goes to a closed socket:
 * without MSG_NOSIGNAL, SIGPIPE would end this process). */
static void test_vanishing(void)
{
	close(raw_connect(path));
	int fd = raw_connect(path);
	CHECK(send(fd, "RELEASE 40", 10, MSG_NOSIGNAL) == 10);
	close(fd);
	int calls = fake_calls();
	char req[128];
	int n = snprintf(req, sizeof req, "RELEASE 4096 %s\n", HEX_A);
	for (int i = 1; i <= 20; i++) {
		fd = raw_connect(path);
		CHECK(send(fd, req, (size_t)n, MSG_NOSIGNAL) == n);
		shutdown(fd, SHUT_RDWR);
		close(fd);
		/* Served (the callback ran) before the next: none is turned away busy. */
		for (int k = 0; k < 200 && fake_calls() < calls + i; k++)
			sleep_ms(5);
		CHECK(fake_calls() == calls + i);
	}
	CHECK(vc_release_ping(path, 0) == 0);
}

/* A client that sends nothing, and one that stops halfway, hold their
 * own slots only: others are answered at once meanwhile, and each gets
 * ERR ETIMEDOUT after about 2 s. */
static void test_silent(void)
{
	int quiet = raw_connect(path);
	int half = raw_connect(path);
	CHECK(send(half, "RELEASE 4", 9, MSG_NOSIGNAL) == 9);
	uint64_t t0 = vc_now_ns();
	for (int i = 0; i < 10; i++) {
		uint64_t got;
		CHECK_OK(vc_release_ask(path, UUID_B, 4096, 0, &got));
		CHECK(vc_release_ping(path, 0) == 0);
	}
	uint64_t served = vc_now_ns() - t0;
	CHECK(served < 1500000000ull); /* not behind the silent ones' 2 s */
	char out[256];
	int fds[2] = { quiet, half };
	for (int i = 0; i < 2; i++) {
		ssize_t k = recv(fds[i], out, sizeof out - 1, 0);
		CHECK(k > 0);
		out[k] = 0;
		CHECK(strncmp(out, "ERR ETIMEDOUT ", 14) == 0);
		close(fds[i]);
	}
	uint64_t waited = vc_now_ns() - t0;
	CHECK(waited > 1500000000ull && waited < 10000000000ull);
}

/* 16 connections at once at most: the 17th is answered EBUSY at once,
 * and once the silent ones leave, clients are served again. */
static void test_busy(void)
{
	int fds[16];
	char out[128];
	bool busy = false;
	/* An earlier test's connection thread may still hold a slot for a
	 * moment (then one of these 16 is the one refused, and the 17th gets
	 * the freed slot): try again. The 17th holds a slot if it gets no
	 * reply in 500 ms, since only the 2 s timeout would answer it. */
	for (int attempt = 0; attempt < 20 && !busy; attempt++) {
		for (int i = 0; i < 16; i++)
			fds[i] = raw_connect(path);
		sleep_ms(100);
		int fd = raw_connect(path);
		struct timeval tv = { 0, 500000 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		ssize_t k = recv(fd, out, sizeof out - 1, 0);
		out[k > 0 ? k : 0] = 0;
		busy = k > 0;
		CHECK(!busy || strncmp(out, "ERR EBUSY ", 10) == 0);
		close(fd);
		if (!busy) {
			for (int i = 0; i < 16; i++)
				close(fds[i]);
			sleep_ms(200);
		}
	}
	CHECK(busy);
	/* The server answers and hangs up without reading: the client's send
	 * may fail, but it reads the reply and reports EBUSY, not EPIPE. */
	for (int i = 0; i < 50; i++) {
		uint64_t got;
		int r = vc_release_ask(path, UUID_A, 4096, 0, &got);
		if (r != -EBUSY) {
			fprintf(stderr, "busy server: ask %d returned %d (%s)\n", i, r, vc_last_error());
			exit(1);
		}
	}
	for (int i = 0; i < 16; i++)
		close(fds[i]);
	int ok = -1;
	for (int i = 0; i < 100 && ok != 0; i++) {
		sleep_ms(10);
		ok = vc_release_ping(path, 0);
	}
	CHECK(ok == 0);
}

struct asker {
	pthread_t t;
	int r;
	uint64_t got;
};

static void *ask_main(void *p)
{
	struct asker *a = p;
	a->r = vc_release_ask(path, UUID_A, MiB, 5000, &a->got);
	return NULL;
}

/* Four clients at once: each is answered, one callback at a time. */
static void test_serialised(void)
{
	pthread_mutex_lock(&fake.lock);
	fake.delay_ms = 100;
	fake.max_inside = 0;
	fake.left = CACHE;
	pthread_mutex_unlock(&fake.lock);
	struct asker a[4];
	for (int i = 0; i < 4; i++)
		CHECK(pthread_create(&a[i].t, NULL, ask_main, &a[i]) == 0);
	for (int i = 0; i < 4; i++) {
		pthread_join(a[i].t, NULL);
		CHECK(a[i].r == 0 && a[i].got == MiB);
	}
	CHECK(fake.max_inside == 1);
	pthread_mutex_lock(&fake.lock);
	fake.delay_ms = 0;
	pthread_mutex_unlock(&fake.lock);
}

/* What a child process of the given credentials gets: the reply's first
 * word and errno name, as the exit status (0: OK, 1: ERR EACCES,
 * 2: connect refused by the file's mode, 3: other). */
static int as_user(uid_t uid, gid_t gid, gid_t extra)
{
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		gid_t groups[1] = { extra };
		if (setgroups(extra ? 1 : 0, groups) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
			_exit(4);
		uint64_t got;
		int r = vc_release_ask(path, UUID_B, 4096, 0, &got);
		_exit(r == 0 ? 0 : r == -EACCES && strstr(vc_last_error(), "server says") ? 1 : r == -EACCES ? 2 : 3);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void test_peer_check(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "note: not root, peer credential checks not run\n");
		return;
	}
	struct stat st;
	CHECK(stat(path, &st) == 0);
	CHECK((st.st_mode & 0777) == 0660);
	CHECK(chmod(dir, 0711) == 0); /* mkdtemp's 0700 would stop them at the directory */
	/* The file's mode keeps strangers out before the protocol does. */
	CHECK(as_user(65534, 65534, 0) == 2);
	CHECK(chmod(path, 0666) == 0);
	CHECK(as_user(65534, 65534, 0) == 1);
	CHECK(chown(path, 0, 4242) == 0); /* the server re-reads the group */
	CHECK(as_user(65534, 4242, 0) == 0);
	CHECK(as_user(65534, 65534, 4242) == 0);
	CHECK(as_user(65534, 65534, 4243) == 1);
	CHECK(chown(path, 0, 0) == 0 && chmod(path, 0660) == 0);
}

static void test_claim(void)
{
	char other[100];
	struct vc_release_server *s2;
	/* Live: not stolen, and the first server still answers. */
	CHECK(vc_release_server_start(path, fake_release, &fake, &s2) == -EADDRINUSE);
	CHECK(strstr(vc_last_error(), "another server"));
	CHECK(vc_release_ping(path, 0) == 0);
	/* Stale: a socket file nobody listens on is replaced. */
	snprintf(other, sizeof other, "%s/stale.sock", dir);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", other);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	close(fd);
	CHECK(vc_release_ping(other, 0) == -ECONNREFUSED);
	CHECK_OK(vc_release_server_start(other, fake_release, &fake, &s2));
	CHECK(vc_release_ping(other, 0) == 0);
	vc_release_server_stop(s2);
	CHECK(access(other, F_OK) < 0 && errno == ENOENT);
	CHECK(vc_release_ping(other, 0) == -ENOENT);
	/* Not a socket: left alone. */
	FILE *f = fopen(other, "w");
	CHECK(f && fputs("keep me", f) >= 0 && fclose(f) == 0);
	CHECK(vc_release_server_start(other, fake_release, &fake, &s2) == -EEXIST);
	CHECK(access(other, F_OK) == 0);
	unlink(other);
	/* A directory that does not exist. */
	snprintf(other, sizeof other, "%s/no/such/dir.sock", dir);
	CHECK(vc_release_server_start(other, fake_release, &fake, &s2) == -ENOENT);
}

/* Stop with a silent client connected returns at once (its read is cut),
 * and removes the socket. */
static void test_stop(struct vc_release_server *s)
{
	int fd = raw_connect(path);
	sleep_ms(50);
	uint64_t t0 = vc_now_ns();
	vc_release_server_stop(s);
	CHECK(vc_now_ns() - t0 < 1000000000ull);
	close(fd);
	CHECK(access(path, F_OK) < 0);
	uint64_t got;
	CHECK(vc_release_ask(path, UUID_A, 4096, 0, &got) == -ENOENT);
}

int main(void)
{
	/* SIGPIPE stays fatal: the server must never raise it. */
	signal(SIGPIPE, SIG_DFL);
	snprintf(dir, sizeof dir, "%s/vc-release-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	CHECK(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/r.sock", dir);
	test_parser();
	test_path_env();
	struct vc_release_server *s;
	CHECK(vc_release_ask(path, UUID_A, 4096, 0, &(uint64_t){ 0 }) == -ENOENT);
	CHECK(vc_release_server_start(path, NULL, NULL, &s) == -EINVAL);
	CHECK_OK(vc_release_server_start(path, fake_release, &fake, &s));
	test_good();
	test_bad_lines();
	test_vanishing();
	test_silent();
	test_busy();
	test_serialised();
	test_peer_check();
	test_claim();
	struct vc_release_server_stats st;
	vc_release_server_stats(s, &st);
	fprintf(stderr, "stats: %llu requests, %llu refused, %llu bytes asked, %llu released\n",
		(unsigned long long)st.requests, (unsigned long long)st.refused,
		(unsigned long long)st.bytes_asked, (unsigned long long)st.bytes_released);
	CHECK(st.requests > 60 && st.refused > 20 && st.refused < st.requests);
	CHECK(st.bytes_released > 0 && st.bytes_released < st.bytes_asked);
	test_stop(s);
	rmdir(dir);
	fprintf(stderr, "release protocol: ok\n");
	return 0;
}
