/* CloudPhysics block traces (as shipped with libCacheSim's data):
 * "version,time,op,size,lbn". op is the SCSI opcode in hex; size in bytes;
 * lbn in 512-byte blocks. READ(6/10/12/16) = 08/28/a8/88 and
 * WRITE(6/10/12/16) = 0a/2a/aa/8a are data accesses; any other command
 * (SYNCHRONIZE CACHE, INQUIRY, ...) moves no data and is skipped. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "trace/format.h"

#define HEADER "version,time,op,size,lbn"

static bool cp_sniff(const char *line, const char *path)
{
	if (strncasecmp(line, HEADER, strlen(HEADER)) == 0)
		return true;
	/* Headerless: trust the file name. */
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	char buf[256], *f[6];
	snprintf(buf, sizeof buf, "%s", line);
	return strncasecmp(base, "cloudphysics", 12) == 0 && vc_tr_split(buf, ',', f, 5) == 5;
}

/* Fills *r from a line's fields; false for a command that moves no data. */
static bool cp_request(struct vc_trace_req *r, uint64_t time, uint64_t op, uint64_t size,
		       uint64_t lbn)
{
	switch (op) {
	case 0x08: case 0x28: case 0xa8: case 0x88:
		r->op = VC_TRACE_READ;
		break;
	case 0x0a: case 0x2a: case 0xaa: case 0x8a:
		r->op = VC_TRACE_WRITE;
		break;
	default:
		return false;
	}
	r->time = time;
	r->offset = lbn * 512;
	r->size = size;
	return true;
}

static int cp_parse(struct vc_trace *t, char *line, struct vc_trace_req *r)
{
	if (strncasecmp(line, HEADER, strlen(HEADER)) == 0)
		return 0;
	char *f[6];
	uint64_t ver, time, op, size, lbn;
	if (vc_tr_split(line, ',', f, 5) != 5)
		return vc_tr_bad(t, "expected 5 fields \"version,time,op,size,lbn\"");
	if (vc_tr_u64(f[0], &ver) || vc_tr_u64(f[1], &time) || vc_tr_hex(f[2], &op) ||
	    vc_tr_u64(f[3], &size) || vc_tr_u64(f[4], &lbn))
		return vc_tr_bad(t, "bad number (op is hex, the rest decimal)");
	if (lbn > (UINT64_MAX >> 10))
		return vc_tr_bad(t, "lbn %llu out of range", (unsigned long long)lbn);
	return cp_request(r, time, op, size, lbn) ? 1 : 0;
}

/* The common line, "D,D,HH,D,D\n" with a data opcode, parsed in place;
 * anything else (the header, other commands, blanks) goes to cp_parse. */
static size_t cp_fast(const unsigned char *p, size_t n, struct vc_trace_req *r)
{
	const unsigned char *q = p, *e = p + n;
	uint64_t ver, time, size, lbn;
	if (!vc_tr_fast_u64(&q, e, &ver) || q >= e || *q++ != ',' ||
	    !vc_tr_fast_u64(&q, e, &time) || q >= e || *q++ != ',' || e - q < 3 || q[2] != ',')
		return 0;
	static const char hex[] = "0123456789abcdef";
	const char *h = memchr(hex, q[0], 16), *l = memchr(hex, q[1], 16);
	if (!h || !l)
		return 0;
	unsigned op = (unsigned)((h - hex) * 16 + (l - hex));
	q += 3;
	if (!vc_tr_fast_u64(&q, e, &size) || q >= e || *q++ != ',' || !vc_tr_fast_u64(&q, e, &lbn))
		return 0;
	q = vc_tr_fast_eol(q, e);
	if (!q || lbn > (UINT64_MAX >> 10) || !cp_request(r, time, op, size, lbn))
		return 0; /* other commands are skipped by cp_parse */
	return (size_t)(q - p);
}

const struct vc_trace_fmt vc_trace_fmt_cloudphysics = {
	.name = "cloudphysics",
	.sniff = cp_sniff,
	.parse = cp_parse,
	.fast = cp_fast,
};
