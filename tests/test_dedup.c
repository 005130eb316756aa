/* Block deduplication (vc_config.dedup), seen from outside.
 *
 * - Sharing: a file whose pages repeat a few contents, read through a host
 *   tier too small for it, so every page goes down to the GPU tier: reads
 *   return the file's bytes, and the GPU tier stores far fewer blocks than
 *   its pages use (dedup_hits, dedup_factor > 1), no collision.
 * - Collisions: the test hook makes every fingerprint equal
 *   (eng_debug_dedup_collide), so every block going down matches a stored
 *   one and only the byte compare keeps unequal blocks apart: every byte
 *   must still read back right, and the collision counter must count.
 * - Copy on write: after sharing, writes to some pages (partial and whole)
 *   change only those pages; the pages that shared their blocks keep their
 *   bytes.
 * - Concurrency: one thread reads the file in order (its misses demote
 *   host victims in batches, whose merges run unlocked), two read single
 *   pages at random, one rewrites its own pages (an eighth of the file)
 *   with bytes of other pages or random ones and reads them back; every
 *   read checked, then the whole file and, after a flush, the store
 *   (meant to run under TSan too: scripts/test's build-tsan).
 * - Capacity: pages from a small pool, prefetched into a GPU tier a
 *   quarter of the file: all held, exactly the distinct blocks stored, no
 *   duplicate ever appended (capacity()).
 * - Trips: unique pages go down the direct trip (into fresh slots, looked
 *   up after), repeated pages the staged one, and a volume switches
 *   between them as its share rate changes (trips()).
 * - Swap: with gpu_hits SWAP, pages that came up unwritten go back down
 *   by reference to their stored blocks, unique ones to blocks their notes
 *   kept; pages written while up do not (swap_back()); kept blocks freed
 *   by a shrink's claims while their pages are up (swap_kept_freed()).
 * - The known trip: at degree 1 the misses' pages go down with the
 *   fingerprints noted as they were loaded (run(), concurrent()), the
 *   collision hook included (its lookups under dd.mu alone: the caller's
 *   hold classifies only).
 * - Adaptive: a volume of unique pages switches off, one of repeated pages
 *   stays on, the sampled estimate near the data's factor.
 * - Hashes: the lanes hash (the default, computed in the moves),
 *   MurmurHash3 and MD5 (device jobs after the move).
 * - Refusals: a bad degree, a block below 512 B, a max factor above 64;
 *   and a dedup tier now shrinks and grows (test_gpusize has the cases).
 * Each with encryption off, XTS, and XTS with GMAC (the host-side fallback
 * of the fingerprints and compares); degrees 1, 4 and 8.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>

#include "engine/debug.h"
#include "testutil.h"

#define PS 4096u
#define PAGES 512u
#define POOL 3u

static char path[256];
static unsigned char *shadow;

/* Page i: one of POOL contents, or (every fifth) its own random bytes. */
static void make_file(uint64_t seed)
{
	t_make_file(path, sizeof path, (uint64_t)PAGES * PS, seed);
	shadow = t_read_file(path, (uint64_t)PAGES * PS);
	unsigned char pool[POOL][PS];
	for (unsigned k = 0; k < POOL; k++)
		for (unsigned b = 0; b < PS; b++)
			pool[k][b] = (unsigned char)t_rand(&seed);
	for (unsigned i = 0; i < PAGES; i++)
		if (i % 5 != 4)
			memcpy(shadow + (uint64_t)i * PS, pool[i % POOL], PS);
	FILE *f = fopen(path, "r+b");
	CHECK(f && fwrite(shadow, 1, (size_t)PAGES * PS, f) == (size_t)PAGES * PS);
	fclose(f);
}

/* The tests' configuration: a host tier of 32 pages, a GPU tier of a
 * quarter of the file's pages; `swap`: GRAM's swap mode and a GPU tier of
 * swap pages (PAGES: every distinct block, with room). */
static vc_cache *open_cache_x(int kind, int encrypt, uint32_t degree, int write_mode, int mode,
			      uint32_t swap)
{
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.device = kind;
	cfg.page_size = PS;
	cfg.host_bytes = 32 * PS;
	cfg.gpu_bytes = 128 * PS; /* a quarter of the file without sharing */
	cfg.seg_bytes = 8 * PS;
	cfg.write_mode = write_mode;
	cfg.encrypt = encrypt;
	cfg.dedup = mode;
	cfg.dedup_degree = degree;
	if (swap) {
		cfg.gpu_bytes = (uint64_t)swap * PS;
		cfg.gpu_hits = VC_GPU_HITS_SWAP;
	}
	vc_cache *c = NULL;
	int e = vc_open(&cfg, &c);
	if (e == -VC_ENOTBUILT) {
		fprintf(stderr, "SKIP: %s\n", vc_last_error());
		exit(T_SKIP);
	}
	t_skip_if_absent(e, "dedup test");
	CHECK_OK(e);
	return c;
}

static vc_cache *open_cache_mode(int kind, int encrypt, uint32_t degree, int write_mode,
				 int mode)
{
	return open_cache_x(kind, encrypt, degree, write_mode, mode, 0);
}

static vc_cache *open_cache(int kind, int encrypt, uint32_t degree, int write_mode)
{
	return open_cache_mode(kind, encrypt, degree, write_mode, VC_DEDUP_ON);
}

static void read_all(vc_cache *c)
{
	unsigned char *buf = malloc(64 * PS);
	for (unsigned i = 0; i < PAGES; i += 64) {
		CHECK(vc_read(c, buf, 64 * PS, (uint64_t)i * PS) == (ssize_t)(64 * PS));
		if (memcmp(buf, shadow + (uint64_t)i * PS, 64 * PS) != 0) {
			for (unsigned k = 0; k < 64 * PS; k++)
				if (buf[k] != shadow[(uint64_t)i * PS + k]) {
					fprintf(stderr, "byte %llu: got %02x want %02x\n",
						(unsigned long long)((uint64_t)i * PS + k), buf[k],
						shadow[(uint64_t)i * PS + k]);
					break;
				}
			CHECK(!"read returned wrong bytes");
		}
	}
	/* And page by page, backwards: reads in place of single pages. */
	for (unsigned i = PAGES; i-- > 0;) {
		CHECK(vc_read(c, buf, PS, (uint64_t)i * PS) == (ssize_t)PS);
		CHECK(memcmp(buf, shadow + (uint64_t)i * PS, PS) == 0);
	}
	free(buf);
}

static void stats(vc_cache *c, struct vc_stats *st, const char *what)
{
	*st = (struct vc_stats){ .size = sizeof *st };
	CHECK_OK(vc_get_stats(c, st));
	CHECK(st->version == VC_STATS_VERSION);
	fprintf(stderr,
		"%s: gpu pages %llu, blocks %llu, factor %.2f, in %llu, hits %llu, collisions %llu, "
		"est factor %.2f update %.2f, evictions gpu %llu\n",
		what, (unsigned long long)st->dedup_pages, (unsigned long long)st->dedup_blocks,
		st->dedup_factor, (unsigned long long)st->dedup_blocks_in,
		(unsigned long long)st->dedup_hits, (unsigned long long)st->dedup_collisions,
		st->dedup_est_factor, st->dedup_est_update_ratio,
		(unsigned long long)st->evictions[VC_TIER_GPU]);
}

static void run(int kind, int encrypt, uint32_t degree, bool collide)
{
	make_file(0xd00d + degree + (uint64_t)encrypt * 3);
	vc_cache *c = open_cache(kind, encrypt, degree, VC_WRITE_BACK);
	if (collide)
		CHECK_OK(eng_debug_dedup_collide(c, true));
	read_all(c);
	read_all(c); /* again: pages come back from the GPU tier */
	struct vc_stats st;
	char what[96];
	snprintf(what, sizeof what, "%s enc %d degree %u%s", vc_device_name(c), encrypt, degree,
		 collide ? " collide" : "");
	stats(c, &st, what);
	/* At D = 1 the misses' pages go down the known trip (their
	 * fingerprints taken as they were loaded): the lookups and compares
	 * above ran there, collisions included. */
	uint64_t back = 0, known = 0;
	CHECK_OK(eng_debug_dedup_notes(c, &back, &known));
	fprintf(stderr, "%s: %llu blocks down the known trip\n", what, (unsigned long long)known);
	CHECK(degree != 1 || known >= PAGES / 2);
	CHECK(st.hits[VC_TIER_GPU] > 0 && st.dedup_blocks_in > 0);
	CHECK(st.dedup_hits > 0);
	CHECK(st.dedup_blocks <= st.pages_capacity[VC_TIER_GPU] * degree);
	if (collide)
		CHECK(st.dedup_collisions > 0); /* unequal blocks met on a fingerprint */
	else
		CHECK(st.dedup_collisions == 0 && st.dedup_factor > 1.5);

	/* Copy on write: partial and whole-page writes to pages that share
	 * blocks; then everything again, and after a flush the file. */
	uint64_t seed = 77;
	unsigned char buf[PS];
	for (unsigned i = 0; i < PAGES; i += 7) {
		uint32_t off = (uint32_t)(t_rand(&seed) % PS), len = i % 2 ? PS - off : 1 + off / 3;
		if (i % 3 == 0) {
			off = 0;
			len = PS;
		}
		for (uint32_t k = 0; k < len; k++)
			buf[k] = (unsigned char)t_rand(&seed);
		CHECK(vc_write(c, buf, len, (uint64_t)i * PS + off) == (ssize_t)len);
		memcpy(shadow + (uint64_t)i * PS + off, buf, len);
	}
	read_all(c);
	read_all(c);
	CHECK_OK(vc_flush(c));
	t_check_file(path, shadow, (uint64_t)PAGES * PS);
	/* Everything out of the cache, and back from the file. */
	CHECK_OK(vc_drop(c, 0, 0, 0));
	read_all(c);
	stats(c, &st, what);
	if (collide)
		CHECK(st.dedup_collisions > 0);
	CHECK(st.integrity_failures == 0);
	CHECK_OK(eng_debug_dedup_check(c));
	CHECK_OK(vc_close(c));
	t_check_file(path, shadow, (uint64_t)PAGES * PS);
	unlink(path);
	free(shadow);
}

/* --- swap: back down by reference ------------------------------------------ */

static void check_read(vc_cache *c, unsigned i)
{
	unsigned char buf[PS];
	CHECK(vc_read(c, buf, PS, (uint64_t)i * PS) == (ssize_t)PS);
	if (memcmp(buf, shadow + (uint64_t)i * PS, PS) != 0) {
		fprintf(stderr, "page %u: wrong bytes\n", i);
		CHECK(!"read returned wrong bytes");
	}
}

/* GRAM's swap mode with dedup: a GPU hit brings the page up, and a host
 * victim that came up unwritten goes back down to the stored blocks it
 * came from, with no move and no compare (eng_debug_dedup_back counts
 * them). The GPU tier holds the file's distinct blocks, so only the host
 * tier turns over. Random reads: pool pages go back (their blocks keep
 * other uses while they are up), and so do unique pages (the note kept
 * the block while its page was up: eng_debug_dedup_kept). Then pages
 * written while up, partly (random bytes) or whole (with another pool
 * page's bytes: it may share again, by the compare): each must read back
 * as written after it went down (a unique page's kept block dies then),
 * and the store after a flush; then the same pages dropped and read from
 * the store again (their entries reused). Fails when a written page goes
 * back by its old note (the version check), a note outlives its page
 * (the cleared notes), or notes do not keep unique blocks. */
static void swap_back(int kind, int encrypt, uint32_t degree)
{
	make_file(0xbac + degree + (uint64_t)encrypt * 5);
	vc_cache *c = open_cache_x(kind, encrypt, degree, VC_WRITE_BACK, VC_DEDUP_ON, PAGES);
	read_all(c);
	uint64_t seed = 0x5a7 + degree, back0 = 0, back1 = 0, known = 0, kept0 = 0, kept1 = 0,
		 freed = 0;
	CHECK_OK(eng_debug_dedup_notes(c, &back0, &known));
	CHECK_OK(eng_debug_dedup_kept(c, &kept0, &freed));
	for (unsigned n = 0; n < 4 * PAGES; n++)
		check_read(c, (unsigned)(t_rand(&seed) % PAGES));
	CHECK_OK(eng_debug_dedup_notes(c, &back1, &known));
	CHECK_OK(eng_debug_dedup_kept(c, &kept1, &freed));
	fprintf(stderr,
		"swap back enc %d degree %u: %llu blocks back by reference, %llu of them kept "
		"(no use left), %llu kept blocks freed\n",
		encrypt, degree, (unsigned long long)(back1 - back0),
		(unsigned long long)(kept1 - kept0), (unsigned long long)freed);
	CHECK(back1 - back0 >= PAGES * degree); /* most of 4 x PAGES reads hit pool pages */
	/* A unique page (one in five) goes back to its block too: the note
	 * kept it while the page was up. */
	CHECK(kept1 - kept0 >= PAGES * degree / 8);

	/* Written while up: read (so it comes up), written, pushed down by
	 * reads of others, read again. */
	unsigned char buf[PS];
	for (unsigned i = 0; i < PAGES; i += 11) {
		check_read(c, i); /* a unique one's block kept, till the write makes it differ */
		uint32_t off = (uint32_t)(t_rand(&seed) % (PS / 2)), len = 1 + off / 3;
		if (i % 2) {
			off = 0;
			len = PS;
			memcpy(buf, shadow + (uint64_t)((i + 1) % POOL) * PS, PS);
		} else {
			for (uint32_t k = 0; k < len; k++)
				buf[k] = (unsigned char)t_rand(&seed);
		}
		CHECK(vc_write(c, buf, len, (uint64_t)i * PS + off) == (ssize_t)len);
		memcpy(shadow + (uint64_t)i * PS + off, buf, len);
		for (unsigned k = 1; k <= 64; k++) /* twice the host tier */
			check_read(c, (i + k * 7) % PAGES);
		check_read(c, i);
	}
	read_all(c);
	CHECK_OK(vc_flush(c));
	t_check_file(path, shadow, (uint64_t)PAGES * PS);
	CHECK_OK(vc_drop(c, 0, 0, 0));
	for (unsigned n = 0; n < 2 * PAGES; n++)
		check_read(c, (unsigned)(t_rand(&seed) % PAGES));
	read_all(c);
	struct vc_stats st;
	stats(c, &st, "swap back");
	CHECK(st.dedup_collisions == 0 && st.integrity_failures == 0);
	CHECK_OK(eng_debug_dedup_check(c));
	CHECK_OK(vc_close(c));
	t_check_file(path, shadow, (uint64_t)PAGES * PS);
	unlink(path);
	free(shadow);
}

/* Kept blocks freed by claims: a file of unique pages, half of them read
 * into a GPU tier of the whole file's pages (swap mode), so it has room
 * to keep blocks; random reads of that half leave the host tier's pages'
 * blocks kept. Then the whole tier is given back (vc_gpu_shrink): its
 * segments are claimed and emptied, the kept blocks with them
 * (eng_debug_dedup_kept), while their pages stay up; the tier is taken
 * again and the file read over and over. Every byte reads back right, the
 * pages whose kept blocks went going down the full trip; the block
 * store's invariants (kept blocks counted, every keep a note's) at the
 * end. */
static void swap_kept_freed(int kind, int encrypt, uint32_t degree)
{
	t_make_file(path, sizeof path, (uint64_t)PAGES * PS, 0x6e7 + degree + (uint64_t)encrypt);
	shadow = t_read_file(path, (uint64_t)PAGES * PS);
	vc_cache *c = open_cache_x(kind, encrypt, degree, VC_WRITE_BACK, VC_DEDUP_ON, PAGES);
	const unsigned half = PAGES / 2;
	uint64_t seed = 0x4b1 + degree, back = 0, freed = 0, got = 0;
	for (unsigned i = 0; i < half; i++)
		check_read(c, i);
	for (unsigned n = 0; n < 4 * half; n++)
		check_read(c, (unsigned)(t_rand(&seed) % half));
	CHECK_OK(eng_debug_dedup_check(c));
	int r = vc_gpu_shrink(c, (uint64_t)PAGES * PS, 0, &got);
	if (r == -EOPNOTSUPP) {
		fprintf(stderr, "SKIP part: the device maps no chunks: %s\n", vc_last_error());
	} else {
		CHECK_OK(r);
		CHECK_OK(eng_debug_dedup_kept(c, &back, &freed));
		fprintf(stderr,
			"kept enc %d degree %u: %llu blocks gone back to, %llu freed by the shrink "
			"(%llu bytes given back)\n",
			encrypt, degree, (unsigned long long)back, (unsigned long long)freed,
			(unsigned long long)got);
		CHECK(back > 0 && freed > 0);
		CHECK_OK(eng_debug_dedup_check(c));
		CHECK_OK(vc_gpu_grow(c, (uint64_t)PAGES * PS, &got));
		CHECK(got > 0);
	}
	read_all(c);
	for (unsigned n = 0; n < 4 * PAGES; n++)
		check_read(c, (unsigned)(t_rand(&seed) % PAGES));
	read_all(c);
	struct vc_stats st;
	stats(c, &st, "kept freed");
	CHECK(st.dedup_collisions == 0 && st.integrity_failures == 0);
	CHECK_OK(eng_debug_dedup_check(c));
	CHECK_OK(vc_close(c));
	unlink(path);
	free(shadow);
}

/* --- capacity -------------------------------------------------------------- */

/* Dedup must add capacity, never cost it: a file of PAGES pages, every one
 * a copy of one of POOL random pages (POOL x D distinct blocks), prefetched
 * into a GPU tier of GPU_PAGES pages (a quarter of the file): every page
 * is held in the GPU tier (more logical pages than the tier's pages, at
 * every degree, 1 included), the tier stores exactly the distinct blocks,
 * and none was appended but those (the log's used segments are those the
 * distinct blocks fill: a duplicate appended and orphaned would have used
 * the whole log and made it evict or clean). Reads then hit the GPU tier
 * and return the file's bytes. */
static void capacity(int kind, int encrypt, uint32_t degree)
{
	make_file(0xca9 + degree);
	for (unsigned i = 0; i < PAGES; i++) /* pool pages only */
		memcpy(shadow + (uint64_t)i * PS, shadow + (uint64_t)(i % POOL) * PS, PS);
	FILE *f = fopen(path, "r+b");
	CHECK(f && fwrite(shadow, 1, (size_t)PAGES * PS, f) == (size_t)PAGES * PS);
	fclose(f);
	vc_cache *c = open_cache(kind, encrypt, degree, VC_WRITE_BACK);
	CHECK_OK(vc_prefetch(c, 0, (uint64_t)PAGES * PS, VC_TIER_GPU));
	struct vc_stats st;
	char what[96];
	snprintf(what, sizeof what, "%s capacity enc %d degree %u", vc_device_name(c), encrypt,
		 degree);
	stats(c, &st, what);
	/* The data's factor, sampled by content: 512 locations a block over
	 * 3 contents (171, 171, 170 copies). */
	CHECK(st.dedup_est_factor > 0.99 * PAGES / POOL && st.dedup_est_factor < 1.01 * PAGES / POOL);
	const uint64_t distinct = (uint64_t)POOL * degree, per_seg = 8u * degree;
	CHECK(st.pages_capacity[VC_TIER_GPU] == 128);
	CHECK(st.dedup_pages == PAGES && st.pages_cached[VC_TIER_GPU] == PAGES);
	CHECK(st.dedup_blocks == distinct);
	CHECK(st.gpu_segments - st.gpu_segments_free == (distinct + per_seg - 1) / per_seg);
	CHECK(st.gpu_fragmentation == 0 && st.gpu_segments_evicted == 0 && st.gc_runs == 0);
	CHECK(st.evictions[VC_TIER_GPU] == 0 && st.dedup_collisions == 0);
	CHECK(st.dedup_hits == (uint64_t)PAGES * degree - distinct);
	/* Moves counted in pages (D blocks): every block into staging, the
	 * distinct ones on into their slots. (Encrypted, the compares' moves
	 * up count too.) */
	if (!encrypt)
		CHECK(st.batch_pages == PAGES + POOL);
	read_all(c);
	stats(c, &st, what);
	CHECK(st.misses == 0 && st.hits[VC_TIER_GPU] > 0 && st.integrity_failures == 0);
	CHECK_OK(eng_debug_dedup_check(c));
	CHECK_OK(vc_close(c));
	unlink(path);
	free(shadow);
}

/* --- the two trips down ------------------------------------------------------ */

#define TR_U 1536u /* unique pages, then pages from the pool, then unique again */
#define TR_R 1024u
#define TR_TRIP 256u /* pages a prefetch round (batch_pages) */

/* The trips' tests' file: its bytes (shadow, n pages, changed by the
 * caller) written back, and a cache over it: a GPU tier that holds it all,
 * a host tier of 32 pages, segments of 8, prefetch rounds of TR_TRIP
 * pages, dedup on at degree D. */
static void tr_file_config(struct vc_config *cfg, int kind, uint32_t n, uint32_t D)
{
	FILE *f = fopen(path, "r+b");
	CHECK(f && fwrite(shadow, 1, (size_t)n * PS, f) == (size_t)n * PS);
	fclose(f);
	vc_config_init(cfg);
	cfg->backing_path = path;
	cfg->device = kind;
	cfg->page_size = PS;
	cfg->host_bytes = 32 * PS;
	cfg->gpu_bytes = (uint64_t)n * PS;
	cfg->seg_bytes = 8 * PS;
	cfg->batch_pages = TR_TRIP;
	cfg->dedup = VC_DEDUP_ON;
	cfg->dedup_degree = D;
}

static void trip_counts(vc_cache *c, uint64_t *direct, uint64_t *late, struct vc_stats *st,
			const char *what)
{
	CHECK_OK(eng_debug_dedup_trips(c, direct, late));
	stats(c, st, what);
	fprintf(stderr, "  direct %llu, merged late %llu, fragmentation %.3f\n",
		(unsigned long long)*direct, (unsigned long long)*late, st->gpu_fragmentation);
}

/* The switch between the trips (dedup.c, trip_rate). A file of TR_U
 * unique pages, TR_R pages from a pool of POOL, TR_U unique pages,
 * prefetched into a GPU tier that holds it all, a region at a time:
 * - unique: the volume starts staged and goes direct after its first
 *   trip (no block shared), so all but a trip or two go direct, none is
 *   merged late, exactly the blocks stored, no dead slot;
 * - repeated: the first trip still goes direct (its duplicates merge
 *   after their move, leaving dead slots: at most a trip's blocks), then
 *   the volume goes back to staging (its duplicates take no slot): the
 *   tier stores exactly the distinct blocks;
 * - unique again: direct again once the repeated blocks left the count
 *   (at most its window of 1024 blocks and a trip).
 * Then every byte reads back right. Fails with the switch stuck either
 * way (never direct: no direct block; never back: the repeated region's
 * trips all direct). That is with `later` 0 (VC_DD_LATER=0: the direct
 * trip looks up in its own hold). With the indexer (dedup_later.c; with
 * encryption its merges compare both blocks decrypted, each under its own
 * tweak) the switch lags the trips by the indexer's queue, so the trips'
 * counts are bounds; what is exact is what the indexer must do: every
 * direct duplicate merged late (the blocks stored are the distinct
 * ones, the hits every duplicate), its dead slots left. Fails with a
 * merge lost (blocks, hits) or wrong (bytes, the block store's check). */
static void trips(int kind, int encrypt, uint32_t degree, int algo, int later)
{
	setenv("VC_DD_LATER", later ? "1" : "0", 1);
	setenv("VC_PREFETCHERS", "1", 1); /* the counts follow one trip after another */
	const uint32_t n = 2 * TR_U + TR_R, D = degree;
	t_make_file(path, sizeof path, (uint64_t)n * PS, 0x7219 + degree);
	shadow = t_read_file(path, (uint64_t)n * PS);
	for (uint32_t i = TR_U; i < TR_U + TR_R; i++) /* the first POOL pages of the region repeat */
		memcpy(shadow + (uint64_t)i * PS, shadow + (uint64_t)(TR_U + i % POOL) * PS, PS);
	struct vc_config cfg;
	tr_file_config(&cfg, kind, n, degree);
	cfg.encrypt = encrypt;
	cfg.dedup_algo = algo;
	vc_cache *c = t_open(&cfg, "dedup test");
	unsetenv("VC_DD_LATER");
	unsetenv("VC_PREFETCHERS");
	char what[96];
	snprintf(what, sizeof what, "%s trips enc %d degree %u algo %d later %d", vc_device_name(c),
		 encrypt, degree, algo, later);
	struct vc_stats st;
	uint64_t d1, l1, d2, l2, d3, l3;

	CHECK_OK(vc_prefetch(c, 0, (uint64_t)TR_U * PS, VC_TIER_GPU));
	trip_counts(c, &d1, &l1, &st, what);
	CHECK(d1 >= (uint64_t)(TR_U - 2 * TR_TRIP) * D && d1 <= (uint64_t)(TR_U - TR_TRIP) * D);
	CHECK(l1 == 0 && st.dedup_hits == 0 && st.dedup_blocks == (uint64_t)TR_U * D);
	CHECK(st.gpu_fragmentation == 0);

	CHECK_OK(vc_prefetch(c, (uint64_t)TR_U * PS, (uint64_t)TR_R * PS, VC_TIER_GPU));
	trip_counts(c, &d2, &l2, &st, what);
	uint64_t nlater;
	CHECK_OK(eng_debug_dedup_later(c, &nlater));
	CHECK(later ? nlater > 0 && nlater <= d2 : nlater == 0);
	if (!later) {
		CHECK(d2 - d1 == (uint64_t)TR_TRIP * D); /* one trip, then staged */
		CHECK(l2 <= (uint64_t)TR_TRIP * D - POOL * D);
	}
	CHECK(l2 > 0 && l2 <= d2 - d1 - (uint64_t)POOL * D);
	CHECK(st.dedup_blocks == (uint64_t)(TR_U + POOL) * D);
	CHECK(st.dedup_hits == (uint64_t)(TR_R - POOL) * D && st.dedup_collisions == 0);
	CHECK(st.gpu_fragmentation > 0); /* the late merges' dead slots */

	CHECK_OK(vc_prefetch(c, (uint64_t)(TR_U + TR_R) * PS, (uint64_t)TR_U * PS, VC_TIER_GPU));
	trip_counts(c, &d3, &l3, &st, what);
	/* Staged until the repeated blocks leave the count: the rest of its
	 * window (1024 blocks) and a trip. */
	if (!later)
		CHECK(d3 - d2 >= (uint64_t)TR_U * D - 1024 - (uint64_t)TR_TRIP * D);
	CHECK(d3 > d2 && l3 == l2);
	CHECK(st.dedup_blocks == (uint64_t)(2 * TR_U + POOL) * D);
	CHECK(st.dedup_pages == n && st.evictions[VC_TIER_GPU] == 0);

	unsigned char *buf = malloc(64 * PS);
	for (uint32_t i = 0; i < n; i += 64) {
		CHECK(vc_read(c, buf, 64 * PS, (uint64_t)i * PS) == (ssize_t)(64 * PS));
		CHECK(memcmp(buf, shadow + (uint64_t)i * PS, 64 * PS) == 0);
	}
	free(buf);
	stats(c, &st, what);
	CHECK(st.misses == 0 && st.integrity_failures == 0);
	CHECK_OK(eng_debug_dedup_check(c));
	CHECK_OK(vc_close(c));
	unlink(path);
	free(shadow);
}

/* --- adaptive -------------------------------------------------------------- */

/* VC_DEDUP_ADAPTIVE: a volume of unique pages switches off (its estimate
 * of the data's factor is 1), one of repeated pages stays on (the
 * estimate near the truth); either way every byte reads back right. */
static void adaptive(int kind, bool repeat)
{
	make_file(0xada + repeat);
	if (!repeat) { /* every page its own random bytes */
		t_make_file(path, sizeof path, (uint64_t)PAGES * PS, 0xada);
		free(shadow);
		shadow = t_read_file(path, (uint64_t)PAGES * PS);
	}
	vc_cache *c = open_cache_mode(kind, VC_ENCRYPT_OFF, 4, VC_WRITE_BACK, VC_DEDUP_ADAPTIVE);
	for (int k = 0; k < 3; k++) /* 3 x 512 pages x 4 blocks down: a decision */
		read_all(c);
	struct vc_stats st;
	stats(c, &st, repeat ? "adaptive, repeated" : "adaptive, unique");
	if (repeat) {
		CHECK(st.dedup_volumes_on == 1 && st.dedup_switches == 0);
		CHECK(st.dedup_est_factor > 3.5 && st.dedup_est_factor < 6.5); /* truth: 4.86 */
	} else {
		CHECK(st.dedup_volumes_on == 0 && st.dedup_switches == 1);
		CHECK(st.dedup_est_factor < 1.01);
	}
	CHECK_OK(eng_debug_dedup_check(c));
	CHECK_OK(vc_close(c));
	unlink(path);
	free(shadow);
}

/* --- concurrency ---------------------------------------------------------- */

#define CC_THREADS 4
#define CC_WRITER (CC_THREADS - 1)

struct cc {
	vc_cache *c;
	int id;
	uint64_t seed;
};

/* Pages i % 8 == 7 are the writer's: only it changes them (and their
 * shadow) and only it checks them while the threads run. */
static bool writer_page(unsigned i)
{
	return i % 8 == 7;
}

static void check_page(const unsigned char *got, unsigned i)
{
	if (memcmp(got, shadow + (uint64_t)i * PS, PS) != 0) {
		fprintf(stderr, "page %u read wrong bytes\n", i);
		CHECK(!"read returned wrong bytes");
	}
}

static void *cc_main(void *arg)
{
	struct cc *a = arg;
	unsigned char *buf = malloc(16 * PS);
	CHECK(buf);
	if (a->id == 0) {
		for (int round = 0; round < 3; round++)
			for (unsigned i = 0; i < PAGES; i += 16) {
				CHECK(vc_read(a->c, buf, 16 * PS, (uint64_t)i * PS) == (ssize_t)(16 * PS));
				for (unsigned k = 0; k < 16; k++)
					if (!writer_page(i + k))
						check_page(buf + (size_t)k * PS, i + k);
			}
	} else if (a->id == CC_WRITER) {
		for (int n = 0; n < 300; n++) {
			const unsigned i = (unsigned)(t_rand(&a->seed) % (PAGES / 8)) * 8 + 7;
			unsigned char *s = shadow + (uint64_t)i * PS;
			if (n % 3 == 2) /* fresh bytes, part of the page */
				for (uint32_t k = 0; k < PS / 2; k++)
					s[k] = (unsigned char)t_rand(&a->seed);
			else /* another page's bytes (not the writer's: they hold still) */
				memcpy(s, shadow + (uint64_t)(i - 1 - n % 5) * PS, PS);
			CHECK(vc_write(a->c, s, PS, (uint64_t)i * PS) == (ssize_t)PS);
			CHECK(vc_read(a->c, buf, PS, (uint64_t)i * PS) == (ssize_t)PS);
			check_page(buf, i);
		}
	} else {
		for (int n = 0; n < 600; n++) {
			unsigned i = (unsigned)(t_rand(&a->seed) % PAGES);
			if (writer_page(i))
				i--;
			CHECK(vc_read(a->c, buf, PS, (uint64_t)i * PS) == (ssize_t)PS);
			check_page(buf, i);
		}
	}
	free(buf);
	return NULL;
}

static void concurrent(int kind, int encrypt, uint32_t degree, bool collide)
{
	make_file(0xcc + degree);
	vc_cache *c = open_cache(kind, encrypt, degree, VC_WRITE_BACK);
	if (collide)
		CHECK_OK(eng_debug_dedup_collide(c, true));
	pthread_t th[CC_THREADS];
	struct cc a[CC_THREADS];
	for (int k = 0; k < CC_THREADS; k++) {
		a[k] = (struct cc){ .c = c, .id = k, .seed = 0x5eed + (uint64_t)k };
		CHECK(pthread_create(&th[k], NULL, cc_main, &a[k]) == 0);
	}
	for (int k = 0; k < CC_THREADS; k++)
		pthread_join(th[k], NULL);
	read_all(c);
	struct vc_stats st;
	char what[96];
	snprintf(what, sizeof what, "%s concurrent enc %d degree %u%s", vc_device_name(c), encrypt,
		 degree, collide ? " collide" : "");
	stats(c, &st, what);
	CHECK(st.dedup_hits > 0 && st.integrity_failures == 0);
	CHECK(collide ? st.dedup_collisions > 0 : st.dedup_collisions == 0);
	uint64_t back = 0, known = 0;
	CHECK_OK(eng_debug_dedup_notes(c, &back, &known));
	fprintf(stderr, "%s: %llu blocks down the known trip\n", what, (unsigned long long)known);
	CHECK(degree != 1 || known > 0);
	CHECK_OK(vc_flush(c));
	t_check_file(path, shadow, (uint64_t)PAGES * PS);
	CHECK_OK(eng_debug_dedup_check(c));
	CHECK_OK(vc_close(c));
	unlink(path);
	free(shadow);
}

static void refusals(int kind)
{
	make_file(5);
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.device = kind;
	cfg.gpu_bytes = 128 * PS;
	cfg.host_bytes = 32 * PS;
	cfg.dedup = VC_DEDUP_ON;
	vc_cache *c = NULL;
	cfg.dedup_degree = 3;
	CHECK(vc_open(&cfg, &c) == -EINVAL);
	cfg.dedup_degree = 8;
	cfg.page_size = 2048; /* blocks of 256 B */
	CHECK(vc_open(&cfg, &c) == -EINVAL);
	cfg.page_size = PS;
	cfg.dedup = 7;
	CHECK(vc_open(&cfg, &c) == -EINVAL);
	cfg.dedup = VC_DEDUP_ON;
	cfg.dedup_algo = 9;
	CHECK(vc_open(&cfg, &c) == -EINVAL);
	cfg.dedup_algo = VC_DEDUP_LANES;
	cfg.dedup_max_factor = 65;
	CHECK(vc_open(&cfg, &c) == -EINVAL);
	cfg.dedup_max_factor = 0;
	/* The device jobs' hashes work as well. */
	for (int algo = VC_DEDUP_MD5; algo <= VC_DEDUP_MURMUR3; algo++) {
		cfg.dedup_algo = algo;
		int e = vc_open(&cfg, &c);
		t_skip_if_absent(e, "dedup test");
		CHECK_OK(e);
		unsigned char *buf = malloc((size_t)PAGES * PS);
		for (int k = 0; k < 2; k++)
			CHECK(vc_read(c, buf, (size_t)PAGES * PS, 0) == (ssize_t)((size_t)PAGES * PS));
		CHECK(memcmp(buf, shadow, (size_t)PAGES * PS) == 0);
		struct vc_stats st;
		stats(c, &st, algo == VC_DEDUP_MD5 ? "md5" : "murmur3");
		CHECK(st.dedup_hits > 0);
		/* A dedup tier shrinks and grows (test_gpusize has the cases):
		 * every byte still reads back. */
		uint64_t rel = 0, grown = 0;
		int r = vc_gpu_shrink(c, UINT64_MAX, 0, &rel);
		/* CUDA maps by 2 MiB: this 512 KiB tier may be one allocation. */
		CHECK(r == 0 || (kind == VC_DEVICE_CUDA && r == -EOPNOTSUPP));
		CHECK(r < 0 || rel > 0);
		CHECK(vc_read(c, buf, (size_t)PAGES * PS, 0) == (ssize_t)((size_t)PAGES * PS));
		CHECK(memcmp(buf, shadow, (size_t)PAGES * PS) == 0);
		CHECK_OK(vc_gpu_grow(c, UINT64_MAX, &grown));
		CHECK(grown == rel);
		free(buf);
		CHECK_OK(eng_debug_dedup_check(c));
	CHECK_OK(vc_close(c));
	}
	unlink(path);
	free(shadow);
}

/* The indexer's entries outlive their blocks (dedup_later.c): with the
 * indexer paused, a region of unique pages goes down (its direct trips'
 * blocks queued) and is dropped, so its block ids are free; a second
 * region reuses them, queued too. Then the indexer runs: the first
 * region's entries name ids that are other blocks now (their serials
 * differ) and must index nothing. A third region repeats the first one's
 * bytes: nothing stored has them, so no lookup may match and no compare
 * fail (an entry taken for the reborn block would index it under the
 * first region's fingerprint: a collision per block). Every byte reads
 * back right, the block store's check holds, and the third region's
 * blocks are all stored (no false share). Then a second volume's blocks
 * are queued (paused again) and the volume closes before the indexer
 * goes on: its entries name blocks dead with their pages, and the
 * indexer must read nothing of their volume (a crash otherwise: it is
 * gone). */
static void later_stale(int kind)
{
	const uint32_t n = 3 * TR_U;
	t_make_file(path, sizeof path, (uint64_t)n * PS, 0x51a1e);
	shadow = t_read_file(path, (uint64_t)n * PS);
	memcpy(shadow + (uint64_t)2 * TR_U * PS, shadow, (size_t)TR_U * PS);
	struct vc_config cfg;
	tr_file_config(&cfg, kind, n, 1);
	setenv("VC_DD_LATER", "1", 1);
	vc_cache *c = t_open(&cfg, "dedup test");
	unsetenv("VC_DD_LATER");
	char what[64];
	snprintf(what, sizeof what, "%s later, stale entries", vc_device_name(c));
	CHECK_OK(eng_debug_dedup_later_pause(c, true));
	CHECK_OK(vc_prefetch(c, 0, (uint64_t)TR_U * PS, VC_TIER_GPU));
	CHECK_OK(vc_drop(c, 0, (uint64_t)TR_U * PS, 0));
	CHECK_OK(vc_prefetch(c, (uint64_t)TR_U * PS, (uint64_t)TR_U * PS, VC_TIER_GPU));
	CHECK_OK(eng_debug_dedup_later_pause(c, false));
	uint64_t d1, l1, later;
	struct vc_stats st;
	trip_counts(c, &d1, &l1, &st, what);
	CHECK_OK(eng_debug_dedup_later(c, &later));
	/* The queue's four trips (4 x dd.scr_blocks), the first region's,
	 * waited for the indexer and died before it ran (not counted as
	 * direct); the rest, finding it full, looked up in their own holds:
	 * the second region's direct trips, all but its first or two. */
	CHECK(later == 4 * TR_TRIP);
	CHECK(d1 >= (uint64_t)(TR_U - 2 * TR_TRIP) && d1 < 2 * (uint64_t)TR_U - 4 * TR_TRIP);
	CHECK(st.dedup_blocks == TR_U && st.dedup_hits == 0 && l1 == 0);
	CHECK_OK(vc_prefetch(c, (uint64_t)2 * TR_U * PS, (uint64_t)TR_U * PS, VC_TIER_GPU));
	stats(c, &st, what);
	CHECK(st.dedup_collisions == 0 && st.dedup_hits == 0);
	CHECK(st.dedup_blocks == 2 * TR_U && st.dedup_pages == 2 * TR_U);
	unsigned char *buf = malloc(64 * PS);
	for (uint32_t i = TR_U; i < n; i += 64) {
		CHECK(vc_read(c, buf, 64 * PS, (uint64_t)i * PS) == (ssize_t)(64 * PS));
		CHECK(memcmp(buf, shadow + (uint64_t)i * PS, 64 * PS) == 0);
	}
	char path2[256];
	t_make_file(path2, sizeof path2, (uint64_t)TR_U * PS, 0x51a1f);
	vc_volume *v2;
	CHECK_OK(vc_volume_open(c, path2, -1, 0, &v2));
	CHECK_OK(eng_debug_dedup_later_pause(c, true));
	CHECK_OK(vc_volume_prefetch(v2, 0, (uint64_t)TR_U * PS, VC_TIER_GPU));
	CHECK_OK(vc_volume_close(v2));
	unlink(path2);
	CHECK_OK(eng_debug_dedup_later_pause(c, false));
	uint64_t later2;
	CHECK_OK(eng_debug_dedup_later(c, &later2));
	CHECK(later2 > later); /* the closed volume's entries were taken */
	for (uint32_t i = TR_U; i < n; i += 64) {
		CHECK(vc_read(c, buf, 64 * PS, (uint64_t)i * PS) == (ssize_t)(64 * PS));
		CHECK(memcmp(buf, shadow + (uint64_t)i * PS, 64 * PS) == 0);
	}
	free(buf);
	stats(c, &st, what);
	CHECK(st.dedup_collisions == 0 && st.dedup_blocks == 2 * TR_U);
	CHECK_OK(eng_debug_dedup_check(c));
	CHECK_OK(vc_close(c));
	unlink(path);
	free(shadow);
}

/* The parts, a process each under ctest (about a quarter of the work
 * each): the refusals, capacity, swap and the indexer's stale entries; the
 * trips and adaptive; the sharing runs without and with encryption (the
 * concurrent ones with the latter). */
static void part_swap(int kind, int ops)
{
	(void)ops;
	refusals(kind);
	capacity(kind, VC_ENCRYPT_OFF, 4);
	capacity(kind, VC_ENCRYPT_OFF, 1);
	capacity(kind, VC_ENCRYPT_XTS, 8);
	swap_back(kind, VC_ENCRYPT_OFF, 1);
	swap_back(kind, VC_ENCRYPT_XTS, 1);
	swap_back(kind, VC_ENCRYPT_XTS_GMAC, 4);
	swap_kept_freed(kind, VC_ENCRYPT_OFF, 1);
	swap_kept_freed(kind, VC_ENCRYPT_XTS, 2);
	later_stale(kind);
}

static void part_trips(int kind, int ops)
{
	(void)ops;
	trips(kind, VC_ENCRYPT_OFF, 4, VC_DEDUP_LANES, 0);
	trips(kind, VC_ENCRYPT_OFF, 4, VC_DEDUP_LANES, 1);
	trips(kind, VC_ENCRYPT_OFF, 1, VC_DEDUP_LANES, 1);
	trips(kind, VC_ENCRYPT_XTS, 1, VC_DEDUP_LANES, 0);
	trips(kind, VC_ENCRYPT_XTS, 1, VC_DEDUP_LANES, 1);
	trips(kind, VC_ENCRYPT_XTS_GMAC, 4, VC_DEDUP_LANES, 1);
	trips(kind, VC_ENCRYPT_OFF, 2, VC_DEDUP_MURMUR3, 0);
	trips(kind, VC_ENCRYPT_OFF, 2, VC_DEDUP_MURMUR3, 1);
	adaptive(kind, false);
	adaptive(kind, true);
}

static void part_runs(int kind, int ops)
{
	(void)ops;
	run(kind, VC_ENCRYPT_OFF, 4, false);
	run(kind, VC_ENCRYPT_OFF, 4, true);
	run(kind, VC_ENCRYPT_OFF, 8, true);
	run(kind, VC_ENCRYPT_OFF, 1, true);
	run(kind, VC_ENCRYPT_OFF, 1, false);
}

static void part_runs_enc(int kind, int ops)
{
	(void)ops;
	run(kind, VC_ENCRYPT_XTS, 1, false);
	run(kind, VC_ENCRYPT_XTS, 1, true);
	run(kind, VC_ENCRYPT_XTS, 4, true);
	run(kind, VC_ENCRYPT_XTS, 8, false);
	run(kind, VC_ENCRYPT_XTS_GMAC, 2, true);
	concurrent(kind, VC_ENCRYPT_OFF, 4, false);
	concurrent(kind, VC_ENCRYPT_OFF, 2, true);
	concurrent(kind, VC_ENCRYPT_XTS, 4, false);
	concurrent(kind, VC_ENCRYPT_OFF, 1, false); /* the known trip, notes taken by lock-free misses */
	concurrent(kind, VC_ENCRYPT_XTS, 1, true);
}

static const struct t_part parts[] = {
	{ "swap", part_swap, false },
	{ "trips", part_trips, false },
	{ "runs", part_runs, false },
	{ "runs_enc", part_runs_enc, false },
};

/* Arguments: the parts to run (all by default). The runs' sizes are
 * fixed (no VC_TEST_OPS). */
int main(int argc, char **argv)
{
	return t_parts_main(argc, argv, parts, sizeof parts / sizeof parts[0], 0, "dedup");
}
