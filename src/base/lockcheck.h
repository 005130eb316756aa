/* Lock rules checked in sanitizer builds (VC_DEBUG_LOCKS): a lock's
 * holder records itself (VC_LOCK_TAKEN after taking it, VC_LOCK_LEFT
 * before letting go, a condition wait included), and what must run under
 * it checks (VC_LOCK_HELD: engine.h's eng_assert_locked, dedup_state.h's
 * dd_assert_locked). All three are nothing in other builds. Not assert():
 * every build type keeps NDEBUG (RelWithDebInfo by default), which would
 * compile the checks out of the very builds meant to run them. */
#ifndef VC_BASE_LOCKCHECK_H
#define VC_BASE_LOCKCHECK_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef VC_DEBUG_LOCKS
/* `owner`: the lock's recorded holder (a pthread_t), written by its
 * holder alone, so read without the lock only where the caller must hold
 * it. */
#define VC_LOCK_TAKEN(owner) ((owner) = pthread_self())
#define VC_LOCK_LEFT(owner) ((owner) = (pthread_t)0)
#define VC_LOCK_HELD(owner, name)                                                          \
	do {                                                                               \
		if (!pthread_equal((owner), pthread_self())) {                             \
			fprintf(stderr, "%s:%d: lock rule broken: %s not held\n", __FILE__, \
				__LINE__, (name));                                         \
			abort();                                                           \
		}                                                                          \
	} while (0)
#else
/* sizeof: the operands count as used, and nothing is read. */
#define VC_LOCK_TAKEN(owner) ((void)sizeof(owner))
#define VC_LOCK_LEFT(owner) ((void)sizeof(owner))
#define VC_LOCK_HELD(owner, name) ((void)sizeof(owner))
#endif

#endif
