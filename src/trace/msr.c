/* MSR Cambridge block traces (Narayanan et al., FAST 2008), as on SNIA
 * IOTTA: "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime",
 * Timestamp in Windows filetime (100 ns), Type Read or Write, Offset and
 * Size in bytes. The disk number is the volume. */
#include <stdio.h>
#include <strings.h>

#include "trace/format.h"

static int msr_op(const char *s, uint8_t *op)
{
	if (strcasecmp(s, "Read") == 0)
		*op = VC_TRACE_READ;
	else if (strcasecmp(s, "Write") == 0)
		*op = VC_TRACE_WRITE;
	else
		return -1;
	return 0;
}

static bool msr_sniff(const char *line, const char *path)
{
	(void)path;
	char buf[256], *f[8];
	uint8_t op;
	snprintf(buf, sizeof buf, "%s", line);
	return vc_tr_split(buf, ',', f, 7) == 7 && msr_op(f[3], &op) == 0;
}

static int msr_parse(struct vc_trace *t, char *line, struct vc_trace_req *r)
{
	char *f[8];
	uint64_t time, disk, off, size, resp;
	if (vc_tr_split(line, ',', f, 7) != 7)
		return vc_tr_bad(t, "expected 7 fields \"time,host,disk,type,offset,size,response\"");
	if (vc_tr_u64(f[0], &time) || vc_tr_u64(f[2], &disk) || vc_tr_u64(f[4], &off) ||
	    vc_tr_u64(f[5], &size) || vc_tr_u64(f[6], &resp))
		return vc_tr_bad(t, "bad number");
	if (msr_op(f[3], &r->op)) {
		char q[VC_TR_QUOTE_SIZE(20)];
		return vc_tr_bad(t, "type \"%s\" is neither Read nor Write",
				 vc_tr_quote(q, sizeof q, f[3], strlen(f[3]), 20));
	}
	if (disk > 0xffff)
		return vc_tr_bad(t, "disk number %llu out of range", (unsigned long long)disk);
	r->time = time;
	r->volume = (uint32_t)disk;
	r->offset = off;
	r->size = size;
	return 1;
}

const struct vc_trace_fmt vc_trace_fmt_msr = {
	.name = "msr",
	.sniff = msr_sniff,
	.parse = msr_parse,
};
