/* What a trace format provides, and the parsing helpers they share.
 * Internal to src/trace/. */
#ifndef VC_TRACE_FORMAT_H
#define VC_TRACE_FORMAT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

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
	/* Optional fast path for line formats: parses the line at p (n bytes
	 * buffered, the line must end in '\n' within them) without copying
	 * or splitting it. Returns the bytes it took (the newline included)
	 * with *r, or 0 for anything it does not handle (a comment, a header,
	 * a bad or unusual line, a line cut by the buffer's end): the line
	 * then goes through parse, which answers it exactly as without the
	 * fast path, errors included. */
	size_t (*fast)(const unsigned char *p, size_t n, struct vc_trace_req *r);
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
	/* fast path: the stream's buffer [fp, fend), of which fused bytes in
	 * flines lines are parsed but not yet consumed from the stream */
	const unsigned char *fp, *fend;
	size_t fused;
	uint64_t flines;
	unsigned ps_shift; /* log2 of the page size when a power of two, else 0 */
	uint32_t ps_for_shift;
};

extern const struct vc_trace_fmt vc_trace_fmt_arc, vc_trace_fmt_cloudphysics, vc_trace_fmt_msr,
	vc_trace_fmt_systor, vc_trace_fmt_tencent, vc_trace_fmt_csv, vc_trace_fmt_vct,
	vc_trace_fmt_lbn32be, vc_trace_fmt_lbn32le;

/* Fast-path scanning (see vc_trace_fmt.fast): an unsigned decimal of 1 to
 * 18 digits at *q (< e), so it cannot overflow; longer numbers, and
 * anything else, return false and leave the line to the exact parser.
 *
 * Numbers of up to 15 digits with 24 bytes buffered after them are read
 * 8 bytes at a time (SWAR): the count of leading digits from one mask, the
 * value from three multiplies (Lemire's eight-digit conversion), with no
 * branch per digit; the branch that ends a digit loop mispredicted once a
 * number and was most of a line's cost. Anything else takes the digit
 * loop, which gives the same answers. */
static inline unsigned vc_tr_swar_ndigits(uint64_t x) /* x: 8 bytes ^ '0' each */
{
	/* A byte is a digit when x < 10: x + 0x76 keeps bit 7 clear and x has
	 * it clear. A byte >= 0x8a carries into the next one, which lies after
	 * the first non-digit and does not change which byte that is. */
	uint64_t nd = ((x + 0x7676767676767676ull) | x) & 0x8080808080808080ull;
	return nd ? (unsigned)__builtin_ctzll(nd) >> 3 : 8;
}

/* The value of n (1..8) digit bytes at the low end of x (the first, most
 * significant, in the lowest byte). */
static inline uint64_t vc_tr_swar_value(uint64_t x, unsigned n)
{
	x <<= 8 * (8 - n); /* the digits to the top; zeros in front */
	x = x * 10 + (x >> 8);
	return (((x & 0x000000ff000000ffull) * (100 + (1000000ull << 32))) +
		(((x >> 16) & 0x000000ff000000ffull) * (1 + (10000ull << 32)))) >> 32;
}

static inline bool vc_tr_fast_u64(const unsigned char **q, const unsigned char *e, uint64_t *v)
{
	const unsigned char *p = *q;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (e - p >= 24) {
		uint64_t x, y;
		memcpy(&x, p, 8);
		x ^= 0x3030303030303030ull;
		unsigned n = vc_tr_swar_ndigits(x);
		if (n == 0)
			return false;
		if (n < 8) {
			*v = vc_tr_swar_value(x, n);
			*q = p + n;
			return true;
		}
		memcpy(&y, p + 8, 8);
		y ^= 0x3030303030303030ull;
		unsigned m = vc_tr_swar_ndigits(y);
		if (m < 8) {
			static const uint64_t pow10[8] = { 1, 10, 100, 1000, 10000, 100000, 1000000,
							   10000000 };
			*v = vc_tr_swar_value(x, 8) * pow10[m] + (m ? vc_tr_swar_value(y, m) : 0);
			*q = p + 8 + m;
			return true;
		}
	}
#endif
	const unsigned char *lim = e - p > 18 ? p + 18 : e;
	uint64_t x = 0;
	while (p < lim && (unsigned)(*p - '0') <= 9)
		x = x * 10 + (unsigned)(*p++ - '0');
	if (p == *q || (p < e && (unsigned)(*p - '0') <= 9))
		return false;
	*q = p;
	*v = x;
	return true;
}

/* The end of a line at *q: optional blanks, an optional '\r', then '\n'.
 * Returns the byte after the newline, or NULL. */
static inline const unsigned char *vc_tr_fast_eol(const unsigned char *q, const unsigned char *e)
{
	while (q < e && (*q == ' ' || *q == '\t'))
		q++;
	if (q < e && *q == '\r')
		q++;
	return q < e && *q == '\n' ? q + 1 : NULL;
}

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
/* For messages that quote a trace's bytes, which may be anything (a binary
 * or corrupt file): the first `max` of the `len` bytes at s in buf as
 * printable ASCII, \t \r \n \" \\ escaped as in C and other bytes outside
 * 0x20-0x7e as \xNN, with "..." after when bytes were left out. Fits in
 * 4 x max + 4 bytes; cut short (still closed by "...") if n is smaller.
 * Returns buf. */
#define VC_TR_QUOTE_SIZE(max) (4 * (max) + 4)
const char *vc_tr_quote(char *buf, size_t n, const char *s, size_t len, size_t max);

#endif
