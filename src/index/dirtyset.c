/* Dirty set: a 64-ary radix tree of bitmaps with summary masks.
 *
 * ---- Layout ----
 *
 * A page number splits into 6-bit digits. A node of height g (1..7) has a
 * 64-bit summary mask and 64 entries, indexed by digit g of the key (bits
 * 6g..6g+5); a node of height 1 holds 64 leaf words (bit pno & 63 of word
 * digit 1 is the page), a higher node holds 64 pointers to nodes of height
 * g - 1. Both kinds are one struct of VC_DSET_NODE_BYTES, so a node of height
 * g spans 2^(6g+6) pages: 4096 at height 1, 2^48 at height 7.
 *
 * Each mask answers one question in O(1):
 *   - a node's mask: which of my 64 entries hold any member? Bit i is set
 *     iff entry i is non-empty (a non-zero word, or a child node). ctz of
 *     mask & (~0 << i) is the first non-empty entry at or after i, so a
 *     walk steps over up to 63 empty subtrees (up to 63 * 2^(6g) pages) in
 *     one instruction, and mask == 0 says the node is empty: it is freed.
 *   - a leaf word: which of these 64 pages are members? ctz of the word
 *     shifted past `from` is the next member of the word.
 *   - the root's mask == 1: are all members in its first 1/64? Then the
 *     root is dropped and its child 0 becomes the root.
 *
 * ---- Invariants (under s->lock) ----
 *
 *   - root == NULL iff the set is empty iff height == 0.
 *   - Every node's mask is non-zero (empty nodes are freed at once), and an
 *     entry whose mask bit is clear is 0 (word) or NULL (pointer): a node
 *     comes from calloc and del clears what it empties.
 *   - height is the smallest h >= 1 with every member < 2^(6h+6): add grows
 *     the tree by new roots (old root as child 0) when a larger key comes,
 *     del drops roots whose mask is 1. So the depth of every walk is set by
 *     the largest member, not by the 48-bit key space: a 4 TiB volume of
 *     4 KiB pages (2^30 pages) is 4 levels, not 7.
 *   - count is the number of members and nodes the number of nodes; both
 *     are written under the lock and read without it.
 *
 * ---- Costs ----
 *
 * test, add, del: one node per level. next: the path of `from` down to
 * where it fails, then the leftmost path of the first non-empty sibling
 * found by ctz: at most two nodes per level, whatever the range. collect:
 * the nodes that hold the members it returns, plus the two boundary paths.
 * Memory: a dense run costs one node per 4096 pages (1.02 bits a page), a
 * lone member one node per level (7 * 520 bytes at most).
 *
 * Allocation: add counts the nodes it needs, allocates them all, and only
 * then links them in, so -ENOMEM leaves the set as it was.
 */
#include "index/dirtyset.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/error.h"

struct vc_dset_node {
	uint64_t mask; /* bit i: entry i non-empty */
	union {
		struct vc_dset_node *child[64]; /* height >= 2 */
		uint64_t word[64];              /* height 1: one bit per page */
	};
};
_Static_assert(sizeof(struct vc_dset_node) == VC_DSET_NODE_BYTES, "node size is published");

struct vc_dset {
	pthread_mutex_t lock;
	struct vc_dset_node *root; /* NULL iff empty */
	unsigned height;           /* levels of nodes, 0 iff empty */
	_Atomic uint64_t count;    /* members */
	_Atomic uint64_t nodes;    /* nodes held */
};

/* Hooks for tests/test_dirtyset.c, which compiles this file into itself:
 * allocation that can be made to fail, and a count of nodes visited. */
#ifndef VC_DSET_ALLOC
#define VC_DSET_ALLOC() calloc(1, sizeof(struct vc_dset_node))
#endif
#ifndef VC_DSET_FREE
#define VC_DSET_FREE(p) free(p)
#endif
#ifndef VC_DSET_VISIT
#define VC_DSET_VISIT() ((void)0)
#endif

/* Digit g of a key: its entry in a node of height g. */
static inline unsigned digit(uint64_t pno, unsigned g)
{
	return (unsigned)(pno >> (6 * g)) & 63;
}

/* Pages spanned by a node of height g (and by a tree of height g). */
static inline uint64_t span(unsigned g)
{
	return 1ull << (6 * g + 6);
}

/* The height a tree needs to hold pno (< VC_DSET_LIMIT). */
static unsigned height_for(uint64_t pno)
{
	unsigned h = 1;
	while (pno >= span(h))
		h++;
	return h;
}

static inline unsigned ctz(uint64_t x)
{
	return (unsigned)__builtin_ctzll(x);
}

static void free_tree(struct vc_dset_node *n, unsigned g)
{
	if (g > 1)
		for (uint64_t m = n->mask; m; m &= m - 1)
			free_tree(n->child[ctz(m)], g - 1);
	VC_DSET_FREE(n);
}

int vc_dset_create(struct vc_dset **out)
{
	struct vc_dset *s = calloc(1, sizeof *s);
	if (!s)
		return vc_err(-ENOMEM, "dirtyset: out of memory");
	int r = pthread_mutex_init(&s->lock, NULL);
	if (r) {
		free(s);
		return vc_err(-r, "dirtyset: cannot create the lock");
	}
	*out = s;
	return 0;
}

void vc_dset_destroy(struct vc_dset *s)
{
	if (!s)
		return;
	if (s->root)
		free_tree(s->root, s->height);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* ---- add ---- */

/* Nodes that adding pno will allocate (0 if it is present: *present). */
static unsigned nodes_needed(const struct vc_dset *s, uint64_t pno, bool *present)
{
	unsigned need = height_for(pno), h = s->height;
	*present = false;
	if (!s->root)
		return need;
	/* New roots from h + 1 up to need, and a fresh path below the top
	 * one: pno's top digit is non-zero, so it shares nothing with the
	 * old tree. */
	if (need > h)
		return (need - h) + (need - 1);
	const struct vc_dset_node *n = s->root;
	for (unsigned g = h; g > 1; g--) {
		unsigned i = digit(pno, g);
		if (!(n->mask >> i & 1))
			return g - 1;
		n = n->child[i];
	}
	*present = n->word[digit(pno, 1)] >> (pno & 63) & 1;
	return 0;
}

static int add_locked(struct vc_dset *s, uint64_t pno)
{
	bool present;
	unsigned nnew = nodes_needed(s, pno, &present);
	if (present)
		return 0;
	struct vc_dset_node *spare[2 * VC_DSET_MAX_DEPTH];
	assert(nnew <= 2 * VC_DSET_MAX_DEPTH);
	for (unsigned k = 0; k < nnew; k++) {
		spare[k] = VC_DSET_ALLOC();
		if (!spare[k]) {
			while (k--)
				VC_DSET_FREE(spare[k]);
			return -ENOMEM;
		}
	}
	/* From here on nothing fails. */
	unsigned used = 0, need = height_for(pno);
	if (!s->root) {
		s->root = spare[used++];
		s->height = need;
	}
	while (s->height < need) {
		struct vc_dset_node *r = spare[used++];
		r->mask = 1;
		r->child[0] = s->root;
		s->root = r;
		s->height++;
	}
	struct vc_dset_node *n = s->root;
	for (unsigned g = s->height; g > 1; g--) {
		unsigned i = digit(pno, g);
		if (!(n->mask >> i & 1)) {
			n->child[i] = spare[used++];
			n->mask |= 1ull << i;
		}
		n = n->child[i];
	}
	unsigned i = digit(pno, 1);
	n->word[i] |= 1ull << (pno & 63);
	n->mask |= 1ull << i;
	assert(used == nnew);
	atomic_store_explicit(&s->count, atomic_load_explicit(&s->count, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_store_explicit(&s->nodes, atomic_load_explicit(&s->nodes, memory_order_relaxed) + nnew,
			      memory_order_relaxed);
	return 1;
}

int vc_dset_add(struct vc_dset *s, uint64_t pno)
{
	if (pno >= VC_DSET_LIMIT)
		return vc_err(-EINVAL, "dirtyset: page %llu is past the 48-bit page space",
			      (unsigned long long)pno);
	pthread_mutex_lock(&s->lock);
	int r = add_locked(s, pno);
	pthread_mutex_unlock(&s->lock);
	if (r == -ENOMEM)
		return vc_err(r, "dirtyset: out of memory adding page %llu", (unsigned long long)pno);
	return r;
}

/* ---- del and test ---- */

static bool del_locked(struct vc_dset *s, uint64_t pno)
{
	unsigned h = s->height;
	if (!s->root || pno >= span(h))
		return false;
	/* path[g - 1]: the node of height g on pno's path. */
	struct vc_dset_node *path[VC_DSET_MAX_DEPTH];
	struct vc_dset_node *n = s->root;
	for (unsigned g = h; g > 1; g--) {
		path[g - 1] = n;
		unsigned i = digit(pno, g);
		if (!(n->mask >> i & 1))
			return false;
		n = n->child[i];
	}
	path[0] = n;
	uint64_t *w = &n->word[digit(pno, 1)], bit = 1ull << (pno & 63);
	if (!(*w & bit))
		return false;
	*w &= ~bit;
	/* If the word emptied, clear its entry, and free each node that this
	 * empties in turn, clearing its entry in its parent. */
	uint64_t nodes = atomic_load_explicit(&s->nodes, memory_order_relaxed);
	for (unsigned g = 1; g <= h && (g > 1 || !*w); g++) {
		n = path[g - 1];
		unsigned i = digit(pno, g);
		n->mask &= ~(1ull << i);
		if (g > 1)
			n->child[i] = NULL;
		if (n->mask)
			break;
		VC_DSET_FREE(n);
		nodes--;
		if (g == h) {
			s->root = NULL;
			s->height = 0;
		}
	}
	/* Keep the height the smallest that holds the largest member. */
	while (s->height > 1 && s->root->mask == 1) {
		struct vc_dset_node *old = s->root;
		s->root = old->child[0];
		s->height--;
		VC_DSET_FREE(old);
		nodes--;
	}
	atomic_store_explicit(&s->nodes, nodes, memory_order_relaxed);
	atomic_store_explicit(&s->count, atomic_load_explicit(&s->count, memory_order_relaxed) - 1,
			      memory_order_relaxed);
	return true;
}

bool vc_dset_del(struct vc_dset *s, uint64_t pno)
{
	pthread_mutex_lock(&s->lock);
	bool r = del_locked(s, pno);
	pthread_mutex_unlock(&s->lock);
	return r;
}

bool vc_dset_test(struct vc_dset *s, uint64_t pno)
{
	bool r = false;
	pthread_mutex_lock(&s->lock);
	const struct vc_dset_node *n = s->root;
	if (n && pno < span(s->height)) {
		unsigned g = s->height;
		for (; g > 1 && (n->mask >> digit(pno, g) & 1); g--)
			n = n->child[digit(pno, g)];
		r = g == 1 && (n->word[digit(pno, 1)] >> (pno & 63) & 1);
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

/* ---- next and collect ---- */

/* The smallest member of node n (height g, first page base). */
static uint64_t node_min(const struct vc_dset_node *n, unsigned g, uint64_t base)
{
	for (;; g--) {
		VC_DSET_VISIT();
		unsigned j = ctz(n->mask);
		base |= (uint64_t)j << (6 * g);
		if (g == 1)
			return base | ctz(n->word[j]);
		n = n->child[j];
	}
}

/* The smallest member >= from of node n (height g), where from lies in
 * n's span. At most one failed descent per level, then one node_min. */
static bool node_next(const struct vc_dset_node *n, unsigned g, uint64_t from, uint64_t *out)
{
	VC_DSET_VISIT();
	unsigned i = digit(from, g);
	if (n->mask >> i & 1) {
		if (g == 1) {
			uint64_t w = n->word[i] >> (from & 63);
			if (w) {
				*out = from + ctz(w);
				return true;
			}
		} else if (node_next(n->child[i], g - 1, from, out)) {
			return true;
		}
	}
	uint64_t later = n->mask & (~1ull << i); /* entries after i */
	if (!later)
		return false;
	unsigned j = ctz(later);
	uint64_t base = (from & ~(span(g) - 1)) | (uint64_t)j << (6 * g);
	*out = g == 1 ? base | ctz(n->word[j]) : node_min(n->child[j], g - 1, base);
	return true;
}

bool vc_dset_next(struct vc_dset *s, uint64_t from, uint64_t to, uint64_t *out)
{
	if (from > to)
		return false;
	bool r = false;
	uint64_t k;
	pthread_mutex_lock(&s->lock);
	if (s->root && from < span(s->height) && node_next(s->root, s->height, from, &k) &&
	    k <= to) {
		*out = k;
		r = true;
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

struct walk {
	uint64_t *out;
	uint64_t to;
	uint32_t n, max;
};

/* Appends the members >= from of node n (height g) in order; false once
 * past w->to or w->max members (the walk is over). Enters only children
 * that start at or before w->to. */
static bool node_collect(const struct vc_dset_node *n, unsigned g, uint64_t from, struct walk *w)
{
	VC_DSET_VISIT();
	unsigned i = digit(from, g);
	uint64_t base = from & ~(span(g) - 1);
	for (uint64_t m = n->mask & (~0ull << i); m; m &= m - 1) {
		unsigned j = ctz(m);
		uint64_t cbase = base | (uint64_t)j << (6 * g);
		if (cbase > w->to)
			return false;
		uint64_t cfrom = j == i ? from : cbase;
		if (g > 1) {
			if (!node_collect(n->child[j], g - 1, cfrom, w))
				return false;
			continue;
		}
		for (uint64_t b = n->word[j] >> (cfrom & 63) << (cfrom & 63); b; b &= b - 1) {
			uint64_t k = cbase | ctz(b);
			if (k > w->to)
				return false;
			w->out[w->n++] = k;
			if (w->n == w->max)
				return false;
		}
	}
	return true;
}

uint32_t vc_dset_collect(struct vc_dset *s, uint64_t from, uint64_t to, uint64_t *out,
			 uint32_t max)
{
	if (from > to || max == 0)
		return 0;
	struct walk w = { .out = out, .to = to, .n = 0, .max = max };
	pthread_mutex_lock(&s->lock);
	if (s->root && from < span(s->height))
		node_collect(s->root, s->height, from, &w);
	pthread_mutex_unlock(&s->lock);
	return w.n;
}

uint64_t vc_dset_count(const struct vc_dset *s)
{
	return atomic_load_explicit(&s->count, memory_order_relaxed);
}

uint64_t vc_dset_bytes(const struct vc_dset *s)
{
	return atomic_load_explicit(&s->nodes, memory_order_relaxed) * VC_DSET_NODE_BYTES;
}
