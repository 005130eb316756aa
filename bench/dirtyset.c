/* The dirty set (src/index/dirtyset.c), one thread, ns per operation.
 *
 * The baseline it replaces is not run here: the engine finds dirty pages by
 * scanning its whole entry pool under its global lock, 18-41 ms with 1-2M
 * entries, whatever the number of dirty pages, and answers "is any page of
 * [p0, p1] dirty?" the same way.
 *
 *   - add and del of 2M pages, sequential (a dense run) and random below
 *     2^30 (a 4 TiB volume of 4 KiB pages);
 *   - next over an empty range of 2^20 pages (4 GiB) between dense blocks;
 *     from past 2M random members below 2^30 to 2^48 - 2 (nothing there)
 *     and to 2^48 - 1 (a member); and over [0, 2^48) to a lone member at
 *     2^48 - 1: each a few node visits, not a scan;
 *   - collect of 2M members, dense and random below 2^30, in batches of
 *     4096 as a flush walks them: ns per member returned.
 * Each figure is the median of REPS runs. next repeats the same queries, so
 * its nodes are in the caches: it shows the work per call, not misses.
 *
 * Usage: dirtyset [--json FILE]
 */
#include <stdint.h>

#define BENCH_NAME "dirtyset"
#include "bench.h"
#include "base/clock.h"
#include "base/rand.h"
#include "index/dirtyset.h"

#define N (1u << 21) /* members */
#define REPS 3
#define BATCH 4096 /* collect's batch, as a flush would take */
#define QUERIES 200000

static uint64_t keys[N];
static uint64_t buf[BATCH];

static double median(double *v)
{
	return bench_quantile(v, REPS, 0.5);
}

static struct vc_dset *make(void)
{
	struct vc_dset *s;
	BENCH_OK(vc_dset_create(&s));
	return s;
}

static void fill(struct vc_dset *s, const uint64_t *k, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		BENCH_OK(vc_dset_add(s, k[i]));
}

/* ns per add and per del of keys[0..N), from an empty set and back. */
static void add_del(double *add_ns, double *del_ns)
{
	double a[REPS], d[REPS];
	for (int r = 0; r < REPS; r++) {
		struct vc_dset *s = make();
		uint64_t t0 = vc_now_ns();
		fill(s, keys, N);
		uint64_t t1 = vc_now_ns();
		for (uint32_t i = 0; i < N; i++)
			vc_dset_del(s, keys[i]);
		uint64_t t2 = vc_now_ns();
		if (vc_dset_count(s) != 0 || vc_dset_bytes(s) != 0)
			bench_die("del left members or nodes", -1);
		a[r] = (double)(t1 - t0) / N;
		d[r] = (double)(t2 - t1) / N;
		vc_dset_destroy(s);
	}
	*add_ns = median(a);
	*del_ns = median(d);
}

/* ns per next(from[i], to[i]), each expected to find `want` (or nothing). */
static double time_next(struct vc_dset *s, const uint64_t *from, const uint64_t *to, int nq,
			bool found, uint64_t want)
{
	double v[REPS];
	for (int r = 0; r < REPS; r++) {
		uint64_t hits = 0, k = 0, t0 = vc_now_ns();
		for (int q = 0; q < QUERIES; q++)
			hits += vc_dset_next(s, from[q % nq], to[q % nq], &k);
		v[r] = (double)(vc_now_ns() - t0) / QUERIES;
		if (hits != (found ? QUERIES : 0) || (found && k != want))
			bench_die("next gave a wrong answer", -1);
	}
	return median(v);
}

/* ns per member for a walk of the whole set in batches of BATCH. */
static double time_collect(struct vc_dset *s)
{
	double v[REPS];
	for (int r = 0; r < REPS; r++) {
		uint64_t from = 0, seen = 0, t0 = vc_now_ns();
		uint32_t n;
		while ((n = vc_dset_collect(s, from, UINT64_MAX, buf, BATCH)) > 0) {
			seen += n;
			from = buf[n - 1] + 1;
		}
		v[r] = (double)(vc_now_ns() - t0) / (double)seen;
		if (seen != vc_dset_count(s))
			bench_die("collect missed members", -1);
	}
	return median(v);
}

int main(int argc, char **argv)
{
	const char *json = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
			json = argv[++i];
		} else {
			fprintf(stderr, "usage: dirtyset [--json FILE]\n");
			return 2;
		}
	}
	char model[160];
	bench_cpu_model(model, sizeof model);
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	/* add and del */
	double seq_add, seq_del, rnd_add, rnd_del;
	for (uint32_t i = 0; i < N; i++)
		keys[i] = i;
	add_del(&seq_add, &seq_del);
	for (uint32_t i = 0; i < N; i++)
		keys[i] = vc_rand64(&rng) & ((1ull << 30) - 1);
	add_del(&rnd_add, &rnd_del);

	/* collect, and memory, of 2M random pages below 2^30 (keys[] has a few
	 * repeats: count the set, not the array) */
	struct vc_dset *sparse = make();
	fill(sparse, keys, N);
	double sparse_coll = time_collect(sparse);
	double sparse_b = (double)vc_dset_bytes(sparse) / (double)vc_dset_count(sparse);

	/* next from past every member to 2^48 - 2 (nothing there), and to
	 * 2^48 - 1 once it is a member: the tree is 7 levels high then, and
	 * the walk climbs out of the members' subtree and down to the far one */
	enum { NQ = 1024 };
	static uint64_t from[NQ], to[NQ];
	BENCH_OK(vc_dset_add(sparse, VC_DSET_LIMIT - 1));
	for (int q = 0; q < NQ; q++) {
		from[q] = (1ull << 30) + (vc_rand64(&rng) & ((1ull << 20) - 1));
		to[q] = VC_DSET_LIMIT - 2;
	}
	double next_past = time_next(sparse, from, to, NQ, false, 0);
	for (int q = 0; q < NQ; q++)
		to[q] = VC_DSET_LIMIT - 1;
	double next_past_far = time_next(sparse, from, to, NQ, true, VC_DSET_LIMIT - 1);
	struct vc_dset *far = make();
	BENCH_OK(vc_dset_add(far, VC_DSET_LIMIT - 1));
	uint64_t zero = 0, top = VC_DSET_LIMIT - 1;
	double next_far = time_next(far, &zero, &top, 1, true, VC_DSET_LIMIT - 1);
	vc_dset_destroy(far);
	vc_dset_destroy(sparse);

	/* dense: 32 blocks of 2^16 pages, one every 2^21 pages; the empty
	 * queries span 2^20 pages of a gap (from a random page of it), so the
	 * next block is at most 2^21 pages away */
	struct vc_dset *dense = make();
	const uint64_t blk = 1u << 16, stride = 1u << 21;
	for (uint64_t b = 0; b < N / blk; b++)
		for (uint64_t p = 0; p < blk; p++)
			BENCH_OK(vc_dset_add(dense, b * stride + p));
	for (int q = 0; q < NQ; q++) {
		uint64_t b = vc_rand64(&rng) % (N / blk - 1);
		from[q] = b * stride + blk + vc_rand64(&rng) % (stride - blk - (1u << 20));
		to[q] = from[q] + (1u << 20) - 1;
	}
	double next_gap = time_next(dense, from, to, NQ, false, 0);
	double dense_coll = time_collect(dense);
	double dense_bits = (double)vc_dset_bytes(dense) * 8 / (double)vc_dset_count(dense);
	vc_dset_destroy(dense);

	/* One list for the table and the JSON. */
	const struct {
		const char *what, *key;
		double v;
	} rows[] = {
		{ "add, sequential pages", "add_seq_ns", seq_add },
		{ "del, sequential pages", "del_seq_ns", seq_del },
		{ "add, random pages < 2^30", "add_random_ns", rnd_add },
		{ "del, random pages < 2^30", "del_random_ns", rnd_del },
		{ "next, empty 2^20-page range between dense blocks", "next_empty_4gib_gap_ns",
		  next_gap },
		{ "next, [p, 2^48 - 2] past 2^21 members < 2^30: none", "next_past_members_none_ns",
		  next_past },
		{ "next, [p, 2^48 - 1] past them, to one at 2^48 - 1",
		  "next_past_members_to_far_member_ns", next_past_far },
		{ "next, [0, 2^48) to a lone member at 2^48 - 1", "next_lone_far_member_ns",
		  next_far },
		{ "collect, 2^21 dense, per member", "collect_dense_ns_per_member", dense_coll },
		{ "collect, 2^21 random < 2^30, per member", "collect_random_ns_per_member",
		  sparse_coll },
	};
	const int nrows = (int)(sizeof rows / sizeof rows[0]);
	printf("dirtyset: %s, 2^21 members, one thread, median of %d\n", model, REPS);
	printf("%-52s %8s\n", "operation", "ns/op");
	for (int i = 0; i < nrows; i++)
		printf("%-52s %8.2f\n", rows[i].what, rows[i].v);
	printf("memory: dense %.3f bits a page; random < 2^30 %.1f bytes a member\n", dense_bits,
	       sparse_b);

	if (json) {
		FILE *f = bench_json_open(json, "dirtyset", model);
		fprintf(f, ",\n  \"members\": %u", N);
		for (int i = 0; i < nrows; i++)
			bench_json_field(f, "  ", rows[i].key, rows[i].v);
		bench_json_field(f, "  ", "dense_bits_per_page", dense_bits);
		bench_json_field(f, "  ", "random_bytes_per_member", sparse_b);
		bench_json_close(f);
	}
	return 0;
}
