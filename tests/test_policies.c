/* The replacement policies other than LRU's own test (test_policy.c):
 * hand-worked sequences with known hits and victims for each one, and a
 * randomized check of the interface contract for every registered policy
 * (counts, victims in their tier and not skipped, victim() repeatable,
 * two-tier GRAM flow within capacities). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "policy/policy.h"
#include "testutil.h"

struct page {
	struct vc_pnode pn;
	int id;
	int pinned;
};

#define PAGE(n) ((struct page *)((char *)(n) - offsetof(struct page, pn)))

static struct page pages[256];

static void init_pages(void)
{
	memset(pages, 0, sizeof pages);
	for (int i = 0; i < 256; i++) {
		pages[i].id = i;
		pages[i].pn.tier = VC_PNODE_NONE;
	}
}

/* Runs `seq` (one letter a page) through `policy` as a single-tier cache of
 * `cap` pages: a resident page is a hit, a missing one evicts the victim
 * when the tier is full, then enters. Checks the hits ('h' or '.' for each
 * access) and the evicted pages, in order. */
static void run_seq(const char *policy, uint64_t cap, const char *seq, const char *want_hits,
		    const char *want_victims)
{
	init_pages();
	const struct vc_policy_ops *o = vc_policy_find(policy);
	CHECK(o);
	uint64_t c[1] = { cap };
	struct vc_policy *p = o->create(c, 1);
	CHECK(p);
	char hits[64] = { 0 }, victims[64] = { 0 };
	int nv = 0;
	for (int i = 0; seq[i]; i++) {
		struct page *pg = &pages[(unsigned char)seq[i]];
		if (pg->pn.tier == 0) {
			hits[i] = 'h';
			o->hit(p, &pg->pn);
			continue;
		}
		hits[i] = '.';
		if (o->miss)
			o->miss(p, (uint64_t)pg->id, 0);
		if (o->count(p, 0) == cap) {
			struct vc_pnode *v = o->victim(p, 0, NULL, NULL);
			CHECK(v && v->tier == 0);
			CHECK(o->victim(p, 0, NULL, NULL) == v); /* repeatable */
			victims[nv++] = (char)PAGE(v)->id;
			o->remove(p, v);
			CHECK(v->tier == VC_PNODE_NONE);
		}
		pg->pn.key = (uint64_t)pg->id;
		o->insert(p, &pg->pn, 0);
		CHECK(pg->pn.tier == 0);
		CHECK(o->count(p, 0) <= cap);
	}
	if (strcmp(hits, want_hits) || strcmp(victims, want_victims)) {
		fprintf(stderr, "%s cap %llu on %s:\n  hits    %s (want %s)\n  victims %s (want %s)\n",
			policy, (unsigned long long)cap, seq, hits, want_hits, victims, want_victims);
		exit(1);
	}
	o->destroy(p);
}

/* Worked by hand; queues written head (newest) first.
 *
 * a b c: misses, queue c b a. a: hit.
 * d: LRU evicts b (order a c b). CLOCK: a has its bit, goes to the head
 *    clear (a c b), b is next and clear: evict b. SIEVE: the hand passes a
 *    (clears it, a stays at the tail), stops on b: evict b, hand to c.
 * b: LRU evicts c (d a c); CLOCK evicts c (tail of d a c); SIEVE evicts c
 *    (the hand), hand to d.
 * e: LRU evicts a (b d a); CLOCK evicts a (its bit was cleared); SIEVE
 *    evicts d (the hand), hand to b; a stays.
 * a: LRU and CLOCK miss and evict d; SIEVE hits. */
static void test_lru_clock_sieve(void)
{
	run_seq("lru", 3, "abcadbea", "...h....", "bcad");
	run_seq("clock", 3, "abcadbea", "...h....", "bcad");
	run_seq("sieve", 3, "abcadbea", "...h...h", "bcd");
}

/* 2Q with 4 pages: Kin = 1, Kout = 2.
 * a b: A1in [b a]. a: hit in A1in, no change. c d: A1in [d c b a], full.
 * e: A1in holds 4 > Kin: evict its tail a, A1out [a]; A1in [e d c b].
 * a: evict b, A1out [b a]; a is in A1out: enters Am [a]; A1out [b].
 * b: evict c (A1in 3 > 1), A1out [c b]; b from A1out to Am [b a].
 * f: evict d, A1out [d c]; A1in [f e].
 * a: hit in Am. */
static void test_2q(void)
{
	run_seq("2q", 4, "abacdeabfa", "..h......h", "abcd");
}

/* S3-FIFO with 5 pages: S holds 1 (10 % rounds to 0, raised to 1), M 4,
 * the ghost G 4 keys; queues head first, counters after a colon.
 * a b c d e: all enter S (S may exceed its share until the tier is full).
 * f: M (empty) is within 4 and S is not empty: S's tail a has no hits:
 *    evict a, G [a]. S [f e d c b].
 * a: evict b, G [b a]; a is in G: enters M [a]; G [b].
 * f c: hits in S (f:1, c:1).
 * g: S's tail c has 1 hit (< 2): evict c, G [c b]. S [g f e d]. g g: g:2.
 * h: evict d, G [d c b]. S [h g f e].
 * i: evict e, G [e d c b]. j: evict f (1 hit), G [f e d c] (b dropped).
 * k: S's tail g has 2 hits: promoted to M's head with 0 (M [g a]); then
 *    h: evict h, G [h f e d]. S [k j i].
 * a: hit in M (a:1).
 * d: evict i (G [i h f e d]); d is in G: taken, then G trims to 4 (it was
 *    looked up before the trim, as the paper looks up before evicting);
 *    M [d g a].
 * e: evict j; e in G: M [e d g a]. f: evict k; f in G: M [f e d g a], S
 *    empty.
 * x: M holds 5 > 4: M's tail a has 1: back to M's head with 0; g has 0:
 *    evict g (M's victims leave no ghost). x enters S.
 * y: M holds 4, S is not empty: evict x. */
static void test_s3fifo(void)
{
	run_seq("s3fifo", 5, "abcdefafcggghijkadefxy", ".......hh.hh....h.....",
		"abcdefhijkgx");
	/* A policy per tier is its host policy when there is one tier. */
	run_seq("s3fifo+lru", 5, "abcdefafcggghijkadefxy", ".......hh.hh....h.....",
		"abcdefhijkgx");
}

/* ARC with 4 pages, in Fig. 4's order (p starts at 0 and adapts before
 * REPLACE: run_seq calls miss() before the victim); lists head first.
 * a b c d: T1 [d c b a]. a: hit: T2 [a], T1 [d c b].
 * e: |T1| 3 > p 0: evict b, B1 [b]; T1 [e d c].
 * b: in B1: p += max(0/1, 1) = 1; |T1| 3 > 1: evict c, B1 [c]; T2 [b a].
 * f: |T1| 2 > 1: evict d, B1 [d c]; T1 [f e].
 * c: in B1: p = 2; |T1| 2 = p, c not in B2: evict T2's tail a, B2 [a];
 *    T2 [c b], B1 [d].
 * g: |T1| 2 = p: evict b, B2 [b a]; T1 [g f e].
 * a: in B2: p -= max(1/2, 1): p = 1; |T1| 3 > 1: evict e, B1 [e d];
 *    T2 [a c], B2 [b].
 * h: |T1| + |B1| = 4 = c (case IV.A): B1 drops d; |T1| 2 > 1: evict f,
 *    B1 [f e]; T1 [h g].
 * e: in B1: p = 2; |T1| 2 = p: evict c, B2 [c b]; T2 [e a], B1 [f].
 * i: |T1| 2 = p, i not in B2: evict a, B2 [a c b]; T1 [i h g].
 * d: dropped at h, so a plain miss; |L1| = 4 (case IV.A): B1 drops f;
 *    |T1| 3 > 2: evict g, B1 [g]; T1 [d i h]. */
static void test_arc(void)
{
	run_seq("arc", 4, "abcdaebfcgaheid", "....h..........", "bcdabefcag");
}

/* --- the contract, for every policy -------------------------------------- */

static bool skip_pinned(const struct vc_pnode *n, void *arg)
{
	(void)arg;
	return PAGE(n)->pinned;
}

/* A random single-tier cache with pinned pages: victims are never pinned,
 * always resident in the tier, repeatable, and found whenever an unpinned
 * page is resident. */
static void test_contract(const struct vc_policy_ops *o)
{
	enum { CAP = 24, NP = 96 };
	init_pages();
	uint64_t cap[2] = { CAP, CAP / 2 };
	struct vc_policy *p = o->create(cap, 2);
	CHECK(p);
	uint64_t seed = 99;
	long hits = 0, victims = 0;
	for (int op = 0; op < 200000; op++) {
		uint64_t x = t_rand(&seed);
		/* skewed keys, so hits and ghost returns both happen */
		int id = (int)(x % 3 ? (x >> 8) % (NP / 4) : (x >> 8) % NP);
		struct page *pg = &pages[id];
		if (x % 17 == 0) {
			pg->pinned = !pg->pinned;
			continue;
		}
		if (x % 23 == 0 && pg->pn.tier != VC_PNODE_NONE) { /* invalidation */
			o->remove(p, &pg->pn);
			continue;
		}
		if (pg->pn.tier != VC_PNODE_NONE) {
			o->hit(p, &pg->pn);
			hits++;
			continue;
		}
		if (o->count(p, 0) == CAP) {
			int unpinned = 0;
			for (int i = 0; i < NP; i++)
				unpinned += pages[i].pn.tier == 0 && !pages[i].pinned;
			struct vc_pnode *v = o->victim(p, 0, skip_pinned, NULL);
			if (!unpinned) {
				CHECK(v == NULL);
				continue;
			}
			if (!v) {
				fprintf(stderr, "%s: no victim among %d unpinned pages\n", o->name,
					unpinned);
				exit(1);
			}
			CHECK(v->tier == 0 && !PAGE(v)->pinned);
			struct vc_pnode *v2 = o->victim(p, 0, skip_pinned, NULL);
			if (v2 != v) {
				fprintf(stderr, "%s: victim %d, then %d\n", o->name, PAGE(v)->id,
					v2 ? PAGE(v2)->id : -1);
				exit(1);
			}
			o->remove(p, v);
			victims++;
		}
		pg->pn.key = (uint64_t)id;
		o->insert(p, &pg->pn, 0);
		CHECK(o->count(p, 0) <= CAP);
		uint64_t n0 = 0;
		for (int i = 0; i < NP; i++)
			n0 += pages[i].pn.tier == 0;
		CHECK(o->count(p, 0) == n0);
	}
	CHECK(hits > 10000 && victims > 10000);
	CHECK(o->count(p, 1) == 0 && o->victim(p, 1, NULL, NULL) == NULL);
	CHECK(o->victim(p, 2, NULL, NULL) == NULL && o->count(p, 2) == 0);
	o->destroy(p);
}

/* GRAM's two-tier flow (host victim to the GPU tier, GPU hit back to the
 * host) with each policy: tiers stay within capacity and disjoint. */
static void test_two_tier(const struct vc_policy_ops *o)
{
	enum { H = 8, G = 16, NP = 64 };
	init_pages();
	uint64_t cap[2] = { H, G };
	struct vc_policy *p = o->create(cap, 2);
	CHECK(p);
	uint64_t seed = 5;
	long gpu_hits = 0;
	for (int op = 0; op < 100000; op++) {
		uint64_t x = t_rand(&seed);
		int id = (int)(x % 2 ? (x >> 8) % (NP / 4) : (x >> 8) % NP);
		struct vc_pnode *n = &pages[id].pn;
		if (n->tier == 0) {
			o->hit(p, n);
			continue;
		}
		if (n->tier == 1) {
			o->remove(p, n);
			gpu_hits++;
		}
		if (o->count(p, 0) == H) {
			struct vc_pnode *hv = o->victim(p, 0, NULL, NULL);
			CHECK(hv && hv->tier == 0);
			o->remove(p, hv);
			if (o->count(p, 1) == G) {
				struct vc_pnode *gv = o->victim(p, 1, NULL, NULL);
				CHECK(gv && gv->tier == 1);
				o->remove(p, gv);
			}
			o->insert(p, hv, 1);
		}
		n->key = (uint64_t)id;
		o->insert(p, n, 0);
		CHECK(o->count(p, 0) <= H && o->count(p, 1) <= G);
	}
	uint64_t n0 = 0, n1 = 0;
	for (int i = 0; i < NP; i++) {
		n0 += pages[i].pn.tier == 0;
		n1 += pages[i].pn.tier == 1;
	}
	CHECK(n0 == o->count(p, 0) && n1 == o->count(p, 1) && n0 == H && n1 == G);
	CHECK(gpu_hits > 1000);
	o->destroy(p);
}

int main(void)
{
	test_lru_clock_sieve();
	test_2q();
	test_s3fifo();
	test_arc();
	int n = 0;
	for (const struct vc_policy_ops *const *o = vc_policies; *o; o++, n++) {
		CHECK((*o)->cost && strlen((*o)->cost) > 20);
		test_contract(*o);
		test_two_tier(*o);
	}
	CHECK(n >= 6);
	printf("test_policies: ok (%d policies)\n", n);
	return 0;
}
