#include "tools/keymap.h"

#include <errno.h>
#include <stdlib.h>

#include "base/hash.h"

#define EMPTY UINT64_MAX

static int alloc_table(struct vc_keymap *m, uint64_t slots)
{
	uint64_t *k = malloc(slots * sizeof *k), *v = malloc(slots * sizeof *v);
	if (!k || !v) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < slots; i++)
		k[i] = EMPTY;
	m->keys = k;
	m->vals = v;
	m->mask = slots - 1;
	return 0;
}

int vc_keymap_init(struct vc_keymap *m, uint64_t hint)
{
	uint64_t slots = 16;
	while (slots < 2 * hint)
		slots *= 2;
	m->n = 0;
	m->has_max = false;
	return alloc_table(m, slots);
}

void vc_keymap_fini(struct vc_keymap *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = m->vals = NULL;
}

uint64_t *vc_keymap_get(const struct vc_keymap *m, uint64_t key)
{
	if (key == EMPTY)
		return m->has_max ? (uint64_t *)&m->max_val : NULL;
	for (uint64_t i = vc_mix64(key) & m->mask;; i = (i + 1) & m->mask) {
		if (m->keys[i] == key)
			return &m->vals[i];
		if (m->keys[i] == EMPTY)
			return NULL;
	}
}

static void place(struct vc_keymap *m, uint64_t key, uint64_t val)
{
	uint64_t i = vc_mix64(key) & m->mask;
	while (m->keys[i] != EMPTY)
		i = (i + 1) & m->mask;
	m->keys[i] = key;
	m->vals[i] = val;
}

static int grow(struct vc_keymap *m)
{
	uint64_t *ok = m->keys, *ov = m->vals, oslots = m->mask + 1;
	if (alloc_table(m, 2 * oslots) < 0)
		return -ENOMEM;
	for (uint64_t i = 0; i < oslots; i++)
		if (ok[i] != EMPTY)
			place(m, ok[i], ov[i]);
	free(ok);
	free(ov);
	return 0;
}

int vc_keymap_put(struct vc_keymap *m, uint64_t key, uint64_t val)
{
	uint64_t *p = vc_keymap_get(m, key);
	if (p) {
		*p = val;
		return 0;
	}
	if (key == EMPTY) {
		m->has_max = true;
		m->max_val = val;
		m->n++;
		return 1;
	}
	if (2 * (m->n + 1) > m->mask + 1 && grow(m) < 0)
		return -ENOMEM;
	place(m, key, val);
	m->n++;
	return 1;
}

bool vc_keymap_del(struct vc_keymap *m, uint64_t key)
{
	if (key == EMPTY) {
		if (!m->has_max)
			return false;
		m->has_max = false;
		m->n--;
		return true;
	}
	uint64_t i = vc_mix64(key) & m->mask;
	while (m->keys[i] != key) {
		if (m->keys[i] == EMPTY)
			return false;
		i = (i + 1) & m->mask;
	}
	/* Backward shift: move later entries of the run into the hole when
	 * their home slot is not between the hole and them. */
	for (uint64_t j = i;;) {
		j = (j + 1) & m->mask;
		if (m->keys[j] == EMPTY)
			break;
		uint64_t home = vc_mix64(m->keys[j]) & m->mask;
		bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
		if (stays)
			continue;
		m->keys[i] = m->keys[j];
		m->vals[i] = m->vals[j];
		i = j;
	}
	m->keys[i] = EMPTY;
	m->n--;
	return true;
}
