/* Device backend test: batches of page moves checked byte for byte.
 *
 * Two page pools, one in host memory (host_alloc) and one in device memory
 * (mem_alloc). Every page slot holds a "content id"; the bytes of content
 * id c are a hash of (seed, c, word index), so a page that is stale, moved
 * to the wrong slot, torn, or shifted by any multiple of 8 bytes reads
 * wrong. The reference model is just the id of each slot: COPY copies the
 * id, SWAP exchanges two. After each group of batches every byte of both
 * pools is checked (device memory read back with memcpy_sync), so a stray
 * write anywhere is caught too.
 *
 * Covered, for page sizes 512, 4096 and 65536 and batch sizes 1, 7, 256 and
 * 1000: scattered COPY host->device, device->host, device->device, SWAP
 * host<->device, and mixed batches of all kinds of move (host->host and
 * swaps within a pool too); contiguous runs (the CUDA backend's one-memcpy
 * path) and runs broken at the end; an empty batch; one batch waited on by
 * 4 threads at once and then again after completion.
 *
 * VC_TEST_DEVICE=emu|cuda picks the backend; cuda skips without a GPU.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "testutil.h"
#include "vramcache.h"

/* Slots per pool: a batch of 1000 device->device moves needs 2000
 * distinct pages of one pool. At 64 KiB pages the two pools are 256 MiB. */
#define NPAGES 2048
#define MAXBATCH 1000
#define STAGE_BYTES (8u << 20)

enum { HOST = 0, DEV = 1 };

struct pool {
	uint64_t base;     /* device-visible address of slot 0 */
	unsigned char *hp; /* host pointer (HOST pool only) */
	uint32_t id[NPAGES];   /* content id held by each slot: the model */
	uint32_t perm[NPAGES]; /* slots, shuffled as drawn */
	uint32_t drawn;        /* slots handed out in the current batch */
};

struct ctx {
	struct vc_device *d;
	uint32_t ps;
	struct pool pool[2];
	struct vc_dbatch b;
	uint64_t rng;
	uint64_t seed; /* of the content hash */
	unsigned char *stage;
	unsigned long batches, moves;
};

static uint64_t content_word(uint64_t seed, uint32_t id, uint64_t j)
{
	uint64_t x = seed ^ ((uint64_t)id << 40) ^ j;
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void fill_page(const struct ctx *c, unsigned char *p, uint32_t id)
{
	uint64_t *w = (uint64_t *)p;
	for (uint64_t j = 0; j < c->ps / 8; j++)
		w[j] = content_word(c->seed, id, j);
}

static void check_page(const struct ctx *c, const unsigned char *p, int which, uint32_t slot)
{
	uint32_t id = c->pool[which].id[slot];
	const uint64_t *w = (const uint64_t *)p;
	for (uint64_t j = 0; j < c->ps / 8; j++) {
		uint64_t want = content_word(c->seed, id, j);
		if (w[j] != want) {
			fprintf(stderr,
				"%s page %u of %u bytes: byte %llu is wrong (word %016llx, want %016llx "
				"of content %u) after %lu batches\n",
				which == HOST ? "host" : "device", slot, c->ps,
				(unsigned long long)(j * 8), (unsigned long long)w[j],
				(unsigned long long)want, id, c->batches);
			exit(1);
		}
	}
}

/* Every byte of both pools against the model. */
static void verify(struct ctx *c)
{
	for (uint32_t s = 0; s < NPAGES; s++)
		check_page(c, c->pool[HOST].hp + (size_t)s * c->ps, HOST, s);
	uint32_t per = STAGE_BYTES / c->ps;
	for (uint32_t s = 0; s < NPAGES; s += per) {
		uint32_t k = NPAGES - s < per ? NPAGES - s : per;
		CHECK_OK(c->d->ops->memcpy_sync(c->d, (uint64_t)(uintptr_t)c->stage,
						c->pool[DEV].base + (uint64_t)s * c->ps,
						(size_t)k * c->ps));
		for (uint32_t i = 0; i < k; i++)
			check_page(c, c->stage + (size_t)i * c->ps, DEV, s + i);
	}
}

static void setup(struct ctx *c, uint32_t ps)
{
	struct vc_device *d = c->d;
	c->ps = ps;
	size_t bytes = (size_t)NPAGES * ps;
	void *hp;
	CHECK_OK(d->ops->host_alloc(d, bytes, &hp, &c->pool[HOST].base));
	c->pool[HOST].hp = hp;
	CHECK_OK(d->ops->mem_alloc(d, bytes, &c->pool[DEV].base));
	CHECK(c->pool[HOST].base % 4096 == 0 && c->pool[DEV].base % 4096 == 0);
	for (uint32_t s = 0; s < NPAGES; s++) {
		c->pool[HOST].id[s] = 1 + s;
		c->pool[DEV].id[s] = 1 + NPAGES + s;
		c->pool[HOST].perm[s] = c->pool[DEV].perm[s] = s;
		fill_page(c, c->pool[HOST].hp + (size_t)s * ps, c->pool[HOST].id[s]);
	}
	uint32_t per = STAGE_BYTES / ps;
	for (uint32_t s = 0; s < NPAGES; s += per) {
		uint32_t k = NPAGES - s < per ? NPAGES - s : per;
		for (uint32_t i = 0; i < k; i++)
			fill_page(c, c->stage + (size_t)i * ps, c->pool[DEV].id[s + i]);
		CHECK_OK(d->ops->memcpy_sync(d, c->pool[DEV].base + (uint64_t)s * ps,
					     (uint64_t)(uintptr_t)c->stage, (size_t)k * ps));
	}

	void *mv;
	uint64_t mv_dev;
	CHECK_OK(d->ops->host_alloc(d, MAXBATCH * sizeof(struct vc_move), &mv, &mv_dev));
	memset(&c->b, 0, sizeof c->b);
	c->b.moves = mv;
	c->b.moves_dev = mv_dev;
	c->b.cap = MAXBATCH;
	c->b.page_size = ps;
	CHECK_OK(d->ops->batch_init(d, &c->b));
	/* A batch never submitted is complete. */
	CHECK_OK(d->ops->batch_wait(d, &c->b));
	verify(c);
}

static void teardown(struct ctx *c)
{
	struct vc_device *d = c->d;
	d->ops->batch_fini(d, &c->b);
	d->ops->host_free(d, c->b.moves);
	d->ops->host_free(d, c->pool[HOST].hp);
	d->ops->mem_free(d, c->pool[DEV].base);
}

/* A slot of pool `which` not yet used in this batch (partial Fisher-Yates). */
static uint32_t draw(struct ctx *c, int which)
{
	struct pool *p = &c->pool[which];
	CHECK(p->drawn < NPAGES);
	uint32_t j = p->drawn + (uint32_t)(t_rand(&c->rng) % (NPAGES - p->drawn));
	uint32_t s = p->perm[j];
	p->perm[j] = p->perm[p->drawn];
	p->perm[p->drawn++] = s;
	return s;
}

static uint64_t addr(const struct ctx *c, int which, uint32_t slot)
{
	return c->pool[which].base + (uint64_t)slot * c->ps;
}

/* Appends a move and applies it to the model. Pages of one batch are
 * disjoint, so applying in order equals applying at once. */
static void add_move(struct ctx *c, int op, int sp, uint32_t ss, int dp, uint32_t ds)
{
	CHECK(c->b.n < c->b.cap);
	struct vc_move *m = &c->b.moves[c->b.n++];
	m->src = addr(c, sp, ss);
	m->dst = addr(c, dp, ds);
	m->op = (uint32_t)op;
	m->_pad = 0;
	uint32_t *a = &c->pool[sp].id[ss], *b = &c->pool[dp].id[ds];
	if (op == VC_MOVE_COPY) {
		*b = *a;
	} else {
		uint32_t t = *a;
		*a = *b;
		*b = t;
	}
}

enum kind { H2D, D2H, D2D, H2H, SWAP_HD, SWAP_DD, SWAP_HH, MIXED, NKINDS = MIXED };
static const char *kind_name[] = { "copy h2d", "copy d2h", "copy d2d", "copy h2h",
				   "swap h<->d", "swap d<->d", "swap h<->h", "mixed" };

static void add_kind(struct ctx *c, enum kind k)
{
	if (k == MIXED)
		k = (enum kind)(t_rand(&c->rng) % NKINDS);
	switch (k) {
	case H2D:
		add_move(c, VC_MOVE_COPY, HOST, draw(c, HOST), DEV, draw(c, DEV));
		break;
	case D2H:
		add_move(c, VC_MOVE_COPY, DEV, draw(c, DEV), HOST, draw(c, HOST));
		break;
	case D2D:
		add_move(c, VC_MOVE_COPY, DEV, draw(c, DEV), DEV, draw(c, DEV));
		break;
	case H2H:
		add_move(c, VC_MOVE_COPY, HOST, draw(c, HOST), HOST, draw(c, HOST));
		break;
	case SWAP_HD:
		if (t_rand(&c->rng) & 1)
			add_move(c, VC_MOVE_SWAP, HOST, draw(c, HOST), DEV, draw(c, DEV));
		else
			add_move(c, VC_MOVE_SWAP, DEV, draw(c, DEV), HOST, draw(c, HOST));
		break;
	case SWAP_DD:
		add_move(c, VC_MOVE_SWAP, DEV, draw(c, DEV), DEV, draw(c, DEV));
		break;
	default:
		add_move(c, VC_MOVE_SWAP, HOST, draw(c, HOST), HOST, draw(c, HOST));
		break;
	}
}

static void begin(struct ctx *c)
{
	c->b.n = 0;
	c->pool[HOST].drawn = c->pool[DEV].drawn = 0;
}

static void run(struct ctx *c)
{
	CHECK_OK(c->d->ops->batch_submit(c->d, &c->b));
	CHECK_OK(c->d->ops->batch_wait(c->d, &c->b));
	/* Again after completion: still done, same status. */
	CHECK_OK(c->d->ops->batch_wait(c->d, &c->b));
	c->batches++;
	c->moves += c->b.n;
}

static void scattered(struct ctx *c, enum kind k, uint32_t n)
{
	/* Two batches back to back: the batch's state is reused. */
	for (int rep = 0; rep < 2; rep++) {
		begin(c);
		for (uint32_t i = 0; i < n; i++)
			add_kind(c, k);
		run(c);
	}
	verify(c);
}

/* Runs of n pages: slot s0+i of one pool to slot s1+i of the other (or of
 * the same pool, disjoint). With `broken`, the last move leaves the run
 * (it goes elsewhere, or is a swap), so the batch must take the general path. */
static void contiguous(struct ctx *c, int sp, int dp, uint32_t n, int broken)
{
	uint32_t s0, s1;
	if (sp == dp) {
		s0 = (uint32_t)(t_rand(&c->rng) % (NPAGES / 2 - n + 1));
		s1 = NPAGES / 2 + (uint32_t)(t_rand(&c->rng) % (NPAGES / 2 - n + 1));
	} else {
		s0 = (uint32_t)(t_rand(&c->rng) % (NPAGES - n + 1));
		s1 = (uint32_t)(t_rand(&c->rng) % (NPAGES - n + 1));
	}
	begin(c);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t ds = s1 + i;
		int op = VC_MOVE_COPY;
		if (broken && i == n - 1 && i > 0) {
			if (broken == 1) {
				/* a slot outside both runs */
				do
					ds = (uint32_t)(t_rand(&c->rng) % NPAGES);
				while ((ds >= s1 && ds < s1 + n) || (sp == dp && ds >= s0 && ds < s0 + n));
			} else {
				op = VC_MOVE_SWAP;
			}
		}
		add_move(c, op, sp, s0 + i, dp, ds);
	}
	run(c);
	verify(c);
}

struct waiter {
	struct ctx *c;
	pthread_barrier_t *start;
	int r;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	pthread_barrier_wait(w->start);
	w->r = w->c->d->ops->batch_wait(w->c->d, &w->c->b);
	if (w->r == 0) /* and again, now surely complete */
		w->r = w->c->d->ops->batch_wait(w->c->d, &w->c->b);
	if (w->r < 0)
		fprintf(stderr, "waiter: %s (%s)\n", vc_strerror(w->r), vc_last_error());
	return NULL;
}

/* One large batch, submitted and then waited on by 4 threads at once. */
static void concurrent_waits(struct ctx *c)
{
	enum { NW = 4 };
	pthread_t th[NW];
	struct waiter w[NW];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, NW + 1);
	begin(c);
	for (uint32_t i = 0; i < MAXBATCH; i++)
		add_kind(c, MIXED);
	for (int i = 0; i < NW; i++) {
		w[i] = (struct waiter){ .c = c, .start = &start, .r = 0 };
		CHECK(pthread_create(&th[i], NULL, waiter_main, &w[i]) == 0);
	}
	CHECK_OK(c->d->ops->batch_submit(c->d, &c->b));
	pthread_barrier_wait(&start);
	for (int i = 0; i < NW; i++) {
		pthread_join(th[i], NULL);
		CHECK_OK(w[i].r);
	}
	CHECK_OK(c->d->ops->batch_wait(c->d, &c->b));
	pthread_barrier_destroy(&start);
	c->batches++;
	c->moves += c->b.n;
	verify(c);
}

int main(void)
{
	struct ctx *c = calloc(1, sizeof *c);
	CHECK(c);
	int r = vc_device_open(t_device_kind(), 0, &c->d);
	t_skip_if_absent(r, "test_device");
	CHECK_OK(r);
	fprintf(stderr, "device: %s: %s\n", c->d->ops->name, c->d->desc);
	c->rng = 0x5eed0001;
	if (getenv("VC_TEST_SEED"))
		c->rng = strtoull(getenv("VC_TEST_SEED"), NULL, 0);
	fprintf(stderr, "seed: %#llx (set VC_TEST_SEED to repeat)\n", (unsigned long long)c->rng);
	c->seed = t_rand(&c->rng);
	c->stage = malloc(STAGE_BYTES);
	CHECK(c->stage);

	static const uint32_t sizes[] = { 512, 4096, 65536 };
	static const uint32_t ns[] = { 1, 7, 256, 1000 };
	static const enum kind kinds[] = { H2D, D2H, D2D, SWAP_HD, MIXED };
	for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
		setup(c, sizes[si]);
		for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
			for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
				scattered(c, kinds[ki], ns[ni]);
				fprintf(stderr, "ok  page %6u  batch %4u  %s\n", sizes[si], ns[ni],
					kind_name[kinds[ki]]);
			}
		for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
			uint32_t n = ns[ni];
			for (int broken = 0; broken < 3; broken++) {
				contiguous(c, HOST, DEV, n, broken);
				contiguous(c, DEV, HOST, n, broken);
				if (2 * n <= NPAGES) {
					contiguous(c, DEV, DEV, n, broken);
					contiguous(c, HOST, HOST, n, broken);
				}
			}
			fprintf(stderr, "ok  page %6u  batch %4u  contiguous runs\n", sizes[si], n);
		}
		begin(c);
		run(c); /* empty batch */
		verify(c);
		concurrent_waits(c);
		fprintf(stderr, "ok  page %6u  empty batch, 4 concurrent waiters\n", sizes[si]);
		teardown(c);
	}
	fprintf(stderr, "pass: %lu batches, %lu moves, every byte checked\n", c->batches, c->moves);
	free(c->stage);
	vc_device_close(c->d);
	free(c);
	return 0;
}
