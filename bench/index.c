/* The concurrent index (src/index/cindex.c) on the host CPU.
 *
 * A table of 2^23 keys filled to 90% of its slots (BAG's setup, Chen et al.,
 * TPDS 2014, 4.1.1), then:
 *   - single-thread lookups: hits, misses, and batches through
 *     vc_cindex_lookup_n (which overlaps the cache misses of a batch);
 *   - BAG Fig. 4, the "Hashtable" variant: ops/ms for 1..N threads, for the
 *     write-heavy mix (60% get, 30% put, 10% delete) and the write-light mix
 *     (90/5/5). Gets look up random keys of the initial set; puts insert
 *     keys that are not there; deletes remove keys that are. Puts outnumber
 *     deletes in the write-heavy mix, so each point runs a fixed number of
 *     operations (the load may rise by at most 2 points) and the table is
 *     put back to its initial keys, untimed, before the next; each point is
 *     the median of three runs;
 *   - the load at which the first put fails, filling on from 90%.
 * Keys are the engine's: vc_ikey(file, page) over four files.
 *
 * The paper's figure survives only as text; the one number it gives is for
 * another variant (SQ: 6537 ops/ms at 1 thread, write-heavy, on an AMD
 * Phenom II X6 1055T), so there is nothing to compare the Hashtable curve
 * with here but its shape: "scales equally well under different loads".
 *
 * Usage: index [--quick] [--keys-log2 N] [--threads-max N] [--json FILE]
 * --quick: 2^20 keys.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "bench.h"
#include "base/clock.h"
#include "base/rand.h"
#include "index/cindex.h"

#define LOAD 0.90
#define REPS 5     /* lookup measurements */
#define MIX_REPS 3 /* runs per Fig. 4 point */

static struct vc_cindex *ix;
static uint64_t nkeys; /* initial keys: ids [0, nkeys), a power of two (ids drawn by mask) */

/* Key of id i: page i/4 of file i%4. New keys of the mixes use ids from
 * 2^40 up, so they never collide with the initial ones. */
static inline uint64_t key_of(uint64_t id)
{
	return vc_ikey((uint32_t)(id & 3), id >> 2);
}

static double median(double *v, int n)
{
	return bench_quantile(v, n, 0.5);
}

/* ---- single-thread lookups ---- */

struct lk {
	double hit, miss, batch, batch_min, batch_max, hit_min, hit_max;
};

static void bench_lookups(uint64_t count, struct lk *out)
{
	double hit[REPS], miss[REPS], batch[REPS];
	enum { NB = 64 };
	uint64_t keys[NB], vals[NB];
	for (int r = 0; r < REPS; r++) {
		uint64_t s = 0x1234 + (uint64_t)r, found = 0, v;
		uint64_t t0 = vc_now_ns();
		for (uint64_t k = 0; k < count; k++)
			found += vc_cindex_lookup(ix, key_of(vc_rand64(&s) & (nkeys - 1)), &v);
		uint64_t t1 = vc_now_ns();
		if (found != count) {
			fprintf(stderr, "index: %llu of %llu lookups missed\n",
				(unsigned long long)(count - found), (unsigned long long)count);
			exit(1);
		}
		hit[r] = (double)count / ((double)(t1 - t0) / 1e3);

		t0 = vc_now_ns();
		for (uint64_t k = 0; k < count; k++) {
			uint64_t id = nkeys + (vc_rand64(&s) & (nkeys - 1));
			found += vc_cindex_lookup(ix, key_of(id), &v);
		}
		t1 = vc_now_ns();
		miss[r] = (double)count / ((double)(t1 - t0) / 1e3);

		found = 0;
		t0 = vc_now_ns();
		for (uint64_t k = 0; k < count; k += NB) {
			for (int q = 0; q < NB; q++)
				keys[q] = key_of(vc_rand64(&s) & (nkeys - 1));
			found += vc_cindex_lookup_n(ix, NB, keys, vals, NULL);
		}
		t1 = vc_now_ns();
		uint64_t done = (count + NB - 1) / NB * NB;
		if (found != done) {
			fprintf(stderr, "index: batch lookups missed\n");
			exit(1);
		}
		batch[r] = (double)done / ((double)(t1 - t0) / 1e3);
	}
	out->hit = median(hit, REPS);
	out->hit_min = hit[0];
	out->hit_max = hit[REPS - 1];
	out->miss = median(miss, REPS);
	out->batch = median(batch, REPS);
	out->batch_min = batch[0];
	out->batch_max = batch[REPS - 1];
}

/* ---- BAG Fig. 4 mixes ---- */

struct mix {
	const char *name;
	unsigned get, put; /* percent; delete is the rest */
};

struct worker {
	pthread_t th;
	int id;
	const struct mix *mix;
	uint64_t ops;
	uint64_t del_lo, del_next; /* deletes: initial ids del_lo.. (each once) */
	uint64_t ins_next;         /* puts: new ids from here */
	uint64_t ins_first;
	atomic_int *go;
	int err;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(w->id + 1), v;
	while (!atomic_load_explicit(w->go, memory_order_acquire))
		;
	for (uint64_t k = 0; k < w->ops; k++) {
		uint64_t x = vc_rand64(&s);
		unsigned p = (unsigned)(x % 100);
		if (p < w->mix->get) {
			vc_cindex_lookup(ix, key_of((x >> 8) & (nkeys - 1)), &v);
		} else if (p < w->mix->get + w->mix->put) {
			if (vc_cindex_put(ix, key_of(w->ins_next), x) != 0)
				w->err++;
			w->ins_next++;
		} else {
			if (vc_cindex_delete(ix, key_of(w->del_next)) != 0)
				w->err++;
			w->del_next++;
		}
	}
	return NULL;
}

/* One run: returns ops/ms; *l0, *l1 the load before and after. Puts the
 * table back to the initial keys afterwards. */
static double run_mix(const struct mix *m, int nthreads, uint64_t total_ops, double *l0,
		      double *l1)
{
	struct worker w[256];
	atomic_int go = 0;
	uint64_t slots = vc_cindex_slots(ix);
	*l0 = (double)vc_cindex_count(ix) / (double)slots;
	for (int t = 0; t < nthreads; t++) {
		w[t] = (struct worker){ .id = t, .mix = m, .ops = total_ops / (uint64_t)nthreads,
					.go = &go };
		w[t].del_lo = w[t].del_next = nkeys / (uint64_t)nthreads * (uint64_t)t;
		w[t].ins_first = w[t].ins_next = (1ull << 40) + ((uint64_t)t << 34);
		if (pthread_create(&w[t].th, NULL, worker_main, &w[t]) != 0) {
			perror("pthread_create");
			exit(1);
		}
	}
	uint64_t t0 = vc_now_ns();
	atomic_store_explicit(&go, 1, memory_order_release);
	uint64_t ops = 0;
	int err = 0;
	for (int t = 0; t < nthreads; t++) {
		pthread_join(w[t].th, NULL);
		ops += w[t].ops;
		err += w[t].err;
	}
	uint64_t ns = vc_now_ns() - t0;
	*l1 = (double)vc_cindex_count(ix) / (double)slots;
	if (err) {
		fprintf(stderr, "index: %d puts or deletes failed in the %s mix\n", err, m->name);
		exit(1);
	}
	/* Back to the initial keys. */
	for (int t = 0; t < nthreads; t++) {
		for (uint64_t id = w[t].ins_first; id < w[t].ins_next; id++)
			if (vc_cindex_delete(ix, key_of(id)) != 0)
				exit(1);
		for (uint64_t id = w[t].del_lo; id < w[t].del_next; id++)
			if (vc_cindex_put(ix, key_of(id), id) != 0)
				exit(1);
	}
	if (vc_cindex_count(ix) != nkeys) {
		fprintf(stderr, "index: the table did not return to its %llu keys\n",
			(unsigned long long)nkeys);
		exit(1);
	}
	return (double)ops / ((double)ns / 1e6);
}

int main(int argc, char **argv)
{
	int keys_log2 = 23, tmax = (int)sysconf(_SC_NPROCESSORS_ONLN);
	const char *json = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--quick") == 0) {
			keys_log2 = 20;
			continue;
		}
		if (!v) {
			fprintf(stderr, "usage: index [--quick] [--keys-log2 N] [--threads-max N] "
					"[--json FILE]\n");
			return 2;
		}
		if (strcmp(a, "--keys-log2") == 0)
			keys_log2 = atoi(v);
		else if (strcmp(a, "--threads-max") == 0)
			tmax = atoi(v);
		else if (strcmp(a, "--json") == 0)
			json = v;
		else {
			fprintf(stderr, "index: unknown option %s\n", a);
			return 2;
		}
		i++;
	}
	if (keys_log2 < 10 || keys_log2 > 30 || tmax < 1 || tmax > 256) {
		fprintf(stderr, "index: bad --keys-log2 or --threads-max\n");
		return 2;
	}
	nkeys = 1ull << keys_log2;
	/* capacity is VC_CINDEX_MAX_LOAD of the slots: ask for the capacity
	 * that makes nkeys fill LOAD of them. */
	uint64_t cap = (uint64_t)((double)nkeys / LOAD * VC_CINDEX_MAX_LOAD);
	int r = vc_cindex_create(cap, &ix);
	if (r < 0) {
		fprintf(stderr, "index: %s: %s\n", vc_strerror(r), vc_last_error());
		return 1;
	}
	uint64_t slots = vc_cindex_slots(ix);
	uint64_t t0 = vc_now_ns();
	for (uint64_t id = 0; id < nkeys; id++)
		if (vc_cindex_put(ix, key_of(id), id) != 0) {
			fprintf(stderr, "index: fill failed at %llu: %s\n", (unsigned long long)id,
				vc_last_error());
			return 1;
		}
	double fill_mops = (double)nkeys / ((double)(vc_now_ns() - t0) / 1e3);
	double load = (double)nkeys / (double)slots;
	/* 128-byte buckets of 7 slots, plus a lock word per 32 buckets. */
	double bytes = (double)slots / 7 * 128 * (1 + 1.0 / 32 / 16);
	char model[160];
	bench_cpu_model(model, sizeof model);
	printf("index: 2^%d keys in %llu slots (load %.3f), %.0f MiB (%.1f B/key), %s, "
	       "%d threads max\n",
	       keys_log2, (unsigned long long)slots, load, bytes / (1 << 20), bytes / (double)nkeys,
	       model, tmax);
	printf("fill (1 thread, puts of new keys up to load %.2f): %.2f M puts/s\n", load,
	       fill_mops);

	struct lk lk;
	bench_lookups(nkeys < 4000000 ? 4000000 : nkeys, &lk);
	printf("lookups, 1 thread (median of %d): hit %.2f M/s (%.2f..%.2f), miss %.2f M/s, "
	       "batched by 64 (lookup_n) %.2f M/s (%.2f..%.2f)\n",
	       REPS, lk.hit, lk.hit_min, lk.hit_max, lk.miss, lk.batch, lk.batch_min,
	       lk.batch_max);

	static const struct mix mixes[2] = { { "write-heavy", 60, 30 }, { "write-light", 90, 5 } };
	/* Net growth per op is (put - delete)%: 20% write-heavy. Bound the
	 * rise in load to 2 points of the slots. */
	uint64_t ops_per_point = (uint64_t)(0.02 * (double)slots / 0.20);
	double res[256][2], lmax[2] = { 0, 0 };
	printf("BAG Fig. 4 \"Hashtable\": ops/ms, %llu ops per run, median of %d runs\n",
	       (unsigned long long)ops_per_point, MIX_REPS);
	printf("%8s %14s %14s\n", "threads", "write-heavy", "write-light");
	for (int t = 1; t <= tmax; t++) {
		for (int m = 0; m < 2; m++) {
			double v[MIX_REPS], l0, l1;
			for (int rep = 0; rep < MIX_REPS; rep++) {
				v[rep] = run_mix(&mixes[m], t, ops_per_point, &l0, &l1);
				lmax[m] = l1 > lmax[m] ? l1 : lmax[m];
			}
			res[t][m] = median(v, MIX_REPS);
		}
		printf("%8d %14.0f %14.0f\n", t, res[t][0], res[t][1]);
	}
	printf("load during the mixes: from %.3f up to %.3f (write-heavy), %.3f (write-light)\n",
	       load, lmax[0], lmax[1]);

	/* Fill on until the first put fails. */
	uint64_t id = 1ull << 41, n = nkeys;
	for (;; id++) {
		int rc = vc_cindex_put(ix, key_of(id), id);
		if (rc == -ENOSPC)
			break;
		if (rc != 0)
			return 1;
		n++;
	}
	double first_fail = (double)n / (double)slots;
	printf("first failed put at load %.4f (%s)\n", first_fail, vc_last_error());

	if (json) {
		FILE *f = bench_json_open(json, "index", model);
		fprintf(f, ",\n  \"keys\": %llu,\n  \"slots\": %llu", (unsigned long long)nkeys,
			(unsigned long long)slots);
		bench_json_field(f, "  ", "load", load);
		bench_json_field(f, "  ", "bytes_per_key", bytes / (double)nkeys);
		bench_json_field(f, "  ", "fill_mputs_per_s", fill_mops);
		bench_json_field(f, "  ", "lookup_hit_m_per_s", lk.hit);
		bench_json_field(f, "  ", "lookup_miss_m_per_s", lk.miss);
		bench_json_field(f, "  ", "lookup_batch64_m_per_s", lk.batch);
		fprintf(f, ",\n  \"ops_per_point\": %llu,\n  \"fig4\": [",
			(unsigned long long)ops_per_point);
		for (int t = 1; t <= tmax; t++) {
			fprintf(f, "%s\n    {\"threads\": %d, \"write_heavy_ops_per_ms\": ",
				t > 1 ? "," : "", t);
			bench_json_num(f, res[t][0]);
			fputs(", \"write_light_ops_per_ms\": ", f);
			bench_json_num(f, res[t][1]);
			fputc('}', f);
		}
		fputs("\n  ],\n  \"max_load_write_heavy\": ", f);
		bench_json_num(f, lmax[0]);
		fputs(",\n  \"max_load_write_light\": ", f);
		bench_json_num(f, lmax[1]);
		fputs(",\n  \"first_failed_put_load\": ", f);
		bench_json_num(f, first_fail);
		bench_json_close(f);
	}
	vc_cindex_destroy(ix);
	return 0;
}
