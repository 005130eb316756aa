/* `vramcache serve`'s shutdown: what SIGTERM and SIGINT do.
 *
 * The first signal writes every dirty page back while the server goes on
 * serving (serve.c calls vc_flush with its connections live). When the
 * store refuses (a full file system), the server logs the byte ranges it
 * holds newer than the store and keeps serving: the acknowledged writes
 * stay in the cache, and a flush later, or the next signal's, may still
 * write them once the store has room. Otherwise it shuts down as before:
 * no new connections, in-flight requests answered, the last flush.
 *
 * A second signal (whenever it comes, during that flush too) ends the
 * server whatever the store says: the same shutdown, with a watchdog that
 * exits within SERVE_STOP_FORCE_S even when the store does not answer.
 * The exit status is non-zero whenever the last flush failed, and the log
 * then names what was lost.
 *
 * The handler only counts and writes a byte to a pipe (async-signal-safe);
 * the accept loop polls the pipe.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "cli/serve.h"
#include "vramcache.h"

static volatile sig_atomic_t signals;
static int stop_pipe[2] = { -1, -1 };
static unsigned seen; /* signals the loop has acted on (main thread) */

static void on_signal(int sig)
{
	(void)sig;
	int saved = errno;
	signals++;
	if (write(stop_pipe[1], "x", 1) < 0) {
		/* the pipe is full: a wake-up is already pending */
	}
	errno = saved;
}

int serve_stop_init(void)
{
	if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	return 0;
}

int serve_stop_fd(void)
{
	return stop_pipe[0];
}

bool serve_stop_pending(void)
{
	return (unsigned)signals > seen;
}

unsigned serve_stop_take(void)
{
	char b[64];
	while (read(stop_pipe[0], b, sizeof b) > 0)
		;
	seen = (unsigned)signals;
	return seen;
}

bool serve_stop_forced(void)
{
	return (unsigned)signals > 1;
}

void serve_report_unwritten(const struct nbd_export *ex, unsigned n, const char *head)
{
	serve_log(LOG_ERR, "%s", head);
	for (unsigned i = 0; i < n; i++) {
		uint64_t off = 0, start, len, bytes = 0;
		unsigned runs = 0;
		while (vc_volume_dirty_next(ex[i].vol, off, &start, &len) == 1) {
			if (runs++ < 64)
				serve_log(LOG_ERR, "  export \"%s\": bytes %llu-%llu (%llu bytes)", ex[i].name,
					  (unsigned long long)start, (unsigned long long)(start + len - 1),
					  (unsigned long long)len);
			bytes += len;
			off = start + len;
		}
		if (runs > 64)
			serve_log(LOG_ERR, "  export \"%s\": %u ranges in all, %llu bytes", ex[i].name,
				  runs, (unsigned long long)bytes);
	}
}

/* The watchdog of a forced shutdown. `closing`: the main thread has begun
 * vc_close, after which the volumes are not to be read. */
static _Atomic bool closing;
static const struct nbd_export *w_ex;
static unsigned w_n;

static void *watchdog_main(void *arg)
{
	(void)arg;
	struct timespec ts = { .tv_sec = SERVE_STOP_FORCE_S };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	if (atomic_load(&closing))
		serve_log(LOG_ERR, "exiting after %d s: the store took no more writes in time; "
				   "writes acknowledged but not written back are lost",
			  SERVE_STOP_FORCE_S);
	else {
		char head[128];
		snprintf(head, sizeof head, "exiting after %d s: writes acknowledged but not "
					    "written back, lost:", SERVE_STOP_FORCE_S);
		serve_report_unwritten(w_ex, w_n, head);
	}
	serve_log_flush();
	_exit(1);
	return NULL;
}

void serve_stop_watchdog(const struct nbd_export *ex, unsigned n)
{
	w_ex = ex;
	w_n = n;
	pthread_t t;
	if (pthread_create(&t, NULL, watchdog_main, NULL) == 0)
		pthread_detach(t);
}

void serve_stop_closing(void)
{
	atomic_store(&closing, true);
}
