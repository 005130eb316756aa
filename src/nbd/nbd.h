/* The NBD front end: a connection speaks the fixed newstyle handshake, then
 * serves requests against one export backed by a vc_cache.
 *
 *   proto.h      wire constants
 *   wire.h/.c    big-endian fields, whole-buffer socket I/O
 *   handshake.c  option haggling: which export, which reply style
 *   request.c    one request: validation, the engine call, the reply
 *   extents.c    BLOCK_STATUS for base:allocation
 *   conn.c       a connection: one thread, a vc_aio queue, a lane for the rest
 *   stats.c      counters per export, and their JSON and Prometheus text
 *   tls.c        STARTTLS (GnuTLS): credentials, the TLS session, and the
 *                session's I/O, plain or TLS, for the other files
 *
 * Nothing here owns the socket's lifetime or the cache: the caller (the
 * `serve` command, a test, a fuzzer) opens and closes both. */
#ifndef VC_NBD_H
#define VC_NBD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>

#include "nbd/proto.h"
#include "vramcache.h"

/* The largest READ or WRITE payload we accept and advertise
 * (NBD_INFO_BLOCK_SIZE maximum): 64 MiB. Above the spec's interoperable
 * 32 MiB, which clients that read NBD_INFO_BLOCK_SIZE are told, because
 * some do not: nbd-server takes larger requests and the NBD project's
 * integrityhuge test sends up to 50 MB. 64 MiB is libnbd's own largest
 * request and nbdkit's. Also bounds one request's buffer, which the
 * connection's byte bound (NBD_INFLIGHT_BYTES) lets through alone. */
#define NBD_MAX_PAYLOAD (64u << 20)
/* Advertised minimum and preferred block sizes: any byte range works (the
 * engine does read-modify-write on partial pages); a 4 KiB page does not. */
#define NBD_MIN_BLOCK 1u
#define NBD_PREF_BLOCK 4096u

/* What happened on an export, from every connection (relaxed atomics:
 * counters only, read by the stats channel). */
struct nbd_counters {
	_Atomic uint64_t ops[NBD_CMD_BLOCK_STATUS + 1]; /* requests run, by command */
	_Atomic uint64_t read_bytes, write_bytes;
	_Atomic uint64_t errors; /* requests answered with an error */
	_Atomic uint64_t conns, conns_total; /* connections now, and ever */
};

struct nbd_export {
	const char *name;        /* "" is the default export */
	const char *description; /* may be NULL */
	vc_volume *vol;          /* the export's store, in the shared cache */
	bool readonly;
	/* Every WRITE, WRITE_ZEROES and TRIM runs as if it had FUA: the
	 * export is write-through in a write-back cache (other exports of
	 * the same cache are write-back; the write mode is the cache's). */
	bool write_through;
	int prefetch_tier; /* where NBD_CMD_CACHE loads pages: enum vc_tier */
	struct nbd_counters *counters; /* may be NULL */
};

/* TLS policy (nbdkit's --tls): OFF refuses STARTTLS; ON offers it; REQUIRE
 * answers every option but STARTTLS and ABORT with NBD_REP_ERR_TLS_REQD
 * until TLS is up (the spec's FORCEDTLS mode). */
enum nbd_tls_mode { NBD_TLS_OFF, NBD_TLS_ON, NBD_TLS_REQUIRE };

struct nbd_tls;      /* server credentials (tls.c) */
struct nbd_tls_conn; /* one connection's TLS session (tls.c) */

struct nbd_server {
	const struct nbd_export *exports; /* exports[0] also answers to "" */
	unsigned n_exports;
	unsigned workers; /* helper threads of a connection's vc_aio queue; 0: NBD_DEFAULT_WORKERS */
	vc_cache *cache;  /* the cache every export's volume lives in (stats) */
	int tls_mode;           /* enum nbd_tls_mode; anything but OFF needs tls */
	struct nbd_tls *tls;    /* credentials, or NULL */
	/* Called when a client asks to enter transmission (GO, EXPORT_NAME),
	 * before the server answers: false refuses it (GO gets
	 * NBD_REP_ERR_POLICY, EXPORT_NAME a hang-up). NULL admits all. The
	 * `serve` command counts established connections with it. */
	bool (*admit)(void *ctx, int fd);
	void *admit_ctx;
};

/* The one metadata context we serve, and its id. */
#define NBD_CTX_ALLOCATION "base:allocation"
#define NBD_CTX_ALLOCATION_ID 1u

/* Helper threads per connection by default: they run what must wait
 * (misses, writes, flushes; vc_aio_open's `helpers`), started on first
 * need; cached reads need none. Four overlap a few backing-store calls
 * without oversubscribing a small host; each idle one costs a sleeping
 * thread. */
#define NBD_DEFAULT_WORKERS 4

/* What the handshake settled, for the transmission phase. */
struct nbd_session {
	int fd;
	struct nbd_tls_conn *tls; /* after STARTTLS: every byte goes through it */
	const struct nbd_server *srv;
	const struct nbd_export *exp; /* set when transmission starts */
	uint64_t size;                /* export size */
	uint16_t tflags;              /* transmission flags sent to the client */
	bool structured;              /* NBD_OPT_STRUCTURED_REPLY was acked */
	bool no_zeroes;               /* client set NBD_FLAG_C_NO_ZEROES */
	/* The export the last SET_META_CONTEXT selected base:allocation on,
	 * or NULL; BLOCK_STATUS is allowed only if it is the one served. */
	const struct nbd_export *meta_exp;
	bool meta_alloc; /* transmission: base:allocation is selected */
};

/* --- handshake.c --- */
/* Runs option haggling on s->fd. 1: transmission starts (s->exp set);
 * 0: the client ended the session cleanly (NBD_OPT_ABORT, or EOF between
 * options); -EPROTO on a protocol violation (the caller hangs up); -errno
 * on I/O failure. Memory: at most one option's data (bounded) at a time. */
int nbd_handshake(struct nbd_session *s);
/* Transmission flags for an export, given the reply style. */
uint16_t nbd_export_flags(const struct nbd_export *e, bool structured);

/* --- request.c --- */
struct nbd_request {
	uint16_t flags, type;
	uint64_t cookie, offset;
	uint32_t length;
	void *data; /* WRITE: the payload; READ: the result buffer; BLOCK_STATUS:
		       the descriptors (freed with the request) */
	uint32_t ndesc; /* BLOCK_STATUS: descriptors in data */
};

/* Decodes a 28-byte request header. -EPROTO on a bad magic (the session
 * must end: the stream can no longer be framed). */
int nbd_request_decode(const unsigned char hdr[NBD_REQUEST_LEN], struct nbd_request *r);
/* Checks a decoded request against the session: 0 to run it, or the
 * NBD_E* error to reply with. Pure; O(1). */
uint32_t nbd_request_check(const struct nbd_session *s, const struct nbd_request *r);
/* Runs a checked request on the engine: 0 or an NBD_E* error. READ fills
 * r->data (the caller allocated r->length bytes). May block for as long as
 * the engine takes (a WRITE_ZEROES of 4 GiB, a CACHE that reads the store). */
uint32_t nbd_request_exec(const struct nbd_session *s, struct nbd_request *r);
/* The NBD error for a checked READ, WRITE or FLUSH that ran as a vc_aio
 * request with result `res` (bytes or -errno): 0 or NBD_E*. */
uint32_t nbd_request_result(const struct nbd_request *r, int64_t res);
/* The reply for r (with r->data for a successful READ) as iov[0] (the
 * header, built in h) and maybe iov[1] (data or message): returns the
 * count. Replies are sent many per sendmsg (conn.c). */
#define NBD_REPLY_HDR_MAX (NBD_CHUNK_HDR_LEN + 8)
int nbd_reply_build(const struct nbd_session *s, const struct nbd_request *r, uint32_t error,
		    unsigned char h[NBD_REPLY_HDR_MAX], struct iovec iov[2]);

/* --- extents.c --- */
/* Fills r->data with base:allocation descriptors (length, flags; wire
 * order) for the checked BLOCK_STATUS request r: 0 or an NBD_E* error.
 * At most NBD_MAX_EXTENTS descriptors, one with REQ_ONE. */
uint32_t nbd_block_status(const struct nbd_session *s, struct nbd_request *r);
/* Descriptors per reply: 8 KiB of reply, and at most twice as many
 * lseeks; clients ask again from where a short reply ends. */
#define NBD_MAX_EXTENTS 1024u

/* --- stats.c --- */
/* Writes the server's statistics (cache and per export) as one JSON
 * object, or as Prometheus text exposition. 0 or -errno. */
int nbd_stats_json(const struct nbd_server *srv, FILE *f);
int nbd_stats_prometheus(const struct nbd_server *srv, FILE *f);

/* --- tls.c --- */
/* Where the credentials are; NULL fields are absent. X.509: a directory
 * as nbdkit's --tls-certificates (server-cert.pem, server-key.pem, and
 * ca-cert.pem, needed with verify_peer; ca-crl.pem if present). PSK: a
 * psktool file ("identity:hexkey" lines). */
struct nbd_tls_config {
	const char *cert_dir;
	const char *psk_file;
	bool verify_peer; /* X.509: clients must show a certificate the CA signed */
};
/* Loads the credentials now, so a bad path fails at start-up: 0, or -errno
 * with a message in err (a build without GnuTLS: -ENOTSUP). */
int nbd_tls_new(const struct nbd_tls_config *cfg, struct nbd_tls **out, char *err,
		size_t errlen);
void nbd_tls_free(struct nbd_tls *t);
/* After STARTTLS's ACK: the server side of the TLS handshake on s->fd
 * (blocking). 0 with s->tls set, or -errno (the session must end). */
int nbd_tls_start(struct nbd_session *s);
/* Ends s's TLS session, if any (close_notify without waiting), and frees it. */
void nbd_tls_end(struct nbd_session *s);
/* The session's bytes, through TLS once it is up (blocking; the handshake
 * phase). Same codes as nbd_read_full and nbd_write_full; nbd_sskip reads
 * and throws away n bytes through a bounded stack buffer. */
int nbd_sread(struct nbd_session *s, void *buf, size_t n);
int nbd_sskip(struct nbd_session *s, uint64_t n);
int nbd_swrite(struct nbd_session *s, const void *buf, size_t n);
/* Transmission over TLS, never blocking. recv: bytes, 0 when there is
 * nothing yet, -ECONNRESET at end of stream, -errno. writev_some: as
 * nbd_writev_some with dontwait: it advances iov past the bytes it took
 * (encrypted, so the caller may free them), which may still wait in the
 * connection's buffers (nbd_tls_out_pending) and leave on a later call;
 * after -EAGAIN the next call must start with the bytes not taken. */
ssize_t nbd_tls_recv(struct nbd_tls_conn *t, void *buf, size_t n);
int nbd_tls_writev_some(struct nbd_tls_conn *t, struct iovec *iov, int n);
/* Bytes accepted but not yet on the socket; decrypted bytes not yet read. */
bool nbd_tls_out_pending(const struct nbd_tls_conn *t);
bool nbd_tls_in_pending(const struct nbd_tls_conn *t);

/* --- conn.c --- */
/* Serves one client on fd until it disconnects or breaks the protocol:
 * handshake, then requests, on the calling thread (plus the vc_aio
 * queue's helpers and one thread for TRIM, WRITE_ZEROES, CACHE and
 * BLOCK_STATUS, each started on first need). Never closes fd. 0 on a
 * clean end, -errno otherwise (for the log). Bounded memory: payloads held
 * stop the reader at NBD_INFLIGHT_BYTES (one request may exceed it). */
int nbd_conn_run(int fd, const struct nbd_server *srv);
/* 64 MiB: one maximum payload, or 16k 4 KiB requests, held per
 * connection (a WRITE's until it is written, a READ's until its reply is
 * sent); beyond that the reader waits for requests to leave. */
#define NBD_INFLIGHT_BYTES (64u << 20)

#endif
