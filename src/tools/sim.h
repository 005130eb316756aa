/* The trace simulator: page accesses through the policy code the engine
 * runs (src/policy), with GRAM's two-tier flow, and no data moved.
 *
 * Per access, as the engine does (src/engine/access.c, moves.c):
 *   host hit   policy hit
 *   GPU hit    remove from the GPU tier; if the host tier is full its victim
 *              moves to the GPU tier (into the slot just freed: the engine's
 *              SWAP); the page enters the host tier
 *   miss       if the host tier is full its victim moves to the GPU tier,
 *              which first drops its own victim when full (with no GPU tier
 *              the host victim is dropped); the page enters the host tier
 *
 * A page entering the host tier (a miss, a GPU hit) is announced to the
 * policy (vc_policy_ops.miss) before the host victim is chosen, as the
 * engine does; one entering the GPU tier is not, since the engine makes
 * the GPU tier's room before it picks the host victims that fill it.
 *
 * Cost: one policy step and O(1) expected page-table work per access.
 * Memory: (host + gpu) x about 80 bytes. */
#ifndef VC_TOOLS_SIM_H
#define VC_TOOLS_SIM_H

#include <stdbool.h>
#include <stdint.h>

struct vc_sim_stats {
	uint64_t accesses, writes;
	uint64_t hits[2];       /* host, GPU */
	uint64_t misses, read_misses;
	uint64_t evictions[2];  /* host -> GPU (or dropped), GPU dropped */
	uint64_t moves_h2d, moves_d2h;
};

struct vc_sim;

/* A cache of host_pages (>= 1) and gpu_pages (0: single tier) under the
 * named policy. 0 or -errno (-EINVAL: unknown policy). */
int vc_sim_create(const char *policy, uint64_t host_pages, uint64_t gpu_pages,
		  struct vc_sim **out);
void vc_sim_destroy(struct vc_sim *s);
/* One page access; op is enum vc_trace_op. 0 or -ENOMEM. */
int vc_sim_access(struct vc_sim *s, uint64_t key, int op);
const struct vc_sim_stats *vc_sim_stats(const struct vc_sim *s);
uint64_t vc_sim_host_pages(const struct vc_sim *s);
uint64_t vc_sim_gpu_pages(const struct vc_sim *s);
const char *vc_sim_policy(const struct vc_sim *s);

/* GRAM's cost model (shared with the engine workloads, workload.h), for a
 * write-through cache: backing page I/Os are read misses plus writes. */
double vc_sim_io_cost_ms(const struct vc_sim_stats *st, double latency_ms, double move_ms);

#endif
