#include "tools/hsdist.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define HS_EMPTY UINT32_MAX

/* The Fenwick tree is fen[1..nwords]; fen[0] stays 0 and fen[nwords + 1]
 * takes the writes that fall off the end, so both walks run a fixed
 * fen_steps iterations with no data-dependent branch (a walk's length is
 * the popcount of an index: unpredictable, and mispredictions were most of
 * an access's cost).
 *
 * The tree counts the sealed words, [0, sealed): the word that `now` is
 * in, the only one that gains slots, is counted by its popcount alone and
 * joins the tree when `now` leaves it. So an access walks the tree twice
 * (the rank of its previous slot, and that slot's -1), not three times,
 * plus one walk per 64 accesses. */
static void fen_add(struct vc_hsdist *s, uint32_t w, uint32_t v)
{
	uint32_t i = w + 1, n = s->nwords;
	for (uint32_t k = 0; k < s->fen_steps; k++) {
		s->fen[i <= n ? i : n + 1] += v;
		i += i & (~i + 1);
	}
}

/* Live slots in words [0, w). */
static uint32_t fen_prefix(const struct vc_hsdist *s, uint32_t w)
{
	uint32_t r = 0, i = w;
	for (uint32_t k = 0; k < s->fen_steps; k++) {
		r += s->fen[i];
		i &= i - 1;
	}
	return r;
}

/* Set bits of x (no popcnt instruction in the x86-64 baseline, and
 * libgcc's is a call). */
static uint32_t popcount64(uint64_t x)
{
	x -= (x >> 1) & 0x5555555555555555ull;
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (uint32_t)((x * 0x0101010101010101ull) >> 56);
}

/* Live slots in [0, slot]. */
static uint32_t rank(const struct vc_hsdist *s, uint32_t slot)
{
	uint32_t w = slot >> 6, b = slot & 63;
	uint64_t mask = ~0ull >> (63 - b);
	return fen_prefix(s, w) + popcount64(s->bits[w] & mask);
}

static void clear_live(struct vc_hsdist *s, uint32_t slot)
{
	s->bits[slot >> 6] &= ~(1ull << (slot & 63));
	if (slot >> 6 < s->sealed)
		fen_add(s, slot >> 6, (uint32_t)-1);
}

int vc_hsdist_init(struct vc_hsdist *s, uint64_t max)
{
	memset(s, 0, sizeof *s);
	if (max < 1 || max >= (1u << 30))
		return -EINVAL;
	uint64_t keys = max + 1, tcap = 64;
	while (tcap < 2 * max) /* at most (max + 1) / (2 max) full */
		tcap *= 2;
	/* Twice the keys in slots: a renumbering frees at least half of them,
	 * so it runs at most once per (max + 1) accesses. */
	uint64_t nwords = (2 * keys + 63) / 64;
	if (nwords < 16)
		nwords = 16;
	s->tab = malloc(tcap * sizeof *s->tab);
	s->bits = calloc(nwords, sizeof *s->bits);
	s->fen = calloc(nwords + 2, sizeof *s->fen);
	s->h_at = malloc(nwords * 64 * sizeof *s->h_at);
	if (!s->tab || !s->bits || !s->fen || !s->h_at) {
		vc_hsdist_fini(s);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < tcap; i++)
		s->tab[i].slot = HS_EMPTY;
	s->tmask = tcap - 1;
	s->nwords = (uint32_t)nwords;
	while ((1ull << s->fen_steps) <= nwords)
		s->fen_steps++;
	s->max = (uint32_t)max;
	return 0;
}

void vc_hsdist_fini(struct vc_hsdist *s)
{
	free(s->tab);
	free(s->bits);
	free(s->fen);
	free(s->h_at);
	memset(s, 0, sizeof *s);
}

/* The entry of h, or the free entry where it would go. */
static struct vc_hsent *find(const struct vc_hsdist *s, uint64_t h)
{
	uint64_t i = h & s->tmask;
	while (s->tab[i].slot != HS_EMPTY && s->tab[i].h != h)
		i = (i + 1) & s->tmask;
	return &s->tab[i];
}

/* Renumbers the live slots 0..nlive-1 in time order, in place (a live
 * slot only moves down): O(slots + nlive probes). */
static void compact(struct vc_hsdist *s)
{
	uint32_t j = 0;
	for (uint32_t w = 0; w < s->nwords; w++) {
		for (uint64_t b = s->bits[w]; b; b &= b - 1) {
			uint32_t slot = w * 64 + (uint32_t)__builtin_ctzll(b);
			uint64_t h = s->h_at[slot];
			find(s, h)->slot = j;
			s->h_at[j++] = h;
		}
	}
	memset(s->bits, 0, s->nwords * sizeof *s->bits);
	for (uint32_t i = 0; i < j / 64; i++)
		s->bits[i] = ~0ull;
	if (j & 63)
		s->bits[j / 64] = (1ull << (j & 63)) - 1;
	/* Linear Fenwick build over the sealed words: each node adds itself
	 * to its parent. */
	s->sealed = j >> 6;
	memset(s->fen, 0, (s->nwords + 2) * sizeof *s->fen);
	for (uint32_t i = 1; i <= s->nwords; i++) {
		if (i <= s->sealed)
			s->fen[i] += popcount64(s->bits[i - 1]);
		uint32_t p = i + (i & (~i + 1));
		if (p <= s->nwords)
			s->fen[p] += s->fen[i];
	}
	s->now = j;
}

uint64_t vc_hsdist_access(struct vc_hsdist *s, uint64_t h)
{
	if (s->now == s->nwords * 64)
		compact(s);
	struct vc_hsent *e = find(s, h);
	uint32_t t = s->now++;
	if (t >> 6 != s->sealed) { /* `now` left its word: seal it */
		fen_add(s, s->sealed, popcount64(s->bits[s->sealed]));
		s->sealed = t >> 6;
	}
	uint64_t d = 0;
	if (e->slot != HS_EMPTY) {
		d = (uint64_t)(s->nlive - rank(s, e->slot)) + 1;
		clear_live(s, e->slot);
	} else {
		e->h = h;
		s->nlive++;
	}
	e->slot = t;
	s->bits[t >> 6] |= 1ull << (t & 63);
	s->h_at[t] = h;
	return d;
}

void vc_hsdist_forget(struct vc_hsdist *s, uint64_t h)
{
	struct vc_hsent *e = find(s, h);
	if (e->slot == HS_EMPTY)
		return;
	clear_live(s, e->slot);
	s->nlive--;
	/* Backward-shift deletion: move up each later entry of the run whose
	 * home is not between the hole and it, so no lookup stops early. */
	uint64_t i = (uint64_t)(e - s->tab), j = i;
	for (;;) {
		j = (j + 1) & s->tmask;
		if (s->tab[j].slot == HS_EMPTY)
			break;
		uint64_t k = s->tab[j].h & s->tmask;
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		s->tab[i] = s->tab[j];
		i = j;
	}
	s->tab[i].slot = HS_EMPTY;
}

size_t vc_hsdist_bytes(const struct vc_hsdist *s)
{
	return (size_t)(s->tmask + 1) * sizeof *s->tab +
	       (size_t)s->nwords * (sizeof *s->bits + 64 * sizeof *s->h_at) +
	       (size_t)(s->nwords + 2) * sizeof *s->fen;
}
