/* Replacement policy interface.
 *
 * A policy orders the pages of each tier and names victims. The engine owns
 * the pages and their movement between tiers (GRAM: a host-tier victim goes
 * to the GPU tier, a GPU-tier hit comes back to the host tier); the policy
 * only sees, per tier, pages entering (insert), being used (hit) and
 * leaving (remove), and answers "which page should leave this tier next".
 * The simulator drives these same functions, so a policy has no view of
 * page data, locks or devices.
 *
 * Per-page policy state lives in struct vc_pnode, embedded in the engine's
 * page entry, so no call allocates, except that a policy with ghost lists
 * keeps a bounded table of evicted keys, sized at create() from the tier
 * capacities (which such a policy requires).
 *
 * Evictions: a remove() of the node that victim() last returned for its
 * tier is an eviction (the page leaves the tier because the policy chose
 * it); any other remove() (a page moving up a tier, an invalidation) is
 * not, and leaves no ghost. victim() may reorder the tier's queues as it
 * searches (CLOCK's hand, S3-FIFO's promotions), but calling it again
 * without other calls in between returns the same node. A node starts with tier = VC_PNODE_NONE;
 * insert takes only such a node. Calls are not thread safe: the caller
 * serialises them. Every call is O(1) unless the policy
 * says otherwise; victim() may skip pages the engine cannot evict now
 * (pinned or busy), at O(1) per skipped page.
 */
#ifndef VC_POLICY_H
#define VC_POLICY_H

#include <stdbool.h>
#include <stdint.h>

struct vc_pnode {
	struct vc_pnode *prev, *next;
	uint32_t aux;  /* policy-private: frequency, reference bit, queue id */
	uint8_t tier;  /* tier the node is queued in, VC_PNODE_NONE when not queued */
	/* The page's key (its page number), set by the owner before insert and
	 * unchanged while queued. Policies with ghost lists (ARC, 2Q, S3-FIFO)
	 * remember the keys of pages they evicted, to recognise them when they
	 * come back; the others ignore it. */
	uint64_t key;
};
#define VC_PNODE_NONE 0xff

/* Return true to make victim() pass over this page. */
typedef bool (*vc_skip_fn)(const struct vc_pnode *n, void *arg);

struct vc_policy;

struct vc_policy_ops {
	const char *name;
	const char *cost; /* one line: cost per operation and metadata per page */
	struct vc_policy *(*create)(const uint64_t capacity[], int ntiers);
	void (*destroy)(struct vc_policy *p);
	void (*insert)(struct vc_policy *p, struct vc_pnode *n, int tier);
	void (*hit)(struct vc_policy *p, struct vc_pnode *n);
	void (*remove)(struct vc_policy *p, struct vc_pnode *n);
	/* The page that should leave `tier` next, or NULL if every page is
	 * skipped or the tier is empty. Does not remove it. */
	struct vc_pnode *(*victim)(struct vc_policy *p, int tier, vc_skip_fn skip, void *arg);
	/* Pages queued in `tier`. */
	uint64_t (*count)(const struct vc_policy *p, int tier);
	/* Optional (NULL where the victim never depends on the incoming page):
	 * the page `key` missed and will enter `tier`. Called before the
	 * victim() calls that make its room and the insert() that follows
	 * them, so a policy can choose the victim as the paper orders it (ARC
	 * adapts p on a ghost hit before REPLACE, whose tie goes by whether
	 * the page is in B2). A caller that makes room before it knows the
	 * page (the engine's GPU tier, whose room a demotion makes before it
	 * picks the host victims) does not call it; insert() then does what
	 * miss() would have, after the eviction. Calling it again before the
	 * insert, or with no insert after, is harmless. */
	void (*miss)(struct vc_policy *p, uint64_t key, int tier);
};

struct vc_policy {
	const struct vc_policy_ops *ops;
};

/* The default (vc_config.policy NULL, `vramcache sim` without --policy):
 * S3-FIFO in the host tier, which sees every access, and LRU in the GPU
 * tier, a victim cache of the host tier's evictions. Chosen by the lowest
 * mean miss ratio over the shared and generated traces at every size, one
 * tier and two (docs/TRACES.md, "The default policy", which
 * scripts/trace-report regenerates); it was LRU before. */
#define VC_POLICY_DEFAULT "s3fifo+lru"

/* Finds a policy by name ("lru"); NULL (the default) when name is NULL. */
const struct vc_policy_ops *vc_policy_find(const char *name);
/* NULL-terminated list of all policies. */
extern const struct vc_policy_ops *const vc_policies[];

#endif
