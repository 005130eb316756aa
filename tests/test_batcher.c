/* The batcher: when batches close (size, idle device, timeout, completion
 * of the batch in flight), batch-size statistics, and the data of many
 * threads' moves, on the device named by VC_TEST_DEVICE. Launched batches
 * (VC_MOVE_PATH=batch) first; then the data checks again over the device
 * queue, the engine's default path. */
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "engine/batcher.h"
#include "base/clock.h"
#include "device/device.h"
#include "device/xts.h"
#include "testutil.h"

#define PS 4096
#define NPAGES 4096

static struct vc_device *dev;
static unsigned char *host;  /* NPAGES host pages */
static uint64_t host_dev;    /* their device address */
static uint64_t gpu;         /* NPAGES device pages */
static unsigned char *model; /* what the device pages should hold */

static struct vc_move copy_h2d(uint32_t h, uint32_t g)
{
	return (struct vc_move){ .src = host_dev + (uint64_t)h * PS, .dst = gpu + (uint64_t)g * PS,
				 .op = VC_MOVE_COPY };
}

static void fill_host(uint32_t h, uint64_t seed)
{
	for (int i = 0; i < PS; i += 8) {
		uint64_t v = t_rand(&seed);
		memcpy(host + (size_t)h * PS + i, &v, 8);
	}
}

static void check_gpu(void)
{
	unsigned char *back = malloc((size_t)NPAGES * PS);
	uint64_t back_dev;
	void *pinned;
	CHECK_OK(dev->ops->host_alloc(dev, (size_t)NPAGES * PS, &pinned, &back_dev));
	CHECK_OK(dev->ops->memcpy_sync(dev, back_dev, gpu, (size_t)NPAGES * PS));
	memcpy(back, pinned, (size_t)NPAGES * PS);
	dev->ops->host_free(dev, pinned);
	CHECK(memcmp(back, model, (size_t)NPAGES * PS) == 0);
	free(back);
}

static void size_and_idle(void)
{
	struct vc_batcher *b;
	/* A 30 s timeout: if a lone request waited for it, the test would
	 * blow its time limit instead of passing. */
	CHECK_OK(vc_batcher_create(dev, PS, 4, 30000000, NULL, &b));
	struct vc_batcher_stats st;
	struct vc_ticket t[5];
	for (uint32_t i = 0; i < 4; i++) {
		fill_host(i, i + 1);
		memcpy(model + (size_t)i * PS, host + (size_t)i * PS, PS);
		struct vc_move m = copy_h2d(i, i);
		CHECK_OK(vc_batcher_add(b, &m, &t[i]));
	}
	vc_batcher_get_stats(b, &st);
	CHECK(st.batches == 1 && st.pages == 4); /* closed on size, before any wait */
	CHECK(st.hist[2] == 1);                  /* [4,7] */
	for (int i = 0; i < 4; i++)
		CHECK_OK(vc_batcher_wait(b, &t[i]));

	/* A lone request on an idle device goes at once. */
	uint64_t t0 = vc_now_ns();
	fill_host(4, 99);
	memcpy(model + 4 * PS, host + 4 * PS, PS);
	struct vc_move m = copy_h2d(4, 4);
	CHECK_OK(vc_batcher_add(b, &m, &t[4]));
	vc_batcher_get_stats(b, &st);
	CHECK(st.batches == 1); /* adding alone does not submit */
	CHECK_OK(vc_batcher_wait(b, &t[4]));
	CHECK(vc_now_ns() - t0 < 10000000000ull);
	vc_batcher_get_stats(b, &st);
	CHECK(st.batches == 2 && st.hist[0] == 1);
	vc_batcher_destroy(b);
	check_gpu();
}

static void timeout_closes(void)
{
	struct vc_batcher *b;
	const uint32_t timeout_us = 50000;
	CHECK_OK(vc_batcher_create(dev, PS, 4, timeout_us, NULL, &b));
	struct vc_ticket t[5];
	for (uint32_t i = 0; i < 5; i++) {
		fill_host(10 + i, 10 + i);
		memcpy(model + (size_t)(10 + i) * PS, host + (size_t)(10 + i) * PS, PS);
		struct vc_move m = copy_h2d(10 + i, 10 + i);
		CHECK_OK(vc_batcher_add(b, &m, &t[i]));
	}
	/* Batch 1 (4 moves) is in flight and nobody has reaped it, so the
	 * device counts as busy: the wait on batch 2 must wait for the
	 * timeout, which bounds it from below. */
	uint64_t t0 = vc_now_ns();
	CHECK_OK(vc_batcher_wait(b, &t[4]));
	CHECK(vc_now_ns() - t0 >= (uint64_t)timeout_us * 1000);
	for (int i = 0; i < 4; i++)
		CHECK_OK(vc_batcher_wait(b, &t[i]));
	struct vc_batcher_stats st;
	vc_batcher_get_stats(b, &st);
	CHECK(st.batches == 2 && st.pages == 5);
	vc_batcher_destroy(b);
	check_gpu();
}

struct waiter {
	struct vc_batcher *b;
	struct vc_ticket t;
	int r;
	uint64_t ns;
};

static void *wait_main(void *arg)
{
	struct waiter *w = arg;
	uint64_t t0 = vc_now_ns();
	w->r = vc_batcher_wait(w->b, &w->t);
	w->ns = vc_now_ns() - t0;
	return NULL;
}

/* When the batch in flight is reaped, the filling batch that has a waiter
 * goes at once rather than at its (long) timeout. */
static void completion_submits(void)
{
	struct vc_batcher *b;
	CHECK_OK(vc_batcher_create(dev, PS, 2, 30000000, NULL, &b));
	struct vc_ticket t[3];
	for (uint32_t i = 0; i < 3; i++) {
		fill_host(20 + i, 20 + i);
		memcpy(model + (size_t)(20 + i) * PS, host + (size_t)(20 + i) * PS, PS);
		struct vc_move m = copy_h2d(20 + i, 20 + i);
		CHECK_OK(vc_batcher_add(b, &m, &t[i]));
	}
	struct waiter w = { .b = b, .t = t[2] };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, wait_main, &w) == 0);
	usleep(20000);
	CHECK_OK(vc_batcher_wait(b, &t[0]));
	CHECK_OK(vc_batcher_wait(b, &t[1]));
	pthread_join(th, NULL);
	CHECK_OK(w.r);
	CHECK(w.ns < 10000000000ull);
	vc_batcher_destroy(b);
	check_gpu();
}

struct mover {
	struct vc_batcher *b;
	int id;
	int err;
};

/* Each thread owns the pages p with p % 8 == id: copies host->device,
 * swaps, and device->host round trips, checked against the model. */
static void *mover_main(void *arg)
{
	struct mover *m = arg;
	uint64_t seed = 1234 + (uint64_t)m->id;
	struct vc_ticket t[16];
	static _Thread_local unsigned char old[16][PS]; /* device data a swap must return */
	for (int round = 0; round < 200; round++) {
		int n = 1 + (int)(t_rand(&seed) % 16);
		uint32_t pages[16];
		int swapped[16];
		for (int i = 0; i < n; i++) {
			/* distinct pages within a round */
			pages[i] = (uint32_t)(((uint64_t)(round * 16 + i) * 8 + (uint64_t)m->id) % NPAGES);
			uint32_t p = pages[i];
			struct vc_move mv = copy_h2d(p, p);
			fill_host(p, t_rand(&seed));
			swapped[i] = (int)(t_rand(&seed) % 2);
			if (swapped[i]) {
				memcpy(old[i], model + (size_t)p * PS, PS);
				mv.op = VC_MOVE_SWAP;
			}
			memcpy(model + (size_t)p * PS, host + (size_t)p * PS, PS);
			CHECK_OK(vc_batcher_add(m->b, &mv, &t[i]));
		}
		for (int i = 0; i < n; i++) {
			if (vc_batcher_wait(m->b, &t[i]) < 0)
				m->err = 1;
			else if (swapped[i] && memcmp(host + (size_t)pages[i] * PS, old[i], PS) != 0)
				m->err = 2;
		}
	}
	return NULL;
}

/* One thread adds far more moves than all slots hold before it waits:
 * adders reap the oldest batch themselves instead of waiting for a slot
 * that only their own later waits would free. */
static void add_more_than_slots(void)
{
	struct vc_batcher *b;
	CHECK_OK(vc_batcher_create(dev, PS, 2, 100, NULL, &b));
	enum { N = 100 };
	struct vc_move mv[N];
	struct vc_ticket t[N];
	for (uint32_t i = 0; i < N; i++) {
		fill_host(100 + i, 5000 + i);
		memcpy(model + (size_t)(100 + i) * PS, host + (size_t)(100 + i) * PS, PS);
		mv[i] = copy_h2d(100 + i, 100 + i);
	}
	for (uint32_t i = 0; i < N / 2; i++)
		CHECK_OK(vc_batcher_add(b, &mv[i], &t[i]));
	CHECK_OK(vc_batcher_add_n(b, &mv[N / 2], N / 2, &t[N / 2]));
	CHECK_OK(vc_batcher_wait_n(b, t, N));
	struct vc_batcher_stats st;
	vc_batcher_get_stats(b, &st);
	CHECK(st.batches == N / 2 && st.pages == N);
	vc_batcher_destroy(b);
	check_gpu();
}

/* Queue path: a submission of more than a server round's pieces is spread
 * over rings (every ring when it is large enough), its data lands, and a
 * bad move in a later share fails the add only after the shares before it
 * have landed (nothing left in flight). */
static void queue_spread(void)
{
	struct vc_batcher *b;
	CHECK_OK(vc_batcher_create(dev, PS, 32, 100, NULL, &b));
	CHECK(strcmp(vc_batcher_path(b), "queue") == 0);
	enum { N = 600, BASE = 1000 };
	struct vc_move *mv = calloc(N, sizeof *mv);
	struct vc_ticket *t = calloc(N, sizeof *t);
	for (uint32_t i = 0; i < N; i++) {
		fill_host(BASE + i, 7000 + i);
		memcpy(model + (size_t)(BASE + i) * PS, host + (size_t)(BASE + i) * PS, PS);
		mv[i] = copy_h2d(BASE + i, BASE + i);
	}
	CHECK_OK(vc_batcher_add_n(b, mv, N, t));
	uint32_t rings = 0;
	for (uint32_t i = 0; i < N; i++)
		if (i == 0 || t[i].slot != t[i - 1].slot)
			rings++;
	fprintf(stderr, "queue spread: %u pages over %u rings\n", N, rings);
	CHECK(rings >= 2);
	CHECK_OK(vc_batcher_wait_n(b, t, N));
	check_gpu();

	/* Again with new contents and move 500's destination past what a
	 * descriptor can name: the first 32 pages (share 0) must have landed
	 * when the add returns its error. */
	for (uint32_t i = 0; i < N; i++) {
		fill_host(BASE + i, 9000 + i);
		if (i < 500)
			memcpy(model + (size_t)(BASE + i) * PS, host + (size_t)(BASE + i) * PS, PS);
	}
	mv[500].dst = 1ull << 50;
	CHECK(vc_batcher_add_n(b, mv, N, t) == -EINVAL);
	unsigned char *back;
	uint64_t back_dev;
	CHECK_OK(dev->ops->host_alloc(dev, 32 * PS, (void **)&back, &back_dev));
	CHECK_OK(dev->ops->memcpy_sync(dev, back_dev, gpu + (uint64_t)BASE * PS, 32 * PS));
	CHECK(memcmp(back, model + (size_t)BASE * PS, 32 * PS) == 0);
	dev->ops->host_free(dev, back);
	/* Which later pages landed depends on the share size; move the 500
	 * good ones again, so that the device matches the model whole. */
	CHECK_OK(vc_batcher_add_n(b, mv, 500, t));
	CHECK_OK(vc_batcher_wait_n(b, t, 500));
	vc_batcher_destroy(b);
	check_gpu();
	free(mv);
	free(t);
}

/* Hybrid adds (queue path with a key): a large add's head goes to the
 * rings and its tail to launched batches. Encrypted on the way in, the
 * device pages must hold OpenSSL's ciphertext of each page under its
 * tweak (the emulated device's reference cipher), and decrypted on the way
 * back the plaintext; a bad move anywhere fails the add with nothing
 * submitted. */
static void queue_hybrid(void)
{
	enum { N = 600, BASE = 2000, BACK = 3000 };
	struct vc_xts_key key;
	for (int i = 0; i < VC_XTS_KEY_BYTES; i++)
		key.bytes[i] = (uint8_t)(i * 37 + 11);
	unsigned char probe[PS] = { 0 };
	uint64_t tw0 = 1;
	if (vc_emu_xts_pages(&key, probe, &tw0, 1, PS, 1) == -VC_ENOTBUILT) {
		fprintf(stderr, "queue hybrid: skipped (no OpenSSL in this build for the reference)\n");
		return;
	}
	setenv("VC_DQ_LAUNCH_MIN", "64", 1);
	setenv("VC_DQ_LAUNCH_QPCT", "25", 1);
	struct vc_batcher *b;
	CHECK_OK(vc_batcher_create(dev, PS, 32, 100, &key, &b));
	unsetenv("VC_DQ_LAUNCH_MIN");
	unsetenv("VC_DQ_LAUNCH_QPCT");
	CHECK(strcmp(vc_batcher_path(b), "queue") == 0);
	struct vc_move *mv = calloc(N, sizeof *mv);
	struct vc_ticket *t = calloc(N, sizeof *t);
	unsigned char *plain = malloc((size_t)N * PS);
	for (uint32_t i = 0; i < N; i++) {
		fill_host(BASE + i, 5000 + i);
		memcpy(plain + (size_t)i * PS, host + (size_t)(BASE + i) * PS, PS);
		unsigned char *mp = model + (size_t)(BASE + i) * PS;
		memcpy(mp, plain + (size_t)i * PS, PS);
		const uint64_t tw = 77000 + 8ull * i;
		CHECK_OK(vc_emu_xts_pages(&key, mp, &tw, 1, PS, 1));
		mv[i] = copy_h2d(BASE + i, BASE + i);
		mv[i].op |= VC_MOVE_ENCRYPT;
		mv[i].tweak = tw;
	}
	struct vc_batcher_stats st0, st1;
	vc_batcher_get_stats(b, &st0);
	CHECK_OK(vc_batcher_add_n(b, mv, N, t));
	uint32_t queued = 0;
	for (uint32_t i = 0; i < N; i++)
		queued += (t[i].slot & VC_TICKET_QUEUE) != 0;
	fprintf(stderr, "queue hybrid: %u of %u pages on the rings\n", queued, N);
	CHECK(queued == N * 25 / 100);
	CHECK_OK(vc_batcher_wait_n(b, t, N));
	check_gpu();
	vc_batcher_get_stats(b, &st1);
	CHECK(st1.pages - st0.pages == N);

	/* Back, decrypting, into other host pages; waited for by polling. */
	for (uint32_t i = 0; i < N; i++)
		mv[i] = (struct vc_move){ .src = gpu + (uint64_t)(BASE + i) * PS,
					  .dst = host_dev + (uint64_t)(BACK + i) * PS,
					  .op = VC_MOVE_COPY | VC_MOVE_DECRYPT,
					  .tweak = 77000 + 8ull * i };
	CHECK_OK(vc_batcher_add_n(b, mv, N, t));
	int err = 0;
	while (!vc_batcher_poll_n(b, t, N, true, &err))
		;
	CHECK_OK(err);
	CHECK(memcmp(host + (size_t)BACK * PS, plain, (size_t)N * PS) == 0);

	/* A bad move in the launched part: the add fails, nothing moved. */
	vc_batcher_get_stats(b, &st0);
	mv[500].dst = 1ull << 50;
	CHECK(vc_batcher_add_n(b, mv, N, t) == -EINVAL);
	vc_batcher_get_stats(b, &st1);
	CHECK(st1.pages == st0.pages && st1.batches == st0.batches);
	vc_batcher_destroy(b);
	check_gpu();
	free(plain);
	free(mv);
	free(t);
}

static void many_threads(void)
{
	struct vc_batcher *b;
	CHECK_OK(vc_batcher_create(dev, PS, 32, 100, NULL, &b));
	pthread_t th[8];
	struct mover mv[8];
	for (int i = 0; i < 8; i++) {
		mv[i] = (struct mover){ .b = b, .id = i };
		CHECK(pthread_create(&th[i], NULL, mover_main, &mv[i]) == 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		CHECK(!mv[i].err);
	}
	struct vc_batcher_stats st;
	vc_batcher_get_stats(b, &st);
	fprintf(stderr, "many threads (%s): %llu batches, %llu pages\n", vc_batcher_path(b),
		(unsigned long long)st.batches, (unsigned long long)st.pages);
	CHECK(strcmp(vc_batcher_path(b), getenv("VC_MOVE_PATH")) == 0);
	vc_batcher_destroy(b);
	check_gpu();
}

int main(void)
{
	setenv("VC_MOVE_PATH", "batch", 1);
	int r = vc_device_open(t_device_kind(), 0, &dev);
	t_skip_if_absent(r, "batcher test on CUDA");
	CHECK_OK(r);
	void *h;
	CHECK_OK(dev->ops->host_alloc(dev, (size_t)NPAGES * PS, &h, &host_dev));
	host = h;
	CHECK_OK(dev->ops->mem_alloc(dev, (size_t)NPAGES * PS, &gpu));
	model = calloc(NPAGES, PS);
	/* The device pages start as the model says: zeros, written explicitly. */
	memset(host, 0, (size_t)NPAGES * PS);
	CHECK_OK(dev->ops->memcpy_sync(dev, gpu, host_dev, (size_t)NPAGES * PS));

	size_and_idle();
	timeout_closes();
	completion_submits();
	add_more_than_slots();
	many_threads();
	setenv("VC_MOVE_PATH", "queue", 1);
	queue_spread();
	queue_hybrid();
	many_threads();

	dev->ops->mem_free(dev, gpu);
	dev->ops->host_free(dev, host);
	vc_device_close(dev);
	free(model);
	fprintf(stderr, "batcher: ok\n");
	return 0;
}
