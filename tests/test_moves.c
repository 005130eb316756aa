/* Tier moves (engine/moves.c): demotions run ahead of the misses. A cache
 * whose host tier fills keeps c->host_reserve free host slots after every
 * access (eng_demote_ahead), so the misses that follow take them without
 * the engine lock; every byte reads back right, with dedup off and on,
 * from one thread and from four; VC_HOST_RESERVE=0 turns it off (the old
 * behaviour: the tier runs out, then one batch frees 32); a cache without
 * a GPU tier keeps none. On the device named by VC_TEST_DEVICE. */
#include <pthread.h>
#include <unistd.h>

#include "testutil.h"

#define PS 4096u
#define HOST_PAGES 1024u /* reserve: min(4 demoters x 32, 1024 / 16) = 64 */
#define FILE_PAGES 3000u
#define RESERVE 64u

static int kind;
static char path[256];
static unsigned char *want; /* the file's bytes */

static vc_cache *open_cache(int dedup, uint64_t gpu_pages)
{
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.device = kind;
	cfg.host_bytes = (uint64_t)HOST_PAGES * PS;
	cfg.gpu_bytes = gpu_pages * PS;
	cfg.dedup = dedup;
	return t_open(&cfg, "moves test");
}

static uint64_t host_free(vc_cache *c)
{
	struct vc_stats s = { .size = sizeof s };
	CHECK_OK(vc_get_stats(c, &s));
	return s.pages_capacity[VC_TIER_HOST] - s.pages_cached[VC_TIER_HOST];
}

static void read_check(vc_cache *c, uint64_t pno)
{
	unsigned char got[PS];
	CHECK(vc_read(c, got, PS, pno * PS) == PS);
	if (memcmp(got, want + pno * PS, PS) != 0) {
		fprintf(stderr, "page %llu read back wrong\n", (unsigned long long)pno);
		exit(1);
	}
}

/* One reader through the file, twice (the second pass from the GPU tier,
 * or the store without one): after every read at least `reserve` host
 * slots are free once the tier has filled. Returns the fewest seen. */
static uint64_t one_reader(int dedup, uint64_t gpu_pages, uint64_t reserve)
{
	vc_cache *c = open_cache(dedup, gpu_pages);
	uint64_t least = UINT64_MAX;
	for (int pass = 0; pass < 2; pass++)
		for (uint64_t p = 0; p < FILE_PAGES; p++) {
			read_check(c, p);
			uint64_t f = host_free(c);
			least = f < least ? f : least;
			if (reserve && f < reserve) {
				fprintf(stderr, "pass %d page %llu: %llu host slots free, reserve %llu\n",
					pass, (unsigned long long)p, (unsigned long long)f,
					(unsigned long long)reserve);
				exit(1);
			}
		}
	struct vc_stats s = { .size = sizeof s };
	CHECK_OK(vc_get_stats(c, &s));
	CHECK(s.evictions[VC_TIER_HOST] >= FILE_PAGES - HOST_PAGES);
	if (gpu_pages)
		CHECK(s.hits[VC_TIER_GPU] > 0);
	vc_close(c);
	return least;
}

struct stripe {
	vc_cache *c;
	uint64_t first, n;
};

static void *stripe_main(void *arg)
{
	struct stripe *s = arg;
	for (int pass = 0; pass < 2; pass++)
		for (uint64_t i = 0; i < s->n; i++)
			read_check(s->c, s->first + i);
	return NULL;
}

/* Four readers, each through its own stripe twice: every byte right. */
static void four_readers(int dedup)
{
	vc_cache *c = open_cache(dedup, 4096);
	pthread_t th[4];
	struct stripe st[4];
	for (int t = 0; t < 4; t++) {
		st[t] = (struct stripe){ c, (uint64_t)t * (FILE_PAGES / 4), FILE_PAGES / 4 };
		CHECK(pthread_create(&th[t], NULL, stripe_main, &st[t]) == 0);
	}
	for (int t = 0; t < 4; t++)
		CHECK(pthread_join(th[t], NULL) == 0);
	for (uint64_t p = 0; p < FILE_PAGES; p++)
		read_check(c, p);
	vc_close(c);
}

int main(void)
{
	kind = t_device_kind();
	t_make_file(path, sizeof path, (uint64_t)FILE_PAGES * PS, 11);
	want = t_read_file(path, (uint64_t)FILE_PAGES * PS);

	for (int dedup = 0; dedup < 2; dedup++) {
		const int dd = dedup ? VC_DEDUP_ON : VC_DEDUP_OFF;
		uint64_t least = one_reader(dd, 4096, RESERVE);
		fprintf(stderr, "dedup %s: at least %llu host slots free after each read\n",
			dedup ? "on" : "off", (unsigned long long)least);
		four_readers(dd);
	}
	/* Off: the tier runs out before a batch frees slots. */
	setenv("VC_HOST_RESERVE", "0", 1);
	uint64_t least = one_reader(VC_DEDUP_OFF, 4096, 0);
	CHECK(least < RESERVE);
	unsetenv("VC_HOST_RESERVE");
	/* No GPU tier: no reserve (victims are dropped one at a time). */
	least = one_reader(VC_DEDUP_OFF, 0, 0);
	CHECK(least < RESERVE);

	free(want);
	unlink(path);
	fprintf(stderr, "moves: ok\n");
	return 0;
}
