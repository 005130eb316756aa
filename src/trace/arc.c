/* ARC traces (Megiddo & Modha, "ARC: A Self-Tuning, Low Overhead
 * Replacement Cache", FAST 2003): one request a line,
 * "starting_block number_of_blocks ignore request_number", blocks of 512
 * bytes, reads only (the paper kept only reads). */
#include <stdio.h>
#include <string.h>

#include "trace/format.h"

static bool arc_sniff(const char *line, const char *path)
{
	(void)path;
	char buf[256], *f[5];
	uint64_t v;
	snprintf(buf, sizeof buf, "%s", line);
	if (vc_tr_split(buf, 0, f, 4) != 4)
		return false;
	for (int i = 0; i < 4; i++)
		if (vc_tr_u64(f[i], &v))
			return false;
	return true;
}

static int arc_parse(struct vc_trace *t, char *line, struct vc_trace_req *r)
{
	char *f[5];
	uint64_t start, n, ign, seq;
	if (vc_tr_split(line, 0, f, 4) != 4)
		return vc_tr_bad(t, "expected 4 fields \"start nblocks ignore seq\"");
	if (vc_tr_u64(f[0], &start) || vc_tr_u64(f[1], &n) || vc_tr_u64(f[2], &ign) ||
	    vc_tr_u64(f[3], &seq))
		return vc_tr_bad(t, "fields must be unsigned integers");
	if (n == 0 || start > (UINT64_MAX >> 10) || n > (UINT64_MAX >> 10))
		return vc_tr_bad(t, "block range %llu+%llu out of range", (unsigned long long)start,
				 (unsigned long long)n);
	r->time = seq;
	r->offset = start * 512;
	r->size = n * 512;
	r->op = VC_TRACE_READ;
	return 1;
}

const struct vc_trace_fmt vc_trace_fmt_arc = {
	.name = "arc",
	.sniff = arc_sniff,
	.parse = arc_parse,
};
