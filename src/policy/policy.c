/* The policy registry. A new policy adds its ops to vc_policies[]. */
#include "policy/policy.h"

#include <string.h>

#include "policy/policies.h"

const struct vc_policy_ops *const vc_policies[] = {
	&vc_policy_lru,   &vc_policy_clock, &vc_policy_sieve,
	&vc_policy_s3fifo, &vc_policy_2q,   &vc_policy_arc,
	&vc_policy_s3fifo_lru,
	NULL,
};

/* Linear in the number of policies, which is a handful. */
const struct vc_policy_ops *vc_policy_find(const char *name)
{
	if (!name)
		name = VC_POLICY_DEFAULT;
	for (const struct vc_policy_ops *const *p = vc_policies; *p; p++)
		if (strcmp((*p)->name, name) == 0)
			return *p;
	return NULL;
}
