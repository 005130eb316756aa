/* Fixed newstyle option haggling (spec: "Fixed newstyle negotiation").
 *
 * Invariant: after every option the stream is framed again, because the
 * option's whole data is read (or skipped) before the reply is written.
 * The only ways out are transmission (EXPORT_NAME, GO), ABORT, EOF, a bad
 * magic or unknown client flags (hard disconnect, as the spec allows), and
 * option data longer than NBD_OPT_MAX_SKIP (treated as denial of service).
 *
 * TLS: STARTTLS switches every later byte to the TLS session (tls.c) and
 * forgets what was negotiated before it; with --tls=require nothing but
 * STARTTLS and ABORT is answered before it (NBD_REP_ERR_TLS_REQD). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nbd/nbd.h"
#include "nbd/wire.h"

/* Option data we keep in memory: the largest valid option we parse is
 * INFO/GO with a 4096-byte name and a few info requests. Longer data is
 * skipped (and answered ERR_TOO_BIG or ERR_UNSUP) up to NBD_OPT_MAX_SKIP. */
#define NBD_OPT_MAX_DATA 8192u
#define NBD_OPT_MAX_SKIP (1u << 20)

static int rep(struct nbd_session *s, uint32_t opt, uint32_t type, const void *data, uint32_t len)
{
	unsigned char h[NBD_REP_HDR_LEN];
	nbd_put64(h, NBD_REP_MAGIC);
	nbd_put32(h + 8, opt);
	nbd_put32(h + 12, type);
	nbd_put32(h + 16, len);
	int r = nbd_swrite(s, h, sizeof(h));
	if (r == 0 && len > 0)
		r = nbd_swrite(s, data, len);
	return r;
}

static int rep_err(struct nbd_session *s, uint32_t opt, uint32_t type, const char *msg)
{
	return rep(s, opt, type, msg, (uint32_t)strlen(msg));
}

uint16_t nbd_export_flags(const struct nbd_export *e, bool structured)
{
	uint16_t f = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
		     NBD_FLAG_SEND_CACHE;
	/* CAN_MULTI_CONN: every connection to an export shares its one
	 * volume (so all see the same bytes), and FLUSH or FUA runs
	 * vc_volume_flush, which makes every write acknowledged on the
	 * volume durable, whichever connection made it: write-through
	 * writes reached the store before their reply and the flush syncs
	 * it; in write-back, a page with acknowledged data stays dirty
	 * until written, and the flush writes (or waits for) every dirty
	 * page of the volume before it syncs. test_nbd_proto checks it. */
	f |= NBD_FLAG_CAN_MULTI_CONN;
	if (e->readonly)
		f |= NBD_FLAG_READ_ONLY;
	else
		f |= NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_SEND_FAST_ZERO;
	if (structured)
		f |= NBD_FLAG_SEND_DF; /* a READ is always one content chunk */
	return f;
}

static const struct nbd_export *find_export(const struct nbd_server *srv, const char *name,
					    uint32_t len)
{
	if (len == 0 && srv->n_exports > 0)
		return &srv->exports[0];
	for (unsigned i = 0; i < srv->n_exports; i++) {
		const char *n = srv->exports[i].name;
		if (strlen(n) == len && memcmp(n, name, len) == 0)
			return &srv->exports[i];
	}
	return NULL;
}

static int send_info(struct nbd_session *s, uint32_t opt,
		     const struct nbd_export *e, bool want_name, bool want_desc)
{
	unsigned char b[14];
	nbd_put16(b, NBD_INFO_EXPORT);
	nbd_put64(b + 2, vc_volume_size(e->vol));
	nbd_put16(b + 10, nbd_export_flags(e, s->structured));
	int r = rep(s, opt, NBD_REP_INFO, b, 12);
	/* Sent whether asked or not: the values are the spec's defaults
	 * except the maximum, which only widens what a client may assume. */
	nbd_put16(b, NBD_INFO_BLOCK_SIZE);
	nbd_put32(b + 2, NBD_MIN_BLOCK);
	nbd_put32(b + 6, NBD_PREF_BLOCK);
	nbd_put32(b + 10, NBD_MAX_PAYLOAD);
	if (r == 0)
		r = rep(s, opt, NBD_REP_INFO, b, 14);
	for (int k = 0; k < 2 && r == 0; k++) {
		const char *str = k == 0 ? (want_name ? e->name : NULL)
					 : (want_desc ? e->description : NULL);
		if (!str)
			continue;
		size_t n = strnlen(str, NBD_MAX_STRING);
		unsigned char *p = malloc(2 + n);
		if (!p)
			return -ENOMEM;
		nbd_put16(p, k == 0 ? NBD_INFO_NAME : NBD_INFO_DESCRIPTION);
		memcpy(p + 2, str, n);
		r = rep(s, opt, NBD_REP_INFO, p, (uint32_t)(2 + n));
		free(p);
	}
	return r;
}

/* INFO and GO. Returns 1 when GO succeeded, 0 to keep haggling, -errno. */
static int opt_info_go(struct nbd_session *s, uint32_t opt, const unsigned char *d, uint32_t len)
{
	if (len < 6)
		return rep_err(s, opt, NBD_REP_ERR_INVALID, "option data too short");
	uint32_t nlen = nbd_get32(d);
	if (nlen > len - 6)
		return rep_err(s, opt, NBD_REP_ERR_INVALID, "export name overruns the option");
	uint16_t nreq = nbd_get16(d + 4 + nlen);
	if ((uint64_t)len != 6 + (uint64_t)nlen + 2ull * nreq)
		return rep_err(s, opt, NBD_REP_ERR_INVALID, "information request count mismatch");
	bool want_name = false, want_desc = false;
	for (uint16_t i = 0; i < nreq; i++) {
		uint16_t t = nbd_get16(d + 6 + nlen + 2u * i);
		want_name |= t == NBD_INFO_NAME;
		want_desc |= t == NBD_INFO_DESCRIPTION;
	}
	const struct nbd_export *e = find_export(s->srv, (const char *)d + 4, nlen);
	if (!e)
		return rep_err(s, opt, NBD_REP_ERR_UNKNOWN, "no such export");
	if (opt == NBD_OPT_GO && s->srv->admit && !s->srv->admit(s->srv->admit_ctx, s->fd))
		return rep_err(s, opt, NBD_REP_ERR_POLICY,
			       "the server is at its connection limit; try again later");
	int r = send_info(s, opt, e, want_name, want_desc);
	if (r == 0)
		r = rep(s, opt, NBD_REP_ACK, NULL, 0);
	if (r < 0)
		return r;
	if (opt != NBD_OPT_GO)
		return 0;
	s->exp = e;
	return 1;
}

/* LIST_META_CONTEXT and SET_META_CONTEXT: export name, then queries. We
 * serve one context, base:allocation; a query selects it if it names it
 * exactly (or, for LIST, is the namespace "base:"). Queries in other
 * namespaces are ignored (spec: MUST). Returns 0 or -errno. */
static int opt_meta(struct nbd_session *s, uint32_t opt, const unsigned char *d, uint32_t len)
{
	bool set = opt == NBD_OPT_SET_META_CONTEXT;
	if (set)
		s->meta_exp = NULL; /* replaced even if this one fails (spec) */
	if (set && !s->structured)
		return rep_err(s, opt, NBD_REP_ERR_INVALID, "structured replies come first");
	if (len < 8 || nbd_get32(d) > len - 8)
		return rep_err(s, opt, NBD_REP_ERR_INVALID, "export name overruns the option");
	uint32_t nlen = nbd_get32(d), nq = nbd_get32(d + 4 + nlen);
	const struct nbd_export *e = find_export(s->srv, (const char *)d + 4, nlen);
	bool match = nq == 0 && !set; /* LIST of nothing: everything */
	uint32_t pos = 8 + nlen;
	for (uint32_t i = 0; i < nq; i++) {
		if (len - pos < 4 || nbd_get32(d + pos) > len - pos - 4)
			return rep_err(s, opt, NBD_REP_ERR_INVALID, "query overruns the option");
		uint32_t ql = nbd_get32(d + pos);
		const char *q = (const char *)d + pos + 4;
		size_t al = strlen(NBD_CTX_ALLOCATION);
		if ((ql == al && memcmp(q, NBD_CTX_ALLOCATION, al) == 0) ||
		    (!set && ql == 5 && memcmp(q, "base:", 5) == 0))
			match = true;
		pos += 4 + ql;
	}
	if (pos != len)
		return rep_err(s, opt, NBD_REP_ERR_INVALID, "option longer than its queries");
	if (!e)
		return rep_err(s, opt, NBD_REP_ERR_UNKNOWN, "no such export");
	int r = 0;
	if (match) {
		unsigned char b[4 + sizeof(NBD_CTX_ALLOCATION)];
		nbd_put32(b, set ? NBD_CTX_ALLOCATION_ID : 0); /* LIST: reserved, zero */
		memcpy(b + 4, NBD_CTX_ALLOCATION, sizeof(NBD_CTX_ALLOCATION) - 1);
		r = rep(s, opt, NBD_REP_META_CONTEXT, b, sizeof(b) - 1);
		if (set)
			s->meta_exp = e;
	}
	return r ? r : rep(s, opt, NBD_REP_ACK, NULL, 0);
}

static int opt_list(struct nbd_session *s, uint32_t opt, uint32_t len)
{
	if (len != 0)
		return rep_err(s, opt, NBD_REP_ERR_INVALID, "NBD_OPT_LIST takes no data");
	for (unsigned i = 0; i < s->srv->n_exports; i++) {
		const struct nbd_export *e = &s->srv->exports[i];
		size_t n = strnlen(e->name, NBD_MAX_STRING);
		size_t dn = e->description ? strnlen(e->description, NBD_MAX_STRING) : 0;
		unsigned char *p = malloc(4 + n + dn);
		if (!p)
			return -ENOMEM;
		nbd_put32(p, (uint32_t)n);
		memcpy(p + 4, e->name, n);
		if (dn)
			memcpy(p + 4 + n, e->description, dn);
		int r = rep(s, opt, NBD_REP_SERVER, p, (uint32_t)(4 + n + dn));
		free(p);
		if (r < 0)
			return r;
	}
	return rep(s, opt, NBD_REP_ACK, NULL, 0);
}

/* The old way in: no errors can be returned, so an unknown name ends the
 * session (spec). 1 or -errno. */
static int opt_export_name(struct nbd_session *s, const unsigned char *d, uint32_t len)
{
	const struct nbd_export *e = find_export(s->srv, (const char *)d, len);
	if (!e)
		return -ENOENT;
	if (s->srv->admit && !s->srv->admit(s->srv->admit_ctx, s->fd))
		return -EBUSY; /* no way to say why: hang up */
	unsigned char b[8 + 2 + 124] = { 0 };
	nbd_put64(b, vc_volume_size(e->vol));
	nbd_put16(b + 8, nbd_export_flags(e, s->structured));
	int r = nbd_swrite(s, b, s->no_zeroes ? 10 : sizeof(b));
	if (r < 0)
		return r;
	s->exp = e;
	return 1;
}

/* STARTTLS: ACK, then the TLS handshake; what was negotiated before it is
 * forgotten (spec). 0, or -errno (the session ends: after the ACK there
 * is no way back to plaintext). */
static int opt_starttls(struct nbd_session *s, uint32_t len)
{
	if (s->srv->tls_mode == NBD_TLS_OFF || !s->srv->tls)
		return rep_err(s, NBD_OPT_STARTTLS, NBD_REP_ERR_POLICY, "TLS is off on this server");
	if (s->tls)
		return rep_err(s, NBD_OPT_STARTTLS, NBD_REP_ERR_INVALID, "TLS is already on");
	if (len != 0)
		return rep_err(s, NBD_OPT_STARTTLS, NBD_REP_ERR_INVALID, "option takes no data");
	int r = rep(s, NBD_OPT_STARTTLS, NBD_REP_ACK, NULL, 0);
	if (r == 0)
		r = nbd_tls_start(s);
	s->structured = false;
	s->meta_exp = NULL;
	return r;
}

int nbd_handshake(struct nbd_session *s)
{
	int fd = s->fd;
	bool forced = s->srv->tls_mode == NBD_TLS_REQUIRE;
	unsigned char h[18];
	nbd_put64(h, NBD_MAGIC);
	nbd_put64(h + 8, NBD_OPTS_MAGIC);
	nbd_put16(h + 16, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	int r = nbd_write_full(fd, h, 18);
	if (r < 0)
		return r;
	unsigned char cf[4];
	if ((r = nbd_read_full(fd, cf, 4)) < 0)
		return r == -ECONNRESET ? 0 : r;
	uint32_t cflags = nbd_get32(cf);
	if (cflags & ~(uint32_t)(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES))
		return -EPROTO; /* spec: MUST drop the connection */
	s->no_zeroes = cflags & NBD_FLAG_C_NO_ZEROES;
	s->structured = false;

	unsigned char *data = malloc(NBD_OPT_MAX_DATA);
	if (!data)
		return -ENOMEM;
	for (;;) {
		unsigned char oh[NBD_OPT_HDR_LEN];
		r = nbd_sread(s, oh, sizeof(oh));
		if (r < 0) {
			r = r == -ECONNRESET ? 0 : r;
			break;
		}
		if (nbd_get64(oh) != NBD_OPTS_MAGIC) {
			r = -EPROTO;
			break;
		}
		uint32_t opt = nbd_get32(oh + 8), len = nbd_get32(oh + 12);
		if (len > NBD_OPT_MAX_SKIP) {
			r = -EPROTO;
			break;
		}
		bool kept = len <= NBD_OPT_MAX_DATA;
		r = kept ? nbd_sread(s, data, len) : nbd_sskip(s, len);
		if (r < 0)
			break;
		bool known = opt == NBD_OPT_EXPORT_NAME || opt == NBD_OPT_ABORT ||
			     opt == NBD_OPT_LIST || opt == NBD_OPT_INFO || opt == NBD_OPT_GO ||
			     opt == NBD_OPT_STRUCTURED_REPLY || opt == NBD_OPT_LIST_META_CONTEXT ||
			     opt == NBD_OPT_SET_META_CONTEXT || opt == NBD_OPT_STARTTLS;
		if (forced && !s->tls && opt != NBD_OPT_STARTTLS && opt != NBD_OPT_ABORT) {
			/* FORCEDTLS: EXPORT_NAME cannot be refused, so it ends the
			 * session; everything else, known or not, is refused. */
			if (opt == NBD_OPT_EXPORT_NAME) {
				r = -EACCES;
				break;
			}
			r = rep_err(s, opt, NBD_REP_ERR_TLS_REQD,
				    "TLS is required: send NBD_OPT_STARTTLS first");
		} else if (!known) {
			r = rep_err(s, opt, NBD_REP_ERR_UNSUP, "option not supported");
		} else if (!kept) {
			if (opt == NBD_OPT_EXPORT_NAME) {
				r = -EPROTO;
				break;
			}
			r = rep_err(s, opt, NBD_REP_ERR_TOO_BIG, "option data too long");
		} else if (opt == NBD_OPT_EXPORT_NAME) {
			r = opt_export_name(s, data, len);
		} else if (opt == NBD_OPT_STARTTLS) {
			r = opt_starttls(s, len);
		} else if (opt == NBD_OPT_ABORT) {
			rep(s, opt, NBD_REP_ACK, NULL, 0); /* the client may be gone already */
			r = 0;
			break;
		} else if (opt == NBD_OPT_LIST) {
			r = opt_list(s, opt, len);
		} else if (opt == NBD_OPT_LIST_META_CONTEXT || opt == NBD_OPT_SET_META_CONTEXT) {
			r = opt_meta(s, opt, data, len);
		} else if (opt == NBD_OPT_STRUCTURED_REPLY) {
			if (len != 0) {
				r = rep_err(s, opt, NBD_REP_ERR_INVALID, "option takes no data");
			} else {
				s->structured = true;
				r = rep(s, opt, NBD_REP_ACK, NULL, 0);
			}
		} else {
			r = opt_info_go(s, opt, data, len);
		}
		if (r != 0)
			break;
	}
	free(data);
	if (r == 1) {
		s->size = vc_volume_size(s->exp->vol);
		s->tflags = nbd_export_flags(s->exp, s->structured);
		s->meta_alloc = s->structured && s->meta_exp == s->exp;
	}
	return r;
}
