/* `serve`'s connection table: one thread per client, and the limits that
 * keep idle sockets from locking clients out.
 *
 * A connection is in one of two states: handshaking (accepted, not yet in
 * transmission) or admitted (its GO or EXPORT_NAME was accepted by
 * conns_admit, nbd_server.admit). Only admitted ones count against
 * max_conns; a GO past it is refused with NBD_REP_ERR_POLICY, which a
 * client can report. Handshakes are bounded apart: at most max_handshakes
 * at once (the next accept hangs up on the oldest), and each has
 * timeout_ns from its accept to reach transmission (conns_expire, run by
 * the accept loop, hangs up on it). So sockets that connect and send
 * nothing hold at most max_handshakes slots, for at most the time limit,
 * and never keep a new client from its handshake or an admitted one from
 * its requests.
 *
 * Hanging up is shutdown(SHUT_RDWR) under the lock: the connection's
 * thread sees EOF (or a failed write) wherever it is, TLS handshake
 * included, and ends; its slot stays taken until then. The fd is closed
 * only by its own thread, under the lock, so a shutdown never reaches a
 * reused descriptor.
 *
 * Cost: accept, expire and admit scan the table: O(slots), a few hundred,
 * once per connection or per poll wake-up. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli/serve.h"

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct conn_arg {
	struct serve_conns *t;
	unsigned slot;
};

/* nbd_server.admit: a client asks to enter transmission. */
static bool conns_admit(void *ctx, int fd)
{
	struct serve_conns *t = ctx;
	bool ok = false;
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < t->nslots; i++) {
		struct serve_slot *s = &t->slots[i];
		if (s->fd != fd)
			continue;
		if (s->expired || s->admitted || t->admitted >= t->max_conns)
			break;
		s->admitted = true;
		t->admitted++;
		t->handshaking--;
		ok = true;
		break;
	}
	pthread_mutex_unlock(&t->lock);
	if (!ok)
		serve_log_limited(LOG_WARNING, "refusing a client: %u connections (--max-connections)",
				  t->max_conns);
	return ok;
}

int conns_init(struct serve_conns *t, struct nbd_server *srv, unsigned max_conns,
	       unsigned max_handshakes, unsigned timeout_ms)
{
	memset(t, 0, sizeof *t);
	t->srv = srv;
	t->max_conns = max_conns;
	t->max_handshakes = max_handshakes;
	t->timeout_ns = (uint64_t)timeout_ms * 1000000ull;
	t->nslots = max_conns + 2 * max_handshakes;
	if (!(t->slots = calloc(t->nslots, sizeof *t->slots)))
		return -ENOMEM;
	for (unsigned i = 0; i < t->nslots; i++)
		t->slots[i].fd = -1;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->gone, NULL);
	srv->admit = conns_admit;
	srv->admit_ctx = t;
	return 0;
}

/* Hangs up on a handshaking slot; lock held. */
static void hang_up(struct serve_conns *t, struct serve_slot *s)
{
	shutdown(s->fd, SHUT_RDWR);
	s->expired = true;
	t->handshaking--;
}

static void *conn_thread(void *p)
{
	struct conn_arg *a = p;
	struct serve_conns *t = a->t;
	struct serve_slot *s = &t->slots[a->slot];
	int fd = s->fd; /* set before the thread started */
	int e = nbd_conn_run(fd, t->srv);
	pthread_mutex_lock(&t->lock);
	bool expired = s->expired;
	pthread_mutex_unlock(&t->lock);
	if (e < 0 && !expired)
		serve_log_limited(LOG_INFO, "connection ended: %s",
				  e == -EPROTO	       ? "protocol violation"
				  : e == -EKEYREJECTED ? "TLS handshake failed"
				  : e == -EACCES       ? "TLS required, client did not start it"
						       : strerror(-e));
	pthread_mutex_lock(&t->lock);
	close(fd);
	if (s->admitted)
		t->admitted--;
	else if (!s->expired)
		t->handshaking--;
	s->fd = -1;
	s->admitted = s->expired = false;
	t->live--;
	pthread_cond_broadcast(&t->gone);
	pthread_mutex_unlock(&t->lock);
	free(a);
	return NULL;
}

void conns_accept(struct serve_conns *t, int fd)
{
	pthread_mutex_lock(&t->lock);
	if (t->handshaking >= t->max_handshakes) {
		struct serve_slot *old = NULL;
		for (unsigned i = 0; i < t->nslots; i++) {
			struct serve_slot *s = &t->slots[i];
			if (s->fd >= 0 && !s->admitted && !s->expired &&
			    (!old || s->start_ns < old->start_ns))
				old = s;
		}
		if (old) {
			hang_up(t, old);
			serve_log_limited(LOG_WARNING,
					  "%u clients in the handshake: dropping the oldest",
					  t->max_handshakes);
		}
	}
	struct serve_slot *s = NULL;
	for (unsigned i = 0; i < t->nslots && !s; i++)
		if (t->slots[i].fd < 0)
			s = &t->slots[i];
	struct conn_arg *a = s ? malloc(sizeof *a) : NULL;
	if (a) {
		/* The slot's last thread has unlocked for the last time: only
		 * its exit is left, so this join is short. Joined, not
		 * detached: a thread's exit runs the engine's thread-state
		 * destructor, which must be over before vc_close. */
		if (s->joinable)
			pthread_join(s->tid, NULL);
		*s = (struct serve_slot){ .fd = fd, .start_ns = now_ns() };
		*a = (struct conn_arg){ t, (unsigned)(s - t->slots) };
		if (pthread_create(&s->tid, NULL, conn_thread, a) == 0) {
			s->joinable = true;
			t->live++;
			t->handshaking++;
		} else {
			s->fd = -1;
			free(a);
			a = NULL;
		}
	}
	pthread_mutex_unlock(&t->lock);
	if (!a) {
		serve_log_limited(LOG_WARNING, "refusing a connection (%u slots taken)", t->nslots);
		close(fd);
	}
}

int conns_expire(struct serve_conns *t)
{
	if (!t->timeout_ns)
		return -1;
	uint64_t now = now_ns(), next = UINT64_MAX;
	unsigned dropped = 0;
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < t->nslots; i++) {
		struct serve_slot *s = &t->slots[i];
		if (s->fd < 0 || s->admitted || s->expired)
			continue;
		uint64_t due = s->start_ns + t->timeout_ns;
		if (due <= now) {
			hang_up(t, s);
			dropped++;
		} else if (due < next) {
			next = due;
		}
	}
	pthread_mutex_unlock(&t->lock);
	if (dropped)
		serve_log_limited(LOG_INFO, "%u client(s) did not finish the handshake in %llu ms",
				  dropped, (unsigned long long)(t->timeout_ns / 1000000));
	/* Rounded up, so the wake-up is never early (a 0 ms spin). */
	return next == UINT64_MAX ? -1 : (int)((next - now + 999999) / 1000000);
}

void conns_close(struct serve_conns *t)
{
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < t->nslots; i++)
		if (t->slots[i].fd >= 0)
			shutdown(t->slots[i].fd, SHUT_RD); /* readers see EOF; replies still go out */
	while (t->live > 0)
		pthread_cond_wait(&t->gone, &t->lock);
	pthread_mutex_unlock(&t->lock);
	for (unsigned i = 0; i < t->nslots; i++)
		if (t->slots[i].joinable)
			pthread_join(t->slots[i].tid, NULL);
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->gone);
	free(t->slots);
	t->slots = NULL;
}
