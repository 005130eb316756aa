/* The lock-free id stack (src/base/idstack.h), the free lists of host slots
 * and page entries.
 *
 * 1. One thread: LIFO order, empty and full stacks, the count.
 * 2. Threads pop ids, own them for a moment and push them back, many times
 *    over a small stack (so the same ids pass through every thread and the
 *    head's ABA case comes up). An id popped while another thread holds it
 *    (two owners: what a lost tag would allow) fails the test, and at the
 *    end every id is on the stack exactly once. TSan checks the ordering
 *    claims (a push's writes are seen by the next popper).
 *
 * Exit 0 pass, 1 fail.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "base/idstack.h"
#include "testutil.h"

enum { IDS = 64, THREADS = 4, ROUNDS = 200000 };

static struct vc_idstack st;
static _Atomic int owner[IDS];  /* who holds the id: 0 = the stack */
static uint64_t payload[IDS];   /* written by each owner, checked by the next */

static void test_serial(void)
{
	struct vc_idstack s;
	CHECK_OK(vc_idstack_init(&s, 5, true));
	CHECK(vc_idstack_count(&s) == 5);
	uint32_t id;
	for (uint32_t want = 0; want < 5; want++) { /* 0 on top, then up */
		CHECK(vc_idstack_pop(&s, &id));
		CHECK(id == want);
	}
	CHECK(!vc_idstack_pop(&s, &id));
	CHECK(vc_idstack_count(&s) == 0);
	vc_idstack_push(&s, 3);
	vc_idstack_push(&s, 1);
	CHECK(vc_idstack_count(&s) == 2);
	CHECK(vc_idstack_pop(&s, &id) && id == 1); /* last in, first out */
	CHECK(vc_idstack_pop(&s, &id) && id == 3);
	CHECK(!vc_idstack_pop(&s, &id));
	vc_idstack_fini(&s);

	CHECK_OK(vc_idstack_init(&s, 3, false));
	CHECK(!vc_idstack_pop(&s, &id));
	vc_idstack_push(&s, 2);
	CHECK(vc_idstack_pop(&s, &id) && id == 2);
	vc_idstack_fini(&s);
}

static void *worker(void *arg)
{
	int me = (int)(intptr_t)arg;
	uint64_t rng = 0x51ed + (uint64_t)me;
	uint32_t held[4];
	for (int r = 0; r < ROUNDS; r++) {
		unsigned n = 1 + (unsigned)(t_rand(&rng) % 4), k = 0;
		while (k < n && vc_idstack_pop(&st, &held[k])) {
			int free_ = 0;
			CHECK(held[k] < IDS);
			CHECK(atomic_compare_exchange_strong(&owner[held[k]], &free_, me));
			CHECK(payload[held[k]] == ((uint64_t)held[k] << 32 | 0xfeed));
			payload[held[k]] = (uint64_t)me; /* plain writes: TSan checks the handoff */
			k++;
		}
		while (k > 0) {
			uint32_t id = held[--k];
			payload[id] = (uint64_t)id << 32 | 0xfeed;
			atomic_store(&owner[id], 0);
			vc_idstack_push(&st, id);
		}
	}
	return NULL;
}

static void test_threads(void)
{
	CHECK_OK(vc_idstack_init(&st, IDS, true));
	for (uint32_t i = 0; i < IDS; i++)
		payload[i] = (uint64_t)i << 32 | 0xfeed;
	pthread_t th[THREADS];
	for (int t = 0; t < THREADS; t++)
		CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)(t + 1)) == 0);
	for (int t = 0; t < THREADS; t++)
		CHECK(pthread_join(th[t], NULL) == 0);
	CHECK(vc_idstack_count(&st) == IDS);
	bool seen[IDS] = { false };
	uint32_t id;
	for (int i = 0; i < IDS; i++) {
		CHECK(vc_idstack_pop(&st, &id));
		CHECK(id < IDS && !seen[id]);
		seen[id] = true;
	}
	CHECK(!vc_idstack_pop(&st, &id));
	vc_idstack_fini(&st);
	fprintf(stderr, "threads: %d x %d rounds over %d ids: one owner at a time, none lost\n",
		THREADS, ROUNDS, IDS);
}

int main(void)
{
	test_serial();
	test_threads();
	fprintf(stderr, "test_idstack: ok\n");
	return 0;
}
