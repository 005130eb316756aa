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
 * Several devices (device.h's vc_device_count .. vc_device_fault), after
 * that: the count, which handles are one device, and the UUIDs; moves
 * between two devices' memory submitted on either (plain and chunked
 * memory, the latter mapped before and after peer_enable), every byte
 * checked; and the fault hook: a batch in flight and one after, copies,
 * a device queue's producer (waiting for its moves or for a slot), the
 * jobs, teardown, and a device beside the failed one that goes on. On
 * CUDA the two-device parts need two GPUs (they say so and are left out
 * otherwise), and the fault, which kills its ordinal's context, comes
 * last.
 *
 * VC_TEST_DEVICE=emu|cuda picks the backend; cuda skips without a GPU.
 * Arguments name the parts to run (main's table; all by default).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/cmp.h"
#include "device/device.h"
#include "device/fp.h"
#include "device/queue.h"
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

/* --- several devices (device.h: vc_device_count .. vc_device_fault) -------
 *
 * A region is pages of one device's memory with a host mirror: moves
 * apply to the mirror as they are added, and a check reads the region
 * back through its owner (memcpy_sync) and compares every byte. */

#define MG_PS 4096u
#define MG_PAGES 64u

struct region {
	struct vc_device *owner;
	uint64_t base;
	unsigned char *mirror;
	const char *name;
};

static void region_fill(struct region *g, uint64_t seed)
{
	g->mirror = malloc((size_t)MG_PAGES * MG_PS);
	CHECK(g->mirror);
	for (size_t i = 0; i < (size_t)MG_PAGES * MG_PS; i += 8) {
		uint64_t v = t_rand(&seed);
		memcpy(g->mirror + i, &v, 8);
	}
	CHECK_OK(g->owner->ops->memcpy_sync(g->owner, g->base, (uint64_t)(uintptr_t)g->mirror,
					    (size_t)MG_PAGES * MG_PS));
}

static void region_check(const struct region *g)
{
	unsigned char *back = malloc((size_t)MG_PAGES * MG_PS);
	CHECK(back);
	CHECK_OK(g->owner->ops->memcpy_sync(g->owner, (uint64_t)(uintptr_t)back, g->base,
					    (size_t)MG_PAGES * MG_PS));
	for (uint32_t p = 0; p < MG_PAGES; p++)
		if (memcmp(back + (size_t)p * MG_PS, g->mirror + (size_t)p * MG_PS, MG_PS) != 0) {
			fprintf(stderr, "%s (device %d) page %u is wrong\n", g->name,
				g->owner->ordinal, p);
			exit(1);
		}
	free(back);
}

struct tbatch {
	struct vc_device *d;
	struct vc_dbatch b;
};

static void tbatch_init(struct tbatch *t, struct vc_device *d, uint32_t ps)
{
	void *mv;
	uint64_t mv_dev;
	t->d = d;
	CHECK_OK(d->ops->host_alloc(d, 2 * MG_PAGES * sizeof(struct vc_move), &mv, &mv_dev));
	memset(&t->b, 0, sizeof t->b);
	t->b.moves = mv;
	t->b.moves_dev = mv_dev;
	t->b.cap = 2 * MG_PAGES;
	t->b.page_size = ps;
	CHECK_OK(d->ops->batch_init(d, &t->b));
}

static void tbatch_fini(struct tbatch *t)
{
	t->d->ops->batch_fini(t->d, &t->b);
	t->d->ops->host_free(t->d, t->b.moves);
}

/* Page i of s to page j of t (or an exchange), applied to the mirrors. */
static void tmove(struct tbatch *t, int op, struct region *s, uint32_t i, struct region *d,
		  uint32_t j)
{
	CHECK(t->b.n < t->b.cap);
	t->b.moves[t->b.n++] = (struct vc_move){ .src = s->base + (uint64_t)i * MG_PS,
						 .dst = d->base + (uint64_t)j * MG_PS,
						 .op = (uint32_t)op };
	unsigned char *a = s->mirror + (size_t)i * MG_PS, *b = d->mirror + (size_t)j * MG_PS;
	if (op == VC_MOVE_COPY) {
		memcpy(b, a, MG_PS);
	} else {
		unsigned char tmp[MG_PS];
		memcpy(tmp, a, MG_PS);
		memcpy(a, b, MG_PS);
		memcpy(b, tmp, MG_PS);
	}
}

static void tbatch_run(struct tbatch *t, bool dma)
{
	t->b.dma = dma;
	CHECK_OK(t->d->ops->batch_submit(t->d, &t->b));
	CHECK_OK(t->d->ops->batch_wait(t->d, &t->b));
	t->b.n = 0;
}

/* A page index scattered over [0, n) (n a multiple of 8, 7 coprime to
 * it): consecutive i never land on consecutive pages, so a batch of them
 * takes the move kernel, not the one-memcpy path. */
static uint32_t scatter(uint32_t i, uint32_t n)
{
	return (i * 7 + 3) % n;
}

/* A stand-in for another backend: only what the wrappers read. */
static const struct vc_device_ops other_ops = { .name = "other" };

/* vc_device_count, vc_device_same, the uuids and the ordinal checks. */
static void test_same(int kind)
{
	int n = vc_device_count(kind);
	fprintf(stderr, "devices of this kind: %d\n", n);
	CHECK(n >= 1);
	if (kind == VC_DEVICE_EMU) {
		CHECK(n == VC_EMU_DEVICES);
		struct vc_device *x = NULL;
		CHECK(vc_device_open(kind, VC_EMU_DEVICES, &x) == -VC_ENODEVICE && !x);
		CHECK(strstr(vc_last_error(), "emulated devices are 0 .."));
		CHECK(vc_device_open(kind, -1, &x) == -VC_ENODEVICE && !x);
	}
	CHECK(vc_device_count(VC_DEVICE_AUTO) >= 1);
	CHECK(vc_device_count(-1) == 0);
	struct vc_device *a, *a2, *b = NULL;
	CHECK_OK(vc_device_open(kind, 0, &a));
	CHECK_OK(vc_device_open(kind, 0, &a2));
	CHECK(a->ordinal == 0 && a2->ordinal == 0);
	CHECK(vc_device_same(a, a2) && vc_device_same(a2, a));
	unsigned char ua[16], ua2[16], ub[16];
	CHECK_OK(a->ops->uuid(a, ua));
	CHECK_OK(a2->ops->uuid(a2, ua2));
	CHECK(memcmp(ua, ua2, 16) == 0);
	CHECK_OK(vc_device_peer_enable(a, a2)); /* one GPU: nothing to open */
	if (n >= 2) {
		CHECK_OK(vc_device_open(kind, 1, &b));
		CHECK(b->ordinal == 1);
		CHECK(!vc_device_same(a, b) && !vc_device_same(b, a2));
		CHECK_OK(b->ops->uuid(b, ub));
		CHECK(memcmp(ua, ub, 16) != 0);
	}
	struct vc_device other = { .ops = &other_ops, .ordinal = 0 };
	CHECK(!vc_device_same(a, &other));
	CHECK(vc_device_peer_enable(a, &other) == -ENOTSUP);
	CHECK(vc_device_fault(&other) == -ENOTSUP);
	vc_device_close(b);
	vc_device_close(a2);
	vc_device_close(a);
	fprintf(stderr, "ok  count, same, uuids%s\n", n >= 2 ? "" : " (one device: no second)");
}

/* Moves between two devices' memory, submitted on either: plain device
 * memory both ways, in the move kernel (scattered pages, a SWAP), the
 * one-memcpy path (a contiguous run) and the copy engines (dma); and
 * chunked memory (mem_reserve + mem_map) of device 1, one part mapped
 * before peer_enable and one after. */
static void test_peers(int kind)
{
	if (vc_device_count(kind) < 2) {
		fprintf(stderr, "SKIP two devices: %d device(s) of this kind; peer moves not "
				"tested\n", vc_device_count(kind));
		return;
	}
	struct vc_device *d0, *d1;
	CHECK_OK(vc_device_open(kind, 0, &d0));
	CHECK_OK(vc_device_open(kind, 1, &d1));
	const size_t bytes = (size_t)MG_PAGES * MG_PS;
	struct region a0 = { .owner = d0, .name = "device 0 memory" };
	struct region a1 = { .owner = d1, .name = "device 1 memory" };
	CHECK_OK(d0->ops->mem_alloc(d0, bytes, &a0.base));
	CHECK_OK(d1->ops->mem_alloc(d1, bytes, &a1.base));
	/* Chunked memory of device 1: two parts of a granule or more. */
	struct region v[2] = { { .owner = d1, .name = "device 1 part mapped before" },
			       { .owner = d1, .name = "device 1 part mapped after" } };
	const uint64_t g = d1->map_granularity;
	const uint64_t part = g ? (bytes + g - 1) / g * g : 0;
	uint64_t vbase = 0;
	if (g) {
		CHECK_OK(d1->ops->mem_reserve(d1, 2 * part, &vbase));
		CHECK_OK(d1->ops->mem_map(d1, vbase, part));
		v[0].base = vbase;
		v[1].base = vbase + part;
	} else {
		fprintf(stderr, "device 1 has no chunked memory: that part is not tested\n");
	}
	CHECK_OK(vc_device_peer_enable(d0, d1));
	CHECK_OK(vc_device_peer_enable(d1, d0));
	CHECK_OK(vc_device_peer_enable(d0, d1)); /* again: already open */
	if (g)
		CHECK_OK(d1->ops->mem_map(d1, v[1].base, part));
	region_fill(&a0, 11);
	region_fill(&a1, 12);
	if (g) {
		region_fill(&v[0], 13);
		region_fill(&v[1], 14);
	}

	struct tbatch t0, t1;
	tbatch_init(&t0, d0, MG_PS);
	tbatch_init(&t1, d1, MG_PS);
	const uint32_t h = MG_PAGES / 2;
	/* On device 0: device 1's lower half to device 0's lower half, and
	 * device 0's upper half to device 1's upper half, scattered. */
	for (uint32_t i = 0; i < h; i++) {
		tmove(&t0, VC_MOVE_COPY, &a1, i, &a0, scatter(i, h));
		tmove(&t0, VC_MOVE_COPY, &a0, h + i, &a1, h + scatter(i, h));
	}
	tbatch_run(&t0, false);
	region_check(&a0);
	region_check(&a1);
	/* Contiguous runs (one memcpy on CUDA), each way, on device 0. */
	for (uint32_t i = 0; i < h; i++)
		tmove(&t0, VC_MOVE_COPY, &a1, i, &a0, h + i);
	tbatch_run(&t0, false);
	for (uint32_t i = 0; i < h; i++)
		tmove(&t0, VC_MOVE_COPY, &a0, i, &a1, i);
	tbatch_run(&t0, false);
	/* Exchanges across the two, on device 0, then the copy engines. */
	for (uint32_t i = 0; i < h; i++)
		tmove(&t0, VC_MOVE_SWAP, &a0, scatter(i, h), &a1, h + i);
	tbatch_run(&t0, false);
	for (uint32_t i = 0; i < h; i++) {
		tmove(&t0, VC_MOVE_COPY, &a1, scatter(i, h), &a0, i);
		tmove(&t0, VC_MOVE_SWAP, &a0, h + i, &a1, h + scatter(i, h));
	}
	tbatch_run(&t0, true);
	/* On device 1: its pages to device 0's and back. */
	for (uint32_t i = 0; i < h; i++) {
		tmove(&t1, VC_MOVE_COPY, &a0, scatter(i, h), &a1, i);
		tmove(&t1, VC_MOVE_COPY, &a1, h + i, &a0, h + scatter(i, h));
	}
	tbatch_run(&t1, false);
	region_check(&a0);
	region_check(&a1);
	if (g) {
		/* Device 1's chunked parts, read and written by device 0's
		 * moves, and device 0's memory by device 1's into them. */
		for (uint32_t i = 0; i < h; i++) {
			tmove(&t0, VC_MOVE_COPY, &v[0], scatter(i, h), &a0, i);
			tmove(&t0, VC_MOVE_COPY, &v[1], i, &a0, h + scatter(i, h));
			tmove(&t0, VC_MOVE_COPY, &a1, h + i, &v[0], h + scatter(i, h));
			tmove(&t0, VC_MOVE_SWAP, &a1, i, &v[1], h + i);
		}
		tbatch_run(&t0, false);
		for (uint32_t i = 0; i < h; i++)
			tmove(&t0, VC_MOVE_COPY, &v[1], h + i, &a0, i); /* a run */
		tbatch_run(&t0, false);
		for (uint32_t i = 0; i < h; i++)
			tmove(&t1, VC_MOVE_COPY, &a0, scatter(i, h), &v[0], i);
		tbatch_run(&t1, false);
		region_check(&v[0]);
		region_check(&v[1]);
		region_check(&a0);
		region_check(&a1);
		CHECK_OK(d1->ops->mem_unmap(d1, v[0].base, part));
		CHECK_OK(d1->ops->mem_unmap(d1, v[1].base, part));
		d1->ops->mem_unreserve(d1, vbase, 2 * part);
		free(v[0].mirror);
		free(v[1].mirror);
	}
	tbatch_fini(&t0);
	tbatch_fini(&t1);
	d0->ops->mem_free(d0, a0.base);
	d1->ops->mem_free(d1, a1.base);
	free(a0.mirror);
	free(a1.mirror);
	vc_device_close(d1);
	vc_device_close(d0);
	fprintf(stderr, "ok  peer moves between devices 0 and 1%s\n",
		g ? ", chunked memory mapped before and after peer_enable" : "");
}

/* A device-queue producer that runs until its device fails: rounds of
 * 4 KiB moves host -> device -> host on a ring shallower than a round,
 * so that it also waits for slots (vc_dq_submit), not only for its
 * moves (vc_dq_wait). */
struct fault_prod {
	struct vc_dq *q;
	uint64_t host_dev, gpu;
	_Atomic int rounds;
	_Atomic bool done;
	int err;
};

#define FP_PAGES 256u

static void *fault_prod_main(void *arg)
{
	struct fault_prod *p = arg;
	static struct vc_move mv[FP_PAGES];
	int r = 0;
	while (r == 0) {
		bool up = atomic_load(&p->rounds) % 2 == 0;
		for (uint32_t i = 0; i < FP_PAGES; i++) {
			uint64_t h = p->host_dev + (uint64_t)i * MG_PS;
			uint64_t g = p->gpu + (uint64_t)i * MG_PS;
			mv[i] = (struct vc_move){ .src = up ? h : g, .dst = up ? g : h };
		}
		struct vc_dq_span sp;
		r = vc_dq_submit(p->q, 0, mv, FP_PAGES, &sp);
		if (r == 0)
			r = vc_dq_wait(p->q, &sp);
		if (r == 0)
			atomic_fetch_add(&p->rounds, 1);
	}
	p->err = r;
	atomic_store(&p->done, true);
	return NULL;
}

/* The fault hook: batches in flight, queued and submitted after it,
 * copies, a queue's waiters (blocked at the fault, and on a move
 * submitted after it), the other jobs, and teardown; and a device beside
 * it that goes on. `victim` is the ordinal faulted; `bystander` another
 * one, or -1. */
#define BIG_PS (2u << 20)
#define BIG_PAGES 32u

static void test_fault(int kind, int victim, int bystander)
{
	alarm(300); /* a waiter left hanging fails the test, not the CI run */
	const bool emu = kind == VC_DEVICE_EMU;
	struct vc_device *d, *same = NULL, *other = NULL;
	CHECK_OK(vc_device_open(kind, victim, &d));
	if (!emu)
		CHECK_OK(vc_device_open(kind, victim, &same)); /* shares the context */
	if (bystander >= 0)
		CHECK_OK(vc_device_open(kind, bystander, &other));

	/* Host pages: [0, FP_PAGES) the producer's; then batch A2's sources
	 * and destinations, batch B's, and one source and one destination
	 * page of a queue move. Device pages: the producer's. All of A2's,
	 * B's and the queue move's pages are host memory, so that what they
	 * did can be read without the device. */
	const size_t hpages = FP_PAGES + 4 * MG_PAGES + 2;
	void *hv;
	uint64_t host_dev, gpu;
	CHECK_OK(d->ops->host_alloc(d, hpages * MG_PS, &hv, &host_dev));
	CHECK_OK(d->ops->mem_alloc(d, (size_t)FP_PAGES * MG_PS, &gpu));
	unsigned char *host = hv;
	uint64_t seed = 21;
	for (size_t i = 0; i < hpages * MG_PS; i += 8) {
		uint64_t w = t_rand(&seed);
		memcpy(host + i, &w, 8);
	}
#define HPAGE(k) (host_dev + (uint64_t)(k) * MG_PS)
	const uint32_t a2_src = FP_PAGES, a2_dst = a2_src + MG_PAGES, b_src = a2_dst + MG_PAGES,
		       b_dst = b_src + MG_PAGES, q_src = b_dst + MG_PAGES, q_dst = q_src + 1;
	unsigned char *before = malloc(hpages * MG_PS);
	CHECK(before);

	struct fault_prod p = { .host_dev = host_dev, .gpu = gpu };
	struct vc_dq_config qc = { .page_size = MG_PS, .depth = 64, .nrings = 1 };
	CHECK_OK(vc_dq_create(d, &qc, &p.q));
	struct vc_dq *q2; /* idle at the fault, for a move submitted after it */
	CHECK_OK(vc_dq_create(d, &qc, &q2));
	struct vc_move qm = { .src = HPAGE(q_src), .dst = HPAGE(q_dst) };
	struct vc_dq_span sp;
	CHECK_OK(vc_dq_submit(q2, 0, &qm, 1, &sp));
	CHECK_OK(vc_dq_wait(q2, &sp));
	CHECK(memcmp(host + (size_t)q_src * MG_PS, host + (size_t)q_dst * MG_PS, MG_PS) == 0);
	memset(host + (size_t)q_dst * MG_PS, 0x5a, MG_PS);
	pthread_t pt;
	CHECK(pthread_create(&pt, NULL, fault_prod_main, &p) == 0);
	while (atomic_load(&p.rounds) < 4 && !atomic_load(&p.done))
		usleep(1000);
	CHECK(!atomic_load(&p.done)); /* the queue works before the fault */

	/* A1: 32 exchanges of 2 MiB host pages (64 MiB each way: tens of
	 * milliseconds on emu's one worker); A2, queued behind it, and B,
	 * submitted after the fault: 4 KiB host -> host copies, scattered. */
	void *bigv;
	uint64_t big_dev;
	CHECK_OK(d->ops->host_alloc(d, 2 * (size_t)BIG_PAGES * BIG_PS, &bigv, &big_dev));
	memset(bigv, 0x33, 2 * (size_t)BIG_PAGES * BIG_PS);
	struct tbatch ta1, ta2, tb;
	tbatch_init(&ta1, d, BIG_PS);
	tbatch_init(&ta2, d, MG_PS);
	tbatch_init(&tb, d, MG_PS);
	for (uint32_t i = 0; i < BIG_PAGES; i++)
		ta1.b.moves[i] = (struct vc_move){ .src = big_dev + (uint64_t)i * BIG_PS,
						   .dst = big_dev + (uint64_t)(BIG_PAGES + i) * BIG_PS,
						   .op = VC_MOVE_SWAP };
	for (uint32_t i = 0; i < MG_PAGES; i++) {
		const uint32_t k = scatter(i, MG_PAGES);
		ta2.b.moves[i] = (struct vc_move){ .src = HPAGE(a2_src + i), .dst = HPAGE(a2_dst + k) };
		tb.b.moves[i] = (struct vc_move){ .src = HPAGE(b_src + i), .dst = HPAGE(b_dst + k) };
	}
	ta1.b.n = BIG_PAGES;
	ta2.b.n = tb.b.n = MG_PAGES;
	/* Not the producer's pages: its queue moves into them meanwhile. */
	memcpy(before + (size_t)FP_PAGES * MG_PS, host + (size_t)FP_PAGES * MG_PS,
	       (hpages - FP_PAGES) * MG_PS);

	CHECK_OK(d->ops->batch_submit(d, &ta1.b));
	CHECK_OK(d->ops->batch_submit(d, &ta2.b));
	CHECK_OK(vc_device_fault(d));
	const int rb = d->ops->batch_submit(d, &tb.b);
	CHECK(rb == 0 || rb == -VC_EDEVICE);
	const int ra1 = d->ops->batch_wait(d, &ta1.b), ra2 = d->ops->batch_wait(d, &ta2.b);
	fprintf(stderr, "batches in flight at the fault: %s, %s\n",
		ra1 ? vc_strerror(ra1) : "completed", ra2 ? vc_strerror(ra2) : "completed");
	CHECK(ra1 == 0 || ra1 == -VC_EDEVICE);
	CHECK(ra2 == 0 || ra2 == -VC_EDEVICE);
	/* On emu A2 was queued behind A1 when the flag went up: the worker
	 * completes it failed and moves nothing. (On CUDA the trap meets
	 * whatever is in flight: either outcome.) */
	if (emu)
		CHECK(ra2 == -VC_EDEVICE &&
		      memcmp(before + (size_t)a2_dst * MG_PS, host + (size_t)a2_dst * MG_PS,
			     (size_t)MG_PAGES * MG_PS) == 0);
	CHECK(d->ops->batch_wait(d, &tb.b) == -VC_EDEVICE);
	CHECK(d->ops->batch_wait(d, &tb.b) == -VC_EDEVICE); /* and again */
	CHECK(memcmp(before + (size_t)b_dst * MG_PS, host + (size_t)b_dst * MG_PS,
		     (size_t)MG_PAGES * MG_PS) == 0); /* B moved nothing */

	/* The queue: the producer, whichever wait the fault caught it in
	 * (for its moves, or for a slot), gets the device's error. */
	for (int i = 0; i < 10000 && !atomic_load(&p.done); i++)
		usleep(1000);
	if (!atomic_load(&p.done)) {
		fprintf(stderr, "a device-queue producer was not released by the fault (%d "
				"rounds)\n", atomic_load(&p.rounds));
		exit(1);
	}
	pthread_join(pt, NULL);
	fprintf(stderr, "queue producer after %d rounds: %s\n", atomic_load(&p.rounds),
		vc_strerror(p.err));
	CHECK(p.err == -VC_EDEVICE);
	/* Moves submitted after the fault to the idle queue, twice its
	 * depth: the submission itself must wait for slots that never come
	 * free, and gives up with the error; the waiter is released with
	 * it; and nothing moves, however long one waits. */
	struct vc_move qms[128];
	CHECK(sizeof qms / sizeof *qms >= 2 * qc.depth);
	for (size_t i = 0; i < sizeof qms / sizeof *qms; i++)
		qms[i] = qm;
	CHECK(vc_dq_submit(q2, 0, qms, sizeof qms / sizeof *qms, &sp) == -VC_EDEVICE);
	CHECK(vc_dq_wait(q2, &sp) == -VC_EDEVICE);
	usleep(20000); /* a lane that ignored the fault would have moved them by now */
	CHECK(!vc_dq_done(q2, &sp));
	CHECK(memcmp(before + (size_t)q_dst * MG_PS, host + (size_t)q_dst * MG_PS, MG_PS) == 0);

	/* Copies and the rest. */
	CHECK(d->ops->memcpy_sync(d, HPAGE(0), gpu, MG_PS) == -VC_EDEVICE);
	if (same)
		CHECK(same->ops->memcpy_sync(same, HPAGE(0), gpu, MG_PS) == -VC_EDEVICE);
	if (emu) {
		uint64_t r0, x;
		CHECK(d->ops->mem_reserve(d, d->map_granularity, &r0) == -VC_EDEVICE);
		CHECK(d->ops->mem_alloc(d, MG_PS, &x) == -VC_EDEVICE);
		/* The jobs fail, though each has nothing to do. */
		struct vc_gc_job gj = { .page_size = MG_PS, .per_seg = 1 };
		struct vc_fp_job fj = { .n = 0 };
		struct vc_cmp_job cj = { .n = 0 };
		CHECK(d->ops->gc_run(d, &gj) == -VC_EDEVICE);
		CHECK(d->ops->fp_run(d, &fj) == -VC_EDEVICE);
		CHECK(d->ops->cmp_start(d, &cj) == -VC_EDEVICE);
		CHECK(d->ops->cmp_wait(d) == -VC_EDEVICE);
		/* What tears down still works. */
		void *h2;
		uint64_t h2_dev;
		CHECK_OK(d->ops->host_alloc(d, MG_PS, &h2, &h2_dev));
		d->ops->host_free(d, h2);
	}
#undef HPAGE

	/* Teardown of the failed device: nothing may hang. */
	vc_dq_destroy(q2);
	vc_dq_destroy(p.q);
	tbatch_fini(&ta1);
	tbatch_fini(&ta2);
	tbatch_fini(&tb);
	d->ops->host_free(d, bigv);
	d->ops->mem_free(d, gpu);
	d->ops->host_free(d, hv);
	vc_device_close(same);
	vc_device_close(d);
	free(before);

	/* CUDA: a trap is the driver's sticky error, which on the two-H200
	 * machine (driver 580) took every GPU of the process with it, peer
	 * access or not (docs/MULTIGPU.md, bench/results/.../faultprobe):
	 * there the bystander fails too, and that is all this can check. */
	uint64_t probe = 0;
	int pr = other && !emu ? other->ops->mem_alloc(other, MG_PS, &probe) : 0;
	if (other && !emu && pr == 0)
		other->ops->mem_free(other, probe);
	if (other && !emu && pr < 0) {
		CHECK(pr == -VC_EDEVICE);
		fprintf(stderr, "the fault of device %d took device %d with it (the driver's "
				"sticky error)\n", victim, bystander);
		vc_device_close(other);
		other = NULL;
	}
	if (other) {
		/* The device beside it goes on: a batch and a copy. */
		struct region r = { .owner = other, .name = "the bystander's memory" };
		CHECK_OK(other->ops->mem_alloc(other, (size_t)MG_PAGES * MG_PS, &r.base));
		region_fill(&r, 31);
		struct tbatch t;
		tbatch_init(&t, other, MG_PS);
		for (uint32_t i = 0; i < MG_PAGES / 2; i++)
			tmove(&t, VC_MOVE_COPY, &r, i, &r, MG_PAGES / 2 + scatter(i, MG_PAGES / 2));
		tbatch_run(&t, false);
		region_check(&r);
		tbatch_fini(&t);
		other->ops->mem_free(other, r.base);
		free(r.mirror);
		vc_device_close(other);
	}
	alarm(0);
	fprintf(stderr, "ok  fault of device %d: batches, copies, queue waiters, teardown%s\n",
		victim, other ? "; the device beside it goes on" : "");
}

/* The moves within one device at every page size: scattered batches of
 * every kind, the empty batch and the concurrent waiters, or the
 * contiguous runs (a part each: checking every byte after each group
 * makes them most of the test's time at 64 KiB pages). */
static void one_device(int kind, bool runs)
{
	struct ctx *c = calloc(1, sizeof *c);
	CHECK(c);
	int r = vc_device_open(kind, 0, &c->d);
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
		for (size_t ni = 0; ni < sizeof ns / sizeof ns[0] && !runs; ni++)
			for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
				scattered(c, kinds[ki], ns[ni]);
				fprintf(stderr, "ok  page %6u  batch %4u  %s\n", sizes[si], ns[ni],
					kind_name[kinds[ki]]);
			}
		for (size_t ni = 0; ni < sizeof ns / sizeof ns[0] && runs; ni++) {
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
		if (!runs) {
			begin(c);
			run(c); /* empty batch */
			verify(c);
			concurrent_waits(c);
			fprintf(stderr, "ok  page %6u  empty batch, 4 concurrent waiters\n", sizes[si]);
		}
		teardown(c);
	}
	fprintf(stderr, "ok  %lu batches, %lu moves, every byte checked\n", c->batches, c->moves);
	free(c->stage);
	vc_device_close(c->d);
	free(c);
}

static void part_scattered(int kind, int ops)
{
	(void)ops;
	one_device(kind, false);
}

static void part_runs(int kind, int ops)
{
	(void)ops;
	one_device(kind, true);
}

static void part_devices(int kind, int ops)
{
	(void)ops;
	struct vc_device *d = NULL;
	int r = vc_device_open(kind, 0, &d);
	t_skip_if_absent(r, "test_device");
	CHECK_OK(r);
	vc_device_close(d);
	test_same(kind);
	test_peers(kind);
	/* Last: on CUDA the fault kills the victim ordinal's context for the
	 * rest of the process. With one GPU there is no device beside it. */
	if (vc_device_count(kind) >= 4 && kind == VC_DEVICE_EMU)
		test_fault(kind, 2, 3);
	else if (vc_device_count(kind) >= 2)
		test_fault(kind, 1, 0);
	else {
		fprintf(stderr, "one device: the fault is tested without a device beside it\n");
		test_fault(kind, 0, -1);
	}
}

/* Arguments: the parts to run (all by default), a process each under
 * ctest. `devices` is last: on CUDA its fault ends the process's GPU. */
static const struct t_part parts[] = {
	{ "scattered", part_scattered, false },
	{ "runs", part_runs, false },
	{ "devices", part_devices, false },
};

int main(int argc, char **argv)
{
	return t_parts_main(argc, argv, parts, sizeof parts / sizeof parts[0], 0, "device");
}
