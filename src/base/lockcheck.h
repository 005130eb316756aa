/* Lock rules checked in sanitizer builds (VC_DEBUG_LOCKS: engine.h's
 * eng_assert_locked, dedup_state.h's dd_assert_locked). Not assert():
 * every build type keeps NDEBUG (RelWithDebInfo by default), which would
 * compile the checks out of the very builds meant to run them. */
#ifndef VC_BASE_LOCKCHECK_H
#define VC_BASE_LOCKCHECK_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* `owner`: the lock's recorded holder, written by its holder alone, so
 * read without the lock only where the caller must hold it. */
#define VC_LOCK_HELD(owner, name)                                                          \
	do {                                                                               \
		if (!pthread_equal((owner), pthread_self())) {                             \
			fprintf(stderr, "%s:%d: lock rule broken: %s not held\n", __FILE__, \
				__LINE__, (name));                                         \
			abort();                                                           \
		}                                                                          \
	} while (0)

#endif
