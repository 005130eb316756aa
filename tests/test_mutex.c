/* The engine's spinning lock (src/base/mutex.h): vc_mutex_lock_spin and
 * the spin's setting.
 *
 * 1. Exclusion: threads add to a plain counter under the lock, spinning
 *    (a long and a short spin, so that both the spin's trylocks and the
 *    sleep after it take the lock) and not; every addition must count, and
 *    inside each hold an owner flag must be clear on entry (two holders at
 *    once: what a lock returned without being held would allow).
 * 2. A spin that times out sleeps until the lock is free: a holder keeps
 *    it for 50 ms against a spin of 1 ms; the waiter returns only after
 *    the holder let go, and holds it then (another thread's trylock
 *    fails).
 * 3. The setting: VC_MU_SPIN_US in microseconds, its bound, and 0.
 *
 * Exit 0 pass, 1 fail.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "base/mutex.h"
#include "testutil.h"

enum { THREADS = 4, ROUNDS = 20000 };

static pthread_mutex_t mu;
static uint64_t counter;        /* under mu */
static _Atomic int inside;      /* holders now */
static _Atomic int overlaps;
static uint64_t spin_ns;

static void *adder(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++) {
		vc_mutex_lock_spin(&mu, spin_ns);
		if (atomic_fetch_add(&inside, 1) != 0)
			atomic_fetch_add(&overlaps, 1);
		counter++;
		atomic_fetch_sub(&inside, 1);
		pthread_mutex_unlock(&mu);
	}
	return NULL;
}

static void test_exclusion(uint64_t ns)
{
	pthread_t t[THREADS];
	counter = 0;
	spin_ns = ns;
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, adder, NULL) == 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK(atomic_load(&overlaps) == 0);
	CHECK(counter == (uint64_t)THREADS * ROUNDS);
}

static _Atomic int held, released; /* the holder took mu; let it go */

static void *holder(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	atomic_store(&held, 1);
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	atomic_store(&released, 1);
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void *trier(void *arg)
{
	*(int *)arg = pthread_mutex_trylock(&mu);
	return NULL;
}

static void test_sleeps_after_spin(void)
{
	pthread_t h, o;
	int tr = 0;
	CHECK(pthread_create(&h, NULL, holder, NULL) == 0);
	while (!atomic_load(&held))
		sched_yield();
	vc_mutex_lock_spin(&mu, 1000 * 1000);
	CHECK(atomic_load(&released) == 1);
	CHECK(pthread_create(&o, NULL, trier, &tr) == 0);
	pthread_join(o, NULL);
	CHECK(tr == EBUSY);
	pthread_mutex_unlock(&mu);
	pthread_join(h, NULL);
}

static void test_setting(void)
{
	setenv("VC_MU_SPIN_US", "7", 1);
	CHECK(vc_mutex_spin_ns() == 7000);
	setenv("VC_MU_SPIN_US", "5000", 1);
	CHECK(vc_mutex_spin_ns() == 1000 * 1000);
	setenv("VC_MU_SPIN_US", "0", 1);
	CHECK(vc_mutex_spin_ns() == 0);
	unsetenv("VC_MU_SPIN_US");
	CHECK(vc_mutex_spin_ns() == (sysconf(_SC_NPROCESSORS_ONLN) >= 8 ? 100000u : 0u));
}

int main(void)
{
	CHECK(vc_mutex_init_spin(&mu) == 0);
	test_exclusion(200 * 1000);
	test_exclusion(200);
	test_exclusion(0);
	test_sleeps_after_spin();
	pthread_mutex_destroy(&mu);
	test_setting();
	return 0;
}
