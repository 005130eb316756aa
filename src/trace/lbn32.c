/* Streams of 32-bit block numbers, as most cache simulators take the
 * CloudPhysics traces (the 106 week-long VMware traces w001..w106 of the
 * SHARDS paper, Waldspurger et al., FAST 2015, in the form LIRS2 ships
 * them): no header, no time, no size, no operation, one unsigned 32-bit
 * logical block number a record.
 *
 * The byte order differs between the tools that read them, so it is part of
 * the format's name and never guessed:
 *   lbn32be   big-endian: caffeine's simulator (its cloud_physics reader
 *             takes each record with DataInputStream.readInt)
 *   lbn32le   little-endian: LIRS2's own reader (fread into a uint32_t on
 *             x86) and libCacheSim's binary reader, which only takes "<"
 *             (little-endian) format strings ("<I")
 * Both simulators treat each record as one object, so hit ratios agree
 * whichever order a tool assumes; only page grouping sees the difference.
 *
 * A record becomes a read of one 4 KiB block at lbn * 4096: with the
 * default 4 KiB pages every record is one page access to its own key, as in
 * those simulators. Other page sizes group or split blocks accordingly.
 * The time is the record's index. A file whose length is not a multiple of
 * 4 ends in a truncated record: -EBADMSG, naming it. */
#include <errno.h>
#include <stdio.h>

#include "base/error.h"
#include "trace/format.h"

#define LBN_BLOCK 4096u

static int lbn_next(struct vc_trace *t, struct vc_trace_req *r, bool be)
{
	const unsigned char *p;
	unsigned char b[4];
	ssize_t n = vc_stream_buf(t->s, &p, 4);
	if (n < 0)
		return (int)n;
	if (n == 0)
		return 0;
	if (n < 4) {
		/* vc_stream_buf refills below 4 bytes: only the end is short */
		vc_stream_consume(t->s, (size_t)n, 0);
		return vc_err(-EBADMSG, "%s: record %llu: truncated (%zd of 4 bytes; %s format)",
			      vc_trace_path(t), (unsigned long long)t->nrec + 1, n, t->fmt->name);
	}
	for (int i = 0; i < 4; i++)
		b[i] = p[i];
	vc_stream_consume(t->s, 4, 0);
	uint32_t v = be ? (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]
			: (uint32_t)b[3] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[1] << 8 | b[0];
	r->time = t->nrec++;
	r->offset = (uint64_t)v * LBN_BLOCK;
	r->size = LBN_BLOCK;
	r->op = VC_TRACE_READ;
	return 1;
}

static int lbn_next_be(struct vc_trace *t, struct vc_trace_req *r)
{
	return lbn_next(t, r, true);
}

static int lbn_next_le(struct vc_trace *t, struct vc_trace_req *r)
{
	return lbn_next(t, r, false);
}

const struct vc_trace_fmt vc_trace_fmt_lbn32be = {
	.name = "lbn32be",
	.next = lbn_next_be,
};

const struct vc_trace_fmt vc_trace_fmt_lbn32le = {
	.name = "lbn32le",
	.next = lbn_next_le,
};
