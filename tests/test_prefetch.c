/* A GPU prefetch's workers (range.c, VC_PREFETCHERS): over a store of the
 * test's own (vc_volume_open_store), with 1, 2 and 4 workers, plain and
 * with dedup over pages drawn from a small pool:
 * - every page is read from the store exactly once and lands in the GPU
 *   tier; every byte reads back right (no chunk skipped or taken twice);
 * - with 2 or more workers a second chunk's store reads start while the
 *   first chunk's first read is still running (the store holds that read
 *   until another arrives: with serial rounds none does, and the run fails
 *   after its wait);
 * - a store read that fails in the middle of the range is the call's
 *   result, with the message of the thread that met it (naming its
 *   offset; with the first chunk held that is mostly not the caller's),
 *   and loses nothing: the failed page is not cached and reads -EIO while
 *   the store fails, then its own bytes. */
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define POOL 16u
#define HOLD_S 20 /* the held read's wait for a second one */

struct store {
	unsigned char *data;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t ps;
	uint32_t *reads;        /* store reads per page */
	uint64_t fail_page;     /* its reads fail (-EIO); UINT64_MAX: none */
	bool hold;              /* the next read waits for a second one */
	bool overlapped;        /* a held read saw a second one start */
	uint64_t started; /* reads begun */
};

static int st_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	struct store *s = ctx;
	pthread_mutex_lock(&s->mu);
	for (uint64_t p = off / s->ps; p * s->ps < off + len; p++)
		if (p == s->fail_page) {
			pthread_mutex_unlock(&s->mu);
			return -EIO;
		}
	for (uint64_t p = off / s->ps; p * s->ps < off + len; p++)
		s->reads[p]++;
	const uint64_t me = ++s->started;
	pthread_cond_broadcast(&s->cv);
	if (s->hold) {
		s->hold = false;
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += HOLD_S;
		while (s->started == me && pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0)
			;
		s->overlapped = s->started > me;
	}
	pthread_mutex_unlock(&s->mu);
	memcpy(buf, s->data + off, len);
	return 0;
}

static int st_write(void *ctx, const void *buf, size_t len, uint64_t off)
{
	memcpy(((struct store *)ctx)->data + off, buf, len);
	return 0;
}

static int st_sync(void *ctx, uint64_t off, uint64_t len)
{
	(void)ctx, (void)off, (void)len;
	return 0;
}

/* A run's pages: their size, the batch (candidates a worker takes), and
 * how many (a partial batch at the end). */
struct shape {
	uint32_t ps, chunk, n;
};

static void run(int kind, uint32_t workers, bool dedup, struct shape sh)
{
	const uint32_t PS = sh.ps, CHUNK = sh.chunk, NPAGES = sh.n;
	char base[256], what[96];
	t_make_file(base, sizeof base, 16 * PS, 5);
	snprintf(what, sizeof what, "prefetch workers %u%s, pages of %u", workers, dedup ? " dedup" : "",
		 PS);
	struct store s = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
			   .fail_page = UINT64_MAX, .ps = PS, .reads = calloc(NPAGES, sizeof *s.reads) };
	CHECK(s.reads != NULL);
	s.data = malloc((size_t)NPAGES * PS);
	CHECK(s.data != NULL);
	uint64_t seed = 0x9e37 + workers + 100 * dedup;
	for (size_t i = 0; i < (size_t)NPAGES * PS; i += 8) {
		uint64_t v = t_rand(&seed);
		memcpy(s.data + i, &v, 8);
	}
	if (dedup) /* pages from a pool: most blocks repeat */
		for (uint32_t p = POOL; p < NPAGES; p++)
			memcpy(s.data + (size_t)p * PS, s.data + (size_t)(p * 7 % POOL) * PS, PS);

	char n[8];
	snprintf(n, sizeof n, "%u", workers);
	setenv("VC_PREFETCHERS", n, 1);
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = base;
	cfg.device = kind;
	cfg.host_bytes = 32 * PS;
	cfg.gpu_bytes = 2 * NPAGES * PS;
	cfg.page_size = PS;
	cfg.batch_pages = CHUNK;
	cfg.dedup = dedup ? VC_DEDUP_ON : VC_DEDUP_OFF;
	vc_cache *c = t_open(&cfg, "prefetch test on CUDA");
	unsetenv("VC_PREFETCHERS");
	const struct vc_store ops = { .size = sizeof ops, .version = VC_STORE_VERSION, .ctx = &s,
				      .bytes = (uint64_t)NPAGES * PS, .read = st_read,
				      .write = st_write, .sync = st_sync };
	vc_volume *v;
	CHECK_OK(vc_volume_open_store(c, &ops, 0, &v));

	/* A failure in the middle: its message, nothing cached wrong. */
	/* Past the first chunk; each run another (a stale message names another). */
	const uint64_t bad = (CHUNK * (20 + workers + 5 * dedup) + 3) % NPAGES;
	s.fail_page = bad;
	s.hold = workers > 1; /* the first chunk waits: another worker meets the failure */
	CHECK(vc_volume_prefetch(v, 0, (uint64_t)NPAGES * PS, VC_TIER_GPU) == -EIO);
	char at[32];
	snprintf(at, sizeof at, "at %llu", (unsigned long long)(bad * PS));
	if (!strstr(vc_last_error(), at) || !strstr(vc_last_error(), strerror(EIO))) {
		fprintf(stderr, "%s: message '%s' lacks '%s'\n", what, vc_last_error(), at);
		exit(1);
	}
	unsigned char *got = malloc(PS * CHUNK);
	CHECK(got != NULL);
	CHECK(vc_volume_read(v, got, PS, bad * PS) == -EIO);
	s.fail_page = UINT64_MAX;
	CHECK(vc_volume_read(v, got, PS, bad * PS) == PS);
	CHECK(memcmp(got, s.data + bad * PS, PS) == 0);

	/* From cold: each page read once, all of them in the GPU tier. */
	CHECK_OK(vc_volume_drop(v, 0, (uint64_t)NPAGES * PS, 0));
	memset(s.reads, 0, NPAGES * sizeof *s.reads);
	s.hold = workers > 1;
	CHECK_OK(vc_volume_prefetch(v, 0, (uint64_t)NPAGES * PS, VC_TIER_GPU));
	for (uint32_t p = 0; p < NPAGES; p++)
		if (s.reads[p] != 1) {
			fprintf(stderr, "%s: page %u read %u times\n", what, p, s.reads[p]);
			exit(1);
		}
	if (workers > 1 && !s.overlapped) {
		fprintf(stderr, "%s: no second store read began while the first waited %d s\n",
			what, HOLD_S);
		exit(1);
	}
	struct vc_stats st = { .size = sizeof st };
	CHECK_OK(vc_get_stats(c, &st));
	CHECK(st.pages_cached[VC_TIER_GPU] == NPAGES && st.pages_cached[VC_TIER_HOST] == 0);
	if (dedup)
		CHECK(st.dedup_hits > 0 && st.dedup_blocks < NPAGES && st.dedup_collisions == 0);
	for (uint32_t p = 0; p < NPAGES; p += CHUNK) {
		const uint32_t k = NPAGES - p < CHUNK ? NPAGES - p : CHUNK;
		CHECK(vc_volume_read(v, got, (size_t)k * PS, (uint64_t)p * PS) == (ssize_t)k * PS);
		CHECK(memcmp(got, s.data + (size_t)p * PS, (size_t)k * PS) == 0);
	}
	for (uint32_t p = 0; p < NPAGES; p++)
		CHECK(s.reads[p] == 1); /* the reads above were GPU hits */
	fprintf(stderr, "%s: %s: %u pages, %llu GPU blocks, ok\n", vc_device_name(c), what, NPAGES,
		(unsigned long long)st.dedup_blocks);

	CHECK_OK(vc_volume_close(v));
	CHECK_OK(vc_close(c));
	free(got);
	free(s.data);
	free(s.reads);
	unlink(base);
}

int main(void)
{
	const int kind = t_device_kind();
	const uint32_t workers[] = { 1, 2, 4 };
	const struct shape small = { 4096, 8, 8 * 48 + 5 };
	for (int d = 0; d < 2; d++)
		for (size_t i = 0; i < sizeof workers / sizeof *workers; i++)
			run(kind, workers[i], d, small);
	/* 4 batches of 32 MiB pass STAGE_BULK_BYTES: 4 workers share 2
	 * batches of staging pages. */
	run(kind, 4, false, (struct shape){ 2u << 20, 16, 16 * 3 + 5 });
	fprintf(stderr, "prefetch: ok\n");
	return 0;
}
