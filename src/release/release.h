/* The release protocol: how another program on the machine asks the cache
 * for GPU memory back (issue 12, BAG §3.3.5).
 *
 * A Unix stream socket and one text line each way, so that `socat` can
 * speak it:
 *
 *   client: RELEASE <bytes> <uuid>\n   bytes: decimal, 1 .. 2^64-1
 *                                     uuid:  32 lowercase hex digits, the
 *                                            CUDA device's UUID
 *           PING\n                    is a server there?
 *   server: OK <bytes-released>\n     0 .. bytes (0: not our device, or
 *                                     nothing left to give); PING: OK 0
 *           ERR <ERRNO-NAME> <text>\n e.g. ERR EINVAL bad request: ...
 *
 * One request per connection; the server hangs up after its reply. A line
 * is at most VC_RELEASE_LINE_MAX bytes with its newline (a trailing \r is
 * allowed, as `socat ... ,crnl` sends).
 *
 * The client half (vc_release_default_path, vc_release_ask, the line
 * helpers) is in release.c and uses libc only: libvramcache-shim.so, which
 * runs inside other programs, links it and nothing else of ours but
 * base/error.c. The server half is in server.c. */
#ifndef VC_RELEASE_H
#define VC_RELEASE_H

#include <stddef.h>
#include <stdint.h>

#define VC_RELEASE_SOCKET_ENV "VRAMCACHE_RELEASE_SOCKET"
/* The longest request or reply, newline included. The longest valid
 * request is 62 bytes (RELEASE, 20 digits, 32 hex digits); 128 leaves room
 * for a reply's text while bounding what a client can make us buffer. */
#define VC_RELEASE_LINE_MAX 128
#define VC_RELEASE_UUID_HEX 32

/* --- server (server.c) --------------------------------------------------- */

/* Asked to give back `bytes` of GPU memory on the device `uuid` (16 raw
 * bytes); sets *released to what it freed (0 .. bytes, 0 when uuid is not
 * its device) and returns 0, or returns -errno (the client gets
 * ERR <NAME>). Called on a server thread, one call at a time. */
typedef int (*vc_release_fn)(void *ctx, const unsigned char uuid[16], uint64_t bytes, uint64_t *released);

struct vc_release_server;

/* Listens on `path` and serves requests on its own threads until
 * vc_release_server_stop. The socket is created mode 0660 (no window with
 * wider permissions). A file already at `path` is replaced only when it is
 * a socket that no server answers on (-EADDRINUSE when one does, -EEXIST
 * when it is not a socket). Peers must be root, the server's effective
 * uid, or in the socket file's group (their primary or a supplementary
 * group): others get ERR EACCES. Returns 0 or -errno, with vc_last_error. */
int vc_release_server_start(const char *path, vc_release_fn fn, void *ctx, struct vc_release_server **out);
/* Stops accepting, hangs up on clients still sending, waits for a release
 * in progress, joins the threads and unlinks the socket. NULL is a no-op. */
void vc_release_server_stop(struct vc_release_server *s);

struct vc_release_server_stats {
	uint64_t requests;       /* connections accepted (PING included) */
	uint64_t refused;        /* of which not answered OK: ERR replies (bad lines,
				    timeouts, EACCES, busy, fn errors) and clients gone */
	uint64_t bytes_asked;    /* sum of valid RELEASE requests' bytes */
	uint64_t bytes_released; /* sum of what fn gave back */
};
void vc_release_server_stats(struct vc_release_server *s, struct vc_release_server_stats *st);

/* --- client (release.c; libc only) -------------------------------------- */

/* The socket path into buf: $VRAMCACHE_RELEASE_SOCKET when set and not
 * empty, else $XDG_RUNTIME_DIR/vramcache-release.sock when that is set,
 * else /run/vramcache/release.sock. Returns buf, or NULL when the path
 * does not fit in len. */
const char *vc_release_default_path(char *buf, size_t len);

/* Asks the server at `path` to release `bytes` (> 0) on device `uuid` and
 * waits up to timeout_ms (0: 2 s) for the answer, the server's release
 * included. Returns 0 with *released set, or -errno: -ENOENT or
 * -ECONNREFUSED when no server listens there, -EACCES when it refuses us,
 * -ETIMEDOUT, -EPROTO for a reply it cannot read, and the errno the
 * server named in an ERR reply. Never raises SIGPIPE. */
int vc_release_ask(const char *path, const unsigned char uuid[16], uint64_t bytes, unsigned timeout_ms,
		   uint64_t *released);

/* Sends PING: 0 when a server answers OK 0, else as vc_release_ask. */
int vc_release_ping(const char *path, unsigned timeout_ms);

/* --- the wire format, shared by both halves and the tests --------------- */

enum vc_release_op { VC_RELEASE_OP_PING = 1, VC_RELEASE_OP_RELEASE = 2 };

struct vc_release_req {
	enum vc_release_op op;
	uint64_t bytes;
	unsigned char uuid[16];
};

/* Parses one request line of len bytes (its newline and an optional \r
 * before it already removed; no NUL needed). Returns 0, or -EINVAL with a
 * short reason in *why (a static string). */
int vc_release_parse(const char *line, size_t len, struct vc_release_req *req, const char **why);

/* The length of the first line in buf[0..got), without its newline and a
 * \r before that, or -1 while buf holds no newline. */
int vc_release_line_len(const char *buf, size_t got);

/* The errno's name as the protocol writes it ("EINVAL"), "EIO" for one it
 * does not know; and back: -errno for a name, 0 for an unknown one. */
const char *vc_release_errno_name(int err);
int vc_release_errno_value(const char *name, size_t len);

/* uuid as 32 lowercase hex digits and a NUL into out[33]. */
void vc_release_uuid_hex(const unsigned char uuid[16], char out[VC_RELEASE_UUID_HEX + 1]);

#endif
