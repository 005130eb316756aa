/* Byte and line streams over trace files, compressed or not.
 *
 * A stream reads a file in fixed-size chunks and, when the file starts with
 * the magic bytes of zstd, xz, bzip2 or gzip, decompresses it through the
 * format's library as it goes; memory is O(chunk + line), never O(file).
 * Concatenated frames/streams/members are read one after the other, as the
 * command-line tools do. A compressed stream that ends inside a frame is
 * reported as truncated (-EBADMSG), not as a clean end of file.
 *
 * A format whose library was not found at build time fails to open with
 * -VC_ENOTBUILT and a message that names the package to install.
 *
 * Errors are -errno or -VC_E* codes, with a message (vc_last_error) that
 * names the file and, for line reads, the line.
 */
#ifndef VC_TRACE_STREAM_H
#define VC_TRACE_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum vc_comp { VC_COMP_NONE, VC_COMP_ZSTD, VC_COMP_XZ, VC_COMP_BZ2, VC_COMP_GZ };

/* Longest line a line reader accepts (bytes, without the newline). Trace
 * lines are under 200 bytes; 64 KiB tells a binary file from a text one
 * without holding much memory. */
#define VC_STREAM_MAX_LINE 65536

struct vc_stream;

/* Opens path; "-" is standard input. The compression is detected from the
 * first bytes, not the name. */
int vc_stream_open(const char *path, struct vc_stream **out);
void vc_stream_close(struct vc_stream *s);

/* Reads up to n decompressed bytes. Returns the count (> 0), 0 at the end
 * of the data, or a negative code. */
ssize_t vc_stream_read(struct vc_stream *s, void *buf, size_t n);

/* One byte: 1 with *b, 0 at the end, or a negative code. For binary
 * formats; O(1) amortised. */
int vc_stream_byte(struct vc_stream *s, unsigned char *b);

/* The next line, without its newline (and without a trailing '\r'),
 * NUL-terminated in a buffer the stream owns until the next call. A last
 * line without a newline counts. Returns 1 with a line, 0 at the end, or a
 * negative code (a line longer than VC_STREAM_MAX_LINE, a NUL byte in the
 * text, a read or decompression error). */
int vc_stream_line(struct vc_stream *s, char **line, size_t *len);

/* The fast path for parsers that read the buffer in place: *p and the
 * count of bytes buffered now, after a refill when fewer than `want` were
 * (so a caller that finds no whole record in them may ask again with more:
 * up to the buffer's 1 MiB); 0 at the end of the data, or while a line is
 * put back (the caller then takes the line path), or a negative code. The
 * bytes stay valid until the next call on the stream. */
ssize_t vc_stream_buf(struct vc_stream *s, const unsigned char **p, size_t want);
/* Takes n bytes of what vc_stream_buf showed, which held `lines` lines
 * (for line numbers in messages). */
void vc_stream_consume(struct vc_stream *s, size_t n, uint64_t lines);

/* Puts back the line last returned, so the next vc_stream_line returns it
 * again (used to sniff a format from the first line). Once per line. */
void vc_stream_unget_line(struct vc_stream *s);

/* Peeks at up to n decompressed bytes without consuming them (n <= 64).
 * Returns the count available (short near the end). Only before any read. */
ssize_t vc_stream_peek(struct vc_stream *s, void *buf, size_t n);

/* Number of the line last returned (1-based), the path, the compression. */
uint64_t vc_stream_lineno(const struct vc_stream *s);
const char *vc_stream_path(const struct vc_stream *s);
enum vc_comp vc_stream_comp(const struct vc_stream *s);
const char *vc_comp_name(enum vc_comp c);
/* Whether the library for c was compiled in. */
int vc_comp_available(enum vc_comp c);

/* Bytes of the file consumed so far and the file size (0 when unknown,
 * e.g. a pipe): progress = pos / size. */
uint64_t vc_stream_pos(const struct vc_stream *s);
uint64_t vc_stream_size(const struct vc_stream *s);

#endif
