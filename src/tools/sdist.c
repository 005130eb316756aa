#include "tools/sdist.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Smallest slot array: below this, compaction would run too often to pay. */
#define MIN_CAP 1024

static void fen_add(struct vc_sdist *s, uint64_t slot, int32_t v)
{
	for (uint64_t i = slot + 1; i <= s->cap; i += i & (~i + 1))
		s->fen[i - 1] += (uint32_t)v;
}

/* Live slots in [0, slot]. */
static uint64_t fen_sum(const struct vc_sdist *s, uint64_t slot)
{
	uint64_t r = 0;
	for (uint64_t i = slot + 1; i > 0; i -= i & (~i + 1))
		r += s->fen[i - 1];
	return r;
}

static int alloc_slots(struct vc_sdist *s, uint64_t cap)
{
	uint32_t *f = calloc(cap, sizeof *f);
	uint64_t *k = malloc(cap * sizeof *k);
	uint8_t *l = calloc(cap, 1);
	if (!f || !k || !l) {
		free(f);
		free(k);
		free(l);
		return -ENOMEM;
	}
	s->fen = f;
	s->key_at = k;
	s->live = l;
	s->cap = cap;
	return 0;
}

int vc_sdist_init(struct vc_sdist *s)
{
	memset(s, 0, sizeof *s);
	if (vc_keymap_init(&s->map, 0) < 0)
		return -ENOMEM;
	if (alloc_slots(s, MIN_CAP) < 0) {
		vc_keymap_fini(&s->map);
		return -ENOMEM;
	}
	return 0;
}

void vc_sdist_fini(struct vc_sdist *s)
{
	vc_keymap_fini(&s->map);
	free(s->fen);
	free(s->key_at);
	free(s->live);
	memset(s, 0, sizeof *s);
}

/* Renumbers the live slots 0..nlive-1 in time order into arrays of
 * 2 x nlive slots (at least MIN_CAP): O(cap), once per >= nlive accesses. */
static int compact(struct vc_sdist *s)
{
	uint64_t ncap = 2 * s->nlive + 2;
	if (ncap < MIN_CAP)
		ncap = MIN_CAP;
	uint32_t *of = s->fen;
	uint64_t *ok = s->key_at, ocap = s->cap;
	uint8_t *ol = s->live;
	if (alloc_slots(s, ncap) < 0) {
		s->fen = of;
		s->key_at = ok;
		s->live = ol;
		s->cap = ocap;
		return -ENOMEM;
	}
	uint64_t j = 0;
	for (uint64_t t = 0; t < ocap; t++) {
		if (!ol[t])
			continue;
		s->key_at[j] = ok[t];
		s->live[j] = 1;
		*vc_keymap_get(&s->map, ok[t]) = j;
		j++;
	}
	/* Linear Fenwick build: each node adds itself to its parent. */
	for (uint64_t i = 1; i <= ncap; i++) {
		s->fen[i - 1] += s->live[i - 1];
		uint64_t p = i + (i & (~i + 1));
		if (p <= ncap)
			s->fen[p - 1] += s->fen[i - 1];
	}
	s->now = j;
	free(of);
	free(ok);
	free(ol);
	return 0;
}

int64_t vc_sdist_access(struct vc_sdist *s, uint64_t key)
{
	if (s->now == s->cap && compact(s) < 0)
		return -ENOMEM;
	uint64_t *slot = vc_keymap_get(&s->map, key);
	int64_t d = 0;
	uint64_t t = s->now++;
	if (slot) {
		uint64_t prev = *slot;
		d = (int64_t)(s->nlive - fen_sum(s, prev)) + 1;
		fen_add(s, prev, -1);
		s->live[prev] = 0;
		*slot = t;
	} else {
		if (vc_keymap_put(&s->map, key, t) < 0)
			return -ENOMEM;
		s->nlive++;
	}
	fen_add(s, t, 1);
	s->live[t] = 1;
	s->key_at[t] = key;
	return d;
}

void vc_sdist_forget(struct vc_sdist *s, uint64_t key)
{
	uint64_t *slot = vc_keymap_get(&s->map, key);
	if (!slot)
		return;
	fen_add(s, *slot, -1);
	s->live[*slot] = 0;
	vc_keymap_del(&s->map, key);
	s->nlive--;
}

size_t vc_sdist_bytes(const struct vc_sdist *s)
{
	return (size_t)(s->map.mask + 1) * 16 + (size_t)s->cap * (4 + 8 + 1);
}
