/* The release protocol's client half and its wire format (release.h).
 *
 * libc only: this file is linked into libvramcache-shim.so, which lives
 * inside other people's CUDA programs. It keeps no state, takes no lock
 * and blocks only for the bounded time its caller gives. */
#include "release/release.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"

/* What a caller waits when it passes timeout_ms 0. */
#define DEFAULT_TIMEOUT_MS 2000

const char *vc_release_default_path(char *buf, size_t len)
{
	const char *env = getenv(VC_RELEASE_SOCKET_ENV);
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;
	if (env && *env)
		n = snprintf(buf, len, "%s", env);
	else if (xdg && *xdg)
		n = snprintf(buf, len, "%s/vramcache-release.sock", xdg);
	else
		n = snprintf(buf, len, "/run/vramcache/release.sock");
	return n >= 0 && (size_t)n < len ? buf : NULL;
}

/* --- wire format --------------------------------------------------------- */

static const struct {
	int err;
	const char *name;
} errno_names[] = {
	{ EINVAL, "EINVAL" },   { EACCES, "EACCES" },     { EPERM, "EPERM" },     { EBUSY, "EBUSY" },
	{ EAGAIN, "EAGAIN" },   { ENOMEM, "ENOMEM" },     { ENOSPC, "ENOSPC" },   { EIO, "EIO" },
	{ ENODEV, "ENODEV" },   { ENOSYS, "ENOSYS" },     { ENOTSUP, "ENOTSUP" }, { ETIMEDOUT, "ETIMEDOUT" },
	{ ECANCELED, "ECANCELED" }, { ESHUTDOWN, "ESHUTDOWN" }, { EPROTO, "EPROTO" }, { ERANGE, "ERANGE" },
};
#define N_ERRNO_NAMES (sizeof errno_names / sizeof errno_names[0])

const char *vc_release_errno_name(int err)
{
	if (err < 0)
		err = -err;
	for (size_t i = 0; i < N_ERRNO_NAMES; i++)
		if (errno_names[i].err == err)
			return errno_names[i].name;
	return "EIO";
}

int vc_release_errno_value(const char *name, size_t len)
{
	for (size_t i = 0; i < N_ERRNO_NAMES; i++)
		if (strlen(errno_names[i].name) == len && memcmp(errno_names[i].name, name, len) == 0)
			return -errno_names[i].err;
	return 0;
}

void vc_release_uuid_hex(const unsigned char uuid[16], char out[VC_RELEASE_UUID_HEX + 1])
{
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++) {
		out[2 * i] = hex[uuid[i] >> 4];
		out[2 * i + 1] = hex[uuid[i] & 15];
	}
	out[VC_RELEASE_UUID_HEX] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* A decimal u64 of digits only (no sign, no space) in s[0..len): 0, or -1
 * for anything else, -ERANGE past 2^64-1. */
static int parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	if (len == 0)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int vc_release_parse(const char *line, size_t len, struct vc_release_req *req, const char **why)
{
	static const char rel[] = "RELEASE ";
	const size_t rl = sizeof rel - 1;
	memset(req, 0, sizeof *req);
	if (len == 4 && memcmp(line, "PING", 4) == 0) {
		req->op = VC_RELEASE_OP_PING;
		return 0;
	}
	if (len < rl || memcmp(line, rel, rl) != 0) {
		*why = "unknown command (RELEASE <bytes> <uuid> or PING)";
		return -EINVAL;
	}
	const char *p = line + rl, *end = line + len;
	const char *sp = memchr(p, ' ', (size_t)(end - p));
	if (!sp) {
		*why = "missing uuid";
		return -EINVAL;
	}
	int r = parse_u64(p, (size_t)(sp - p), &req->bytes);
	if (r == -ERANGE) {
		*why = "bytes overflows 64 bits";
		return -EINVAL;
	}
	if (r < 0) {
		*why = "bytes must be a decimal number";
		return -EINVAL;
	}
	if (req->bytes == 0) {
		*why = "bytes must be more than 0";
		return -EINVAL;
	}
	p = sp + 1;
	if (end - p != VC_RELEASE_UUID_HEX) {
		*why = p == end ? "missing uuid" : "uuid must be 32 lowercase hex digits";
		return -EINVAL;
	}
	for (int i = 0; i < 16; i++) {
		int hi = hexval(p[2 * i]), lo = hexval(p[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			*why = "uuid must be 32 lowercase hex digits";
			return -EINVAL;
		}
		req->uuid[i] = (unsigned char)(hi << 4 | lo);
	}
	req->op = VC_RELEASE_OP_RELEASE;
	return 0;
}

int vc_release_line_len(const char *buf, size_t got)
{
	const char *nl = memchr(buf, '\n', got);
	if (!nl)
		return -1;
	if (nl > buf && nl[-1] == '\r')
		nl--;
	return (int)(nl - buf);
}

/* --- client -------------------------------------------------------------- */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Connects, sends `req` and reads one reply line into buf (newline and a
 * \r before it removed, NUL-terminated); all within timeout_ms. Returns
 * the line's length or -errno. */
static int exchange(const char *path, const char *req, unsigned timeout_ms, char *buf, size_t cap)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof sa.sun_path)
		return vc_err(-ENAMETOOLONG, "release socket path too long: %s", path);
	strcpy(sa.sun_path, path);
	if (timeout_ms == 0)
		timeout_ms = DEFAULT_TIMEOUT_MS;
	int64_t deadline = now_ms() + timeout_ms;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return vc_err(-errno, "release socket: %s", strerror(errno));
	/* A Unix connect to a full backlog blocks for the send timeout. */
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	int r;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		r = errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT : -errno;
		vc_err(r, "%s: %s", path, strerror(-r));
		goto out;
	}
	/* A server that refuses us (ERR EACCES, EBUSY) replies and hangs up
	 * without reading: our send may then fail, but its reply is there to
	 * read, and says more than EPIPE. */
	size_t len = strlen(req), off = 0;
	int send_err = 0;
	while (off < len) {
		ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) {
			send_err = -errno;
			break;
		}
		if (w < 0) {
			r = errno == EAGAIN ? -ETIMEDOUT : -errno;
			vc_err(r, "%s: sending: %s", path, strerror(-r));
			goto out;
		}
		off += (size_t)w;
	}
	size_t got = 0;
	for (;;) {
		if ((r = vc_release_line_len(buf, got)) >= 0) {
			buf[r] = '\0';
			goto out;
		}
		if (got == cap - 1) {
			r = vc_err(-EPROTO, "%s: reply longer than %zu bytes", path, cap - 1);
			goto out;
		}
		int64_t left = deadline - now_ms();
		if (left <= 0) {
			r = vc_err(-ETIMEDOUT, "%s: no reply in %u ms", path, timeout_ms);
			goto out;
		}
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int n = poll(&pfd, 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = vc_err(-errno, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			continue;
		ssize_t k = recv(fd, buf + got, cap - 1 - got, 0);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k < 0 || (k == 0 && send_err)) {
			r = k < 0 ? -errno : send_err;
			vc_err(r, "%s: %s", path, strerror(-r));
			goto out;
		}
		if (k == 0) {
			r = vc_err(-EPROTO, "%s: the server hung up without a reply", path);
			goto out;
		}
		got += (size_t)k;
	}
out:
	close(fd);
	return r;
}

/* "OK <n>" -> 0 and *n; "ERR <NAME> <text>" -> the named -errno (-EPROTO
 * when it is not one we know); anything else -EPROTO. */
static int parse_reply(const char *path, const char *line, size_t len, uint64_t *n)
{
	if (len > 3 && memcmp(line, "OK ", 3) == 0) {
		if (parse_u64(line + 3, len - 3, n) == 0)
			return 0;
	} else if (len > 4 && memcmp(line, "ERR ", 4) == 0) {
		const char *name = line + 4;
		size_t nl = strcspn(name, " ");
		int e = vc_release_errno_value(name, nl);
		return vc_err(e ? e : -EPROTO, "%s: server says: %s", path, name);
	}
	return vc_err(-EPROTO, "%s: bad reply: %.64s", path, line);
}

/* One request and the number its OK reply carries. */
static int request(const char *path, const char *line, unsigned timeout_ms, uint64_t *n)
{
	char reply[VC_RELEASE_LINE_MAX];
	int len = exchange(path, line, timeout_ms, reply, sizeof reply);
	return len < 0 ? len : parse_reply(path, reply, (size_t)len, n);
}

int vc_release_ask(const char *path, const unsigned char uuid[16], uint64_t bytes, unsigned timeout_ms,
		   uint64_t *released)
{
	char req[VC_RELEASE_LINE_MAX], hex[VC_RELEASE_UUID_HEX + 1];
	if (bytes == 0)
		return vc_err(-EINVAL, "release of 0 bytes");
	vc_release_uuid_hex(uuid, hex);
	snprintf(req, sizeof req, "RELEASE %llu %s\n", (unsigned long long)bytes, hex);
	uint64_t n;
	int r = request(path, req, timeout_ms, &n);
	if (r < 0)
		return r;
	if (n > bytes)
		return vc_err(-EPROTO, "%s: released %llu of %llu bytes asked", path, (unsigned long long)n,
			      (unsigned long long)bytes);
	*released = n;
	return 0;
}

int vc_release_ping(const char *path, unsigned timeout_ms)
{
	uint64_t n;
	int r = request(path, "PING\n", timeout_ms, &n);
	if (r < 0)
		return r;
	return n == 0 ? 0 : vc_err(-EPROTO, "%s: PING answered OK %llu", path, (unsigned long long)n);
}
