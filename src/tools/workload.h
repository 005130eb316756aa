/* Synthetic workloads driven through the real engine, with GRAM's cost
 * model: I/O cost per page access = (backing page reads + writes) x the
 * modelled backing latency + the measured time spent in host<->GPU moves,
 * over the number of accesses. Shared by `vramcache demo` and the GRAM
 * Fig. 4 benchmark; the option parsers at the end by the CLI and the
 * benchmarks.
 */
#ifndef VC_WORKLOAD_H
#define VC_WORKLOAD_H

#include <stdint.h>

#include "vramcache.h"

/* Writes a sample backing file of npages pages; every page starts with its
 * page number (8 bytes, little endian) so reads can be checked cheaply;
 * the rest is pseudo-random. */
int vc_wl_make_file(const char *path, uint64_t npages, uint32_t page_size);

struct vc_wl_params {
	uint64_t working_set; /* pages, from page 0 */
	uint64_t accesses;    /* page accesses */
	double write_ratio;   /* share of accesses that rewrite the page */
	double zipf;          /* 0: uniform (GRAM's setting); else Zipf exponent */
	uint64_t seed;
	int threads;          /* concurrent callers; each does accesses/threads */
	double latency_ms;    /* modelled backing latency per page I/O */
};

struct vc_wl_result {
	struct vc_stats st;  /* engine statistics for the run */
	double seconds;      /* wall time */
	double hit_ratio[VC_TIER_COUNT];
	double miss_ratio;
	double io_cost_ms;   /* per access, the model above */
	double move_cost_ms; /* the part of io_cost_ms spent in device moves */
	uint64_t bad_pages;  /* pages whose stamp was wrong: must be 0 */
};

/* Runs the workload on an open cache (statistics are differences over the
 * run). Returns 0 or -errno. */
int vc_wl_run(vc_cache *c, const struct vc_wl_params *p, struct vc_wl_result *out);

/* GRAM's I/O cost per access in ms: backing page I/Os x the modelled
 * latency per I/O, plus the time spent in host<->GPU moves (measured in the
 * engine, modelled in the simulator), over the accesses. 0 with none. */
double vc_wl_io_cost_ms(double accesses, double backing_ios, double latency_ms, double move_ms);

/* Parses "5ms", "80us", "100ns", "0.5s" or a bare number of ms. -1 if bad. */
double vc_wl_parse_ms(const char *s);

/* Parses a byte count: "N", "N[KMGT]", "N[KMGT]iB" or "N[KMGT]B" (binary
 * units). 0, or -1 if bad or too large. */
int vc_wl_parse_bytes(const char *s, uint64_t *out);

#endif
