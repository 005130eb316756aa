/* The concurrent index (src/index/cindex.c).
 *
 * 1. Single-threaded, against a reference map: random put/delete/lookup/cas
 *    at loads up to the full capacity (0.95 of the slots), both sequential
 *    page keys and random keys; batch lookups; the reserved key.
 * 2. -ENOSPC: fill past capacity until puts fail; capacity keys must fit,
 *    a failed put must change nothing (also one that moved keys before
 *    failing), replacing and delete-then-put still work in a full table.
 * 3. Concurrent: 8 writers on disjoint key ranges check every result of
 *    their own operations exactly; 4 readers look up keys of every range
 *    and check that any value found was written for that key (the key's id
 *    is encoded in the value, with a version no newer than the newest
 *    written); load kept at 0.90-0.95; then a full check.
 * 3b. Racing adds: threads add the same keys at once; exactly one add of
 *    each key wins (returns 0) and its value is the one stored.
 * 4. Stable keys: keys present and never modified must be found, with
 *    their value, by every lookup while writers insert and delete other
 *    keys at 0.90-0.95 load and "shakers" drive the index's displacement
 *    code to move keys, stable ones included, many times each; the test
 *    checks that they did move.
 * Phases 3 and 4 widen the index's race windows (see t_window below): with
 * them, swapping two steps of a move, storing a key before its value, or
 * skipping a lookup's version check fails this test within seconds.
 *
 * Exit 0 pass, 1 fail. Phases 3 and 4 run for a fixed time each
 * (VC_TEST_SECONDS, default 3) so sanitizer builds take about as long:
 * about 6 s in all on 2 cores, 13 s under TSan.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/clock.h"
#include "base/atomics.h"
#include "testutil.h"

/* The index is compiled into this test, under other names (so it links
 * beside the library's copy), with its race windows widened: while
 * `windows` is set, each VC_CINDEX_WINDOW() point in src/index/cindex.c
 * yields the core now and then, so another thread runs in the middle of a
 * move, an insert, a delete or a lookup. A wrong order of steps then fails
 * these tests within seconds, where it would otherwise hide in a window of
 * a few nanoseconds. */
static _Atomic bool windows;
static _Thread_local uint64_t window_rng = 0x2545f4914f6cdd1dull;
static void t_window(void)
{
	if (!atomic_load_explicit(&windows, memory_order_relaxed))
		return;
	uint64_t x = vc_rand64(&window_rng);
	if (x % 16 == 0)
		sched_yield();
	else if (x % 4 == 0)
		for (int i = 0; i < 50; i++)
			vc_cpu_relax();
}
#define VC_CINDEX_WINDOW() t_window()
#define vc_cindex_create t_cindex_create
#define vc_cindex_destroy t_cindex_destroy
#define vc_cindex_lookup t_cindex_lookup
#define vc_cindex_lookup_n t_cindex_lookup_n
#define vc_cindex_prefetch t_cindex_prefetch
#define vc_cindex_put t_cindex_put
#define vc_cindex_add t_cindex_add
#define vc_cindex_cas t_cindex_cas
#define vc_cindex_delete t_cindex_delete
#define vc_cindex_count t_cindex_count
#define vc_cindex_capacity t_cindex_capacity
#define vc_cindex_slots t_cindex_slots
#define vc_cindex_debug_slot t_cindex_debug_slot
#include "index/cindex.c"

static double phase_seconds = 3;

static uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Key number i of a universe: even numbers are consecutive pages of four
 * backing files (the engine's keys), odd ones random 64-bit keys with the
 * top bit set (so never equal to a page key, nor to VC_IKEY_NONE). */
static uint64_t ukey(uint64_t i)
{
	if (i % 2 == 0)
		return vc_ikey((uint32_t)(i / 2 % 4), i / 8);
	uint64_t k = splitmix(i) | (1ull << 63);
	return k == VC_IKEY_NONE ? k - 1 : k;
}

/* ---------------------------------------------------------------- 1 and 2 */

struct ref {
	uint64_t n, count;
	bool *present;
	uint64_t *val;
};

static void ref_init(struct ref *r, uint64_t n)
{
	r->n = n;
	r->count = 0;
	r->present = calloc(n, sizeof *r->present);
	r->val = calloc(n, sizeof *r->val);
	CHECK(r->present && r->val);
}

static void ref_free(struct ref *r)
{
	free(r->present);
	free(r->val);
}

/* The table holds exactly the reference's keys and values. */
static void verify_all(struct vc_cindex *ix, const struct ref *r)
{
	for (uint64_t i = 0; i < r->n; i++) {
		uint64_t v = 0xdead;
		bool f = vc_cindex_lookup(ix, ukey(i), &v);
		if (f != r->present[i] || (f && v != r->val[i])) {
			fprintf(stderr, "key %llu: found %d val %llx, want %d %llx\n",
				(unsigned long long)i, f, (unsigned long long)v, r->present[i],
				(unsigned long long)r->val[i]);
			exit(1);
		}
	}
	CHECK(vc_cindex_count(ix) == r->count);
}

/* The same through the batch lookup. */
static void verify_batch(struct vc_cindex *ix, const struct ref *r)
{
	enum { N = 1000 };
	uint64_t keys[N], vals[N];
	bool found[N];
	for (uint64_t i0 = 0; i0 < r->n; i0 += N) {
		size_t n = r->n - i0 < N ? (size_t)(r->n - i0) : N, want = 0;
		for (size_t k = 0; k < n; k++) {
			keys[k] = ukey(i0 + k);
			want += r->present[i0 + k];
		}
		CHECK(vc_cindex_lookup_n(ix, n, keys, vals, found) == want);
		for (size_t k = 0; k < n; k++) {
			CHECK(found[k] == r->present[i0 + k]);
			CHECK(!found[k] || vals[k] == r->val[i0 + k]);
		}
	}
}

/* One random operation on key i, checked against the reference. `grow`
 * is the probability (per 1024) that a put of an absent key is chosen over
 * a delete. */
static void random_op(struct vc_cindex *ix, struct ref *r, uint64_t *rng, unsigned grow)
{
	uint64_t x = t_rand(rng), i = x % r->n, k = ukey(i), v = t_rand(rng);
	unsigned op = (unsigned)(x >> 40) % 100;
	uint64_t got;
	if (op < 40) { /* insert or delete, steering the load */
		bool ins = ((x >> 20) & 1023) < grow;
		if (ins && r->present[i] && (x & 2)) { /* add of a present key: no change */
			CHECK(vc_cindex_add(ix, k, v) == -EEXIST);
		} else if (ins) {
			int rc = (x & 2) ? vc_cindex_add(ix, k, v) : vc_cindex_put(ix, k, v);
			if (rc == -ENOSPC) {
				CHECK(!r->present[i] && r->count >= vc_cindex_capacity(ix));
				return;
			}
			CHECK(rc == (r->present[i] ? 1 : 0));
			r->count += !r->present[i];
			r->present[i] = true;
			r->val[i] = v;
		} else {
			int rc = vc_cindex_delete(ix, k);
			CHECK(rc == (r->present[i] ? 0 : -ENOENT));
			r->count -= r->present[i];
			r->present[i] = false;
		}
	} else if (op < 55) { /* replace */
		if (!r->present[i])
			return;
		CHECK(vc_cindex_put(ix, k, v) == 1);
		r->val[i] = v;
	} else if (op < 70) { /* cas: right, wrong or absent */
		uint64_t expect = (x & 1) ? r->val[i] : r->val[i] ^ 1;
		int rc = vc_cindex_cas(ix, k, expect, v);
		if (!r->present[i]) {
			CHECK(rc == -ENOENT);
		} else if (expect == r->val[i]) {
			CHECK(rc == 0);
			r->val[i] = v;
		} else {
			CHECK(rc == -EAGAIN);
		}
	} else { /* lookup */
		bool f = vc_cindex_lookup(ix, k, &got);
		CHECK(f == r->present[i]);
		CHECK(!f || got == r->val[i]);
	}
}

static void test_reference(void)
{
	struct vc_cindex *ix;
	CHECK(vc_cindex_create(0, &ix) == -EINVAL);
	CHECK(vc_cindex_create(1ull << 41, &ix) == -EINVAL);
	CHECK_OK(vc_cindex_create(20000, &ix));
	uint64_t cap = vc_cindex_capacity(ix);
	CHECK(cap >= 20000);
	CHECK(vc_cindex_slots(ix) * VC_CINDEX_MAX_LOAD >= (double)cap - 1);
	struct ref r;
	ref_init(&r, cap + cap / 3);
	uint64_t rng = 0x1234567;

	/* The reserved key, and the keys stored as all-ones and as one. */
	CHECK(vc_cindex_put(ix, VC_IKEY_NONE, 1) == -EINVAL);
	CHECK(!vc_cindex_lookup(ix, VC_IKEY_NONE, NULL));
	CHECK(vc_cindex_delete(ix, VC_IKEY_NONE) == -ENOENT);
	CHECK(vc_cindex_cas(ix, VC_IKEY_NONE, 0, 1) == -ENOENT);
	uint64_t v;
	CHECK(vc_cindex_put(ix, 0, 5) == 0 && vc_cindex_put(ix, VC_IKEY_NONE - 1, 6) == 0);
	CHECK(vc_cindex_lookup(ix, 0, &v) && v == 5);
	CHECK(vc_cindex_lookup(ix, VC_IKEY_NONE - 1, &v) && v == 6);
	CHECK(vc_cindex_put(ix, 0, 7) == 1 && vc_cindex_lookup(ix, 0, &v) && v == 7);
	CHECK(vc_cindex_count(ix) == 2);
	CHECK(vc_cindex_delete(ix, 0) == 0 && vc_cindex_delete(ix, VC_IKEY_NONE - 1) == 0);
	CHECK(!vc_cindex_lookup(ix, 0, &v) && vc_cindex_count(ix) == 0);

	/* Grow to each load (as a fraction of capacity), churn there, check. */
	static const double loads[] = { 0.5, 0.8, 0.9, 0.95, 1.0 };
	for (unsigned li = 0; li < sizeof loads / sizeof loads[0]; li++) {
		uint64_t target = (uint64_t)(loads[li] * (double)cap);
		while (r.count < target)
			random_op(ix, &r, &rng, 1024);
		for (int n = 0; n < 60000; n++)
			random_op(ix, &r, &rng, r.count < target ? 1024 : 0);
		verify_all(ix, &r);
		verify_batch(ix, &r);
		fprintf(stderr, "reference: load %.3f of the slots, %llu keys: ok\n",
			(double)r.count / (double)vc_cindex_slots(ix), (unsigned long long)r.count);
	}
	/* Back down to empty. */
	for (uint64_t i = 0; i < r.n; i++)
		if (r.present[i]) {
			CHECK(vc_cindex_delete(ix, ukey(i)) == 0);
			r.present[i] = false;
			r.count--;
		}
	verify_all(ix, &r);
	ref_free(&r);
	vc_cindex_destroy(ix);

	/* Tiny tables still hold their capacity. */
	for (uint64_t c = 1; c <= 600; c = c * 3 + 1) {
		CHECK_OK(vc_cindex_create(c, &ix));
		CHECK(vc_cindex_capacity(ix) >= c);
		for (uint64_t i = 0; i < vc_cindex_capacity(ix); i++)
			CHECK(vc_cindex_put(ix, ukey(i), i) == 0);
		for (uint64_t i = 0; i < vc_cindex_capacity(ix); i++)
			CHECK(vc_cindex_lookup(ix, ukey(i), &v) && v == i);
		CHECK(vc_cindex_count(ix) == vc_cindex_capacity(ix));
		vc_cindex_destroy(ix);
	}
}

static void test_enospc(void)
{
	/* Small tables fill to the last slot (the empty-slot scan covers the
	 * whole table). The larger ones fail earlier: no empty slot within
	 * MAX_PROBE buckets, or, rarer and only near 0.99, no key that can move
	 * toward home, after some keys did move; the 40000 one is filled until
	 * that happens (the key sequence is fixed, so it does). */
	static const uint64_t caps[] = { 3000, 5000, 100000, 40000 };
	for (unsigned trial = 0; trial < sizeof caps / sizeof caps[0]; trial++) {
		struct vc_cindex *ix;
		CHECK_OK(vc_cindex_create(caps[trial], &ix));
		bool want_move_fail = caps[trial] == 40000;
		uint64_t cap = vc_cindex_capacity(ix);
		struct ref r;
		ref_init(&r, 2 * cap);
		uint64_t i = 0, fails = 0, first_fail = 0, move_fails = 0, v;
		for (; i < r.n && (want_move_fail ? !move_fails : fails < 200); i++) {
			uint64_t k = ukey(i);
			int rc = vc_cindex_put(ix, k, i * 3);
			if (rc == -ENOSPC) {
				bool moved = strstr(vc_last_error(), "move") != NULL;
				if (!fails++)
					first_fail = r.count;
				/* A failed put changed nothing. */
				CHECK(!vc_cindex_lookup(ix, k, &v));
				CHECK(vc_cindex_count(ix) == r.count);
				CHECK(vc_cindex_delete(ix, k) == -ENOENT);
				if (fails == 1 || (moved && !move_fails)) {
					fprintf(stderr, "enospc: %s\n", vc_last_error());
					verify_all(ix, &r);
				}
				move_fails += moved;
				continue;
			}
			CHECK(rc == 0);
			r.present[i] = true;
			r.val[i] = i * 3;
			r.count++;
		}
		CHECK(!want_move_fail || move_fails > 0);
		CHECK(fails > 0);
		CHECK(first_fail >= cap);
		verify_all(ix, &r);
		/* A full table still replaces values, and a deleted key fits again
		 * (its own slot is free and in its neighbourhood). */
		uint64_t n = 0;
		for (uint64_t j = 0; j < r.n && n < 100; j++) {
			if (!r.present[j])
				continue;
			CHECK(vc_cindex_put(ix, ukey(j), j) == 1);
			r.val[j] = j;
			CHECK(vc_cindex_delete(ix, ukey(j)) == 0);
			CHECK(vc_cindex_put(ix, ukey(j), j + 1) == 0);
			r.val[j] = j + 1;
			n++;
		}
		verify_all(ix, &r);
		fprintf(stderr, "enospc: capacity %llu, first failure at %llu keys (load %.3f), "
				"%llu keys after %llu failures (%llu with no key to move)\n",
			(unsigned long long)cap, (unsigned long long)first_fail,
			(double)first_fail / (double)vc_cindex_slots(ix),
			(unsigned long long)r.count, (unsigned long long)fails,
			(unsigned long long)move_fails);
		ref_free(&r);
		vc_cindex_destroy(ix);
	}
}

/* ------------------------------------------------------------------ 3 and 4 */

#define VAL_VER_BITS 24

/* A value names its key (global id) and a per-key write version. */
static uint64_t mkval(uint64_t gid, uint64_t ver)
{
	return (gid << VAL_VER_BITS) | (ver & ((1u << VAL_VER_BITS) - 1));
}

struct shared {
	struct vc_cindex *ix;
	uint64_t per_writer; /* keys per writer range */
	uint64_t nkeys;      /* nstable + per_writer * writers */
	uint64_t lo, hi;     /* live keys per writer: keep within [lo, hi] */
	_Atomic uint64_t *published; /* newest version written, per key */
	_Atomic bool stop;
	bool allow_enospc;
	/* Stable-key test: keys [0, nstable) are never written after setup;
	 * the writers' ranges follow them. */
	uint64_t nstable;
	_Atomic uint64_t lookups, found, bad, writes, enospc, seed, shakes;
};

static uint64_t gkey(const struct shared *sh, uint64_t gid)
{
	(void)sh;
	return ukey(gid);
}

struct writer {
	struct shared *sh;
	int id;
	uint64_t first; /* first gid of the range */
	bool *present;
	uint64_t *val, *ver, live;
};

static bool time_up(uint64_t t_end)
{
	return vc_now_ns() >= t_end;
}

/* Before a value is written: its version is then never newer than this. */
static void publish(struct shared *sh, uint64_t gid, uint64_t ver)
{
	atomic_store_explicit(&sh->published[gid], ver, memory_order_release);
}

static void *writer_main(void *arg)
{
	struct writer *wr = arg;
	struct shared *sh = wr->sh;
	struct vc_cindex *ix = sh->ix;
	uint64_t rng = 0x5eed0000u + (uint64_t)wr->id * 7919, got, ops = 0, enospc = 0;
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		uint64_t x = t_rand(&rng), i = x % sh->per_writer, gid = wr->first + i;
		uint64_t k = gkey(sh, gid);
		unsigned op = (unsigned)(x >> 32) % 100;
		bool want_insert = wr->live < sh->lo || (wr->live <= sh->hi && (x >> 50) % 8 < 5);
		if (op < 50 && !wr->present[i] && want_insert) {
			uint64_t v = mkval(gid, ++wr->ver[i]);
			publish(sh, gid, wr->ver[i]);
			int rc = vc_cindex_put(ix, k, v);
			if (rc == -ENOSPC && sh->allow_enospc) {
				enospc++;
			} else {
				if (rc != 0)
					fprintf(stderr, "writer %d: put new %llu = %d\n", wr->id,
						(unsigned long long)gid, rc);
				CHECK(rc == 0);
				wr->present[i] = true;
				wr->val[i] = v;
				wr->live++;
			}
		} else if (op < 50 && wr->present[i] && !want_insert) {
			CHECK(vc_cindex_delete(ix, k) == 0);
			wr->present[i] = false;
			wr->live--;
		} else if (op < 50) {
			continue;
		} else if (op < 70) { /* replace, or delete of an absent key */
			if (!wr->present[i]) {
				CHECK(vc_cindex_delete(ix, k) == -ENOENT);
				continue;
			}
			uint64_t v = mkval(gid, ++wr->ver[i]);
			publish(sh, gid, wr->ver[i]);
			CHECK(vc_cindex_put(ix, k, v) == 1);
			wr->val[i] = v;
		} else if (op < 85) { /* cas: right expectation, or wrong */
			uint64_t v = mkval(gid, ++wr->ver[i]);
			publish(sh, gid, wr->ver[i]);
			bool right = (x >> 45) & 1;
			uint64_t expect = right ? wr->val[i] : wr->val[i] + 1;
			int rc = vc_cindex_cas(ix, k, expect, v);
			if (!wr->present[i]) {
				CHECK(rc == -ENOENT);
			} else if (right) {
				CHECK(rc == 0);
				wr->val[i] = v;
			} else {
				CHECK(rc == -EAGAIN);
			}
		}
		/* Our own key reads back exactly. */
		bool f = vc_cindex_lookup(ix, k, &got);
		if (f != wr->present[i] || (f && got != wr->val[i])) {
			fprintf(stderr, "writer %d: key %llu found %d %llx, want %d %llx\n", wr->id,
				(unsigned long long)gid, f, (unsigned long long)got, wr->present[i],
				(unsigned long long)wr->val[i]);
			exit(1);
		}
		ops++;
	}
	atomic_fetch_add(&sh->writes, ops);
	atomic_fetch_add(&sh->enospc, enospc);
	return NULL;
}

/* Any value found must be one written for that key. */
static void check_found(struct shared *sh, uint64_t gid, uint64_t v)
{
	uint64_t newest = atomic_load_explicit(&sh->published[gid], memory_order_acquire);
	if ((v >> VAL_VER_BITS) != gid || (v & ((1u << VAL_VER_BITS) - 1)) > newest) {
		fprintf(stderr, "reader: key %llu has value %llx (newest version %llu)\n",
			(unsigned long long)gid, (unsigned long long)v, (unsigned long long)newest);
		atomic_fetch_add(&sh->bad, 1);
	}
}

static void *reader_main(void *arg)
{
	struct shared *sh = arg;
	uint64_t rng = 0xabcdef + atomic_fetch_add(&sh->seed, 1) * 104729, n = 0, found = 0;
	enum { NB = 16 };
	uint64_t keys[NB], gids[NB], vals[NB];
	bool fnd[NB];
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		uint64_t gid = t_rand(&rng) % sh->nkeys, v;
		if (vc_cindex_lookup(sh->ix, gkey(sh, gid), &v)) {
			check_found(sh, gid, v);
			found++;
		}
		if (++n % 64 == 0) { /* now and then a batch */
			for (int q = 0; q < NB; q++) {
				gids[q] = t_rand(&rng) % sh->nkeys;
				keys[q] = gkey(sh, gids[q]);
			}
			vc_cindex_lookup_n(sh->ix, NB, keys, vals, fnd);
			for (int q = 0; q < NB; q++)
				if (fnd[q])
					check_found(sh, gids[q], vals[q]);
		}
	}
	atomic_fetch_add(&sh->lookups, n);
	atomic_fetch_add(&sh->found, found);
	return NULL;
}

/* Stable keys: always present, always with their setup value. */
static void *stable_reader_main(void *arg)
{
	struct shared *sh = arg;
	uint64_t n = 0, v, rng = 99 + atomic_fetch_add(&sh->seed, 1) * 104729;
	enum { NB = 16 };
	uint64_t keys[NB], vals[NB];
	bool fnd[NB];
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		for (uint64_t gid = 0; gid < sh->nstable; gid++, n++) {
			if (!vc_cindex_lookup(sh->ix, gkey(sh, gid), &v) || v != mkval(gid, 1)) {
				fprintf(stderr, "stable key %llu: missing or wrong value\n",
					(unsigned long long)gid);
				atomic_fetch_add(&sh->bad, 1);
			}
		}
		for (int q = 0; q < NB; q++)
			keys[q] = gkey(sh, t_rand(&rng) % sh->nstable);
		if (vc_cindex_lookup_n(sh->ix, NB, keys, vals, fnd) != NB)
			atomic_fetch_add(&sh->bad, 1);
		n += NB;
	}
	atomic_fetch_add(&sh->lookups, n);
	return NULL;
}

/* Moves keys with the index's own displacement code, as an insert into a
 * crowded neighbourhood would: finds an empty slot, pretends that a key
 * whose home is 32..159 buckets below it is being put, takes the stripes a
 * put would hold, and lets displace() pull keys up into the gap. The set
 * of keys is unchanged; their places are not. (Inserts alone displace too
 * rarely at these loads to test the readers well: 7-slot buckets and a
 * 32-bucket neighbourhood almost always have an empty slot in reach.) */
static void *shaker_main(void *arg)
{
	struct shared *sh = arg;
	struct vc_cindex *ix = sh->ix;
	uint64_t rng = 0x5a5a + atomic_fetch_add(&sh->seed, 1) * 7, n = 0;
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		uint64_t x = t_rand(&rng), d = HB + x % (4 * HB), q = (x >> 20) % ix->nb;
		uint64_t fb = 0;
		unsigned fs = B;
		for (uint64_t p = q; p < q + 64 && fs == B; p++) {
			fb = wrap(ix, p);
			for (fs = 0; fs < B; fs++)
				if (vc_ld_relaxed(key_p(ix->w, fb, fs)) == 0)
					break;
		}
		if (fs == B)
			continue;
		uint64_t h = (fb + ix->nb - d) % ix->nb, fp = h + d;
		struct span sp = { .g0 = h >> SEG_SHIFT, .gcur = h >> SEG_SHIFT };
		seg_lock(ix, sp.g0);
		bool ok = true;
		for (uint64_t p = h; p <= fp && ok; p++)
			ok = span_extend(ix, &sp, wrap(ix, p));
		if (ok && vc_ld_acquire(key_p(ix->w, fb, fs)) == 0) {
			displace(ix, h, &fp, &fs);
			n++;
		}
		span_unlock(ix, &sp, 0);
	}
	atomic_fetch_add(&sh->shakes, n);
	return NULL;
}

enum { WRITERS = 8, READERS = 4, SHAKERS = 2 };

/* Runs writers, readers and shakers for the phase time; then checks every
 * key against the writers' references. */
static void run_concurrent(struct shared *sh, struct writer *wr, int nwriters,
			   void *(*reader)(void *), int nreaders, int nshakers)
{
	pthread_t wt[WRITERS], rt[READERS], st[SHAKERS];
	atomic_store(&sh->stop, false);
	atomic_store(&windows, true);
	for (int t = 0; t < nwriters; t++)
		CHECK(pthread_create(&wt[t], NULL, writer_main, &wr[t]) == 0);
	for (int t = 0; t < nreaders; t++)
		CHECK(pthread_create(&rt[t], NULL, reader, sh) == 0);
	for (int t = 0; t < nshakers; t++)
		CHECK(pthread_create(&st[t], NULL, shaker_main, sh) == 0);
	uint64_t t_end = vc_now_ns() + (uint64_t)(phase_seconds * 1e9);
	uint64_t slots = vc_cindex_slots(sh->ix);
	double lmin = 1, lmax = 0;
	while (!time_up(t_end)) {
		usleep(20000);
		double l = (double)vc_cindex_count(sh->ix) / (double)slots;
		lmin = l < lmin ? l : lmin;
		lmax = l > lmax ? l : lmax;
	}
	atomic_store(&sh->stop, true);
	for (int t = 0; t < nwriters; t++)
		CHECK(pthread_join(wt[t], NULL) == 0);
	for (int t = 0; t < nreaders; t++)
		CHECK(pthread_join(rt[t], NULL) == 0);
	for (int t = 0; t < nshakers; t++)
		CHECK(pthread_join(st[t], NULL) == 0);
	atomic_store(&windows, false);
	/* Full check against the writers' references. */
	uint64_t live = sh->nstable, v;
	for (uint64_t gid = 0; gid < sh->nstable; gid++)
		CHECK(vc_cindex_lookup(sh->ix, gkey(sh, gid), &v) && v == mkval(gid, 1));
	for (int t = 0; t < nwriters; t++) {
		for (uint64_t i = 0; i < sh->per_writer; i++) {
			uint64_t gid = wr[t].first + i;
			bool f = vc_cindex_lookup(sh->ix, gkey(sh, gid), &v);
			CHECK(f == wr[t].present[i]);
			CHECK(!f || v == wr[t].val[i]);
		}
		live += wr[t].live;
	}
	CHECK(vc_cindex_count(sh->ix) == live);
	CHECK(atomic_load(&sh->bad) == 0);
	fprintf(stderr,
		"  %llu writes (%llu -ENOSPC), %llu shakes, %llu lookups (%llu found), load "
		"sampled %.3f..%.3f, final %.3f\n",
		(unsigned long long)sh->writes, (unsigned long long)sh->enospc,
		(unsigned long long)sh->shakes,
		(unsigned long long)sh->lookups,
		(unsigned long long)(sh->nstable ? sh->lookups : sh->found), lmin, lmax,
		(double)live / (double)slots);
}

static void setup_writers(struct shared *sh, struct writer *wr, int n)
{
	for (int t = 0; t < n; t++) {
		wr[t] = (struct writer){ .sh = sh, .id = t,
					 .first = sh->nstable + (uint64_t)t * sh->per_writer };
		wr[t].present = calloc(sh->per_writer, sizeof(bool));
		wr[t].val = calloc(sh->per_writer, sizeof(uint64_t));
		wr[t].ver = calloc(sh->per_writer, sizeof(uint64_t));
		CHECK(wr[t].present && wr[t].val && wr[t].ver);
	}
}

static void free_writers(struct writer *wr, int n)
{
	for (int t = 0; t < n; t++) {
		free(wr[t].present);
		free(wr[t].val);
		free(wr[t].ver);
	}
}

/* Brings each writer's live count to `target` keys, single-threaded. */
static void prefill(struct shared *sh, struct writer *wr, int n, uint64_t target)
{
	for (int t = 0; t < n; t++)
		for (uint64_t i = 0; i < sh->per_writer && wr[t].live < target; i++) {
			uint64_t gid = wr[t].first + i;
			if (wr[t].present[i])
				continue;
			uint64_t v = mkval(gid, ++wr[t].ver[i]);
			atomic_store(&sh->published[gid], wr[t].ver[i]);
			CHECK(vc_cindex_put(sh->ix, gkey(sh, gid), v) == 0);
			wr[t].present[i] = true;
			wr[t].val[i] = v;
			wr[t].live++;
		}
}

static void test_concurrent(void)
{
	struct shared sh = { 0 };
	CHECK_OK(vc_cindex_create(16000, &sh.ix));
	uint64_t slots = vc_cindex_slots(sh.ix);
	sh.per_writer = (uint64_t)(0.95 * (double)slots) / WRITERS * 3 / 2;
	sh.nkeys = sh.per_writer * WRITERS;
	sh.lo = (uint64_t)(0.905 * (double)slots) / WRITERS;
	sh.hi = (uint64_t)(0.945 * (double)slots) / WRITERS;
	sh.published = calloc(sh.nkeys, sizeof *sh.published);
	CHECK(sh.published);
	struct writer wr[WRITERS];
	setup_writers(&sh, wr, WRITERS);
	prefill(&sh, wr, WRITERS, (sh.lo + sh.hi) / 2);
	fprintf(stderr, "concurrent: %d writers, %d readers, %llu slots, %.1f s\n", WRITERS,
		READERS, (unsigned long long)slots, phase_seconds);
	run_concurrent(&sh, wr, WRITERS, reader_main, READERS, 0);
	free_writers(wr, WRITERS);
	free(sh.published);
	vc_cindex_destroy(sh.ix);
}

/* Racing adds: ADDERS threads add the same keys, in different orders, each
 * with its own id in the value, while the keys are deleted and added again
 * round after round. Of the adds of one key in one round exactly one must
 * return 0, and the index must hold that winner's value (the engine's
 * lock-free misses decide by vc_cindex_add which thread loads a page). */
enum { ADDERS = 4, ADD_KEYS = 2000, ADD_ROUNDS = 20 };
struct adder {
	struct vc_cindex *ix;
	pthread_barrier_t *bar;
	int id;
	uint8_t *won; /* won[key]: this thread's add returned 0 this round */
};

static void *adder_main(void *arg)
{
	struct adder *a = arg;
	uint64_t rng = 0x9e37u + (uint64_t)a->id;
	for (int round = 0; round < ADD_ROUNDS; round++) {
		pthread_barrier_wait(a->bar);
		uint64_t start = t_rand(&rng) % ADD_KEYS;
		for (uint64_t j = 0; j < ADD_KEYS; j++) {
			uint64_t i = (start + j) % ADD_KEYS;
			int rc = vc_cindex_add(a->ix, ukey(i), (uint64_t)a->id << 32 | i);
			CHECK(rc == 0 || rc == -EEXIST);
			a->won[i] = rc == 0;
		}
		pthread_barrier_wait(a->bar); /* the main thread checks and deletes */
		pthread_barrier_wait(a->bar);
	}
	return NULL;
}

static void test_add_race(void)
{
	struct vc_cindex *ix;
	CHECK_OK(vc_cindex_create(ADD_KEYS, &ix));
	pthread_barrier_t bar;
	pthread_barrier_init(&bar, NULL, ADDERS + 1);
	struct adder a[ADDERS];
	pthread_t th[ADDERS];
	for (int t = 0; t < ADDERS; t++) {
		a[t] = (struct adder){ .ix = ix, .bar = &bar, .id = t, .won = calloc(ADD_KEYS, 1) };
		CHECK(a[t].won);
		CHECK(pthread_create(&th[t], NULL, adder_main, &a[t]) == 0);
	}
	atomic_store(&windows, true);
	for (int round = 0; round < ADD_ROUNDS; round++) {
		pthread_barrier_wait(&bar);
		pthread_barrier_wait(&bar);
		for (uint64_t i = 0; i < ADD_KEYS; i++) {
			int winners = 0, who = -1;
			for (int t = 0; t < ADDERS; t++)
				if (a[t].won[i]) {
					winners++;
					who = t;
				}
			uint64_t got;
			CHECK(winners == 1);
			CHECK(vc_cindex_lookup(ix, ukey(i), &got));
			CHECK(got == ((uint64_t)who << 32 | i));
			CHECK(vc_cindex_delete(ix, ukey(i)) == 0);
		}
		CHECK(vc_cindex_count(ix) == 0);
		pthread_barrier_wait(&bar);
	}
	atomic_store(&windows, false);
	for (int t = 0; t < ADDERS; t++) {
		CHECK(pthread_join(th[t], NULL) == 0);
		free(a[t].won);
	}
	pthread_barrier_destroy(&bar);
	vc_cindex_destroy(ix);
	fprintf(stderr, "add race: %d threads, %d keys, %d rounds: one winner each\n", ADDERS,
		ADD_KEYS, ADD_ROUNDS);
}

/* Stable keys: a quarter of the keys are put once and never touched;
 * writers insert and delete others at 0.90-0.95 load while shakers move
 * keys around (stable ones included, many times each), and the readers
 * look the stable keys up without pause. */
static void test_stable(void)
{
	struct shared sh = { 0 };
	CHECK_OK(vc_cindex_create(4000, &sh.ix));
	uint64_t slots = vc_cindex_slots(sh.ix);
	enum { W = 4, R = 3 };
	sh.nstable = slots / 4;
	sh.per_writer = slots / W;
	sh.nkeys = sh.nstable + sh.per_writer * W;
	sh.lo = ((uint64_t)(0.90 * (double)slots) - sh.nstable) / W;
	sh.hi = ((uint64_t)(0.95 * (double)slots) - sh.nstable) / W;
	/* The shakers push keys to the far ends of their neighbourhoods, a
	 * layout no sequence of puts makes; puts may then fail for room. */
	sh.allow_enospc = true;
	sh.published = calloc(sh.nkeys, sizeof *sh.published);
	CHECK(sh.published);
	for (uint64_t gid = 0; gid < sh.nstable; gid++) {
		sh.published[gid] = 1;
		CHECK(vc_cindex_put(sh.ix, gkey(&sh, gid), mkval(gid, 1)) == 0);
	}
	int64_t *slot0 = calloc(sh.nstable, sizeof *slot0);
	CHECK(slot0);
	struct writer wr[W];
	setup_writers(&sh, wr, W);
	prefill(&sh, wr, W, (sh.lo + sh.hi) / 2);
	for (uint64_t gid = 0; gid < sh.nstable; gid++)
		CHECK((slot0[gid] = vc_cindex_debug_slot(sh.ix, gkey(&sh, gid))) >= 0);
	fprintf(stderr, "stable keys: %llu stable keys, %d writers, %d shakers, %d readers, "
			"%.1f s\n",
		(unsigned long long)sh.nstable, W, SHAKERS, R, phase_seconds);
	run_concurrent(&sh, wr, W, stable_reader_main, R, SHAKERS);
	uint64_t moved = 0;
	for (uint64_t gid = 0; gid < sh.nstable; gid++)
		moved += vc_cindex_debug_slot(sh.ix, gkey(&sh, gid)) != slot0[gid];
	fprintf(stderr, "  %llu of %llu stable keys ended in another slot\n",
		(unsigned long long)moved, (unsigned long long)sh.nstable);
	CHECK(moved > sh.nstable / 2);
	free(slot0);
	free_writers(wr, W);
	free(sh.published);
	vc_cindex_destroy(sh.ix);
}

int main(void)
{
	const char *s = getenv("VC_TEST_SECONDS");
	if (s && atof(s) > 0)
		phase_seconds = atof(s);
	test_reference();
	test_enospc();
	test_concurrent();
	test_add_race();
	test_stable();
	fprintf(stderr, "test_cindex: ok\n");
	return 0;
}
