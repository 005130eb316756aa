/* STARTTLS (spec: "TLS support"), with GnuTLS as nbdkit and qemu-nbd use it,
 * and the session's I/O, plain or TLS, for handshake.c and conn.c.
 *
 * Credentials load once, at start-up (nbd_tls_new), so a missing or bad
 * file fails there and not at a client's first STARTTLS; each connection
 * gets its own GnuTLS session when it sends STARTTLS.
 *
 * Blocking: the handshake phase blocks on the socket (serve's handshake
 * timeout bounds it); the transmission phase never does (conn.c polls), so
 * our pull and push functions add MSG_DONTWAIT once nbd_tls_recv or
 * nbd_tls_writev_some has run.
 *
 * Sends, in the transmission phase. gnutls_record_send takes at most one
 * record (16 KiB) per call. Every record is full but the last of a burst:
 *   - small pieces (a 16 to 28 byte header, 4 KiB of data) are copied into
 *     a one-record plaintext buffer, `out`, so a record carries several
 *     replies, or a header and the start of its data;
 *   - a piece of at least a record with `out` empty (the rest of a 128 KiB
 *     read's data after its first record) is encrypted straight from the
 *     caller's buffer, a record at a time, with no copy;
 *   - the records' ciphertext collects in `wbuf`, a ring (our push function
 *     appends to it), and goes out in one sendmsg() of up to WBUF bytes
 *     instead of one send() per record: a 128 KiB reply was 9 sends, and
 *     woke the client 9 times; now it is one.
 * A record is encrypted only when `wbuf` has room for it, so push always
 * takes it whole; should GnuTLS push something larger (an alert) that
 * does not fit, push says EAGAIN, GnuTLS keeps the record, and the next
 * call resumes it with gnutls_record_send(NULL, 0) (`pend`) before
 * anything else, advancing the caller's bytes only then. So bytes are
 * taken from the caller only once encrypted: conn.c may free a reply
 * whose bytes were taken. The plaintext path (wire.c's sendmsg of the
 * replies' own iovecs) is not touched. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nbd/nbd.h"
#include "nbd/wire.h"

int nbd_sskip(struct nbd_session *s, uint64_t n)
{
	unsigned char scratch[16384];
	while (n > 0) {
		size_t k = n < sizeof(scratch) ? (size_t)n : sizeof(scratch);
		int r = nbd_sread(s, scratch, k);
		if (r < 0)
			return r;
		n -= k;
	}
	return 0;
}

static int errf(char *err, size_t len, int e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return e;
}

#ifdef VC_HAVE_GNUTLS
#include <gnutls/gnutls.h>

/* The largest record's payload (TLS): `out` holds one. */
#define TLS_RECORD 16384u
/* The most one record adds to wbuf: the payload, TLS 1.3's content type
 * byte and at most 255 of padding, a 16-byte tag, a 5-byte header, and
 * room for TLS 1.2's explicit nonce and a MAC. */
#define TLS_RECORD_WIRE (TLS_RECORD + 512u)
/* Ciphertext waiting for the socket: two 128 KiB replies, or a few dozen
 * 4 KiB ones, per send(). Per connection: WBUF + TLS_RECORD. */
#define WBUF (256u << 10)

struct nbd_tls {
	gnutls_certificate_credentials_t x509; /* X.509, or NULL */
	gnutls_psk_server_credentials_t psk;   /* PSK, or NULL */
	gnutls_priority_t prio;
	bool verify_peer;
};

struct nbd_tls_conn {
	gnutls_session_t g;
	int fd;
	bool nonblock;  /* transmission: pull never waits, push appends to wbuf */
	int werr;       /* the socket's error, once a send of wbuf failed */
	size_t pend;    /* a record GnuTLS holds after EAGAIN: its bytes of */
	bool pend_out;  /* ... `out` (true) or of the caller's first iovec */
	size_t out_len; /* out[0..out_len): taken from the caller, not encrypted */
	size_t whead, wlen; /* wbuf[whead..whead + wlen) mod WBUF: not yet sent */
	unsigned char *wbuf;
	unsigned char out[TLS_RECORD];
};

/* A readable file, or a message naming it. */
static int readable(const char *path, char *err, size_t len)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return errf(err, len, -errno, "%s: %s", path, strerror(errno));
	fclose(f);
	return 0;
}

/* psktool's format: "identity:hexkey" lines. GnuTLS reads the file again
 * at each handshake; this only catches a wrong file at start-up. */
static int check_psk_file(const char *path, char *err, size_t len)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return errf(err, len, -errno, "%s: %s", path, strerror(errno));
	char line[1024];
	int good = 0, lineno = 0, e = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		line[strcspn(line, "\r\n")] = 0;
		if (!line[0])
			continue;
		char *colon = strchr(line, ':');
		size_t hex = colon ? strspn(colon + 1, "0123456789abcdefABCDEF") : 0;
		if (!colon || colon == line || hex == 0 || hex % 2 || colon[1 + hex]) {
			e = errf(err, len, -EINVAL,
				 "%s:%d: not a psktool line (want IDENTITY:HEXKEY)", path, lineno);
			break;
		}
		good++;
	}
	fclose(f);
	if (!e && !good)
		e = errf(err, len, -EINVAL, "%s: no keys (make one with psktool -u NAME -p %s)",
			 path, path);
	return e;
}

int nbd_tls_new(const struct nbd_tls_config *cfg, struct nbd_tls **out, char *err,
		size_t errlen)
{
	*out = NULL;
	if (!cfg->cert_dir == !cfg->psk_file)
		return errf(err, errlen, -EINVAL,
			    "TLS needs one of --tls-certificates DIR and --tls-psk FILE");
	if (cfg->verify_peer && !cfg->cert_dir)
		return errf(err, errlen, -EINVAL, "--tls-verify-peer needs --tls-certificates");
	struct nbd_tls *t = calloc(1, sizeof *t);
	if (!t)
		return errf(err, errlen, -ENOMEM, "out of memory");
	t->verify_peer = cfg->verify_peer;
	int e = 0, g;
	const char *prio = "NORMAL";
	if (cfg->cert_dir) {
		char cert[4096], key[4096], ca[4096], crl[4096];
		snprintf(cert, sizeof cert, "%s/server-cert.pem", cfg->cert_dir);
		snprintf(key, sizeof key, "%s/server-key.pem", cfg->cert_dir);
		snprintf(ca, sizeof ca, "%s/ca-cert.pem", cfg->cert_dir);
		snprintf(crl, sizeof crl, "%s/ca-crl.pem", cfg->cert_dir);
		if ((e = readable(cert, err, errlen)) || (e = readable(key, err, errlen)))
			goto fail;
		if ((g = gnutls_certificate_allocate_credentials(&t->x509)) < 0) {
			e = errf(err, errlen, -ENOMEM, "GnuTLS: %s", gnutls_strerror(g));
			goto fail;
		}
		g = gnutls_certificate_set_x509_key_file(t->x509, cert, key, GNUTLS_X509_FMT_PEM);
		if (g < 0) {
			e = errf(err, errlen, -EINVAL, "%s, %s: %s", cert, key, gnutls_strerror(g));
			goto fail;
		}
		/* The CA is needed only to check clients' certificates. */
		bool have_ca = access(ca, F_OK) == 0;
		if (cfg->verify_peer && !have_ca) {
			e = errf(err, errlen, -ENOENT, "--tls-verify-peer needs %s", ca);
			goto fail;
		}
		if (have_ca &&
		    (g = gnutls_certificate_set_x509_trust_file(t->x509, ca, GNUTLS_X509_FMT_PEM)) < 0) {
			e = errf(err, errlen, -EINVAL, "%s: %s", ca, gnutls_strerror(g));
			goto fail;
		}
		if (access(crl, F_OK) == 0 &&
		    (g = gnutls_certificate_set_x509_crl_file(t->x509, crl, GNUTLS_X509_FMT_PEM)) < 0) {
			e = errf(err, errlen, -EINVAL, "%s: %s", crl, gnutls_strerror(g));
			goto fail;
		}
		gnutls_certificate_set_known_dh_params(t->x509, GNUTLS_SEC_PARAM_MEDIUM);
	} else {
		if ((e = check_psk_file(cfg->psk_file, err, errlen)))
			goto fail;
		if ((g = gnutls_psk_allocate_server_credentials(&t->psk)) < 0 ||
		    (g = gnutls_psk_set_server_credentials_file(t->psk, cfg->psk_file)) < 0) {
			e = errf(err, errlen, -EINVAL, "%s: %s", cfg->psk_file, gnutls_strerror(g));
			goto fail;
		}
		gnutls_psk_set_server_known_dh_params(t->psk, GNUTLS_SEC_PARAM_MEDIUM);
		prio = "NORMAL:+ECDHE-PSK:+DHE-PSK:+PSK"; /* nbdkit's and libnbd's */
	}
	if ((g = gnutls_priority_init(&t->prio, prio, NULL)) < 0) {
		t->prio = NULL;
		e = errf(err, errlen, -EINVAL, "GnuTLS priority %s: %s", prio, gnutls_strerror(g));
		goto fail;
	}
	*out = t;
	return 0;
fail:
	nbd_tls_free(t);
	return e;
}

void nbd_tls_free(struct nbd_tls *t)
{
	if (!t)
		return;
	if (t->x509)
		gnutls_certificate_free_credentials(t->x509);
	if (t->psk)
		gnutls_psk_free_server_credentials(t->psk);
	if (t->prio)
		gnutls_priority_deinit(t->prio);
	free(t);
}

static ssize_t pull(gnutls_transport_ptr_t p, void *buf, size_t n)
{
	struct nbd_tls_conn *c = p;
	ssize_t r = recv(c->fd, buf, n, c->nonblock ? MSG_DONTWAIT : 0);
	if (r < 0)
		gnutls_transport_set_errno(c->g, errno == EWOULDBLOCK ? EAGAIN : errno);
	return r;
}

/* Sends what wbuf holds, without waiting: 0 (some may be left), or -errno
 * once the socket fails (kept in werr: later sends fail the same way). */
static int wflush(struct nbd_tls_conn *c)
{
	while (c->wlen > 0 && !c->werr) {
		size_t first = WBUF - c->whead < c->wlen ? WBUF - c->whead : c->wlen;
		struct iovec v[2] = { { c->wbuf + c->whead, first },
				      { c->wbuf, c->wlen - first } };
		struct msghdr m = { .msg_iov = v, .msg_iovlen = v[1].iov_len ? 2 : 1 };
		ssize_t r = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (r < 0) {
			c->werr = errno == EPIPE ? -ECONNRESET : -errno;
			break;
		}
		c->whead = (c->whead + (size_t)r) % WBUF;
		c->wlen -= (size_t)r;
	}
	if (c->wlen == 0)
		c->whead = 0;
	return c->werr;
}

/* Whether wbuf has room for n more bytes. */
static bool wroom(const struct nbd_tls_conn *c, size_t n)
{
	return WBUF - c->wlen >= n;
}

static ssize_t push(gnutls_transport_ptr_t p, const void *buf, size_t n)
{
	struct nbd_tls_conn *c = p;
	if (!c->nonblock) { /* the handshake phase: blocking sends */
		ssize_t r = send(c->fd, buf, n, MSG_NOSIGNAL);
		if (r < 0)
			gnutls_transport_set_errno(c->g, errno);
		return r;
	}
	if (c->werr || !wroom(c, n)) {
		if (!c->werr)
			wflush(c);
		if (c->werr || !wroom(c, n)) {
			gnutls_transport_set_errno(c->g, c->werr ? -c->werr : EAGAIN);
			return -1;
		}
	}
	size_t tail = (c->whead + c->wlen) % WBUF, first = WBUF - tail < n ? WBUF - tail : n;
	memcpy(c->wbuf + tail, buf, first);
	memcpy(c->wbuf, (const unsigned char *)buf + first, n - first);
	c->wlen += n;
	return (ssize_t)n;
}

/* A fatal GnuTLS code as -errno: the peer went away, or anything else. */
static int tls_errno(ssize_t r)
{
	return r == GNUTLS_E_PREMATURE_TERMINATION || r == GNUTLS_E_PUSH_ERROR ||
			       r == GNUTLS_E_PULL_ERROR
		       ? -ECONNRESET
		       : -EIO;
}

int nbd_tls_start(struct nbd_session *s)
{
	const struct nbd_tls *t = s->srv->tls;
	struct nbd_tls_conn *c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	c->fd = s->fd;
	c->wbuf = malloc(WBUF);
	if (!c->wbuf || gnutls_init(&c->g, GNUTLS_SERVER) < 0) {
		free(c->wbuf);
		free(c);
		return -ENOMEM;
	}
	gnutls_priority_set(c->g, t->prio);
	if (t->x509) {
		gnutls_credentials_set(c->g, GNUTLS_CRD_CERTIFICATE, t->x509);
		if (t->verify_peer)
			gnutls_certificate_server_set_request(c->g, GNUTLS_CERT_REQUIRE);
	} else {
		gnutls_credentials_set(c->g, GNUTLS_CRD_PSK, t->psk);
	}
	gnutls_transport_set_ptr(c->g, c);
	gnutls_transport_set_pull_function(c->g, pull);
	gnutls_transport_set_push_function(c->g, push);
	int r;
	do
		r = gnutls_handshake(c->g);
	while (r < 0 && !gnutls_error_is_fatal(r));
	unsigned status = 0;
	if (r == 0 && t->x509 && t->verify_peer &&
	    (gnutls_certificate_verify_peers2(c->g, &status) < 0 || status != 0))
		r = -1;
	if (r < 0) {
		/* A wrong key or an unknown certificate: the spec's "MUST
		 * terminate the session". -EKEYREJECTED tells the log why. */
		gnutls_deinit(c->g);
		free(c->wbuf);
		free(c);
		return -EKEYREJECTED;
	}
	s->tls = c;
	return 0;
}

void nbd_tls_end(struct nbd_session *s)
{
	struct nbd_tls_conn *c = s->tls;
	if (!c)
		return;
	c->nonblock = true; /* close_notify if the socket takes it; no wait */
	gnutls_bye(c->g, GNUTLS_SHUT_WR);
	wflush(c);
	gnutls_deinit(c->g);
	free(c->wbuf);
	free(c);
	s->tls = NULL;
}

int nbd_sread(struct nbd_session *s, void *buf, size_t n)
{
	if (!s->tls)
		return nbd_read_full(s->fd, buf, n);
	unsigned char *p = buf;
	while (n > 0) {
		ssize_t r = gnutls_record_recv(s->tls->g, p, n);
		if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
			continue;
		if (r == 0)
			return -ECONNRESET;
		if (r < 0)
			return tls_errno(r);
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int nbd_swrite(struct nbd_session *s, const void *buf, size_t n)
{
	if (!s->tls)
		return nbd_write_full(s->fd, buf, n);
	const unsigned char *p = buf;
	while (n > 0) {
		ssize_t r = gnutls_record_send(s->tls->g, p, n);
		if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
			continue;
		if (r < 0)
			return tls_errno(r);
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Reads records until n bytes or the socket has no more: clients send
 * each request as its own record, and conn.c counts one call as one read
 * of its budget, so a burst of headers still costs one call here. An end
 * or error after some bytes is reported by the next call. */
ssize_t nbd_tls_recv(struct nbd_tls_conn *t, void *buf, size_t n)
{
	t->nonblock = true;
	size_t got = 0;
	while (got < n) {
		ssize_t r = gnutls_record_recv(t->g, (char *)buf + got, n - got);
		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (r == GNUTLS_E_INTERRUPTED)
			continue;
		if (got > 0 || r == GNUTLS_E_AGAIN)
			break;
		return r == 0 ? -ECONNRESET : tls_errno(r);
	}
	return (ssize_t)got;
}

/* Takes k bytes from the front of the caller's iovecs, and the empty
 * iovecs after them. */
static void iov_take(struct iovec **iov, int *n, size_t k)
{
	while (*n > 0) {
		if ((*iov)[0].iov_len == 0) {
			(*iov)++;
			(*n)--;
			continue;
		}
		if (k == 0)
			break;
		size_t m = k < (*iov)[0].iov_len ? k : (*iov)[0].iov_len;
		(*iov)[0].iov_base = (char *)(*iov)[0].iov_base + m;
		(*iov)[0].iov_len -= m;
		k -= m;
	}
}

/* One record: `out` (from_out) or k bytes at the caller's first iovec,
 * taken once GnuTLS has encrypted them. 0, -EAGAIN (GnuTLS holds the
 * record: pend), or -errno. data NULL resumes the held record. */
static int send_record(struct nbd_tls_conn *t, const void *data, size_t k, bool from_out,
		       struct iovec **iov, int *n)
{
	ssize_t r;
	do
		r = gnutls_record_send(t->g, data, data ? k : 0);
	while (r == GNUTLS_E_INTERRUPTED);
	if (r == GNUTLS_E_AGAIN) {
		if (data) {
			t->pend = k;
			t->pend_out = from_out;
		}
		return t->werr ? t->werr : -EAGAIN;
	}
	if (r < 0)
		return t->werr ? t->werr : tls_errno(r);
	t->pend = 0;
	if (from_out) {
		/* r < out_len only where the client asked for smaller records */
		t->out_len -= (size_t)r;
		memmove(t->out, t->out + r, t->out_len);
	} else {
		iov_take(iov, n, (size_t)r);
	}
	return 0;
}

int nbd_tls_writev_some(struct nbd_tls_conn *t, struct iovec *iov, int n)
{
	t->nonblock = true;
	int e;
	iov_take(&iov, &n, 0);
	if (t->pend && (e = send_record(t, NULL, t->pend, t->pend_out, &iov, &n)) < 0)
		return e;
	for (;;) {
		/* Encrypt only with room for the whole record in wbuf. */
		if (!wroom(t, TLS_RECORD_WIRE)) {
			if ((e = wflush(t)) < 0)
				return e;
			if (!wroom(t, TLS_RECORD_WIRE))
				return -EAGAIN;
		}
		if (t->out_len == 0 && n > 0 && iov[0].iov_len >= TLS_RECORD) {
			e = send_record(t, iov[0].iov_base, TLS_RECORD, false, &iov, &n);
		} else {
			while (n > 0 && t->out_len < TLS_RECORD) {
				size_t k = TLS_RECORD - t->out_len;
				if (k > iov[0].iov_len)
					k = iov[0].iov_len;
				memcpy(t->out + t->out_len, iov[0].iov_base, k);
				t->out_len += k;
				iov_take(&iov, &n, k);
			}
			if (t->out_len == 0)
				break;
			e = send_record(t, t->out, t->out_len, true, &iov, &n);
		}
		if (e < 0)
			return e;
	}
	if ((e = wflush(t)) < 0)
		return e;
	return t->wlen ? -EAGAIN : 0;
}

bool nbd_tls_out_pending(const struct nbd_tls_conn *t)
{
	return t->out_len > 0 || t->pend > 0 || t->wlen > 0;
}

bool nbd_tls_in_pending(const struct nbd_tls_conn *t)
{
	return gnutls_record_check_pending(t->g) > 0;
}

#else /* no GnuTLS: --tls is refused at start-up; nothing else is reached */

int nbd_tls_new(const struct nbd_tls_config *cfg, struct nbd_tls **out, char *err,
		size_t errlen)
{
	(void)cfg;
	*out = NULL;
	return errf(err, errlen, -ENOTSUP,
		    "this build has no TLS support (Debian: libgnutls28-dev, then rebuild)");
}

void nbd_tls_free(struct nbd_tls *t)
{
	(void)t;
}

int nbd_tls_start(struct nbd_session *s)
{
	(void)s;
	return -ENOTSUP;
}

void nbd_tls_end(struct nbd_session *s)
{
	(void)s;
}

int nbd_sread(struct nbd_session *s, void *buf, size_t n)
{
	return nbd_read_full(s->fd, buf, n);
}

int nbd_swrite(struct nbd_session *s, const void *buf, size_t n)
{
	return nbd_write_full(s->fd, buf, n);
}

ssize_t nbd_tls_recv(struct nbd_tls_conn *t, void *buf, size_t n)
{
	(void)t, (void)buf, (void)n;
	return -ENOTSUP;
}

int nbd_tls_writev_some(struct nbd_tls_conn *t, struct iovec *iov, int n)
{
	(void)t, (void)iov, (void)n;
	return -ENOTSUP;
}

bool nbd_tls_out_pending(const struct nbd_tls_conn *t)
{
	(void)t;
	return false;
}

bool nbd_tls_in_pending(const struct nbd_tls_conn *t)
{
	(void)t;
	return false;
}
#endif
