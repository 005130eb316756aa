/* The engine's short-hold locks (c->mu, dd.mu): mutexes that spin before
 * they sleep. Their holds are microseconds, and a sleeper's wake-up cost
 * each contended acquisition 12-20 us on the H200's 16 cores
 * (docs/DEDUP.md, steps 9 and 14); a sleep on dd.mu inside a hold of c->mu
 * stretches that hold by as much, and every thread queued for c->mu waits
 * it out too. Two layers: glibc's adaptive mutex (a spin of about a
 * hundred pauses, learned per lock), and before it vc_mutex_lock_spin's
 * own spin, bounded in time, for machines with cores to spare. */
#ifndef VC_BASE_MUTEX_H
#define VC_BASE_MUTEX_H

#include <pthread.h>
#include <unistd.h>

#include "base/atomics.h"
#include "base/clock.h"
#include "base/env.h"

/* 0 or pthread_mutex_init's error. VC_MU_ADAPTIVE=0 (for measuring): a
 * plain mutex. */
static inline int vc_mutex_init_spin(pthread_mutex_t *mu)
{
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
	if (vc_env_u32("VC_MU_ADAPTIVE", 1, 0, 1))
		pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
	int r = pthread_mutex_init(mu, &ma);
	pthread_mutexattr_destroy(&ma);
	return r;
}

/* How long vc_mutex_lock_spin spins, in ns: VC_MU_SPIN_US if set (at
 * most 1000; 0: glibc's spin alone), else 100 us on a machine of 8 or
 * more online CPUs and 0 on smaller ones, where threads may outnumber
 * cores and a spinner burns the time slice its lock's holder needs.
 * 100: on the H200 (16 cores) the dedup_moves demote and swap columns
 * rose 20-35 % at 30 and 100 us against glibc's spin alone, dedup on
 * and off, and most at 100 with dedup on (docs/DEDUP.md step 14). Read
 * once, at a cache's open. */
static inline uint64_t vc_mutex_spin_ns(void)
{
	const uint64_t dflt = sysconf(_SC_NPROCESSORS_ONLN) >= 8 ? 100 : 0;
	return vc_env_u64("VC_MU_SPIN_US", dflt, 0, 1000) * 1000;
}

/* Locks mu; while another thread holds it, retries for up to spin_ns
 * (pauses between tries doubling to 64) before it sleeps in
 * pthread_mutex_lock. Cost when free: one trylock. */
static inline void vc_mutex_lock_spin(pthread_mutex_t *mu, uint64_t spin_ns)
{
	if (pthread_mutex_trylock(mu) == 0)
		return;
	if (spin_ns) {
		const uint64_t end = vc_now_ns() + spin_ns;
		unsigned b = 1;
		do {
			for (unsigned k = 0; k < b; k++)
				vc_cpu_relax();
			b = b < 64 ? 2 * b : b;
			if (pthread_mutex_trylock(mu) == 0)
				return;
		} while (vc_now_ns() < end);
	}
	pthread_mutex_lock(mu);
}

#endif
