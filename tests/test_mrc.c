/* Miss-ratio curves: stack distances (sdist, and hsdist, the fixed-size
 * sample's) against a naive LRU stack, the exact MRC against `sim` with
 * LRU at every cache size, SHARDS at R = 1 equal to the exact curve, and
 * SHARDS at R = 0.1 (and fixed size) within a bound on a synthetic Zipf
 * trace. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "tools/hsdist.h"
#include "tools/mrc.h"
#include "tools/sdist.h"
#include "tools/sim.h"
#include "testutil.h"

/* Zipf(s) over n keys by inverse CDF; keys scattered over 2^40. */
struct zipf {
	double *cdf;
	uint64_t n;
};

static void zipf_init(struct zipf *z, uint64_t n, double s)
{
	z->n = n;
	z->cdf = malloc(n * sizeof *z->cdf);
	CHECK(z->cdf);
	double sum = 0;
	for (uint64_t i = 0; i < n; i++)
		z->cdf[i] = (sum += 1 / pow((double)(i + 1), s));
	for (uint64_t i = 0; i < n; i++)
		z->cdf[i] /= sum;
}

static uint64_t zipf_key(const struct zipf *z, uint64_t *seed)
{
	double u = (double)(t_rand(seed) >> 11) / 9007199254740992.0;
	uint64_t lo = 0, hi = z->n - 1;
	while (lo < hi) {
		uint64_t mid = (lo + hi) / 2;
		if (z->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo * 0x9E3779B97F4A7C15ull) >> 24;
}

/* The naive reference: moves k to the top of stack[0..*depth) (a new key
 * grows it) and returns k's stack distance before the move, 0 if new. */
static uint64_t mtf(uint64_t *stack, int *depth, uint64_t k)
{
	int pos = -1;
	for (int j = 0; j < *depth; j++)
		if (stack[j] == k)
			pos = j;
	uint64_t want = pos < 0 ? 0 : (uint64_t)pos + 1;
	if (pos < 0)
		pos = (*depth)++;
	memmove(&stack[1], &stack[0], (size_t)pos * sizeof stack[0]);
	stack[0] = k;
	return want;
}

/* Distances against a naive move-to-front stack, through compactions. */
static void test_sdist(void)
{
	enum { N = 300, ACC = 30000 };
	struct vc_sdist s;
	CHECK_OK(vc_sdist_init(&s));
	uint64_t stack[N];
	int depth = 0;
	uint64_t seed = 11;
	for (int i = 0; i < ACC; i++) {
		uint64_t k = t_rand(&seed) % (t_rand(&seed) % 2 ? N / 10 : N);
		int64_t want = (int64_t)mtf(stack, &depth, k);
		int64_t d = vc_sdist_access(&s, k);
		if (d != want) {
			fprintf(stderr, "access %d key %llu: distance %lld, want %lld\n", i,
				(unsigned long long)k, (long long)d, (long long)want);
			exit(1);
		}
		if (i % 5000 == 4999 && depth > 5) { /* forget one, as SHARDS does */
			uint64_t f = stack[depth / 2];
			vc_sdist_forget(&s, f);
			memmove(&stack[depth / 2], &stack[depth / 2 + 1],
				(size_t)(depth - depth / 2 - 1) * sizeof stack[0]);
			depth--;
		}
	}
	CHECK(s.nlive == (uint64_t)depth);
	vc_sdist_fini(&s);
}

/* hsdist against a naive move-to-front stack, used as fixed-size SHARDS
 * uses it: keys by hash, and when a new key makes the set MAX + 1, the key
 * with the largest hash leaves; now and then a random key leaves too.
 * 300 K accesses over 90 keys with max = 40: thousands of renumberings,
 * and `now` crosses every word of the bitmap many times; then over 300
 * keys with max = 31, which fills the 64-entry table to one half, so
 * deletions happen inside runs that wrap past the table's end. */
static void hsdist_run(const int MAX, const int UNIV)
{
	enum { ACC = 300000 };
	struct vc_hsdist s;
	CHECK_OK(vc_hsdist_init(&s, (uint64_t)MAX));
	uint64_t stack[64];
	CHECK(MAX + 2 <= 64);
	int depth = 0;
	uint64_t seed = 3;
	for (int i = 0; i < ACC; i++) {
		/* half the accesses to a hot tenth of the keys */
		uint64_t k = t_rand(&seed) % (uint64_t)(t_rand(&seed) % 2 ? UNIV / 10 : UNIV);
		uint64_t h = vc_mix64(k);
		uint64_t want = mtf(stack, &depth, h);
		uint64_t d = vc_hsdist_access(&s, h);
		if (d != want) {
			fprintf(stderr, "hsdist access %d key %llu: distance %llu, want %llu\n", i,
				(unsigned long long)k, (unsigned long long)d,
				(unsigned long long)want);
			exit(1);
		}
		int drop = -1;
		if (depth == MAX + 1) { /* the largest hash leaves */
			drop = 0;
			for (int j = 1; j < depth; j++)
				if (stack[j] > stack[drop])
					drop = j;
		} else if (i % 997 == 0 && depth > 2) {
			drop = (int)(t_rand(&seed) % (uint64_t)depth);
		}
		if (drop >= 0) {
			vc_hsdist_forget(&s, stack[drop]);
			vc_hsdist_forget(&s, stack[drop]); /* absent now: nothing */
			memmove(&stack[drop], &stack[drop + 1],
				(size_t)(depth - drop - 1) * sizeof stack[0]);
			depth--;
		}
		CHECK(s.nlive == (uint32_t)depth);
	}
	vc_hsdist_fini(&s);
}

static void test_hsdist(void)
{
	struct vc_hsdist s;
	CHECK(vc_hsdist_init(&s, 0) == -EINVAL);
	hsdist_run(40, 90);
	hsdist_run(31, 300);
	/* About 50 bytes a key of the bound (hsdist.h). */
	CHECK_OK(vc_hsdist_init(&s, 8192));
	CHECK(vc_hsdist_bytes(&s) < 8193 * 50);
	vc_hsdist_fini(&s);
}

/* The property the issue asks for: the exact MRC equals an LRU simulation
 * at every cache size from 1 to the distinct keys. */
static void test_exact_vs_sim(void)
{
	enum { KEYS = 400, ACC = 20000 };
	struct zipf z;
	zipf_init(&z, KEYS, 0.8);
	uint64_t *keys = malloc(ACC * sizeof *keys);
	CHECK(keys);
	uint64_t seed = 5;
	for (int i = 0; i < ACC; i++)
		keys[i] = zipf_key(&z, &seed);
	struct vc_mrc *m;
	struct vc_mrc_params p = { .kind = VC_MRC_EXACT };
	CHECK_OK(vc_mrc_create(&p, &m));
	for (int i = 0; i < ACC; i++)
		CHECK_OK(vc_mrc_access(m, keys[i]));
	CHECK_OK(vc_mrc_finish(m));
	uint64_t distinct = (uint64_t)vc_mrc_distinct(m);
	CHECK(distinct > 300 && distinct <= KEYS);
	CHECK(vc_mrc_accesses(m) == ACC);
	CHECK(vc_mrc_miss_ratio(m, 0) == 1.0);
	for (uint64_t c = 1; c <= distinct + 1; c++) {
		struct vc_sim *s;
		CHECK_OK(vc_sim_create("lru", c, 0, &s));
		for (int i = 0; i < ACC; i++)
			CHECK_OK(vc_sim_access(s, keys[i], 0));
		double want = (double)vc_sim_stats(s)->misses / ACC;
		double got = vc_mrc_miss_ratio(m, (double)c);
		if (fabs(got - want) > 1e-12) {
			fprintf(stderr, "size %llu: mrc %.6f, sim %.6f\n", (unsigned long long)c, got,
				want);
			exit(1);
		}
		vc_sim_destroy(s);
	}
	vc_mrc_destroy(m);
	free(keys);
	free(z.cdf);
}

static double mae(const struct vc_mrc *a, const struct vc_mrc *b, double distinct)
{
	double s = 0;
	for (int i = 1; i <= 100; i++) {
		double c = floor(distinct * i / 100);
		s += fabs(vc_mrc_miss_ratio(a, c) - vc_mrc_miss_ratio(b, c));
	}
	return s / 100;
}

static void test_shards(void)
{
	enum { KEYS = 100000, ACC = 1000000 };
	struct zipf z;
	zipf_init(&z, KEYS, 0.9);
	struct vc_mrc_params pe = { .kind = VC_MRC_EXACT }, p1 = { .kind = VC_MRC_FIXED_RATE, .rate = 1 },
			     p01 = { .kind = VC_MRC_FIXED_RATE, .rate = 0.1 },
			     pbig = { .kind = VC_MRC_FIXED_SIZE, .smax = 1 << 20 },
			     psz = { .kind = VC_MRC_FIXED_SIZE, .smax = 4096 };
	struct vc_mrc *e, *r1, *r01, *sbig, *ssz;
	CHECK_OK(vc_mrc_create(&pe, &e));
	CHECK_OK(vc_mrc_create(&p1, &r1));
	CHECK_OK(vc_mrc_create(&p01, &r01));
	CHECK_OK(vc_mrc_create(&pbig, &sbig));
	CHECK_OK(vc_mrc_create(&psz, &ssz));
	uint64_t seed = 77;
	for (int i = 0; i < ACC; i++) {
		uint64_t k = zipf_key(&z, &seed);
		CHECK_OK(vc_mrc_access(e, k));
		CHECK_OK(vc_mrc_access(r1, k));
		CHECK_OK(vc_mrc_access(r01, k));
		CHECK_OK(vc_mrc_access(sbig, k));
		CHECK_OK(vc_mrc_access(ssz, k));
	}
	struct vc_mrc *all[] = { e, r1, r01, sbig, ssz };
	for (int i = 0; i < 5; i++)
		CHECK_OK(vc_mrc_finish(all[i]));
	double distinct = vc_mrc_distinct(e);

	/* R = 1 samples everything: the same curve at every size. */
	CHECK(vc_mrc_rate(r1) == 1.0 && vc_mrc_distinct(r1) == distinct);
	for (double c = 0; c <= distinct + 1; c += 1)
		CHECK(vc_mrc_miss_ratio(r1, c) == vc_mrc_miss_ratio(e, c));

	/* R = 0.1: close, on a Zipf trace with 100 K keys (~10 K sampled). */
	double e01 = mae(e, r01, distinct);
	printf("R=0.1: MAE %.5f, distinct estimate %.0f of %.0f\n", e01, vc_mrc_distinct(r01),
	       distinct);
	CHECK(e01 < 0.01);
	CHECK(fabs(vc_mrc_distinct(r01) - distinct) < 0.1 * distinct);

	/* A fixed-size sample that never fills is exact but for its bins
	 * (relative width under 1 %). */
	CHECK(vc_mrc_rate(sbig) == 1.0);
	double eb = mae(e, sbig, distinct);
	printf("fixed size, never full: MAE %.6f\n", eb);
	CHECK(eb < 0.001);

	/* 4096 keys: the rate falls to about 4096 / distinct, memory stays
	 * bounded, the error small. */
	double es = mae(e, ssz, distinct);
	printf("fixed size 4096: MAE %.5f, rate %.4f, peak %zu bytes\n", es, vc_mrc_rate(ssz),
	       vc_mrc_peak_bytes(ssz));
	CHECK(es < 0.01);
	CHECK(vc_mrc_rate(ssz) < 0.1 && vc_mrc_rate(ssz) > 0.02);
	CHECK(vc_mrc_peak_bytes(ssz) < 600 * 1024);

	/* Bad parameters. */
	struct vc_mrc *bad;
	struct vc_mrc_params b0 = { .kind = VC_MRC_FIXED_RATE, .rate = 0 },
			     b2 = { .kind = VC_MRC_FIXED_RATE, .rate = 1.5 },
			     b3 = { .kind = VC_MRC_FIXED_SIZE, .smax = 3 }, b4 = { .kind = 42 };
	CHECK(vc_mrc_create(&b0, &bad) < 0 && vc_mrc_create(&b2, &bad) < 0);
	CHECK(vc_mrc_create(&b3, &bad) < 0 && vc_mrc_create(&b4, &bad) < 0);
	for (int i = 0; i < 5; i++)
		vc_mrc_destroy(all[i]);
	free(z.cdf);
}

int main(void)
{
	test_sdist();
	test_hsdist();
	test_exact_vs_sim();
	test_shards();
	printf("test_mrc: ok\n");
	return 0;
}
