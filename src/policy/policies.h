/* The policies defined in this directory, for the registry in policy.c. */
#ifndef VC_POLICY_POLICIES_H
#define VC_POLICY_POLICIES_H

#include "policy/policy.h"

/* "lru": one LRU queue per tier (GRAM). */
extern const struct vc_policy_ops vc_policy_lru;
/* "clock": FIFO with reinsertion (one reference bit). */
extern const struct vc_policy_ops vc_policy_clock;
/* "sieve": FIFO with a visited bit and a hand (NSDI 2024). */
extern const struct vc_policy_ops vc_policy_sieve;
/* "s3fifo": small FIFO, main FIFO with 2-bit CLOCK, ghost FIFO (SOSP 2023). */
extern const struct vc_policy_ops vc_policy_s3fifo;
/* "2q": A1in FIFO, A1out ghost, Am LRU (VLDB 1994). */
extern const struct vc_policy_ops vc_policy_2q;
/* "arc": T1/T2 with ghosts B1/B2 and an adaptive target (FAST 2003). */
extern const struct vc_policy_ops vc_policy_arc;

/* A policy per tier (pertier.c): "s3fifo+lru" runs S3-FIFO in the host
 * tier and LRU in the GPU victim tier. */
extern const struct vc_policy_ops vc_policy_s3fifo_lru;

#endif
