/* Helpers shared by the commands: number and size parsing, the progress
 * bar. */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-')
		return -1;
	*out = v;
	return 0;
}


int cli_size(const char *s, uint32_t page_size, uint64_t *pages, double *fraction)
{
	char *end;
	*pages = 0;
	*fraction = 0;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno || !(v >= 0) || s[0] == '-')
		return -1;
	if (strcmp(end, "%") == 0) {
		if (v <= 0 || v > 100000)
			return -1;
		*fraction = v / 100;
		return 0;
	}
	double mult = 0;
	if (*end == '\0') {
		uint64_t n;
		if (cli_u64(s, &n))
			return -1;
		*pages = n;
		return n ? 0 : -1;
	}
	switch (*end) {
	case 'K': case 'k':
		mult = 1024.0;
		break;
	case 'M': case 'm':
		mult = 1024.0 * 1024;
		break;
	case 'G': case 'g':
		mult = 1024.0 * 1024 * 1024;
		break;
	case 'T': case 't':
		mult = 1024.0 * 1024 * 1024 * 1024;
		break;
	default:
		return -1;
	}
	const char *rest = end + 1;
	if (*rest && strcmp(rest, "iB") && strcmp(rest, "B"))
		return -1;
	double p = v * mult / page_size;
	if (p < 1 || p > 1e15)
		return -1;
	*pages = (uint64_t)p;
	return 0;
}

#include "base/clock.h"

void cli_progress_start(struct cli_progress *p, const char *what, bool enabled)
{
	p->on = enabled && isatty(2);
	p->last_ns = 0;
	p->what = what;
}

void cli_progress_update(struct cli_progress *p, double f)
{
	if (!p->on)
		return;
	uint64_t now = vc_now_ns();
	if (now - p->last_ns < 100000000ull)
		return;
	p->last_ns = now;
	int w = 40, k = (int)(f * w + 0.5);
	char bar[48];
	for (int i = 0; i < w; i++)
		bar[i] = i < k ? '#' : '.';
	bar[w] = '\0';
	fprintf(stderr, "\r%s [%s] %5.1f%%", p->what, bar, 100 * f);
}

void cli_progress_done(struct cli_progress *p)
{
	if (p->on)
		fprintf(stderr, "\r%*s\r", 60 + (int)strlen(p->what), "");
}

#include "base/error.h"
#include "trace/trace.h"
#include "vramcache.h"

/* 4096 keys and ops: 36 KiB, in L1/L2, and a call per batch is nothing. */
#define CLI_BATCH 4096

int cli_for_each_batch(const char *path, const struct cli_trace_opts *o, const char *what,
		       cli_batch_fn fn, void *arg, uint64_t *count)
{
	vc_trace *t;
	*count = 0;
	int r = vc_trace_open(path, o->format, &t);
	if (r < 0) {
		fprintf(stderr, "vramcache: %s\n", vc_last_error());
		return r;
	}
	uint64_t *keys = malloc(CLI_BATCH * sizeof *keys);
	uint8_t *ops = malloc(CLI_BATCH);
	if (!keys || !ops) {
		free(keys);
		free(ops);
		vc_trace_close(t);
		fprintf(stderr, "vramcache: out of memory\n");
		return -ENOMEM;
	}
	struct cli_progress pb;
	cli_progress_start(&pb, what, o->progress);
	uint64_t n = 0;
	long k;
	while ((k = vc_trace_next_pages(t, o->page_size, !o->per_request, keys, ops, CLI_BATCH)) > 0) {
		n += (uint64_t)k;
		if ((r = fn(arg, keys, ops, (size_t)k)) != 0)
			break;
		if ((n & ~(uint64_t)0xffff) != ((n - (uint64_t)k) & ~(uint64_t)0xffff))
			cli_progress_update(&pb, vc_trace_progress(t));
	}
	if (k < 0)
		r = (int)k;
	cli_progress_done(&pb);
	if (r == 0 && n == 0)
		r = vc_err(-ENODATA, "%s: no page accesses (an empty trace, or one whose requests "
			   "all move no data)", path);
	if (r < 0)
		fprintf(stderr, "vramcache: %s\n", vc_last_error());
	vc_trace_close(t);
	free(keys);
	free(ops);
	*count = n;
	return r < 0 ? r : 0;
}

struct page_by_page {
	cli_page_fn fn;
	void *arg;
};

static int each_page(void *arg, const uint64_t *keys, const uint8_t *ops, size_t n)
{
	struct page_by_page *p = arg;
	for (size_t i = 0; i < n; i++) {
		int r = p->fn(p->arg, keys[i], ops[i]);
		if (r != 0)
			return r;
	}
	return 0;
}

int cli_for_each_page(const char *path, const struct cli_trace_opts *o, const char *what,
		      cli_page_fn fn, void *arg, uint64_t *count)
{
	struct page_by_page p = { fn, arg };
	return cli_for_each_batch(path, o, what, each_page, &p, count);
}

void cli_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

#include "tools/keymap.h"

static int ws_add(void *arg, uint64_t key, int op)
{
	(void)op;
	return vc_keymap_put(arg, key, 0) < 0 ? -ENOMEM : 0;
}

int cli_working_set(const char *path, const struct cli_trace_opts *o, uint64_t *unique,
		    uint64_t *accesses)
{
	struct vc_keymap m;
	if (vc_keymap_init(&m, 1 << 16) < 0)
		return -ENOMEM;
	int r = cli_for_each_page(path, o, "working set", ws_add, &m, accesses);
	*unique = vc_keymap_count(&m);
	vc_keymap_fini(&m);
	return r;
}

int cli_trace_opt(int ch, const char *arg, struct cli_trace_opts *o)
{
	uint64_t u;
	switch (ch) {
	case CLI_O_FMT:
		o->format = arg;
		return 1;
	case CLI_O_PS:
		if (cli_u64(arg, &u) || u < 1 || u > (1u << 30))
			return -1;
		o->page_size = (uint32_t)u;
		return 1;
	case CLI_O_PERREQ:
		o->per_request = true;
		return 1;
	}
	return 0;
}
