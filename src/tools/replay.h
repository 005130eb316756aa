/* Replays a block trace through the real engine (include/vramcache.h).
 *
 * Trace pages are numbered densely in order of first touch and the backing
 * store is a sparse file of exactly that many pages, so the engine sees the
 * trace's page identities (and its cache behaviour) while the file holds
 * only the working set. Requests are widened to whole pages and issued one
 * vc_read / vc_write per page, in trace order, from one thread.
 *
 * Written data is synthesized: page p at its v-th write holds (p, v) in its
 * first and last 16 bytes and a pattern derived from both between, so every
 * read checks that it got the newest version of the right page (a page
 * never written reads as zeros: the file is sparse). */
#ifndef VC_TOOLS_REPLAY_H
#define VC_TOOLS_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "vramcache.h"

struct vc_replay_params {
	const char *trace, *format;
	bool per_request;     /* one page per request */
	struct vc_config cfg; /* the engine's; backing_path is set by the replay */
	const char *file;     /* the sparse backing file to create */
	uint64_t limit;       /* requests to replay; 0: all */
};

struct vc_replay_result {
	uint64_t requests, pages, reads, writes, distinct;
	double seconds;
	double lat_us[4];   /* per request: p50, p99, p99.9, max */
	uint64_t bad_pages; /* wrong contents: must be 0 */
	struct vc_stats st;
	char device[16];
};

/* 0 or -errno (message in vc_last_error). */
int vc_replay_run(const struct vc_replay_params *p, struct vc_replay_result *out);

#endif
