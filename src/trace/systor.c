/* SYSTOR'17 traces (Lee et al., "Understanding storage traffic
 * characteristics on enterprise virtual desktop infrastructure", SYSTOR
 * 2017), as on SNIA IOTTA: "Timestamp,Response,IOType,LUN,Offset,Size",
 * Timestamp and Response in seconds with a fraction, IOType R or W, Offset
 * and Size in bytes. Time is kept in microseconds; the LUN is the volume. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "trace/format.h"

#define HEADER "Timestamp,Response,IOType,LUN,Offset,Size"

static int sys_op(const char *s, uint8_t *op)
{
	if (strcasecmp(s, "R") == 0)
		*op = VC_TRACE_READ;
	else if (strcasecmp(s, "W") == 0)
		*op = VC_TRACE_WRITE;
	else
		return -1;
	return 0;
}

static bool sys_sniff(const char *line, const char *path)
{
	(void)path;
	if (strncasecmp(line, HEADER, strlen(HEADER)) == 0)
		return true;
	char buf[256], *f[7];
	uint8_t op;
	snprintf(buf, sizeof buf, "%s", line);
	return vc_tr_split(buf, ',', f, 6) == 6 && sys_op(f[2], &op) == 0;
}

static int sys_parse(struct vc_trace *t, char *line, struct vc_trace_req *r)
{
	if (strncasecmp(line, HEADER, strlen(HEADER)) == 0)
		return 0;
	char *f[7];
	uint64_t time, resp, lun, off, size;
	if (vc_tr_split(line, ',', f, 6) != 6)
		return vc_tr_bad(t, "expected 6 fields \"" HEADER "\"");
	if (vc_tr_fixed(f[0], 1e6, &time) || vc_tr_fixed(f[1], 1e6, &resp) ||
	    vc_tr_u64(f[3], &lun) || vc_tr_u64(f[4], &off) || vc_tr_u64(f[5], &size))
		return vc_tr_bad(t, "bad number");
	if (sys_op(f[2], &r->op))
		return vc_tr_bad(t, "IOType \"%.20s\" is neither R nor W", f[2]);
	if (lun > 0xffff)
		return vc_tr_bad(t, "LUN %llu out of range", (unsigned long long)lun);
	r->time = time;
	r->volume = (uint32_t)lun;
	r->offset = off;
	r->size = size;
	return 1;
}

const struct vc_trace_fmt vc_trace_fmt_systor = {
	.name = "systor",
	.sniff = sys_sniff,
	.parse = sys_parse,
};
