/* The trace reader: format detection, request and page iteration, and the
 * parsing helpers the formats share. One file per format beside it. */
#include "trace/trace.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "trace/format.h"

/* Detection order: the binary magic first, then formats with a header or a
 * distinctive field, then the generic ones. */
static const struct vc_trace_fmt *const fmts[] = {
	&vc_trace_fmt_vct,    &vc_trace_fmt_cloudphysics, &vc_trace_fmt_systor,
	&vc_trace_fmt_msr,    &vc_trace_fmt_tencent,      &vc_trace_fmt_csv,
	&vc_trace_fmt_arc,    NULL,
};

const char *const vc_trace_formats[] = { "vct", "cloudphysics", "systor", "msr",
					 "tencent", "csv", "arc", NULL };

int vc_tr_split(char *line, char sep, char **f, int max)
{
	int n = 0;
	char *p = line;
	if (sep == 0) {
		for (;;) {
			while (*p == ' ' || *p == '\t')
				p++;
			if (!*p)
				return n;
			if (n == max)
				return max + 1;
			f[n++] = p;
			while (*p && *p != ' ' && *p != '\t')
				p++;
			if (*p)
				*p++ = '\0';
		}
	}
	for (;;) {
		if (n == max)
			return max + 1;
		f[n++] = p;
		char *q = strchr(p, sep);
		if (!q)
			return n;
		*q = '\0';
		p = q + 1;
	}
}

static const char *skip_blank(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

static int end_ok(const char *e)
{
	e = skip_blank(e);
	return *e == '\0' ? 0 : -1;
}

int vc_tr_u64(const char *s, uint64_t *v)
{
	s = skip_blank(s);
	if (!isdigit((unsigned char)*s))
		return -1;
	uint64_t x = 0;
	for (; isdigit((unsigned char)*s); s++) {
		unsigned d = (unsigned)(*s - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -1; /* overflow */
		x = x * 10 + d;
	}
	if (end_ok(s))
		return -1;
	*v = x;
	return 0;
}

int vc_tr_hex(const char *s, uint64_t *v)
{
	s = skip_blank(s);
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	if (!isxdigit((unsigned char)*s))
		return -1;
	uint64_t x = 0;
	int nd = 0;
	for (; isxdigit((unsigned char)*s); s++, nd++) {
		if (nd == 16)
			return -1;
		int c = tolower((unsigned char)*s);
		x = x * 16 + (uint64_t)(isdigit(c) ? c - '0' : c - 'a' + 10);
	}
	if (end_ok(s))
		return -1;
	*v = x;
	return 0;
}

int vc_tr_fixed(const char *s, double scale, uint64_t *v)
{
	s = skip_blank(s);
	if (!isdigit((unsigned char)*s))
		return -1;
	char *e;
	errno = 0;
	double d = strtod(s, &e);
	if (errno || end_ok(e) || !(d >= 0) || d * scale >= 1.8e19)
		return -1;
	*v = (uint64_t)(d * scale);
	return 0;
}

int vc_tr_bad(struct vc_trace *t, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return vc_err(-EBADMSG, "%s:%llu: %s (%s format)", vc_stream_path(t->s),
		      (unsigned long long)vc_stream_lineno(t->s), msg, t->fmt->name);
}

bool vc_tr_blank(const char *line)
{
	line = skip_blank(line);
	return *line == '\0' || *line == '#';
}

static const struct vc_trace_fmt *fmt_by_name(const char *name)
{
	for (int i = 0; fmts[i]; i++)
		if (strcmp(fmts[i]->name, name) == 0)
			return fmts[i];
	return NULL;
}

/* Sniffs the format: the binary magic, else the first non-blank line. */
static int detect(struct vc_trace *t)
{
	unsigned char head[16];
	ssize_t n = vc_stream_peek(t->s, head, sizeof head);
	if (n < 0)
		return (int)n;
	for (int i = 0; fmts[i]; i++)
		if (fmts[i]->magic && fmts[i]->magic(head, (size_t)n)) {
			t->fmt = fmts[i];
			return 0;
		}
	char *line;
	size_t len;
	int r;
	while ((r = vc_stream_line(t->s, &line, &len)) == 1 && vc_tr_blank(line))
		;
	if (r < 0)
		return r;
	if (r == 0)
		return vc_err(-EBADMSG, "%s: empty trace: cannot tell its format (give one)",
			      vc_stream_path(t->s));
	char copy[256];
	snprintf(copy, sizeof copy, "%s", line);
	for (int i = 0; fmts[i]; i++)
		if (fmts[i]->sniff && fmts[i]->sniff(copy, vc_stream_path(t->s))) {
			t->fmt = fmts[i];
			vc_stream_unget_line(t->s);
			return 0;
		}
	return vc_err(-EBADMSG, "%s:%llu: unknown trace format (first line \"%.60s\"); give one of "
		      "arc, cloudphysics, msr, systor, tencent, csv, vct",
		      vc_stream_path(t->s), (unsigned long long)vc_stream_lineno(t->s), copy);
}

int vc_trace_open(const char *path, const char *format, vc_trace **out)
{
	struct vc_trace *t = calloc(1, sizeof *t);
	if (!t)
		return vc_err(-ENOMEM, "out of memory");
	int r = 0;
	if (format && strcmp(format, "auto") != 0) {
		t->fmt = fmt_by_name(format);
		if (!t->fmt) {
			free(t);
			return vc_err(-EINVAL, "unknown trace format \"%s\"", format);
		}
	}
	r = vc_stream_open(path, &t->s);
	if (r == 0 && !t->fmt)
		r = detect(t);
	if (r < 0) {
		vc_trace_close(t);
		return r;
	}
	*out = t;
	return 0;
}

void vc_trace_close(vc_trace *t)
{
	if (!t)
		return;
	vc_stream_close(t->s);
	free(t);
}

int vc_trace_next(vc_trace *t, struct vc_trace_req *r)
{
	memset(r, 0, sizeof *r);
	if (t->fmt->next)
		return t->fmt->next(t, r);
	char *line;
	size_t len;
	for (;;) {
		int k = vc_stream_line(t->s, &line, &len);
		if (k <= 0)
			return k;
		if (vc_tr_blank(line))
			continue;
		k = t->fmt->parse(t, line, r);
		if (k != 0)
			return k;
	}
}

int vc_trace_next_page(vc_trace *t, uint32_t page_size, bool expand, uint64_t *key, int *op)
{
	if (t->pg_next >= t->pg_end) {
		struct vc_trace_req r;
		int k = vc_trace_next(t, &r);
		if (k <= 0)
			return k;
		uint64_t first = r.offset / page_size;
		uint64_t last = r.size ? (r.offset + r.size - 1) / page_size : first;
		if (r.offset + r.size < r.offset || last > VC_TRACE_PAGE_MASK)
			return vc_tr_bad(t, "offset %llu + size %llu out of range",
					 (unsigned long long)r.offset, (unsigned long long)r.size);
		t->pg_next = first;
		t->pg_end = expand ? last + 1 : first + 1;
		t->pg_vol = (uint64_t)(r.volume & 0xffff) << VC_TRACE_VOL_SHIFT;
		t->pg_op = r.op;
	}
	*key = t->pg_vol | t->pg_next++;
	*op = t->pg_op;
	return 1;
}

const char *vc_trace_format(const vc_trace *t)
{
	return t->fmt->name;
}

const char *vc_trace_path(const vc_trace *t)
{
	return vc_stream_path(t->s);
}

double vc_trace_progress(const vc_trace *t)
{
	uint64_t size = vc_stream_size(t->s);
	if (!size)
		return 0;
	double f = (double)vc_stream_pos(t->s) / (double)size;
	return f > 1 ? 1 : f;
}
