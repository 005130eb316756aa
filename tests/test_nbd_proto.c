/* The NBD protocol core over a socketpair, with a raw client: no listening
 * socket and no libnbd, so it can send what real clients never do. Checks
 * the handshake (bad magic, unknown client flags, unknown option answered
 * ERR_UNSUP and the handshake going on, LIST, INFO, EXPORT_NAME with
 * NO_ZEROES), request validation (oversized lengths, offsets past the end
 * and overflowing, read-only exports, unknown commands and flags, each
 * answered and the connection surviving), structured replies, many
 * requests in flight answered once each by cookie, DISC, a bad request
 * magic, and a client that vanishes in the middle of a write payload.
 * Metadata contexts and BLOCK_STATUS on a sparse export, exports on
 * different volumes not aliasing, and CAN_MULTI_CONN: a FLUSH on one
 * connection makes another connection's acknowledged write-back writes
 * durable. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>

#include "nbd/nbd.h"
#include "nbd/wire.h"
#include "testutil.h"

static const uint64_t SIZE = 1 << 20;
static vc_cache *cache;
static struct nbd_export exports[3];
static struct nbd_counters counters[3];
static struct nbd_server srv = { .exports = exports, .n_exports = 3, .workers = 3 };
static const struct nbd_server *cur = &srv; /* what start() serves */

struct session {
	int cfd, sfd;
	pthread_t t;
	int rc;
};

static void *server_main(void *p)
{
	struct session *s = p;
	s->rc = nbd_conn_run(s->sfd, cur);
	shutdown(s->sfd, SHUT_RDWR); /* as the caller's close would: the client sees EOF */
	return NULL;
}

static void start(struct session *s)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	s->cfd = sv[1];
	s->sfd = sv[0];
	CHECK(pthread_create(&s->t, NULL, server_main, s) == 0);
}

static int finish(struct session *s)
{
	close(s->cfd);
	pthread_join(s->t, NULL);
	close(s->sfd);
	return s->rc;
}

static void rd(struct session *s, void *b, size_t n)
{
	CHECK(nbd_read_full(s->cfd, b, n) == 0);
}

static void wr(struct session *s, const void *b, size_t n)
{
	CHECK(nbd_write_full(s->cfd, b, n) == 0);
}

/* The server's greeting, then our flags. */
static void greet(struct session *s, uint32_t cflags)
{
	unsigned char g[18];
	rd(s, g, 18);
	CHECK(nbd_get64(g) == NBD_MAGIC);
	CHECK(nbd_get64(g + 8) == NBD_OPTS_MAGIC);
	CHECK(nbd_get16(g + 16) == (NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES));
	unsigned char f[4];
	nbd_put32(f, cflags);
	wr(s, f, 4);
}

static void send_opt(struct session *s, uint64_t magic, uint32_t opt, const void *d, uint32_t len)
{
	unsigned char h[16];
	nbd_put64(h, magic);
	nbd_put32(h + 8, opt);
	nbd_put32(h + 12, len);
	wr(s, h, 16);
	if (len)
		wr(s, d, len);
}

/* One option reply; returns its type, data in buf (at most cap bytes). */
static uint32_t read_rep(struct session *s, uint32_t opt, unsigned char *buf, uint32_t cap,
			 uint32_t *len)
{
	unsigned char h[20];
	rd(s, h, 20);
	CHECK(nbd_get64(h) == NBD_REP_MAGIC);
	CHECK(nbd_get32(h + 8) == opt);
	*len = nbd_get32(h + 16);
	CHECK(*len <= cap);
	rd(s, buf, *len);
	return nbd_get32(h + 12);
}

/* INFO or GO on `name`: returns the final reply type; *flags from INFO_EXPORT. */
static uint32_t info_go(struct session *s, uint32_t opt, const char *name, uint16_t *flags)
{
	unsigned char d[64];
	uint32_t n = (uint32_t)strlen(name);
	nbd_put32(d, n);
	memcpy(d + 4, name, n);
	nbd_put16(d + 4 + n, 1);
	nbd_put16(d + 6 + n, NBD_INFO_BLOCK_SIZE);
	send_opt(s, NBD_OPTS_MAGIC, opt, d, 8 + n);
	bool saw_export = false, saw_bs = false;
	for (;;) {
		unsigned char b[256];
		uint32_t len, t = read_rep(s, opt, b, sizeof(b), &len);
		if (t != NBD_REP_INFO) {
			if (t == NBD_REP_ACK)
				CHECK(saw_export && saw_bs);
			return t;
		}
		if (nbd_get16(b) == NBD_INFO_EXPORT) {
			CHECK(len == 12 && nbd_get64(b + 2) == SIZE);
			*flags = nbd_get16(b + 10);
			saw_export = true;
		} else if (nbd_get16(b) == NBD_INFO_BLOCK_SIZE) {
			CHECK(len == 14 && nbd_get32(b + 2) == 1 && nbd_get32(b + 6) == 4096 &&
			      nbd_get32(b + 10) == NBD_MAX_PAYLOAD);
			saw_bs = true;
		}
	}
}

static void structured_on(struct session *s)
{
	send_opt(s, NBD_OPTS_MAGIC, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
	uint32_t len;
	unsigned char b[64];
	CHECK(read_rep(s, NBD_OPT_STRUCTURED_REPLY, b, sizeof(b), &len) == NBD_REP_ACK);
}

static void go(struct session *s, const char *name, bool structured)
{
	greet(s, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	if (structured)
		structured_on(s);
	uint16_t fl;
	CHECK(info_go(s, NBD_OPT_GO, name, &fl) == NBD_REP_ACK);
}

static void request(struct session *s, uint16_t flags, uint16_t type, uint64_t cookie,
		    uint64_t off, uint32_t len, const void *payload)
{
	unsigned char h[NBD_REQUEST_LEN];
	nbd_put32(h, NBD_REQUEST_MAGIC);
	nbd_put16(h + 4, flags);
	nbd_put16(h + 6, type);
	nbd_put64(h + 8, cookie);
	nbd_put64(h + 16, off);
	nbd_put32(h + 24, len);
	wr(s, h, sizeof(h));
	if (payload)
		wr(s, payload, len);
}

/* A simple reply's error; *cookie set. */
static uint32_t simple_reply(struct session *s, uint64_t *cookie)
{
	unsigned char h[16];
	rd(s, h, 16);
	CHECK(nbd_get32(h) == NBD_SIMPLE_REPLY_MAGIC);
	*cookie = nbd_get64(h + 8);
	return nbd_get32(h + 4);
}

static uint32_t expect(struct session *s, uint64_t cookie)
{
	uint64_t c;
	uint32_t e = simple_reply(s, &c);
	CHECK(c == cookie);
	return e;
}

static void test_bad_option_magic(void)
{
	struct session s;
	start(&s);
	greet(&s, NBD_FLAG_C_FIXED_NEWSTYLE);
	send_opt(&s, 0x1122334455667788ull, NBD_OPT_LIST, NULL, 0);
	unsigned char b;
	CHECK(read(s.cfd, &b, 1) == 0); /* hung up, nothing sent */
	CHECK(finish(&s) == -EPROTO);
}

static void test_bad_client_flags(void)
{
	struct session s;
	start(&s);
	greet(&s, NBD_FLAG_C_FIXED_NEWSTYLE | (1u << 7));
	CHECK(finish(&s) == -EPROTO);
}

static void test_unknown_option_then_go(void)
{
	struct session s;
	start(&s);
	greet(&s, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	unsigned char junk[300], b[256];
	memset(junk, 0xab, sizeof(junk));
	uint32_t len;
	send_opt(&s, NBD_OPTS_MAGIC, 0x4242, junk, sizeof(junk));
	CHECK(read_rep(&s, 0x4242, b, sizeof(b), &len) == NBD_REP_ERR_UNSUP);
	/* TLS off: STARTTLS is refused (spec, NOTLS mode) and haggling goes on. */
	send_opt(&s, NBD_OPTS_MAGIC, NBD_OPT_STARTTLS, NULL, 0);
	CHECK(read_rep(&s, NBD_OPT_STARTTLS, b, sizeof(b), &len) == NBD_REP_ERR_POLICY);
	/* Data longer than we keep is skipped, and the stream stays framed. */
	static unsigned char big[20000];
	send_opt(&s, NBD_OPTS_MAGIC, NBD_OPT_GO, big, sizeof(big));
	CHECK(read_rep(&s, NBD_OPT_GO, b, sizeof(b), &len) == NBD_REP_ERR_TOO_BIG);
	/* LIST: both exports, then ACK. */
	send_opt(&s, NBD_OPTS_MAGIC, NBD_OPT_LIST, NULL, 0);
	int servers = 0;
	uint32_t t;
	while ((t = read_rep(&s, NBD_OPT_LIST, b, sizeof(b), &len)) == NBD_REP_SERVER)
		servers++;
	CHECK(t == NBD_REP_ACK && servers == 3);
	send_opt(&s, NBD_OPTS_MAGIC, NBD_OPT_LIST, "x", 1);
	CHECK(read_rep(&s, NBD_OPT_LIST, b, sizeof(b), &len) == NBD_REP_ERR_INVALID);
	/* A malformed GO: the name overruns the data. */
	unsigned char bad[8];
	nbd_put32(bad, 1000);
	send_opt(&s, NBD_OPTS_MAGIC, NBD_OPT_INFO, bad, sizeof(bad));
	CHECK(read_rep(&s, NBD_OPT_INFO, b, sizeof(b), &len) == NBD_REP_ERR_INVALID);
	uint16_t fl;
	CHECK(info_go(&s, NBD_OPT_INFO, "nope", &fl) == NBD_REP_ERR_UNKNOWN);
	CHECK(info_go(&s, NBD_OPT_INFO, "ro", &fl) == NBD_REP_ACK);
	CHECK(fl & NBD_FLAG_READ_ONLY);
	CHECK(info_go(&s, NBD_OPT_GO, "", &fl) == NBD_REP_ACK);
	CHECK(!(fl & NBD_FLAG_READ_ONLY) && (fl & NBD_FLAG_CAN_MULTI_CONN));
	unsigned char page[4096];
	request(&s, 0, NBD_CMD_READ, 7, 4096, 4096, NULL);
	CHECK(expect(&s, 7) == 0);
	rd(&s, page, sizeof(page));
	request(&s, 0, NBD_CMD_DISC, 8, 0, 0, NULL);
	CHECK(finish(&s) == 0);
}

/* FORCEDTLS (--tls=require) before STARTTLS: every option but STARTTLS
 * and ABORT, known or not, INFO and GO included, gets ERR_TLS_REQD and
 * the stream stays framed; EXPORT_NAME, which cannot be refused, ends the
 * session; ABORT is acknowledged. (The TLS handshake itself is
 * nbd_tls.sh's, with real clients.) */
static void test_tls_required(void)
{
	struct nbd_server forced = srv;
	forced.tls_mode = NBD_TLS_REQUIRE;
	cur = &forced;
	struct session s;
	start(&s);
	greet(&s, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	unsigned char b[256], junk[40] = { 0 };
	uint32_t len;
	static const uint32_t opts[] = { NBD_OPT_LIST, NBD_OPT_STRUCTURED_REPLY, 0x4242,
					 NBD_OPT_LIST_META_CONTEXT };
	for (unsigned i = 0; i < sizeof opts / sizeof opts[0]; i++) {
		send_opt(&s, NBD_OPTS_MAGIC, opts[i], junk, i == 2 ? sizeof junk : 0);
		CHECK(read_rep(&s, opts[i], b, sizeof(b), &len) == NBD_REP_ERR_TLS_REQD);
	}
	uint16_t fl;
	CHECK(info_go(&s, NBD_OPT_INFO, "", &fl) == NBD_REP_ERR_TLS_REQD);
	CHECK(info_go(&s, NBD_OPT_GO, "rw", &fl) == NBD_REP_ERR_TLS_REQD);
	send_opt(&s, NBD_OPTS_MAGIC, NBD_OPT_ABORT, NULL, 0);
	CHECK(read_rep(&s, NBD_OPT_ABORT, b, sizeof(b), &len) == NBD_REP_ACK);
	CHECK(finish(&s) == 0);

	start(&s);
	greet(&s, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	send_opt(&s, NBD_OPTS_MAGIC, NBD_OPT_EXPORT_NAME, "rw", 2);
	CHECK(read(s.cfd, b, 1) == 0); /* hung up, no export data sent */
	CHECK(finish(&s) == -EACCES);
	cur = &srv;
}

static void test_export_name(void)
{
	struct session s;
	start(&s);
	greet(&s, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	send_opt(&s, NBD_OPTS_MAGIC, NBD_OPT_EXPORT_NAME, "ro", 2);
	unsigned char b[10];
	rd(&s, b, 10); /* no 124 zeroes: NO_ZEROES */
	CHECK(nbd_get64(b) == SIZE && (nbd_get16(b + 8) & NBD_FLAG_READ_ONLY));
	unsigned char one = 1;
	request(&s, 0, NBD_CMD_WRITE, 1, 0, 1, &one);
	CHECK(expect(&s, 1) == NBD_EPERM);
	request(&s, 0, NBD_CMD_TRIM, 2, 0, 4096, NULL);
	CHECK(expect(&s, 2) == NBD_EPERM);
	request(&s, 0, NBD_CMD_WRITE_ZEROES, 3, 0, 4096, NULL);
	CHECK(expect(&s, 3) == NBD_EPERM);
	request(&s, 0, NBD_CMD_FLUSH, 4, 0, 0, NULL);
	CHECK(expect(&s, 4) == 0);
	CHECK(finish(&s) == 0);

	start(&s); /* an unknown name ends the session: no way to say why */
	greet(&s, NBD_FLAG_C_FIXED_NEWSTYLE);
	send_opt(&s, NBD_OPTS_MAGIC, NBD_OPT_EXPORT_NAME, "nope", 4);
	CHECK(read(s.cfd, b, 1) == 0);
	CHECK(finish(&s) == -ENOENT);
}

static void test_bad_requests(void)
{
	struct session s;
	start(&s);
	go(&s, "", false);
	request(&s, 0, NBD_CMD_READ, 1, 0, NBD_MAX_PAYLOAD + 1, NULL);
	CHECK(expect(&s, 1) == NBD_EINVAL);
	request(&s, 0, NBD_CMD_READ, 2, SIZE - 10, 20, NULL);
	CHECK(expect(&s, 2) == NBD_EINVAL);
	request(&s, 0, NBD_CMD_READ, 3, UINT64_MAX - 100, 4096, NULL);
	CHECK(expect(&s, 3) == NBD_EINVAL);
	request(&s, 0, NBD_CMD_READ, 4, SIZE + 1, 0, NULL);
	CHECK(expect(&s, 4) == NBD_EINVAL);
	/* Oversized and out-of-range writes: the payload is consumed, the
	 * error sent, and the next request is framed correctly. */
	unsigned char *big = calloc(1, NBD_MAX_PAYLOAD + 1);
	CHECK(big);
	request(&s, 0, NBD_CMD_WRITE, 5, 0, NBD_MAX_PAYLOAD + 1, big);
	CHECK(expect(&s, 5) == NBD_EINVAL);
	request(&s, 0, NBD_CMD_WRITE, 6, SIZE - 100, 4096, big);
	CHECK(expect(&s, 6) == NBD_ENOSPC);
	free(big);
	request(&s, 0, NBD_CMD_WRITE_ZEROES, 7, SIZE, 1, NULL);
	CHECK(expect(&s, 7) == NBD_ENOSPC);
	request(&s, 0, NBD_CMD_TRIM, 8, SIZE, 4096, NULL);
	CHECK(expect(&s, 8) == NBD_EINVAL);
	request(&s, 0, NBD_CMD_CACHE, 9, SIZE - 1, 2, NULL);
	CHECK(expect(&s, 9) == NBD_EINVAL);
	request(&s, 0, 42, 10, 0, 0, NULL);
	CHECK(expect(&s, 10) == NBD_EINVAL);
	request(&s, NBD_CMD_FLAG_NO_HOLE, NBD_CMD_READ, 11, 0, 16, NULL);
	CHECK(expect(&s, 11) == NBD_EINVAL);
	request(&s, NBD_CMD_FLAG_DF, NBD_CMD_READ, 12, 0, 16, NULL); /* DF needs structured */
	CHECK(expect(&s, 12) == NBD_EINVAL);
	request(&s, NBD_CMD_FLAG_FAST_ZERO, NBD_CMD_WRITE_ZEROES, 13, 0, 4096, NULL);
	CHECK(expect(&s, 13) == NBD_ENOTSUP);
	/* Still in step: a good write and read back. */
	unsigned char w[100], r[100];
	memset(w, 0x5a, sizeof(w));
	request(&s, NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, 14, SIZE - 100, 100, w);
	CHECK(expect(&s, 14) == 0);
	request(&s, 0, NBD_CMD_READ, 15, SIZE - 100, 100, NULL);
	CHECK(expect(&s, 15) == 0);
	rd(&s, r, 100);
	CHECK(memcmp(w, r, 100) == 0);
	/* A bad magic ends the session. */
	unsigned char junk[NBD_REQUEST_LEN] = { 1, 2, 3, 4 };
	wr(&s, junk, sizeof(junk));
	CHECK(read(s.cfd, r, 1) == 0);
	CHECK(finish(&s) == -EPROTO);
}

static void test_structured(void)
{
	struct session s;
	start(&s);
	go(&s, "", true);
	unsigned char w[5000], h[32];
	for (size_t i = 0; i < sizeof(w); i++)
		w[i] = (unsigned char)(i * 7);
	request(&s, 0, NBD_CMD_WRITE, 1, 1234, sizeof(w), w);
	CHECK(expect(&s, 1) == 0);
	request(&s, NBD_CMD_FLAG_DF, NBD_CMD_READ, 2, 1234, sizeof(w), NULL);
	rd(&s, h, 28);
	CHECK(nbd_get32(h) == NBD_STRUCTURED_REPLY_MAGIC && nbd_get16(h + 4) == NBD_REPLY_FLAG_DONE);
	CHECK(nbd_get16(h + 6) == NBD_REPLY_TYPE_OFFSET_DATA && nbd_get64(h + 8) == 2);
	CHECK(nbd_get32(h + 16) == 8 + sizeof(w) && nbd_get64(h + 20) == 1234);
	unsigned char r[5000];
	rd(&s, r, sizeof(r));
	CHECK(memcmp(w, r, sizeof(w)) == 0);
	/* Too large a READ: EOVERFLOW only with DF (spec: "SHOULD NOT return
	 * NBD_EOVERFLOW except ... when NBD_CMD_FLAG_DF is supported"), else
	 * EINVAL, the usual answer. */
	for (uint64_t df = 0; df < 2; df++) {
		request(&s, df ? NBD_CMD_FLAG_DF : 0, NBD_CMD_READ, 3 + df, 0, NBD_MAX_PAYLOAD + 1,
			NULL);
		rd(&s, h, 26);
		CHECK(nbd_get32(h) == NBD_STRUCTURED_REPLY_MAGIC &&
		      nbd_get16(h + 6) == NBD_REPLY_TYPE_ERROR);
		CHECK(nbd_get64(h + 8) == 3 + df &&
		      nbd_get32(h + 20) == (df ? NBD_EOVERFLOW : NBD_EINVAL));
		uint32_t ml = nbd_get16(h + 24);
		CHECK(nbd_get32(h + 16) == 6 + ml && ml < sizeof(r));
		rd(&s, r, ml);
	}
	request(&s, 0, NBD_CMD_DISC, 5, 0, 0, NULL);
	CHECK(finish(&s) == 0);
}

/* A successful simple reply with a cookie in [base, base + n) not seen
 * before; returns its index. */
static int reply_once(struct session *s, uint64_t base, int n, bool *seen)
{
	uint64_t c;
	CHECK(simple_reply(s, &c) == 0);
	CHECK(c >= base && c < base + (uint64_t)n && !seen[c - base]);
	seen[c - base] = true;
	return (int)(c - base);
}

/* 256 requests sent without waiting: every cookie answered exactly once,
 * every read sees the write that was acknowledged before it was sent. */
static void test_in_flight(void)
{
	struct session s;
	start(&s);
	go(&s, "", false);
	enum { N = 256, LEN = 3000 };
	static unsigned char pat[N][LEN];
	for (int i = 0; i < N; i++) {
		memset(pat[i], i, LEN);
		request(&s, 0, NBD_CMD_WRITE, 1000 + i, (uint64_t)i * LEN, LEN, pat[i]);
	}
	static bool seen[2 * N];
	for (int i = 0; i < N; i++)
		reply_once(&s, 1000, N, seen);
	/* Reads have payloads: the cookie says how to parse what follows.
	 * The requests are small enough to all fit in the socket buffer, so
	 * sending them all before reading cannot deadlock. */
	for (int i = 0; i < N; i++)
		request(&s, i % 2 ? NBD_CMD_FLAG_FUA : 0, i % 3 ? NBD_CMD_READ : NBD_CMD_CACHE,
			5000 + i, (uint64_t)i * LEN, LEN, NULL);
	for (int i = 0; i < N; i++) {
		int k = reply_once(&s, 5000, N, seen + N);
		if (k % 3) {
			unsigned char r[LEN];
			rd(&s, r, LEN);
			CHECK(memcmp(r, pat[k], LEN) == 0);
		}
	}
	request(&s, 0, NBD_CMD_DISC, 1, 0, 0, NULL);
	CHECK(finish(&s) == 0);
}

static void test_vanish(void)
{
	struct session s;
	start(&s);
	go(&s, "", false);
	unsigned char part[100] = { 0 };
	unsigned char h[NBD_REQUEST_LEN];
	nbd_put32(h, NBD_REQUEST_MAGIC);
	nbd_put16(h + 4, 0);
	nbd_put16(h + 6, NBD_CMD_WRITE);
	nbd_put64(h + 8, 1);
	nbd_put64(h + 16, 0);
	nbd_put32(h + 24, 65536);
	wr(&s, h, sizeof(h));
	wr(&s, part, sizeof(part)); /* and gone */
	CHECK(finish(&s) == 0);

	start(&s); /* gone in the middle of a header, during the handshake */
	greet(&s, NBD_FLAG_C_FIXED_NEWSTYLE);
	wr(&s, h, 5);
	CHECK(finish(&s) == 0);
}

/* A META_CONTEXT option: export name, then queries. */
static void send_meta(struct session *s, uint32_t opt, const char *name, int nq,
		      const char *const *q)
{
	unsigned char d[512];
	uint32_t n = (uint32_t)strlen(name), pos = 0;
	nbd_put32(d, n);
	memcpy(d + 4, name, n);
	nbd_put32(d + 4 + n, (uint32_t)nq);
	pos = 8 + n;
	for (int i = 0; i < nq; i++) {
		uint32_t ql = (uint32_t)strlen(q[i]);
		nbd_put32(d + pos, ql);
		memcpy(d + pos + 4, q[i], ql);
		pos += 4 + ql;
	}
	send_opt(s, NBD_OPTS_MAGIC, opt, d, pos);
}

/* Reads META_CONTEXT replies until the final one: returns its type; *ids
 * counts base:allocation replies, *id the last one's id. */
static uint32_t meta_replies(struct session *s, uint32_t opt, int *ids, uint32_t *id)
{
	unsigned char b[256];
	uint32_t len, t;
	*ids = 0;
	while ((t = read_rep(s, opt, b, sizeof(b), &len)) == NBD_REP_META_CONTEXT) {
		CHECK(len == 4 + strlen(NBD_CTX_ALLOCATION));
		CHECK(memcmp(b + 4, NBD_CTX_ALLOCATION, len - 4) == 0);
		*id = nbd_get32(b);
		(*ids)++;
	}
	return t;
}

/* A BLOCK_STATUS reply: returns the error (0: *n descriptors in d). */
static uint32_t block_status(struct session *s, uint16_t flags, uint64_t cookie, uint64_t off,
			     uint32_t len, uint32_t *d, uint32_t *n)
{
	request(s, flags, NBD_CMD_BLOCK_STATUS, cookie, off, len, NULL);
	unsigned char h[20], b[8200];
	rd(s, h, 20);
	CHECK(nbd_get32(h) == NBD_STRUCTURED_REPLY_MAGIC && nbd_get64(h + 8) == cookie);
	CHECK(nbd_get16(h + 4) == NBD_REPLY_FLAG_DONE);
	uint32_t l = nbd_get32(h + 16);
	CHECK(l <= sizeof(b));
	rd(s, b, l);
	if (nbd_get16(h + 6) == NBD_REPLY_TYPE_ERROR)
		return nbd_get32(b);
	CHECK(nbd_get16(h + 6) == NBD_REPLY_TYPE_BLOCK_STATUS);
	CHECK(l >= 12 && (l - 4) % 8 == 0 && nbd_get32(b) == NBD_CTX_ALLOCATION_ID);
	*n = (l - 4) / 8;
	for (uint32_t i = 0; i < 2 * *n; i++)
		d[i] = nbd_get32(b + 4 + 4 * i);
	return 0;
}

static void test_meta_context(void)
{
	const char *alloc[] = { NBD_CTX_ALLOCATION, "x-other:thing" };
	const char *base[] = { "base:" };
	const char *other[] = { "x-other:thing" };
	int ids;
	uint32_t id, len;
	unsigned char b[64];
	struct session s;
	start(&s);
	greet(&s, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	/* LIST works before structured replies; of nothing, or of "base:". */
	send_meta(&s, NBD_OPT_LIST_META_CONTEXT, "sparse", 0, NULL);
	CHECK(meta_replies(&s, NBD_OPT_LIST_META_CONTEXT, &ids, &id) == NBD_REP_ACK);
	CHECK(ids == 1 && id == 0);
	send_meta(&s, NBD_OPT_LIST_META_CONTEXT, "sparse", 1, base);
	CHECK(meta_replies(&s, NBD_OPT_LIST_META_CONTEXT, &ids, &id) == NBD_REP_ACK && ids == 1);
	send_meta(&s, NBD_OPT_LIST_META_CONTEXT, "sparse", 1, other);
	CHECK(meta_replies(&s, NBD_OPT_LIST_META_CONTEXT, &ids, &id) == NBD_REP_ACK && ids == 0);
	/* SET needs structured replies first. */
	send_meta(&s, NBD_OPT_SET_META_CONTEXT, "sparse", 2, alloc);
	CHECK(meta_replies(&s, NBD_OPT_SET_META_CONTEXT, &ids, &id) == NBD_REP_ERR_INVALID);
	structured_on(&s);
	send_meta(&s, NBD_OPT_SET_META_CONTEXT, "nope", 2, alloc);
	CHECK(meta_replies(&s, NBD_OPT_SET_META_CONTEXT, &ids, &id) == NBD_REP_ERR_UNKNOWN);
	/* Malformed: a query longer than the option. */
	unsigned char bad[16];
	nbd_put32(bad, 0);
	nbd_put32(bad + 4, 1);
	nbd_put32(bad + 8, 100);
	send_opt(&s, NBD_OPTS_MAGIC, NBD_OPT_SET_META_CONTEXT, bad, 12);
	CHECK(read_rep(&s, NBD_OPT_SET_META_CONTEXT, b, sizeof(b), &len) == NBD_REP_ERR_INVALID);
	send_meta(&s, NBD_OPT_SET_META_CONTEXT, "sparse", 2, alloc);
	CHECK(meta_replies(&s, NBD_OPT_SET_META_CONTEXT, &ids, &id) == NBD_REP_ACK);
	CHECK(ids == 1 && id == NBD_CTX_ALLOCATION_ID);
	uint16_t fl;
	CHECK(info_go(&s, NBD_OPT_GO, "sparse", &fl) == NBD_REP_ACK);

	/* The store has data only in [64K, 68K) (or cannot say: all data). */
	uint32_t d[2 * NBD_MAX_EXTENTS], n;
	CHECK(block_status(&s, 0, 1, 0, 128 << 10, d, &n) == 0);
	bool holes = n > 1;
	if (holes) {
		CHECK(n == 3);
		CHECK(d[0] == 64 << 10 && d[1] == (NBD_STATE_HOLE | NBD_STATE_ZERO));
		CHECK(d[2] == 4096 && d[3] == 0);
		CHECK(d[4] == 60 << 10 && d[5] == (NBD_STATE_HOLE | NBD_STATE_ZERO));
	} else {
		CHECK(d[0] == 128 << 10 && d[1] == 0);
	}
	CHECK(block_status(&s, NBD_CMD_FLAG_REQ_ONE, 2, 1000, 200 << 10, d, &n) == 0);
	CHECK(n == 1 && d[0] == (holes ? (64u << 10) - 1000 : 200u << 10));
	/* A write into a hole makes it data before any flush. */
	unsigned char w[4096];
	memset(w, 0xcd, sizeof(w));
	request(&s, 0, NBD_CMD_WRITE, 3, 8192, sizeof(w), w);
	CHECK(expect(&s, 3) == 0);
	CHECK(block_status(&s, 0, 4, 8192, 4096, d, &n) == 0);
	CHECK(n == 1 && d[0] == 4096 && d[1] == 0);
	/* Past the end, or empty: EINVAL, and the connection goes on. */
	CHECK(block_status(&s, 0, 5, SIZE - 10, 20, d, &n) == NBD_EINVAL);
	CHECK(block_status(&s, 0, 6, 0, 0, d, &n) == NBD_EINVAL);
	CHECK(block_status(&s, NBD_CMD_FLAG_FUA << 7, 7, 0, 10, d, &n) == NBD_EINVAL);
	request(&s, 0, NBD_CMD_DISC, 8, 0, 0, NULL);
	CHECK(finish(&s) == 0);

	/* A context set on one export does not carry over to another. */
	start(&s);
	greet(&s, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	structured_on(&s);
	send_meta(&s, NBD_OPT_SET_META_CONTEXT, "sparse", 1, alloc);
	CHECK(meta_replies(&s, NBD_OPT_SET_META_CONTEXT, &ids, &id) == NBD_REP_ACK && ids == 1);
	CHECK(info_go(&s, NBD_OPT_GO, "rw", &fl) == NBD_REP_ACK);
	CHECK(block_status(&s, 0, 1, 0, 4096, d, &n) == NBD_EINVAL);
	/* Exports are separate volumes: what "sparse" got is not in "rw". */
	unsigned char r[4096];
	request(&s, 0, NBD_CMD_READ, 2, 8192, sizeof(r), NULL);
	rd(&s, b, 20);
	CHECK(nbd_get16(b + 6) == NBD_REPLY_TYPE_OFFSET_DATA && nbd_get32(b + 16) == 8 + sizeof(r));
	rd(&s, b, 8);
	rd(&s, r, sizeof(r));
	CHECK(memcmp(r, w, sizeof(r)) != 0);
	request(&s, 0, NBD_CMD_DISC, 3, 0, 0, NULL);
	CHECK(finish(&s) == 0);
}

/* CAN_MULTI_CONN on a write-back cache: a write acknowledged on one
 * connection is not yet in the file; a FLUSH on another puts it there. */
static void test_multi_conn(void)
{
	char path[256];
	t_make_file(path, sizeof(path), SIZE, 7);
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.host_bytes = 64 * 4096;
	cfg.gpu_bytes = 64 * 4096;
	cfg.device = VC_DEVICE_EMU;
	cfg.write_mode = VC_WRITE_BACK;
	vc_cache *wb;
	CHECK_OK(vc_open(&cfg, &wb));
	struct nbd_export ex = { .name = "", .vol = vc_volume_default(wb) };
	struct nbd_server ws = { .exports = &ex, .n_exports = 1, .workers = 2, .cache = wb };
	cur = &ws;
	struct session a, b;
	start(&a);
	start(&b);
	go(&a, "", false);
	go(&b, "", false);
	unsigned char w[10000], f[10000];
	for (size_t i = 0; i < sizeof(w); i++)
		w[i] = (unsigned char)(i * 13 + 1);
	request(&a, 0, NBD_CMD_WRITE, 1, 5000, sizeof(w), w);
	CHECK(expect(&a, 1) == 0);
	int fd = open(path, O_RDONLY);
	CHECK(pread(fd, f, sizeof(f), 5000) == (ssize_t)sizeof(f));
	CHECK(memcmp(f, w, sizeof(w)) != 0); /* cached, dirty */
	request(&b, 0, NBD_CMD_FLUSH, 2, 0, 0, NULL);
	CHECK(expect(&b, 2) == 0);
	CHECK(pread(fd, f, sizeof(f), 5000) == (ssize_t)sizeof(f));
	CHECK(memcmp(f, w, sizeof(w)) == 0);
	close(fd);
	request(&a, 0, NBD_CMD_DISC, 3, 0, 0, NULL);
	request(&b, 0, NBD_CMD_DISC, 3, 0, 0, NULL);
	CHECK(finish(&a) == 0 && finish(&b) == 0);
	cur = &srv;
	CHECK_OK(vc_close(wb));
	unlink(path);
}

/* The statistics of what ran above: both formats, same numbers. */
static void test_stats(void)
{
	char *doc = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&doc, &len);
	CHECK_OK(nbd_stats_json(&srv, f));
	fclose(f);
	CHECK(strstr(doc, "\"exports\": [{\"name\": \"rw\"") != NULL);
	CHECK(strstr(doc, "\"name\": \"sparse\"") && strstr(doc, "\"hits_host\": "));
	CHECK(strstr(doc, "\"connections\": 0"));
	char want[64];
	snprintf(want, sizeof(want), "\"block_status\": %llu",
		 (unsigned long long)atomic_load(&counters[2].ops[NBD_CMD_BLOCK_STATUS]));
	CHECK(strstr(doc, want) && atomic_load(&counters[2].ops[NBD_CMD_BLOCK_STATUS]) >= 3);
	free(doc);
	f = open_memstream(&doc, &len);
	CHECK_OK(nbd_stats_prometheus(&srv, f));
	fclose(f);
	CHECK(strstr(doc, "# TYPE vramcache_hits_total counter\nvramcache_hits_total{tier=\"host\"} "));
	CHECK(strstr(doc, "vramcache_export_errors_total{export=\"sparse\"} "));
	snprintf(want, sizeof(want), "{export=\"rw\",op=\"write\"} %llu\n",
		 (unsigned long long)atomic_load(&counters[0].ops[NBD_CMD_WRITE]));
	CHECK(strstr(doc, want));
	free(doc);
}

int main(void)
{
	char path[256];
	t_make_file(path, sizeof(path), SIZE, 42);
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.host_bytes = 64 * 4096;
	cfg.gpu_bytes = 64 * 4096;
	cfg.device = VC_DEVICE_EMU;
	CHECK_OK(vc_open(&cfg, &cache));
	srv.cache = cache;
	vc_volume *v0 = vc_volume_default(cache), *vs;
	exports[0] = (struct nbd_export){ .name = "rw", .vol = v0, .prefetch_tier = VC_TIER_GPU,
					  .counters = &counters[0] };
	exports[1] = (struct nbd_export){ .name = "ro", .vol = v0, .readonly = true,
					  .prefetch_tier = VC_TIER_HOST, .counters = &counters[1] };
	/* A sparse store of the same size: data only in [64K, 68K). */
	char spath[300];
	snprintf(spath, sizeof(spath), "%s.sparse", path);
	int sfd = open(spath, O_RDWR | O_CREAT | O_TRUNC, 0600);
	unsigned char d[4096];
	memset(d, 0x11, sizeof(d));
	CHECK(sfd >= 0 && ftruncate(sfd, SIZE) == 0 && pwrite(sfd, d, 4096, 64 << 10) == 4096);
	close(sfd);
	CHECK_OK(vc_volume_open(cache, spath, -1, 0, &vs));
	exports[2] = (struct nbd_export){ .name = "sparse", .vol = vs, .counters = &counters[2] };
	test_bad_option_magic();
	test_bad_client_flags();
	test_unknown_option_then_go();
	test_tls_required();
	test_export_name();
	test_bad_requests();
	test_structured();
	test_in_flight();
	test_vanish();
	test_meta_context();
	test_multi_conn();
	test_stats();
	CHECK_OK(vc_close(cache));
	unlink(path);
	unlink(spath);
	printf("nbd protocol: all checks passed\n");
	return 0;
}
