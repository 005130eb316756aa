/* The simulator: GRAM's two tiers under LRU are one LRU of host + GPU pages
 * (checked against single-tier runs on a Zipf trace), the counts add up for
 * every policy, a hand-worked two-tier case, and libCacheSim's published
 * miss ratios on cloudPhysicsIO.csv when ../shared is there. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/policy.h"
#include "tools/sim.h"
#include "trace/trace.h"
#include "testutil.h"

/* Zipf-like keys by inverse power: cheap and skewed enough for all three
 * outcomes (host hit, GPU hit, miss) to be common. */
static uint64_t zkey(uint64_t *seed, uint64_t n)
{
	double u = (double)(t_rand(seed) >> 11) / 9007199254740992.0;
	return (uint64_t)((double)n * pow(u, 3.0));
}

static void test_virtual_lru(void)
{
	enum { H = 50, G = 150, N = 2000, ACC = 200000 };
	struct vc_sim *two, *one_h, *one_hg;
	CHECK_OK(vc_sim_create("lru", H, G, &two));
	CHECK_OK(vc_sim_create("lru", H, 0, &one_h));
	CHECK_OK(vc_sim_create("lru", H + G, 0, &one_hg));
	uint64_t seed = 17;
	for (int i = 0; i < ACC; i++) {
		uint64_t k = zkey(&seed, N);
		int op = (int)(t_rand(&seed) % 10 == 0);
		CHECK_OK(vc_sim_access(two, k, op));
		CHECK_OK(vc_sim_access(one_h, k, op));
		CHECK_OK(vc_sim_access(one_hg, k, op));
	}
	const struct vc_sim_stats *a = vc_sim_stats(two), *b = vc_sim_stats(one_h),
				  *c = vc_sim_stats(one_hg);
	/* The host tier is the top H of the virtual queue; both tiers are a
	 * single LRU of H + G pages. */
	CHECK(a->hits[0] == b->hits[0]);
	CHECK(a->hits[0] + a->hits[1] == c->hits[0]);
	CHECK(a->misses == c->misses);
	CHECK(a->hits[1] > ACC / 20 && a->misses > ACC / 20);
	/* Every host eviction is a move to the GPU tier; every GPU hit one back. */
	CHECK(a->moves_h2d == a->evictions[0] && a->moves_d2h == a->hits[1]);
	CHECK(a->accesses == ACC && a->hits[0] + a->hits[1] + a->misses == ACC);
	vc_sim_destroy(two);
	vc_sim_destroy(one_h);
	vc_sim_destroy(one_hg);
}

/* Hand-worked, LRU, host 2 + GPU 2 (tiers MRU first):
 *   a b      misses; host [b a]
 *   c        miss; a to the GPU: host [c b], GPU [a]
 *   a        GPU hit; host victim b takes its place: host [a c], GPU [b]
 *   d        miss; c down: host [d a], GPU [c b]
 *   e        miss; a down, b (GPU tail) dropped: host [e d], GPU [a c]
 *   b        miss (it was dropped); d down, c dropped: host [b e], GPU [d a]
 *   e        host hit
 * Totals: 8 accesses, 1 host hit, 1 GPU hit, 6 misses; 5 host evictions
 * (5 moves down), 2 GPU evictions, 1 move up. I/O cost at 1 ms a backing
 * read and 0.5 ms a move: (6 + 6 x 0.5) / 8. */
static void test_hand(void)
{
	struct vc_sim *s;
	CHECK_OK(vc_sim_create("lru", 2, 2, &s));
	for (const char *p = "abcadebe"; *p; p++)
		CHECK_OK(vc_sim_access(s, (uint64_t)*p, VC_TRACE_READ));
	const struct vc_sim_stats *st = vc_sim_stats(s);
	CHECK(st->accesses == 8 && st->hits[0] == 1 && st->hits[1] == 1 && st->misses == 6);
	CHECK(st->evictions[0] == 5 && st->evictions[1] == 2);
	CHECK(st->moves_h2d == 5 && st->moves_d2h == 1);
	double cost = vc_sim_io_cost_ms(st, 1.0, 0.5);
	CHECK(fabs(cost - (6 + 6 * 0.5) / 8) < 1e-12);
	vc_sim_destroy(s);
	CHECK(vc_sim_create("nope", 2, 2, &s) == -EINVAL);
	CHECK(vc_sim_create("lru", 0, 2, &s) == -EINVAL);
}

/* Every policy: outcomes add up, tiers never overflow (the pool would run
 * dry and the simulator would fail), bigger caches are not much worse. */
static void test_all_policies(void)
{
	for (const struct vc_policy_ops *const *o = vc_policies; *o; o++) {
		struct vc_sim *small, *big, *two;
		CHECK_OK(vc_sim_create((*o)->name, 64, 0, &small));
		CHECK_OK(vc_sim_create((*o)->name, 512, 0, &big));
		CHECK_OK(vc_sim_create((*o)->name, 64, 448, &two));
		uint64_t seed = 3;
		for (int i = 0; i < 100000; i++) {
			uint64_t k = zkey(&seed, 4096);
			CHECK_OK(vc_sim_access(small, k, 0));
			CHECK_OK(vc_sim_access(big, k, 0));
			CHECK_OK(vc_sim_access(two, k, 0));
		}
		const struct vc_sim_stats *a = vc_sim_stats(small), *b = vc_sim_stats(big),
					  *c = vc_sim_stats(two);
		CHECK(a->hits[0] + a->misses == 100000 && a->hits[1] == 0);
		CHECK(c->hits[0] + c->hits[1] + c->misses == 100000);
		CHECK(b->misses < a->misses);
		CHECK(c->misses < a->misses);
		vc_sim_destroy(small);
		vc_sim_destroy(big);
		vc_sim_destroy(two);
	}
}

/* libCacheSim's cachesim on cloudPhysicsIO.csv, one object per block
 * number, cache sizes 1 %, 5 %, 10 % of the 48,974 objects (the issue). */
static int test_libcachesim(void)
{
	const char *dir = getenv("VC_SHARED_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/traces/cloudPhysicsIO.csv", dir ? dir : "");
	if (!dir || access(path, R_OK) != 0) {
		fprintf(stderr, "SKIP libCacheSim check: %s not readable\n", path);
		return 0;
	}
	static const struct {
		const char *policy;
		double miss[3];
	} want[] = {
		{ "lru", { .8380, .8246, .8049 } },
		{ "s3fifo", { .8304, .8026, .7525 } },
		{ "sieve", { .8292, .8172, .7907 } },
	};
	const double frac[3] = { 0.01, 0.05, 0.10 };
	const uint64_t unique = 48974;
	struct vc_sim *s[3][3];
	for (int p = 0; p < 3; p++)
		for (int i = 0; i < 3; i++)
			CHECK_OK(vc_sim_create(want[p].policy, (uint64_t)(unique * frac[i]), 0,
					       &s[p][i]));
	vc_trace *t;
	CHECK_OK(vc_trace_open(path, NULL, &t));
	uint64_t key, n = 0;
	int op, r;
	while ((r = vc_trace_next_page(t, 512, false, &key, &op)) == 1) {
		n++;
		for (int p = 0; p < 3; p++)
			for (int i = 0; i < 3; i++)
				CHECK_OK(vc_sim_access(s[p][i], key, op));
	}
	CHECK(r == 0 && n == 113872);
	vc_trace_close(t);
	int bad = 0;
	for (int p = 0; p < 3; p++)
		for (int i = 0; i < 3; i++) {
			const struct vc_sim_stats *st = vc_sim_stats(s[p][i]);
			double m = (double)st->misses / (double)st->accesses;
			printf("%-7s %4.0f%%: miss %.4f, libCacheSim %.4f\n", want[p].policy,
			       100 * frac[i], m, want[p].miss[i]);
			bad += fabs(m - want[p].miss[i]) > 0.005;
			vc_sim_destroy(s[p][i]);
		}
	CHECK(bad == 0);
	return 1;
}

int main(void)
{
	test_virtual_lru();
	test_hand();
	test_all_policies();
	int shared = test_libcachesim();
	printf("test_sim: ok%s\n", shared ? "" : " (libCacheSim check skipped)");
	return 0;
}
