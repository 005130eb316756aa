/* Ghost lists; see ghost.h. Entries live in a fixed pool and are linked
 * twice by index: into a doubly linked age list (oldest at `old`) and into
 * a hash chain. Index NIL ends a list. */
#include "policy/ghost.h"

#include <errno.h>
#include <stdlib.h>

#include "base/hash.h"

#define NIL UINT32_MAX

struct gent {
	uint64_t key;
	uint32_t older, newer; /* age list */
	uint32_t chain;        /* hash chain, or the free list */
	uint32_t mark;         /* vc_ghost_mark's bit; 0 when added */
};

struct vc_ghost {
	uint64_t cap, n;
	uint32_t old, young, free;
	uint64_t mask;
	uint32_t *bucket;
	struct gent *e;
};

struct vc_ghost *vc_ghost_create(uint64_t cap)
{
	if (cap >= NIL)
		return NULL;
	struct vc_ghost *g = calloc(1, sizeof *g);
	if (!g)
		return NULL;
	uint64_t nb = 2;
	while (nb < 2 * (cap + 1))
		nb *= 2;
	g->cap = cap;
	g->mask = nb - 1;
	g->bucket = malloc(nb * sizeof *g->bucket);
	g->e = malloc((cap + 1) * sizeof *g->e);
	if (!g->bucket || !g->e) {
		vc_ghost_destroy(g);
		return NULL;
	}
	for (uint64_t i = 0; i < nb; i++)
		g->bucket[i] = NIL;
	for (uint64_t i = 0; i <= cap; i++)
		g->e[i].chain = i + 1 <= cap ? (uint32_t)(i + 1) : NIL;
	g->free = 0;
	g->old = g->young = NIL;
	return g;
}

void vc_ghost_destroy(struct vc_ghost *g)
{
	if (!g)
		return;
	free(g->bucket);
	free(g->e);
	free(g);
}

static uint32_t *slot_of(const struct vc_ghost *g, uint64_t key)
{
	return &g->bucket[vc_mix64(key) & g->mask];
}

/* Unlinks entry i from its chain and the age list and frees it. */
static void drop(struct vc_ghost *g, uint32_t i)
{
	struct gent *e = &g->e[i];
	uint32_t *pp = slot_of(g, e->key);
	while (*pp != i)
		pp = &g->e[*pp].chain;
	*pp = e->chain;
	if (e->older != NIL)
		g->e[e->older].newer = e->newer;
	else
		g->old = e->newer;
	if (e->newer != NIL)
		g->e[e->newer].older = e->older;
	else
		g->young = e->older;
	e->chain = g->free;
	g->free = i;
	g->n--;
}

static uint32_t find(const struct vc_ghost *g, uint64_t key)
{
	uint32_t i = *slot_of(g, key);
	while (i != NIL && g->e[i].key != key)
		i = g->e[i].chain;
	return i;
}

void vc_ghost_add(struct vc_ghost *g, uint64_t key)
{
	if (g->cap == 0)
		return;
	if (g->n == g->cap + 1)
		drop(g, g->old);
	uint32_t i = g->free;
	struct gent *e = &g->e[i];
	g->free = e->chain;
	e->key = key;
	e->mark = 0;
	uint32_t *b = slot_of(g, key);
	e->chain = *b;
	*b = i;
	e->newer = NIL;
	e->older = g->young;
	if (g->young != NIL)
		g->e[g->young].newer = i;
	else
		g->old = i;
	g->young = i;
	g->n++;
}

bool vc_ghost_take(struct vc_ghost *g, uint64_t key)
{
	uint32_t i = find(g, key);
	if (i == NIL)
		return false;
	drop(g, i);
	return true;
}

int vc_ghost_mark(struct vc_ghost *g, uint64_t key)
{
	uint32_t i = find(g, key);
	if (i == NIL)
		return -ENOENT;
	int was = (int)g->e[i].mark;
	g->e[i].mark = 1;
	return was;
}

bool vc_ghost_has(const struct vc_ghost *g, uint64_t key)
{
	return find(g, key) != NIL;
}

void vc_ghost_trim(struct vc_ghost *g)
{
	while (g->n > g->cap)
		drop(g, g->old);
}

void vc_ghost_pop(struct vc_ghost *g)
{
	if (g->n)
		drop(g, g->old);
}

uint64_t vc_ghost_count(const struct vc_ghost *g)
{
	return g->n;
}
