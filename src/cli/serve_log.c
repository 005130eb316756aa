/* Where `serve`'s messages go, and the rate limit on the ones clients can
 * cause.
 *
 * Until the server is a daemon, stderr (the terminal sees start-up
 * errors). Once it is: the --log file if one was given (stderr is pointed
 * there too, so nothing else reaches the launching terminal), else syslog,
 * with stderr on /dev/null. In the foreground, --log FILE or stderr.
 *
 * Rate limit: a connect storm must not become a log storm, so lines a
 * client can cause once per connection go through serve_log_limited: at
 * most LOG_BURST in a LOG_WINDOW_S window, the rest counted and reported
 * once ("N similar lines left out"). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/serve.h"

/* 10 lines per 10 s: a handful of failing clients are all logged; a storm
 * costs a line a second on average. */
#define LOG_BURST 10u
#define LOG_WINDOW_S 10

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1;    /* --log FILE */
static bool log_syslog;    /* a daemon without --log */
static time_t win_start;   /* the rate limit's window (CLOCK_MONOTONIC s) */
static unsigned win_lines, left_out;

int serve_log_open(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (fd < 0)
		return -errno;
	log_fd = fd;
	return 0;
}

void serve_log_daemon(void)
{
	int fd = log_fd >= 0 ? log_fd : open("/dev/null", O_WRONLY);
	if (fd >= 0 && fd != 2)
		dup2(fd, 2);
	if (log_fd < 0) {
		if (fd > 2)
			close(fd);
		openlog("vramcache", LOG_PID, LOG_DAEMON);
		log_syslog = true;
	}
}

/* Writes one line; log_mu held. */
static void emit(int prio, const char *fmt, va_list ap)
{
	if (log_syslog) {
		vsyslog(prio, fmt, ap);
		return;
	}
	char line[1024];
	int n = 0;
	if (log_fd >= 0) { /* a file: when, and who */
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = (int)strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%SZ ", &tm);
		n += snprintf(line + n, sizeof line - (size_t)n, "vramcache[%ld]: ", (long)getpid());
	} else {
		n = snprintf(line, sizeof line, "vramcache serve: ");
	}
	int k = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	n = k < 0 ? n : n + k < (int)sizeof line - 1 ? n + k : (int)sizeof line - 2;
	line[n++] = '\n';
	if (write(log_fd >= 0 ? log_fd : 2, line, (size_t)n) < 0) {
		/* nowhere left to say it */
	}
}

static void emitf(int prio, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit(prio, fmt, ap);
	va_end(ap);
}

/* Reports lines left out, if any; log_mu held. */
static void report_left_out(void)
{
	if (left_out)
		emitf(LOG_NOTICE, "%u similar lines left out in the last %d s (rate limit)", left_out,
		      LOG_WINDOW_S);
	left_out = 0;
}

void serve_log(int prio, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&log_mu);
	emit(prio, fmt, ap);
	pthread_mutex_unlock(&log_mu);
	va_end(ap);
}

void serve_log_limited(int prio, const char *fmt, ...)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	pthread_mutex_lock(&log_mu);
	if (ts.tv_sec - win_start >= LOG_WINDOW_S) {
		report_left_out();
		win_start = ts.tv_sec;
		win_lines = 0;
	}
	if (win_lines < LOG_BURST) {
		win_lines++;
		va_list ap;
		va_start(ap, fmt);
		emit(prio, fmt, ap);
		va_end(ap);
	} else {
		left_out++;
	}
	pthread_mutex_unlock(&log_mu);
}

void serve_log_flush(void)
{
	pthread_mutex_lock(&log_mu);
	report_left_out();
	pthread_mutex_unlock(&log_mu);
}
