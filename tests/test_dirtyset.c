/* The dirty set (src/index/dirtyset.c).
 *
 * 1. Against a model (a sorted array), single-threaded: random add, del,
 *    test, next and collect over keys that cross every level boundary (63/64,
 *    4095/4096, 2^18, ..., 2^42), dense runs, random 48-bit keys and keys
 *    near 0 and 2^48 - 1, in phases that fill and then empty the set; every
 *    answer is compared, and the tree's invariants are checked as it goes
 *    (masks match the entries, no empty node, minimal height, count and
 *    bytes match a walk). Every next() must visit at most two nodes per
 *    level and every collect() at most depth nodes per member returned plus
 *    two boundary paths, counted through the file's VC_DSET_VISIT hook: an
 *    empty query over [0, 2^48) is a few nodes, not a scan. Emptied, the
 *    set holds 0 bytes.
 * 2. A dense run of 2^20 pages costs about one bit a page.
 * 3. Errors: pno >= 2^48 gives -EINVAL and changes nothing; from > to finds
 *    nothing; the Nth allocation of an add fails, for every N: -ENOMEM, the
 *    set unchanged and nothing leaked.
 * 4. Concurrent: 4 writers add and del their own keys (interleaved with each
 *    other's in the same words and nodes, and at the top of the key space,
 *    so the height grows and shrinks) and check each result; 2 readers
 *    call next and collect and check that results are ordered, in range,
 *    and never miss the stable keys (present throughout). At the end the
 *    set is the union of what each writer left. Run under TSan by
 *    scripts/test.
 *
 * Exit 0 pass, 1 fail. About 1 s; 4 s under TSan, which runs one round of
 * part 1 instead of six.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "testutil.h"

/* The set is compiled into this test, under other names (so it links beside
 * the library's copy), with its allocation and its walks instrumented. */
static atomic_long t_live;     /* nodes allocated and not freed */
static atomic_long t_fail_in;  /* fail the allocation when this reaches 0; < 0: never */
static atomic_ulong t_visits;  /* nodes entered by next and collect */
static void *t_alloc(size_t size)
{
	if (atomic_load(&t_fail_in) >= 0 && atomic_fetch_sub(&t_fail_in, 1) == 0)
		return NULL;
	atomic_fetch_add(&t_live, 1);
	return calloc(1, size);
}
static void t_free(void *p)
{
	atomic_fetch_sub(&t_live, 1);
	free(p);
}
#define VC_DSET_ALLOC() t_alloc(sizeof(struct vc_dset_node))
#define VC_DSET_FREE(p) t_free(p)
#define VC_DSET_VISIT() atomic_fetch_add_explicit(&t_visits, 1, memory_order_relaxed)
#define vc_dset_create t_dset_create
#define vc_dset_destroy t_dset_destroy
#define vc_dset_add t_dset_add
#define vc_dset_del t_dset_del
#define vc_dset_test t_dset_test
#define vc_dset_next t_dset_next
#define vc_dset_collect t_dset_collect
#define vc_dset_count t_dset_count
#define vc_dset_bytes t_dset_bytes
#include "index/dirtyset.c"

#define TOP (VC_DSET_LIMIT - 1)

/* ---- structure check (single-threaded callers) ---- */

static void check_node(const struct vc_dset_node *n, unsigned g, uint64_t *members,
		       uint64_t *nodes)
{
	CHECK(n->mask != 0);
	++*nodes;
	for (unsigned i = 0; i < 64; i++) {
		bool bit = n->mask >> i & 1;
		if (g == 1) {
			CHECK(bit == (n->word[i] != 0));
			if (bit)
				*members += (uint64_t)__builtin_popcountll(n->word[i]);
		} else {
			CHECK(bit == (n->child[i] != NULL));
			if (bit)
				check_node(n->child[i], g - 1, members, nodes);
		}
	}
}

static void check_tree(const struct vc_dset *s)
{
	uint64_t members = 0, nodes = 0;
	CHECK((s->root == NULL) == (s->height == 0));
	if (s->root) {
		CHECK(s->height <= VC_DSET_MAX_DEPTH);
		/* minimal height: something beyond the root's first child */
		CHECK(s->height == 1 || (s->root->mask & ~1ull));
		check_node(s->root, s->height, &members, &nodes);
	}
	CHECK(members == vc_dset_count(s));
	CHECK(nodes * VC_DSET_NODE_BYTES == vc_dset_bytes(s));
	CHECK((long)nodes == atomic_load(&t_live));
}

/* ---- the model: a sorted array ---- */

struct model {
	uint64_t *k;
	size_t n, cap;
};

/* First index with k[i] >= x. */
static size_t m_lower(const struct model *m, uint64_t x)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->k[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}
static bool m_has(const struct model *m, uint64_t x)
{
	size_t i = m_lower(m, x);
	return i < m->n && m->k[i] == x;
}
static bool m_add(struct model *m, uint64_t x)
{
	size_t i = m_lower(m, x);
	if (i < m->n && m->k[i] == x)
		return false;
	if (m->n == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 1024;
		m->k = realloc(m->k, m->cap * sizeof *m->k);
		CHECK(m->k);
	}
	memmove(m->k + i + 1, m->k + i, (m->n - i) * sizeof *m->k);
	m->k[i] = x;
	m->n++;
	return true;
}
static bool m_del(struct model *m, uint64_t x)
{
	size_t i = m_lower(m, x);
	if (i == m->n || m->k[i] != x)
		return false;
	memmove(m->k + i, m->k + i + 1, (m->n - i - 1) * sizeof *m->k);
	m->n--;
	return true;
}

/* ---- keys that cross every boundary ---- */

static uint64_t special[64];
static unsigned nspecial;
static uint64_t anchors[4];

static void init_special(void)
{
	static const uint64_t fixed[] = { 0,	 1,	62,	63,	 64,	  65,
					  127,	 128,	4031,	4032,	 4095,	  4096,
					  4097,	 8191,	TOP,	TOP - 1, TOP - 63, TOP - 64,
					  TOP - 4095, TOP - 4096 };
	for (unsigned i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
		special[nspecial++] = fixed[i];
	for (unsigned b = 18; b <= 42; b += 6) {
		special[nspecial++] = (1ull << b) - 1;
		special[nspecial++] = 1ull << b;
		special[nspecial++] = (1ull << b) + 1;
	}
}

static uint64_t clamp_key(uint64_t k)
{
	return k > TOP ? TOP : k;
}

static uint64_t rand_key(uint64_t *rng)
{
	uint64_t r = t_rand(rng);
	switch (r % 8) {
	case 0:
	case 1:
	case 2: /* dense: bottom nodes 0..4 */
		return (r >> 8) % 20000;
	case 3:
		return special[(r >> 8) % nspecial];
	case 4: { /* near a boundary, either side */
		uint64_t s = special[(r >> 8) % nspecial], d = (r >> 16) % 130;
		return r >> 40 & 1 ? clamp_key(s + d) : (s >= d ? s - d : 0);
	}
	case 5:
		return (r >> 8) & TOP;
	case 6:
		return clamp_key(anchors[(r >> 8) & 3] + (r >> 16) % 5000);
	default:
		return (r >> 8) & ((1ull << 30) - 1);
	}
}

/* ---- 1. against the model ---- */

/* Under TSan, whose build is here for part 4, the model's memmoves cost 25
 * times as much: one round there (about 1 s), six elsewhere. */
#if defined(__SANITIZE_THREAD__)
#define MODEL_ROUNDS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MODEL_ROUNDS 1
#endif
#endif
#ifndef MODEL_ROUNDS
#define MODEL_ROUNDS 6
#endif

static uint64_t out[512];

static void check_next(struct vc_dset *s, const struct model *m, uint64_t from, uint64_t to)
{
	uint64_t k = 0;
	atomic_store(&t_visits, 0);
	bool got = vc_dset_next(s, from, to, &k);
	/* at most two nodes per level, however wide the range */
	CHECK(atomic_load(&t_visits) <= 2 * s->height);
	size_t i = m_lower(m, from);
	bool want = from <= to && i < m->n && m->k[i] <= to;
	if (got != want || (got && k != m->k[i])) {
		fprintf(stderr, "next(%llu, %llu): got %d %llu, want %d %llu\n",
			(unsigned long long)from, (unsigned long long)to, got,
			(unsigned long long)k, want, want ? (unsigned long long)m->k[i] : 0ull);
		exit(1);
	}
}

static void check_collect(struct vc_dset *s, const struct model *m, uint64_t from, uint64_t to,
			  uint32_t max)
{
	atomic_store(&t_visits, 0);
	uint32_t n = vc_dset_collect(s, from, to, out, max);
	CHECK(atomic_load(&t_visits) <= (uint64_t)s->height * (n + 2));
	uint32_t want = 0;
	if (from <= to)
		for (size_t i = m_lower(m, from); i < m->n && m->k[i] <= to && want < max; i++) {
			if (want >= n || out[want] != m->k[i]) {
				fprintf(stderr, "collect(%llu, %llu, %u): member %u is %llu, want %llu\n",
					(unsigned long long)from, (unsigned long long)to, max, want,
					want < n ? (unsigned long long)out[want] : 0ull,
					(unsigned long long)m->k[i]);
				exit(1);
			}
			want++;
		}
	CHECK(n == want);
}

static uint64_t rand_to(uint64_t *rng, uint64_t from)
{
	uint64_t r = t_rand(rng);
	switch (r % 7) {
	case 0:
		return from;
	case 1:
		return from + (r >> 8) % 100;
	case 2:
		return from + (r >> 8) % 100000;
	case 3:
		return TOP;
	case 4:
		return UINT64_MAX;
	case 5: /* from > to */
		return from ? from - 1 - (r >> 8) % from : 0;
	default:
		return rand_key(rng);
	}
}

static void model_phase(struct vc_dset *s, struct model *m, uint64_t *rng, unsigned add_pct,
			unsigned ops)
{
	for (unsigned op = 0; op < ops; op++) {
		uint64_t r = t_rand(rng), k = rand_key(rng);
		unsigned what = (unsigned)(r % 100);
		if (what < add_pct) {
			int got = vc_dset_add(s, k);
			CHECK(got == (m_add(m, k) ? 1 : 0));
		} else if (what < 80) {
			if (r >> 20 & 1 && m->n) /* delete a member: the set shrinks */
				k = m->k[(r >> 24) % m->n];
			CHECK(vc_dset_del(s, k) == m_del(m, k));
		} else if (what < 86) {
			CHECK(vc_dset_test(s, k) == m_has(m, k));
		} else if (what < 95) {
			check_next(s, m, k, rand_to(rng, k));
		} else {
			uint32_t max = (r >> 8) % 4 == 0 ? 1 + (uint32_t)((r >> 16) % 4)
							 : 1 + (uint32_t)((r >> 16) % 512);
			check_collect(s, m, k, rand_to(rng, k), max);
		}
		CHECK(vc_dset_count(s) == m->n);
		if (op % 4096 == 0)
			check_tree(s);
	}
	check_tree(s);
}

/* Every member, in batches as a flush would walk them, equals the model. */
static void check_all(struct vc_dset *s, const struct model *m)
{
	size_t i = 0;
	uint64_t from = 0;
	for (;;) {
		uint32_t n = vc_dset_collect(s, from, UINT64_MAX, out, 100);
		for (uint32_t j = 0; j < n; j++, i++)
			CHECK(i < m->n && out[j] == m->k[i]);
		if (n < 100)
			break;
		from = out[n - 1] + 1;
	}
	CHECK(i == m->n);
}

static void test_model(void)
{
	uint64_t rng = 0x5eed;
	struct vc_dset *s;
	struct model m = { 0 };
	CHECK_OK(vc_dset_create(&s));
	check_tree(s);
	CHECK(vc_dset_bytes(s) == 0);
	for (int round = 0; round < MODEL_ROUNDS; round++) {
		for (int a = 0; a < 4; a++)
			anchors[a] = t_rand(&rng) & TOP;
		/* fill, churn, drain */
		model_phase(s, &m, &rng, 70, 20000);
		/* boundaries: from and to at and around every special key */
		for (unsigned a = 0; a < nspecial; a++)
			for (unsigned b = 0; b < nspecial; b++) {
				check_next(s, &m, special[a], special[b]);
				check_collect(s, &m, special[a], special[b], 512);
			}
		check_all(s, &m);
		model_phase(s, &m, &rng, 40, 20000);
		model_phase(s, &m, &rng, 10, 20000);
		check_all(s, &m);
	}
	/* delete everything, in random order: every node is freed */
	while (m.n) {
		size_t i = t_rand(&rng) % m.n;
		uint64_t k = m.k[i];
		CHECK(vc_dset_del(s, k));
		m_del(&m, k);
		if (m.n % 97 == 0)
			check_tree(s);
	}
	check_tree(s);
	CHECK(vc_dset_count(s) == 0 && vc_dset_bytes(s) == 0 && atomic_load(&t_live) == 0);
	uint64_t k;
	CHECK(!vc_dset_next(s, 0, UINT64_MAX, &k));
	vc_dset_destroy(s);
	free(m.k);
}

/* One member at the far end, and a dense block with empty space beyond it:
 * next crosses 2^48 pages of nothing in a few node visits. */
static void test_far(void)
{
	struct vc_dset *s;
	uint64_t k;
	CHECK_OK(vc_dset_create(&s));
	CHECK(vc_dset_add(s, TOP) == 1);
	CHECK(s->height == VC_DSET_MAX_DEPTH);
	struct { uint64_t from, to; bool found; } q[] = {
		{ 0, UINT64_MAX, true }, { 0, TOP - 1, false },		/* one member */
		{ 1 << 16, TOP - 1, false }, { 1 << 16, TOP, true },	/* and a block */
	};
	for (unsigned i = 0; i < 4; i++) {
		if (i == 2)
			for (uint64_t p = 0; p < 1 << 16; p++)
				CHECK(vc_dset_add(s, p) == 1);
		atomic_store(&t_visits, 0);
		CHECK(vc_dset_next(s, q[i].from, q[i].to, &k) == q[i].found);
		CHECK(!q[i].found || k == TOP);
		CHECK(atomic_load(&t_visits) <= 2 * VC_DSET_MAX_DEPTH);
	}
	/* dropping the far member drops the levels it needed */
	CHECK(vc_dset_del(s, TOP));
	CHECK(s->height == 2);
	check_tree(s);
	vc_dset_destroy(s);
	CHECK(atomic_load(&t_live) == 0);
}

/* ---- 2. memory of a dense run ---- */

static void test_dense(void)
{
	struct vc_dset *s;
	const uint64_t n = 1 << 20, base = (1ull << 40) + 12345;
	CHECK_OK(vc_dset_create(&s));
	for (uint64_t p = base; p < base + n; p++)
		CHECK(vc_dset_add(s, p) == 1);
	check_tree(s);
	/* 257 leaf nodes of 4096 pages (1.016 bits a page), plus 10 above */
	double bits = (double)vc_dset_bytes(s) * 8 / (double)n;
	CHECK(bits < 1.1);
	/* walk it as a flush would */
	uint64_t from = 0, seen = 0;
	uint32_t got;
	while ((got = vc_dset_collect(s, from, UINT64_MAX, out, 512)) > 0) {
		for (uint32_t j = 0; j < got; j++)
			CHECK(out[j] == base + seen + j);
		seen += got;
		from = out[got - 1] + 1;
	}
	CHECK(seen == n);
	for (uint64_t p = base; p < base + n; p++)
		CHECK(vc_dset_del(s, p));
	CHECK(vc_dset_bytes(s) == 0 && atomic_load(&t_live) == 0);
	vc_dset_destroy(s);
}

/* ---- 3. errors ---- */

static void test_errors(void)
{
	struct vc_dset *s;
	uint64_t k = 7;
	CHECK_OK(vc_dset_create(&s));
	CHECK(vc_dset_add(s, 5) == 1);
	CHECK(vc_dset_add(s, 5) == 0);
	uint64_t bytes = vc_dset_bytes(s);
	static const uint64_t bad[] = { VC_DSET_LIMIT, VC_DSET_LIMIT + 1, 1ull << 63, UINT64_MAX };
	for (unsigned i = 0; i < 4; i++) {
		CHECK(vc_dset_add(s, bad[i]) == -EINVAL);
		CHECK(!vc_dset_del(s, bad[i]));
		CHECK(!vc_dset_test(s, bad[i]));
		CHECK(!vc_dset_next(s, bad[i], UINT64_MAX, &k));
		CHECK(vc_dset_collect(s, bad[i], UINT64_MAX, out, 10) == 0);
	}
	CHECK(vc_dset_count(s) == 1 && vc_dset_bytes(s) == bytes && s->height == 1);
	CHECK(vc_dset_next(s, 0, UINT64_MAX, &k) && k == 5);
	/* from > to */
	k = 7;
	CHECK(!vc_dset_next(s, 6, 5, &k) && k == 7);
	CHECK(!vc_dset_next(s, 5, 4, &k));
	CHECK(vc_dset_next(s, 5, 5, &k) && k == 5);
	CHECK(vc_dset_collect(s, 6, 5, out, 10) == 0);
	CHECK(vc_dset_collect(s, 5, 5, out, 0) == 0);
	CHECK(vc_dset_collect(s, 5, 5, out, 1) == 1 && out[0] == 5);
	check_tree(s);

	/* -ENOMEM: fail the Nth allocation of adds that grow the tree from
	 * height 1 to 7 (12 nodes), that extend a path, and into an empty set */
	static const uint64_t grow[] = { TOP, (1ull << 30) + 3, 4096 };
	for (unsigned g = 0; g < 3; g++) {
		unsigned failures = 0;
		for (long nth = 0;; nth++) {
			atomic_store(&t_fail_in, nth);
			int r = vc_dset_add(s, grow[g]);
			atomic_store(&t_fail_in, -1);
			if (r == 1)
				break;
			CHECK(r == -ENOMEM);
			failures++;
			CHECK(vc_dset_count(s) == 1 + g && vc_dset_bytes(s) == bytes);
			CHECK(!vc_dset_test(s, grow[g]));
			check_tree(s);
		}
		CHECK(failures >= 1);
		bytes = vc_dset_bytes(s);
		check_tree(s);
	}
	CHECK(vc_dset_count(s) == 4);
	struct vc_dset *e;
	CHECK_OK(vc_dset_create(&e));
	atomic_store(&t_fail_in, 0);
	CHECK(vc_dset_add(e, 123) == -ENOMEM);
	atomic_store(&t_fail_in, -1);
	CHECK(vc_dset_count(e) == 0 && vc_dset_bytes(e) == 0 && !vc_dset_test(e, 123));
	vc_dset_destroy(e);
	vc_dset_destroy(s);
	CHECK(atomic_load(&t_live) == 0);
}

/* ---- 4. concurrent ---- */

/* Keys: regions of RSPAN pages at 0 and 2^40 (offset off % 5 == t belongs to
 * writer t < 4, == 4 is stable), and TOP - t for writer t. */
#define WRITERS 4
#define READERS 2
#define RSPAN (1u << 14)
#define WRITER_OPS 300000
static const uint64_t region[2] = { 0, 1ull << 40 };

struct writer {
	pthread_t th;
	unsigned id;
	bool has[2][RSPAN]; /* the writer's own keys present now */
	bool has_top;
};
static struct vc_dset *cs;
static atomic_int writers_left;
static pthread_barrier_t start; /* all threads begin together */

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	uint64_t rng = 0x1234567 + w->id;
	pthread_barrier_wait(&start);
	for (unsigned op = 0; op < WRITER_OPS; op++) {
		uint64_t r = t_rand(&rng);
		bool *has;
		uint64_t k;
		if ((r >> 1) % 64 == 0) {
			k = TOP - w->id;
			has = &w->has_top;
		} else {
			unsigned reg = (unsigned)(r >> 8) & 1;
			uint32_t off = (uint32_t)((r >> 9) % (RSPAN / 5)) * 5 + w->id;
			k = region[reg] + off;
			has = &w->has[reg][off];
		}
		if ((r >> 40) % 8 == 0) {
			CHECK(vc_dset_test(cs, k) == *has);
		} else if (r & 1) {
			CHECK(vc_dset_add(cs, k) == !*has);
			*has = true;
		} else {
			CHECK(vc_dset_del(cs, k) == *has);
			*has = false;
		}
	}
	atomic_fetch_sub(&writers_left, 1);
	return NULL;
}

static bool in_universe(uint64_t k)
{
	for (unsigned r = 0; r < 2; r++)
		if (k >= region[r] && k - region[r] < RSPAN)
			return true;
	return k > TOP - WRITERS;
}

/* The smallest stable key >= x, or UINT64_MAX. */
static uint64_t stable_from(uint64_t x)
{
	for (unsigned r = 0; r < 2; r++) {
		if (x < region[r])
			x = region[r];
		uint64_t off = x - region[r];
		if (off >= RSPAN)
			continue;
		off += (4 + 5 - off % 5) % 5;
		if (off < RSPAN)
			return region[r] + off;
	}
	return UINT64_MAX;
}

static void *reader_main(void *arg)
{
	uint64_t rng = 0x777 + (uint64_t)(uintptr_t)arg, buf[256];
	unsigned rounds = 0;
	pthread_barrier_wait(&start);
	while (atomic_load(&writers_left) > 0 || rounds < 100) {
		rounds++;
		uint64_t r = t_rand(&rng);
		uint64_t from = r % 3 == 2 ? TOP - (r >> 8) % 8 : region[r % 3] + (r >> 8) % RSPAN;
		uint64_t to = (r >> 30) % 4 == 0 ? UINT64_MAX : from + (r >> 32) % 3000;
		uint64_t st = stable_from(from), k;
		if (r >> 62 & 1) {
			bool got = vc_dset_next(cs, from, to, &k);
			CHECK(!got || (k >= from && k <= to && in_universe(k)));
			if (st != UINT64_MAX && st <= to) /* present throughout */
				CHECK(got && k <= st);
		} else {
			uint32_t n = vc_dset_collect(cs, from, to, buf, 256);
			for (uint32_t i = 0; i < n; i++) {
				CHECK(buf[i] >= from && buf[i] <= to && in_universe(buf[i]));
				CHECK(i == 0 || buf[i] > buf[i - 1]);
			}
			/* every stable key up to where the batch ends is in it */
			uint64_t end = n == 256 ? buf[255] : to;
			uint32_t i = 0;
			for (; st != UINT64_MAX && st <= end; st = stable_from(st + 1)) {
				while (i < n && buf[i] < st)
					i++;
				CHECK(i < n && buf[i] == st);
			}
		}
	}
	return NULL;
}

static void test_concurrent(void)
{
	static struct writer w[WRITERS];
	pthread_t rd[READERS];
	struct model m = { 0 };
	CHECK_OK(vc_dset_create(&cs));
	for (unsigned r = 0; r < 2; r++)
		for (uint32_t off = 4; off < RSPAN; off += 5) {
			CHECK(vc_dset_add(cs, region[r] + off) == 1);
			m_add(&m, region[r] + off);
		}
	atomic_store(&writers_left, WRITERS);
	CHECK(pthread_barrier_init(&start, NULL, WRITERS + READERS) == 0);
	for (unsigned t = 0; t < WRITERS; t++) {
		w[t].id = t;
		CHECK(pthread_create(&w[t].th, NULL, writer_main, &w[t]) == 0);
	}
	for (uintptr_t t = 0; t < READERS; t++)
		CHECK(pthread_create(&rd[t], NULL, reader_main, (void *)t) == 0);
	for (unsigned t = 0; t < WRITERS; t++)
		CHECK(pthread_join(w[t].th, NULL) == 0);
	for (unsigned t = 0; t < READERS; t++)
		CHECK(pthread_join(rd[t], NULL) == 0);
	pthread_barrier_destroy(&start);
	for (unsigned t = 0; t < WRITERS; t++) {
		for (unsigned r = 0; r < 2; r++)
			for (uint32_t off = 0; off < RSPAN; off++)
				if (w[t].has[r][off])
					m_add(&m, region[r] + off);
		if (w[t].has_top)
			m_add(&m, TOP - t);
	}
	CHECK(vc_dset_count(cs) == m.n);
	check_all(cs, &m);
	check_tree(cs);
	vc_dset_destroy(cs);
	free(m.k);
}

int main(void)
{
	atomic_store(&t_fail_in, -1);
	init_special();
	test_errors();
	test_far();
	test_model();
	test_dense();
	test_concurrent();
	CHECK(atomic_load(&t_live) == 0);
	printf("dirtyset: ok\n");
	return 0;
}
