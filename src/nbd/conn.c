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
 * nothing is in flight (so one maximum-size request always proceeds). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "nbd/nbd.h"
#include "nbd/wire.h"

struct job {
	struct nbd_request r;
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

		uint32_t err = nbd_request_exec(&c->s, &j->r);
		reply_locked(c, &j->r, err);

		pthread_mutex_lock(&c->qlock);
		c->inflight--;
		c->inflight_bytes -= payload_bytes(&j->r);
		pthread_cond_signal(&c->room);
		free(j->r.data);
		free(j);
	}
	pthread_mutex_unlock(&c->qlock);
	return NULL;
}

/* Reads requests until DISC, EOF, an I/O error or a bad magic. */
static int reader(struct conn *c)
{
	int fd = c->s.fd;
	for (;;) {
		unsigned char h[NBD_REQUEST_LEN];
		int e = nbd_read_full(fd, h, sizeof(h));
		if (e < 0)
			return e == -ECONNRESET ? 0 : e;
		struct nbd_request r;
		if ((e = nbd_request_decode(h, &r)) < 0)
			return e; /* cannot re-frame the stream: hang up */
		if (r.type == NBD_CMD_DISC)
			return 0;
		uint32_t err = nbd_request_check(&c->s, &r);
		bool payload_in = r.type == NBD_CMD_WRITE;
		if (err == 0) {
			uint64_t b = payload_bytes(&r);
			pthread_mutex_lock(&c->qlock);
			while (c->inflight > 0 && c->inflight_bytes + b > NBD_INFLIGHT_BYTES)
				pthread_cond_wait(&c->room, &c->qlock);
			c->inflight++;
			c->inflight_bytes += b;
			pthread_mutex_unlock(&c->qlock);
		}
		struct job *j = err ? NULL : calloc(1, sizeof(*j));
		if (j && payload_bytes(&r) > 0 && !(r.data = malloc(r.length))) {
			free(j);
			j = NULL;
		}
		if (!err && !j) {
			err = NBD_ENOMEM;
			pthread_mutex_lock(&c->qlock);
			c->inflight--;
			c->inflight_bytes -= payload_bytes(&r);
			pthread_mutex_unlock(&c->qlock);
		}
		if (payload_in) {
			e = j ? nbd_read_full(fd, r.data, r.length) : nbd_skip(fd, r.length);
			if (e < 0) { /* the client vanished mid-request */
				if (j) {
					pthread_mutex_lock(&c->qlock);
					c->inflight--;
					c->inflight_bytes -= payload_bytes(&r);
					pthread_mutex_unlock(&c->qlock);
					free(r.data);
					free(j);
				}
				return e == -ECONNRESET ? 0 : e;
			}
		}
		if (!j) {
			r.data = NULL;
			if (reply_locked(c, &r, err) < 0)
				return 0;
			continue;
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
	}
}

int nbd_conn_run(int fd, const struct nbd_server *srv)
{
	struct conn c = { .s = { .fd = fd, .srv = srv } };
	int e = nbd_handshake(&c.s);
	if (e <= 0)
		return e;
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
	return e;
}
