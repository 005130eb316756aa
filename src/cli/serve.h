/* `vramcache serve`'s parts besides the command line (serve.c):
 *
 *   serve_log.c    where messages go (stderr, --log FILE, syslog once a
 *                  daemon) and the rate limit on per-connection lines
 *   serve_conns.c  the connection table: a thread per client, the limit on
 *                  established connections, handshake time limits
 *   serve_config.c --config FILE: [server] options and [export NAME]s
 *   serve_gpu.c    beside other GPU programs: the free-memory watermark and
 *                  release requests (--gpu-keep-free, --release-socket) */
#ifndef VC_CLI_SERVE_H
#define VC_CLI_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <syslog.h>

#include "nbd/nbd.h"

/* --- serve_log.c --- */
/* --log FILE: appended to from now on, whether in the foreground or not.
 * 0, or -errno (a start-up error). */
int serve_log_open(const char *path);
/* Once a daemon: stderr goes to the --log file or /dev/null, and
 * messages without a --log file go to syslog (LOG_DAEMON). Before this,
 * they go to stderr (start-up errors reach the terminal). */
void serve_log_daemon(void);
/* One message line (no newline). Thread-safe. */
void serve_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same, for lines a client can cause once per connection (a dropped
 * connection, a refusal): at most LOG_BURST in each LOG_WINDOW_S seconds;
 * the ones left out are counted and reported by the next line that goes
 * out after the window, or by serve_log_flush. */
void serve_log_limited(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void serve_log_flush(void);

/* --- serve_stop.c: SIGTERM and SIGINT ---
 * The first signal flushes while the server serves on; if the store
 * refuses, the unwritten ranges are logged and the server keeps serving.
 * A second one shuts down whatever the store says, within
 * SERVE_STOP_FORCE_S (a watchdog), logging what is lost. */
#define SERVE_STOP_FORCE_S 10
/* Installs the handlers. 0 or -errno. */
int serve_stop_init(void);
/* Readable once a signal came (for poll). */
int serve_stop_fd(void);
/* A signal came that serve_stop_take has not taken. */
bool serve_stop_pending(void);
/* Takes the signals so far: their count. */
unsigned serve_stop_take(void);
/* A second signal came. */
bool serve_stop_forced(void);
/* Logs `head`, then per export the byte ranges the cache holds newer than
 * the store (vc_volume_dirty_next): at most 64 an export, then a count. */
void serve_report_unwritten(const struct nbd_export *ex, unsigned n, const char *head);
/* A forced shutdown: after SERVE_STOP_FORCE_S the process logs what is
 * lost and exits 1, wherever the main thread is. */
void serve_stop_watchdog(const struct nbd_export *ex, unsigned n);
/* The main thread is about to vc_close: the watchdog must not read the
 * volumes any more. */
void serve_stop_closing(void);

/* --- serve_conns.c --- */
/* Defaults for the limits (documented in `serve --help`).
 * Established connections: each holds a thread, up to --workers helpers
 * and a lane thread, at most NBD_INFLIGHT_BYTES of buffers and, with a GPU
 * tier, its vc_aio queue's bounce pages (8 MiB pinned, from its first
 * READ). Handshakes do not count against that: each holds a thread and an
 * 8 KiB option buffer; 64 at once is far more than honest clients need (a
 * handshake is a few round trips) and bounds what idle sockets can hold,
 * because the 65th drops the oldest. 10 s to reach transmission is
 * hundreds of round trips with a TLS handshake on a slow link, and bounds
 * how long a silent socket keeps its slot. */
#define SERVE_MAX_CONNS 128
#define SERVE_MAX_HANDSHAKES 64
#define SERVE_HANDSHAKE_TIMEOUT_MS 10000

struct serve_slot {
	int fd;         /* -1: free */
	bool joinable;  /* tid has not been joined */
	bool admitted;  /* in transmission: counts against max_conns */
	bool expired;   /* handshaking, hung up on (time limit or too many) */
	uint64_t start_ns; /* accepted at (CLOCK_MONOTONIC) */
	pthread_t tid;
};

struct serve_conns {
	const struct nbd_server *srv;
	unsigned max_conns, max_handshakes;
	uint64_t timeout_ns; /* 0: handshakes have no time limit */
	pthread_mutex_t lock;
	pthread_cond_t gone; /* a connection ended */
	/* Slots for max_conns established connections, max_handshakes
	 * handshakes, and as many again for handshakes hung up on whose
	 * threads are still leaving: a full table refuses at accept. */
	struct serve_slot *slots;
	unsigned nslots;
	unsigned live, admitted, handshaking; /* handshaking: not expired */
};

/* 0 or -ENOMEM. timeout_ms 0: no handshake time limit. Sets
 * srv->admit, so call it before the server serves. */
int conns_init(struct serve_conns *t, struct nbd_server *srv, unsigned max_conns,
	       unsigned max_handshakes, unsigned timeout_ms);
/* A client was accepted on fd: its thread starts (or fd is closed, the
 * table being full). Drops the oldest handshake if max_handshakes are in
 * progress. */
void conns_accept(struct serve_conns *t, int fd);
/* Hangs up on handshakes past their time limit; returns the milliseconds
 * until the next one is due (poll's timeout), or -1 for none. */
int conns_expire(struct serve_conns *t);
/* Shutdown: every reader sees EOF, replies in flight still go out; waits
 * for every connection to end. */
void conns_close(struct serve_conns *t);

/* --- serve_config.c --- */
/* Exports at most (each is a volume of the cache). */
#define SERVE_MAX_EXPORTS 64

/* A [server] setting: a long option's name and its value. */
struct serve_setting {
	char *key, *value;
	int line;
};

/* An [export NAME] section. */
struct serve_export {
	char *name, *path;
	char *description; /* NULL: the server's */
	int readonly;      /* 1, 0, or -1: the server's --readonly */
	int write_back;    /* 1, 0, or -1: the server's write mode */
	int line;
};

struct serve_config {
	struct serve_setting *settings;
	unsigned nsettings;
	struct serve_export exports[SERVE_MAX_EXPORTS];
	unsigned nexports;
};

/* Parses FILE: 0, or -errno with "FILE:LINE: what" in err. */
int serve_config_load(const char *path, struct serve_config *cf, char *err, size_t errlen);
void serve_config_free(struct serve_config *cf);
/* --config FILE (or --config=FILE) on the command line: loads FILE into
 * cf and rewrites *argc, *argv: argv[0], FILE's [server] settings as
 * --KEY=VALUE options (checked against lo; flags by true or false), then
 * the command line without --config, which so wins where both set an
 * option. Without --config, cf is empty and argv unchanged. 0, or -errno
 * with the message in err. */
struct option;
int serve_config_apply(int *argc, char ***argv, const struct option *lo, struct serve_config *cf,
		       char *err, size_t errlen);
/* true/yes/on/1: 1; false/no/off/0: 0; else -1. */
int serve_config_bool(const char *v);

/* --- serve_gpu.c --- */
struct serve_gpu_config {
	uint64_t keep_free;     /* bytes to keep free on the device; 0: none */
	double keep_free_share; /* ... or this share of it (keep_free 0) */
	const char *release_socket; /* NULL: no release requests */
};
struct serve_gpu;
/* Starts the watermark poller and the release server (after the fork:
 * threads); *out NULL when neither was asked for. -errno, said on stderr. */
int serve_gpu_start(vc_cache *c, const struct serve_gpu_config *cfg, struct serve_gpu **out);
void serve_gpu_stop(struct serve_gpu *g);

#endif
