/* The trip down's phase profile (VC_DD_PROF=1; dedup.h): each phase's
 * time summed over trips, printed by eng_debug_dedup_prof and at close.
 * For measuring only; two clock reads a phase when on, nothing when off.
 */
#include <stdio.h>

#include "engine/dedup.h"

static const char *const ddp_name[DDP_N] = { "begin (lock, classes, appends)",
					     "moves down (+ host hash)",
					     "fingerprints read",
					     "lookup, leaders' slots (lock)",
					     "compare + leaders' placement",
					     "settle, index (lock)",
					     "placement of the rest (rare)",
					     "finish (lock)" };

void dd_prof_start(struct dd_prof *pf)
{
	if (pf->on)
		pf->t = vc_now_ns();
}

void dd_prof_mark(struct dd_prof *pf, int ph)
{
	if (!pf->on)
		return;
	const uint64_t now = vc_now_ns();
	pf->ns[ph] = now - pf->t;
	pf->hit[ph] = true;
	pf->t = now;
}

void dd_prof_end(struct eng_dedup *d, const struct dd_prof *pf, uint32_t blocks)
{
	if (pf->on)
		atomic_fetch_add_explicit(&d->prof_blocks, blocks, memory_order_relaxed);
	for (int i = 0; pf->on && i < DDP_N; i++)
		if (pf->hit[i]) {
			atomic_fetch_add_explicit(&d->prof_ns[i], pf->ns[i], memory_order_relaxed);
			atomic_fetch_add_explicit(&d->prof_n[i], 1, memory_order_relaxed);
		}
}

void dd_prof_print(struct vc_cache *c, const char *what)
{
	struct eng_dedup *d = &c->dd;
	const uint64_t trips = atomic_exchange(&d->prof_n[DDP_BEGIN], 0);
	const uint64_t blocks = atomic_exchange(&d->prof_blocks, 0);
	if (!d->prof || trips == 0)
		return;
	fprintf(stderr, "dedup trips (%s): %llu, %llu blocks selected, D = %u, %s%s%s\n", what,
		(unsigned long long)trips, (unsigned long long)blocks, d->D,
		c->gt.cipher ? "XTS" : "plain", d->fp_move ? ", fingerprints in the moves" : "",
		!c->gt.cipher ? "" : d->dev_cmp ? ", compares on the device" : ", compares on the host");
	for (int i = 0; i < DDP_N; i++) {
		const uint64_t ns = atomic_exchange(&d->prof_ns[i], 0);
		const uint64_t k = i == DDP_BEGIN ? trips : atomic_exchange(&d->prof_n[i], 0);
		fprintf(stderr, "  %-32s trips %8llu  total %9.3f ms  per trip %8.2f us  per block %7.1f ns\n",
			ddp_name[i], (unsigned long long)k, (double)ns / 1e6,
			k ? (double)ns / 1e3 / (double)k : 0.0, blocks ? (double)ns / (double)blocks : 0.0);
	}
}

void eng_debug_dedup_prof(struct vc_cache *c, const char *what)
{
	if (eng_dd(c))
		dd_prof_print(c, what);
}

