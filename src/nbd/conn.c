/* A connection in the transmission phase: one thread drives it all.
 *
 * The connection thread reads requests through a buffer (a burst of
 * headers costs one read call), answers refusals itself, submits every
 * checked READ, WRITE and FLUSH of a burst to the connection's vc_aio
 * queue in one vc_aio_submit, reaps completions and sends the replies,
 * many per sendmsg, from an output queue. Nothing it does blocks while
 * anything is in flight: reads and sends are non-blocking, so a client that
 * sends without reading replies never deadlocks against us; we go on
 * reading (within the bounds below) while our sends wait.
 *
 * Where requests run:
 *   READ, WRITE, FLUSH   the vc_aio queue: cached reads complete at submit
 *                        (host tier) or in one device submission per burst
 *                        (GPU tier), with no thread of their own; misses,
 *                        writes and flushes on the queue's helper threads
 *                        (srv->workers of them). FUA is VC_AIO_FUA.
 *   TRIM, WRITE_ZEROES,  the lane: one thread per connection, started on
 *   CACHE, BLOCK_STATUS  first need, running nbd_request_exec in arrival
 *                        order. Not the connection thread: WRITE_ZEROES
 *                        of a large range or a CACHE that reads the store
 *                        can take seconds, during which replies to reads
 *                        already done would wait and their GPU pages stay
 *                        pinned (vc_aio asks for prompt reaping). One
 *                        thread, because these are rare.
 *   refusals             (nbd_request_check) answered at once, here.
 * Replies leave in completion order, each with its request's cookie.
 *
 * Waiting. Nothing in flight: poll() on the socket (and the lane's
 * eventfd), no timeout. Requests in the queue: vc_aio_reap with a timeout
 * (it spins for device reads, which take microseconds, and sleeps on a
 * condition variable for helpers' requests), then a non-blocking read of
 * the socket. The queue cannot wake poll(), so a request arriving while
 * others are in flight waits at most one reap slice: WAIT_MIN_NS after any
 * progress, doubling to WAIT_MAX_NS while nothing happens.
 *
 * Bounds (back-pressure): a request is admitted only while the payload
 * bytes held (WRITE data until its write completes, READ data until its
 * reply is sent) stay under NBD_INFLIGHT_BYTES, or when none are held (so
 * one maximum-size request always proceeds); while the queue has room
 * (AIO_DEPTH); and while fewer than CONN_MAX_REQS requests are held in any
 * state. A request that does not fit stops the reading until one leaves.
 *
 * Lock rules: everything in struct conn belongs to the connection thread,
 * except the lane's lists (under lane.mu). A request belongs to exactly one
 * of: the reader (cur), the submit batch, the vc_aio queue, the lane, the
 * output queue, the free list.
 *
 * Disconnect: at DISC, EOF, a bad magic or a read error we read no more;
 * every request admitted before it runs and is answered (spec: DISC), then
 * the queue is closed.
 *
 * TLS (after STARTTLS): the socket calls become tls.c's non-blocking
 * record reads and writes, with two differences the loop minds: replies
 * taken by nbd_tls_writev_some may still sit in its record buffer (we wait
 * for POLLOUT and do not end until it is empty), and GnuTLS may hold
 * decrypted bytes the socket no longer signals (we do not poll then). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nbd/nbd.h"
#include "nbd/wire.h"

/* Read buffer: 64 KiB holds over 2000 request headers; payloads at least
 * half as large are read straight into their own buffer. */
#define RBUF_BYTES 65536u
/* Requests in the vc_aio queue at once: four times a QD128 client, so a
 * few such clients' bursts never wait for room. The queue's bounce pages
 * for GPU-tier reads do not grow with it (vc_aio caps them at 2048). */
#define AIO_DEPTH 512u
/* Requests held in any state. The byte bound allows 16k 4 KiB reads; this
 * bounds those without payload (FLUSH, refusals) the same, at ~250 bytes
 * each (4 MiB). */
#define CONN_MAX_REQS 16384u
/* Completions collected per vc_aio_reap call. */
#define REAP_MAX 64u
/* iovecs per sendmsg: 64 replies (IOV_MAX is 1024). */
#define OUT_IOV 128
/* Reap slices while requests are in the queue: 20 us is a few GPU-tier
 * reads, so a request arriving then waits about as long as one; 200 us
 * caps the wake-ups while only slow requests (misses, writes to a slow
 * store) are out at 5k per second, and stays below a miss on any store
 * slow enough to leave the queue busy that long. */
#define WAIT_MIN_NS 20000
#define WAIT_MAX_NS 200000

/* A request, from its header to its reply's last byte. */
struct creq {
	struct vc_aio_req a; /* READ, WRITE, FLUSH: a.user points back here */
	struct nbd_request r;
	uint32_t err;  /* NBD_E*: refused, or how it ended */
	uint64_t held; /* payload bytes counted in c->bytes */
	int niov;      /* the reply, once built: iov[0..niov), advanced as sent */
	struct iovec iov[2];
	unsigned char h[NBD_REPLY_HDR_MAX];
	struct creq *next;
};

struct fifo {
	struct creq *head, *tail;
};

static void fifo_push(struct fifo *f, struct creq *q)
{
	q->next = NULL;
	if (f->tail)
		f->tail->next = q;
	else
		f->head = q;
	f->tail = q;
}

static struct creq *fifo_pop(struct fifo *f)
{
	struct creq *q = f->head;
	if (q && !(f->head = q->next))
		f->tail = NULL;
	return q;
}

/* The lane: one thread for the commands vc_aio does not cover. */
struct lane {
	pthread_t tid;
	bool started;
	int efd;                /* written once per request done: wakes poll() */
	pthread_mutex_t mu;     /* todo, done, closing */
	pthread_cond_t cv;      /* todo grew, or closing */
	struct fifo todo, done;
	bool closing;
	const struct nbd_session *s;
};

/* Where the reader is in the request stream. */
enum rstate {
	RS_HDR,   /* between requests */
	RS_ADMIT, /* cur's header is read; it waits for room */
	RS_DATA,  /* reading cur's WRITE payload into cur->r.data */
	RS_SKIP,  /* throwing away a refused WRITE's payload */
};

struct conn {
	struct nbd_session s;
	vc_aio *q; /* opened on the first READ, WRITE or FLUSH */
	unsigned helpers;
	/* Reader. */
	unsigned char *rbuf;
	size_t rpos, rlen; /* unread bytes: rbuf[rpos, rlen) */
	enum rstate rs;
	struct creq *cur;
	uint64_t left; /* RS_DATA, RS_SKIP: payload bytes still to come */
	bool notsock;  /* fd is not a socket (fuzzing with a pipe): poll, then read */
	bool ended;    /* DISC, EOF, bad magic or I/O error: read no more */
	bool out_dead; /* a send failed: replies are dropped */
	int rc;        /* what nbd_conn_run returns */
	/* Requests. */
	unsigned nreqs;  /* held in any state (CONN_MAX_REQS) */
	uint64_t bytes;  /* payload bytes held (NBD_INFLIGHT_BYTES) */
	unsigned naio;   /* in the batch or the queue (AIO_DEPTH) */
	unsigned nbatch; /* batch[0..nbatch): not yet submitted */
	struct vc_aio_req *batch[AIO_DEPTH];
	unsigned nlane; /* handed to the lane, not yet collected */
	struct fifo out; /* replies built, not yet all sent */
	struct creq *free;
	struct lane lane;
};

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

/* ---- Requests' memory ---------------------------------------------------- */

static struct creq *creq_new(struct conn *c)
{
	struct creq *q = c->free;
	if (q)
		c->free = q->next;
	else if (!(q = malloc(sizeof *q)))
		return NULL;
	memset(q, 0, sizeof *q);
	c->nreqs++;
	return q;
}

/* Drops q's payload and its share of the byte bound. */
static void creq_unhold(struct conn *c, struct creq *q)
{
	free(q->r.data);
	q->r.data = NULL;
	c->bytes -= q->held;
	q->held = 0;
}

static void creq_free(struct conn *c, struct creq *q)
{
	creq_unhold(c, q);
	q->next = c->free;
	c->free = q;
	c->nreqs--;
}

/* ---- Replies --------------------------------------------------------------- */

/* Counts q and queues its reply (dropped when the client is gone). */
static void reply(struct conn *c, struct creq *q, uint32_t err)
{
	count(c, &q->r, err);
	if (c->out_dead) {
		creq_free(c, q);
		return;
	}
	q->niov = nbd_reply_build(&c->s, &q->r, err, q->h, q->iov);
	fifo_push(&c->out, q);
}

static void end_input(struct conn *c, int e);

/* A send failed: the client is gone (or broken); nothing more goes out or
 * comes in, and what is in flight is only waited for. */
static void out_fail(struct conn *c, int e)
{
	c->out_dead = true;
	end_input(c, e == -EPIPE ? -ECONNRESET : e);
	struct creq *q;
	while ((q = fifo_pop(&c->out)))
		creq_free(c, q);
}

/* Sends queued replies until the socket is full or none is left, up to
 * OUT_IOV iovecs per sendmsg; whether any byte went. Cost: O(replies
 * sent). */
static bool out_flush(struct conn *c)
{
	bool any = false;
	if (!c->out.head && c->s.tls && nbd_tls_out_pending(c->s.tls) && !c->out_dead) {
		/* The last replies wait in the TLS record buffer. */
		int e = nbd_tls_writev_some(c->s.tls, NULL, 0);
		if (e < 0 && e != -EAGAIN)
			out_fail(c, e);
		return e != -EAGAIN;
	}
	while (c->out.head) {
		struct iovec v[OUT_IOV];
		int n = 0;
		size_t total = 0;
		for (struct creq *q = c->out.head; q && n + 2 <= OUT_IOV; q = q->next)
			for (int i = 0; i < q->niov; i++)
				if (q->iov[i].iov_len) {
					v[n++] = q->iov[i];
					total += q->iov[i].iov_len;
				}
		int e = c->s.tls ? nbd_tls_writev_some(c->s.tls, v, n)
				 : nbd_writev_some(c->s.fd, v, n, true);
		size_t sent = total - nbd_iov_left(v, n);
		any |= sent > 0;
		/* Advance the replies past what went; free the whole ones. */
		while (c->out.head) {
			struct creq *q = c->out.head;
			for (int i = 0; i < q->niov && sent; i++) {
				size_t k = sent < q->iov[i].iov_len ? sent : q->iov[i].iov_len;
				q->iov[i].iov_base = (char *)q->iov[i].iov_base + k;
				q->iov[i].iov_len -= k;
				sent -= k;
			}
			if (nbd_iov_left(q->iov, q->niov))
				break;
			creq_free(c, fifo_pop(&c->out));
		}
		if (e == -EAGAIN)
			return any;
		if (e < 0) {
			out_fail(c, e);
			return true;
		}
	}
	return any;
}

/* ---- The lane ---------------------------------------------------------- */

static void *lane_main(void *arg)
{
	struct lane *l = arg;
	pthread_mutex_lock(&l->mu);
	for (;;) {
		while (!l->todo.head && !l->closing)
			pthread_cond_wait(&l->cv, &l->mu);
		struct creq *q = fifo_pop(&l->todo);
		if (!q)
			break; /* closing, and the connection waited for all */
		pthread_mutex_unlock(&l->mu);
		q->err = nbd_request_exec(l->s, &q->r);
		pthread_mutex_lock(&l->mu);
		fifo_push(&l->done, q);
		uint64_t one = 1;
		if (write(l->efd, &one, sizeof one) < 0) {
			/* the counter is full: a wake-up is pending anyway */
		}
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* Hands q to the lane, starting it on first need; without a thread (none
 * could start) q runs here. */
static void lane_push(struct conn *c, struct creq *q)
{
	struct lane *l = &c->lane;
	if (!l->started) {
		l->s = &c->s;
		l->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (l->efd >= 0 && pthread_create(&l->tid, NULL, lane_main, l) == 0) {
			l->started = true;
		} else {
			if (l->efd >= 0)
				close(l->efd);
			l->efd = -1;
			reply(c, q, nbd_request_exec(&c->s, &q->r));
			return;
		}
	}
	pthread_mutex_lock(&l->mu);
	fifo_push(&l->todo, q);
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	c->nlane++;
}

/* Replies to what the lane finished; whether there was any. */
static bool lane_collect(struct conn *c)
{
	struct lane *l = &c->lane;
	if (c->nlane == 0)
		return false;
	uint64_t n;
	if (read(l->efd, &n, sizeof n) < 0) {
		/* nothing new since the last read: the list may still hold some */
	}
	pthread_mutex_lock(&l->mu);
	struct creq *q = l->done.head;
	l->done.head = l->done.tail = NULL;
	pthread_mutex_unlock(&l->mu);
	bool any = q != NULL;
	while (q) {
		struct creq *next = q->next;
		c->nlane--;
		reply(c, q, q->err);
		q = next;
	}
	return any;
}

static void lane_stop(struct lane *l)
{
	if (!l->started)
		return;
	pthread_mutex_lock(&l->mu);
	l->closing = true;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->tid, NULL);
	close(l->efd);
}

/* ---- The queue ------------------------------------------------------------- */

/* Sends the batch to the queue: one vc_aio_submit. */
static void submit(struct conn *c)
{
	if (c->nbatch == 0)
		return;
	int n = vc_aio_submit(c->q, c->batch, c->nbatch);
	/* naio <= AIO_DEPTH, so the queue takes them all; anything it did
	 * not take (it cannot) is answered as an I/O error. */
	for (unsigned i = n < 0 ? 0 : (unsigned)n; i < c->nbatch; i++) {
		struct creq *q = c->batch[i]->user;
		c->naio--;
		creq_unhold(c, q);
		reply(c, q, NBD_EIO);
	}
	c->nbatch = 0;
}

static void completed(struct conn *c, struct vc_aio_req *const *done, int n)
{
	for (int i = 0; i < n; i++) {
		struct creq *q = done[i]->user;
		c->naio--;
		uint32_t err = nbd_request_result(&q->r, q->a.result);
		if (q->r.type != NBD_CMD_READ)
			creq_unhold(c, q); /* a WRITE's payload is no longer needed */
		reply(c, q, err);
	}
}

/* Collects what completed, without waiting: whether there was any. */
static bool reap(struct conn *c)
{
	if (!c->q || vc_aio_inflight(c->q) == 0)
		return false;
	struct vc_aio_req *done[REAP_MAX];
	int n, total = 0;
	do {
		n = vc_aio_reap(c->q, done, 0, REAP_MAX, 0);
		if (n > 0) {
			completed(c, done, n);
			total += n;
		}
	} while (n == (int)REAP_MAX);
	return total > 0;
}

/* ---- The reader ------------------------------------------------------------ */

/* Reads what the socket has, up to n bytes, without blocking: bytes, 0
 * when there is nothing yet, -ECONNRESET at end of stream, or -errno. */
static ssize_t recv_some(struct conn *c, void *p, size_t n)
{
	if (c->s.tls)
		return nbd_tls_recv(c->s.tls, p, n);
	for (;;) {
		ssize_t r;
		if (!c->notsock) {
			r = recv(c->s.fd, p, n, MSG_DONTWAIT);
			if (r < 0 && errno == ENOTSOCK) {
				c->notsock = true;
				continue;
			}
		} else {
			struct pollfd pf = { .fd = c->s.fd, .events = POLLIN };
			if (poll(&pf, 1, 0) == 0)
				return 0;
			r = read(c->s.fd, p, n);
		}
		if (r > 0)
			return r;
		if (r == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	}
}

/* The end of the request stream: the request being read, if any, is
 * dropped (its client vanished mid-request); e is 0 or -errno. */
static void end_input(struct conn *c, int e)
{
	c->ended = true;
	if (c->rc == 0 && e != -ECONNRESET)
		c->rc = e;
	if (c->cur) {
		creq_free(c, c->cur);
		c->cur = NULL;
	}
}

/* Refills the buffer, keeping its unread bytes: > 0 read, 0 nothing yet,
 * < 0 the stream ended (end_input done). The batch goes to the queue
 * first: this is the end of a burst. */
static ssize_t fill(struct conn *c)
{
	submit(c);
	if (c->rpos > 0) {
		memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
		c->rlen -= c->rpos;
		c->rpos = 0;
	}
	ssize_t r = recv_some(c, c->rbuf + c->rlen, RBUF_BYTES - c->rlen);
	if (r < 0)
		end_input(c, (int)r);
	else
		c->rlen += (size_t)r;
	return r;
}

/* Whether cur fits the bounds now; if so it is counted in them. */
static bool admit(struct conn *c, struct creq *q)
{
	uint64_t b = payload_bytes(&q->r);
	bool aio = q->r.type == NBD_CMD_READ || q->r.type == NBD_CMD_WRITE ||
		   q->r.type == NBD_CMD_FLUSH;
	if (c->bytes > 0 && c->bytes + b > NBD_INFLIGHT_BYTES)
		return false;
	if (aio && c->naio >= AIO_DEPTH)
		return false;
	q->held = b;
	c->bytes += b;
	return true;
}

/* A whole request is here: where it goes. */
static void dispatch(struct conn *c, struct creq *q)
{
	struct nbd_request *r = &q->r;
	if (q->err) {
		reply(c, q, q->err);
		return;
	}
	if (r->type != NBD_CMD_READ && r->type != NBD_CMD_WRITE && r->type != NBD_CMD_FLUSH) {
		lane_push(c, q);
		return;
	}
	if (!c->q) {
		int e = vc_aio_open(c->s.srv->cache, AIO_DEPTH, c->helpers, &c->q);
		if (e < 0) {
			creq_unhold(c, q);
			reply(c, q, e == -ENOMEM ? NBD_ENOMEM : NBD_EIO);
			return;
		}
	}
	q->a = (struct vc_aio_req){
		.vol = c->s.exp->vol,
		.buf = r->data,
		.off = r->offset,
		.len = r->type == NBD_CMD_FLUSH ? 0 : r->length,
		.op = r->type == NBD_CMD_READ ? VC_AIO_READ
		      : r->type == NBD_CMD_WRITE ? VC_AIO_WRITE : VC_AIO_FLUSH,
		.flags = r->type == NBD_CMD_WRITE &&
				 ((r->flags & NBD_CMD_FLAG_FUA) || c->s.exp->write_through)
			 ? VC_AIO_FUA
			 : 0,
		.user = q,
	};
	c->batch[c->nbatch++] = &q->a;
	c->naio++;
}

/* Reads and dispatches requests until the socket has no more, a request
 * must wait for room, the stream ends, or READ_BUDGET read calls have
 * brought something (then replies get their turn). Whether anything was
 * read. */
#define READ_BUDGET 4
static bool read_input(struct conn *c)
{
	bool any = false;
	for (int reads = 0; !c->ended && reads < READ_BUDGET;) {
		size_t have = c->rlen - c->rpos;
		switch (c->rs) {
		case RS_HDR: {
			if (c->nreqs >= CONN_MAX_REQS)
				return any;
			if (have < NBD_REQUEST_LEN) {
				ssize_t k = fill(c);
				if (k <= 0)
					return any;
				any = true;
				reads++;
				continue;
			}
			struct nbd_request r;
			int e = nbd_request_decode(c->rbuf + c->rpos, &r);
			c->rpos += NBD_REQUEST_LEN;
			if (e < 0 || r.type == NBD_CMD_DISC) {
				end_input(c, e); /* a bad magic: the stream cannot be framed */
				return true;
			}
			struct creq *q = creq_new(c);
			if (!q) {
				end_input(c, -ENOMEM); /* cannot even answer it: hang up */
				return true;
			}
			q->r = r;
			q->err = nbd_request_check(&c->s, &r);
			c->cur = q;
			c->rs = RS_ADMIT;
			any = true;
			continue;
		}
		case RS_ADMIT: {
			struct creq *q = c->cur;
			if (!q->err && !admit(c, q))
				return any;
			if (!q->err && q->held > 0 && !(q->r.data = malloc(q->held))) {
				creq_unhold(c, q);
				q->err = NBD_ENOMEM;
			}
			if (q->r.type == NBD_CMD_WRITE) {
				c->left = q->r.length;
				c->rs = q->r.data ? RS_DATA : RS_SKIP;
				continue;
			}
			c->cur = NULL;
			c->rs = RS_HDR;
			dispatch(c, q);
			continue;
		}
		case RS_DATA:
		case RS_SKIP: {
			struct creq *q = c->cur;
			if (c->left > 0 && have == 0) {
				unsigned char *dst = q->r.data ? (unsigned char *)q->r.data +
									 (q->r.length - c->left)
							       : NULL;
				ssize_t k;
				if (dst && c->left >= RBUF_BYTES / 2) { /* large: no copy */
					submit(c);
					k = recv_some(c, dst, c->left);
					if (k < 0)
						end_input(c, (int)k);
					else
						c->left -= (uint64_t)k;
				} else {
					k = fill(c);
				}
				if (k <= 0)
					return any;
				any = true;
				reads++;
				continue;
			}
			size_t k = have < c->left ? have : (size_t)c->left;
			if (q->r.data)
				memcpy((unsigned char *)q->r.data + (q->r.length - c->left),
				       c->rbuf + c->rpos, k);
			c->rpos += k;
			c->left -= k;
			if (c->left == 0) {
				c->cur = NULL;
				c->rs = RS_HDR;
				dispatch(c, q);
			}
			any = true;
			continue;
		}
		}
	}
	return any;
}

/* ---- The loop -------------------------------------------------------------- */

/* Whether the reader could go on if the socket had bytes. */
static bool want_input(const struct conn *c)
{
	if (c->ended)
		return false;
	return c->rs == RS_ADMIT ? false : c->rs != RS_HDR || c->nreqs < CONN_MAX_REQS;
}

/* Waits for something to do; *slice is the reap slice (see the top). */
static void wait_event(struct conn *c, int64_t *slice)
{
	if (c->q && vc_aio_inflight(c->q) > 0) {
		struct vc_aio_req *done[REAP_MAX];
		int n = vc_aio_reap(c->q, done, 1, REAP_MAX, *slice);
		if (n > 0) {
			completed(c, done, n);
			*slice = WAIT_MIN_NS;
		} else {
			*slice = *slice * 2 < WAIT_MAX_NS ? *slice * 2 : WAIT_MAX_NS;
		}
		return;
	}
	bool out = c->out.head || (c->s.tls && !c->out_dead && nbd_tls_out_pending(c->s.tls));
	if (c->s.tls && want_input(c) && nbd_tls_in_pending(c->s.tls))
		return; /* decrypted bytes wait in GnuTLS: the socket will not say so */
	short ev = (short)((want_input(c) ? POLLIN : 0) | (out ? POLLOUT : 0));
	struct pollfd p[2] = {
		{ .fd = ev ? c->s.fd : -1, .events = ev }, /* -1: no POLLHUP spin */
		{ .fd = c->lane.efd, .events = POLLIN },
	};
	/* Nothing in the queue: what is held is in the lane or the output
	 * queue, or the reader has room; one of them wakes us. */
	(void)poll(p, c->lane.started ? 2 : 1, -1);
}

static int transmission(struct conn *c)
{
	int64_t slice = WAIT_MIN_NS;
	/* We wait only when a whole pass changed nothing: the reader last ran
	 * after every completion and send, so its stall (or an empty socket)
	 * is current. */
	for (;;) {
		bool moved = reap(c);
		moved |= lane_collect(c);
		moved |= out_flush(c);
		moved |= read_input(c);
		submit(c);
		if (c->ended && c->nreqs == 0 &&
		    !(c->s.tls && !c->out_dead && nbd_tls_out_pending(c->s.tls)))
			break;
		if (moved)
			slice = WAIT_MIN_NS;
		else
			wait_event(c, &slice);
	}
	return c->rc;
}

int nbd_conn_run(int fd, const struct nbd_server *srv)
{
	struct conn *c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	c->s = (struct nbd_session){ .fd = fd, .srv = srv };
	c->lane.efd = -1;
	int e = nbd_handshake(&c->s);
	if (e <= 0) {
		nbd_tls_end(&c->s);
		free(c);
		return e;
	}
	c->helpers = srv->workers ? srv->workers : NBD_DEFAULT_WORKERS;
	if (!(c->rbuf = malloc(RBUF_BYTES))) {
		nbd_tls_end(&c->s);
		free(c);
		return -ENOMEM;
	}
	struct nbd_counters *cnt = c->s.exp->counters;
	if (cnt) {
		atomic_fetch_add(&cnt->conns, 1);
		atomic_fetch_add(&cnt->conns_total, 1);
	}
	pthread_mutex_init(&c->lane.mu, NULL);
	pthread_cond_init(&c->lane.cv, NULL);
	e = transmission(c);
	/* Every request has been answered (or dropped with its client), so
	 * the queue and the lane are idle. */
	vc_aio_close(c->q);
	lane_stop(&c->lane);
	pthread_cond_destroy(&c->lane.cv);
	pthread_mutex_destroy(&c->lane.mu);
	if (cnt)
		atomic_fetch_sub(&cnt->conns, 1);
	nbd_tls_end(&c->s);
	for (struct creq *q = c->free, *next; q; q = next) {
		next = q->next;
		free(q);
	}
	free(c->rbuf);
	free(c);
	return e;
}
