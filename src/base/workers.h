/* Work spread over a few threads of one call, the caller among them. */
#ifndef VC_BASE_WORKERS_H
#define VC_BASE_WORKERS_H

#include <pthread.h>
#include <stdint.h>

#define VC_WORKERS_MAX 16

/* Runs fn(arg) on up to n threads (at most VC_WORKERS_MAX), this one
 * among them, and returns once every one has: the others are started
 * first, then the caller runs fn too. fn takes its work from arg until
 * none is left (an atomic counter), so a thread that cannot start leaves
 * its share to the rest. Returns how many ran fn (1..n). Cost: a thread
 * start and join for each beyond the caller. */
static inline uint32_t vc_run_workers(void *(*fn)(void *), void *arg, uint32_t n)
{
	pthread_t th[VC_WORKERS_MAX - 1];
	uint32_t started = 0;
	n = n > VC_WORKERS_MAX ? VC_WORKERS_MAX : n;
	while (started + 1 < n && pthread_create(&th[started], NULL, fn, arg) == 0)
		started++;
	fn(arg);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	return started + 1;
}

#endif
