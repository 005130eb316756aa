/* Block I/O traces: one reader interface, one file per format.
 *
 *   arc            ARC traces (Megiddo & Modha, FAST 2003): "start nblocks
 *                  ignore seq", 512-byte blocks, reads only
 *   cloudphysics   "version,time,op,size,lbn": SCSI opcode in hex, size in
 *                  bytes, lbn in 512-byte blocks
 *   msr            MSR Cambridge: "time,host,disk,Read|Write,offset,size,resp"
 *   systor         SYSTOR'17: "Timestamp,Response,IOType,LUN,Offset,Size"
 *   tencent        Tencent CBS: "time,offset,size,iotype,volume", offset and
 *                  size in 512-byte sectors, iotype 0 read / 1 write
 *   csv            generic: "time,op,offset,size", op R/W (or read/write,
 *                  0/1), offset and size in bytes; an optional header line
 *   vct            our compact binary format (trace/binary.c)
 *   lbn32be        a headerless stream of 32-bit block numbers, big-endian,
 *   lbn32le        or little-endian: the CloudPhysics traces as LIRS2 ships
 *                  them and caffeine's simulator reads them (trace/lbn32.c);
 *                  never detected, always named
 *
 * Every reader streams: memory is O(1) in the trace length (the stream's
 * buffers plus one line). Files compressed with zstd, xz, bzip2 or gzip are
 * read directly (trace/stream.h). A malformed line stops the read with
 * -EBADMSG and a message "path:line: what is wrong"; nothing is skipped
 * silently.
 *
 * Requests become page accesses with vc_trace_next_page: a request
 * [offset, offset + size) touches every page it overlaps, in order. A page
 * key is the page number, with the volume (disk, LUN) in the top 16 bits so
 * that volumes do not alias.
 */
#ifndef VC_TRACE_H
#define VC_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/pageno.h"
#include <stdio.h>

enum vc_trace_op { VC_TRACE_READ = 0, VC_TRACE_WRITE = 1 };

struct vc_trace_req {
	uint64_t time;   /* as the trace gives it (units differ per format) */
	uint64_t offset; /* bytes */
	uint64_t size;   /* bytes; 0 is taken as one page */
	uint32_t volume; /* disk or LUN; 0 when the format has none */
	uint8_t op;      /* enum vc_trace_op */
};

/* Page keys: the engine's page numbers (base/pageno.h). */
#define VC_TRACE_VOL_SHIFT VC_PNO_VOL_SHIFT
#define VC_TRACE_PAGE_MASK VC_PNO_INDEX_MASK

typedef struct vc_trace vc_trace;

/* Format names, in the order auto-detection tries them. */
extern const char *const vc_trace_formats[];

/* Opens a trace. format: a name from vc_trace_formats, or NULL/"auto" to
 * detect it from the first line (or the binary magic). Returns 0 or
 * -errno / -VC_E* (-EBADMSG when the format cannot be told). */
int vc_trace_open(const char *path, const char *format, vc_trace **out);
void vc_trace_close(vc_trace *t);

/* The next request: 1, 0 at the end, or a negative code. */
int vc_trace_next(vc_trace *t, struct vc_trace_req *r);

/* The pages [*first, *last] that request r touches (r->size 0: one page),
 * or -EBADMSG with "path:line: offset ... out of range" when the request
 * wraps past 2^64 or its pages do not fit a page key. Every command that
 * turns requests into pages goes through this one check. */
int vc_trace_req_pages(const vc_trace *t, const struct vc_trace_req *r, uint32_t page_size,
		       uint64_t *first, uint64_t *last);

/* Page iteration over the requests. With expand, a request yields one
 * access per page it overlaps; without, one access to the page of its first
 * byte (a request is one object: libCacheSim's view of a block trace with
 * the block number as object id). Returns 1 with *key and *op, 0 at the
 * end, or a negative code. */
int vc_trace_next_page(vc_trace *t, uint32_t page_size, bool expand, uint64_t *key, int *op);
/* The same accesses in batches: up to max keys (and ops, when ops is not
 * NULL). Returns the count (> 0), 0 at the end, or a negative code. The
 * fast path of the MRC and simulator commands: one call per batch instead
 * of one per page. */
long vc_trace_next_pages(vc_trace *t, uint32_t page_size, bool expand, uint64_t *keys,
			 uint8_t *ops, size_t max);

/* The format in use; "path:line" of the last line read (for messages). */
const char *vc_trace_format(const vc_trace *t);
const char *vc_trace_path(const vc_trace *t);
/* Fraction of the file read so far, 0..1 (0 when the size is unknown). */
double vc_trace_progress(const vc_trace *t);

/* --- the compact binary format ("vct") ---------------------------------
 *
 * An 16-byte header: magic "VCTRACE" + version byte 1, then 8 reserved zero
 * bytes. Then one record per request:
 *   flags     1 byte: bit 0 write, bit 1 volume follows, bit 2 size is not
 *             the previous size
 *   dtime     varint: time minus the previous request's time (times must
 *             not decrease; a decrease is written as 0)
 *   doffset   zigzag varint: offset minus the previous request's end
 *   size      varint, only with flag bit 2
 *   volume    varint, only with flag bit 1
 * Sequential runs of equal-sized requests cost 3 bytes a request. */
#define VC_VCT_MAGIC "VCTRACE\x01"

struct vc_trace_writer;
int vc_trace_writer_open(const char *path, struct vc_trace_writer **out);
int vc_trace_writer_put(struct vc_trace_writer *w, const struct vc_trace_req *r);
/* Flushes and closes; returns the first error seen. */
int vc_trace_writer_close(struct vc_trace_writer *w);

#endif
