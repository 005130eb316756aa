/* `vramcache trace`: a trace's statistics, or its conversion to the compact
 * binary format. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "tools/keymap.h"
#include "trace/trace.h"
#include "vramcache.h"

static void trace_usage(FILE *f)
{
	fputs("Usage: vramcache trace [OPTIONS] TRACE\n"
	      "\n"
	      "Prints the format, requests, reads and writes, bytes, page accesses and\n"
	      "distinct pages of a trace; with --to, writes it in the compact binary\n"
	      "format (.vct, see src/trace/trace.h) instead.\n"
	      "\n"
	      "  --format F        trace format (default: detect)\n"
	      "  --page-size N     page size for the page counts (default 4096)\n"
	      "  --to FILE         convert to vct\n",
	      f);
}

int cmd_trace(int argc, char **argv)
{
	const char *format = NULL, *to = NULL;
	uint64_t ps = 4096;
	static const struct option lo[] = { { "format", required_argument, 0, 'f' },
					    { "page-size", required_argument, 0, 'p' },
					    { "to", required_argument, 0, 't' },
					    { "help", no_argument, 0, 'h' },
					    { 0, 0, 0, 0 } };
	int ch;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (ch == 'f')
			format = optarg;
		else if (ch == 't')
			to = optarg;
		else if (ch == 'p') {
			if (cli_u64(optarg, &ps) || ps < 1 || ps > (1u << 30)) {
				fprintf(stderr, "vramcache trace: bad --page-size\n");
				return 2;
			}
		} else if (ch == 'h') {
			trace_usage(stdout);
			return 0;
		} else {
			trace_usage(stderr);
			return 2;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "vramcache trace: give one trace file (try --help)\n");
		return 2;
	}
	const char *path = argv[optind];
	vc_trace *t;
	int r = vc_trace_open(path, format, &t);
	if (r < 0) {
		fprintf(stderr, "vramcache: %s\n", vc_last_error());
		return 1;
	}
	struct vc_trace_writer *w = NULL;
	if (to && vc_trace_writer_open(to, &w) < 0) {
		fprintf(stderr, "vramcache: %s\n", vc_last_error());
		vc_trace_close(t);
		return 1;
	}
	struct vc_keymap pages;
	if (vc_keymap_init(&pages, 1 << 16) < 0) {
		vc_trace_close(t);
		vc_trace_writer_close(w);
		return 1;
	}
	uint64_t req = 0, rd = 0, wr = 0, bytes = 0, acc = 0;
	struct vc_trace_req q;
	while ((r = vc_trace_next(t, &q)) == 1) {
		req++;
		rd += q.op == VC_TRACE_READ;
		wr += q.op == VC_TRACE_WRITE;
		bytes += q.size;
		if (w) {
			if (vc_trace_writer_put(w, &q) < 0) {
				r = -EIO;
				break;
			}
			continue;
		}
		uint64_t first, last; /* the range check sim and mrc apply */
		if ((r = vc_trace_req_pages(t, &q, (uint32_t)ps, &first, &last)) < 0)
			break;
		uint64_t vol = (uint64_t)(q.volume & 0xffff) << VC_TRACE_VOL_SHIFT;
		for (uint64_t p = first; p <= last; p++, acc++)
			if (vc_keymap_put(&pages, vol | p, 0) < 0) {
				r = -ENOMEM;
				break;
			}
		if (r < 0)
			break;
	}
	int rc = 0;
	if (r < 0) {
		fprintf(stderr, "vramcache: %s\n", vc_last_error());
		rc = 1;
	}
	if (w && vc_trace_writer_close(w) < 0) {
		fprintf(stderr, "vramcache: %s\n", vc_last_error());
		rc = 1;
	}
	if (!rc) {
		printf("%s: format %s, %llu requests (%llu reads, %llu writes), %.1f MiB", path,
		       vc_trace_format(t), (unsigned long long)req, (unsigned long long)rd,
		       (unsigned long long)wr, (double)bytes / 1048576.0);
		if (!w)
			printf(", %llu page accesses, %llu distinct pages of %llu bytes",
			       (unsigned long long)acc, (unsigned long long)vc_keymap_count(&pages),
			       (unsigned long long)ps);
		else
			printf(", written to %s", to);
		printf("\n");
	}
	vc_keymap_fini(&pages);
	vc_trace_close(t);
	return rc;
}
