/* A tier's storage: fixed-size page slots in host or device memory.
 *
 * The engine asks a tier for a free slot, for the device-visible address of
 * a slot (what a move batch names), and gives slots back. Which page sits
 * where, and in what order pages leave, is the engine's and the policy's
 * business, not the tier's: so the GPU tier's inside (later a
 * log-structured store with its own cleaner) can change behind these calls.
 *
 * alloc and free are thread safe and lock-free, O(1) (base/idstack.h): misses
 * take host slots without the engine lock. The rest is read-only after open.
 */
#ifndef VC_TIER_H
#define VC_TIER_H

#include <stdint.h>

#include "device/device.h"

struct vc_tiermem;

/* kind: VC_TIER_HOST (pinned, mapped host memory) or VC_TIER_GPU. npages may
 * be 0 (an empty tier: alloc always fails). */
int vc_tier_open(struct vc_device *dev, int kind, uint64_t npages, uint32_t page_size,
		 struct vc_tiermem **out);
void vc_tier_close(struct vc_tiermem *t);

/* 0 and a slot, or -ENOSPC when every slot is taken. */
int vc_tier_alloc(struct vc_tiermem *t, uint32_t *slot);
void vc_tier_free(struct vc_tiermem *t, uint32_t slot);
uint64_t vc_tier_addr(const struct vc_tiermem *t, uint32_t slot);
/* Host pointer of a slot; host tier only. */
void *vc_tier_host(const struct vc_tiermem *t, uint32_t slot);
uint64_t vc_tier_capacity(const struct vc_tiermem *t);
uint64_t vc_tier_used(const struct vc_tiermem *t);

#endif
