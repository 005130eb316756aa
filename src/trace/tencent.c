/* Tencent CBS block traces (Zhang et al., "OSCA: An Online-Model Based
 * Cache Allocation Scheme in Cloud Block Storage Systems", USENIX ATC
 * 2020), as on SNIA IOTTA: "Timestamp,Offset,Size,IOType,VolumeID",
 * Timestamp in seconds, Offset and Size in 512-byte sectors, IOType 0 read
 * and 1 write. The volume id is the volume (its low 16 bits: the key space
 * gives volumes 16 bits, see trace.h). */
#include <stdio.h>

#include "trace/format.h"

static bool tc_sniff(const char *line, const char *path)
{
	(void)path;
	char buf[256], *f[6];
	uint64_t v[5];
	snprintf(buf, sizeof buf, "%s", line);
	if (vc_tr_split(buf, ',', f, 5) != 5)
		return false;
	for (int i = 0; i < 5; i++)
		if (vc_tr_u64(f[i], &v[i]))
			return false;
	return v[3] <= 1;
}

static int tc_parse(struct vc_trace *t, char *line, struct vc_trace_req *r)
{
	char *f[6];
	uint64_t time, off, size, op, vol;
	if (vc_tr_split(line, ',', f, 5) != 5)
		return vc_tr_bad(t, "expected 5 fields \"time,offset,size,iotype,volume\"");
	if (vc_tr_u64(f[0], &time) || vc_tr_u64(f[1], &off) || vc_tr_u64(f[2], &size) ||
	    vc_tr_u64(f[3], &op) || vc_tr_u64(f[4], &vol))
		return vc_tr_bad(t, "bad number");
	if (op > 1)
		return vc_tr_bad(t, "iotype %llu is neither 0 (read) nor 1 (write)",
				 (unsigned long long)op);
	if (off > (UINT64_MAX >> 10) || size > (UINT64_MAX >> 10))
		return vc_tr_bad(t, "offset or size out of range");
	r->time = time;
	r->offset = off * 512;
	r->size = size * 512;
	r->op = (uint8_t)op;
	r->volume = (uint32_t)(vol & 0xffff);
	return 1;
}

const struct vc_trace_fmt vc_trace_fmt_tencent = {
	.name = "tencent",
	.sniff = tc_sniff,
	.parse = tc_parse,
};
