/* Kept for existing includes: the registry header is policy/policies.h. */
#ifndef VC_POLICY_LRU_H
#define VC_POLICY_LRU_H

#include "policy/policies.h"

#endif
