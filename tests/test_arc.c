/* ARC against a reference written from the paper (Megiddo & Modha, "ARC: A
 * Self-Tuning, Low Overhead Replacement Cache", FAST 2003, Fig. 4), kept
 * here and not in the library so that the two are written apart. On
 * generated traces (skew, loops, scans, uniform sets; seeded) at ten cache
 * sizes: the simulator's single-tier ARC has the reference's miss count,
 * and the policy driven as the simulator drives it (miss, victim, remove,
 * insert) evicts the same pages in the same order. The traces are made to
 * reach REPLACE's tie (x in B2 and |T1| = p) often; the test checks that
 * they do. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "tools/sim.h"
#include "testutil.h"

enum { NKEYS = 16384, NACC = 12000, PHASE = 1000 };

/* --- the reference: Fig. 4, one step per request ---------------------- */

enum { NONE, T1, T2, B1, B2, NLISTS };

/* Doubly linked LRU lists over key numbers; head = MRU, tail = LRU. */
struct ref {
	uint64_t c;
	double p;
	int where[NKEYS];
	int prev[NKEYS], next[NKEYS];
	int head[NLISTS], tail[NLISTS];
	uint64_t n[NLISTS];
};

static void ref_init(struct ref *r, uint64_t c)
{
	memset(r, 0, sizeof *r);
	r->c = c;
	for (int l = 0; l < NLISTS; l++)
		r->head[l] = r->tail[l] = -1;
}

static void ref_unlink(struct ref *r, int x)
{
	int l = r->where[x];
	if (r->prev[x] >= 0)
		r->next[r->prev[x]] = r->next[x];
	else
		r->head[l] = r->next[x];
	if (r->next[x] >= 0)
		r->prev[r->next[x]] = r->prev[x];
	else
		r->tail[l] = r->prev[x];
	r->n[l]--;
	r->where[x] = NONE;
}

/* Moves x (in no list, or in one) to the MRU end of list l. */
static void ref_mru(struct ref *r, int x, int l)
{
	if (r->where[x] != NONE)
		ref_unlink(r, x);
	r->prev[x] = -1;
	r->next[x] = r->head[l];
	if (r->head[l] >= 0)
		r->prev[r->head[l]] = x;
	else
		r->tail[l] = x;
	r->head[l] = x;
	r->n[l]++;
	r->where[x] = l;
}

/* REPLACE decisions made by the tie (x in B2, |T1| = p >= 1), all runs. */
static long ties;

/* REPLACE(x, p): the LRU page of T1 goes to B1's MRU end if T1 is not empty
 * and (|T1| > p, or x is in B2 and |T1| = p); else T2's LRU page goes to
 * B2's MRU end. Returns the page that left the cache. */
static int ref_replace(struct ref *r, int x)
{
	CHECK(r->n[T1] + r->n[T2] == r->c); /* only ever called on a full cache */
	double t1 = (double)r->n[T1];
	ties += r->n[T1] >= 1 && r->where[x] == B2 && t1 == r->p;
	int v;
	if (r->n[T1] >= 1 && (t1 > r->p || (r->where[x] == B2 && t1 == r->p))) {
		v = r->tail[T1];
		ref_mru(r, v, B1);
	} else {
		v = r->tail[T2];
		ref_mru(r, v, B2);
	}
	return v;
}

/* One request for x. Returns true on a hit; *victim gets the page that
 * left the cache, or -1. */
static bool ref_access(struct ref *r, int x, int *victim)
{
	const double c = (double)r->c;
	*victim = -1;
	switch (r->where[x]) {
	case T1:
	case T2: /* Case I */
		ref_mru(r, x, T2);
		return true;
	case B1: { /* Case II: adapt, then REPLACE, then x to T2 */
		double d = r->n[B1] >= r->n[B2] ? 1.0 : (double)r->n[B2] / (double)r->n[B1];
		r->p = r->p + d < c ? r->p + d : c;
		*victim = ref_replace(r, x);
		ref_mru(r, x, T2);
		return false;
	}
	case B2: { /* Case III */
		double d = r->n[B2] >= r->n[B1] ? 1.0 : (double)r->n[B1] / (double)r->n[B2];
		r->p = r->p - d > 0 ? r->p - d : 0;
		*victim = ref_replace(r, x);
		ref_mru(r, x, T2);
		return false;
	}
	default: /* Case IV */
		if (r->n[T1] + r->n[B1] == r->c) { /* A: L1 has c pages */
			if (r->n[T1] < r->c) {
				ref_unlink(r, r->tail[B1]);
				*victim = ref_replace(r, x);
			} else { /* B1 is empty: T1's LRU page leaves the cache and the directory */
				*victim = r->tail[T1];
				ref_unlink(r, *victim);
			}
		} else { /* B: L1 has fewer than c pages */
			uint64_t all = r->n[T1] + r->n[T2] + r->n[B1] + r->n[B2];
			if (all >= r->c) {
				if (all == 2 * r->c)
					ref_unlink(r, r->tail[B2]);
				*victim = ref_replace(r, x);
			}
		}
		ref_mru(r, x, T1);
		return false;
	}
}

/* --- traces ---------------------------------------------------------------- */

/* NACC keys in phases of PHASE requests. Half the phases draw uniformly
 * from a set of 3 to ~1000 keys (log-uniform), where pages return from
 * both ghost lists with p on whole numbers, so REPLACE's tie comes up; the
 * others mix skewed reuse of a hot set (cubed uniform over 600 keys), a
 * loop over 4-300 keys and a scan of keys never seen again. Phases move
 * the sets, so T1 and T2 trade places and p travels its range. */
static void make_trace(uint64_t seed, int *keys)
{
	int next_scan = 3000, loop_at = 0;
	for (int i = 0; i < NACC; i += PHASE) {
		uint64_t mix = t_rand(&seed);
		int w_skew = (int)(mix % 8), w_loop = (int)((mix >> 8) % 4);
		int w_scan = (int)((mix >> 16) % 3);
		int total = w_skew + w_loop + w_scan + 1;
		int hot_base = (int)((mix >> 24) % 400);
		int loop_base = 1800 + (int)((mix >> 32) % 800), loop_len = 4 + (int)((mix >> 40) % 300);
		bool uni = (mix >> 60) % 2;
		int uni_base = 1000 + (int)((mix >> 48) % 500);
		int uni_len = 2 + (int)exp2((double)((mix >> 52) % 100) / 10.0);
		for (int j = i; j < i + PHASE && j < NACC; j++) {
			uint64_t x = t_rand(&seed);
			int pick = (int)(x % (uint64_t)total);
			double u = (double)(x >> 11) / 9007199254740992.0;
			if (uni)
				keys[j] = uni_base + (int)(u * uni_len);
			else if (pick <= w_skew)
				keys[j] = hot_base + (int)(600.0 * u * u * u);
			else if (pick <= w_skew + w_loop)
				keys[j] = loop_base + loop_at++ % loop_len;
			else
				keys[j] = next_scan++;
			CHECK(keys[j] >= 0 && keys[j] < NKEYS);
		}
	}
}

/* --- the comparison ---------------------------------------------------- */

static const uint64_t sizes[10] = { 1, 2, 3, 5, 8, 13, 32, 100, 250, 700 };

/* The simulator's miss count against the reference's, one tier of c. */
static int check_sim(const int *keys, uint64_t c, uint64_t seed)
{
	static struct ref r;
	ref_init(&r, c);
	uint64_t ref_miss = 0;
	struct vc_sim *s;
	CHECK_OK(vc_sim_create("arc", c, 0, &s));
	for (int i = 0; i < NACC; i++) {
		int v;
		ref_miss += !ref_access(&r, keys[i], &v);
		CHECK_OK(vc_sim_access(s, (uint64_t)keys[i], 0));
	}
	uint64_t sim_miss = vc_sim_stats(s)->misses;
	vc_sim_destroy(s);
	if (sim_miss != ref_miss) {
		fprintf(stderr, "trace %llu, cache %llu: sim %llu misses, reference %llu (%+lld)\n",
			(unsigned long long)seed, (unsigned long long)c,
			(unsigned long long)sim_miss, (unsigned long long)ref_miss,
			(long long)(sim_miss - ref_miss));
		return 1;
	}
	return 0;
}

/* The policy's victims against the reference's, access by access: a
 * single tier of c pages driven as the simulator drives it. */
static int check_victims(const int *keys, uint64_t c, uint64_t seed)
{
	static struct ref r;
	static struct vc_pnode node[NKEYS];
	ref_init(&r, c);
	for (int k = 0; k < NKEYS; k++)
		node[k] = (struct vc_pnode){ .tier = VC_PNODE_NONE, .key = (uint64_t)k };
	const struct vc_policy_ops *o = vc_policy_find("arc");
	CHECK(o && o->miss);
	struct vc_policy *p = o->create(&c, 1);
	CHECK(p);
	int bad = 0;
	for (int i = 0; i < NACC && !bad; i++) {
		int x = keys[i], want, got = -1;
		bool ref_hit = ref_access(&r, x, &want);
		bool hit = node[x].tier == 0;
		if (hit) {
			o->hit(p, &node[x]);
		} else {
			o->miss(p, (uint64_t)x, 0);
			if (o->count(p, 0) == c) {
				struct vc_pnode *v = o->victim(p, 0, NULL, NULL);
				CHECK(v);
				got = (int)v->key;
				o->remove(p, v);
			}
			o->insert(p, &node[x], 0);
		}
		if (hit != ref_hit || got != want) {
			fprintf(stderr,
				"trace %llu, cache %llu, access %d (key %d): %s, victim %d; "
				"reference %s, victim %d\n",
				(unsigned long long)seed, (unsigned long long)c, i, x,
				hit ? "hit" : "miss", got, ref_hit ? "hit" : "miss", want);
			bad = 1;
		}
	}
	o->destroy(p);
	return bad;
}

int main(void)
{
	static int keys[NACC];
	int bad = 0, runs = 0;
	for (uint64_t seed = 1; seed <= 4; seed++) {
		make_trace(seed, keys);
		for (int k = 0; k < 10; k++, runs++) {
			bad += check_sim(keys, sizes[k], seed);
			bad += check_victims(keys, sizes[k], seed);
		}
	}
	if (bad) {
		fprintf(stderr, "test_arc: %d of %d checks differ from the paper's ARC\n", bad,
			2 * runs);
		return 1;
	}
	/* Each check_* ran the reference once per run: ties counts both. */
	if (ties / 2 < 100) {
		fprintf(stderr, "test_arc: the traces reached REPLACE's tie only %ld times\n",
			ties / 2);
		return 1;
	}
	printf("test_arc: ok (%d runs, %ld REPLACE ties)\n", runs, ties / 2);
	return 0;
}
