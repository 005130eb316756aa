/* Device queues (device/queue.h) on the device named by VC_TEST_DEVICE.
 *
 * Data is checked byte for byte after every round trip host -> device ->
 * host, for every page size template and multi-piece pages; swaps; many
 * producers on shared rings with waits by vc_dq_wait and by polling
 * vc_dq_done; a ring much shallower than one submission; consumers that
 * stop after 20 us idle and restart under producers (CUDA); allocations
 * (which pause the consumers) racing with traffic; destroy with moves in
 * flight; and bad input.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "device/device.h"
#include "device/queue.h"
#include "testutil.h"

static struct vc_device *dev;

static void fill(unsigned char *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = t_rand(&seed);
		memcpy(p + i, &v, n - i < 8 ? n - i : 8);
	}
}

struct mem {
	unsigned char *host; /* npages of host memory (mapped) */
	uint64_t host_dev;
	uint64_t gpu; /* npages of device memory */
	uint32_t npages, ps;
};

static void mem_open(struct mem *m, uint32_t npages, uint32_t ps)
{
	m->npages = npages;
	m->ps = ps;
	void *h;
	CHECK_OK(dev->ops->host_alloc(dev, (size_t)npages * ps, &h, &m->host_dev));
	m->host = h;
	CHECK_OK(dev->ops->mem_alloc(dev, (size_t)npages * ps, &m->gpu));
}

static void mem_close(struct mem *m)
{
	dev->ops->host_free(dev, m->host);
	dev->ops->mem_free(dev, m->gpu);
}

static uint64_t haddr(const struct mem *m, uint32_t i)
{
	return m->host_dev + (uint64_t)i * m->ps;
}

static uint64_t gaddr(const struct mem *m, uint32_t i)
{
	return m->gpu + (uint64_t)i * m->ps;
}

/* Host pages [0, n) go to device pages perm[i], then come back to host
 * pages [n, 2n): byte-equal, in one submission each way. */
static void round_trip(struct vc_dq *q, struct mem *m, uint32_t n, uint64_t seed)
{
	CHECK(2 * n <= m->npages);
	fill(m->host, (size_t)n * m->ps, seed);
	memset(m->host + (size_t)n * m->ps, 0xee, (size_t)n * m->ps);
	uint32_t *perm = malloc(n * sizeof *perm);
	struct vc_move *mv = malloc(n * sizeof *mv);
	for (uint32_t i = 0; i < n; i++)
		perm[i] = i;
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = (uint32_t)(t_rand(&seed) % i), x = perm[i - 1];
		perm[i - 1] = perm[j];
		perm[j] = x;
	}
	for (uint32_t i = 0; i < n; i++)
		mv[i] = (struct vc_move){ .src = haddr(m, i), .dst = gaddr(m, perm[i]) };
	struct vc_dq_span sp;
	CHECK_OK(vc_dq_submit(q, vc_dq_home(q), mv, n, &sp));
	CHECK_OK(vc_dq_wait(q, &sp));
	CHECK(vc_dq_done(q, &sp));
	for (uint32_t i = 0; i < n; i++)
		mv[i] = (struct vc_move){ .src = gaddr(m, perm[i]), .dst = haddr(m, n + i) };
	CHECK_OK(vc_dq_submit(q, (vc_dq_home(q) + 1) % q->nrings, mv, n, &sp));
	CHECK_OK(vc_dq_wait(q, &sp));
	CHECK(memcmp(m->host, m->host + (size_t)n * m->ps, (size_t)n * m->ps) == 0);
	free(perm);
	free(mv);
}

static void test_page_sizes(void)
{
	static const uint32_t sizes[] = { 512, 1024, 2048, 4096, 16384, 2u << 20 };
	for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
		uint32_t ps = sizes[k], n = ps >= (1u << 20) ? 4 : 300;
		struct vc_dq *q;
		struct vc_dq_config cfg = { .page_size = ps };
		CHECK_OK(vc_dq_create(dev, &cfg, &q));
		struct mem m;
		mem_open(&m, 2 * n, ps);
		round_trip(q, &m, n, 1 + k);
		round_trip(q, &m, 1, 100 + k);
		vc_dq_destroy(q);
		mem_close(&m);
	}
	fprintf(stderr, "page sizes: ok\n");
}

static void test_swap(void)
{
	const uint32_t ps = 4096, n = 64;
	struct vc_dq *q;
	struct vc_dq_config cfg = { .page_size = ps };
	CHECK_OK(vc_dq_create(dev, &cfg, &q));
	struct mem m;
	mem_open(&m, 3 * n, ps);
	/* Device pages [0, n) get A (from host [0, n)), host [n, 2n) holds B;
	 * swap host [n, 2n) with device [0, n); read the device back. */
	fill(m.host, (size_t)2 * n * ps, 7);
	unsigned char *copy = malloc((size_t)2 * n * ps);
	memcpy(copy, m.host, (size_t)2 * n * ps);
	struct vc_move mv[64];
	struct vc_dq_span sp;
	for (uint32_t i = 0; i < n; i++)
		mv[i] = (struct vc_move){ .src = haddr(&m, i), .dst = gaddr(&m, i) };
	CHECK_OK(vc_dq_submit(q, 0, mv, n, &sp));
	CHECK_OK(vc_dq_wait(q, &sp));
	for (uint32_t i = 0; i < n; i++)
		mv[i] = (struct vc_move){ .src = haddr(&m, n + i), .dst = gaddr(&m, i),
					  .op = VC_MOVE_SWAP };
	CHECK_OK(vc_dq_submit(q, 0, mv, n, &sp));
	CHECK_OK(vc_dq_wait(q, &sp));
	CHECK(memcmp(m.host + (size_t)n * ps, copy, (size_t)n * ps) == 0); /* A came up */
	for (uint32_t i = 0; i < n; i++)
		mv[i] = (struct vc_move){ .src = gaddr(&m, i), .dst = haddr(&m, 2 * n + i) };
	CHECK_OK(vc_dq_submit(q, 0, mv, n, &sp));
	CHECK_OK(vc_dq_wait(q, &sp));
	CHECK(memcmp(m.host + (size_t)2 * n * ps, copy + (size_t)n * ps, (size_t)n * ps) == 0);
	free(copy);
	vc_dq_destroy(q);
	mem_close(&m);
	fprintf(stderr, "swap: ok\n");
}

/* A submission of 20 times the ring's depth, in one call: producers wait
 * for their own slots' earlier uses, never deadlock. */
static void test_shallow_ring(void)
{
	const uint32_t ps = 4096, n = 640;
	struct vc_dq *q;
	struct vc_dq_config cfg = { .page_size = ps, .depth = 64, .nrings = 1 };
	CHECK_OK(vc_dq_create(dev, &cfg, &q));
	struct mem m;
	mem_open(&m, 2 * n, ps);
	round_trip(q, &m, n, 11);
	round_trip(q, &m, n / 2, 12);
	vc_dq_destroy(q);
	mem_close(&m);
	fprintf(stderr, "shallow ring: ok\n");
}

#define NPROD 8
#define PER 32 /* host pages per producer: [0, 16) sources, [16, 32) results */

struct prod {
	struct vc_dq *q;
	struct mem *m;
	int id, rounds;
	bool poll; /* wait by polling vc_dq_done */
	bool naps; /* sleep between rounds, so idle consumers stop */
};

static void wait_span(const struct prod *p, const struct vc_dq_span *sp)
{
	if (!p->poll) {
		CHECK_OK(vc_dq_wait(p->q, sp));
		return;
	}
	while (!vc_dq_done(p->q, sp))
		sched_yield();
}

static pthread_barrier_t nap_bar; /* NPROD producers that nap */

static void *prod_main(void *arg)
{
	struct prod *p = arg;
	struct mem *m = p->m;
	uint64_t seed = 1000 + (uint64_t)p->id;
	uint32_t h0 = (uint32_t)p->id * PER, g0 = (uint32_t)p->id * (PER / 2);
	for (int round = 0; round < p->rounds; round++) {
		uint32_t n = 1 + (uint32_t)(t_rand(&seed) % (PER / 2));
		uint32_t ring = (uint32_t)(t_rand(&seed) % p->q->nrings);
		unsigned char *src = m->host + (size_t)h0 * m->ps;
		unsigned char *res = src + (size_t)(PER / 2) * m->ps;
		fill(src, (size_t)n * m->ps, seed);
		memset(res, 0, (size_t)n * m->ps);
		struct vc_move mv[PER / 2];
		struct vc_dq_span sp;
		for (uint32_t i = 0; i < n; i++)
			mv[i] = (struct vc_move){ .src = haddr(m, h0 + i), .dst = gaddr(m, g0 + n - 1 - i) };
		CHECK_OK(vc_dq_submit(p->q, ring, mv, n, &sp));
		wait_span(p, &sp);
		for (uint32_t i = 0; i < n; i++)
			mv[i] = (struct vc_move){ .src = gaddr(m, g0 + n - 1 - i), .dst = haddr(m, h0 + PER / 2 + i) };
		CHECK_OK(vc_dq_submit(p->q, vc_dq_home(p->q), mv, n, &sp));
		wait_span(p, &sp);
		CHECK(memcmp(src, res, (size_t)n * m->ps) == 0);
		if (p->naps && t_rand(&seed) % 4 == 0)
			usleep(30 + t_rand(&seed) % 100);
		/* Twice in the run every producer stops together for 5 ms, far
		 * past the idle time, so the servers stop and the next submit
		 * restarts them whatever the machine's load (the random naps
		 * alone rarely line up on 8 producers: 1 start in a CI run). */
		if (p->naps && (round == p->rounds / 3 || round == 2 * p->rounds / 3)) {
			pthread_barrier_wait(&nap_bar);
			usleep(5000);
		}
	}
	return NULL;
}

static atomic_bool churn_stop;

/* Allocates and frees, which pauses the consumers on CUDA. */
static void *churn_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&churn_stop)) {
		void *h;
		uint64_t hd, g;
		CHECK_OK(dev->ops->host_alloc(dev, 8192, &h, &hd));
		CHECK_OK(dev->ops->mem_alloc(dev, 8192, &g));
		dev->ops->mem_free(dev, g);
		dev->ops->host_free(dev, h);
		usleep(500);
	}
	return NULL;
}

static void test_producers(uint32_t idle_us, bool naps, bool churn, int rounds)
{
	struct vc_dq *q;
	struct vc_dq_config cfg = { .page_size = 4096, .idle_us = idle_us, .depth = 256 };
	CHECK_OK(vc_dq_create(dev, &cfg, &q));
	struct mem m;
	mem_open(&m, NPROD * PER, 4096);
	pthread_t tid[NPROD], ct;
	struct prod p[NPROD];
	atomic_store(&churn_stop, false);
	pthread_barrier_init(&nap_bar, NULL, NPROD);
	if (churn)
		CHECK(pthread_create(&ct, NULL, churn_main, NULL) == 0);
	for (int i = 0; i < NPROD; i++) {
		p[i] = (struct prod){ .q = q, .m = &m, .id = i, .rounds = rounds, .poll = i % 3 == 2,
				      .naps = naps };
		CHECK(pthread_create(&tid[i], NULL, prod_main, &p[i]) == 0);
	}
	for (int i = 0; i < NPROD; i++)
		pthread_join(tid[i], NULL);
	atomic_store(&churn_stop, true);
	if (churn)
		pthread_join(ct, NULL);
	struct vc_dq_stats st;
	vc_dq_get_stats(q, &st);
	fprintf(stderr, "producers (idle %u us%s%s): ok, %llu submits, %llu pieces, %llu starts, "
			"%llu stops\n", idle_us, naps ? ", naps" : "", churn ? ", allocations" : "",
		(unsigned long long)st.submits, (unsigned long long)st.pieces,
		(unsigned long long)st.starts, (unsigned long long)st.stops);
	pthread_barrier_destroy(&nap_bar);
	CHECK(st.submits == (uint64_t)NPROD * rounds * 2);
	if (q->ops->stop && naps && !getenv("VC_TEST_QUICK"))
		CHECK(st.starts > 1); /* the consumers did stop and restart */
	vc_dq_destroy(q);
	mem_close(&m);
}

/* Destroy waits for moves still in flight. */
static void test_destroy_in_flight(void)
{
	const uint32_t ps = 4096, n = 512;
	struct vc_dq *q;
	struct vc_dq_config cfg = { .page_size = ps };
	CHECK_OK(vc_dq_create(dev, &cfg, &q));
	struct mem m;
	mem_open(&m, 2 * n, ps);
	fill(m.host, (size_t)n * ps, 5);
	struct vc_move *mv = malloc(n * sizeof *mv);
	for (uint32_t i = 0; i < n; i++)
		mv[i] = (struct vc_move){ .src = haddr(&m, i), .dst = gaddr(&m, i) };
	struct vc_dq_span sp;
	CHECK_OK(vc_dq_submit(q, 0, mv, n, &sp));
	vc_dq_destroy(q);
	CHECK_OK(dev->ops->memcpy_sync(dev, haddr(&m, n), m.gpu, (size_t)n * ps));
	CHECK(memcmp(m.host, m.host + (size_t)n * ps, (size_t)n * ps) == 0);
	free(mv);
	mem_close(&m);
	fprintf(stderr, "destroy in flight: ok\n");
}

static void test_bad_input(void)
{
	struct vc_dq *q;
	struct vc_dq_config bad_ps = { .page_size = 3000 };
	CHECK(vc_dq_create(dev, &bad_ps, &q) == -EINVAL);
	struct vc_dq_config bad_depth = { .page_size = 4096, .depth = 100 };
	CHECK(vc_dq_create(dev, &bad_depth, &q) == -EINVAL);
	struct vc_dq_config many = { .page_size = 4096, .nrings = VC_DQ_MAX_RINGS + 1 };
	CHECK(vc_dq_create(dev, &many, &q) == -EINVAL);
	struct vc_dq_config cfg = { .page_size = 4096 };
	CHECK_OK(vc_dq_create(dev, &cfg, &q));
	struct vc_move mv = { .src = 1ull << 48, .dst = 0 };
	struct vc_dq_span sp;
	CHECK(vc_dq_submit(q, 0, &mv, 1, &sp) == -EINVAL);
	CHECK(strstr(vc_last_error(), "2^48"));
	mv.src = 0;
	CHECK(vc_dq_submit(q, q->nrings, &mv, 1, &sp) == -EINVAL);
	struct vc_dq_stats st;
	vc_dq_get_stats(q, &st);
	CHECK(st.submits == 0 && st.pieces == 0); /* refused calls claimed nothing */
	CHECK_OK(vc_dq_submit(q, 0, &mv, 0, &sp)); /* nothing to do */
	CHECK(sp.n == 0 && vc_dq_done(q, &sp));
	CHECK_OK(vc_dq_wait(q, &sp));
	vc_dq_destroy(q);
	fprintf(stderr, "bad input: ok\n");
}

int main(void)
{
	int r = vc_device_open(t_device_kind(), 0, &dev);
	t_skip_if_absent(r, "test_queue");
	CHECK_OK(r);
	fprintf(stderr, "device: %s\n", dev->desc);
	test_bad_input();
	test_page_sizes();
	test_swap();
	test_shallow_ring();
	int rounds = getenv("VC_TEST_QUICK") ? 50 : 300;
	test_producers(0, false, false, rounds);
	test_producers(20, true, false, rounds);
	test_producers(20, true, true, rounds / 2);
	test_destroy_in_flight();
	vc_device_close(dev);
	fprintf(stderr, "pass\n");
	return 0;
}
