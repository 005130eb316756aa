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
	&vc_trace_fmt_arc,    &vc_trace_fmt_lbn32be,      &vc_trace_fmt_lbn32le,
	NULL,
};

const char *const vc_trace_formats[] = { "vct", "cloudphysics", "systor", "msr", "tencent",
					 "csv", "arc", "lbn32be", "lbn32le", NULL };

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

/* One byte as vc_tr_quote writes it: 1, 2 or 4 characters into e. */
static size_t quote_byte(unsigned char ch, char *e)
{
	static const char hex[] = "0123456789abcdef";
	char c = ch == '\t' ? 't' : ch == '\r' ? 'r' : ch == '\n' ? 'n' : ch == '"' ? '"'
	       : ch == '\\' ? '\\' : 0;
	if (c) {
		e[0] = '\\';
		e[1] = c;
		return 2;
	}
	if (ch < 0x20 || ch > 0x7e) {
		e[0] = '\\';
		e[1] = 'x';
		e[2] = hex[ch >> 4];
		e[3] = hex[ch & 15];
		return 4;
	}
	e[0] = (char)ch;
	return 1;
}

const char *vc_tr_quote(char *buf, size_t n, const char *s, size_t len, size_t max)
{
	if (n < 4) { /* no room for "..." */
		if (n)
			buf[0] = '\0';
		return buf;
	}
	size_t o = 0, i = 0;
	for (; i < len && i < max; i++) {
		char e[4];
		size_t k = quote_byte((unsigned char)s[i], e);
		if (o + k + 4 > n) /* keep room for "..." and the NUL */
			break;
		memcpy(buf + o, e, k);
		o += k;
	}
	if (i < len) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
	return buf;
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
	/* A headerless binary stream (lbn32*) has no magic to tell it by:
	 * any 4 bytes are a block number. Say so rather than guess. */
	if (memchr(head, '\0', (size_t)n))
		return vc_err(-EBADMSG, "%s: binary data but not a vct trace; a stream of 32-bit "
			      "block numbers (CloudPhysics as LIRS2 and caffeine read it) cannot "
			      "be detected: give --format lbn32be or lbn32le", vc_stream_path(t->s));
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
	char q[VC_TR_QUOTE_SIZE(60)];
	return vc_err(-EBADMSG, "%s:%llu: unknown trace format (first line \"%s\"); give one of "
		      "arc, cloudphysics, msr, systor, tencent, csv, vct, lbn32be, lbn32le",
		      vc_stream_path(t->s), (unsigned long long)vc_stream_lineno(t->s),
		      vc_tr_quote(q, sizeof q, line, len, 60));
}

static void fast_sync(struct vc_trace *t);

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
	fast_sync(t);
	vc_stream_close(t->s);
	free(t);
}

/* Hands the bytes the fast path parsed back to the stream and drops the
 * window (before any other call on the stream, which may move its buffer). */
static void fast_sync(struct vc_trace *t)
{
	if (t->fused)
		vc_stream_consume(t->s, t->fused, t->flines);
	t->fp = t->fend = NULL;
	t->fused = 0;
	t->flines = 0;
}

/* The fast path: 1 with a request parsed in place, 0 to take the line path
 * for the next line (the window dropped), or a negative code. A line the
 * fast parser declines at the window's end gets one refill first (it may
 * be cut by the buffer's end). */
static int next_fast(struct vc_trace *t, struct vc_trace_req *r)
{
	for (int tries = 0;; tries++) {
		size_t left = (size_t)(t->fend - t->fp);
		if (left) {
			size_t u = t->fmt->fast(t->fp, left, r);
			if (u) {
				t->fp += u;
				t->fused += u;
				t->flines++;
				return 1;
			}
			if (tries || left > VC_STREAM_MAX_LINE || memchr(t->fp, '\n', left))
				break; /* it declined a whole line, or one too long */
		} else if (tries) {
			break;
		}
		fast_sync(t);
		const unsigned char *p;
		ssize_t n = vc_stream_buf(t->s, &p, left + 4096);
		if (n < 0)
			return (int)n;
		if (n == 0)
			break; /* the end, or a line put back: the line path knows */
		t->fp = p;
		t->fend = p + n;
	}
	fast_sync(t);
	return 0;
}

int vc_trace_next(vc_trace *t, struct vc_trace_req *r)
{
	memset(r, 0, sizeof *r);
	if (t->fmt->next)
		return t->fmt->next(t, r);
	if (t->fmt->fast) {
		int k = next_fast(t, r);
		if (k != 0)
			return k;
	}
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

/* x / page_size, by a shift when the page size is a power of two (the
 * usual case: a division per request is most of a fast parse's cost). */
static uint64_t page_of(struct vc_trace *t, uint64_t x, uint32_t page_size)
{
	if (t->ps_for_shift != page_size) {
		t->ps_for_shift = page_size;
		t->ps_shift = (page_size & (page_size - 1)) ? 0 : (unsigned)__builtin_ctz(page_size);
	}
	return t->ps_shift || page_size == 1 ? x >> t->ps_shift : x / page_size;
}

static int req_pages(struct vc_trace *t, const struct vc_trace_req *r, uint32_t page_size,
		     uint64_t *first, uint64_t *last)
{
	*first = page_of(t, r->offset, page_size);
	*last = r->size ? page_of(t, r->offset + r->size - 1, page_size) : *first;
	if (r->offset + r->size < r->offset || *last > VC_TRACE_PAGE_MASK) {
		fast_sync(t); /* so the message names this line, not the window's first */
		return vc_tr_bad(t, "offset %llu + size %llu out of range",
				 (unsigned long long)r->offset, (unsigned long long)r->size);
	}
	return 0;
}

int vc_trace_req_pages(const vc_trace *t, const struct vc_trace_req *r, uint32_t page_size,
		       uint64_t *first, uint64_t *last)
{
	return req_pages((struct vc_trace *)t, r, page_size, first, last);
}

static int set_req_pages(struct vc_trace *t, const struct vc_trace_req *r, uint32_t page_size,
			 bool expand)
{
	uint64_t first, last;
	int k = req_pages(t, r, page_size, &first, &last);
	if (k < 0)
		return k;
	t->pg_next = first;
	t->pg_end = expand ? last + 1 : first + 1;
	t->pg_vol = (uint64_t)(r->volume & 0xffff) << VC_TRACE_VOL_SHIFT;
	t->pg_op = r->op;
	return 1;
}

/* The next request's pages into pg_next..pg_end: 1, 0 at the end, or a
 * negative code. */
static int next_req_pages(struct vc_trace *t, uint32_t page_size, bool expand)
{
	struct vc_trace_req r;
	int k = vc_trace_next(t, &r);
	if (k <= 0)
		return k;
	return set_req_pages(t, &r, page_size, expand);
}

/* next_req_pages for a line the fast parser takes in the current window,
 * without vc_trace_next's layers (most of the per-request cost once the
 * parse itself is fast): 1, 0 when it declines (next_req_pages then takes
 * the line), or a negative code. */
static int next_req_pages_fast(struct vc_trace *t, uint32_t page_size, bool expand)
{
	struct vc_trace_req r;
	r.volume = 0; /* the fast parsers' formats have no volume */
	size_t u = t->fmt->fast(t->fp, (size_t)(t->fend - t->fp), &r);
	if (!u)
		return 0;
	t->fp += u;
	t->fused += u;
	t->flines++;
	return set_req_pages(t, &r, page_size, expand);
}

int vc_trace_next_page(vc_trace *t, uint32_t page_size, bool expand, uint64_t *key, int *op)
{
	if (t->pg_next >= t->pg_end) {
		int k = next_req_pages(t, page_size, expand);
		if (k <= 0)
			return k;
	}
	*key = t->pg_vol | t->pg_next++;
	*op = t->pg_op;
	return 1;
}

long vc_trace_next_pages(vc_trace *t, uint32_t page_size, bool expand, uint64_t *keys,
			 uint8_t *ops, size_t max)
{
	size_t n = 0;
	while (n < max) {
		if (t->pg_next >= t->pg_end) {
			int k = t->fp < t->fend ? next_req_pages_fast(t, page_size, expand) : 0;
			if (k == 0)
				k = next_req_pages(t, page_size, expand);
			if (k < 0)
				return k;
			if (k == 0)
				break;
		}
		uint64_t m = t->pg_end - t->pg_next;
		if (m > max - n)
			m = max - n;
		for (uint64_t i = 0; i < m; i++) {
			keys[n + i] = t->pg_vol | (t->pg_next + i);
			if (ops)
				ops[n + i] = (uint8_t)t->pg_op;
		}
		t->pg_next += m;
		n += m;
	}
	return (long)n;
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
