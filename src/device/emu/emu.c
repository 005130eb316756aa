/* Emulated device: "device memory" is host memory and a worker thread runs
 * submitted batches in order, like a CUDA stream. Completion therefore
 * arrives later and from another thread, so the engine's waiting and
 * batching code runs exactly as it does over a GPU.
 *
 * Cost: a batch of n pages costs one queue hand-off plus n page copies
 * (2n for swaps) on the worker thread. A cleaning job (gc_run) runs on the
 * calling thread: O(S log S) for S source slots, plus its page copies. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "device/device.h"
#include "vramcache.h"

struct emu_batch {
	struct vc_dbatch *owner;
	struct emu_batch *next; /* FIFO link while queued */
	uint64_t submitted, completed; /* generations: done when equal */
};

struct emu {
	struct vc_device dev;
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	struct emu_batch *head, *tail;
	bool stop;
	pthread_t worker;
};

#define EMU(d) ((struct emu *)(d))

static void run_moves(const struct vc_dbatch *b)
{
	unsigned char tmp[4096];
	for (uint32_t i = 0; i < b->n; i++) {
		const struct vc_move *m = &b->moves[i];
		unsigned char *s = (unsigned char *)(uintptr_t)m->src;
		unsigned char *t = (unsigned char *)(uintptr_t)m->dst;
		if (m->op == VC_MOVE_COPY) {
			memcpy(t, s, b->page_size);
			continue;
		}
		for (uint32_t off = 0; off < b->page_size; off += sizeof tmp) {
			size_t k = b->page_size - off < sizeof tmp ? b->page_size - off : sizeof tmp;
			memcpy(tmp, s + off, k);
			memcpy(s + off, t + off, k);
			memcpy(t + off, tmp, k);
		}
	}
}

static void *worker_main(void *arg)
{
	struct emu *e = arg;
	pthread_mutex_lock(&e->mu);
	for (;;) {
		while (!e->head && !e->stop)
			pthread_cond_wait(&e->work, &e->mu);
		if (!e->head)
			break;
		struct emu_batch *eb = e->head;
		e->head = eb->next;
		if (!e->head)
			e->tail = NULL;
		uint64_t gen = eb->submitted;
		pthread_mutex_unlock(&e->mu);
		run_moves(eb->owner);
		pthread_mutex_lock(&e->mu);
		eb->completed = gen;
		pthread_cond_broadcast(&e->done);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

static void emu_close(struct vc_device *d)
{
	struct emu *e = EMU(d);
	pthread_mutex_lock(&e->mu);
	e->stop = true;
	pthread_cond_broadcast(&e->work);
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->worker, NULL);
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->work);
	pthread_cond_destroy(&e->done);
	free(e);
}

static int emu_alloc(size_t len, void **p)
{
	size_t align = 4096;
	len = (len + align - 1) & ~(align - 1);
	if (len == 0)
		len = align;
	void *m = aligned_alloc(align, len);
	if (!m)
		return vc_err(-ENOMEM, "emu: cannot allocate %zu bytes", len);
	*p = m;
	return 0;
}

static int emu_host_alloc(struct vc_device *d, size_t len, void **host, uint64_t *dev_addr)
{
	(void)d;
	int r = emu_alloc(len, host);
	if (r == 0)
		*dev_addr = (uint64_t)(uintptr_t)*host;
	return r;
}

static void emu_host_free(struct vc_device *d, void *host)
{
	(void)d;
	free(host);
}

static int emu_mem_alloc(struct vc_device *d, size_t len, uint64_t *dev_addr)
{
	(void)d;
	void *p = NULL;
	int r = emu_alloc(len, &p);
	if (r == 0)
		*dev_addr = (uint64_t)(uintptr_t)p;
	return r;
}

static void emu_mem_free(struct vc_device *d, uint64_t dev_addr)
{
	(void)d;
	free((void *)(uintptr_t)dev_addr);
}

static int emu_batch_init(struct vc_device *d, struct vc_dbatch *b)
{
	(void)d;
	struct emu_batch *eb = calloc(1, sizeof *eb);
	if (!eb)
		return vc_err(-ENOMEM, "emu: out of memory");
	eb->owner = b;
	b->priv = eb;
	return 0;
}

static void emu_batch_fini(struct vc_device *d, struct vc_dbatch *b)
{
	(void)d;
	free(b->priv);
	b->priv = NULL;
}

static int emu_batch_submit(struct vc_device *d, struct vc_dbatch *b)
{
	struct emu *e = EMU(d);
	struct emu_batch *eb = b->priv;
	pthread_mutex_lock(&e->mu);
	eb->submitted++;
	eb->next = NULL;
	if (e->tail)
		e->tail->next = eb;
	else
		e->head = eb;
	e->tail = eb;
	pthread_cond_signal(&e->work);
	pthread_mutex_unlock(&e->mu);
	return 0;
}

static int emu_batch_wait(struct vc_device *d, struct vc_dbatch *b)
{
	struct emu *e = EMU(d);
	struct emu_batch *eb = b->priv;
	pthread_mutex_lock(&e->mu);
	while (eb->completed != eb->submitted)
		pthread_cond_wait(&e->done, &e->mu);
	pthread_mutex_unlock(&e->mu);
	return 0;
}

static int emu_memcpy_sync(struct vc_device *d, uint64_t dst, uint64_t src, size_t len)
{
	(void)d;
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, len);
	return 0;
}

/* A live source slot: its stamp and source position (rank * per_seg + slot). */
struct emu_live {
	uint64_t stamp;
	uint32_t pos;
};

static int cmp_live(const void *a, const void *b)
{
	const struct emu_live *x = a, *y = b;
	if (x->stamp != y->stamp)
		return x->stamp < y->stamp ? -1 : 1;
	return (x->pos > y->pos) - (x->pos < y->pos);
}

/* struct vc_gc_job on the CPU. Positions are unique, so ordering by
 * (stamp, position) is the job's stable order. The caller keeps batches
 * off these pages (device.h), so the worker thread needs no say. The
 * caller's statement is checked before anything changes, as on CUDA. */
static int emu_gc_run(struct vc_device *d, struct vc_gc_job *j)
{
	(void)d;
	int r = vc_gc_check(j);
	if (r < 0)
		return r;
	const uint64_t per = j->per_seg, S = (uint64_t)j->nsrc * per;
	struct emu_live *lv = NULL;
	if (S && !(lv = malloc(S * sizeof *lv)))
		return vc_err(-ENOMEM, "emu: gc: cannot allocate %llu slots", (unsigned long long)S);
	uint32_t n = 0;
	bool in_bounds = true;
	for (uint64_t p = 0; p < S; p++) {
		uint64_t g = j->src[p / per] * per + p % per;
		if (j->key[g] == VC_GC_DEAD)
			continue;
		lv[n++] = (struct emu_live){ j->stamp[g], (uint32_t)p };
		in_bounds &= j->stamp[g] >= j->stamp_min && j->stamp[g] <= j->stamp_max;
	}
	if (n != j->live || !in_bounds) {
		free(lv);
		return vc_err(-EINVAL, "emu: gc: the job states %u live pages in stamps [%llu, %llu]; "
				       "%u are live%s", j->live, (unsigned long long)j->stamp_min,
			      (unsigned long long)j->stamp_max, n, in_bounds ? "" : ", some outside");
	}
	if (n > 1)
		qsort(lv, n, sizeof *lv, cmp_live);
	unsigned char *base = (unsigned char *)(uintptr_t)j->base;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t p = lv[i].pos, q = j->dst_first + (uint64_t)i;
		uint64_t gs = j->src[p / per] * per + p % per;
		uint64_t gd = j->dst[q / per] * per + q % per;
		memcpy(base + gd * j->page_size, base + gs * j->page_size, j->page_size);
		uint32_t owner = j->key[gs];
		j->key[gd] = owner;
		j->stamp[gd] = lv[i].stamp;
		if (j->where && owner < j->nowners)
			j->where[owner] = (uint32_t)gd;
	}
	free(lv);
	j->moved = n;
	return 0;
}

static const struct vc_device_ops emu_ops = {
	.name = "emu",
	.close = emu_close,
	.host_alloc = emu_host_alloc,
	.host_free = emu_host_free,
	.mem_alloc = emu_mem_alloc,
	.mem_free = emu_mem_free,
	.batch_init = emu_batch_init,
	.batch_fini = emu_batch_fini,
	.batch_submit = emu_batch_submit,
	.batch_wait = emu_batch_wait,
	.memcpy_sync = emu_memcpy_sync,
	.gc_run = emu_gc_run,
};

int vc_emu_open(struct vc_device **out)
{
	struct emu *e = calloc(1, sizeof *e);
	if (!e)
		return vc_err(-ENOMEM, "emu: out of memory");
	e->dev.ops = &emu_ops;
	strcpy(e->dev.desc, "emulated (host memory)");
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->work, NULL);
	pthread_cond_init(&e->done, NULL);
	int r = pthread_create(&e->worker, NULL, worker_main, e);
	if (r) {
		free(e);
		return vc_err(-r, "emu: cannot start worker thread");
	}
	*out = &e->dev;
	return 0;
}
