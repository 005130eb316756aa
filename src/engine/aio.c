/* Asynchronous I/O queues (vc_aio_*, include/vramcache.h).
 *
 * One owner thread submits and reaps; a request goes one of three ways at
 * submission:
 *   ready   done at once: a read whose pages are all in the host tier
 *           (copied out, lock-free), or a request refused by its check
 *   device  a read of at most VC_AIO_FAST_PAGES pages, all cached, some in
 *           the GPU tier: its host pages are copied at once, its GPU pages
 *           stay pinned while their moves into the queue's bounce pages
 *           are in flight; the GPU moves of all requests of one submit
 *           call go to the device queue as one submission. Reaping polls
 *           their completions (one load per ring lane) and copies out.
 *   helper  everything that may wait (misses, writes, flushes, large
 *           reads, reads racing a page move, bounce pages exhausted): the
 *           queue's helper threads run the synchronous call.
 * So a thread keeps any number of cached reads in flight without a thread
 * per request, and the device sees one submission per submit call.
 *
 * Lists: `ready` and `dev` belong to the owner; `pending` and `done`
 * (helpers' input and output) are under q->mu. Pins: a device request
 * holds its GPU pages pinned until reaped (page.h: cleaning, eviction and
 * writers wait for or skip pinned pages), host pages never past submit.
 * Cost: submit O(pages) lock-free plus one device submission; reap O(device
 * requests in flight) loads per pass; helpers one mutex handoff each way.
 */
#include "engine/engine.h"

#include <sched.h>

#include "base/atomics.h"

/* Bounce pages per queue: `depth` reads of VC_AIO_FAST_PAGES, within [64,
 * 2048] (8 MiB of pinned memory at 4 KiB: 2048 reads of 4 KiB or 64 of
 * 128 KiB in flight). A read that finds too few free first waits for
 * device reads in flight to finish (microseconds), then, if there are none,
 * goes to a helper. */
#define AIO_BOUNCE_MIN 64u
#define AIO_BOUNCE_MAX 2048u
#define AIO_HELPERS_DEFAULT 4u
#define AIO_HELPERS_MAX 64u

/* A device request's state, allocated at submit (one allocation). */
struct dreq {
	struct vc_aio_req *req;
	struct dreq *next;
	uint32_t n, ng; /* pages, and those in the GPU tier */
	uint8_t gpu;    /* the part its GPU pages are in (one: else a helper reads it) */
	struct vc_ticket *tk; /* ng tickets, after pg[] */
	struct dpage {
		struct vc_page *p; /* pinned GPU page, or NULL (host: copied) */
		uint32_t in, k;    /* offset in the page, bytes */
		uint32_t bounce;   /* bounce slot of a GPU page */
	} pg[];
};

/* The library's part of a request while it is in flight: req->_priv[0]
 * links it in the queue's lists. */
static struct vc_aio_req *next_req(const struct vc_aio_req *r)
{
	return r->_priv[0];
}

static void set_next(struct vc_aio_req *r, struct vc_aio_req *next)
{
	r->_priv[0] = next;
}

struct vc_aio {
	struct vc_cache *c;
	unsigned depth, inflight;
	unsigned passes; /* progress passes, owner's */
	/* Owner's. */
	struct vc_aio_req *ready, *ready_tail;
	struct dreq *dev, *dev_tail;
	struct vc_tiermem *bounce; /* NULL without a GPU tier served in place */
	uint32_t *bfree, nbfree;
	/* Helpers': under mu. */
	pthread_mutex_t mu;
	pthread_cond_t work, donecv;
	struct vc_aio_req *pending, *pending_tail, *done, *done_tail;
	unsigned nhelpers, maxhelpers, idle, npending; /* npending: requests in pending */
	bool closing;
	pthread_t tid[AIO_HELPERS_MAX];
};

static void push(struct vc_aio_req **head, struct vc_aio_req **tail, struct vc_aio_req *r)
{
	set_next(r, NULL);
	if (*tail)
		set_next(*tail, r);
	else
		*head = r;
	*tail = r;
}

static void complete_now(struct vc_aio *q, struct vc_aio_req *r, int64_t result)
{
	r->result = result;
	push(&q->ready, &q->ready_tail, r);
}

/* The synchronous call a helper runs for r. */
static int64_t run_sync(struct vc_aio_req *r)
{
	switch (r->op) {
	case VC_AIO_READ:
		return vc_volume_read(r->vol, r->buf, (size_t)r->len, r->off);
	case VC_AIO_WRITE: {
		ssize_t n = vc_volume_write(r->vol, r->buf, (size_t)r->len, r->off);
		if (n >= 0 && (r->flags & VC_AIO_FUA)) {
			int e = vc_volume_flush_range(r->vol, r->off, r->len);
			if (e < 0)
				return e;
		}
		return n;
	}
	default: /* VC_AIO_FLUSH; others were refused at submit */
		return vc_volume_flush(r->vol);
	}
}

static void *helper_main(void *arg)
{
	struct vc_aio *q = arg;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		while (!q->pending && !q->closing) {
			q->idle++;
			pthread_cond_wait(&q->work, &q->mu);
			q->idle--;
		}
		struct vc_aio_req *r = q->pending;
		if (!r)
			break; /* closing, nothing left */
		q->pending = next_req(r);
		if (!q->pending)
			q->pending_tail = NULL;
		q->npending--;
		pthread_mutex_unlock(&q->mu);
		int64_t res = run_sync(r);
		pthread_mutex_lock(&q->mu);
		r->result = res;
		push(&q->done, &q->done_tail, r);
		pthread_cond_signal(&q->donecv);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

/* Hands r to the helpers, starting one if more requests wait than
 * helpers sleep (an idle helper counts as idle until it wakes, so a burst
 * handed over at once would otherwise all go to the one that was idle)
 * and the cap allows. A queue that cannot start any runs r itself. */
static void to_helper(struct vc_aio *q, struct vc_aio_req *r)
{
	pthread_mutex_lock(&q->mu);
	push(&q->pending, &q->pending_tail, r);
	q->npending++;
	if (q->npending > q->idle && q->nhelpers < q->maxhelpers &&
	    pthread_create(&q->tid[q->nhelpers], NULL, helper_main, q) == 0)
		q->nhelpers++;
	if (q->nhelpers == 0) { /* no thread at all: run it here */
		q->pending = q->pending_tail = NULL;
		q->npending = 0;
		pthread_mutex_unlock(&q->mu);
		complete_now(q, r, run_sync(r));
		return;
	}
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->mu);
}

int vc_aio_open(vc_cache *c, unsigned depth, unsigned helpers, vc_aio **out)
{
	if (!c || !out)
		return vc_err(-EINVAL, "vc_aio_open: NULL argument");
	if (depth == 0 || depth > 65536)
		return vc_err(-EINVAL, "vc_aio_open: depth %u (1 to 65536)", depth);
	if (helpers > AIO_HELPERS_MAX)
		return vc_err(-EINVAL, "vc_aio_open: %u helpers (at most %u)", helpers, AIO_HELPERS_MAX);
	struct vc_aio *q = calloc(1, sizeof *q);
	if (!q)
		return vc_err(-ENOMEM, "out of memory");
	q->c = c;
	q->depth = depth;
	q->maxhelpers = helpers ? helpers : AIO_HELPERS_DEFAULT;
	if (c->gt.serve) {
		uint64_t nb = (uint64_t)depth * VC_AIO_FAST_PAGES;
		nb = nb < AIO_BOUNCE_MIN ? AIO_BOUNCE_MIN : nb > AIO_BOUNCE_MAX ? AIO_BOUNCE_MAX : nb;
		int r = vc_tier_open(c->gpus[0].dev, HOST, nb, c->page_size, &q->bounce);
		if (r == 0 && !(q->bfree = malloc(nb * sizeof *q->bfree)))
			r = vc_err(-ENOMEM, "out of memory");
		if (r < 0) {
			vc_tier_close(q->bounce);
			free(q);
			return r;
		}
		for (uint32_t i = 0; i < nb; i++)
			q->bfree[q->nbfree++] = (uint32_t)(nb - 1 - i);
	}
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->work, NULL);
	vc_cond_init_monotonic(&q->donecv);
	*out = q;
	return 0;
}

/* Releases a device request's pins and bounce pages. */
static void dreq_release(struct vc_aio *q, struct dreq *d)
{
	for (uint32_t i = 0; i < d->n; i++)
		if (d->pg[i].p) {
			eng_unpin(q->c, d->pg[i].p);
			q->bfree[q->nbfree++] = d->pg[i].bounce;
		}
	free(d);
}

/* Tries r as a device request; false (nothing held) when it must go to a
 * helper. Fills moves[] (room VC_AIO_FAST_PAGES from *nm on) with its GPU
 * moves; *dout gets the request when it has GPU pages, NULL when it was
 * all host pages (then it is complete). */
static bool try_fast(struct vc_aio *q, struct tstate *t, struct vc_aio_req *r, struct vc_move *moves,
		     uint32_t *nm, struct dreq **dout)
{
	struct vc_cache *c = q->c;
	struct vc_volume *v = r->vol;
	uint64_t len = r->len;
	if (r->off >= v->size)
		len = 0;
	else if (len > v->size - r->off)
		len = v->size - r->off;
	uint64_t npages = len ? ((r->off + len - 1) >> c->pshift) - (r->off >> c->pshift) + 1 : 0;
	if (npages > VC_AIO_FAST_PAGES)
		return false;
	struct dreq *d = malloc(sizeof *d + npages * sizeof d->pg[0] +
				npages * sizeof(struct vc_ticket));
	if (!d)
		return false;
	d->req = r;
	d->n = d->ng = 0;
	d->tk = (struct vc_ticket *)&d->pg[npages];
	/* Pin every page first: a request that cannot complete in place has
	 * copied and counted nothing. */
	bool ok = true;
	for (uint64_t done = 0; done < len && ok;) {
		uint64_t pno;
		uint32_t in;
		size_t k = eng_piece(v, r->off + done, (size_t)(len - done), &pno, &in);
		int tier;
		/* With dedup a GPU page is D moves: its requests go to the
		 * helpers (read in place there), not the one-move-a-page path. */
		bool gpu_ok = q->bounce && q->nbfree > d->ng && !eng_dd(c);
		struct vc_page *p = eng_pin_fast(c, pno, gpu_ok, &tier);
		if (!p) {
			ok = false;
			break;
		}
		if (tier == GPU && d->ng && p->gpu != d->gpu) {
			/* Pages in two parts: the helper's read fans out. */
			eng_unpin(c, p);
			ok = false;
			break;
		}
		struct dpage *g = &d->pg[d->n++];
		*g = (struct dpage){ .p = p, .in = in, .k = (uint32_t)k };
		if (tier == GPU) {
			d->gpu = p->gpu;
			g->bounce = q->bfree[--q->nbfree];
			moves[(*nm)++] = eng_mv_up(c, slot_addr_gpu(c, p),
						   vc_tier_addr(q->bounce, g->bounce), pno);
			d->ng++;
		} else {
			g->bounce = UINT32_MAX;
		}
		done += k;
	}
	if (!ok) {
		for (uint32_t i = 0; i < d->n; i++) {
			if (d->pg[i].bounce != UINT32_MAX)
				q->bfree[q->nbfree++] = d->pg[i].bounce;
			eng_unpin(c, d->pg[i].p);
		}
		*nm -= d->ng;
		free(d);
		return false;
	}
	/* Host pages now; GPU pages when their moves are done. */
	char *buf = r->buf;
	for (uint32_t i = 0, pos = 0; i < d->n; pos += d->pg[i++].k) {
		struct dpage *g = &d->pg[i];
		if (g->bounce != UINT32_MAX)
			continue;
		memcpy(buf + pos, host_data(c, g->p) + g->in, g->k);
		eng_note_hit_fast(c, t, g->p, HOST);
		eng_unpin(c, g->p);
		g->p = NULL;
	}
	r->result = (int64_t)len;
	if (d->ng == 0) {
		free(d);
		*dout = NULL;
	} else {
		*dout = d;
	}
	return true;
}

/* A device request whose moves are done: copy out, count, unpin. */
static void dreq_finish(struct vc_aio *q, struct tstate *t, struct dreq *d, int err)
{
	struct vc_cache *c = q->c;
	char *buf = d->req->buf;
	uint32_t pos = 0;
	struct vc_page *bad = NULL; /* failed its integrity check: dropped once unpinned */
	uint64_t bad_pno = 0, bad_nonce = 0;
	for (uint32_t i = 0; i < d->n; pos += d->pg[i++].k) {
		struct dpage *g = &d->pg[i];
		if (!g->p)
			continue;
		const unsigned char *src = vc_tier_host(q->bounce, g->bounce);
		if (err == 0 && eng_integ(c) && (err = eng_check(c, g->p, src, &bad_nonce)) < 0) {
			bad = g->p;
			bad_pno = g->p->pno;
		}
		if (err == 0) {
			memcpy(buf + pos, src + g->in, g->k);
			eng_note_hit_fast(c, t, g->p, GPU);
		}
	}
	if (eng_dev_err(err)) {
		/* Its part failed: failed for everyone, and a helper reads the
		 * request again (misses now, from the store). */
		struct vc_aio_req *r = d->req;
		struct vc_gpu *gp = &c->gpus[d->gpu];
		dreq_release(q, d);
		eng_gpu_fail_unlocked(c, gp, err);
		to_helper(q, r);
		return;
	}
	if (t) {
		atomic_fetch_add_explicit(&t->d2h, (uint64_t)d->ng * c->page_size, memory_order_relaxed);
		atomic_fetch_add_explicit(&t->gpu_hits[d->gpu], d->ng, memory_order_relaxed);
	}
	if (err < 0)
		d->req->result = err;
	push(&q->ready, &q->ready_tail, d->req);
	dreq_release(q, d);
	if (bad)
		eng_integ_drop_unlocked(c, bad, bad_pno, bad_nonce);
}

/* The check every request passes before anything runs: 0 or -errno. */
static int check(const struct vc_aio_req *r)
{
	if (r->op != VC_AIO_READ && r->op != VC_AIO_WRITE && r->op != VC_AIO_FLUSH)
		return vc_err(-EINVAL, "vc_aio: unknown op %u", r->op);
	if (r->op != VC_AIO_FLUSH && !r->buf && r->len)
		return vc_err(-EINVAL, "vc_aio: NULL buffer");
	if (r->flags & ~(uint32_t)VC_AIO_FUA)
		return vc_err(-EINVAL, "vc_aio: unknown flags %#x", r->flags);
	if (r->op == VC_AIO_WRITE && r->vol->readonly)
		return vc_err(-EROFS, "vc_aio: the volume is read-only");
	return 0;
}

static void progress(struct vc_aio *q, struct tstate *t);

/* Moves of one device submission: eight full-size fast reads. */
#define AIO_BATCH_MOVES (VC_AIO_FAST_PAGES * 8)

/* Sends the GPU moves of device requests batch[0..nd) as one submission
 * and queues the requests for reaping (or completes them with the error). */
static void dev_submit(struct vc_aio *q, struct tstate *t, const struct vc_move *moves,
		       uint32_t nm, struct dreq **batch, uint32_t nd)
{
	if (nd == 0)
		return;
	struct vc_ticket tk[AIO_BATCH_MOVES];
	struct vc_move pm[AIO_BATCH_MOVES];
	int perr[VC_GPUS_MAX] = { 0 };
	uint32_t at[AIO_BATCH_MOVES]; /* request i's first move in moves[] */
	bool one = true; /* every request's pages in one part */
	for (uint32_t i = 0, m = 0; i < nd; m += batch[i++]->ng) {
		at[i] = m;
		one &= batch[i]->gpu == batch[0]->gpu;
	}
	if (one) { /* the moves as they are: one submission */
		const uint8_t k = batch[0]->gpu;
		perr[k] = vc_batcher_add_n(q->c->gpus[k].bat, moves, nm, tk);
		for (uint32_t i = 0; perr[k] == 0 && i < nd; i++)
			memcpy(batch[i]->tk, tk + at[i], batch[i]->ng * sizeof *tk);
	}
	/* Else one submission per part, of its requests' moves in order. */
	for (uint32_t k = 0; !one && k < q->c->ngpus; k++) {
		uint32_t km = 0;
		for (uint32_t i = 0; i < nd; i++)
			if (batch[i]->gpu == k) {
				memcpy(pm + km, moves + at[i], batch[i]->ng * sizeof *pm);
				km += batch[i]->ng;
			}
		if (km == 0)
			continue;
		perr[k] = vc_batcher_add_n(q->c->gpus[k].bat, pm, km, tk);
		for (uint32_t i = 0, m = 0; perr[k] == 0 && i < nd; i++)
			if (batch[i]->gpu == k) {
				memcpy(batch[i]->tk, tk + m, batch[i]->ng * sizeof *tk);
				m += batch[i]->ng;
			}
	}
	for (uint32_t i = 0; i < nd; i++) {
		struct dreq *d = batch[i];
		int e = perr[d->gpu];
		if (e < 0) {
			dreq_finish(q, t, d, e);
			continue;
		}
		d->next = NULL;
		if (q->dev_tail)
			q->dev_tail->next = d;
		else
			q->dev = d;
		q->dev_tail = d;
	}
}

int vc_aio_submit(vc_aio *q, struct vc_aio_req *const *reqs, unsigned n)
{
	if (!q || (!reqs && n))
		return vc_err(-EINVAL, "vc_aio_submit: NULL argument");
	struct tstate *t = eng_tstate(q->c);
	struct vc_move moves[AIO_BATCH_MOVES];
	struct dreq *batch[AIO_BATCH_MOVES];
	uint32_t nm = 0, nd = 0;
	unsigned taken = 0;
	for (; taken < n && q->inflight < q->depth; taken++) {
		struct vc_aio_req *r = reqs[taken];
		if (!r || !r->vol) {
			if (taken == 0)
				return vc_err(-EINVAL, "vc_aio_submit: NULL request or volume");
			break;
		}
		q->inflight++;
		int e = check(r);
		if (e < 0) {
			complete_now(q, r, e);
			continue;
		}
		if (r->op == VC_AIO_READ) {
			uint64_t pages = r->len ? ((r->off + r->len - 1) >> q->c->pshift) -
							  (r->off >> q->c->pshift) + 1
						: 0;
			if (nm + VC_AIO_FAST_PAGES > AIO_BATCH_MOVES ||
			    (q->bounce && q->nbfree < pages && (nd || q->dev))) {
				dev_submit(q, t, moves, nm, batch, nd);
				nm = nd = 0;
			}
			/* Bounce pages come back as reads in flight finish. */
			while (q->bounce && q->nbfree < pages && q->dev && pages <= VC_AIO_FAST_PAGES) {
				progress(q, t);
				vc_cpu_relax();
			}
			struct dreq *d;
			if (try_fast(q, t, r, moves, &nm, &d)) {
				if (d)
					batch[nd++] = d;
				else
					push(&q->ready, &q->ready_tail, r);
				continue;
			}
		}
		to_helper(q, r);
	}
	dev_submit(q, t, moves, nm, batch, nd);
	return (int)taken;
}

/* Finishes the device requests whose moves are done. Owner only; O(device
 * requests in flight). */
static void progress(struct vc_aio *q, struct tstate *t)
{
	/* The device's health is a driver call: asked once per 256 passes. */
	const bool ask = q->dev && (++q->passes & 255) == 0;
	for (struct dreq **pp = &q->dev, *prev = NULL; *pp;) {
		struct dreq *d = *pp;
		int err;
		if (!vc_batcher_poll_n(q->c->gpus[d->gpu].bat, d->tk, d->ng, ask, &err)) {
			prev = d;
			pp = &d->next;
			continue;
		}
		*pp = d->next;
		if (q->dev_tail == d)
			q->dev_tail = prev;
		dreq_finish(q, t, d, err);
	}
}

/* Moves ready and finished requests to out[*n..max). Owner only. */
static void collect(struct vc_aio *q, struct tstate *t, struct vc_aio_req **out, unsigned *n,
		    unsigned max)
{
	progress(q, t);
	if (q->nhelpers) {
		pthread_mutex_lock(&q->mu);
		while (q->done) {
			struct vc_aio_req *r = q->done;
			q->done = next_req(r);
			push(&q->ready, &q->ready_tail, r);
		}
		q->done_tail = NULL;
		pthread_mutex_unlock(&q->mu);
	}
	while (*n < max && q->ready) {
		struct vc_aio_req *r = q->ready;
		q->ready = next_req(r);
		if (!q->ready)
			q->ready_tail = NULL;
		out[(*n)++] = r;
		q->inflight--;
	}
}

int vc_aio_reap(vc_aio *q, struct vc_aio_req **out, unsigned min, unsigned max,
		int64_t timeout_ns)
{
	if (!q || (!out && max))
		return vc_err(-EINVAL, "vc_aio_reap: NULL argument");
	if (min > max || min > q->inflight)
		return vc_err(-EINVAL, "vc_aio_reap: at least %u of at most %u, with %u in flight", min,
			      max, q->inflight);
	struct tstate *t = eng_tstate(q->c);
	const uint64_t t0 = vc_now_ns();
	unsigned n = 0;
	for (unsigned spins = 0;; spins++) {
		collect(q, t, out, &n, max);
		if (n >= min || timeout_ns == 0 || n == max)
			break;
		uint64_t waited = vc_now_ns() - t0;
		if (timeout_ns > 0 && waited >= (uint64_t)timeout_ns)
			break;
		if (q->dev) {
			/* Device moves take microseconds: poll, then offer the core. */
			if (spins < 256)
				vc_cpu_relax();
			else
				sched_yield();
			continue;
		}
		/* Only helpers' requests left: sleep until one is done. */
		pthread_mutex_lock(&q->mu);
		if (!q->done) {
			uint64_t left = timeout_ns > 0 ? (uint64_t)timeout_ns - waited : 1000000000ull;
			struct timespec ts;
			uint64_t at = vc_now_ns() + (left < 100000000ull ? left : 100000000ull);
			ts.tv_sec = (time_t)(at / 1000000000ull);
			ts.tv_nsec = (long)(at % 1000000000ull);
			pthread_cond_timedwait(&q->donecv, &q->mu, &ts);
		}
		pthread_mutex_unlock(&q->mu);
	}
	return (int)n;
}

unsigned vc_aio_inflight(const vc_aio *q)
{
	return q ? q->inflight : 0;
}

void vc_aio_close(vc_aio *q)
{
	if (!q)
		return;
	struct vc_aio_req *out[64];
	while (q->inflight) {
		unsigned k = q->inflight < 64 ? q->inflight : 64;
		(void)vc_aio_reap(q, out, 1, k, -1);
	}
	pthread_mutex_lock(&q->mu);
	q->closing = true;
	pthread_cond_broadcast(&q->work);
	pthread_mutex_unlock(&q->mu);
	for (unsigned i = 0; i < q->nhelpers; i++)
		pthread_join(q->tid[i], NULL);
	pthread_cond_destroy(&q->work);
	pthread_cond_destroy(&q->donecv);
	pthread_mutex_destroy(&q->mu);
	vc_tier_close(q->bounce);
	free(q->bfree);
	free(q);
}
