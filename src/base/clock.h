/* Monotonic time in nanoseconds. */
#ifndef VC_CLOCK_H
#define VC_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

static inline uint64_t vc_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A condition variable whose timed waits run on CLOCK_MONOTONIC (deadlines
 * from vc_now_ns), so a wall-clock step never stretches or cuts a wait. */
static inline void vc_cond_init_monotonic(pthread_cond_t *cv)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
}

#endif
