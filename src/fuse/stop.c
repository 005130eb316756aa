/* The mount's end: SIGTERM, SIGINT and SIGHUP, an unmount from outside, and
 * the write-back that must come before the process goes.
 *
 * Signals. The three are blocked in every thread (fs_stop_init, before the
 * first thread is made: the engine's, libfuse's workers and ours inherit
 * the mask) and taken by one thread in sigwait (sig_main), so nothing runs
 * in a handler and that thread may call anything.
 *
 * While the mount serves, the first signal writes every dirty page back
 * and syncs the files (vc_volume_flush of each files volume) on a thread
 * of its own (flusher_main), the mount serving all along. SRC takes them:
 * the loop ends and the mount goes, exit 0. SRC refuses (a full file
 * system): the ranges the cache holds newer than SRC are logged by file,
 * "kept in the cache", and the mount serves on; the acknowledged writes
 * stay, and an fsync, a close or the end may still write them. A second
 * signal, or any signal once the mount no longer serves, forces the end:
 * a watchdog exits 1 after FS_STOP_FORCE_S whatever the other threads are
 * doing (a store that does not answer), logging what is lost; meanwhile
 * the loop ends, the mount goes and one more write-back is tried: exit 0
 * only if SRC took everything, else what is lost is logged and exit 1.
 *
 * Unmounted from outside (umount MNT, fusermount3 -u) the kernel ends the
 * loop without asking. The write-back runs then (fs_stop_writeback); if SRC
 * refuses, the process keeps the dirty pages, logs them "kept", and tries
 * again every FS_STOP_RETRY_S until SRC takes them (exit 0) or a signal
 * comes (forced, as above). The mount ending after the first signal's good
 * write-back goes the same way, for writes that came in between.
 *
 * Ending libfuse's loop (3.14, fuse_loop_mt.c): its calling thread waits in
 * sem_wait until fuse_session_exited; a worker posts the semaphore when it
 * sees the session end (an unmount), and libfuse's own handler (not used
 * here) relies on interrupting that wait. So end_loop calls
 * fuse_session_exit, then sends SIGUSR1 to the loop's thread, where a no-op
 * handler without SA_RESTART makes sem_wait fail with EINTR, again every
 * KICK_NS until the loop has returned: a kick that lands between the
 * loop's check and its sem_wait wakes nothing.
 *
 * Lock rules: st->mu guards the fields of struct fs_stop but loop_done;
 * nothing is called with it held but fprintf, pthread_create and
 * fuse_session_exit (a store to a flag).
 * st->report_mu is held
 * by whoever reads the volumes and the identities for a report (it takes
 * id_mu and fd_mu, and calls the engine, inside) and by the main thread to
 * set `closing` before the teardown frees them; after that nobody reports.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

#include "fuse/fs.h"

/* The loop's thread is kicked again this often until the loop returns:
 * 20 ms bounds the end's delay when a kick is lost, at 50 no-op signals a
 * second for as long as the workers take to finish their requests. */
#define KICK_NS 20000000L

/* Ranges logged per report at most (then a count of all): a screenful. */
#define REPORT_LINES 64

static void sleep_ns(long ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static const char *sig_name(int sig)
{
	return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : sig == SIGHUP ? "SIGHUP"
									   : "a signal";
}

static void stop_set(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
}

static void on_kick(int sig)
{
	(void)sig; /* only to interrupt the loop's sem_wait */
}

int fs_stop_init(struct fs *fs)
{
	struct fs_stop *st = &fs->stop;
	sigset_t set;
	stop_set(&set);
	sigaddset(&set, SIGUSR1); /* unblocked in the loop's thread only */
	int r = pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (r)
		return -r;
	/* A write to a pipe or socket whose reader went (the statistics
	 * socket's clients) fails with EPIPE instead of ending the mount. */
	struct sigaction sa = { .sa_handler = SIG_IGN };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, NULL);
	sa.sa_handler = on_kick;
	sa.sa_flags = 0; /* no SA_RESTART: sem_wait fails with EINTR */
	sigaction(SIGUSR1, &sa, NULL);
	pthread_mutex_init(&st->mu, NULL);
	pthread_mutex_init(&st->report_mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&st->cv, &ca);
	pthread_condattr_destroy(&ca);
	st->main_tid = pthread_self();
	st->inited = true;
	return 0;
}

/* Every files volume's dirty pages to SRC, and the files synced (the
 * store's sync: every fd open in the volume, which includes every file
 * with dirty pages). Each volume is tried; 0 or the first error. Runs
 * beside the mount's requests: vc_volume_flush may, and volumes only ever
 * open (under id_mu) while the mount runs. */
static int flush_files(struct fs *fs)
{
	vc_volume *v[VC_VOLUMES_MAX];
	pthread_mutex_lock(&fs->id_mu);
	unsigned n = fs->nfvols;
	for (unsigned i = 0; i < n; i++)
		v[i] = fs->fvols[i].vol;
	pthread_mutex_unlock(&fs->id_mu);
	int first = 0;
	for (unsigned i = 0; i < n; i++) {
		int r = v[i] ? vc_volume_flush(v[i]) : 0;
		if (r < 0 && !first)
			first = r;
	}
	return first;
}

/* path with control bytes as \xNN, so that one range is one line. */
static void escape(const char *path, char *out, size_t cap)
{
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)path; *p && o + 5 < cap; p++) {
		if (*p < 0x20 || *p == 0x7f || *p == '\\')
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", *p);
		else
			out[o++] = (char)*p;
	}
	out[o] = 0;
}

/* The name of slot's file for a report (its path in SRC, from its fd's
 * /proc/self/fd link, escaped) and its size; false, with a stand-in name,
 * when no identity has the slot now (a file being dropped) or its fd
 * cannot open. */
static bool slot_file(struct fs *fs, uint32_t slot, char *path, size_t cap, uint64_t *size)
{
	struct fs_ident *id;
	int fd = fs_fd_get_slot(fs, slot, &id);
	if (fd < 0) { /* nothing to put: fs_fd_get_slot pins only on success */
		snprintf(path, cap, "(slot %u: %s)", slot, id ? strerror(-fd) : "no file now");
		return false;
	}
	*size = atomic_load(&id->size);
	char name[16], buf[PATH_MAX];
	fs_fd_name(fd, name);
	ssize_t n = readlinkat(fs->proc_fd, name, buf, sizeof buf - 1);
	int err = errno;
	fs_fd_put(fs, id);
	if (n < 0)
		snprintf(buf, sizeof buf, "(slot %u: %s)", slot, strerror(err));
	else
		buf[n] = 0;
	escape(buf, path, cap);
	return true;
}

void fs_stop_report(struct fs *fs, const char *head)
{
	struct fs_stop *st = &fs->stop;
	pthread_mutex_lock(&st->report_mu);
	if (st->closing) {
		pthread_mutex_unlock(&st->report_mu);
		return;
	}
	fprintf(stderr, "vramcache mount: %s\n", head);
	pthread_mutex_lock(&fs->id_mu);
	const unsigned nv = fs->nfvols;
	pthread_mutex_unlock(&fs->id_mu);
	unsigned runs = 0;
	uint64_t bytes = 0;
	char path[4 * PATH_MAX + 1]; /* escaped: 4 bytes a byte at most */
	uint32_t path_slot = FS_NO_SLOT;
	uint64_t size = 0;
	bool named = false;
	for (unsigned i = 0; i < nv; i++) {
		struct fs_fvol *fv = &fs->fvols[i]; /* set once, before nfvols counted it */
		uint64_t off = 0, start, len;
		while (fv->vol && vc_volume_dirty_next(fv->vol, off, &start, &len) == 1) {
			off = start + len;
			/* A run of dirty pages, cut at slots: a piece per file. */
			while (len) {
				uint64_t in = start & (FS_SLOT_BYTES - 1);
				uint64_t k = len < FS_SLOT_BYTES - in ? len : FS_SLOT_BYTES - in;
				uint32_t slot = fv->first + (uint32_t)(start >> FS_SLOT_SHIFT);
				if (slot != path_slot) {
					path_slot = slot;
					named = slot_file(fs, slot, path, sizeof path, &size);
				}
				/* The file's bytes: its last page is clipped at its size. */
				uint64_t end = named && in + k > size && size > in ? size : in + k;
				runs++;
				bytes += end - in;
				if (runs <= REPORT_LINES)
					fprintf(stderr, "  %s: bytes %llu-%llu (%llu bytes)\n",
						path, (unsigned long long)in,
						(unsigned long long)(end - 1), (unsigned long long)(end - in));
				start += k;
				len -= k;
			}
		}
	}
	if (runs == 0)
		fprintf(stderr, "  (no dirty page: the files' sync failed or did not end)\n");
	/* Always: the report's last line (a reader of the log knows it has
	 * all of it), and the count where lines were left out. */
	fprintf(stderr, "  %u ranges in all, %llu bytes\n", runs, (unsigned long long)bytes);
	pthread_mutex_unlock(&st->report_mu);
}

/* Ends libfuse's loop (the file's head says how); returns once it has
 * returned. Nothing held. */
static void end_loop(struct fs *fs)
{
	struct fs_stop *st = &fs->stop;
	pthread_mutex_lock(&st->mu);
	if (st->serving) /* else the session may be gone */
		fuse_session_exit(fs->se);
	pthread_mutex_unlock(&st->mu);
	while (!atomic_load(&st->loop_done)) {
		pthread_kill(st->main_tid, SIGUSR1);
		sleep_ns(KICK_NS);
	}
}

/* The forced end's watchdog: whatever the other threads are doing after
 * FS_STOP_FORCE_S, the process logs what is lost, unmounts and exits 1. */
static void *watchdog_main(void *arg)
{
	struct fs *fs = arg;
	sleep_ns(FS_STOP_FORCE_S * 1000000000L);
	char head[160];
	snprintf(head, sizeof head, "exiting after %d s: writes acknowledged but not written back, "
				    "lost:", FS_STOP_FORCE_S);
	fs_stop_report(fs, head); /* nothing once closing: the teardown had reported */
	if (!atomic_load(&fs->stop.loop_done)) /* the loop's end hangs: the mount goes too */
		(void)umount2(fs->mnt, MNT_DETACH);
	fprintf(stderr, "vramcache mount: exiting after %d s (forced)\n", FS_STOP_FORCE_S);
	_exit(1);
	return NULL;
}

static void *flusher_main(void *arg)
{
	struct fs *fs = arg;
	struct fs_stop *st = &fs->stop;
	int r = flush_files(fs);
	pthread_mutex_lock(&st->mu);
	bool forced = st->forced, end = r == 0 && !forced && st->serving;
	pthread_mutex_unlock(&st->mu);
	if (r < 0 && !forced) {
		char head[256];
		snprintf(head, sizeof head, "writing back on %s: %s; writes acknowledged but not "
					    "written back, kept in the cache (the mount serves on; a "
					    "second signal unmounts without them):",
			 sig_name(st->first_sig), vc_strerror(r));
		fs_stop_report(fs, head);
	}
	pthread_mutex_lock(&st->mu);
	st->flushing = false;
	pthread_cond_broadcast(&st->cv);
	pthread_mutex_unlock(&st->mu);
	if (end)
		end_loop(fs);
	return NULL;
}

/* One signal, on the signal thread. */
static void on_signal(struct fs *fs, int sig)
{
	struct fs_stop *st = &fs->stop;
	pthread_mutex_lock(&st->mu);
	st->signals++;
	bool flush = st->serving && !st->forced && !st->flushing && st->signals == 1;
	bool end = false;
	if (flush) {
		st->first_sig = sig;
		if (fs->o->cfg.write_mode == VC_WRITE_BACK)
			fprintf(stderr, "vramcache mount: %s: writing back dirty pages (the mount "
					"serves on)\n", sig_name(sig));
		if (pthread_create(&st->flusher, NULL, flusher_main, fs) == 0)
			st->flushing = st->flusher_joinable = true;
		else
			flush = false;
	}
	if (!flush && !st->forced) {
		st->forced = true;
		fprintf(stderr, "vramcache mount: %s: ending; writes SRC has not taken within %d s "
				"are lost\n", sig_name(sig), FS_STOP_FORCE_S);
		pthread_t t;
		if (pthread_create(&t, NULL, watchdog_main, fs) == 0)
			pthread_detach(t);
		pthread_cond_broadcast(&st->cv);
		end = st->serving;
	}
	pthread_mutex_unlock(&st->mu);
	if (end)
		end_loop(fs);
}

static void *sig_main(void *arg)
{
	struct fs *fs = arg;
	sigset_t set;
	stop_set(&set);
	for (;;) {
		int sig;
		if (sigwait(&set, &sig) != 0) /* a cancellation point: fs_stop_fini */
			continue;
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		on_signal(fs, sig);
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	}
	return NULL;
}

int fs_stop_start(struct fs *fs)
{
	struct fs_stop *st = &fs->stop;
	st->serving = true;
	int r = pthread_create(&st->sig_tid, NULL, sig_main, fs);
	if (r) {
		st->serving = false;
		return -r;
	}
	st->started = true;
	/* Only this thread takes the kicks (and libfuse's workers, which it
	 * makes: a kick meant for them would only restart their read). */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	return 0;
}

void fs_stop_loop_done(struct fs *fs)
{
	struct fs_stop *st = &fs->stop;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_mutex_lock(&st->mu);
	st->serving = false;
	pthread_mutex_unlock(&st->mu);
	atomic_store(&st->loop_done, true);
}

/* Waits up to FS_STOP_RETRY_S, or until a signal forces the end; true:
 * forced. */
static bool wait_retry(struct fs_stop *st)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += FS_STOP_RETRY_S;
	pthread_mutex_lock(&st->mu);
	while (!st->forced && pthread_cond_timedwait(&st->cv, &st->mu, &t) != ETIMEDOUT)
		;
	bool forced = st->forced;
	pthread_mutex_unlock(&st->mu);
	return forced;
}

int fs_stop_writeback(struct fs *fs)
{
	struct fs_stop *st = &fs->stop;
	if (st->flusher_joinable) { /* a hung store: the forced end's watchdog bounds this */
		pthread_join(st->flusher, NULL);
		st->flusher_joinable = false;
	}
	int r = flush_files(fs);
	if (r == 0)
		return 0;
	char head[256];
	pthread_mutex_lock(&st->mu);
	bool forced = st->forced || !st->started; /* no signal thread: nobody to wait for */
	pthread_mutex_unlock(&st->mu);
	if (!forced) {
		snprintf(head, sizeof head, "unmounted; writing back: %s; writes acknowledged but not "
					    "written back, kept in the cache (trying again every %d s; "
					    "a signal exits without them):",
			 vc_strerror(r), FS_STOP_RETRY_S);
		fs_stop_report(fs, head);
		for (unsigned tries = 1; !wait_retry(st); tries++) {
			if ((r = flush_files(fs)) == 0) {
				fprintf(stderr, "vramcache mount: written back (try %u)\n", tries + 1);
				return 0;
			}
		}
	}
	snprintf(head, sizeof head, "writing back at unmount: %s; writes acknowledged but not "
				    "written back, lost:", vc_strerror(r));
	fs_stop_report(fs, head);
	/* Lost: the teardown must not write them again (nor hang on a store
	 * that does not answer). */
	pthread_mutex_lock(&fs->id_mu);
	unsigned n = fs->nfvols;
	pthread_mutex_unlock(&fs->id_mu);
	for (unsigned i = 0; i < n; i++)
		if (fs->fvols[i].vol)
			(void)vc_volume_drop(fs->fvols[i].vol, 0, 0, VC_DROP_DISCARD);
	return r;
}

void fs_stop_closing(struct fs *fs)
{
	struct fs_stop *st = &fs->stop;
	if (!st->inited)
		return;
	pthread_mutex_lock(&st->report_mu);
	st->closing = true;
	pthread_mutex_unlock(&st->report_mu);
}

void fs_stop_fini(struct fs *fs)
{
	struct fs_stop *st = &fs->stop;
	if (st->started) {
		pthread_cancel(st->sig_tid);
		pthread_join(st->sig_tid, NULL);
		st->started = false;
	}
	if (st->flusher_joinable) {
		pthread_join(st->flusher, NULL);
		st->flusher_joinable = false;
	}
}
