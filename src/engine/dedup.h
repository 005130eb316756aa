/* What dedup.c (the block store), dedup_down.c and dedup_pair.c (the
 * trip down), dedup_scratch.c (its scratch), dedup_est.c (the estimate and the
 * adaptive switch) and dedup_prof.c (the trip's phase profile) share; private to them. The block store's
 * functions are called under dd.mu (engine.h's lock rules; with c->mu
 * too where they touch the log store: dd_use_unlink of a slotted block,
 * dd_use_place and dd_use_unplace, which count dd.resv); dd_sampled is a
 * pure function, and the profile's calls touch only the caller's struct
 * and atomics. */
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
/* Under c->mu and dd.mu: a comparer is done with block b (its pin); the
 * last unpin of a block that lost its last use meanwhile frees it. */
void dd_blk_unpin(struct vc_cache *c, uint32_t b);
/* Under c->mu and dd.mu: a block with no use, keep or pin left: its slot
 * orphaned (if it was placed: `slotted`), its serial cleared, its id
 * free. */
void dd_blk_free(struct vc_cache *c, uint32_t b, bool slotted);
/* Under c->mu and dd.mu: the note of host slot s lets go of the keeps it
 * holds (dd_note.keep), if any; a block left with no use and no keep
 * dies. */
void dd_note_unkeep(struct vc_cache *c, uint32_t s);

/* The adaptive switch (dedup_est.c): every DD_WINDOW blocks volume v fed
 * to the estimate, its estimates are taken and (mode adaptive) its
 * dedup turned on or off with hysteresis. */
void dd_decide(struct vc_cache *c, struct vc_volume *v);

/* Under dd.mu: volume v's direct trip switched by its recent share
 * rate (dd_look, dd_match: dedup_down.c's DD_DIRECT_AT, DD_STAGE_AT). */
void dd_vol_switch(struct vc_volume *v);

/* The indexer (dedup_later.c): started at open unless VC_DD_LATER=0
 * (then dd.later is NULL), stopped at close after the queue
 * drains (eng_dd_later_close). dd_later_push, holding neither lock: the direct trip's m
 * blocks (g->sel, g->blk, g->fp) queued, or false when the queue has no
 * room for them (the trip then looks them up itself). */
struct down;
int dd_later_open(struct vc_cache *c);
bool dd_later_push(struct vc_cache *c, const struct down *g, struct vc_page *const *pages);

/* The trips' scratches (dedup_scratch.c): one at open (-ENOMEM), all
 * freed at close. */
int dd_scratch_open(struct vc_cache *c);
void dd_scratch_close(struct vc_cache *c);

/* The trip's phase profile (dedup_prof.c): VC_DD_PROF=1 (d->prof). Each
 * phase runs from the end of the one before (a hold's lock wait
 * included); trips sum into d->prof_ns with the number of trips that
 * reached each phase, printed at close (dd_scratch_close). */
enum { DDP_BEGIN, DDP_MOVE, DDP_FP, DDP_LOOKUP, DDP_CMP, DDP_SETTLE, DDP_PLACE, DDP_INDEX, DDP_N };
struct dd_prof {
	bool on;
	uint64_t t, ns[DDP_N];
	bool hit[DDP_N];
};
void dd_prof_start(struct dd_prof *pf);
void dd_prof_mark(struct dd_prof *pf, int ph);
void dd_prof_end(struct eng_dedup *d, const struct dd_prof *pf, uint32_t blocks);
void dd_prof_print(struct vc_cache *c, const char *what);

#endif
