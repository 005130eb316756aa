/* Byte and line streams over trace files; see stream.h.
 *
 * Layout: raw bytes come from the file into `in` (IN_CAP at a time); the
 * decompressor (or a plain copy) appends to `out` (OUT_CAP); lines are cut
 * out of `out` in place (the '\n' becomes the NUL), and only a line that
 * straddles two fills of `out` is copied, into `line`. So memory is
 * IN_CAP + OUT_CAP + the longest straddling line, and each byte is copied
 * at most twice after decompression.
 *
 * Compressed files are decompressed on a thread of their own, chunks
 * ahead of the reader: decompression (zstd: 9-11 ms for an ARC trace here,
 * as long as parsing it) then runs beside the parsing instead of before it.
 * The thread fills NCHUNK buffers of CHUNK bytes in turn, each behind HEAD
 * bytes of room; the reader holds one as `out` and, moving to the next,
 * copies the bytes it has not consumed (never more than a line) into the
 * room in front of it, so the bytes it looks at stay contiguous and a
 * chunk's data is never copied. The thread owns `in`, the decompressor
 * and everything produce() touches; the two meet only at the ring, under
 * `mu`. Memory: NCHUNK (HEAD + CHUNK) + IN_CAP.
 */
#include "trace/stream.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "vramcache.h"

#ifdef VC_HAVE_ZSTD
#include <zstd.h>
#endif
#ifdef VC_HAVE_LZMA
#include <lzma.h>
#endif
#ifdef VC_HAVE_BZ2
#include <bzlib.h>
#endif
#ifdef VC_HAVE_ZLIB
#include <zlib.h>
#endif

/* 128 KiB in (what zstd recommends for its streaming input,
 * ZSTD_DStreamInSize), 1 MiB out: a read(2) or a decompression call per
 * megabyte costs nothing next to parsing, and the fast parsers
 * (vc_stream_buf) see thousands of whole lines per look. Uncompressed files
 * are read straight into `out`, with no copy through `in`. */
#define IN_CAP (128u << 10)
#define OUT_CAP (1u << 20)

/* The decompressing thread's ring: six chunks of 256 KiB (one the reader
 * holds, one being filled, the rest ready), so the thread runs up to
 * 1.5 MiB ahead. Where decompression is the slower side (bzip2: 25 ms for
 * the Tencent sample's 1.5 MB), the chunk size is what the reader still
 * has to do after the thread is done: with 1 MiB chunks the Tencent
 * sample's mrc at 512-byte pages took 43 ms, with 256 KiB 32 ms, with
 * 64-128 KiB no less. The room in front of a chunk holds what the reader
 * has not consumed when it moves on, which is at most a line
 * (vc_stream_buf's callers ask for at most a line and a few KiB more). */
#define NCHUNK 6
#define CHUNK (256u << 10)
#define HEAD (VC_STREAM_MAX_LINE + 8192)

struct chunk {
	unsigned char *buf; /* HEAD + CHUNK bytes, the data at buf + HEAD */
	size_t len;
	bool full;  /* filled, not yet released by the reader */
	bool end;   /* the last chunk: the data ended, or failed with err */
	int err;
	char msg[256];
};

struct vc_stream {
	int fd;
	bool own_fd;
	char *path;
	enum vc_comp comp;
	_Atomic uint64_t pos; /* file bytes read (the thread writes, the reader reads) */
	uint64_t size;

	/* compressed files: the decompressing thread (see the top) */
	bool threaded, stop;
	pthread_t thr;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct chunk ring[NCHUNK];
	unsigned next_fill, next_take; /* the thread's and the reader's next chunk */
	int held;                      /* the chunk that is `out`, or -1 */
	bool t_end;                    /* the reader took the last chunk */
	int t_err;
	char t_msg[256];

	unsigned char *in;
	size_t in_pos, in_len;
	bool in_eof;   /* read(2) returned 0 */
	bool in_frame; /* the decompressor is inside a frame/stream/member */
	bool done;     /* no more decompressed bytes */
	bool started;  /* a read or line call happened (peek no longer allowed) */

	unsigned char *out;
	size_t out_pos, out_len;

	char *line; /* straddling lines */
	size_t line_cap;
	char *last; /* the line last returned, for unget */
	size_t last_len;
	bool unget;
	uint64_t lineno;

#ifdef VC_HAVE_ZSTD
	ZSTD_DStream *zs;
#endif
#ifdef VC_HAVE_LZMA
	lzma_stream xz;
#endif
#ifdef VC_HAVE_BZ2
	bz_stream bz;
#endif
#ifdef VC_HAVE_ZLIB
	z_stream gz;
#endif
};

const char *vc_comp_name(enum vc_comp c)
{
	static const char *const n[] = { "none", "zstd", "xz", "bzip2", "gzip" };
	return (unsigned)c < 5 ? n[c] : "?";
}

int vc_comp_available(enum vc_comp c)
{
	switch (c) {
	case VC_COMP_NONE:
		return 1;
#ifdef VC_HAVE_ZSTD
	case VC_COMP_ZSTD:
		return 1;
#endif
#ifdef VC_HAVE_LZMA
	case VC_COMP_XZ:
		return 1;
#endif
#ifdef VC_HAVE_BZ2
	case VC_COMP_BZ2:
		return 1;
#endif
#ifdef VC_HAVE_ZLIB
	case VC_COMP_GZ:
		return 1;
#endif
	default:
		return 0;
	}
}

static const char *comp_package(enum vc_comp c)
{
	switch (c) {
	case VC_COMP_ZSTD:
		return "libzstd-dev";
	case VC_COMP_XZ:
		return "liblzma-dev";
	case VC_COMP_BZ2:
		return "libbz2-dev";
	case VC_COMP_GZ:
		return "zlib1g-dev";
	default:
		return "?";
	}
}

/* Refills `in` when it is used up. Returns 0, or a negative code. */
static int fill_in(struct vc_stream *s)
{
	if (s->in_pos < s->in_len || s->in_eof)
		return 0;
	for (;;) {
		ssize_t r = read(s->fd, s->in, IN_CAP);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return vc_err(-errno, "%s: read error: %s", s->path, strerror(errno));
		s->in_pos = 0;
		s->in_len = (size_t)r;
		atomic_fetch_add_explicit(&s->pos, (uint64_t)r, memory_order_relaxed);
		if (r == 0)
			s->in_eof = true;
		return 0;
	}
}

/* Uncompressed files: up to n bytes from the file straight into dst (one
 * read(2), retried on EINTR). Returns the count, 0 at the end of the file,
 * or a negative code. */
static ssize_t read_direct(struct vc_stream *s, unsigned char *dst, size_t n)
{
	for (;;) {
		ssize_t r = read(s->fd, dst, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return vc_err(-errno, "%s: read error: %s", s->path, strerror(errno));
		atomic_fetch_add_explicit(&s->pos, (uint64_t)r, memory_order_relaxed);
		if (r == 0)
			s->in_eof = true;
		return r;
	}
}

/* True when `in` has bytes left or the file has more. */
static int more_input(struct vc_stream *s)
{
	int r = fill_in(s);
	if (r < 0)
		return r;
	return s->in_pos < s->in_len;
}

static int truncated(struct vc_stream *s)
{
	return vc_err(-EBADMSG, "%s: truncated %s data (the file ends inside a compressed frame)",
		      s->path, vc_comp_name(s->comp));
}

static __attribute__((unused)) int corrupt(struct vc_stream *s, const char *why)
{
	return vc_err(-EBADMSG, "%s: corrupt %s data: %s", s->path, vc_comp_name(s->comp), why);
}

/* Decompresses (or copies) into out[0..cap). Returns bytes produced (> 0),
 * 0 at the end of the data, or a negative code. */
static ssize_t produce(struct vc_stream *s, unsigned char *out, size_t cap)
{
	for (;;) {
		if (s->done)
			return 0;
		int m = more_input(s);
		if (m < 0)
			return m;
		if (!m) {
			/* The file is finished. xz needs a LZMA_FINISH call to say
			 * whether it ended cleanly; the others know already. */
			if (s->comp != VC_COMP_XZ || !s->in_frame) {
				if (s->in_frame)
					return truncated(s);
				s->done = true;
				return 0;
			}
		}
		size_t avail = s->in_len - s->in_pos;
		unsigned char *src = s->in + s->in_pos;
		switch (s->comp) {
		case VC_COMP_NONE: {
			size_t k = avail < cap ? avail : cap;
			memcpy(out, src, k);
			s->in_pos += k;
			if (s->in_pos == s->in_len && !s->in_eof && cap - k >= IN_CAP) {
				/* `in` is drained: read the rest of this fill
				 * straight into `out`. */
				ssize_t r = read_direct(s, out + k, cap - k);
				if (r < 0)
					return r;
				k += (size_t)r;
			}
			return (ssize_t)k;
		}
#ifdef VC_HAVE_ZSTD
		case VC_COMP_ZSTD: {
			ZSTD_inBuffer ib = { src, avail, 0 };
			ZSTD_outBuffer ob = { out, cap, 0 };
			size_t r = ZSTD_decompressStream(s->zs, &ob, &ib);
			s->in_pos += ib.pos;
			if (ZSTD_isError(r))
				return corrupt(s, ZSTD_getErrorName(r));
			/* r == 0: a frame ended exactly here; more input starts
			 * the next frame. */
			s->in_frame = r != 0;
			if (ob.pos)
				return (ssize_t)ob.pos;
			break;
		}
#endif
#ifdef VC_HAVE_LZMA
		case VC_COMP_XZ: {
			s->xz.next_in = src;
			s->xz.avail_in = avail;
			s->xz.next_out = out;
			s->xz.avail_out = cap;
			lzma_ret r = lzma_code(&s->xz, s->in_eof ? LZMA_FINISH : LZMA_RUN);
			s->in_pos += avail - s->xz.avail_in;
			size_t got = cap - s->xz.avail_out;
			s->in_frame = true; /* LZMA_CONCATENATED: only STREAM_END ends it */
			if (r == LZMA_STREAM_END) {
				s->in_frame = false;
				s->done = true;
				return (ssize_t)got;
			}
			if (r == LZMA_BUF_ERROR && s->in_eof)
				return truncated(s);
			if (r != LZMA_OK && r != LZMA_BUF_ERROR)
				return corrupt(s, r == LZMA_FORMAT_ERROR ? "not xz" :
						  r == LZMA_DATA_ERROR ? "data error" :
						  r == LZMA_MEM_ERROR ? "out of memory" : "decoder error");
			if (got)
				return (ssize_t)got;
			break;
		}
#endif
#ifdef VC_HAVE_BZ2
		case VC_COMP_BZ2: {
			if (!s->in_frame) {
				if (BZ2_bzDecompressInit(&s->bz, 0, 0) != BZ_OK)
					return vc_err(-ENOMEM, "%s: cannot start bzip2", s->path);
				s->in_frame = true;
			}
			s->bz.next_in = (char *)src;
			s->bz.avail_in = (unsigned)avail;
			s->bz.next_out = (char *)out;
			s->bz.avail_out = (unsigned)cap;
			int r = BZ2_bzDecompress(&s->bz);
			s->in_pos += avail - s->bz.avail_in;
			size_t got = cap - s->bz.avail_out;
			if (r == BZ_STREAM_END) {
				BZ2_bzDecompressEnd(&s->bz);
				s->in_frame = false; /* another stream may follow */
			} else if (r != BZ_OK) {
				return corrupt(s, r == BZ_DATA_ERROR_MAGIC ? "not bzip2" : "data error");
			}
			if (got)
				return (ssize_t)got;
			break;
		}
#endif
#ifdef VC_HAVE_ZLIB
		case VC_COMP_GZ: {
			s->gz.next_in = src;
			s->gz.avail_in = (uInt)avail;
			s->gz.next_out = out;
			s->gz.avail_out = (uInt)cap;
			int r = inflate(&s->gz, Z_NO_FLUSH);
			s->in_pos += avail - s->gz.avail_in;
			size_t got = cap - s->gz.avail_out;
			s->in_frame = true;
			if (r == Z_STREAM_END) {
				inflateReset(&s->gz); /* another member may follow */
				s->in_frame = false;
			} else if (r != Z_OK && r != Z_BUF_ERROR) {
				return corrupt(s, s->gz.msg ? s->gz.msg : "data error");
			}
			if (got)
				return (ssize_t)got;
			break;
		}
#endif
		default:
			return vc_err(-VC_ENOTBUILT, "%s: no %s support", s->path, vc_comp_name(s->comp));
		}
	}
}

/* The decompressing thread: fills the ring's chunks in turn until the data
 * ends or fails (the failure and its message travel in the last chunk) or
 * the reader stops it. */
static void *decompress_thread(void *arg)
{
	struct vc_stream *s = arg;
	for (bool end = false; !end;) {
		struct chunk *c = &s->ring[s->next_fill % NCHUNK];
		pthread_mutex_lock(&s->mu);
		while (c->full && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		bool stop = s->stop;
		pthread_mutex_unlock(&s->mu);
		if (stop)
			break;
		/* The first chunk is small, so the reader starts (detects the
		 * format, parses) after 64 KiB rather than a whole chunk. */
		size_t want = s->next_fill == 0 ? 64u << 10 : CHUNK;
		c->len = 0;
		c->err = 0;
		while (c->len < want) {
			ssize_t r = produce(s, c->buf + HEAD + c->len, want - c->len);
			if (r <= 0) {
				end = true;
				c->err = (int)r;
				if (r < 0)
					snprintf(c->msg, sizeof c->msg, "%s", vc_last_error());
				break;
			}
			c->len += (size_t)r;
		}
		pthread_mutex_lock(&s->mu);
		c->end = end;
		c->full = true;
		s->next_fill++;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
	}
	return NULL;
}

static int start_thread(struct vc_stream *s)
{
	for (int i = 0; i < NCHUNK; i++) {
		s->ring[i].buf = malloc(HEAD + CHUNK);
		if (!s->ring[i].buf)
			return vc_err(-ENOMEM, "out of memory");
	}
	s->held = -1;
	static unsigned char none[1];
	s->out = none; /* no bytes until the first chunk, but a real pointer */
	if (pthread_mutex_init(&s->mu, NULL) != 0)
		return vc_err(-ENOMEM, "%s: cannot make a lock", s->path);
	if (pthread_cond_init(&s->cv, NULL) != 0) {
		pthread_mutex_destroy(&s->mu);
		return vc_err(-ENOMEM, "%s: cannot make a condition variable", s->path);
	}
	int r = pthread_create(&s->thr, NULL, decompress_thread, s);
	if (r != 0) {
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->mu);
		return vc_err(-r, "%s: cannot start the decompressing thread: %s", s->path,
			      strerror(r));
	}
	s->threaded = true;
	return 0;
}

/* The reader's side of the ring: hands chunk `c` back to the thread (NULL:
 * none), or tells it to stop, and wakes it. */
static void reader_signal(struct vc_stream *s, struct chunk *c, bool stop)
{
	pthread_mutex_lock(&s->mu);
	if (c)
		c->full = false;
	s->stop |= stop;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void stop_thread(struct vc_stream *s)
{
	if (s->threaded) {
		reader_signal(s, NULL, true);
		pthread_join(s->thr, NULL);
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->mu);
		s->threaded = false;
	}
	for (int i = 0; i < NCHUNK; i++)
		free(s->ring[i].buf);
}

/* fill_out with the thread: moves to its next chunk, the bytes not yet
 * consumed copied in front of it. Returns the chunk's bytes (the count of
 * new bytes), 0 at the end, or the thread's error with its message. */
static ssize_t next_chunk(struct vc_stream *s)
{
	if (s->t_end)
		return s->t_err < 0 ? vc_err(s->t_err, "%s", s->t_msg) : 0;
	size_t left = s->out_len - s->out_pos;
	if (left > HEAD)
		return vc_err(-EOVERFLOW, "%s: internal buffer full", s->path);
	int i = (int)(s->next_take % NCHUNK);
	struct chunk *c = &s->ring[i];
	pthread_mutex_lock(&s->mu);
	while (!c->full)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	if (left)
		memcpy(c->buf + HEAD - left, s->out + s->out_pos, left);
	if (s->held >= 0)
		reader_signal(s, &s->ring[s->held], false);
	s->held = i;
	s->next_take++;
	s->out = c->buf;
	s->out_pos = HEAD - left;
	s->out_len = HEAD + c->len;
	if (c->end) {
		s->t_end = true;
		s->t_err = c->err;
		memcpy(s->t_msg, c->msg, sizeof s->t_msg);
	}
	if (c->len)
		return (ssize_t)c->len;
	return s->t_err < 0 ? vc_err(s->t_err, "%s", s->t_msg) : 0;
}

/* Appends decompressed bytes to `out` (compacting first). Returns bytes
 * added, 0 at the end, or a negative code. */
static ssize_t fill_out(struct vc_stream *s)
{
	if (s->threaded)
		return next_chunk(s);
	if (s->out_pos == s->out_len) {
		s->out_pos = s->out_len = 0;
	} else if (s->out_pos > 0) {
		memmove(s->out, s->out + s->out_pos, s->out_len - s->out_pos);
		s->out_len -= s->out_pos;
		s->out_pos = 0;
	}
	if (s->out_len == OUT_CAP)
		return vc_err(-EOVERFLOW, "%s: internal buffer full", s->path);
	ssize_t r = produce(s, s->out + s->out_len, OUT_CAP - s->out_len);
	if (r > 0)
		s->out_len += (size_t)r;
	return r;
}

static enum vc_comp sniff_comp(const unsigned char *b, size_t n)
{
	if (n >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd)
		return VC_COMP_ZSTD;
	if (n >= 6 && memcmp(b, "\xfd" "7zXZ\0", 6) == 0)
		return VC_COMP_XZ;
	if (n >= 3 && b[0] == 'B' && b[1] == 'Z' && b[2] == 'h')
		return VC_COMP_BZ2;
	if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return VC_COMP_GZ;
	return VC_COMP_NONE;
}

int vc_stream_open(const char *path, struct vc_stream **out)
{
	struct vc_stream *s = calloc(1, sizeof *s);
	if (!s)
		return vc_err(-ENOMEM, "out of memory");
	s->fd = -1;
	s->path = strdup(path);
	s->in = malloc(IN_CAP);
	int r = 0;
	if (!s->path || !s->in) {
		r = vc_err(-ENOMEM, "out of memory");
		goto fail;
	}
	if (strcmp(path, "-") == 0) {
		s->fd = 0;
	} else {
		s->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (s->fd < 0) {
			r = vc_err(-errno, "%s: %s", path, strerror(errno));
			goto fail;
		}
		s->own_fd = true;
		struct stat st;
		if (fstat(s->fd, &st) == 0 && S_ISREG(st.st_mode))
			s->size = (uint64_t)st.st_size;
		else if (fstat(s->fd, &st) == 0 && S_ISDIR(st.st_mode)) {
			r = vc_err(-EISDIR, "%s: is a directory", path);
			goto fail;
		}
	}
	/* Fill `in` until the magic bytes can be seen (a pipe may return a
	 * few bytes at a time). */
	while (s->in_len < 8 && !s->in_eof) {
		ssize_t k = read(s->fd, s->in + s->in_len, IN_CAP - s->in_len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = vc_err(-errno, "%s: read error: %s", path, strerror(errno));
			goto fail;
		}
		if (k == 0)
			s->in_eof = true;
		s->in_len += (size_t)k;
		atomic_fetch_add_explicit(&s->pos, (uint64_t)k, memory_order_relaxed);
	}
	s->comp = sniff_comp(s->in, s->in_len);
	if (!vc_comp_available(s->comp)) {
		r = vc_err(-VC_ENOTBUILT,
			   "%s: %s-compressed, but this build has no %s support (install %s and "
			   "rebuild, or decompress the file first)",
			   path, vc_comp_name(s->comp), vc_comp_name(s->comp), comp_package(s->comp));
		goto fail;
	}
	switch (s->comp) {
#ifdef VC_HAVE_ZSTD
	case VC_COMP_ZSTD:
		s->zs = ZSTD_createDStream();
		if (!s->zs || ZSTD_isError(ZSTD_initDStream(s->zs)))
			r = vc_err(-ENOMEM, "%s: cannot start zstd", path);
		s->in_frame = true;
		break;
#endif
#ifdef VC_HAVE_LZMA
	case VC_COMP_XZ: {
		lzma_stream init = LZMA_STREAM_INIT;
		s->xz = init;
		if (lzma_stream_decoder(&s->xz, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK)
			r = vc_err(-ENOMEM, "%s: cannot start xz", path);
		s->in_frame = true;
		break;
	}
#endif
#ifdef VC_HAVE_ZLIB
	case VC_COMP_GZ:
		if (inflateInit2(&s->gz, 15 + 32) != Z_OK) /* +32: gzip or zlib header */
			r = vc_err(-ENOMEM, "%s: cannot start gzip", path);
		s->in_frame = true;
		break;
#endif
	default:
		break;
	}
	if (r == 0 && s->comp != VC_COMP_NONE)
		r = start_thread(s);
	else if (r == 0 && !(s->out = malloc(OUT_CAP)))
		r = vc_err(-ENOMEM, "out of memory");
	if (r < 0)
		goto fail;
	*out = s;
	return 0;
fail:
	vc_stream_close(s);
	return r;
}

void vc_stream_close(struct vc_stream *s)
{
	if (!s)
		return;
	stop_thread(s); /* before the decompressor it uses goes */
	switch (s->comp) {
#ifdef VC_HAVE_ZSTD
	case VC_COMP_ZSTD:
		ZSTD_freeDStream(s->zs);
		break;
#endif
#ifdef VC_HAVE_LZMA
	case VC_COMP_XZ:
		lzma_end(&s->xz);
		break;
#endif
#ifdef VC_HAVE_BZ2
	case VC_COMP_BZ2:
		if (s->in_frame)
			BZ2_bzDecompressEnd(&s->bz);
		break;
#endif
#ifdef VC_HAVE_ZLIB
	case VC_COMP_GZ:
		inflateEnd(&s->gz);
		break;
#endif
	default:
		break;
	}
	if (s->own_fd)
		close(s->fd);
	free(s->path);
	free(s->in);
	if (s->comp == VC_COMP_NONE)
		free(s->out);
	free(s->line);
	free(s);
}

ssize_t vc_stream_peek(struct vc_stream *s, void *buf, size_t n)
{
	if (s->started || n > 64)
		return vc_err(-EINVAL, "%s: peek after reading", s->path);
	while (s->out_len - s->out_pos < n) {
		ssize_t r = fill_out(s);
		if (r < 0)
			return r;
		if (r == 0)
			break;
	}
	size_t k = s->out_len - s->out_pos < n ? s->out_len - s->out_pos : n;
	memcpy(buf, s->out + s->out_pos, k);
	return (ssize_t)k;
}

ssize_t vc_stream_read(struct vc_stream *s, void *buf, size_t n)
{
	s->started = true;
	if (s->out_pos == s->out_len) {
		ssize_t r = fill_out(s);
		if (r <= 0)
			return r;
	}
	size_t k = s->out_len - s->out_pos < n ? s->out_len - s->out_pos : n;
	memcpy(buf, s->out + s->out_pos, k);
	s->out_pos += k;
	return (ssize_t)k;
}

int vc_stream_byte(struct vc_stream *s, unsigned char *b)
{
	s->started = true;
	if (s->out_pos == s->out_len) {
		ssize_t r = fill_out(s);
		if (r <= 0)
			return (int)r;
	}
	*b = s->out[s->out_pos++];
	return 1;
}

static int grow_line(struct vc_stream *s, size_t need)
{
	if (need <= s->line_cap)
		return 0;
	size_t cap = s->line_cap ? s->line_cap : 256;
	while (cap < need)
		cap *= 2;
	char *p = realloc(s->line, cap);
	if (!p)
		return vc_err(-ENOMEM, "out of memory");
	s->line = p;
	s->line_cap = cap;
	return 0;
}

static int finish_line(struct vc_stream *s, char *p, size_t len, char **line, size_t *lenp)
{
	s->lineno++;
	if (memchr(p, '\0', len))
		return vc_err(-EBADMSG, "%s:%llu: NUL byte in a text line (binary data?)", s->path,
			      (unsigned long long)s->lineno);
	if (len && p[len - 1] == '\r')
		len--;
	p[len] = '\0';
	s->last = p;
	s->last_len = len;
	*line = p;
	*lenp = len;
	return 1;
}

int vc_stream_line(struct vc_stream *s, char **line, size_t *len)
{
	s->started = true;
	if (s->unget) {
		s->unget = false;
		s->lineno++;
		*line = s->last;
		*len = s->last_len;
		return 1;
	}
	size_t have = 0; /* bytes of this line already copied into s->line */
	for (;;) {
		unsigned char *b = s->out + s->out_pos;
		size_t avail = s->out_len - s->out_pos;
		unsigned char *nl = memchr(b, '\n', avail);
		size_t seg = nl ? (size_t)(nl - b) : avail;
		if (have + seg > VC_STREAM_MAX_LINE)
			return vc_err(-EBADMSG, "%s:%llu: line longer than %d bytes (binary data?)",
				      s->path, (unsigned long long)s->lineno + 1, VC_STREAM_MAX_LINE);
		if (nl && have == 0) { /* the common case: the line lies in `out` */
			s->out_pos += seg + 1;
			return finish_line(s, (char *)b, seg, line, len);
		}
		int r = grow_line(s, have + seg + 1);
		if (r < 0)
			return r;
		memcpy(s->line + have, b, seg);
		have += seg;
		s->out_pos += seg + (nl != NULL);
		if (nl)
			return finish_line(s, s->line, have, line, len);
		ssize_t k = fill_out(s);
		if (k < 0)
			return (int)k;
		if (k == 0) {
			if (have == 0)
				return 0;
			return finish_line(s, s->line, have, line, len);
		}
	}
}

ssize_t vc_stream_buf(struct vc_stream *s, const unsigned char **p, size_t want)
{
	s->started = true;
	if (s->unget)
		return 0;
	if (s->out_len - s->out_pos < want &&
	    (s->threaded || s->out_pos || s->out_len < OUT_CAP)) {
		ssize_t r = fill_out(s);
		if (r < 0)
			return r;
	}
	*p = s->out + s->out_pos;
	return (ssize_t)(s->out_len - s->out_pos);
}

void vc_stream_consume(struct vc_stream *s, size_t n, uint64_t lines)
{
	s->out_pos += n;
	s->lineno += lines;
	s->last = NULL; /* nothing to unget: the fast path took it */
}

void vc_stream_unget_line(struct vc_stream *s)
{
	if (s->last) {
		s->unget = true;
		s->lineno--;
	}
}

uint64_t vc_stream_lineno(const struct vc_stream *s)
{
	return s->lineno;
}

const char *vc_stream_path(const struct vc_stream *s)
{
	return s->path;
}

enum vc_comp vc_stream_comp(const struct vc_stream *s)
{
	return s->comp;
}

uint64_t vc_stream_pos(const struct vc_stream *s)
{
	return atomic_load_explicit(&((struct vc_stream *)s)->pos, memory_order_relaxed);
}

uint64_t vc_stream_size(const struct vc_stream *s)
{
	return s->size;
}
