/* Policies defined in this directory, for the registry in policy.c. */
#ifndef VC_POLICY_LRU_H
#define VC_POLICY_LRU_H

#include "policy/policy.h"

/* "lru": one LRU queue per tier (GRAM). */
extern const struct vc_policy_ops vc_policy_lru;

#endif
