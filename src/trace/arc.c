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

/* The common line, "D D D D\n" with single blanks or tabs between, parsed
 * in place; anything else goes to arc_parse. */
static size_t arc_fast(const unsigned char *p, size_t n, struct vc_trace_req *r)
{
	const unsigned char *q = p, *e = p + n;
	uint64_t v[4];
	for (int i = 0; i < 4; i++) {
		if (i) {
			if (q >= e || (*q != ' ' && *q != '\t'))
				return 0;
			while (q < e && (*q == ' ' || *q == '\t'))
				q++;
		}
		if (!vc_tr_fast_u64(&q, e, &v[i]))
			return 0;
	}
	q = vc_tr_fast_eol(q, e);
	if (!q || v[1] == 0 || v[0] > (UINT64_MAX >> 10) || v[1] > (UINT64_MAX >> 10))
		return 0;
	r->time = v[3];
	r->offset = v[0] * 512;
	r->size = v[1] * 512;
	r->op = VC_TRACE_READ;
	return (size_t)(q - p);
}

const struct vc_trace_fmt vc_trace_fmt_arc = {
	.name = "arc",
	.sniff = arc_sniff,
	.parse = arc_parse,
	.fast = arc_fast,
};
