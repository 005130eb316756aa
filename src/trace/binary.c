/* The compact binary trace format ("vct"); the layout is in trace.h.
 *
 * Why: text traces cost most of a simulation's time in parsing (the ARC
 * traces parse at roughly 10 M lines/s); a vct file reads at several times
 * that and is 3-8 bytes a request before compression. `vramcache convert`
 * writes one from any format. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "trace/format.h"

#define F_WRITE 1u
#define F_VOL 2u
#define F_SIZE 4u

static bool vct_magic(const unsigned char *b, size_t n)
{
	return n >= 8 && memcmp(b, VC_VCT_MAGIC, 8) == 0;
}

static int bad(struct vc_trace *t, const char *what)
{
	return vc_err(-EBADMSG, "%s: record %llu: %s (vct format)", vc_trace_path(t),
		      (unsigned long long)t->nrec + 1, what);
}

/* 1 with *v; 0 at a clean end (only when `first`); negative on error. */
static int get_varint(struct vc_trace *t, uint64_t *v, bool first)
{
	uint64_t x = 0;
	for (int shift = 0;; shift += 7) {
		unsigned char b;
		int r = vc_stream_byte(t->s, &b);
		if (r < 0)
			return r;
		if (r == 0)
			return first && shift == 0 ? 0 : bad(t, "truncated record");
		if (shift == 63 && b > 1)
			return bad(t, "varint overflows 64 bits");
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
		if (shift == 63)
			return bad(t, "varint overflows 64 bits");
	}
	*v = x;
	return 1;
}

static int vct_next(struct vc_trace *t, struct vc_trace_req *r)
{
	if (!t->header_done) {
		unsigned char h[16];
		size_t got = 0;
		while (got < 16) {
			ssize_t k = vc_stream_read(t->s, h + got, 16 - got);
			if (k < 0)
				return (int)k;
			if (k == 0)
				return vc_err(-EBADMSG, "%s: truncated vct header", vc_trace_path(t));
			got += (size_t)k;
		}
		if (!vct_magic(h, 16))
			return vc_err(-EBADMSG, "%s: not a vct trace (bad magic)", vc_trace_path(t));
		t->header_done = true;
	}
	unsigned char flags;
	int k = vc_stream_byte(t->s, &flags);
	if (k <= 0)
		return k;
	if (flags & ~(F_WRITE | F_VOL | F_SIZE))
		return bad(t, "unknown flag bits");
	uint64_t dt, zoff, size = t->prev_size, vol = t->prev_vol;
	if ((k = get_varint(t, &dt, false)) < 0 || (k = get_varint(t, &zoff, false)) < 0)
		return k;
	if ((flags & F_SIZE) && (k = get_varint(t, &size, false)) < 0)
		return k;
	if ((flags & F_VOL) && (k = get_varint(t, &vol, false)) < 0)
		return k;
	if (vol > UINT32_MAX)
		return bad(t, "volume out of range");
	int64_t doff = (int64_t)(zoff >> 1) ^ -(int64_t)(zoff & 1);
	r->time = t->prev_time + dt;
	r->offset = t->prev_end + (uint64_t)doff;
	r->size = size;
	r->volume = (uint32_t)vol;
	r->op = flags & F_WRITE ? VC_TRACE_WRITE : VC_TRACE_READ;
	t->prev_time = r->time;
	t->prev_end = r->offset + r->size;
	t->prev_size = size;
	t->prev_vol = r->volume;
	t->nrec++;
	return 1;
}

const struct vc_trace_fmt vc_trace_fmt_vct = {
	.name = "vct",
	.magic = vct_magic,
	.next = vct_next,
};

/* --- the writer --------------------------------------------------------- */

struct vc_trace_writer {
	FILE *f;
	char *path;
	uint64_t prev_time, prev_end, prev_size;
	uint32_t prev_vol;
	int err;
};

int vc_trace_writer_open(const char *path, struct vc_trace_writer **out)
{
	struct vc_trace_writer *w = calloc(1, sizeof *w);
	if (!w || !(w->path = strdup(path))) {
		free(w);
		return vc_err(-ENOMEM, "out of memory");
	}
	w->f = strcmp(path, "-") == 0 ? stdout : fopen(path, "wb");
	if (!w->f) {
		int e = errno;
		free(w->path);
		free(w);
		return vc_err(-e, "%s: %s", path, strerror(e));
	}
	unsigned char h[16] = { 0 };
	memcpy(h, VC_VCT_MAGIC, 8);
	fwrite(h, 1, 16, w->f);
	*out = w;
	return 0;
}

static size_t put_varint(unsigned char *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (unsigned char)v;
	return n;
}

int vc_trace_writer_put(struct vc_trace_writer *w, const struct vc_trace_req *r)
{
	unsigned char b[1 + 4 * 10];
	size_t n = 1;
	b[0] = (unsigned char)((r->op == VC_TRACE_WRITE ? F_WRITE : 0) |
			       (r->volume != w->prev_vol ? F_VOL : 0) |
			       (r->size != w->prev_size ? F_SIZE : 0));
	n += put_varint(b + n, r->time >= w->prev_time ? r->time - w->prev_time : 0);
	int64_t d = (int64_t)(r->offset - w->prev_end);
	n += put_varint(b + n, ((uint64_t)d << 1) ^ (uint64_t)(d >> 63));
	if (b[0] & F_SIZE)
		n += put_varint(b + n, r->size);
	if (b[0] & F_VOL)
		n += put_varint(b + n, r->volume);
	if (fwrite(b, 1, n, w->f) != n && !w->err)
		w->err = vc_err(-EIO, "%s: write error", w->path);
	w->prev_time = r->time >= w->prev_time ? r->time : w->prev_time;
	w->prev_end = r->offset + r->size;
	w->prev_size = r->size;
	w->prev_vol = r->volume;
	return w->err;
}

int vc_trace_writer_close(struct vc_trace_writer *w)
{
	if (!w)
		return 0;
	int r = w->err;
	if (fflush(w->f) != 0 && !r)
		r = vc_err(-EIO, "%s: write error: %s", w->path, strerror(errno));
	if (w->f != stdout && fclose(w->f) != 0 && !r)
		r = vc_err(-EIO, "%s: write error: %s", w->path, strerror(errno));
	free(w->path);
	free(w);
	return r;
}
