/* The generic CSV: "time,op,offset,size", one request a line. time is an
 * unsigned integer (any unit), op R or W (also read/write, 0/1), offset
 * and size in bytes. A first line starting with "time" is a header. */
#include <stdio.h>
#include <strings.h>

#include "trace/format.h"

static int csv_op(const char *s, uint8_t *op)
{
	if (!strcasecmp(s, "R") || !strcasecmp(s, "read") || !strcasecmp(s, "0"))
		*op = VC_TRACE_READ;
	else if (!strcasecmp(s, "W") || !strcasecmp(s, "write") || !strcasecmp(s, "1"))
		*op = VC_TRACE_WRITE;
	else
		return -1;
	return 0;
}

static bool csv_sniff(const char *line, const char *path)
{
	(void)path;
	if (strncasecmp(line, "time,op,offset,size", 19) == 0)
		return true;
	char buf[256], *f[5];
	uint8_t op;
	uint64_t v;
	snprintf(buf, sizeof buf, "%s", line);
	return vc_tr_split(buf, ',', f, 4) == 4 && csv_op(f[1], &op) == 0 &&
	       vc_tr_u64(f[2], &v) == 0 && vc_tr_u64(f[3], &v) == 0;
}

static int csv_parse(struct vc_trace *t, char *line, struct vc_trace_req *r)
{
	if (!t->header_done) {
		t->header_done = true;
		if (strncasecmp(line, "time", 4) == 0)
			return 0;
	}
	char *f[5];
	if (vc_tr_split(line, ',', f, 4) != 4)
		return vc_tr_bad(t, "expected 4 fields \"time,op,offset,size\"");
	if (vc_tr_u64(f[0], &r->time) || vc_tr_u64(f[2], &r->offset) || vc_tr_u64(f[3], &r->size))
		return vc_tr_bad(t, "bad number");
	if (csv_op(f[1], &r->op)) {
		char q[VC_TR_QUOTE_SIZE(20)];
		return vc_tr_bad(t, "op \"%s\" is neither R nor W",
				 vc_tr_quote(q, sizeof q, f[1], strlen(f[1]), 20));
	}
	return 1;
}

const struct vc_trace_fmt vc_trace_fmt_csv = {
	.name = "csv",
	.sniff = csv_sniff,
	.parse = csv_parse,
};
