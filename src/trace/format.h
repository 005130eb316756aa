/* What a trace format provides, and the parsing helpers they share.
 * Internal to src/trace/. */
#ifndef VC_TRACE_FORMAT_H
#define VC_TRACE_FORMAT_H

#include <stdbool.h>
#include <stdint.h>

#include "trace/stream.h"
#include "trace/trace.h"

struct vc_trace_fmt {
	const char *name;
	/* Line formats: whether the first line looks like this format (the
	 * path helps where a format has no header). NULL for binary formats. */
	bool (*sniff)(const char *line, const char *path);
	/* Line formats: 1 with a request, 0 for a line to skip (header,
	 * comment), or -EBADMSG through vc_tr_bad. May modify the line. */
	int (*parse)(struct vc_trace *t, char *line, struct vc_trace_req *r);
	/* Binary formats: whether the first bytes are this format's magic, and
	 * the next request (1), the end (0) or an error. */
	bool (*magic)(const unsigned char *b, size_t n);
	int (*next)(struct vc_trace *t, struct vc_trace_req *r);
};

struct vc_trace {
	struct vc_stream *s;
	const struct vc_trace_fmt *fmt;
	/* page iteration: pages [pg_next, pg_end) of the current request */
	uint64_t pg_next, pg_end, pg_vol;
	int pg_op;
	/* binary format: the previous request */
	uint64_t prev_time, prev_end, prev_size;
	uint32_t prev_vol;
	uint64_t nrec; /* records read (binary formats' "line" for messages) */
	bool header_done;
};

extern const struct vc_trace_fmt vc_trace_fmt_arc, vc_trace_fmt_cloudphysics, vc_trace_fmt_msr,
	vc_trace_fmt_systor, vc_trace_fmt_tencent, vc_trace_fmt_csv, vc_trace_fmt_vct;

/* Splits line in place at `sep` (0: runs of blanks) into at most max
 * fields; returns the number of fields, or max + 1 when there are more. */
int vc_tr_split(char *line, char sep, char **f, int max);
/* Strict parsers: the whole field (blanks around it allowed) must be the
 * number. 0 or -1. */
int vc_tr_u64(const char *s, uint64_t *v);
int vc_tr_hex(const char *s, uint64_t *v);
/* A decimal with an optional fraction, times `scale`, rounded down. */
int vc_tr_fixed(const char *s, double scale, uint64_t *v);
/* Fails the read: -EBADMSG with "path:line: <message>". */
int vc_tr_bad(struct vc_trace *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line of only blanks, or a comment starting with '#'. */
bool vc_tr_blank(const char *line);

#endif
