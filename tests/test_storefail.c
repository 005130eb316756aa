/* A store that fails at its Nth write, for every N from 0 to 64 (OCF's
 * surprise-shutdown pattern): write-through and write-back, with and
 * without a GPU tier, more data written than the tiers hold.
 *
 * Then the GPU tier's layers and parts (dedup, XTS with GMAC, dirty pages
 * written back on their way down, two parts) in write-back, every fourth
 * N. The store is the test's own (vc_volume_open_store over memory): its
 * first N writes succeed, every later one fails with the run's error
 * (ENOSPC, EIO, EDQUOT, EROFS in turn), until the test heals it. One
 * thread writes single pages (whole and partial, some twice) over the
 * first 160 pages; the tiers hold 48. Another reads the 96 pages nobody
 * writes, throughout. Then:
 *   - every write succeeded or failed with the store's error, never
 *     another code and never a hang (an alarm ends a stuck run);
 *   - every read of the clean pages succeeded with the store's bytes;
 *   - the dirty pages never passed vc_stats.dirty_limit;
 *   - every page reads back what was acknowledged (the model), while the
 *     store still refuses: acknowledged writes stay in the cache;
 *   - write-back: a flush fails with the store's error while it refuses,
 *     and vc_volume_dirty_next covers every acknowledged page the store
 *     lacks;
 *   - healed, the flush succeeds, new writes succeed, and the store holds
 *     exactly the model.
 * Runs on VC_TEST_DEVICE.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define PS 4096u
#define PAGES 256u  /* the store */
#define WPAGES 160u /* written: more than the tiers' 16 + 32 */
#define NMAX 64u
#define WRITES 320u
#define ALARM_S 60u /* a run takes well under a second */

struct store {
	unsigned char *data;
	pthread_mutex_t mu;
	uint64_t writes; /* that succeeded */
	uint64_t fail_at; /* writes after this many fail */
	int err;          /* with this */
};

static int st_read(void *ctx, void *buf, size_t len, uint64_t off)
{
	struct store *s = ctx;
	pthread_mutex_lock(&s->mu);
	memcpy(buf, s->data + off, len);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static int st_write(void *ctx, const void *buf, size_t len, uint64_t off)
{
	struct store *s = ctx;
	pthread_mutex_lock(&s->mu);
	int r = 0;
	if (s->writes >= s->fail_at) {
		r = -s->err;
	} else {
		memcpy(s->data + off, buf, len);
		s->writes++;
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

static int st_sync(void *ctx, uint64_t off, uint64_t len)
{
	(void)ctx;
	(void)off;
	(void)len;
	return 0;
}

/* Whether the store holds want at [off, off + len), read under its lock:
 * the background write-back may be writing meanwhile (a page a flush
 * wrote too, the same bytes). */
static bool store_holds(struct store *s, const unsigned char *want, uint64_t off, size_t len)
{
	pthread_mutex_lock(&s->mu);
	bool same = memcmp(s->data + off, want, len) == 0;
	pthread_mutex_unlock(&s->mu);
	return same;
}

static void heal(struct store *s)
{
	pthread_mutex_lock(&s->mu);
	s->fail_at = UINT64_MAX;
	pthread_mutex_unlock(&s->mu);
}

static unsigned char orig_byte(uint64_t off)
{
	return (unsigned char)(off * 131 + (off >> 12) * 7 + 1);
}

struct reader {
	vc_volume *v;
	atomic_bool stop;
	uint64_t reads;
};

/* Reads the pages nobody writes, at random, until told to stop. */
static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	unsigned char buf[2 * PS];
	uint64_t seed = 5;
	while (!atomic_load(&rd->stop) || rd->reads < 64) {
		uint64_t pg = WPAGES + t_rand(&seed) % (PAGES - WPAGES - 1);
		uint64_t off = pg * PS + t_rand(&seed) % PS, len = 1 + t_rand(&seed) % PS;
		ssize_t r = vc_volume_read(rd->v, buf, len, off);
		if (r != (ssize_t)len)
			fprintf(stderr, "read of %llu bytes at %llu: %zd (%s)\n", (unsigned long long)len,
				(unsigned long long)off, r, vc_last_error());
		CHECK(r == (ssize_t)len);
		for (uint64_t k = 0; k < len; k++)
			CHECK(buf[k] == orig_byte(off + k));
		rd->reads++;
		usleep(20); /* a reader among the writes, not a spin beside them */
	}
	return NULL;
}

static uint64_t dirty_now(vc_cache *c, uint64_t *limit)
{
	struct vc_stats st = { .size = sizeof st };
	CHECK_OK(vc_get_stats(c, &st));
	*limit = st.dirty_limit;
	return st.dirty_pages;
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "test_storefail: a run hung\n";
	(void)!write(2, m, sizeof m - 1);
	_exit(1);
}

/* A configuration: the four of the issue, N = 0..64, and the GPU tier's
 * layers and parts, every fourth N. */
struct mode {
	const char *name;
	bool wb, gpu;
	int dedup, encrypt, gpu_dirty;
	const char *gpus;
	unsigned step;
};

static const struct mode modes[] = {
	{ "write-through, host tier only", false, false, 0, 0, 0, NULL, 1 },
	{ "write-back, host tier only", true, false, 0, 0, 0, NULL, 1 },
	{ "write-through, GPU tier", false, true, 0, 0, 0, NULL, 1 },
	{ "write-back, GPU tier", true, true, 0, 0, 0, NULL, 1 },
	{ "write-back, GPU tier, dedup", true, true, VC_DEDUP_ON, 0, 0, NULL, 4 },
	{ "write-back, GPU tier, XTS+GMAC", true, true, 0, VC_ENCRYPT_XTS_GMAC, 0, NULL, 4 },
	{ "write-back, GPU tier, dirty pages clean down", true, true, 0, 0, VC_GPU_DIRTY_CLEAN,
	  NULL, 4 },
	{ "write-back, GPU tier in two parts", true, true, 0, 0, 0, "0,0", 4 },
};

/* One run: the store fails from write n on. Returns the writes refused. */
static unsigned run(int kind, const char *path0, const struct mode *m, uint64_t n, int err)
{
	const bool wb = m->wb, gpu = m->gpu;
	alarm(ALARM_S);
	struct store s = { .fail_at = n, .err = err };
	pthread_mutex_init(&s.mu, NULL);
	s.data = malloc(PAGES * PS);
	CHECK(s.data);
	for (uint64_t o = 0; o < PAGES * PS; o++)
		s.data[o] = orig_byte(o);
	unsigned char *model = malloc(PAGES * PS);
	CHECK(model);
	memcpy(model, s.data, PAGES * PS);

	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path0;
	cfg.device = kind;
	cfg.write_mode = wb ? VC_WRITE_BACK : VC_WRITE_THROUGH;
	cfg.host_bytes = 16 * PS;
	cfg.gpu_bytes = gpu ? 32 * PS : 0;
	cfg.batch_pages = 8;
	cfg.dedup = m->dedup;
	cfg.encrypt = m->encrypt;
	cfg.gpu_dirty = m->gpu_dirty;
	cfg.gpus = m->gpus;
	vc_cache *c = t_open(&cfg, "store-failure test");
	struct vc_store st = { .size = sizeof st, .version = VC_STORE_VERSION, .ctx = &s,
			       .bytes = PAGES * PS, .read = st_read, .write = st_write,
			       .sync = st_sync };
	vc_volume *v;
	CHECK_OK(vc_volume_open_store(c, &st, 0, &v));

	struct reader rd = { .v = v };
	pthread_t th;
	CHECK(pthread_create(&th, NULL, reader_main, &rd) == 0);

	unsigned char buf[PS];
	uint64_t seed = n * 977 + (uint64_t)wb * 3 + gpu, limit = 0;
	unsigned refused = 0;
	for (unsigned i = 0; i < WRITES; i++) {
		uint64_t pg = i < WPAGES ? i : t_rand(&seed) % WPAGES; /* each page, then some again */
		uint32_t in = t_rand(&seed) % 3 == 0 ? (uint32_t)(t_rand(&seed) % PS) : 0;
		uint32_t len = in ? 1 + (uint32_t)(t_rand(&seed) % (PS - in)) : PS;
		for (uint32_t k = 0; k < len; k++)
			buf[k] = (unsigned char)t_rand(&seed);
		ssize_t r = vc_volume_write(v, buf, len, pg * PS + in);
		if (r == (ssize_t)len) {
			memcpy(model + pg * PS + in, buf, len);
		} else {
			if (r != -err)
				fprintf(stderr, "write %u: %zd, not -%d (%s)\n", i, r, err, vc_last_error());
			CHECK(r == -err);
			refused++;
		}
		CHECK(dirty_now(c, &limit) <= limit);
	}
	/* Acknowledged bytes read back while the store still refuses. */
	for (uint64_t pg = 0; pg < PAGES; pg++) {
		CHECK(vc_volume_read(v, buf, PS, pg * PS) == PS);
		CHECK(memcmp(buf, model + pg * PS, PS) == 0);
	}
	if (wb && refused) {
		CHECK(vc_volume_flush(v) == -err);
		/* What the store lacks lies in the runs the cache reports. */
		for (uint64_t pg = 0; pg < WPAGES; pg++) {
			if (store_holds(&s, model + pg * PS, pg * PS, PS))
				continue;
			uint64_t start, rlen;
			CHECK(vc_volume_dirty_next(v, pg * PS, &start, &rlen) == 1);
			CHECK(start == pg * PS);
		}
	}
	atomic_store(&rd.stop, true);
	CHECK(pthread_join(th, NULL) == 0);

	heal(&s);
	CHECK_OK(vc_volume_flush(v));
	for (uint64_t pg = 0; pg < 8; pg++) { /* writes work again */
		memset(buf, (int)(pg + n), PS);
		CHECK(vc_volume_write(v, buf, PS, pg * PS) == PS);
		memcpy(model + pg * PS, buf, PS);
	}
	CHECK_OK(vc_volume_flush(v));
	CHECK(store_holds(&s, model, 0, PAGES * PS));
	CHECK_OK(vc_volume_close(v));
	CHECK_OK(vc_close(c));
	free(model);
	free(s.data);
	pthread_mutex_destroy(&s.mu);
	return refused;
}

static char path0[256];

static void unlink_path0(void)
{
	unlink(path0);
}

/* Runs modes [from, to): every N of each, the errors in turn. */
static void run_modes(int kind, size_t from, size_t to)
{
	static const int errs[] = { ENOSPC, EIO, EDQUOT, EROFS };
	for (size_t m = from; m < to; m++) {
		unsigned refused = 0;
		for (uint64_t n = 0; n <= NMAX; n += modes[m].step)
			refused += run(kind, path0, &modes[m], n, errs[n % 4]);
		fprintf(stderr, "%s: N = 0..%u by %u, %u writes refused\n", modes[m].name, NMAX,
			modes[m].step, refused);
		CHECK(refused > 0);
	}
}

static void part_wt_host(int kind, int ops) { (void)ops; run_modes(kind, 0, 1); }
static void part_wb_host(int kind, int ops) { (void)ops; run_modes(kind, 1, 2); }
static void part_wt_gpu(int kind, int ops) { (void)ops; run_modes(kind, 2, 3); }
static void part_wb_gpu(int kind, int ops) { (void)ops; run_modes(kind, 3, 4); }
static void part_layers(int kind, int ops)
{
	(void)ops;
	run_modes(kind, 4, sizeof modes / sizeof modes[0]);
}

/* Arguments: the parts to run (all by default), a process each under
 * ctest (tests/CMakeLists.txt). */
static const struct t_part parts[] = {
	{ "wt_host", part_wt_host, false }, { "wb_host", part_wb_host, false },
	{ "wt_gpu", part_wt_gpu, false },   { "wb_gpu", part_wb_gpu, false },
	{ "layers", part_layers, false },
};

int main(int argc, char **argv)
{
	t_make_file(path0, sizeof path0, 16 * PS, 1); /* volume 0: unused */
	atexit(unlink_path0); /* a skip exits from t_open */
	signal(SIGALRM, on_alarm);
	return t_parts_main(argc, argv, parts, sizeof parts / sizeof parts[0], 0, "storefail");
}
