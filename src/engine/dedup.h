/* What dedup.c (the block store) and dedup_down.c (the trip down) share;
 * private to the two. Everything here is called under c->mu (engine.h's
 * lock rules), except dd_sampled, a pure function. */
#ifndef VC_ENGINE_DEDUP_H
#define VC_ENGINE_DEDUP_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"

/* Whether page pno is in the spatial sample (1 in DD_SAMPLE). */
bool dd_sampled(uint64_t pno);

/* The fingerprint table: linear probing, backward-shift deletion. */
uint32_t dd_tab_home(const struct eng_dedup *d, const struct vc_fp_digest *fp);
uint32_t dd_tab_find(const struct eng_dedup *d, const struct vc_fp_digest *fp);
void dd_tab_insert(struct eng_dedup *d, uint32_t b);

/* Blocks and uses (use u = page id x D + j). */
uint32_t dd_blk_new(struct eng_dedup *d);
void dd_use_link(struct eng_dedup *d, uint64_t u, uint32_t b);
void dd_use_unlink(struct vc_cache *c, uint64_t u, bool slotted);
void dd_use_place(struct eng_dedup *d, uint64_t u, uint32_t b);
void dd_use_unplace(struct vc_cache *c, uint64_t u);

/* The trips' scratches (dedup_down.c): one at open (-ENOMEM), all freed
 * at close. */
int dd_scratch_open(struct vc_cache *c);
void dd_scratch_close(struct vc_cache *c);

#endif
