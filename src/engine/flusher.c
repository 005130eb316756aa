/* Background write-back (write-back caches): one thread per cache writes
 * dirty pages back while they are more than c->dirty_bg, so that writers
 * below the dirty limit land in the cache without a store write of their
 * own, evictions find clean pages, and the store takes batches
 * (batch_pages a round, one submission: io_uring for files) instead of
 * single pages. Linux's flusher threads and dirty_background_ratio play
 * the same part under dirty_ratio.
 *
 * Which pages: each volume's dirty set in page order from where its last
 * round stopped (v->wb_pos), volume after volume, wrapping: a sweep, as
 * dm-writecache writes back, sequential for the store. A volume whose store
 * refuses (engine/dirty.h, "Store errors") is passed over; when every volume
 * with dirty pages refuses, the thread sleeps REFUSE_RETRY_NS.
 *
 * Lock rules: fl.mu guards the thread's state and its use of volumes: it
 * is held across a round, so vc_volume_close and vc_volume_resize, which
 * take it, never free or resize a volume a round uses; it is taken before
 * c->mu, never inside it. Writers wake the thread without a lock unless it sleeps
 * (fl.sleeping). Cost to writers: one atomic load per page they dirty.
 */
#include "engine/engine.h"

/* A volume with dirty pages that takes writes, from *next on (wrapping):
 * its id, or -1. Under c->mu; O(VC_VOLUMES_MAX). */
static int next_volume(struct vc_cache *c, uint32_t *next)
{
	for (uint32_t k = 0; k < VC_VOLUMES_MAX; k++) {
		uint32_t i = (*next + k) % VC_VOLUMES_MAX;
		struct vc_volume *v = c->vols[i];
		if (v && v->ndirty && !eng_refusing(v)) {
			*next = (i + 1) % VC_VOLUMES_MAX;
			return (int)i;
		}
	}
	return -1;
}

/* One round on the next volume: 1 if pages went back (or were looked at),
 * 0 if no volume can take a round now. Under fl.mu. */
static int flush_one(struct vc_cache *c, struct bulk *b, uint64_t *ids)
{
	struct eng_flusher *f = &c->fl;
	eng_lock(c);
	int id = next_volume(c, &f->vol);
	eng_unlock(c);
	if (id < 0)
		return 0;
	struct vc_volume *v = c->vols[id]; /* stable: vc_volume_close waits for fl.mu */
	const uint64_t last = v->size ? (v->size - 1) >> c->pshift : 0;
	b->lost = false;
	/* An error is the store's: note_refused marked the volume, and the
	 * next choice passes over it. */
	if (eng_writeback_round(v, b, ids, &v->wb_pos, last) == 0) {
		v->wb_pos = 0; /* nothing at or past the sweep's place: from the start */
		(void)eng_writeback_round(v, b, ids, &v->wb_pos, last);
	}
	return 1;
}

static void *flusher_main(void *arg)
{
	struct vc_cache *c = arg;
	struct eng_flusher *f = &c->fl;
	struct bulk b;
	uint64_t *ids = malloc(c->batch_pages * sizeof *ids);
	bool ok = ids && eng_bulk_init(c, &b) == 0;
	pthread_mutex_lock(&f->mu);
	while (!f->stop) {
		const uint64_t dirty = atomic_load_explicit(&c->dirty_charged, memory_order_relaxed);
		/* 1: a round ran; -1: dirty pages, none that can go now. */
		int did = ok && dirty > c->dirty_bg ? (flush_one(c, &b, ids) ? 1 : -1) : 0;
		if (did > 0)
			continue;
		/* Nothing to do, or nothing that can be done now (stores
		 * refuse): sleep until a writer passes the mark (eng_flusher_kick
		 * sees `sleeping`: the store and the writer's count are ordered
		 * by seq_cst, so either it sees it or this sees the count), or a
		 * refusal may have ended. */
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += REFUSE_RETRY_NS / 1000000000ull;
		atomic_store(&f->sleeping, true);
		if (!f->stop && (did < 0 || atomic_load(&c->dirty_charged) <= c->dirty_bg))
			pthread_cond_timedwait(&f->cv, &f->mu, &ts);
		atomic_store(&f->sleeping, false);
	}
	pthread_mutex_unlock(&f->mu);
	if (ok)
		eng_bulk_fini(&b);
	free(ids);
	return NULL;
}

int eng_flusher_start(struct vc_cache *c)
{
	struct eng_flusher *f = &c->fl;
	pthread_mutex_init(&f->mu, NULL);
	vc_cond_init_monotonic(&f->cv);
	f->inited = true;
	if (c->write_mode != VC_WRITE_BACK || c->dirty_bg >= c->dirty_max)
		return 0;
	if (pthread_create(&f->t, NULL, flusher_main, c) != 0)
		return vc_err(-EAGAIN, "cannot start the write-back thread");
	f->running = true;
	return 0;
}

void eng_flusher_stop(struct vc_cache *c)
{
	struct eng_flusher *f = &c->fl;
	if (!f->inited)
		return;
	if (f->running) {
		pthread_mutex_lock(&f->mu);
		f->stop = true;
		pthread_cond_signal(&f->cv);
		pthread_mutex_unlock(&f->mu);
		pthread_join(f->t, NULL);
		f->running = false;
	}
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	f->inited = false;
}

void eng_flusher_kick(struct vc_cache *c)
{
	struct eng_flusher *f = &c->fl;
	atomic_thread_fence(memory_order_seq_cst); /* the writer's count first */
	if (!atomic_load(&f->sleeping))
		return;
	pthread_mutex_lock(&f->mu);
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
}
