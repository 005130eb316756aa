/* A baseline on every CPU core: nthreads threads, thread t pinned to CPU t
 * (best effort), run a caller's loop for the same wall-clock window, and
 * the aggregate rate is what they processed over that window. Header only,
 * after bench.h (each bench is its own program); bench/aes_xts (OpenSSL
 * XTS) and bench/fingerprint (OpenSSL MD5, MurmurHash3) use it.
 *
 * The loop: fn(arg, t, until_ns, &err) processes units until vc_now_ns()
 * reaches until_ns, at least one (a do-while), and returns the bytes it
 * processed; on failure it sets err and returns. Every thread first runs
 * one unit untimed (until_ns = 0), so first touches and library set-up
 * fall outside the window; then all start together at a barrier. */
#ifndef VC_BENCH_CORES_H
#define VC_BENCH_CORES_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "base/clock.h"

typedef uint64_t (*bench_core_fn)(void *arg, int t, uint64_t until_ns, int *err);

struct bench_core {
	pthread_t th;
	int t;
	bench_core_fn fn;
	void *arg;
	double seconds;
	pthread_barrier_t *start;
	uint64_t bytes;
	int err;
};

static void *bench_core_main(void *p)
{
	struct bench_core *c = p;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(c->t, &set);
	(void)pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
	(void)c->fn(c->arg, c->t, 0, &c->err);
	pthread_barrier_wait(c->start);
	if (!c->err)
		c->bytes = c->fn(c->arg, c->t, vc_now_ns() + (uint64_t)(c->seconds * 1e9), &c->err);
	return NULL;
}

/* GB/s (10^9 bytes per second) of nthreads threads running fn for seconds;
 * *err is the first thread's error, if any (0 otherwise). */
static inline double bench_cores_gbs(int nthreads, double seconds, bench_core_fn fn, void *arg, int *err)
{
	struct bench_core *c = calloc((size_t)nthreads, sizeof *c);
	pthread_barrier_t start;
	if (!c)
		bench_die("calloc", -ENOMEM);
	pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
	for (int t = 0; t < nthreads; t++) {
		c[t] = (struct bench_core){ .t = t, .fn = fn, .arg = arg, .seconds = seconds,
					    .start = &start };
		if (pthread_create(&c[t].th, NULL, bench_core_main, &c[t]) != 0)
			bench_die("pthread_create", -EAGAIN);
	}
	pthread_barrier_wait(&start);
	const uint64_t t0 = vc_now_ns();
	uint64_t bytes = 0;
	*err = 0;
	for (int t = 0; t < nthreads; t++) {
		pthread_join(c[t].th, NULL);
		bytes += c[t].bytes;
		if (c[t].err && !*err)
			*err = c[t].err;
	}
	const double secs = (double)(vc_now_ns() - t0) / 1e9;
	pthread_barrier_destroy(&start);
	free(c);
	return (double)bytes / secs / 1e9;
}

/* The options of a device-against-every-core bench: --gib N (device data),
 * --reps R (device passes per figure), --threads T (CPU threads, default
 * the online CPUs), --cpu-seconds S (per CPU figure), --json FILE. */
struct bench_cores_opts {
	double gib, cpu_seconds;
	int reps, nthreads;
	const char *json;
};

static inline struct bench_cores_opts bench_cores_defaults(void)
{
	return (struct bench_cores_opts){ .gib = 4, .cpu_seconds = 1, .reps = 5,
					  .nthreads = (int)sysconf(_SC_NPROCESSORS_ONLN) };
}

/* Takes argv[*i] (and its value) when it is one of the options above:
 * true, *i on the last word taken; false otherwise, *i unchanged. */
static inline bool bench_cores_opt(struct bench_cores_opts *o, int argc, char **argv, int *i)
{
	if (*i + 1 >= argc)
		return false;
	const char *a = argv[*i], *v = argv[*i + 1];
	if (strcmp(a, "--gib") == 0)
		o->gib = atof(v);
	else if (strcmp(a, "--reps") == 0)
		o->reps = atoi(v);
	else if (strcmp(a, "--threads") == 0)
		o->nthreads = atoi(v);
	else if (strcmp(a, "--cpu-seconds") == 0)
		o->cpu_seconds = atof(v);
	else if (strcmp(a, "--json") == 0)
		o->json = v;
	else
		return false;
	++*i;
	return true;
}

/* The options make sense: positive sizes, counts and times. */
static inline bool bench_cores_valid(const struct bench_cores_opts *o)
{
	return o->gib > 0 && o->reps >= 1 && o->nthreads >= 1 && o->cpu_seconds > 0;
}

#endif
