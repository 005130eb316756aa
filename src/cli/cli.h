/* The vramcache command: one function per subcommand, shared helpers. */
#ifndef VC_CLI_H
#define VC_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

void cli_usage(FILE *f);

int cmd_demo(int argc, char **argv);
int cmd_info(void);
int cmd_sim(int argc, char **argv);
int cmd_mrc(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_stat(int argc, char **argv);
int cmd_mount(int argc, char **argv);

/* A decimal unsigned integer, the whole string. 0 or -1. */
int cli_u64(const char *s, uint64_t *out);

/* A cache size: "N" pages, "N[KMGT]" or "NKiB".."NTiB" bytes (divided by
 * the page size), or "F%" of the working set. Returns 0 and sets *pages or
 * *fraction (the other 0), or -1. */
int cli_size(const char *s, uint32_t page_size, uint64_t *pages, double *fraction);

/* A progress bar on stderr for long runs, drawn only when stderr is a
 * terminal, at most ten times a second. */
struct cli_progress {
	bool on;
	uint64_t last_ns;
	const char *what;
};
void cli_progress_start(struct cli_progress *p, const char *what, bool enabled);
void cli_progress_update(struct cli_progress *p, double fraction);
void cli_progress_done(struct cli_progress *p);


/* Trace options every trace command takes. */
struct cli_trace_opts {
	const char *format;  /* NULL: detect */
	uint32_t page_size;  /* default 4096 */
	bool per_request;    /* one access per request instead of per page */
	bool progress;       /* allow the progress bar */
};

/* Calls fn for every page access of the trace, with a progress bar; stops
 * at fn's first nonzero return. Prints the trace error (file and line) on
 * failure. A trace with no page access at all is an error too (-ENODATA,
 * "PATH: no page accesses ..."): every trace command refuses it alike.
 * Returns 0 or the negative code. *count: accesses delivered. */
typedef int (*cli_page_fn)(void *arg, uint64_t key, int op);
int cli_for_each_page(const char *path, const struct cli_trace_opts *o, const char *what,
		      cli_page_fn fn, void *arg, uint64_t *count);
/* The same, in batches of up to 4096 accesses (keys[i], ops[i]). */
typedef int (*cli_batch_fn)(void *arg, const uint64_t *keys, const uint8_t *ops, size_t n);
int cli_for_each_batch(const char *path, const struct cli_trace_opts *o, const char *what,
		       cli_batch_fn fn, void *arg, uint64_t *count);

/* Writes a JSON string (quotes and escapes). */
void cli_json_str(FILE *f, const char *s);

/* First pass: the trace's page accesses and distinct pages (its working
 * set, what fractional sizes are fractions of). O(distinct) memory. */
int cli_working_set(const char *path, const struct cli_trace_opts *o, uint64_t *unique,
		    uint64_t *accesses);

/* --format, --page-size and --per-request as the trace commands parse them
 * (add CLI_TRACE_OPTIONS to the getopt_long table): 1 when ch was one of
 * them and set *o, 0 when it was not, -1 when its value is bad. */
enum { CLI_O_FMT = 0x4000, CLI_O_PS, CLI_O_PERREQ };
#define CLI_TRACE_OPTIONS                                        \
	{ "format", required_argument, 0, CLI_O_FMT },           \
	{ "page-size", required_argument, 0, CLI_O_PS },         \
	{ "per-request", no_argument, 0, CLI_O_PERREQ }
int cli_trace_opt(int ch, const char *arg, struct cli_trace_opts *o);

#endif
