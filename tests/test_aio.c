/* The asynchronous interface (vc_aio_*) against a reference model.
 *
 * As in test_engine_model.c, a shadow copy of the backing store is the
 * model. NTHREADS submitter threads each open their own queue and keep up
 * to `depth` random requests in flight (1, 8 or 64, depending on the run)
 * on bytes they alone own. Ownership is laid out so that owners share
 * pages: the first zone of the store is cut into 1000-byte regions dealt
 * round-robin to the threads, so every page sees concurrent
 * read-modify-writes from several queues; the second zone is cut into
 * 150000-byte chunks dealt the same way (chunk edges fall inside pages), so
 * that writes can be longer than VC_AIO_FAST_PAGES pages of 4 KiB.
 *
 * Requests: reads of 1 byte to 64 KiB anywhere, some of more than
 * VC_AIO_FAST_PAGES pages of 4 KiB (the helper path) and some across or
 * past the end of the store (a short count); writes of 1 byte to 150000
 * bytes on the thread's own bytes, some with VC_AIO_FUA; both aligned and
 * unaligned; flushes (VC_AIO_FLUSH) with garbage in off and len, which are
 * ignored. Order among requests in flight is unspecified, so within one
 * queue a write never overlaps another request in flight (they may share
 * pages); when a read is reaped, every byte it returned that the thread
 * owns is checked against the shadow (other threads' bytes may be
 * changing). Each thread submits several requests at once, sometimes more
 * than its queue has room for (the surplus must be left untaken, and goes
 * in after a reap), reaps with min 0 and timeout 0 (a poll), with a short
 * timeout (which may return fewer than min), and blocking with min from 1
 * to everything in flight, and checks vc_aio_inflight after every call. A
 * blocking reap may thus wait for a write that needs a page which one of
 * the queue's own completed, unreaped reads holds pinned in the GPU tier:
 * the library must release such pins while it waits.
 *
 * Durability, as the header states it: a FUA write is in the store when it
 * is reaped, and so is every write in write-through mode; a flush covers
 * the writes reaped before it was submitted. The test reads the backing
 * file itself to check both: at a FUA (or write-through) write's reaping,
 * its bytes; at a flush's reaping, the bytes of the last writes reaped
 * before its submission, where no later write has touched them.
 *
 * A chaos thread calls vc_drop, vc_prefetch (both tiers) and vc_flush at
 * random, which must change no byte. The tiers are the tiny ones of
 * test_engine_model.c, so promotion, demotion, cleaning and tail eviction
 * run all the time; the runs cover both write modes, page sizes 4096 and
 * 512, the GPU log's cleaner forced with both policies and switched off,
 * both vc_config.gpu_hits modes and 0 (the default) to 3 helper threads.
 *
 * After the threads, single-threaded: the API's error paths (depths out of
 * range, submission past the depth, requests that fail their checks and
 * complete with -EINVAL or -EROFS, among them writes to a read-only volume,
 * reap with min > max or min > in flight, reads and writes past the end),
 * and vc_aio_close with a full queue, whose writes must all be done when
 * it returns. Then vc_flush and vc_close, and the backing file must equal
 * the shadow.
 *
 * Options (environment): VC_TEST_DEVICE=emu|cuda; VC_TEST_OPS, requests
 * per thread per run (default 1500, half that at 512-byte pages);
 * VC_TEST_QUICK=1, a short run (300); VC_TEST_SEED, the seed the runs'
 * seeds derive from; VC_TEST_RUN=n, only run n. A failure prints all three
 * (the thread interleaving aside, they reproduce the run). No check
 * depends on timing. Arguments: the parts to run, `wt` (runs 0 to 4) and
 * `wb` (5 to 9), both by default; ctest runs each in a process of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include "testutil.h"

#define NTHREADS 4
#define REGION 1000                /* zone A: owner = region % NTHREADS */
#define ZONE_A (3000 * REGION)     /* bytes [0, ZONE_A) */
#define CHUNK 150000               /* zone B: owner = chunk % NTHREADS */
#define NCHUNKS (6 * NTHREADS)
#define STORE (ZONE_A + (uint64_t)NCHUNKS * CHUNK) /* 6600000: the last page is partial */
#define MEDIUM_MAX 65536
/* Reads longer than this cannot be fast-path reads at any page size. */
#define BIG_MIN (VC_AIO_FAST_PAGES * 4096 + 1)
#define BIG_MAX 200000
#define EXTRA 4          /* requests a thread may have beyond its queue's depth */
#define FLUSH_SAMPLE 8   /* recent writes a flush's completion checks in the store */
#define SAMPLE_BYTES 8192 /* ... at most this much of each */

static const struct gcv gc_oldest = { "oldest/2-page segments", 2, VC_GC_OLDEST, 3, 0.3, 0.0 };
static const struct gcv gc_cb = { "cost-benefit/8-page segments", 8, VC_GC_COST_BENEFIT, 2, 0.25,
				  0.01 };
static const struct gcv gc_off = { "off", 2, VC_GC_OFF, 4, 0.2, 0.0 };

struct run {
	vc_cache *c;
	vc_volume *v; /* volume 0, the modelled store */
	char path[256];
	unsigned char *shadow;
	uint32_t *lastw; /* per byte: its owner's id of the last write to it, 0: none */
	uint64_t size;
	uint32_t page_size;
	int ops;
	int write_mode;
	unsigned depth, helpers;
	uint64_t seed;
	atomic_int stop;
};

/* One request and what the model expects of it. The request is the first
 * member, so a reaped pointer leads back to its slot. */
struct slot {
	struct vc_aio_req req;
	unsigned char *buf;
	uint64_t off, len; /* the model's copies: the request is the library's in flight */
	uint32_t op, flags;
	uint64_t expect;    /* READ: the count it must return */
	uint32_t wid;       /* WRITE: its id */
	uint64_t submitted; /* FLUSH: the thread's clock when it was taken */
	unsigned nsample;   /* FLUSH: writes reaped before it, to look for in the store */
	uint64_t soff[FLUSH_SAMPLE], slen[FLUSH_SAMPLE];
	bool busy;     /* generated and not yet reaped */
	bool inflight; /* taken by the queue and not yet reaped */
};

struct worker {
	struct run *r;
	int id;
	uint64_t seed0, seed;
	vc_aio *q;
	unsigned nslots;
	struct slot *slots;
	struct slot **pend; /* generated, not yet taken, in submission order */
	unsigned npend;
	struct slot **fl; /* taken, not yet reaped */
	unsigned nfl;
	struct vc_aio_req **out;
	uint64_t *wdone; /* per write id: the clock when reaped, UINT64_MAX before */
	uint32_t nw;
	uint64_t clock;
	uint64_t roff[FLUSH_SAMPLE], rlen[FLUSH_SAMPLE]; /* the last writes reaped */
	unsigned nrecent;
	int fd; /* the backing file, to see what the store holds */
	unsigned char *fbuf;
	/* What ran. */
	unsigned long n_read, n_big, n_short, n_write, n_fua, n_flush, n_surplus, n_poll,
		n_timed, n_block;
};

/* Printed at exit when a check fails: which run, with which seed. */
static char g_run[256];
static atomic_int g_passed;

static void report_run(void)
{
	if (!atomic_load(&g_passed) && g_run[0])
		fprintf(stderr, "test_aio: failed in run %s\n", g_run);
}

static int owner(uint64_t off)
{
	if (off < ZONE_A)
		return (int)(off / REGION % NTHREADS);
	return (int)((off - ZONE_A) / CHUNK % NTHREADS);
}

/* End of the ownership piece that holds byte off. */
static uint64_t piece_end(uint64_t off)
{
	if (off < ZONE_A)
		return (off / REGION + 1) * REGION;
	return ZONE_A + ((off - ZONE_A) / CHUNK + 1) * CHUNK;
}

static uint64_t rnd(struct worker *w, uint64_t n)
{
	return n ? t_rand(&w->seed) % n : 0;
}

static uint64_t round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

static void print_req(const struct worker *w, const struct slot *s)
{
	static const char *ops[] = { "read", "write", "flush" };
	fprintf(stderr,
		"thread %d (seed %#llx): %s%s off %llu len %llu, result %lld (%s), expected %lld\n",
		w->id, (unsigned long long)w->seed0, s->op < 3 ? ops[s->op] : "bad op",
		s->flags & VC_AIO_FUA ? " FUA" : "", (unsigned long long)s->off,
		(unsigned long long)s->len, (long long)s->req.result,
		s->req.result < 0 ? vc_strerror((int)s->req.result) : "ok",
		(long long)(s->op == VC_AIO_READ ? (int64_t)s->expect
				 : s->op == VC_AIO_WRITE ? (int64_t)s->len : 0));
}

static void fail(const struct worker *w, const struct slot *s, const char *what)
{
	if (s)
		print_req(w, s);
	fprintf(stderr, "thread %d: %s\n", w->id, what);
	exit(1);
}

/* Compares got[] (the bytes at off) with want[] and names the first
 * difference. */
static void compare(const struct worker *w, const struct slot *s, const unsigned char *got,
		    const unsigned char *want, uint64_t off, uint64_t len, const char *what)
{
	if (memcmp(got, want, len) == 0)
		return;
	for (uint64_t i = 0; i < len; i++)
		if (got[i] != want[i]) {
			fprintf(stderr, "%s: byte %llu is %02x, model %02x\n", what,
				(unsigned long long)(off + i), got[i], want[i]);
			break;
		}
	fail(w, s, "wrong bytes");
}

/* Reads [off, off+len) of the backing file into w->fbuf. */
static void read_store(struct worker *w, uint64_t off, uint64_t len)
{
	CHECK(pread(w->fd, w->fbuf, len, (off_t)off) == (ssize_t)len);
}

/* ---- Generating requests ----------------------------------------------- */

static bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

/* May a request [off, off+len) of kind op join the thread's requests that
 * are generated and not yet reaped? Not when it overlaps one of them and
 * either is a write. */
static bool fits(const struct worker *w, uint32_t op, uint64_t off, uint64_t len)
{
	for (unsigned i = 0; i < w->nslots; i++) {
		const struct slot *o = &w->slots[i];
		if (!o->busy || o->op == VC_AIO_FLUSH)
			continue;
		if ((op == VC_AIO_WRITE || o->op == VC_AIO_WRITE) && overlaps(off, len, o->off, o->len))
			return false;
	}
	return true;
}

/* Small pages make large requests expensive (a 64 KiB read is 128 misses
 * at 512 bytes): below 4 KiB pages, three in four large requests that the
 * dice ask for become small ones, so that every run moves a similar number
 * of pages and the default run stays short. */
static bool large_ok(struct worker *w)
{
	return w->r->page_size >= 4096 || rnd(w, 4) == 0;
}

/* Half the small requests go to a hot set (the first eighth of the thread's
 * regions) that fits the two tiers, so pages come back from the GPU tier. */
static uint64_t pick_region(struct worker *w)
{
	uint64_t span = ZONE_A / REGION / NTHREADS;
	if (rnd(w, 2))
		span /= 8;
	return rnd(w, span) * NTHREADS + (uint64_t)w->id;
}

/* Page-aligns [*off, *off+*len) inside [lo, hi) when it can. */
static void align_in(struct worker *w, uint64_t *off, uint64_t *len, uint64_t lo, uint64_t hi)
{
	uint64_t ps = w->r->page_size;
	uint64_t o = round_up(*off, ps), l = *len / ps * ps;
	if (l == 0)
		l = ps;
	if (o >= lo && o + l <= hi) {
		*off = o;
		*len = l;
	}
}

/* A write on the thread's own bytes: inside one region or one chunk. */
static void gen_write_range(struct worker *w, uint64_t *off, uint64_t *len)
{
	uint64_t lo, hi;
	if (rnd(w, 4) || !large_ok(w)) {
		lo = pick_region(w) * REGION;
		hi = lo + REGION;
		uint64_t a = rnd(w, REGION), b = rnd(w, REGION);
		if (a > b) {
			uint64_t t = a;
			a = b;
			b = t;
		}
		*off = lo + a;
		*len = b - a + 1;
	} else {
		uint64_t per = NCHUNKS / NTHREADS;
		uint64_t chunk = (rnd(w, 2) ? 0 : rnd(w, per)) * NTHREADS + (uint64_t)w->id;
		lo = ZONE_A + chunk * CHUNK;
		hi = lo + CHUNK;
		switch (rnd(w, 4)) {
		case 0:
		case 1:
			*len = 1 + rnd(w, 4096);
			break;
		case 2:
			*len = 1 + rnd(w, MEDIUM_MAX);
			break;
		default:
			*len = 1 + rnd(w, CHUNK); /* some longer than VC_AIO_FAST_PAGES pages */
			break;
		}
		*off = lo + rnd(w, CHUNK - *len + 1);
	}
	if (rnd(w, 4) == 0)
		align_in(w, off, len, lo, hi);
}

/* Mostly small reads (the cost of a run is in pages moved), some medium,
 * a few for the helper path and a few across the end. */
static void gen_read_range(struct worker *w, uint64_t *off, uint64_t *len)
{
	uint64_t size = w->r->size;
	uint64_t r = rnd(w, 64);
	if (r >= 48 && r < 62 && !large_ok(w))
		r = 24 + r % 24;
	if (r < 24) { /* within one of the thread's regions */
		uint64_t base = pick_region(w) * REGION;
		uint64_t a = rnd(w, REGION), b = rnd(w, REGION);
		*off = base + (a < b ? a : b);
		*len = (a < b ? b - a : a - b) + 1;
	} else if (r < 48) { /* small, across owners, in the hot part */
		*len = 1 + rnd(w, 4096);
		*off = rnd(w, ZONE_A / 8);
	} else if (r < 60) {
		*len = 1 + rnd(w, MEDIUM_MAX);
		*off = rnd(w, size - *len + 1);
	} else if (r < 62) { /* the helper path */
		*len = BIG_MIN + rnd(w, BIG_MAX - BIG_MIN + 1);
		*off = rnd(w, size - *len + 1);
	} else { /* across the end, or past it: a short count */
		*len = 1 + rnd(w, 16384);
		*off = size - 8192 + rnd(w, 8192 + 100);
	}
	if (rnd(w, 4) == 0) {
		uint64_t ps = w->r->page_size;
		uint64_t o = *off / ps * ps;
		*len = round_up(*len + (*off - o), ps);
		*off = o;
	}
}

/* Fills a free slot with a random request; false when none fits beside the
 * ones in flight. */
static bool gen(struct worker *w, struct slot *s)
{
	struct run *r = w->r;
	uint64_t roll = rnd(w, 100);
	uint32_t op = roll < 3 ? VC_AIO_FLUSH : roll < 33 ? VC_AIO_WRITE : VC_AIO_READ;
	uint64_t off = 0, len = 0;
	int tries;
	for (tries = 0; tries < 8 && op != VC_AIO_FLUSH; tries++) {
		if (op == VC_AIO_WRITE)
			gen_write_range(w, &off, &len);
		else
			gen_read_range(w, &off, &len);
		if (fits(w, op, off, len))
			break;
	}
	if (tries == 8)
		return false;

	memset(s, 0, sizeof *s);
	s->op = op;
	s->off = off;
	s->len = len;
	s->busy = true;
	s->req.vol = r->v;
	s->req.op = op;
	s->req.user = s;
	s->req.result = INT64_MIN; /* the library sets it */
	if (op == VC_AIO_FLUSH) {
		/* off and len are ignored; a buffer is not needed. */
		s->req.off = t_rand(&w->seed);
		if (rnd(w, 2)) {
			s->buf = malloc(1);
			s->req.buf = s->buf;
			s->req.len = t_rand(&w->seed);
		}
		w->n_flush++;
		return true;
	}
	s->buf = malloc(len ? len : 1);
	CHECK(s->buf);
	s->req.buf = s->buf;
	s->req.off = off;
	s->req.len = len;
	if (op == VC_AIO_READ) {
		memset(s->buf, 0xEE, len);
		s->expect = off >= r->size ? 0 : len < r->size - off ? len : r->size - off;
		w->n_read++;
		w->n_big += len >= BIG_MIN;
		w->n_short += s->expect < len;
		return true;
	}
	/* A write: the shadow takes its bytes now. No request in flight or
	 * generated touches them, so no check can see the difference. */
	if (rnd(w, 8) == 0) {
		s->flags = VC_AIO_FUA;
		w->n_fua++;
	}
	s->req.flags = s->flags;
	s->wid = ++w->nw;
	w->wdone[s->wid] = UINT64_MAX;
	for (uint64_t i = 0; i < len; i++) {
		if (owner(off + i) != w->id)
			fail(w, s, "generated a write on another thread's bytes");
		s->buf[i] = (unsigned char)t_rand(&w->seed);
		r->lastw[off + i] = s->wid;
	}
	memcpy(r->shadow + off, s->buf, len);
	w->n_write++;
	return true;
}

/* ---- Submitting and reaping -------------------------------------------- */

/* Submits every generated request; the queue must take exactly as many as
 * it has room for, the first ones, and the rest wait for the next call. */
static void submit_pending(struct worker *w)
{
	if (!w->npend)
		return;
	struct vc_aio_req *reqs[64 + EXTRA];
	for (unsigned i = 0; i < w->npend; i++)
		reqs[i] = &w->pend[i]->req;
	unsigned room = w->r->depth - w->nfl;
	unsigned want = w->npend < room ? w->npend : room;
	int n = vc_aio_submit(w->q, reqs, w->npend);
	CHECK_OK(n);
	if ((unsigned)n != want) {
		fprintf(stderr, "submit of %u with room for %u took %d\n", w->npend, room, n);
		fail(w, NULL, "vc_aio_submit took the wrong count");
	}
	if (w->npend > room)
		w->n_surplus++;
	w->clock++;
	for (unsigned i = 0; i < (unsigned)n; i++) {
		struct slot *s = w->pend[i];
		s->inflight = true;
		w->fl[w->nfl++] = s;
		if (s->op == VC_AIO_FLUSH) {
			s->submitted = w->clock;
			s->nsample = w->nrecent < FLUSH_SAMPLE ? w->nrecent : FLUSH_SAMPLE;
			memcpy(s->soff, w->roff, sizeof s->soff);
			memcpy(s->slen, w->rlen, sizeof s->slen);
		}
	}
	memmove(w->pend, w->pend + n, (w->npend - (unsigned)n) * sizeof *w->pend);
	w->npend -= (unsigned)n;
	CHECK(vc_aio_inflight(w->q) == w->nfl);
}

/* The store must hold the model's bytes at [off, off+len) that no write
 * reaped at or after `since` (or not yet reaped) has touched. */
static void check_store(struct worker *w, const struct slot *s, uint64_t off, uint64_t len,
			uint64_t since, const char *what)
{
	struct run *r = w->r;
	read_store(w, off, len);
	for (uint64_t i = 0; i < len; i++) {
		uint64_t b = off + i;
		uint32_t id = r->lastw[b];
		if (owner(b) != w->id || (id && w->wdone[id] >= since))
			continue;
		if (w->fbuf[i] != r->shadow[b]) {
			fprintf(stderr, "%s: store byte %llu is %02x, model %02x\n", what,
				(unsigned long long)b, w->fbuf[i], r->shadow[b]);
			fail(w, s, "the store lacks a write it must hold");
		}
	}
}

static void complete(struct worker *w, struct vc_aio_req *rq)
{
	struct run *r = w->r;
	uintptr_t a = (uintptr_t)rq, lo = (uintptr_t)w->slots;
	if (a < lo || a >= lo + w->nslots * sizeof *w->slots || (a - lo) % sizeof *w->slots)
		fail(w, NULL, "reaped a request that is not one of this queue's");
	struct slot *s = &w->slots[(a - lo) / sizeof *w->slots];
	if (!s->inflight)
		fail(w, NULL, "reaped a request that is not in flight on this queue");
	if (rq->user != s)
		fail(w, s, "the library changed req->user");
	s->inflight = false;
	for (unsigned i = 0; i < w->nfl; i++)
		if (w->fl[i] == s) {
			w->fl[i] = w->fl[--w->nfl];
			break;
		}
	w->clock++;
	switch (s->op) {
	case VC_AIO_READ:
		if (rq->result != (int64_t)s->expect)
			fail(w, s, "read returned the wrong count");
		/* The thread's own bytes: no write of its own is in flight on
		 * them, no other thread writes them. */
		for (uint64_t p = s->off; p < s->off + s->expect;) {
			uint64_t e = piece_end(p);
			if (e > s->off + s->expect)
				e = s->off + s->expect;
			if (owner(p) == w->id)
				compare(w, s, s->buf + (p - s->off), r->shadow + p, p, e - p,
					"read");
			p = e;
		}
		break;
	case VC_AIO_WRITE:
		if (rq->result != (int64_t)s->len)
			fail(w, s, "write returned the wrong count");
		w->wdone[s->wid] = w->clock;
		if ((s->flags & VC_AIO_FUA) || r->write_mode == VC_WRITE_THROUGH)
			check_store(w, s, s->off, s->len, UINT64_MAX,
				    s->flags & VC_AIO_FUA ? "FUA write" : "write-through write");
		memmove(w->roff + 1, w->roff, (FLUSH_SAMPLE - 1) * sizeof *w->roff);
		memmove(w->rlen + 1, w->rlen, (FLUSH_SAMPLE - 1) * sizeof *w->rlen);
		w->roff[0] = s->off;
		w->rlen[0] = s->len < SAMPLE_BYTES ? s->len : SAMPLE_BYTES;
		w->nrecent++;
		break;
	case VC_AIO_FLUSH:
		if (rq->result != 0)
			fail(w, s, "flush failed");
		for (unsigned i = 0; i < s->nsample; i++)
			check_store(w, s, s->soff[i], s->slen[i], s->submitted, "flush");
		break;
	}
	free(s->buf);
	s->buf = NULL;
	s->busy = false;
}

/* Reaps in one of four ways; `must` asks for at least one completion. */
static void reap(struct worker *w, bool must)
{
	if (!w->nfl)
		return;
	unsigned min;
	int64_t timeout;
	switch (must ? 2 + rnd(w, 2) : rnd(w, 4)) {
	case 0: /* a poll */
		min = 0;
		timeout = 0;
		w->n_poll++;
		break;
	case 1: /* a short wait, which may end with fewer than min */
		min = 1 + (unsigned)rnd(w, w->nfl);
		timeout = 100000;
		w->n_timed++;
		break;
	case 2:
		min = 1;
		timeout = -1;
		w->n_block++;
		break;
	default: /* several, sometimes every request in flight */
		min = rnd(w, 4) == 0 ? w->nfl : 1 + (unsigned)rnd(w, w->nfl);
		timeout = -1;
		w->n_block++;
		break;
	}
	unsigned max = min + (unsigned)rnd(w, w->nslots - min + 1);
	if (max == 0)
		max = 1;
	int n = vc_aio_reap(w->q, w->out, min, max, timeout);
	CHECK_OK(n);
	CHECK((unsigned)n <= max && (unsigned)n <= w->nfl);
	if (timeout < 0 && (unsigned)n < min)
		fail(w, NULL, "a blocking reap returned fewer than min");
	for (int i = 0; i < n; i++)
		complete(w, w->out[i]);
	CHECK(vc_aio_inflight(w->q) == w->nfl);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->r;
	CHECK_OK(vc_aio_open(r->c, r->depth, r->helpers, &w->q));
	CHECK(vc_aio_inflight(w->q) == 0);
	int done = 0;
	while (done < r->ops || w->npend || w->nfl) {
		/* Generate one, or enough to fill the queue, or a few more than
		 * fit (which the next submission must leave untaken). */
		int want = 0;
		if (done < r->ops) {
			int room = (int)r->depth - (int)w->nfl - (int)w->npend;
			if (rnd(w, 4) == 0)
				want = 1;
			else
				want = room + (rnd(w, 4) == 0 ? (int)rnd(w, EXTRA + 1) : 0);
			if (want > r->ops - done)
				want = r->ops - done;
		}
		int made = 0;
		for (unsigned i = 0; i < w->nslots && made < want; i++) {
			struct slot *s = &w->slots[i];
			if (s->busy)
				continue;
			if (!gen(w, s))
				break;
			w->pend[w->npend++] = s;
			made++;
			done++;
		}
		submit_pending(w);
		reap(w, w->npend > 0 || made == 0 || done == r->ops);
	}
	vc_aio_close(w->q);
	return NULL;
}

/* Flush, drop and prefetch at random while the queues run: none of them
 * may change a byte. */
static void *chaos_main(void *arg)
{
	struct run *r = arg;
	t_chaos(r->c, r->size, r->seed ^ 0x99, &r->stop);
	return NULL;
}


/* ---- The API's edges, single-threaded ------------------------------------ */

static struct vc_aio_req mkreq(vc_volume *v, uint32_t op, void *buf, uint64_t off, uint64_t len,
			       uint32_t flags)
{
	return (struct vc_aio_req){ .vol = v, .buf = buf, .off = off, .len = len, .op = op,
				    .flags = flags, .result = INT64_MIN };
}

/* Reaps until every one of reqs[0..n) has come back, each once; returns
 * with the queue empty. */
static void reap_all(vc_aio *q, struct vc_aio_req *reqs, unsigned n)
{
	struct vc_aio_req *out[64];
	bool seen[64] = { false };
	CHECK(n <= 64 && vc_aio_inflight(q) == n);
	for (unsigned got = 0; got < n;) {
		unsigned left = n - got;
		int k = vc_aio_reap(q, out, left < 3 ? left : 3, 64, -1);
		CHECK_OK(k);
		CHECK(k >= 1 && (unsigned)k <= left);
		for (int i = 0; i < k; i++) {
			CHECK(out[i] >= reqs && out[i] < reqs + n);
			unsigned j = (unsigned)(out[i] - reqs);
			CHECK(!seen[j]);
			seen[j] = true;
		}
		got += (unsigned)k;
		CHECK(vc_aio_inflight(q) == n - got);
	}
}

static void submit_all(vc_aio *q, struct vc_aio_req *reqs, unsigned n)
{
	struct vc_aio_req *p[64];
	for (unsigned i = 0; i < n; i++)
		p[i] = &reqs[i];
	CHECK(vc_aio_submit(q, p, n) == (int)n);
	reap_all(q, reqs, n);
}

static void fill(unsigned char *b, size_t len, uint64_t *seed)
{
	for (size_t i = 0; i < len; i++)
		b[i] = (unsigned char)t_rand(seed);
}

static void check_volume(vc_volume *v, const unsigned char *shadow, uint64_t off, uint64_t len)
{
	unsigned char *b = malloc(len);
	CHECK(vc_volume_read(v, b, len, off) == (ssize_t)len);
	CHECK(memcmp(b, shadow + off, len) == 0);
	free(b);
}

static void api_edges(struct run *r, uint64_t *seed)
{
	vc_volume *v = r->v;
	const uint64_t size = r->size;
	unsigned char *sh = r->shadow;
	struct vc_aio_req *out[16];
	vc_aio *q;

	/* Depths outside 1 .. 65536. */
	CHECK(vc_aio_open(r->c, 0, 0, &q) == -EINVAL);
	CHECK(vc_aio_open(r->c, 65537, 0, &q) == -EINVAL);
	CHECK(vc_aio_open(r->c, UINT_MAX, 0, &q) == -EINVAL);
	CHECK_OK(vc_aio_open(r->c, 65536, 1, &q));
	CHECK(vc_aio_inflight(q) == 0);
	vc_aio_close(q);
	vc_aio_close(NULL);

	/* An empty queue: nothing to reap, min above what is in flight. */
	CHECK_OK(vc_aio_open(r->c, 4, 2, &q));
	CHECK(vc_aio_submit(q, (struct vc_aio_req *const *)out, 0) == 0);
	CHECK(vc_aio_reap(q, out, 0, 16, 0) == 0);
	CHECK(vc_aio_reap(q, out, 1, 16, 0) == -EINVAL);
	CHECK(vc_aio_reap(q, out, 1, 16, -1) == -EINVAL);
	CHECK(vc_aio_reap(q, out, 3, 2, 0) == -EINVAL);
	CHECK(vc_aio_inflight(q) == 0);

	/* Seven requests on a queue of depth 4: four are taken, the rest
	 * only once those are reaped. Writes and reads on disjoint ranges. */
	struct vc_aio_req rq[64];
	unsigned char *bufs[64];
	struct vc_aio_req *p[64];
	for (unsigned i = 0; i < 7; i++) {
		uint64_t len = 1 + t_rand(seed) % 9000, off = i * (size / 7) + t_rand(seed) % 1000;
		bufs[i] = malloc(len);
		uint32_t op = i % 2 ? VC_AIO_READ : VC_AIO_WRITE;
		if (op == VC_AIO_WRITE) {
			fill(bufs[i], len, seed);
			memcpy(sh + off, bufs[i], len);
		}
		rq[i] = mkreq(v, op, bufs[i], off, len, i == 2 ? VC_AIO_FUA : 0);
		p[i] = &rq[i];
	}
	CHECK(vc_aio_submit(q, p, 7) == 4);
	CHECK(vc_aio_inflight(q) == 4);
	CHECK(vc_aio_submit(q, p + 4, 3) == 0); /* full */
	CHECK(vc_aio_inflight(q) == 4);
	CHECK(vc_aio_reap(q, out, 3, 2, -1) == -EINVAL); /* min > max */
	CHECK(vc_aio_reap(q, out, 5, 16, -1) == -EINVAL); /* min > in flight */
	CHECK(vc_aio_inflight(q) == 4);
	reap_all(q, rq, 4);
	CHECK(vc_aio_submit(q, p + 4, 3) == 3);
	reap_all(q, rq + 4, 3);
	for (unsigned i = 0; i < 7; i++) {
		CHECK(rq[i].result == (int64_t)rq[i].len);
		if (rq[i].op == VC_AIO_READ)
			CHECK(memcmp(bufs[i], sh + rq[i].off, rq[i].len) == 0);
		else
			check_volume(v, sh, rq[i].off, rq[i].len);
		free(bufs[i]);
	}
	vc_aio_close(q);

	/* Requests that fail their checks are taken, complete with the
	 * error, and change nothing. A second store, opened read-only. */
	char ropath[256];
	const uint64_t rosize = 65536 + 77;
	t_make_file(ropath, sizeof ropath, rosize, *seed | 1);
	unsigned char *roshadow = malloc(rosize);
	int fd = open(ropath, O_RDONLY);
	CHECK(fd >= 0 && pread(fd, roshadow, rosize, 0) == (ssize_t)rosize);
	close(fd);
	vc_volume *ro;
	CHECK_OK(vc_volume_open(r->c, ropath, -1, VC_OPEN_READONLY, &ro));
	CHECK_OK(vc_aio_open(r->c, 16, 0, &q));

	unsigned char junk[1000], a[1000], b[1000], z[4][8];
	fill(junk, sizeof junk, seed);
	const uint64_t x = size / 3 + 17, y = size / 2 + 5; /* volume 0 ranges */
	/* A bad op alone, first in its submission: still taken. */
	rq[0] = mkreq(v, 3, junk, y, sizeof junk, 0);
	submit_all(q, rq, 1);
	CHECK(rq[0].result == -EINVAL);
	rq[0] = mkreq(v, VC_AIO_READ, a, x, sizeof a, 0);
	rq[1] = mkreq(v, 3, junk, y, sizeof junk, 0); /* one past VC_AIO_FLUSH */
	rq[2] = mkreq(v, UINT32_MAX, junk, y, sizeof junk, VC_AIO_FUA);
	rq[3] = mkreq(v, VC_AIO_READ, NULL, x, 10, 0);
	rq[4] = mkreq(v, VC_AIO_WRITE, NULL, y, 10, 0);
	rq[5] = mkreq(ro, VC_AIO_WRITE, junk, 0, sizeof junk, 0);
	rq[6] = mkreq(ro, VC_AIO_WRITE, junk, rosize - 100, 100, VC_AIO_FUA);
	rq[7] = mkreq(ro, VC_AIO_READ, b, rosize - 500, sizeof b, 0); /* short */
	rq[8] = mkreq(v, VC_AIO_READ, z[0], 5, 0, 0);
	rq[9] = mkreq(v, VC_AIO_WRITE, z[1], 7, 0, 0);
	rq[10] = mkreq(ro, VC_AIO_FLUSH, NULL, 0, 0, 0);
	submit_all(q, rq, 11);
	CHECK(rq[0].result == (int64_t)sizeof a && memcmp(a, sh + x, sizeof a) == 0);
	CHECK(rq[1].result == -EINVAL && rq[2].result == -EINVAL);
	CHECK(rq[3].result == -EINVAL && rq[4].result == -EINVAL);
	CHECK(rq[5].result == -EROFS && rq[6].result == -EROFS);
	CHECK(rq[7].result == 500 && memcmp(b, roshadow + rosize - 500, 500) == 0);
	CHECK(rq[8].result == vc_volume_read(v, z[0], 0, 5));
	CHECK(rq[9].result == vc_volume_write(v, z[1], 0, 7));
	CHECK(rq[10].result == vc_volume_flush(ro));
	check_volume(v, sh, y, sizeof junk);
	check_volume(ro, roshadow, 0, rosize);
	t_check_file(ropath, roshadow, rosize);

	/* Past the end: reads come back short (as vc_volume_read), writes
	 * fail with -ENOSPC and change nothing. */
	unsigned char *big = malloc(300000);
	rq[0] = mkreq(v, VC_AIO_READ, a, size - 100, sizeof a, 0);
	rq[1] = mkreq(v, VC_AIO_READ, z[0], size, 8, 0);
	rq[2] = mkreq(v, VC_AIO_READ, z[1], size + 12345, 8, 0);
	rq[3] = mkreq(v, VC_AIO_READ, z[2], UINT64_MAX - 5, 8, 0);
	rq[4] = mkreq(v, VC_AIO_READ, big, size - 150000, 300000, 0); /* the helper path */
	rq[5] = mkreq(v, VC_AIO_WRITE, junk, size - 300, 301, 0);
	rq[6] = mkreq(v, VC_AIO_WRITE, junk, size, 1, 0);
	rq[7] = mkreq(v, VC_AIO_WRITE, junk, UINT64_MAX, 1, 0);
	rq[8] = mkreq(v, VC_AIO_WRITE, junk, size - 10, 11, VC_AIO_FUA);
	submit_all(q, rq, 9);
	CHECK(rq[0].result == 100 && memcmp(a, sh + size - 100, 100) == 0);
	CHECK(rq[1].result == 0 && rq[2].result == 0 && rq[3].result == 0);
	CHECK(rq[4].result == 150000 && memcmp(big, sh + size - 150000, 150000) == 0);
	for (int i = 5; i < 9; i++)
		CHECK(rq[i].result == -ENOSPC);
	check_volume(v, sh, size - 1000, 1000);
	/* A write that ends at the end is whole; FUA puts it in the store. */
	memcpy(sh + size - 300, junk, 300);
	rq[0] = mkreq(v, VC_AIO_WRITE, junk, size - 300, 300, VC_AIO_FUA);
	submit_all(q, rq, 1);
	CHECK(rq[0].result == 300);
	rq[0] = mkreq(v, VC_AIO_READ, a, size - 300, 300, 0);
	submit_all(q, rq, 1);
	CHECK(rq[0].result == 300 && memcmp(a, sh + size - 300, 300) == 0);
	fd = open(r->path, O_RDONLY);
	CHECK(fd >= 0 && pread(fd, a, 300, (off_t)(size - 300)) == 300);
	close(fd);
	CHECK(memcmp(a, sh + size - 300, 300) == 0);
	free(big);
	vc_aio_close(q);
	CHECK_OK(vc_volume_close(ro));
	t_check_file(ropath, roshadow, rosize);
	unlink(ropath);
	free(roshadow);

	/* vc_aio_close with a full queue: it returns once every request has
	 * completed, so the writes are all there (and, write-through, in the
	 * store). One request per stripe of the store, so none overlap. */
	CHECK_OK(vc_aio_open(r->c, 64, 0, &q));
	const uint64_t stripe = size / 64;
	for (unsigned i = 0; i < 64; i++) {
		uint64_t len = 1 + t_rand(seed) % (i % 8 == 0 ? stripe : 20000);
		uint64_t off = i * stripe + t_rand(seed) % (stripe - len + 1);
		bufs[i] = malloc(len);
		uint32_t op = i % 4 == 3 ? VC_AIO_READ : VC_AIO_WRITE;
		if (op == VC_AIO_WRITE) {
			fill(bufs[i], len, seed);
			memcpy(sh + off, bufs[i], len);
		}
		rq[i] = mkreq(v, op, bufs[i], off, len, i % 16 == 1 ? VC_AIO_FUA : 0);
		p[i] = &rq[i];
	}
	CHECK(vc_aio_submit(q, p, 32) == 32);
	CHECK(vc_aio_submit(q, p + 32, 32) == 32);
	CHECK(vc_aio_inflight(q) == 64);
	vc_aio_close(q);
	for (unsigned i = 0; i < 64; i++)
		free(bufs[i]);
	if (r->write_mode == VC_WRITE_THROUGH)
		t_check_file(r->path, sh, size);
	else
		for (unsigned i = 0; i < 64; i++)
			check_volume(v, sh, rq[i].off, rq[i].len);
}

/* ---- Runs ------------------------------------------------------------------ */

struct runcfg {
	int write_mode;
	uint32_t page_size;
	const struct gcv *gc;
	int gpu_hits;
	unsigned depth, helpers;
};

/* Run number n of main's table; its seed is derived from base_seed and n.
 * Below 4 KiB pages a request moves about twice as many pages (and each
 * costs about as much), so those runs do half as many. */
static void one_run(int kind, int n, const struct runcfg *rc, int nominal_ops, uint64_t base_seed)
{
	uint64_t seed = base_seed + 0x10000 * (uint64_t)n;
	int ops = rc->page_size < 4096 && nominal_ops > 1 ? nominal_ops / 2 : nominal_ops;
	struct run r = { .size = STORE, .ops = ops, .write_mode = rc->write_mode,
			 .page_size = rc->page_size, .depth = rc->depth, .helpers = rc->helpers,
			 .seed = seed };
	t_make_file(r.path, sizeof r.path, r.size, seed);
	r.shadow = malloc(r.size);
	r.lastw = calloc(r.size, sizeof *r.lastw);
	CHECK(r.shadow && r.lastw);
	int fd = open(r.path, O_RDONLY);
	CHECK(fd >= 0 && pread(fd, r.shadow, r.size, 0) == (ssize_t)r.size);
	close(fd);

	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = r.path;
	cfg.page_size = rc->page_size;
	cfg.host_bytes = 24 * (uint64_t)rc->page_size; /* 24 pages */
	cfg.gpu_bytes = 96 * (uint64_t)rc->page_size;  /* 96 pages: far below the store */
	cfg.device = kind;
	cfg.write_mode = rc->write_mode;
	cfg.batch_pages = 8;
	cfg.batch_timeout_us = 20;
	cfg.seg_bytes = rc->gc->seg_pages * rc->page_size;
	cfg.gc_policy = rc->gc->policy;
	cfg.gc_segments = rc->gc->segments;
	cfg.gc_watermark = rc->gc->watermark;
	cfg.gc_fragmentation = rc->gc->frag;
	cfg.gpu_hits = rc->gpu_hits;
	int e = vc_open(&cfg, &r.c);
	if (e < 0)
		unlink(r.path);
	t_skip_if_absent(e, "aio test on CUDA");
	CHECK_OK(e);
	snprintf(g_run, sizeof g_run,
		 "VC_TEST_RUN=%d VC_TEST_SEED=%#llx VC_TEST_OPS=%d: %s ps=%u log %s gpu_hits=%s "
		 "depth=%u helpers=%u",
		 n, (unsigned long long)base_seed, nominal_ops,
		 rc->write_mode ? "write-back" : "write-through", rc->page_size, rc->gc->name,
		 rc->gpu_hits == VC_GPU_HITS_SWAP ? "swap" : "serve", rc->depth, rc->helpers);
	r.v = vc_volume_default(r.c);
	CHECK(vc_page_size(r.c) == rc->page_size && vc_volume_size(r.v) == r.size);

	pthread_t th[NTHREADS], chaos;
	struct worker w[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		struct worker *k = &w[i];
		*k = (struct worker){ .r = &r, .id = i, .seed0 = seed + 1000 * (uint64_t)i + 1 };
		k->seed = k->seed0;
		k->nslots = r.depth + EXTRA;
		k->slots = calloc(k->nslots, sizeof *k->slots);
		k->pend = calloc(k->nslots, sizeof *k->pend);
		k->fl = calloc(k->nslots, sizeof *k->fl);
		k->out = calloc(k->nslots, sizeof *k->out);
		k->wdone = calloc((size_t)ops + 1, sizeof *k->wdone);
		k->fbuf = malloc(CHUNK);
		k->fd = open(r.path, O_RDONLY);
		CHECK(k->slots && k->pend && k->fl && k->out && k->wdone && k->fbuf && k->fd >= 0);
		CHECK(pthread_create(&th[i], NULL, worker_main, k) == 0);
	}
	CHECK(pthread_create(&chaos, NULL, chaos_main, &r) == 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	atomic_store(&r.stop, 1);
	pthread_join(chaos, NULL);

	unsigned long n_read = 0, n_big = 0, n_short = 0, n_write = 0, n_fua = 0, n_flush = 0,
		      n_surplus = 0, n_poll = 0, n_timed = 0, n_block = 0;
	for (int i = 0; i < NTHREADS; i++) {
		n_read += w[i].n_read, n_big += w[i].n_big, n_short += w[i].n_short;
		n_write += w[i].n_write, n_fua += w[i].n_fua, n_flush += w[i].n_flush;
		n_surplus += w[i].n_surplus, n_poll += w[i].n_poll, n_timed += w[i].n_timed;
		n_block += w[i].n_block;
		close(w[i].fd);
		free(w[i].slots), free(w[i].pend), free(w[i].fl), free(w[i].out);
		free(w[i].wdone), free(w[i].fbuf);
	}
	if (r.write_mode == VC_WRITE_THROUGH)
		t_check_file(r.path, r.shadow, r.size); /* no flush needed */

	struct vc_stats st = { .size = sizeof st };
	CHECK_OK(vc_get_stats(r.c, &st));
	fprintf(stderr,
		"%s %s: %lu reads (%lu helper-sized, %lu short), %lu writes (%lu FUA), %lu "
		"flushes, %lu over-full submissions, reaps %lu poll %lu timed %lu blocking; "
		"hits host %llu gpu %llu, misses %llu, evict host %llu gpu %llu, writebacks %llu, "
		"gc runs %llu, segments evicted %llu\n",
		vc_device_name(r.c), g_run, n_read, n_big, n_short, n_write, n_fua, n_flush,
		n_surplus, n_poll, n_timed, n_block, (unsigned long long)st.hits[0],
		(unsigned long long)st.hits[1], (unsigned long long)st.misses,
		(unsigned long long)st.evictions[0], (unsigned long long)st.evictions[1],
		(unsigned long long)st.writebacks, (unsigned long long)st.gc_runs,
		(unsigned long long)st.gpu_segments_evicted);
	/* The run must really have exercised both tiers and the log. A short
	 * run (VC_TEST_OPS=150 under compute-sanitizer) of random reads over
	 * the file may see no read come back to a page still in the host tier
	 * (seen on the H100 at ps=512, swap): host hits only count when the
	 * run is long enough to be sure of them. */
	CHECK(st.hits[VC_TIER_GPU] > 0 && st.misses > 0);
	if (nominal_ops >= 1000)
		CHECK(st.hits[VC_TIER_HOST] > 0);
	CHECK(st.evictions[VC_TIER_HOST] > 0 && st.evictions[VC_TIER_GPU] > 0);
	CHECK(st.gpu_segments_evicted > 0);
	if (rc->gc->policy == VC_GC_OFF)
		CHECK(st.gc_runs == 0);
	/* Short runs (VC_TEST_QUICK) may not get that far. Only GRAM's swap
	 * frees a GPU slot on every GPU hit; served in place, the log
	 * fragments only by writes and drops of GPU pages, which a loaded
	 * machine's timing can leave below the cleaning threshold (0 to 4
	 * cleaning runs in 1500 operations). */
	if (rc->gc->policy != VC_GC_OFF && rc->gc != &gc_default && nominal_ops >= 1000 &&
	    rc->gpu_hits == VC_GPU_HITS_SWAP)
		CHECK(st.gc_runs > 0 && st.gc_pages_moved > 0);
	if (r.write_mode == VC_WRITE_BACK)
		CHECK(st.writebacks > 0);
	if (nominal_ops >= 1000)
		CHECK(n_big > 0 && n_short > 0 && n_fua > 0 && n_flush > 0);
	CHECK(strcmp(vc_device_name(r.c), kind == VC_DEVICE_CUDA ? "cuda" : "emu") == 0);

	uint64_t eseed = seed ^ 0xed6e;
	api_edges(&r, &eseed);

	CHECK_OK(vc_flush(r.c));
	t_check_file(r.path, r.shadow, r.size);
	CHECK_OK(vc_close(r.c));
	t_check_file(r.path, r.shadow, r.size);
	unlink(r.path);
	free(r.shadow);
	free(r.lastw);
}

static uint64_t g_seed; /* VC_TEST_SEED */
static int g_only;      /* VC_TEST_RUN, or -1 */

/* Each write mode runs every log configuration; page sizes, hit modes,
 * depths and helper counts rotate so that each write mode sees each of
 * them, and the two modes see them in different combinations. A write
 * mode's runs are a part (write-through runs 0 to 4, write-back 5 to 9). */
static void runs(int kind, int ops, int wm)
{
	static const struct {
		uint32_t page_size;
		const struct gcv *gc;
	} logs[] = {
		{ 4096, &gc_default }, { 512, &gc_default }, { 4096, &gc_oldest },
		{ 512, &gc_cb },       { 4096, &gc_off },
	};
	static const unsigned depths[] = { 64, 8, 1 }, helpers[] = { 0, 1, 2, 3 };
	const unsigned nlogs = sizeof logs / sizeof logs[0];
	for (unsigned i = 0; i < nlogs; i++) {
		const int n = wm * (int)nlogs + (int)i;
		if (g_only >= 0 && n != g_only)
			continue;
		struct runcfg rc = {
			.write_mode = wm,
			.page_size = logs[i].page_size,
			.gc = logs[i].gc,
			.gpu_hits = (int)((i + (unsigned)wm) % 2),
			.depth = depths[(i + (unsigned)wm) % 3],
			.helpers = helpers[(unsigned)n % 4],
		};
		one_run(kind, n, &rc, ops, g_seed);
	}
}

static void part_wt(int kind, int ops)
{
	runs(kind, ops, VC_WRITE_THROUGH);
}

static void part_wb(int kind, int ops)
{
	runs(kind, ops, VC_WRITE_BACK);
}

static const struct t_part parts[] = {
	{ "wt", part_wt, false },
	{ "wb", part_wb, false },
};

int main(int argc, char **argv)
{
	const char *qs = getenv("VC_TEST_QUICK");
	bool quick = qs && atoi(qs) > 0;
	g_seed = getenv("VC_TEST_SEED") ? strtoull(getenv("VC_TEST_SEED"), NULL, 0) : 0xa10;
	g_only = getenv("VC_TEST_RUN") ? atoi(getenv("VC_TEST_RUN")) : -1;
	CHECK(g_seed != 0);
	atexit(report_run);
	int e = t_parts_main(argc, argv, parts, sizeof parts / sizeof parts[0], quick ? 300 : 1500,
			     "aio model");
	atomic_store(&g_passed, e == 0);
	return e;
}
