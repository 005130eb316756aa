/* Slot storage for both tiers: one allocation of npages * page_size and a
 * lock-free LIFO stack of free slot numbers (base/idstack.h: LIFO reuses
 * the most recently freed, so warm memory first). 4 bytes of metadata per
 * slot. */
#include <errno.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/idstack.h"
#include "tier/tier.h"
#include "vramcache.h"

struct vc_tiermem {
	struct vc_device *dev;
	int kind;
	uint32_t page_size;
	uint64_t npages;
	void *host;        /* host tier: host pointer of slot 0 */
	uint64_t base;     /* device-visible address of slot 0 */
	struct vc_idstack free; /* free slots */
};

int vc_tier_open(struct vc_device *dev, int kind, uint64_t npages, uint32_t page_size,
		 struct vc_tiermem **out)
{
	if (npages > UINT32_MAX)
		return vc_err(-EINVAL, "tier of %llu pages is too large (limit 2^32-1 pages)",
			      (unsigned long long)npages);
	struct vc_tiermem *t = calloc(1, sizeof *t);
	if (!t)
		return vc_err(-ENOMEM, "out of memory");
	t->dev = dev;
	t->kind = kind;
	t->page_size = page_size;
	t->npages = npages;
	if (npages) {
		if (vc_idstack_init(&t->free, (uint32_t)npages, true) < 0) {
			free(t);
			return vc_err(-ENOMEM, "out of memory for %llu slots", (unsigned long long)npages);
		}
		size_t len = (size_t)npages * page_size;
		int r = kind == VC_TIER_HOST ? dev->ops->host_alloc(dev, len, &t->host, &t->base)
					     : dev->ops->mem_alloc(dev, len, &t->base);
		if (r < 0) {
			vc_idstack_fini(&t->free);
			free(t);
			return r;
		}
	}
	*out = t;
	return 0;
}

void vc_tier_close(struct vc_tiermem *t)
{
	if (!t)
		return;
	if (t->npages) {
		if (t->kind == VC_TIER_HOST)
			t->dev->ops->host_free(t->dev, t->host);
		else
			t->dev->ops->mem_free(t->dev, t->base);
	}
	vc_idstack_fini(&t->free);
	free(t);
}

int vc_tier_alloc(struct vc_tiermem *t, uint32_t *slot)
{
	return t->npages && vc_idstack_pop(&t->free, slot) ? 0 : -ENOSPC;
}

void vc_tier_free(struct vc_tiermem *t, uint32_t slot)
{
	vc_idstack_push(&t->free, slot);
}

uint64_t vc_tier_addr(const struct vc_tiermem *t, uint32_t slot)
{
	return t->base + (uint64_t)slot * t->page_size;
}

void *vc_tier_host(const struct vc_tiermem *t, uint32_t slot)
{
	return (char *)t->host + (size_t)slot * t->page_size;
}

uint64_t vc_tier_capacity(const struct vc_tiermem *t)
{
	return t->npages;
}

uint64_t vc_tier_used(const struct vc_tiermem *t)
{
	uint64_t f = t->npages ? vc_idstack_count(&t->free) : 0;
	return f < t->npages ? t->npages - f : 0;
}
