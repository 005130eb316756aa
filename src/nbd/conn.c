/* A connection in the transmission phase: one reader, a small worker pool,
 * and a lock around the socket's write side.
 *
 * The reader owns the read side: it frames each request, reads a WRITE's
 * payload before anything else, and answers requests that fail their check
 * itself, so the stream never loses framing. Checked requests go on a FIFO
 * for the workers; a worker runs one on the engine and writes its whole
 * reply (header and data) under `wlock`, so replies never interleave but may
 * leave in any order, each with its request's cookie.
 *
 * Memory bound: the reader admits a request only while the payload bytes
 * in flight (queued or running) stay under NBD_INFLIGHT_BYTES, or when
 * nothing is in flight (so one maximum-size request always proceeds).
 *
 * Hot path: a READ whose pages are all in the host tier is answered by the
 * reader itself (vc_volume_read_hit never blocks), with no handoff to a
 * worker: on a small host that handoff (a wakeup, a context switch, a
 * second one back) cost more than the copy. Its reply goes out without
 * blocking; if the socket is full, the reader keeps reading (and queueing)
 * requests while it waits to send the rest, so a client that sends before
 * it reads never deadlocks against it, as it could not with workers.
 * Requests are read through a buffer (RBUF_BYTES), so a burst of headers
 * costs one read call, not one each. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Read buffer: 64 KiB holds over 2000 request headers, and payloads at
 * least this large are read straight into their own buffer. */
#define RBUF_BYTES 65536u
/* Inline replies per sendmsg: 32 covers a QD32 client's burst; their data
 * shares one buffer of VC_READ_HIT_PAGES pages, so a batch is at most
 * 32 x 4 KiB reads or one 128 KiB read (IOV_MAX is far above 64). */
#define PEND_MAX 32

#include "nbd/nbd.h"
#include "nbd/wire.h"

struct job {
	struct nbd_request r;
	uint32_t err; /* nonzero: refused by its check; the worker only replies */
	struct job *next;
};

struct conn {
	struct nbd_session s;
	pthread_mutex_t wlock; /* the socket's write side */
	pthread_mutex_t qlock; /* everything below */
	pthread_cond_t work;   /* a job was queued, or closing */
	pthread_cond_t room;   /* in-flight bytes went down */
	struct job *head, *tail;
	uint64_t inflight_bytes;
	unsigned inflight;
	bool closing;
	/* Reader only. */
	unsigned char *rbuf;
	size_t rpos, rlen;    /* unread bytes: rbuf[rpos, rlen) */
	unsigned char *hitbuf; /* data of pending inline replies (hitcap bytes) */
	size_t hitcap, hitused;
	/* Inline replies wait here until the reader would block or the batch
	 * is full, then leave in one sendmsg: the replies to one burst of
	 * requests cost one call. */
	struct iovec piov[2 * PEND_MAX];
	unsigned char phdr[PEND_MAX][NBD_REPLY_HDR_MAX];
	int npiov, npend;
	bool in_send; /* send_inline runs: no flush from inside it */
	bool ended;   /* send_inline read DISC, EOF or garbage: read no more */
};

static int flush_pending(struct conn *c);

/* Before the reader may block: the pending inline replies leave. */
static int before_block(struct conn *c)
{
	return c->npend && !c->in_send ? flush_pending(c) : 0;
}

/* Reads exactly n bytes through the buffer. Same codes as nbd_read_full. */
static int rb_read(struct conn *c, void *dst, size_t n)
{
	if (c->ended)
		return -ECONNRESET;
	unsigned char *d = dst;
	size_t k = c->rlen - c->rpos < n ? c->rlen - c->rpos : n;
	memcpy(d, c->rbuf + c->rpos, k);
	c->rpos += k;
	d += k;
	n -= k;
	if (n > 0) {
		int e = before_block(c);
		if (e < 0)
			return e;
	}
	if (n >= RBUF_BYTES / 2)
		return nbd_read_full(c->s.fd, d, n); /* large payloads: no copy */
	while (n > 0) {
		ssize_t r = read(c->s.fd, c->rbuf, RBUF_BYTES);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r == 0 ? -ECONNRESET : -errno;
		c->rpos = 0;
		c->rlen = (size_t)r;
		k = c->rlen < n ? c->rlen : n;
		memcpy(d, c->rbuf, k);
		c->rpos = k;
		d += k;
		n -= k;
	}
	return 0;
}

/* Skips n bytes: what is buffered, then the rest on the socket. */
static int rb_skip(struct conn *c, uint64_t n)
{
	size_t k = c->rlen - c->rpos < n ? c->rlen - c->rpos : (size_t)n;
	c->rpos += k;
	if (n == k)
		return 0;
	int e = before_block(c);
	return e < 0 ? e : nbd_skip(c->s.fd, n - k);
}

static uint64_t payload_bytes(const struct nbd_request *r)
{
	return r->type == NBD_CMD_READ || r->type == NBD_CMD_WRITE ? r->length : 0;
}

/* Counts a request answered (run, or refused by its check). */
static void count(struct conn *c, const struct nbd_request *r, uint32_t err)
{
	struct nbd_counters *n = c->s.exp->counters;
	if (!n)
		return;
	if (err) {
		atomic_fetch_add_explicit(&n->errors, 1, memory_order_relaxed);
		return;
	}
	atomic_fetch_add_explicit(&n->ops[r->type], 1, memory_order_relaxed);
	if (r->type == NBD_CMD_READ)
		atomic_fetch_add_explicit(&n->read_bytes, r->length, memory_order_relaxed);
	else if (r->type == NBD_CMD_WRITE)
		atomic_fetch_add_explicit(&n->write_bytes, r->length, memory_order_relaxed);
}

static int reply_locked(struct conn *c, const struct nbd_request *r, uint32_t err)
{
	count(c, r, err);
	pthread_mutex_lock(&c->wlock);
	int e = nbd_reply_send(&c->s, r, err);
	pthread_mutex_unlock(&c->wlock);
	if (e < 0)
		shutdown(c->s.fd, SHUT_RDWR); /* the client is gone: wake the reader */
	return e;
}

static void *worker(void *arg)
{
	struct conn *c = arg;
	pthread_mutex_lock(&c->qlock);
	for (;;) {
		while (!c->head && !c->closing)
			pthread_cond_wait(&c->work, &c->qlock);
		struct job *j = c->head;
		if (!j)
			break; /* closing and drained */
		c->head = j->next;
		if (!c->head)
			c->tail = NULL;
		pthread_mutex_unlock(&c->qlock);

		uint32_t err = j->err ? j->err : nbd_request_exec(&c->s, &j->r);
		reply_locked(c, &j->r, err);

		pthread_mutex_lock(&c->qlock);
		c->inflight--;
		c->inflight_bytes -= j->err ? 0 : payload_bytes(&j->r);
		pthread_cond_signal(&c->room);
		free(j->r.data);
		free(j);
	}
	pthread_mutex_unlock(&c->qlock);
	return NULL;
}

static void admit(struct conn *c, uint64_t b)
{
	before_block(c); /* may wait below; an error shows on the next read */
	pthread_mutex_lock(&c->qlock);
	while (c->inflight > 0 && c->inflight_bytes + b > NBD_INFLIGHT_BYTES)
		pthread_cond_wait(&c->room, &c->qlock);
	c->inflight++;
	c->inflight_bytes += b;
	pthread_mutex_unlock(&c->qlock);
}

static void unadmit(struct conn *c, uint64_t b)
{
	pthread_mutex_lock(&c->qlock);
	c->inflight--;
	c->inflight_bytes -= b;
	pthread_cond_signal(&c->room);
	pthread_mutex_unlock(&c->qlock);
}

/* Whether one more request of any size is admitted without waiting. */
static bool has_room(struct conn *c)
{
	pthread_mutex_lock(&c->qlock);
	bool ok = c->inflight == 0 || c->inflight_bytes + NBD_MAX_PAYLOAD <= NBD_INFLIGHT_BYTES;
	pthread_mutex_unlock(&c->qlock);
	return ok;
}

static int one_request(struct conn *c, bool draining);

/* Sends an inline reply. The reader holds wlock throughout; when the
 * socket is full it polls, reading further requests (queued, never
 * inline, and only while they are admitted without waiting: waiting
 * would need a worker's reply, which needs wlock) until all is sent.
 * 0, 1 at DISC or EOF seen meanwhile (the caller ends), or -errno. */
static int send_inline(struct conn *c, struct iovec *iov, int n)
{
	int e = nbd_writev_some(c->s.fd, iov, n, true), ended = 0;
	while (e == -EAGAIN) {
		bool rd = !ended && has_room(c);
		if (rd && c->rpos < c->rlen) { /* buffered requests need no poll */
			int k = one_request(c, true);
			if (k != 0)
				ended = k < 0 ? k : 1;
			continue;
		}
		struct pollfd p = { .fd = c->s.fd, .events = POLLOUT | (rd ? POLLIN : 0) };
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -errno;
		if (p.revents & POLLOUT)
			e = nbd_writev_some(c->s.fd, iov, n, true);
		else if (p.revents & (POLLERR | POLLNVAL))
			return -EPIPE;
		else if (p.revents & (POLLIN | POLLHUP)) {
			int k = one_request(c, true);
			if (k != 0)
				ended = k < 0 ? k : 1;
		}
	}
	if (e < 0)
		return e;
	c->ended |= ended != 0;
	return ended;
}

/* Sends the pending inline replies: 0, 1 (DISC or EOF seen meanwhile),
 * or -errno (the connection is shut). */
static int flush_pending(struct conn *c)
{
	if (c->npend == 0)
		return 0;
	pthread_mutex_lock(&c->wlock);
	c->in_send = true;
	int e = send_inline(c, c->piov, c->npiov);
	c->in_send = false;
	pthread_mutex_unlock(&c->wlock);
	c->npend = c->npiov = 0;
	c->hitused = 0;
	if (e < 0)
		shutdown(c->s.fd, SHUT_RDWR);
	return e;
}

/* A READ answered here if every page is a host-tier hit: its reply joins
 * the pending batch. 1 done, 0 not (the caller queues it), -errno, or 2
 * when sending saw DISC or EOF. */
static int try_inline(struct conn *c, struct nbd_request *r)
{
	if (r->length > c->hitcap)
		return 0;
	if (c->npend == PEND_MAX || r->length > c->hitcap - c->hitused) {
		int e = flush_pending(c);
		if (e != 0)
			return e < 0 ? e : 2;
	}
	unsigned char *d = c->hitbuf + c->hitused;
	if (vc_volume_read_hit(c->s.exp->vol, d, r->length, r->offset) != (ssize_t)r->length)
		return 0;
	r->data = d;
	c->hitused += r->length;
	c->npiov += nbd_reply_build(&c->s, r, 0, c->phdr[c->npend], c->piov + c->npiov);
	c->npend++;
	count(c, r, 0);
	return 1;
}

/* Reads, checks and dispatches one request. 0 to go on, 1 at DISC or
 * EOF, -errno on an I/O error or a bad magic (cannot re-frame: hang up).
 * `draining`: called by send_inline, which holds wlock, so nothing is
 * answered here; refusals go to the workers too. */
static int one_request(struct conn *c, bool draining)
{
	unsigned char h[NBD_REQUEST_LEN];
	int e = rb_read(c, h, sizeof(h));
	if (e < 0)
		return e == -ECONNRESET ? 1 : e;
	struct nbd_request r;
	if ((e = nbd_request_decode(h, &r)) < 0)
		return e;
	if (r.type == NBD_CMD_DISC)
		return 1;
	uint32_t err = nbd_request_check(&c->s, &r);
	if (err == 0 && !draining && r.type == NBD_CMD_READ && r.length > 0) {
		int k = try_inline(c, &r);
		if (k != 0)
			return k < 0 ? k : k - 1;
	}
	uint64_t b = payload_bytes(&r);
	if (err == 0)
		admit(c, b);
	struct job *j = err && !draining ? NULL : calloc(1, sizeof(*j));
	if (j && !err && b > 0 && !(r.data = malloc(r.length))) {
		free(j);
		j = NULL;
	}
	if (!err && !j) {
		err = NBD_ENOMEM;
		unadmit(c, b);
		if (draining && !(j = calloc(1, sizeof(*j))))
			return -ENOMEM; /* cannot even queue the refusal: hang up */
	}
	if (j && err) { /* a refusal the workers send; counts as in flight */
		j->err = err;
		pthread_mutex_lock(&c->qlock);
		c->inflight++;
		pthread_mutex_unlock(&c->qlock);
	}
	if (r.type == NBD_CMD_WRITE) {
		e = r.data ? rb_read(c, r.data, r.length) : rb_skip(c, r.length);
		if (e < 0) { /* the client vanished mid-request */
			if (j) {
				unadmit(c, j->err ? 0 : b);
				free(r.data);
				free(j);
			}
			return e == -ECONNRESET ? 1 : e;
		}
	}
	if (!j) {
		r.data = NULL;
		return reply_locked(c, &r, err) < 0 ? 1 : 0;
	}
	j->r = r;
	pthread_mutex_lock(&c->qlock);
	if (c->tail)
		c->tail->next = j;
	else
		c->head = j;
	c->tail = j;
	pthread_cond_signal(&c->work);
	pthread_mutex_unlock(&c->qlock);
	return 0;
}

/* Reads requests until DISC, EOF, an I/O error or a bad magic. */
static int reader(struct conn *c)
{
	int e;
	while ((e = one_request(c, false)) == 0)
		;
	int f = flush_pending(c); /* replies owed before the end (spec: DISC) */
	return e > 0 ? (f < 0 ? f : 0) : e;
}

int nbd_conn_run(int fd, const struct nbd_server *srv)
{
	struct conn c = { .s = { .fd = fd, .srv = srv } };
	int e = nbd_handshake(&c.s);
	if (e <= 0)
		return e;
	c.hitcap = (size_t)VC_READ_HIT_PAGES * vc_page_size(srv->cache);
	c.rbuf = malloc(RBUF_BYTES);
	c.hitbuf = malloc(c.hitcap);
	if (!c.rbuf || !c.hitbuf) {
		free(c.rbuf);
		free(c.hitbuf);
		return -ENOMEM;
	}
	struct nbd_counters *cnt = c.s.exp->counters;
	if (cnt) {
		atomic_fetch_add(&cnt->conns, 1);
		atomic_fetch_add(&cnt->conns_total, 1);
	}
	pthread_mutex_init(&c.wlock, NULL);
	pthread_mutex_init(&c.qlock, NULL);
	pthread_cond_init(&c.work, NULL);
	pthread_cond_init(&c.room, NULL);
	unsigned n = srv->workers ? srv->workers : NBD_DEFAULT_WORKERS;
	pthread_t tid[64];
	if (n > 64)
		n = 64;
	unsigned started = 0;
	for (; started < n; started++)
		if (pthread_create(&tid[started], NULL, worker, &c) != 0)
			break;
	if (started == 0) {
		e = -EAGAIN;
	} else {
		/* Every request admitted before the end is run and answered:
		 * the workers drain the queue before they exit (spec: handle
		 * all outstanding requests on DISC). */
		e = reader(&c);
	}
	pthread_mutex_lock(&c.qlock);
	c.closing = true;
	pthread_cond_broadcast(&c.work);
	pthread_mutex_unlock(&c.qlock);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	pthread_cond_destroy(&c.room);
	pthread_cond_destroy(&c.work);
	pthread_mutex_destroy(&c.qlock);
	pthread_mutex_destroy(&c.wlock);
	if (cnt)
		atomic_fetch_sub(&cnt->conns, 1);
	free(c.rbuf);
	free(c.hitbuf);
	return e;
}
