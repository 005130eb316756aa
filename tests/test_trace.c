/* Trace readers: a golden file per format (tests/data), page expansion,
 * every compression (whole, concatenated, truncated, corrupt), malformed
 * lines named by file and line, the binary format's round trip, and the
 * shared traces' request counts when ../shared is there. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace/stream.h"
#include "trace/trace.h"
#include "testutil.h"

#ifndef VC_TEST_DATA
#error "VC_TEST_DATA must name tests/data"
#endif

struct want {
	uint64_t time, offset, size;
	uint32_t volume;
	int op;
};

static void data_path(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", VC_TEST_DATA, name);
}

/* Reads `path` in `format` (NULL: detect) and checks every request. */
static void check_golden(const char *name, const char *format, const char *want_fmt,
			 const struct want *w, int nw)
{
	char path[4096];
	data_path(path, sizeof path, name);
	vc_trace *t;
	int r = vc_trace_open(path, format, &t);
	if (r < 0) {
		fprintf(stderr, "%s: open: %s\n", name, vc_last_error());
		exit(1);
	}
	CHECK(strcmp(vc_trace_format(t), want_fmt) == 0);
	struct vc_trace_req q;
	for (int i = 0; i < nw; i++) {
		r = vc_trace_next(t, &q);
		if (r != 1) {
			fprintf(stderr, "%s: request %d: r=%d %s\n", name, i, r, vc_last_error());
			exit(1);
		}
		if (q.time != w[i].time || q.offset != w[i].offset || q.size != w[i].size ||
		    q.volume != w[i].volume || q.op != w[i].op) {
			fprintf(stderr,
				"%s: request %d: got t=%llu off=%llu size=%llu vol=%u op=%d\n",
				name, i, (unsigned long long)q.time, (unsigned long long)q.offset,
				(unsigned long long)q.size, q.volume, q.op);
			exit(1);
		}
	}
	CHECK(vc_trace_next(t, &q) == 0);
	CHECK(vc_trace_next(t, &q) == 0); /* the end stays the end */
	CHECK(vc_trace_progress(t) == 1.0);
	vc_trace_close(t);
}

static const struct want small_lis[] = {
	{ 0, 110765ull * 512, 64 * 512, 0, 0 },
	{ 1, 110888ull * 512, 512, 0, 0 },
	{ 2, 3 * 512, 8 * 512, 0, 0 },
};

static void test_golden(void)
{
	check_golden("small.lis", NULL, "arc", small_lis, 3);
	check_golden("small.lis", "arc", "arc", small_lis, 3);

	/* The 0x35 (SYNCHRONIZE CACHE) line moves no data and is skipped. */
	static const struct want cp[] = {
		{ 5633898, 42932745ull * 512, 512, 0, 1 },
		{ 5633899, 40409911ull * 512, 6656, 0, 0 },
		{ 5633901, 7 * 512, 4096, 0, 0 },
	};
	check_golden("cloudPhysics-small.csv", NULL, "cloudphysics", cp, 3);

	static const struct want msr[] = {
		{ 128166385295514663ull, 9056014336ull, 2048, 0, 1 },
		{ 128166385295514878ull, 11855351808ull, 512, 1, 0 },
		{ 128166385295515175ull, 4096, 4096, 0, 0 },
	};
	check_golden("msr-small.csv", NULL, "msr", msr, 3);

	static const struct want sys[] = {
		{ 1456095145133076ull, 899056122368ull, 131072, 0, 0 },
		{ 1456095145126285ull, 4096, 512, 2, 1 },
	};
	check_golden("systor-small.csv", NULL, "systor", sys, 2);

	static const struct want tc[] = {
		{ 1538323200, 4247200ull * 512, 128 * 512, 1058, 1 },
		{ 1538323199, 13896880ull * 512, 8 * 512, 1063, 0 },
	};
	check_golden("tencent-small.csv", NULL, "tencent", tc, 2);

	static const struct want gen[] = {
		{ 0, 0, 4096, 0, 0 },
		{ 1, 4096, 8192, 0, 1 },
		{ 2, 100, 1, 0, 0 },
		{ 3, 0, 0, 0, 1 },
	};
	check_golden("generic-small.csv", NULL, "csv", gen, 4);

	/* Unknown format names are refused. */
	vc_trace *t;
	char path[4096];
	data_path(path, sizeof path, "small.lis");
	CHECK(vc_trace_open(path, "nope", &t) == -EINVAL);
	CHECK(vc_trace_open("/nonexistent/trace", NULL, &t) == -ENOENT);
	CHECK(strstr(vc_last_error(), "/nonexistent/trace"));
}

/* Requests to pages, worked by hand for 4 KiB pages:
 *   110765*512 = 56711680 = 13845*4096 + 2560; end 56744447 -> 13853: 9 pages
 *   110888*512 = 56774656 = 13861*4096 exactly, 512 bytes: 1 page
 *   1536 .. 5631: pages 0 and 1 */
static void test_pages(void)
{
	char path[4096];
	data_path(path, sizeof path, "small.lis");
	uint64_t want[12];
	for (int i = 0; i < 9; i++)
		want[i] = 13845 + (uint64_t)i;
	want[9] = 13861;
	want[10] = 0;
	want[11] = 1;
	vc_trace *t;
	CHECK_OK(vc_trace_open(path, NULL, &t));
	uint64_t key;
	int op;
	for (int i = 0; i < 12; i++) {
		CHECK(vc_trace_next_page(t, 4096, true, &key, &op) == 1);
		CHECK(key == want[i] && op == VC_TRACE_READ);
	}
	CHECK(vc_trace_next_page(t, 4096, true, &key, &op) == 0);
	vc_trace_close(t);

	/* One object per request: the page of the first byte. */
	CHECK_OK(vc_trace_open(path, NULL, &t));
	uint64_t one[3] = { 13845, 13861, 0 };
	for (int i = 0; i < 3; i++) {
		CHECK(vc_trace_next_page(t, 4096, false, &key, &op) == 1);
		CHECK(key == one[i]);
	}
	CHECK(vc_trace_next_page(t, 4096, false, &key, &op) == 0);
	vc_trace_close(t);

	/* Volumes land in the top bits; size 0 is one page. */
	data_path(path, sizeof path, "tencent-small.csv");
	CHECK_OK(vc_trace_open(path, NULL, &t));
	CHECK(vc_trace_next_page(t, 512, true, &key, &op) == 1);
	CHECK(key == ((1058ull << VC_TRACE_VOL_SHIFT) | 4247200) && op == VC_TRACE_WRITE);
	vc_trace_close(t);
	data_path(path, sizeof path, "generic-small.csv");
	CHECK_OK(vc_trace_open(path, NULL, &t));
	int n = 0;
	while (vc_trace_next_page(t, 4096, true, &key, &op) == 1)
		n++;
	CHECK(n == 1 + 2 + 1 + 1);
	vc_trace_close(t);
}

/* --- compressed input ---------------------------------------------------- */

static const char *const comp_ext[] = { "zst", "xz", "bz2", "gz" };
static int comp_built(int i)
{
	switch (i) {
	case 0:
#ifdef VC_HAVE_ZSTD
		return 1;
#endif
		return 0;
	case 1:
#ifdef VC_HAVE_LZMA
		return 1;
#endif
		return 0;
	case 2:
#ifdef VC_HAVE_BZ2
		return 1;
#endif
		return 0;
	default:
#ifdef VC_HAVE_ZLIB
		return 1;
#endif
		return 0;
	}
}

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	CHECK(f);
	CHECK(fseek(f, 0, SEEK_END) == 0);
	long n = ftell(f);
	CHECK(n >= 0);
	rewind(f);
	unsigned char *b = malloc((size_t)n + 1);
	CHECK(b && fread(b, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return b;
}

static char tmpdir[1024];

static void tmp_file(char *path, size_t n, const char *name, const void *data, size_t len)
{
	snprintf(path, n, "%s/%s", tmpdir, name);
	FILE *f = fopen(path, "wb");
	CHECK(f);
	CHECK(fwrite(data, 1, len, f) == len);
	CHECK(fclose(f) == 0);
}

/* gen.lis: line i is "(i%100)*8 1+i%9 0 i%900", 40000 lines (458 KiB
 * uncompressed: more than the stream's buffers, so lines straddle them). */
static int read_gen(const char *path, int *nreq, bool strict)
{
	vc_trace *t;
	int r = vc_trace_open(path, "arc", &t);
	if (r < 0)
		return r;
	struct vc_trace_req q;
	int i = 0;
	while ((r = vc_trace_next(t, &q)) == 1) {
		int k = i % 40000;
		if (q.offset != (uint64_t)(k % 100) * 8 * 512 || q.size != (uint64_t)(1 + k % 9) * 512 ||
		    q.time != (uint64_t)(k % 900)) {
			if (!strict) {
				vc_trace_close(t);
				*nreq = i;
				return -EILSEQ;
			}
			fprintf(stderr, "%s: request %d wrong\n", path, i);
			exit(1);
		}
		i++;
	}
	vc_trace_close(t);
	*nreq = i;
	return r;
}

static void test_compressed(void)
{
	for (int c = 0; c < 4; c++) {
		char name[64], path[4096];
		snprintf(name, sizeof name, "small.lis.%s", comp_ext[c]);
		data_path(path, sizeof path, name);
		if (!comp_built(c)) {
			vc_trace *t;
			CHECK(vc_trace_open(path, NULL, &t) == -VC_ENOTBUILT);
			CHECK(strstr(vc_last_error(), "-dev"));
			fprintf(stderr, "note: %s not built; checked the refusal only\n", comp_ext[c]);
			continue;
		}
		check_golden(name, NULL, "arc", small_lis, 3);

		/* Whole, concatenated (frames/members/streams back to back),
		 * truncated and corrupt. */
		snprintf(name, sizeof name, "gen.lis.%s", comp_ext[c]);
		data_path(path, sizeof path, name);
		int n = 0;
		CHECK(read_gen(path, &n, true) == 0 && n == 40000);

		size_t len;
		unsigned char *b = slurp(path, &len);
		unsigned char *two = malloc(2 * len);
		CHECK(two);
		memcpy(two, b, len);
		memcpy(two + len, b, len);
		char tpath[4096];
		tmp_file(tpath, sizeof tpath, "two", two, 2 * len);
		CHECK(read_gen(tpath, &n, true) == 0 && n == 80000);

		/* Twelve copies, 5.6 MB of text: more chunks than the
		 * decompressing thread's ring holds, lines cut by every chunk
		 * boundary; then cut inside the seventh copy; then closed
		 * after a few requests, the thread still running. */
		enum { COPIES = 12 };
		unsigned char *many = malloc(COPIES * len);
		CHECK(many);
		for (int k = 0; k < COPIES; k++)
			memcpy(many + k * len, b, len);
		tmp_file(tpath, sizeof tpath, "many", many, COPIES * len);
		CHECK(read_gen(tpath, &n, true) == 0 && n == COPIES * 40000);
		tmp_file(tpath, sizeof tpath, "many-cut", many, 6 * len + len / 2);
		CHECK(read_gen(tpath, &n, true) == -EBADMSG &&
		      strstr(vc_last_error(), "truncated"));
		CHECK(n >= 6 * 40000 && n < 7 * 40000);
		free(many);
		vc_trace *early;
		struct vc_trace_req q;
		CHECK_OK(vc_trace_open(tpath, NULL, &early));
		for (int k = 0; k < 10; k++)
			CHECK(vc_trace_next(early, &q) == 1);
		vc_trace_close(early);

		size_t cuts[] = { len - 1, len / 2, 20 };
		for (int k = 0; k < 3; k++) {
			tmp_file(tpath, sizeof tpath, "cut", b, cuts[k]);
			int r = read_gen(tpath, &n, true);
			if (r != -EBADMSG || !strstr(vc_last_error(), "truncated")) {
				fprintf(stderr, "%s cut at %zu: r=%d n=%d (%s)\n", name, cuts[k], r, n,
					vc_last_error());
				exit(1);
			}
		}
		/* A flipped byte mid-stream: an error (corrupt, or a bad line
		 * when the codec has no checksum to notice), never a crash. */
		memcpy(two, b, len);
		two[len / 2] ^= 0x55;
		tmp_file(tpath, sizeof tpath, "flip", two, len);
		CHECK(read_gen(tpath, &n, false) < 0);
		free(two);
		free(b);
	}
}

/* --- malformed input ----------------------------------------------------- */

/* Expects reading `text` as `format` to fail at `line` with -EBADMSG. */
static void check_bad(const char *format, const char *text, size_t len, unsigned line)
{
	char path[4096];
	tmp_file(path, sizeof path, "bad.trace", text, len);
	vc_trace *t;
	int r = vc_trace_open(path, format, &t);
	if (r == 0) {
		struct vc_trace_req q;
		while ((r = vc_trace_next(t, &q)) == 1)
			;
		vc_trace_close(t);
	}
	char where[4200];
	snprintf(where, sizeof where, "%s:%u:", path, line);
	if (r != -EBADMSG || (line && !strstr(vc_last_error(), where))) {
		fprintf(stderr, "format %s, text \"%.40s\": r=%d, message \"%s\", want %s\n",
			format ? format : "auto", text, r, vc_last_error(), where);
		exit(1);
	}
}

#define BAD(fmt, s, line) check_bad(fmt, s, sizeof(s) - 1, line)

static void test_malformed(void)
{
	BAD("arc", "1 2 0 0\n5 x 0 1\n", 2);
	BAD("arc", "1 2 0\n", 1);
	BAD("arc", "1 2 0 0 9\n", 1);
	BAD("arc", "1 0 0 0\n", 1);  /* zero blocks */
	BAD("arc", "-1 2 0 0\n", 1); /* negative */
	BAD("arc", "99999999999999999999 2 0 0\n", 1); /* overflows 64 bits */
	BAD(NULL, "1 2 0 0\n\n3 4 0 1\n7 7 7\n", 4); /* detected, then bad */
	BAD("cloudphysics", "version,time,op,size,lbn\n1,2,zz,512,3\n", 2);
	BAD("cloudphysics", "version,time,op,size,lbn\n1,2,28,512\n", 2);
	BAD("msr", "1,hm,0,Read,0,512,1\n1,hm,0,Erase,0,512,1\n", 2);
	BAD("systor", "Timestamp,Response,IOType,LUN,Offset,Size\n1.5,0.1,X,0,0,512\n", 2);
	BAD("systor", "Timestamp,Response,IOType,LUN,Offset,Size\n1.5,abc,R,0,0,512\n", 2);
	BAD("tencent", "1,2,3,0,5\n1,2,3,2,5\n", 2);
	BAD("csv", "time,op,offset,size\n0,R,0,4096\n1,Q,0,1\n", 3);
	BAD("csv", "0,R,0,4096\n1,R,0\n", 2);
	BAD(NULL, "hello world\n", 1);                     /* unknown format */
	BAD(NULL, "", 0);                                  /* empty: cannot tell */
	BAD("arc", "1 2 0 0\n3 4\0 0 1\n", 2);              /* NUL byte */
	/* A line longer than the limit, and one longer than the stream's
	 * whole buffer (1 MiB), which the fast path's window cannot hold
	 * either and hands to the line path. */
	static const size_t longer[] = { VC_STREAM_MAX_LINE + 10, (3u << 20) + 10 };
	for (int i = 0; i < 2; i++) {
		size_t big = longer[i];
		char *s = malloc(big + 1);
		CHECK(s);
		memcpy(s, "1 2 0 0\n", 8);
		memset(s + 8, '7', big - 8);
		s[big] = '\0';
		check_bad("arc", s, big, 2);
		free(s);
	}
}

/* The page step reports a range that wraps (the check_bad case above needs
 * page iteration, so do it by hand). */
static void test_wrap(void)
{
	char path[4096];
	const char txt[] = "0,R,18446744073709551615,4096\n";
	tmp_file(path, sizeof path, "wrap.csv", txt, sizeof txt - 1);
	vc_trace *t;
	CHECK_OK(vc_trace_open(path, "csv", &t));
	uint64_t key;
	int op;
	CHECK(vc_trace_next_page(t, 4096, true, &key, &op) == -EBADMSG);
	CHECK(strstr(vc_last_error(), ":1:"));
	vc_trace_close(t);

	/* A block past what a page key holds (2^53 blocks of 512 bytes:
	 * page 2^50 of 4 KiB) after lines the fast path took: the message
	 * names its line, not the first of the fast parser's window. */
	const char arc[] = "1 1 0 0\n2 1 0 1\n9007199254740992 1 0 2\n4 1 0 3\n";
	tmp_file(path, sizeof path, "far.lis", arc, sizeof arc - 1);
	uint64_t keys[8];
	CHECK_OK(vc_trace_open(path, "arc", &t));
	CHECK(vc_trace_next_pages(t, 4096, true, keys, NULL, 8) == -EBADMSG);
	CHECK(strstr(vc_last_error(), "far.lis:3: offset"));
	vc_trace_close(t);
}

/* --- the binary format --------------------------------------------------- */

static void test_vct(void)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/t.vct", tmpdir);
	struct vc_trace_writer *w;
	CHECK_OK(vc_trace_writer_open(path, &w));
	enum { N = 5000 };
	struct vc_trace_req *in = calloc(N, sizeof *in);
	CHECK(in);
	uint64_t seed = 7, time = 100;
	for (int i = 0; i < N; i++) {
		uint64_t x = t_rand(&seed);
		time += x % 3;
		in[i].time = time;
		/* sequential runs, backward jumps, huge offsets, volume changes */
		in[i].offset = i && x % 4 ? in[i - 1].offset + in[i - 1].size : (x >> 8) % (1ull << 50);
		in[i].size = x % 5 ? in[i ? i - 1 : 0].size : (x >> 20) % 100000;
		in[i].volume = x % 7 == 0 ? (uint32_t)(x >> 40) : (i ? in[i - 1].volume : 0);
		in[i].op = (uint8_t)(x >> 33 & 1);
		CHECK_OK(vc_trace_writer_put(w, &in[i]));
	}
	CHECK_OK(vc_trace_writer_close(w));
	vc_trace *t;
	CHECK_OK(vc_trace_open(path, NULL, &t));
	CHECK(strcmp(vc_trace_format(t), "vct") == 0);
	struct vc_trace_req q;
	for (int i = 0; i < N; i++) {
		CHECK(vc_trace_next(t, &q) == 1);
		CHECK(q.time == in[i].time && q.offset == in[i].offset && q.size == in[i].size &&
		      q.volume == in[i].volume && q.op == in[i].op);
	}
	CHECK(vc_trace_next(t, &q) == 0);
	vc_trace_close(t);

	/* Cut inside the last record: reported with its number. */
	size_t len;
	unsigned char *b = slurp(path, &len);
	char cut[4096];
	tmp_file(cut, sizeof cut, "cut.vct", b, len - 1);
	CHECK_OK(vc_trace_open(cut, NULL, &t));
	int r, n = 0;
	while ((r = vc_trace_next(t, &q)) == 1)
		n++;
	CHECK(r == -EBADMSG && n == N - 1 && strstr(vc_last_error(), "record 5000"));
	vc_trace_close(t);
	/* A header alone is an empty trace; a short header is an error. */
	tmp_file(cut, sizeof cut, "empty.vct", b, 16);
	CHECK_OK(vc_trace_open(cut, NULL, &t));
	CHECK(vc_trace_next(t, &q) == 0);
	vc_trace_close(t);
	tmp_file(cut, sizeof cut, "short.vct", b, 12);
	CHECK_OK(vc_trace_open(cut, "vct", &t));
	CHECK(vc_trace_next(t, &q) == -EBADMSG);
	vc_trace_close(t);
	free(b);
	free(in);
}

/* --- streams of 32-bit block numbers ------------------------------------- */

static void put32(unsigned char *b, uint32_t v, bool be)
{
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (be ? 24 - 8 * i : 8 * i));
}

/* 300 K records (1.2 MB: more than the stream's buffer, so records are
 * read across refills), both byte orders, page expansion, a truncated last
 * record, and no guessing. */
static void test_lbn32(void)
{
	enum { N = 300000 };
	unsigned char *b = malloc(4 * N + 2);
	uint32_t *v = malloc(N * sizeof *v);
	CHECK(b && v);
	uint64_t seed = 3;
	for (int i = 0; i < N; i++) {
		v[i] = i == 0 ? 1 : i == 1 ? 0xffffffffu : i % 3 ? (uint32_t)t_rand(&seed) : v[i / 2];
		put32(b + 4 * i, v[i], true);
	}
	char path[4096];
	tmp_file(path, sizeof path, "w.be", b, 4 * N);
	for (int be = 1; be >= 0; be--) {
		vc_trace *t;
		CHECK_OK(vc_trace_open(path, be ? "lbn32be" : "lbn32le", &t));
		struct vc_trace_req q;
		for (int i = 0; i < N; i++) {
			CHECK(vc_trace_next(t, &q) == 1);
			uint32_t want = be ? v[i] : __builtin_bswap32(v[i]);
			CHECK(q.offset == (uint64_t)want * 4096 && q.size == 4096 && q.time == (uint64_t)i &&
			      q.op == VC_TRACE_READ && q.volume == 0);
		}
		CHECK(vc_trace_next(t, &q) == 0);
		vc_trace_close(t);
	}
	/* 4 KiB pages: one access a record, its key the block number; 512-byte
	 * pages: eight. */
	vc_trace *t;
	uint64_t key;
	int op;
	CHECK_OK(vc_trace_open(path, "lbn32be", &t));
	for (int i = 0; i < 1000; i++)
		CHECK(vc_trace_next_page(t, 4096, true, &key, &op) == 1 && key == v[i]);
	vc_trace_close(t);
	CHECK_OK(vc_trace_open(path, "lbn32be", &t));
	for (int i = 0; i < 16; i++)
		CHECK(vc_trace_next_page(t, 512, true, &key, &op) == 1 &&
		      key == (uint64_t)v[i / 8] * 8 + (uint64_t)(i % 8));
	vc_trace_close(t);
	/* Two stray bytes at the end: the records before them, then an error
	 * naming the record. */
	b[4 * N] = 7;
	b[4 * N + 1] = 9;
	tmp_file(path, sizeof path, "cut.be", b, 4 * N + 2);
	CHECK_OK(vc_trace_open(path, "lbn32le", &t));
	struct vc_trace_req q;
	int r, n = 0;
	while ((r = vc_trace_next(t, &q)) == 1)
		n++;
	CHECK(r == -EBADMSG && n == N && strstr(vc_last_error(), "record 300001: truncated"));
	vc_trace_close(t);
	/* Not detected: any 4 bytes are a block number, so the format must be
	 * named, and the message says which. */
	CHECK(vc_trace_open(path, NULL, &t) == -EBADMSG);
	CHECK(strstr(vc_last_error(), "--format lbn32be or lbn32le"));
	free(b);
	free(v);
}

/* --- the fast line parsers ----------------------------------------------- */

/* ARC and CloudPhysics lines that the fast parsers take and that they leave
 * to the exact parsers (tabs, runs of blanks, CRLF, comments, blank lines,
 * 17- and 19-digit numbers, upper-case hex, other SCSI commands), 3 MB of them so
 * that lines straddle the stream's refills: every request must be what the
 * exact parser alone reads, and a bad line deep in the file is still
 * reported with its line number. */
static void test_fast_paths(void)
{
	enum { N = 120000 };
	size_t cap = (size_t)N * 64, len = 0;
	char *txt = malloc(cap), *cp = malloc(cap);
	struct want *w = malloc(N * sizeof *w);
	CHECK(txt && cp && w);
	size_t cplen = (size_t)snprintf(cp, cap, "version,time,op,size,lbn\n");
	uint64_t seed = 9;
	int nw = 0;
	for (int i = 0; i < N; i++) {
		/* block numbers of 1-5, 8-15 and 17 digits: the fast path's one-
		 * and two-word readings and its digit loop */
		static const uint64_t p10[] = { 10000000ull, 100000000ull, 1000000000ull,
						10000000000ull, 100000000000ull, 1000000000000ull,
						10000000000000ull, 100000000000000ull };
		uint64_t x = t_rand(&seed), blk = x % 5 == 0 ? 10000000000000000ull + x % 1000 :
						  x % 5 == 1 ? p10[(x >> 40) % 8] + x % 9999991 :
							       x % 100000;
		unsigned nb = 1 + (unsigned)(x >> 20) % 64;
		static const char *const sep[] = { " ", "\t", "  ", " \t " };
		const char *s1 = sep[(x >> 8) % 4], *eol = x % 7 == 0 ? " \r\n" : "\n";
		if (x % 11 == 0)
			len += (size_t)snprintf(txt + len, cap - len, x % 2 ? "# comment\n" : "\n");
		len += (size_t)snprintf(txt + len, cap - len, "%llu%s%u %s%s%d%s",
					(unsigned long long)blk, s1, nb,
					x % 13 ? "0" : "1000000000000000000", s1, i, eol);
		w[nw++] = (struct want){ (uint64_t)i, blk * 512, nb * 512ull, 0, 0 };
		static const char *const ops[] = { "28", "2a", "2A", "35", "08", "8a" };
		const char *o = ops[(x >> 30) % 6];
		cplen += (size_t)snprintf(cp + cplen, cap - cplen, "1,%d,%s,%u,%llu%s", i, o, nb * 512,
					  (unsigned long long)blk, eol);
	}
	char path[4096], cpath[4096];
	tmp_file(path, sizeof path, "fast.lis", txt, len);
	tmp_file(cpath, sizeof cpath, "fast.csv", cp, cplen);
	vc_trace *t;
	struct vc_trace_req q;
	CHECK_OK(vc_trace_open(path, NULL, &t));
	CHECK(strcmp(vc_trace_format(t), "arc") == 0);
	for (int i = 0; i < nw; i++) {
		CHECK(vc_trace_next(t, &q) == 1);
		if (q.time != w[i].time || q.offset != w[i].offset || q.size != w[i].size) {
			fprintf(stderr, "fast.lis request %d: t=%llu off=%llu size=%llu\n", i,
				(unsigned long long)q.time, (unsigned long long)q.offset,
				(unsigned long long)q.size);
			exit(1);
		}
	}
	CHECK(vc_trace_next(t, &q) == 0);
	vc_trace_close(t);
	/* CloudPhysics: the same blocks; 0x35 lines are skipped. */
	CHECK_OK(vc_trace_open(cpath, NULL, &t));
	CHECK(strcmp(vc_trace_format(t), "cloudphysics") == 0);
	seed = 9;
	for (int i = 0; i < N; i++) {
		uint64_t x = t_rand(&seed);
		unsigned k = (unsigned)((x >> 30) % 6);
		if (k == 3)
			continue;
		CHECK(vc_trace_next(t, &q) == 1);
		if (q.time != (uint64_t)i || q.offset != w[i].offset || q.size != w[i].size ||
		    q.op != (k == 1 || k == 2 || k == 5 ? VC_TRACE_WRITE : VC_TRACE_READ)) {
			fprintf(stderr, "fast.csv request %d: t=%llu off=%llu size=%llu op %d\n", i,
				(unsigned long long)q.time, (unsigned long long)q.offset,
				(unsigned long long)q.size, q.op);
			exit(1);
		}
	}
	CHECK(vc_trace_next(t, &q) == 0);
	vc_trace_close(t);
	/* A bad line after 100 K fast ones: the message names its line. */
	int bad_at = 0;
	size_t p = 0;
	for (int line = 1; p < len; line++) {
		char *nl = memchr(txt + p, '\n', len - p);
		if (line >= 100000 && txt[p] != '#' && txt[p] != '\n') {
			txt[p] = 'x';
			bad_at = line;
			break;
		}
		p = (size_t)(nl - txt) + 1;
	}
	tmp_file(path, sizeof path, "fast-bad.lis", txt, len);
	CHECK_OK(vc_trace_open(path, "arc", &t));
	int r;
	while ((r = vc_trace_next(t, &q)) == 1)
		;
	char where[64];
	snprintf(where, sizeof where, "fast-bad.lis:%d: ", bad_at);
	CHECK(r == -EBADMSG && strstr(vc_last_error(), where));
	vc_trace_close(t);
	free(txt);
	free(cp);
	free(w);
}

/* Batches of pages are the page-by-page accesses, and the range check is
 * the one every command applies. */
static void test_batches(void)
{
	char path[4096];
	data_path(path, sizeof path, "gen.lis.zst");
	vc_trace *a, *b;
	int r = vc_trace_open(path, NULL, &a);
	if (r == -VC_ENOTBUILT)
		return; /* no zstd in this build: test_compressed says so */
	CHECK_OK(r);
	CHECK_OK(vc_trace_open(path, NULL, &b));
	uint64_t keys[37], key, total = 0;
	uint8_t ops[37];
	int op;
	long n;
	while ((n = vc_trace_next_pages(b, 4096, true, keys, ops, 37)) > 0) {
		for (long i = 0; i < n; i++) {
			CHECK(vc_trace_next_page(a, 4096, true, &key, &op) == 1);
			CHECK(key == keys[i] && op == ops[i]);
		}
		total += (uint64_t)n;
	}
	CHECK(n == 0 && vc_trace_next_page(a, 4096, true, &key, &op) == 0);
	CHECK(total > 40000);
	vc_trace_close(a);
	vc_trace_close(b);

	struct vc_trace_req q = { .offset = UINT64_MAX - 100, .size = 4096 };
	uint64_t first, last;
	data_path(path, sizeof path, "small.lis");
	CHECK_OK(vc_trace_open(path, NULL, &a));
	CHECK(vc_trace_req_pages(a, &q, 4096, &first, &last) == -EBADMSG);
	CHECK(strstr(vc_last_error(), "out of range"));
	q.size = 50; /* fits in 2^64, but not in a page key */
	CHECK(vc_trace_req_pages(a, &q, 4096, &first, &last) == -EBADMSG);
	q = (struct vc_trace_req){ .offset = 4095, .size = 2 };
	CHECK_OK(vc_trace_req_pages(a, &q, 4096, &first, &last));
	CHECK(first == 0 && last == 1);
	q.size = 0;
	CHECK_OK(vc_trace_req_pages(a, &q, 1000, &first, &last));
	CHECK(first == 4 && last == 4);
	vc_trace_close(a);
}

/* --- mutated input ------------------------------------------------------- */

/* Random byte flips, insertions of separators and cuts in every golden
 * file, read in every format: each read must end in a clean end or an
 * error with a message, never a crash (the sanitizer builds watch memory). */
static void test_mutations(void)
{
	static const char *const files[] = { "small.lis", "cloudPhysics-small.csv", "msr-small.csv",
					      "systor-small.csv", "tencent-small.csv",
					      "generic-small.csv", "small.lis.gz" };
	static const char *const fmts[] = { NULL, "arc", "cloudphysics", "msr", "systor",
					    "tencent", "csv", "vct" };
	static const char junk[] = ",\n 0-9x\r\0.#";
	uint64_t seed = 1234;
	int errors = 0, clean = 0;
	for (size_t fi = 0; fi < sizeof files / sizeof files[0]; fi++) {
		char path[4096];
		data_path(path, sizeof path, files[fi]);
		size_t len;
		unsigned char *orig = slurp(path, &len);
		unsigned char *b = malloc(len + 64);
		CHECK(b);
		for (int it = 0; it < 300; it++) {
			memcpy(b, orig, len);
			size_t n = len;
			int k = 1 + (int)(t_rand(&seed) % 4);
			for (int j = 0; j < k && n; j++) {
				size_t at = t_rand(&seed) % n;
				switch (t_rand(&seed) % 3) {
				case 0:
					b[at] ^= (unsigned char)(1 + t_rand(&seed) % 255);
					break;
				case 1:
					b[at] = (unsigned char)junk[t_rand(&seed) % (sizeof junk - 1)];
					break;
				default:
					n = at;
				}
			}
			char tpath[4096];
			tmp_file(tpath, sizeof tpath, "mut", b, n);
			const char *fmt = fmts[t_rand(&seed) % (sizeof fmts / sizeof fmts[0])];
			vc_trace *t;
			int r = vc_trace_open(tpath, fmt, &t);
			if (r == 0) {
				uint64_t key;
				int op;
				while ((r = vc_trace_next_page(t, 4096, it % 2, &key, &op)) == 1)
					;
				vc_trace_close(t);
			}
			if (r < 0) {
				CHECK(vc_last_error()[0] != '\0');
				errors++;
			} else {
				clean++;
			}
		}
		free(b);
		free(orig);
	}
	printf("mutations: %d errors, %d clean reads\n", errors, clean);
	CHECK(errors > 100 && clean > 20); /* both outcomes were exercised */
}

/* --- the shared traces --------------------------------------------------- */

static int count_requests(const char *path, uint64_t *blocks)
{
	vc_trace *t;
	int r = vc_trace_open(path, NULL, &t);
	if (r == -VC_ENOTBUILT) {
		fprintf(stderr, "note: %s\n", vc_last_error());
		return -1;
	}
	if (r < 0) {
		fprintf(stderr, "%s: %s\n", path, vc_last_error());
		exit(1);
	}
	struct vc_trace_req q;
	int n = 0;
	*blocks = 0;
	while ((r = vc_trace_next(t, &q)) == 1) {
		n++;
		*blocks += (q.size + 511) / 512;
	}
	if (r < 0) {
		fprintf(stderr, "%s: %s\n", path, vc_last_error());
		exit(1);
	}
	vc_trace_close(t);
	return n;
}

static int test_shared(void)
{
	const char *dir = getenv("VC_SHARED_DIR");
	char path[4096];
	snprintf(path, sizeof path, "%s/traces/cloudPhysicsIO.csv", dir ? dir : "");
	if (!dir || access(path, R_OK) != 0) {
		fprintf(stderr, "SKIP shared traces: %s not readable (VC_SHARED_DIR unset or ../shared "
				"absent)\n",
			path);
		return 0;
	}
	struct {
		const char *file;
		int requests;
		uint64_t blocks; /* 0: not checked */
	} tr[] = {
		{ "cloudPhysicsIO.csv", 113872, 0 },
		{ "msr-cambridge1-sample.csv", 1000, 0 },
		{ "systor17-traces-sample.csv.gz", 999, 0 },
		{ "cloud_storage-sample.bz2", 50000, 0 },
		/* The ARC paper's Table III "requests" are 512-byte blocks. */
		{ "arc-OLTP.lis.zst", 914145, 914145 },
	};
	for (size_t i = 0; i < sizeof tr / sizeof tr[0]; i++) {
		snprintf(path, sizeof path, "%s/traces/%s", dir, tr[i].file);
		uint64_t blocks;
		int n = count_requests(path, &blocks);
		if (n < 0)
			continue; /* its compression is not built */
		if (n != tr[i].requests || (tr[i].blocks && blocks != tr[i].blocks)) {
			fprintf(stderr, "%s: %d requests, %llu blocks\n", tr[i].file, n,
				(unsigned long long)blocks);
			exit(1);
		}
	}
	return 1;
}

int main(void)
{
	const char *d = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(tmpdir, sizeof tmpdir, "%s/vc-trace-XXXXXX", d);
	CHECK(mkdtemp(tmpdir));
	test_golden();
	test_pages();
	test_compressed();
	test_malformed();
	test_wrap();
	test_vct();
	test_lbn32();
	test_fast_paths();
	test_batches();
	test_mutations();
	int shared = test_shared();
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	CHECK(system(cmd) == 0);
	printf("test_trace: ok%s\n", shared ? "" : " (shared traces skipped)");
	return 0;
}
