/* Readahead into the cache for sequential readers.
 *
 * The kernel reads ahead too, but only as far as its own window (up to
 * max_readahead, 1 MiB here) and only for one file position; our window
 * (--readahead, default 8 MiB) loads the pages a stream will want next into
 * the host tier from SRC while the application consumes the ones before,
 * so a slow SRC is read with that much in flight. GAIA's point (ATC '24):
 * parallel and GPU-side readers look random to a one-position heuristic,
 * so streams are detected at two levels: per handle (one stream: the usual
 * reader) and per file (RA_STREAMS streams, the least recently used one
 * replaced: several readers of one file, through one handle or many).
 *
 * A read continues a stream when it starts within SLACK of where the
 * stream's last read ended (the kernel's readahead arrives out of order
 * across FUSE threads); from the second read in a row the stream is
 * prefetched to its end + window, in steps of at least half a window, so
 * a stream queues a job every window/2 bytes, not every read. Jobs go to
 * RQ_WORKERS threads through a ring of RQ_LEN; a full ring drops the job
 * (readahead is a hint: the read itself still loads what it needs). Each
 * job holds a reference on its identity, so the volume outlives it.
 * Cost per read: one stream-table probe (O(RA_STREAMS)) under the table's
 * mutex, and for one read in window/2 bytes a queue push.
 */
#include <errno.h>
#include <stdlib.h>

#include "fuse/fs.h"

/* How far off a stream's end a read may start and still continue it: two
 * of the kernel's largest reads (1 MiB each), which arrive out of order. */
#define SLACK (2ull << 20)

void fs_ra_table_init(struct fs_ra *ra, unsigned n)
{
	pthread_mutex_init(&ra->mu, NULL);
	ra->n = n;
	for (unsigned i = 0; i < RA_STREAMS; i++)
		ra->s[i] = (struct ra_stream){ 0 };
}

void fs_ra_table_fini(struct fs_ra *ra)
{
	pthread_mutex_destroy(&ra->mu);
}

/* Notes a read in table ra; true with [*from, *to) to prefetch when it
 * continues a stream that has run for two reads and whose prefetched
 * part is less than half a window ahead of it. */
static bool stream_note(struct fs *fs, struct fs_ra *ra, uint64_t off, uint64_t len,
			uint64_t *from, uint64_t *to)
{
	const uint64_t win = fs->o->readahead, end = off + len;
	const uint64_t now = atomic_fetch_add_explicit(&fs->ra_clock, 1, memory_order_relaxed);
	bool go = false;
	pthread_mutex_lock(&ra->mu);
	struct ra_stream *lru = &ra->s[0];
	unsigned i;
	for (i = 0; i < ra->n; i++) {
		struct ra_stream *s = &ra->s[i];
		if (s->used && off + SLACK >= s->next && off <= s->next + SLACK)
			break;
		if (s->used < lru->used)
			lru = s;
	}
	if (i < ra->n) {
		struct ra_stream *s = &ra->s[i];
		if (end > s->next)
			s->next = end;
		s->run++;
		s->used = now + 1;
		if (s->ahead < s->next)
			s->ahead = s->next;
		if (s->run >= 2 && s->ahead < s->next + win / 2) {
			*from = s->ahead;
			*to = s->next + win;
			s->ahead = *to;
			go = true;
		}
	} else {
		*lru = (struct ra_stream){ .next = end, .ahead = end, .run = 1, .used = now + 1 };
	}
	pthread_mutex_unlock(&ra->mu);
	return go;
}

void fs_ra_note(struct fs *fs, struct fs_handle *h, uint64_t off, uint64_t len)
{
	if (!fs->o->readahead || !fs->rq.nthreads)
		return;
	/* Uncached (no volume): nothing to prefetch into. The worker checks
	 * again under the identity's lock. */
	pthread_rwlock_rdlock(&h->id->lk);
	bool cached = h->id->vol != NULL;
	pthread_rwlock_unlock(&h->id->lk);
	if (!cached)
		return;
	uint64_t from, to;
	if (!stream_note(fs, &h->ra, off, len, &from, &to) &&
	    !stream_note(fs, &h->id->ra, off, len, &from, &to))
		return;
	pthread_mutex_lock(&fs->id_mu);
	h->id->refs++; /* the handle holds one: the identity is live */
	pthread_mutex_unlock(&fs->id_mu);
	pthread_mutex_lock(&fs->rq.mu);
	if (fs->rq.n == RQ_LEN || fs->rq.stop) {
		pthread_mutex_unlock(&fs->rq.mu);
		atomic_fetch_add(&fs->rq.dropped, 1);
		fs_ident_put(fs, h->id);
		return;
	}
	fs->rq.q[(fs->rq.head + fs->rq.n++) % RQ_LEN] =
		(struct fs_prefetch){ .id = h->id, .off = from, .len = to - from };
	pthread_cond_signal(&fs->rq.cv);
	pthread_mutex_unlock(&fs->rq.mu);
	atomic_fetch_add(&fs->rq.queued, 1);
}

static void *worker(void *arg)
{
	struct fs *fs = arg;
	for (;;) {
		pthread_mutex_lock(&fs->rq.mu);
		while (!fs->rq.n && !fs->rq.stop)
			pthread_cond_wait(&fs->rq.cv, &fs->rq.mu);
		if (!fs->rq.n) {
			pthread_mutex_unlock(&fs->rq.mu);
			return NULL;
		}
		struct fs_prefetch job = fs->rq.q[fs->rq.head];
		fs->rq.head = (fs->rq.head + 1) % RQ_LEN;
		fs->rq.n--;
		bool stop = fs->rq.stop;
		pthread_mutex_unlock(&fs->rq.mu);
		if (!stop) {
			struct fs_ident *id = job.id;
			pthread_rwlock_rdlock(&id->lk);
			/* Clipped at the size: no page of a slot is cached
			 * past the file's end (ident.c). */
			const uint64_t size = atomic_load(&id->size);
			const uint64_t len = job.off < size && job.len > size - job.off
						     ? size - job.off : job.len;
			if (id->vol && job.off < size &&
			    vc_volume_prefetch(id->vol, id->base + job.off, len, VC_TIER_HOST) == 0)
				atomic_fetch_add_explicit(&id->ra_bytes, len, memory_order_relaxed);
			pthread_rwlock_unlock(&id->lk);
		}
		fs_ident_put(fs, job.id);
	}
}

int fs_ra_init(struct fs *fs)
{
	pthread_mutex_init(&fs->rq.mu, NULL);
	pthread_cond_init(&fs->rq.cv, NULL);
	if (!fs->o->readahead)
		return 0;
	for (unsigned i = 0; i < RQ_WORKERS; i++) {
		int e = pthread_create(&fs->rq.tid[i], NULL, worker, fs);
		if (e)
			return -e;
		fs->rq.nthreads++;
	}
	return 0;
}

/* Stops the workers; jobs still queued are dropped (their references
 * go). Before the identities close. */
void fs_ra_fini(struct fs *fs)
{
	pthread_mutex_lock(&fs->rq.mu);
	fs->rq.stop = true;
	pthread_cond_broadcast(&fs->rq.cv);
	pthread_mutex_unlock(&fs->rq.mu);
	for (unsigned i = 0; i < fs->rq.nthreads; i++)
		pthread_join(fs->rq.tid[i], NULL);
	fs->rq.nthreads = 0;
	while (fs->rq.n) { /* no workers (readahead off) */
		fs_ident_put(fs, fs->rq.q[fs->rq.head].id);
		fs->rq.head = (fs->rq.head + 1) % RQ_LEN;
		fs->rq.n--;
	}
	pthread_cond_destroy(&fs->rq.cv);
	pthread_mutex_destroy(&fs->rq.mu);
}
