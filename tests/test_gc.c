/* Device test of the log store's cleaning job (gc_run; struct vc_gc_job in
 * device/device.h) against a model on the host.
 *
 * A case is a store of segments in device memory with key[] and stamp[] in
 * pinned host memory, its segments dealt at random into sources (listed in
 * random order), a destination pool and others. Every slot holds a
 * "content id": the owner for a live page, a unique filler id otherwise;
 * the bytes of content id c are a hash of (per-case nonce, c, word index),
 * so a page that is stale, misplaced, torn or shifted reads wrong. The model
 * is the content id, key and stamp of every slot, and the slot of every
 * owner (where[], given to half the cases); a job is applied to it by
 * a stable merge sort of the live source slots (taken in source order) by
 * stamp, independent of both backends' code. After each job every key,
 * every stamp and every byte of the store is checked, so a stray write
 * anywhere (other segments, destination slots beyond the moved range, the
 * live slots before dst_first) is caught, and `moved` too.
 *
 * Covered: page sizes 512 B .. 2 MiB, 1 to 1024 slots per segment; load
 * factors 0, 0.5, 0.9 and 1; stamps with many duplicates (stability), all
 * equal (no sort), spread over 64 bits (64-bit sort keys, full bit range)
 * or roughly in log order; a second job continuing mid-segment in the first
 * one's destination; jobs of more than one sort tile and of more than 256
 * gather chunks; grids capped at 2 blocks (VC_CUDA_GC_BLOCKS) so every
 * grid-stride loop turns; two threads running jobs at once; -ENOSPC and
 * -EINVAL changing nothing, among them wrong statements (a live count off
 * by one, stamp bounds one too tight), which only the device can see.
 * Stated bounds are exact or loosened at random (more sort bits).
 *
 * VC_TEST_DEVICE=emu|cuda picks the backend; cuda skips without a GPU.
 * VC_TEST_QUICK=1 runs a third of the random cases and leaves out the
 * largest (for compute-sanitizer, which slows kernels a hundredfold).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "testutil.h"
#include "vramcache.h"

#define STAGE_BYTES (8u << 20)
#define FILLER (1ull << 40) /* content ids of non-owned pages start here */

enum stamp_mode { ST_DUP8, ST_POOL64, ST_EQUAL, ST_LOG, ST_RAND31, ST_EXTREME, ST_NMODES };
static const char *mode_name[] = { "dup8", "pool64", "equal", "log", "rand31", "extreme" };

struct tcase {
	struct vc_device *d;
	uint64_t rng, nonce;
	uint32_t ps, per, nseg;
	double lf;
	int mode;
	uint64_t pool[16]; /* ST_POOL64 values */
	char name[160];

	uint64_t base; /* the store: nseg * per slots */
	uint32_t *key;
	uint64_t key_dev;
	uint64_t *stamp;
	uint64_t stamp_dev;
	uint32_t *where; /* per owner (ids below nowners), or NULL */
	uint64_t where_dev;
	uint32_t nowners;

	uint64_t *cid; /* the model */
	uint32_t *xwhere;
	uint32_t *xkey;
	uint64_t *xstamp;
	uint32_t next_owner;
	uint64_t next_filler;

	uint32_t *segs; /* a permutation of the segments: roles by position */
	unsigned char *stage;
	unsigned long jobs, moved;
};

static uint64_t content_word(uint64_t nonce, uint64_t id, uint64_t j)
{
	uint64_t x = nonce ^ (id * 0x9e3779b97f4a7c15ull) ^ (j << 1);
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t rnd(struct tcase *t, uint64_t n)
{
	return t_rand(&t->rng) % n;
}

static uint64_t gen_stamp(struct tcase *t, uint64_t g)
{
	switch (t->mode) {
	case ST_DUP8:
		return rnd(t, 8);
	case ST_POOL64:
		return t->pool[rnd(t, 16)];
	case ST_EQUAL:
		return 42;
	case ST_LOG:
		return g * 4 + rnd(t, 64);
	case ST_RAND31:
		return rnd(t, 1ull << 31);
	default: {
		static const uint64_t ext[] = { 0, 1, UINT64_MAX - 1, UINT64_MAX };
		return ext[rnd(t, 4)];
	}
	}
}

static void set_live(struct tcase *t, uint64_t g)
{
	t->xwhere[t->next_owner] = (uint32_t)g;
	t->cid[g] = t->next_owner;
	t->xkey[g] = t->next_owner++;
	t->xstamp[g] = gen_stamp(t, g);
}

static void set_dead(struct tcase *t, uint64_t g)
{
	t->cid[g] = t->next_filler++;
	t->xkey[g] = VC_GC_DEAD;
	t->xstamp[g] = t_rand(&t->rng); /* garbage the job must leave alone */
}

/* Device memory and tables for nseg segments; the model's tables are the
 * truth, pushed to the store by upload(). */
static void tc_setup(struct tcase *t, uint32_t ps, uint32_t per, uint32_t nseg)
{
	struct vc_device *d = t->d;
	t->ps = ps;
	t->per = per;
	t->nseg = nseg;
	uint64_t slots = (uint64_t)nseg * per;
	CHECK_OK(d->ops->mem_alloc(d, slots * ps, &t->base));
	void *p;
	CHECK_OK(d->ops->host_alloc(d, slots * sizeof(uint32_t), &p, &t->key_dev));
	t->key = p;
	CHECK_OK(d->ops->host_alloc(d, slots * sizeof(uint64_t), &p, &t->stamp_dev));
	t->stamp = p;
	t->nowners = (uint32_t)slots + 1; /* owners are 1 .. live pages */
	t->where = NULL;
	t->where_dev = 0;
	if (rnd(t, 2)) {
		CHECK_OK(d->ops->host_alloc(d, t->nowners * sizeof(uint32_t), &p, &t->where_dev));
		t->where = p;
	}
	t->xwhere = malloc(t->nowners * sizeof *t->xwhere);
	t->cid = malloc(slots * sizeof *t->cid);
	t->xkey = malloc(slots * sizeof *t->xkey);
	t->xstamp = malloc(slots * sizeof *t->xstamp);
	t->segs = malloc(nseg * sizeof *t->segs);
	t->stage = malloc(STAGE_BYTES > ps ? STAGE_BYTES : ps);
	CHECK(t->cid && t->xkey && t->xstamp && t->segs && t->stage && t->xwhere);
	memset(t->xwhere, 0xff, t->nowners * sizeof *t->xwhere);
	t->nonce = t_rand(&t->rng);
	t->next_owner = 1;
	t->next_filler = FILLER;
	for (int i = 0; i < 16; i++)
		t->pool[i] = t_rand(&t->rng);
	for (uint32_t s = 0; s < nseg; s++)
		t->segs[s] = s;
	for (uint32_t s = nseg - 1; s > 0; s--) {
		uint32_t j = (uint32_t)rnd(t, s + 1), x = t->segs[s];
		t->segs[s] = t->segs[j];
		t->segs[j] = x;
	}
}

static void tc_teardown(struct tcase *t)
{
	struct vc_device *d = t->d;
	d->ops->mem_free(d, t->base);
	d->ops->host_free(d, t->key);
	d->ops->host_free(d, t->stamp);
	if (t->where)
		d->ops->host_free(d, t->where);
	free(t->xwhere);
	free(t->cid);
	free(t->xkey);
	free(t->xstamp);
	free(t->segs);
	free(t->stage);
}

static void fill_page(const struct tcase *t, unsigned char *p, uint64_t id)
{
	uint64_t *w = (uint64_t *)p;
	for (uint64_t j = 0; j < t->ps / 8; j++)
		w[j] = content_word(t->nonce, id, j);
}

static void upload(struct tcase *t)
{
	uint64_t slots = (uint64_t)t->nseg * t->per, per_stage = STAGE_BYTES / t->ps;
	if (per_stage == 0)
		per_stage = 1;
	memcpy(t->key, t->xkey, slots * sizeof *t->key);
	memcpy(t->stamp, t->xstamp, slots * sizeof *t->stamp);
	if (t->where)
		memcpy(t->where, t->xwhere, t->nowners * sizeof *t->where);
	for (uint64_t g = 0; g < slots; g += per_stage) {
		uint64_t k = slots - g < per_stage ? slots - g : per_stage;
		for (uint64_t i = 0; i < k; i++)
			fill_page(t, t->stage + i * t->ps, t->cid[g + i]);
		CHECK_OK(t->d->ops->memcpy_sync(t->d, t->base + g * t->ps,
						(uint64_t)(uintptr_t)t->stage, k * t->ps));
	}
}

static void fail(const struct tcase *t, const char *what, uint64_t g)
{
	fprintf(stderr, "FAIL %s: %s at slot %llu (segment %llu, slot %llu) after %lu jobs\n",
		t->name, what, (unsigned long long)g, (unsigned long long)(g / t->per),
		(unsigned long long)(g % t->per), t->jobs);
	exit(1);
}

/* Every key, stamp and byte of the store against the model. */
static void verify(struct tcase *t)
{
	uint64_t slots = (uint64_t)t->nseg * t->per, per_stage = STAGE_BYTES / t->ps;
	if (per_stage == 0)
		per_stage = 1;
	for (uint64_t g = 0; g < slots; g++) {
		if (t->key[g] != t->xkey[g]) {
			fprintf(stderr, "key %u, want %u\n", t->key[g], t->xkey[g]);
			fail(t, "wrong key", g);
		}
		if (t->stamp[g] != t->xstamp[g]) {
			fprintf(stderr, "stamp %llu, want %llu\n", (unsigned long long)t->stamp[g],
				(unsigned long long)t->xstamp[g]);
			fail(t, "wrong stamp", g);
		}
	}
	for (uint32_t o = 0; t->where && o < t->nowners; o++)
		if (t->where[o] != t->xwhere[o]) {
			fprintf(stderr, "owner %u at %u, want %u\n", o, t->where[o], t->xwhere[o]);
			fail(t, "wrong where[]", t->xwhere[o]);
		}
	for (uint64_t g = 0; g < slots; g += per_stage) {
		uint64_t k = slots - g < per_stage ? slots - g : per_stage;
		CHECK_OK(t->d->ops->memcpy_sync(t->d, (uint64_t)(uintptr_t)t->stage,
						t->base + g * t->ps, k * t->ps));
		for (uint64_t i = 0; i < k; i++) {
			const uint64_t *w = (const uint64_t *)(t->stage + i * t->ps);
			for (uint64_t j = 0; j < t->ps / 8; j++)
				if (w[j] != content_word(t->nonce, t->cid[g + i], j)) {
					fprintf(stderr, "byte %llu: want content %#llx\n",
						(unsigned long long)(j * 8),
						(unsigned long long)t->cid[g + i]);
					fail(t, "wrong page data", g + i);
				}
		}
	}
}

/* --- the model -------------------------------------------------------- */

struct live {
	uint64_t stamp;
	uint64_t g; /* source slot */
};

/* Stable bottom-up merge sort by stamp. */
static void merge_sort(struct live *a, struct live *tmp, uint64_t n)
{
	for (uint64_t w = 1; w < n; w *= 2) {
		for (uint64_t lo = 0; lo < n; lo += 2 * w) {
			uint64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			uint64_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi)
				tmp[k++] = a[j].stamp < a[i].stamp ? a[j++] : a[i++];
			while (i < mid)
				tmp[k++] = a[i++];
			while (j < hi)
				tmp[k++] = a[j++];
		}
		memcpy(a, tmp, n * sizeof *a);
	}
}

static uint64_t live_in(const struct tcase *t, const uint32_t *src, uint32_t nsrc)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < nsrc; i++)
		for (uint32_t s = 0; s < t->per; s++)
			n += t->xkey[(uint64_t)src[i] * t->per + s] != VC_GC_DEAD;
	return n;
}

/* Applies job j to the model; returns the pages it moves. */
static uint32_t model_job(struct tcase *t, const struct vc_gc_job *j)
{
	uint64_t per = t->per, cap = (uint64_t)j->nsrc * per, n = 0;
	struct live *a = malloc((cap + 1) * sizeof *a), *tmp = malloc((cap + 1) * sizeof *tmp);
	CHECK(a && tmp);
	for (uint32_t i = 0; i < j->nsrc; i++)
		for (uint64_t s = 0; s < per; s++) {
			uint64_t g = j->src[i] * per + s;
			if (t->xkey[g] != VC_GC_DEAD)
				a[n++] = (struct live){ t->xstamp[g], g };
		}
	merge_sort(a, tmp, n);
	for (uint64_t r = 0; r < n; r++) {
		uint64_t q = j->dst_first + r, gd = j->dst[q / per] * per + q % per, gs = a[r].g;
		CHECK(t->xkey[gd] == VC_GC_DEAD); /* the test's own precondition */
		t->cid[gd] = t->cid[gs];
		t->xkey[gd] = t->xkey[gs];
		t->xstamp[gd] = t->xstamp[gs];
		t->xwhere[t->xkey[gs]] = (uint32_t)gd;
	}
	free(a);
	free(tmp);
	return (uint32_t)n;
}

/* The live source slots' stamp range (lo > hi: none). */
static void exact_bounds(const struct tcase *t, const uint32_t *src, uint32_t nsrc, uint64_t *lo,
			 uint64_t *hi)
{
	*lo = UINT64_MAX;
	*hi = 0;
	for (uint32_t i = 0; i < nsrc; i++)
		for (uint32_t s = 0; s < t->per; s++) {
			uint64_t g = (uint64_t)src[i] * t->per + s;
			if (t->xkey[g] == VC_GC_DEAD)
				continue;
			*lo = t->xstamp[g] < *lo ? t->xstamp[g] : *lo;
			*hi = t->xstamp[g] > *hi ? t->xstamp[g] : *hi;
		}
}

/* A job with the model's statement: its live count and stamp bounds,
 * loosened at random where they can be. */
static struct vc_gc_job make_job(struct tcase *t, const uint32_t *src, uint32_t nsrc,
				 const uint32_t *dst, uint32_t ndst, uint32_t dst_first)
{
	uint64_t lo, hi;
	exact_bounds(t, src, nsrc, &lo, &hi);
	if (lo <= hi && rnd(t, 2)) {
		uint64_t down = rnd(t, 1000), up = rnd(t, 1000);
		lo = lo > down ? lo - down : 0;
		hi = hi < UINT64_MAX - up ? hi + up : UINT64_MAX;
	}
	return (struct vc_gc_job){ .base = t->base,
				   .page_size = t->ps,
				   .per_seg = t->per,
				   .key = t->key,
				   .key_dev = t->key_dev,
				   .stamp = t->stamp,
				   .stamp_dev = t->stamp_dev,
				   .where = t->where,
				   .where_dev = t->where_dev,
				   .nowners = t->where ? t->nowners : 0,
				   .src = src,
				   .dst = dst,
				   .nsrc = nsrc,
				   .ndst = ndst,
				   .dst_first = dst_first,
				   .live = (uint32_t)live_in(t, src, nsrc),
				   .stamp_min = lo,
				   .stamp_max = hi,
				   .moved = 12345 };
}

static void run_job(struct tcase *t, struct vc_gc_job *j)
{
	uint32_t want = model_job(t, j);
	int r = t->d->ops->gc_run(t->d, j);
	if (r < 0) {
		fprintf(stderr, "FAIL %s: gc_run = %d (%s; %s)\n", t->name, r, vc_strerror(r),
			vc_last_error());
		exit(1);
	}
	t->jobs++;
	if (j->moved != want) {
		fprintf(stderr, "FAIL %s: moved %u, want %u\n", t->name, j->moved, want);
		exit(1);
	}
	t->moved += want;
	/* The sources are the caller's to release (the log store does it):
	 * left as they were by the job, garbage from now on. */
	for (uint32_t i = 0; i < j->nsrc; i++)
		for (uint32_t s = 0; s < t->per; s++) {
			uint64_t g = (uint64_t)j->src[i] * t->per + s;
			CHECK(t->key[g] == t->xkey[g]);
			t->key[g] = t->xkey[g] = VC_GC_DEAD;
		}
	verify(t);
}

/* A job that must fail with `code` and change nothing. */
static void run_bad(struct tcase *t, struct vc_gc_job j, int code)
{
	int r = t->d->ops->gc_run(t->d, &j);
	if (r != code) {
		fprintf(stderr, "FAIL %s: gc_run = %d (%s), want %d (%s)\n", t->name, r,
			vc_strerror(r), code, vc_strerror(code));
		exit(1);
	}
	CHECK(j.moved == 12345);
	verify(t);
}

/* --- one case ---------------------------------------------------------- */

struct shape {
	uint32_t ps, per, nsrc, nother;
	double lf;
	int mode;
};

/* Segments by role in t->segs: [0, nsrc) sources of job 1, then a
 * destination pool of nsrc + nother + 3, then the others (job 2's sources).
 * Job 1 starts at a random slot of the pool's first segment, whose slots
 * before it hold live pages; job 2 continues where job 1 ended. */
static void run_case(struct tcase *t, const struct shape *sh, bool errors)
{
	const uint32_t npool = sh->nsrc + sh->nother + 3;
	tc_setup(t, sh->ps, sh->per, sh->nsrc + npool + sh->nother);
	t->lf = sh->lf;
	t->mode = sh->mode;
	snprintf(t->name, sizeof t->name,
		 "%s: page %u, %u slots/seg, %u+%u sources, load %.1f, stamps %s", t->d->ops->name,
		 sh->ps, sh->per, sh->nsrc, sh->nother, sh->lf, mode_name[sh->mode]);
	const uint32_t *src1 = t->segs, *pool = t->segs + sh->nsrc;
	const uint32_t *src2 = pool + npool;
	const uint32_t dst_first = (uint32_t)rnd(t, sh->per);

	for (uint32_t i = 0; i < t->nseg; i++) {
		uint32_t s = t->segs[i];
		bool in_pool = i >= sh->nsrc && i < sh->nsrc + npool;
		for (uint32_t k = 0; k < sh->per; k++) {
			uint64_t g = (uint64_t)s * sh->per + k;
			bool live;
			if (in_pool)
				live = s == pool[0] && k < dst_first;
			else if (sh->lf <= 0 || sh->lf >= 1)
				live = sh->lf >= 1;
			else
				live = (double)(t_rand(&t->rng) >> 11) / 9007199254740992.0 < sh->lf;
			if (live)
				set_live(t, g);
			else
				set_dead(t, g);
		}
	}
	upload(t);
	verify(t);

	const uint64_t n1 = live_in(t, src1, sh->nsrc);
	if (errors && n1 > 0) {
		/* one page too many for the room given */
		uint32_t nd = (uint32_t)((dst_first + n1 - 1) / sh->per);
		run_bad(t, make_job(t, src1, sh->nsrc, pool, nd, nd ? dst_first : 0), -ENOSPC);
	}
	if (errors) {
		struct vc_gc_job j = make_job(t, src1, sh->nsrc, pool, npool, dst_first);
		j.page_size = sh->ps + 256; /* not a power of two */
		run_bad(t, j, -EINVAL);
		j = make_job(t, src1, sh->nsrc, pool, npool, sh->per);
		run_bad(t, j, -EINVAL);
		j = make_job(t, src1, sh->nsrc, pool, npool, dst_first);
		j.per_seg = 0;
		run_bad(t, j, -EINVAL);
		/* Wrong statements: seen by the device, nothing moves. */
		j = make_job(t, src1, sh->nsrc, pool, npool, dst_first);
		if (j.live + 1 <= (uint64_t)sh->nsrc * sh->per) {
			j.live++;
			run_bad(t, j, -EINVAL);
		}
		j = make_job(t, src1, sh->nsrc, pool, npool, dst_first);
		if (j.live > 0) {
			j.live--;
			run_bad(t, j, -EINVAL);
			j.live++;
			uint64_t lo, hi; /* exact: one tighter on either side is wrong */
			exact_bounds(t, src1, sh->nsrc, &lo, &hi);
			struct vc_gc_job b = j;
			if (lo < UINT64_MAX) {
				b.stamp_min = lo + 1;
				b.stamp_max = hi > lo + 1 ? hi : lo + 1;
				run_bad(t, b, -EINVAL);
			}
			b = j;
			if (hi > 0) {
				b.stamp_max = hi - 1;
				b.stamp_min = lo < hi - 1 ? lo : hi - 1;
				run_bad(t, b, -EINVAL);
			}
		}
		/* A where table without its size. */
		if (t->where) {
			j = make_job(t, src1, sh->nsrc, pool, npool, dst_first);
			j.nowners = 0;
			run_bad(t, j, -EINVAL);
		}
	}

	/* job 1: exactly the destination segments it needs, sometimes one more */
	uint32_t nd1 = (uint32_t)((dst_first + n1 + sh->per - 1) / sh->per) + (uint32_t)rnd(t, 2);
	if (nd1 == 0)
		nd1 = 1;
	struct vc_gc_job j1 = make_job(t, src1, sh->nsrc, pool, nd1, dst_first);
	run_job(t, &j1);

	/* job 2: the others, from where job 1 ended */
	uint64_t q = dst_first + n1;
	uint32_t first = (uint32_t)(q / sh->per);
	struct vc_gc_job j2 = make_job(t, src2, sh->nother, pool + first, npool - first,
				       (uint32_t)(q % sh->per));
	run_job(t, &j2);

	/* an empty job */
	struct vc_gc_job j3 = make_job(t, src2, 0, NULL, 0, 0);
	run_job(t, &j3);
	tc_teardown(t);
}

/* Bytes of store a random shape may take (VC_TEST_QUICK: a quarter). */
static uint64_t shape_limit = 32u << 20;

static void random_shape(uint64_t *rng, int i, struct shape *sh)
{
	static const uint32_t sizes[] = { 512, 1024, 2048, 4096, 8192, 65536, 2u << 20 };
	static const uint32_t pers[] = { 1, 2, 3, 7, 64, 333, 1000, 1024 };
	static const double lfs[] = { 0, 0.5, 0.9, 1.0 };
	sh->ps = sizes[t_rand(rng) % 7];
	sh->per = pers[t_rand(rng) % 8];
	sh->nsrc = 1 + (uint32_t)(t_rand(rng) % 6);
	sh->nother = (uint32_t)(t_rand(rng) % 4);
	sh->lf = lfs[i % 4];
	sh->mode = (i / 4) % ST_NMODES;
	while ((uint64_t)sh->per * sh->ps * (2 * (sh->nsrc + sh->nother) + 3) > shape_limit &&
	       sh->per > 1)
		sh->per /= 2;
	while ((uint64_t)sh->per * sh->ps * (2 * (sh->nsrc + sh->nother) + 3) > shape_limit &&
	       sh->nsrc > 1)
		sh->nsrc--;
}

struct worker {
	struct vc_device *d;
	uint64_t seed;
	int cases;
	unsigned long jobs, moved;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < w->cases; i++) {
		struct tcase t = { .d = w->d, .rng = w->seed + (uint64_t)i };
		struct shape sh;
		random_shape(&t.rng, i * 5 + 2, &sh);
		run_case(&t, &sh, false);
		w->jobs += t.jobs;
		w->moved += t.moved;
	}
	return NULL;
}

int main(void)
{
	struct vc_device *d;
	int r = vc_device_open(t_device_kind(), 0, &d);
	t_skip_if_absent(r, "test_gc");
	CHECK_OK(r);
	fprintf(stderr, "device: %s: %s\n", d->ops->name, d->desc);
	uint64_t seed = 0x5eed6c01;
	if (getenv("VC_TEST_SEED"))
		seed = strtoull(getenv("VC_TEST_SEED"), NULL, 0);
	fprintf(stderr, "seed: %#llx (set VC_TEST_SEED to repeat)\n", (unsigned long long)seed);
	const bool quick = getenv("VC_TEST_QUICK") && atoi(getenv("VC_TEST_QUICK")) > 0;
	if (quick)
		shape_limit /= 4;
	unsigned long jobs = 0, moved = 0, cases = 0;
	uint64_t rng = seed;

	/* Random shapes: every load factor with every stamp mode, 3 times. */
	for (int i = 0; i < 4 * ST_NMODES * (quick ? 1 : 3); i++) {
		struct shape sh;
		random_shape(&rng, i, &sh);
		struct tcase t = { .d = d, .rng = t_rand(&rng) | 1 };
		run_case(&t, &sh, i < 24);
		jobs += t.jobs, moved += t.moved, cases++;
	}
	fprintf(stderr, "ok  %lu random cases, errors checked on 24\n", cases);

	/* Sizes the random shapes miss: more than one sort tile (4864 items)
	 * with 32- and 64-bit keys, more than 256 gather chunks (the last
	 * block's scan loops), 2 MiB pages, one slot per segment. */
	const struct shape fixed[] = {
		{ 512, 1024, 16, 4, 0.9, ST_LOG },
		{ 512, 1024, 12, 2, 0.9, ST_DUP8 },
		{ 512, 1024, 8, 1, 1.0, ST_POOL64 },
		{ 512, 1024, 8, 1, 0.9, ST_EXTREME },
		{ 512, 1024, 272, 1, 0.3, ST_RAND31 },
		{ 4096, 1024, 4, 1, 0.5, ST_DUP8 },
		{ 2u << 20, 3, 3, 1, 0.5, ST_DUP8 },
		{ 512, 1, 2000, 10, 0.5, ST_DUP8 },
	};
	for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
		if (quick && (uint64_t)fixed[i].nsrc * fixed[i].per * fixed[i].ps > (64u << 20))
			continue;
		struct tcase t = { .d = d, .rng = t_rand(&rng) | 1 };
		run_case(&t, &fixed[i], false);
		jobs += t.jobs, moved += t.moved, cases++;
		fprintf(stderr, "ok  %s\n", t.name);
	}

	/* Two threads, one device: jobs on disjoint stores at once. */
	const int per_thread = quick ? 2 : 6;
	struct worker w[2] = { { .d = d, .seed = t_rand(&rng) | 1, .cases = per_thread },
			       { .d = d, .seed = t_rand(&rng) | 1, .cases = per_thread } };
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		jobs += w[i].jobs, moved += w[i].moved, cases += (unsigned long)per_thread;
	}
	fprintf(stderr, "ok  2 threads at once\n");
	vc_device_close(d);

	/* Grids of 2 blocks: every grid-stride loop of the CUDA kernels turns
	 * (read when a device runs its first job). */
	setenv("VC_CUDA_GC_BLOCKS", "2", 1);
	CHECK_OK(vc_device_open(t_device_kind(), 0, &d));
	for (size_t i = 0; i < (quick ? 1u : 3u); i++) {
		struct tcase t = { .d = d, .rng = t_rand(&rng) | 1 };
		run_case(&t, &fixed[i], false);
		jobs += t.jobs, moved += t.moved, cases++;
	}
	for (int i = 0; i < (quick ? 3 : 8); i++) {
		struct shape sh;
		random_shape(&rng, i * 3, &sh);
		struct tcase t = { .d = d, .rng = t_rand(&rng) | 1 };
		run_case(&t, &sh, false);
		jobs += t.jobs, moved += t.moved, cases++;
	}
	fprintf(stderr, "ok  grids capped at 2 blocks\n");
	vc_device_close(d);
	fprintf(stderr, "pass: %lu cases, %lu jobs, %lu pages moved, every byte checked\n", cases,
		jobs, moved);
	return 0;
}
