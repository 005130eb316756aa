/* BAG Fig. 4 (Chen et al., TPDS 2014, section 4.1.1): a concurrent index
 * with and without an LRU list kept beside it, four ways.
 *
 *   Hashtable  the index alone (src/index/cindex.h), no replacement order;
 *   SQ         every operation takes one mutex and updates the LRU list
 *              directly (the single locked queue);
 *   MQ-WRT     per-thread queues (src/policy/opqueue.h), drained after
 *              every put and delete;
 *   MQ-OPT     per-thread queues drained only when one is full (ours).
 *
 * Table: 2^23 possible keys (--quick: 2^20), an index with room for all of
 * them, filled to 90%. Each key that is present maps to a slot of a
 * preallocated node array (the page entries; value = incarnation << 32 |
 * slot). Workloads: write-heavy 60% get, 30% put, 10% delete; write-light
 * 90/5/5. get: lookup, then an LRU hit on the page found. put: lookup; if
 * present, re-put and hit; else take a free slot, insert its node in the
 * LRU and put. delete: lookup, delete, remove the node, free the slot.
 * Keys are uniform; gets go to any key, puts and deletes of a key come
 * from one thread (keys are split by key mod threads), as BAG admits no
 * two writers of one block at a time. Each point starts from a freshly
 * built table and LRU list (same contents every time) and runs --ops
 * operations (default half the key count: with uniform keys the fill
 * drifts from 90% toward put/(put+delete), by about 3 points write-heavy
 * and 2 write-light over a point), timed from the start barrier to the
 * last thread's finish, plus the final drain for the queued variants.
 * Reported: the median of --reps runs. After each run the LRU list must
 * hold exactly the index's keys.
 *
 * Goals: MQ-OPT at 16 threads >= 10x SQ at 16 threads; the index alone
 * >= 20 M lookups/s on one thread (printed separately: 100% gets).
 *
 * Usage: bag_fig4 [--threads-max N] [--threads 1,2,4] [--quick] [--keys-log2 N]
 *                 [--ops N] [--reps N] [--queue-len N] [--variants SQ,MQ-OPT]
 *                 [--json FILE]
 */
#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "base/clock.h"
#include "base/rand.h"
#include "index/cindex.h"
#include "policy/lru.h"
#include "policy/opqueue.h"

enum variant { V_HT, V_SQ, V_WRT, V_OPT, NV };
static const char *const vname[NV] = { "Hashtable", "SQ", "MQ-WRT", "MQ-OPT" };

struct workload {
	const char *name;
	int get, put; /* percent; delete is the rest */
};
static const struct workload wls[] = {
	{ "write-heavy", 60, 30 },
	{ "write-light", 90, 5 },
};

/* --- one point ------------------------------------------------------------ */

struct run {
	enum variant v;
	int get, put;
	unsigned threads;
	uint64_t keys; /* power of two */
	uint64_t ops_per_thread;
	struct vc_cindex *ix;
	struct vc_opq_node *nodes; /* keys of them: slot s is nodes[s] */
	uint32_t *freeslots;       /* thread t's stack at t * stride */
	uint64_t stride;
	uint64_t *nfree; /* per thread, one line apart */
	struct vc_policy *pol;
	struct vc_opq *q;
	alignas(64) pthread_mutex_t sq; /* SQ's one lock */
	pthread_barrier_t start;
	uint64_t sink;
};

static inline uint64_t mkval(uint32_t slot, uint32_t gen)
{
	return (uint64_t)gen << 32 | slot;
}

/* Present after the fill: 90% of the keys, the same ones every time. */
static inline bool prefilled(uint64_t k)
{
	uint64_t x = k * 0x9e3779b97f4a7c15ull;
	x ^= x >> 29;
	return (x * 0xbf58476d1ce4e5b9ull >> 32) % 10 != 0;
}

/* SQ: the policy under one mutex, incarnations kept as opqueue does. */
static void sq_hit(struct run *r, struct vc_opq_node *n, uint32_t gen)
{
	pthread_mutex_lock(&r->sq);
	if (n->pn.tier != VC_PNODE_NONE && n->lgen == gen)
		vc_policy_lru.hit(r->pol, &n->pn);
	pthread_mutex_unlock(&r->sq);
}

static uint32_t sq_insert(struct run *r, struct vc_opq_node *n)
{
	pthread_mutex_lock(&r->sq);
	uint32_t g = atomic_load_explicit(&n->gen, memory_order_relaxed) + 1;
	atomic_store_explicit(&n->gen, g, memory_order_relaxed);
	n->lgen = g;
	vc_policy_lru.insert(r->pol, &n->pn, 0);
	pthread_mutex_unlock(&r->sq);
	return g;
}

static void sq_remove(struct run *r, struct vc_opq_node *n, uint32_t gen)
{
	pthread_mutex_lock(&r->sq);
	if (n->pn.tier != VC_PNODE_NONE && n->lgen == gen)
		vc_policy_lru.remove(r->pol, &n->pn);
	atomic_store_explicit(&n->gen, gen + 1, memory_order_relaxed);
	pthread_mutex_unlock(&r->sq);
}

struct worker {
	struct run *r;
	struct vc_opq_local *l;
	unsigned t;
	uint64_t end_ns;
	uint64_t sink;
};

static void *worker(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->r;
	const unsigned t = w->t, T = r->threads;
	const enum variant v = r->v;
	const uint64_t kmask = r->keys - 1;
	const uint64_t mine = (r->keys - t + T - 1) / T; /* keys k = t mod T */
	uint32_t *fs = r->freeslots + t * r->stride;
	uint64_t nf = r->nfree[t * 8];
	uint64_t s = 0x9e3779b97f4a7c15ull * (t + 1) + 12345, sink = 0;
	struct vc_opq_local *l = NULL;
	if (v == V_WRT || v == V_OPT) {
		l = vc_opq_attach(r->q);
		if (!l) {
			fprintf(stderr, "bag_fig4: %s\n", vc_last_error());
			exit(1);
		}
	}
	pthread_barrier_wait(&r->start);
	for (uint64_t i = 0; i < r->ops_per_thread; i++) {
		uint64_t x = vc_rand64(&s);
		int pct = (int)((x & 0xffffffff) * 100 >> 32);
		uint64_t v64;
		if (pct < r->get) {
			uint64_t k = (x >> 32) & kmask;
			if (!vc_cindex_lookup(r->ix, k, &v64))
				continue;
			struct vc_opq_node *n = &r->nodes[(uint32_t)v64];
			uint32_t g = (uint32_t)(v64 >> 32);
			if (v == V_HT)
				sink += v64;
			else if (v == V_SQ)
				sq_hit(r, n, g);
			else
				vc_opq_hit(l, n, g);
			continue;
		}
		uint64_t k = t + T * (((x >> 32) * mine) >> 32);
		bool present = vc_cindex_lookup(r->ix, k, &v64);
		if (pct < r->get + r->put) {
			if (present) {
				vc_cindex_put(r->ix, k, v64);
				struct vc_opq_node *n = &r->nodes[(uint32_t)v64];
				uint32_t g = (uint32_t)(v64 >> 32);
				if (v == V_SQ)
					sq_hit(r, n, g);
				else if (v != V_HT)
					vc_opq_hit(l, n, g);
			} else {
				if (!nf) {
					fprintf(stderr, "bag_fig4: thread %u out of slots\n", t);
					exit(1);
				}
				uint32_t slot = fs[--nf], g = 1;
				struct vc_opq_node *n = &r->nodes[slot];
				if (v == V_SQ)
					g = sq_insert(r, n);
				else if (v != V_HT)
					g = vc_opq_insert(l, n, 0);
				int e = vc_cindex_put(r->ix, k, mkval(slot, g));
				if (e < 0) {
					fprintf(stderr, "bag_fig4: put: %s\n", vc_last_error());
					exit(1);
				}
			}
		} else {
			if (!present)
				continue;
			vc_cindex_delete(r->ix, k);
			uint32_t slot = (uint32_t)v64, g = (uint32_t)(v64 >> 32);
			struct vc_opq_node *n = &r->nodes[slot];
			if (v == V_SQ)
				sq_remove(r, n, g);
			else if (v != V_HT && !vc_opq_remove(l, n, g)) {
				fprintf(stderr, "bag_fig4: remove lost a race it cannot lose\n");
				exit(1);
			}
			fs[nf++] = slot;
		}
		if (v == V_WRT)
			vc_opq_drain(r->q);
	}
	w->end_ns = vc_now_ns();
	w->sink = sink;
	r->nfree[t * 8] = nf;
	w->l = l; /* detached by main after the timed final drain */
	return NULL;
}

struct fill_arg {
	struct run *r;
	uint64_t from, to;
};

static void *fill_worker(void *arg)
{
	struct fill_arg *a = arg;
	for (uint64_t k = a->from; k < a->to; k++)
		if (prefilled(k) && vc_cindex_put(a->r->ix, k, mkval((uint32_t)k, 1)) < 0) {
			fprintf(stderr, "bag_fig4: fill: %s\n", vc_last_error());
			exit(1);
		}
	return NULL;
}

/* Builds the index, the node array, the free slots and (except for
 * Hashtable) the LRU list: the same state every time. */
static void build(struct run *r, unsigned fill_threads)
{
	int e = vc_cindex_create(r->keys, &r->ix);
	if (e < 0) {
		fprintf(stderr, "bag_fig4: cindex: %s\n", vc_last_error());
		exit(1);
	}
	pthread_t th[256];
	struct fill_arg fa[256];
	if (fill_threads > 256)
		fill_threads = 256;
	for (unsigned i = 0; i < fill_threads; i++) {
		fa[i] = (struct fill_arg){ r, r->keys * i / fill_threads,
					   r->keys * (i + 1) / fill_threads };
		pthread_create(&th[i], NULL, fill_worker, &fa[i]);
	}
	const unsigned T = r->threads;
	r->stride = r->keys / T + 1;
	for (unsigned t = 0; t < T; t++)
		r->nfree[t * 8] = 0;
	for (uint64_t k = 0; k < r->keys; k++) {
		vc_opq_node_init(&r->nodes[k]);
		if (prefilled(k)) {
			atomic_store_explicit(&r->nodes[k].gen, 1, memory_order_relaxed);
			r->nodes[k].lgen = 1;
		} else {
			unsigned t = (unsigned)(k % T);
			r->freeslots[t * r->stride + r->nfree[t * 8]++] = (uint32_t)k;
		}
	}
	r->pol = NULL;
	if (r->v != V_HT) {
		uint64_t cap[1] = { r->keys };
		r->pol = vc_policy_lru.create(cap, 1);
		/* A scrambled order (odd multiplier: a permutation mod 2^n), so
		 * list neighbours are not memory neighbours. */
		for (uint64_t i = 0; i < r->keys; i++) {
			uint64_t k = (i * 0x9e3779b1ull) & (r->keys - 1);
			if (prefilled(k))
				vc_policy_lru.insert(r->pol, &r->nodes[k].pn, 0);
		}
	}
	for (unsigned i = 0; i < fill_threads; i++)
		pthread_join(th[i], NULL);
}

/* ops/ms of one run; checks the LRU against the index afterwards. */
static double run_point(struct run *r, unsigned fill_threads, unsigned queue_len,
			struct vc_opq_stats *qst)
{
	build(r, fill_threads);
	r->q = NULL;
	if (r->v == V_WRT || r->v == V_OPT) {
		int e = vc_opq_create(&vc_policy_lru, r->pol, r->threads, queue_len, &r->q);
		if (e < 0) {
			fprintf(stderr, "bag_fig4: opqueue: %s\n", vc_last_error());
			exit(1);
		}
	}
	pthread_mutex_init(&r->sq, NULL);
	pthread_barrier_init(&r->start, NULL, r->threads + 1);
	struct worker w[256];
	pthread_t th[256];
	for (unsigned t = 0; t < r->threads; t++) {
		w[t] = (struct worker){ .r = r, .t = t };
		pthread_create(&th[t], NULL, worker, &w[t]);
	}
	pthread_barrier_wait(&r->start);
	uint64_t t0 = vc_now_ns(), t1 = 0;
	for (unsigned t = 0; t < r->threads; t++) {
		pthread_join(th[t], NULL);
		if (w[t].end_ns > t1)
			t1 = w[t].end_ns;
		r->sink += w[t].sink;
	}
	if (r->q) {
		/* What is still queued is work the run owes: time its drain. */
		uint64_t d0 = vc_now_ns();
		vc_opq_drain(r->q);
		t1 += vc_now_ns() - d0;
		for (unsigned t = 0; t < r->threads; t++)
			vc_opq_detach(w[t].l);
	}
	double ms = (double)(t1 - t0) / 1e6;
	uint64_t live = vc_cindex_count(r->ix);
	if (r->pol && vc_policy_lru.count(r->pol, 0) != live) {
		fprintf(stderr, "bag_fig4: %s: LRU holds %llu pages, index %llu keys\n", vname[r->v],
			(unsigned long long)vc_policy_lru.count(r->pol, 0), (unsigned long long)live);
		exit(1);
	}
	if (r->q) {
		vc_opq_get_stats(r->q, qst);
		vc_opq_destroy(r->q);
	}
	if (r->pol)
		vc_policy_lru.destroy(r->pol);
	vc_cindex_destroy(r->ix);
	pthread_barrier_destroy(&r->start);
	pthread_mutex_destroy(&r->sq);
	return (double)(r->ops_per_thread * r->threads) / ms;
}

/* Large arrays on transparent huge pages where the kernel allows (as the
 * index does): with 4 KiB pages every random node access would also miss
 * the TLB, which is not what the list costs in an engine that does the
 * same for its page entries. */
static void *big_alloc(size_t bytes)
{
	size_t huge = 2u << 20, len = (bytes + huge - 1) / huge * huge + huge;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	char *a = (char *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
	madvise(a, len - (size_t)(a - p), MADV_HUGEPAGE);
	return a; /* never unmapped: lives as long as the program */
}

/* --- main ------------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr, "usage: bag_fig4 [--threads-max N] [--threads 1,2,4] [--quick] "
			"[--keys-log2 N] [--ops N] [--reps N] [--queue-len N] [--variants A,B] "
			"[--json FILE]\n");
	exit(2);
}

static void cpu_desc(char *buf, size_t len)
{
	char model[128];
	snprintf(buf, len, "%s, %ld cpus", bench_cpu_model(model, sizeof model),
		 sysconf(_SC_NPROCESSORS_ONLN));
}

int main(int argc, char **argv)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned tmax = ncpu > 0 ? (unsigned)ncpu : 1, reps = 3, queue_len = VC_OPQ_QUEUE_LEN;
	unsigned keys_log2 = 23;
	uint64_t ops = 0;
	const char *json = NULL, *tlist = NULL, *vlist = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--quick") == 0) {
			keys_log2 = 20;
			reps = 1;
			continue;
		}
		const char *v = i + 1 < argc ? argv[++i] : NULL;
		if (!v)
			usage();
		if (strcmp(a, "--threads-max") == 0)
			tmax = (unsigned)atoi(v);
		else if (strcmp(a, "--threads") == 0)
			tlist = v;
		else if (strcmp(a, "--keys-log2") == 0)
			keys_log2 = (unsigned)atoi(v);
		else if (strcmp(a, "--ops") == 0)
			ops = strtoull(v, NULL, 10);
		else if (strcmp(a, "--reps") == 0)
			reps = (unsigned)atoi(v);
		else if (strcmp(a, "--queue-len") == 0)
			queue_len = (unsigned)atoi(v);
		else if (strcmp(a, "--json") == 0)
			json = v;
		else if (strcmp(a, "--variants") == 0)
			vlist = v;
		else
			usage();
	}
	bool want[NV];
	for (int v = 0; v < NV; v++) {
		size_t n = strlen(vname[v]);
		const char *p = vlist;
		while (p && (p = strstr(p, vname[v])) && p[n] && p[n] != ',')
			p += n;
		want[v] = !vlist || p;
	}
	if (tmax < 1 || tmax > 256 || keys_log2 < 10 || keys_log2 > 30 || reps < 1 || reps > 99)
		usage();
	unsigned th[64], nth = 0;
	if (tlist) {
		for (const char *p = tlist; *p && nth < 64;) {
			unsigned x = (unsigned)strtoul(p, (char **)&p, 10);
			if (x < 1 || x > 256)
				usage();
			th[nth++] = x;
			if (*p == ',')
				p++;
			else if (*p)
				usage();
		}
	} else {
		for (unsigned x = 1; x < tmax; x *= 2)
			th[nth++] = x;
		th[nth++] = tmax;
	}
	unsigned thmax = 0;
	for (unsigned i = 0; i < nth; i++)
		thmax = th[i] > thmax ? th[i] : thmax;
	uint64_t keys = 1ull << keys_log2;
	if (!ops)
		ops = keys / 2;
	unsigned fill_threads = ncpu > 0 ? (unsigned)ncpu : 1;

	struct run *r = aligned_alloc(64, sizeof *r);
	memset(r, 0, sizeof *r);
	r->keys = keys;
	r->nodes = big_alloc(keys * sizeof *r->nodes);
	r->freeslots = big_alloc((keys + thmax) * sizeof *r->freeslots);
	r->nfree = calloc((size_t)thmax * 8, sizeof *r->nfree);
	if (!r->nodes || !r->freeslots || !r->nfree) {
		fprintf(stderr, "bag_fig4: out of memory for 2^%u keys\n", keys_log2);
		return 1;
	}
	char dev[256];
	cpu_desc(dev, sizeof dev);
	printf("BAG Fig. 4: 2^%u keys, index filled to 90%%, %llu ops per point, median of %u, "
	       "queues of %u; %s\n",
	       keys_log2, (unsigned long long)ops, reps, queue_len, dev);

	/* The index alone, one thread, gets only. */
	double lookups;
	{
		double v[99];
		for (unsigned i = 0; i < reps; i++) {
			r->v = V_HT;
			r->get = 100;
			r->put = 0;
			r->threads = 1;
			r->ops_per_thread = ops;
			v[i] = run_point(r, fill_threads, queue_len, NULL);
		}
		lookups = bench_quantile(v, (int)reps, 0.5);
		printf("index alone, 1 thread, 100%% lookups: %.1f M lookups/s (goal >= 20)\n",
		       lookups / 1e3);
	}

	static double res[2][NV][64];
	static struct vc_opq_stats qs[2][NV][64];
	for (int wi = 0; wi < 2; wi++) {
		printf("\n%s (%d%% get, %d%% put, %d%% delete): ops/ms, and x SQ\n", wls[wi].name,
		       wls[wi].get, wls[wi].put, 100 - wls[wi].get - wls[wi].put);
		printf("threads");
		for (int v = 0; v < NV; v++)
			printf(" %17s", vname[v]);
		printf("\n");
		for (unsigned ti = 0; ti < nth; ti++) {
			for (int v = 0; v < NV; v++) {
				double x[99];
				res[wi][v][ti] = NAN;
				if (!want[v])
					continue;
				for (unsigned i = 0; i < reps; i++) {
					r->v = (enum variant)v;
					r->get = wls[wi].get;
					r->put = wls[wi].put;
					r->threads = th[ti];
					r->ops_per_thread = ops / th[ti] ? ops / th[ti] : 1;
					x[i] = run_point(r, fill_threads, queue_len, &qs[wi][v][ti]);
				}
				res[wi][v][ti] = bench_quantile(x, (int)reps, 0.5);
			}
			printf("%7u", th[ti]);
			for (int v = 0; v < NV; v++)
				if (isnan(res[wi][v][ti]))
					printf(" %17s", "-");
				else if (isnan(res[wi][V_SQ][ti]))
					printf(" %9.0f         ", res[wi][v][ti]);
				else
					printf(" %9.0f (%5.1fx)", res[wi][v][ti],
					       res[wi][v][ti] / res[wi][V_SQ][ti]);
			printf("\n");
			fflush(stdout);
		}
	}
	if (json) {
		FILE *f = bench_json_open(json, "bag_fig4", dev);
		fprintf(f, ",\n  \"keys\": %llu,\n  \"fill\": 0.9,\n  \"ops_per_point\": %llu,\n"
			   "  \"reps\": %u,\n  \"queue_len\": %u,\n  \"lookups_per_s_1thread\": ",
			(unsigned long long)keys, (unsigned long long)ops, reps, queue_len);
		bench_json_num(f, lookups * 1e3);
		fputs(",\n  \"points\": [", f);
		int first = 1;
		for (int wi = 0; wi < 2; wi++)
			for (unsigned ti = 0; ti < nth; ti++)
				for (int v = 0; v < NV; v++) {
					if (!want[v])
						continue;
					fprintf(f, "%s\n    {\"workload\": \"%s\", \"variant\": \"%s\", "
						   "\"threads\": %u, \"ops_per_ms\": ",
						first ? "" : ",", wls[wi].name, vname[v], th[ti]);
					bench_json_num(f, res[wi][v][ti]);
					fputs(", \"x_sq\": ", f);
					bench_json_num(f, res[wi][v][ti] / res[wi][V_SQ][ti]);
					if (v == V_WRT || v == V_OPT) {
						const struct vc_opq_stats *s = &qs[wi][v][ti];
						fprintf(f, ", \"drains\": %llu, \"full_drains\": %llu, "
							   "\"stale\": %llu, \"max_batch\": %llu",
							(unsigned long long)s->drains,
							(unsigned long long)s->full_drains,
							(unsigned long long)s->stale,
							(unsigned long long)s->max_batch);
					}
					fputs("}", f);
					first = 0;
				}
		fputs("\n  ]", f);
		bench_json_close(f);
	}
	if (r->sink == 42)
		printf("\n");
	free(r->nfree);
	free(r);
	return 0;
}
