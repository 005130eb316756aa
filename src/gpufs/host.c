/* GPUfs's host half: the context, the service threads and the reaper
 * (gpufs.h has the lock rules, docs/GPUFS.md the design).
 *
 * Service threads take every published request at the ring's head in one
 * claim (opportunistic batching, GPUfs'16 §4.3.1: nothing waits for a batch
 * to fill) and serve them from the engine. Each grant (GET) is an engine
 * pin held for the device, counted in held[id], so that release can drop
 * every pin whatever the device did. The reaper asks for a revoke pass
 * (device table entries nobody pins become DEAD; their pins are dropped
 * here) for the entries that engine sleepers may wait for (pass_select):
 * those of the pages they sleep on, and a share more when pins kept the
 * engine from making room or the table holds max_cached grants; the
 * user's warps do the pass (see "Revoke passes" below).
 *
 * Nothing here runs a kernel or makes a CUDA call that waits for one
 * while users' kernels may run: the engine is in quiet mode for the
 * context's life (eng_gfs_quiet: moves by copy engine, no cleaning
 * jobs), revoke passes are asked for by copy engine, and everything the
 * service path uses is allocated at create. (memcpy_sync, which waits
 * for the legacy stream's kernels, is used only by create, release and
 * vc_gpufs_open, which run between kernels.)
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "device/device.h"
#include "engine/gpufs.h"
#include "gpufs/gpufs.h"

#ifdef VC_HAVE_CUDA
#include "device/cuda/gpufs.h"
#endif

/* Batch bound of one claim: a bulk round's worth of misses (batch_pages
 * defaults to 256), loaded together (load_misses). */
#define SVC_BATCH 256
/* Idle service threads poll the ring every this many ns once a few quick
 * polls found nothing: a request waits at most this long for a sleeping
 * thread, against a core spent polling. */
#define SVC_NAP_NS 20000
/* The reaper looks at the engine's sleepers and the table's grants this
 * often: bounds how long a CPU writer waits for an idle table entry. */
#define REAPER_NS 200000
/* ... and drains the unpin ring this often: how long a handed-back pin may
 * keep a writer waiting. */
#define UNPIN_NS 20000
/* Hint ring slots (direct.c's admissions): 512 KiB of mapped memory; a
 * hint that waits longer than this many others is lost. */
#define HINT_SLOTS 65536

static void nap(long ns)
{
	struct timespec ts = { 0, ns };
	nanosleep(&ts, NULL);
}

static uint64_t ld64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void st64(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* ---- grants ---------------------------------------------------------------- */

static void grant_drop(struct vc_gpufs *g, uint32_t id, bool cached)
{
	if (id >= g->npool)
		return; /* a device bug: never trust an id blindly */
	uint32_t h = atomic_load(&g->held[id]);
	do {
		if (h == 0)
			return;
	} while (!atomic_compare_exchange_weak(&g->held[id], &h, h - 1));
	atomic_fetch_sub(&g->nheld, 1);
	if (cached)
		atomic_fetch_sub(&g->ncached, 1);
	eng_gfs_unpin(g->c, id);
}

/* ---- files ----------------------------------------------------------------- */

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Our own change: the next open must not take it for someone else's. The
 * record keeps the writes *done* before the stat: a write in flight then
 * (its change may land after the stat) counts as one after the record. */
static void file_restat(struct gfs_file *f)
{
	pthread_mutex_lock(&f->stmu);
	f->wseen = eng_gfs_writes(f->v, NULL);
	fstat(f->fd, &f->st);
	pthread_mutex_unlock(&f->stmu);
}

/* Whether path changed outside the cache since the record (f->rw held,
 * either way): its stat differs, and the cache neither began a write of
 * it since the record nor has one in flight (the counts are read after
 * the stat, so every write whose change the stat shows has begun). A
 * difference the cache's writes explain moves the record. The cost of
 * telling them apart so: a change from outside that lands between two
 * gopens together with a write of the cache to the same file is taken
 * for the cache's own (NFS's weak cache consistency has the same gap). */
static bool file_changed(struct gfs_file *f, const char *path, struct stat *st)
{
	uint64_t done0 = eng_gfs_writes(f->v, NULL); /* the new record's, as file_restat */
	if (stat(path, st) != 0)
		return false;
	uint64_t begun, done = eng_gfs_writes(f->v, &begun);
	pthread_mutex_lock(&f->stmu);
	bool differs = !same_file(st, &f->st);
	if (differs && (begun != f->wseen || begun != done)) {
		f->st = *st;
		f->wseen = done0;
		differs = false;
	}
	pthread_mutex_unlock(&f->stmu);
	return differs;
}

/* An open of path: fd or -errno; *f the file. Close-to-open: a file that
 * changed outside the cache since its last open gets a new version (the
 * device ignores table entries of older ones) and its cached pages are
 * written back and dropped, so every page is read anew, lazily. */
static int file_open(struct vc_gpufs *g, const char *path, int flags, struct gfs_file **out)
{
	if (flags & ~(VC_GO_RDWR | VC_GO_CREAT | VC_GO_TRUNC))
		return vc_err(-EINVAL, "gpufs: open flags %#x not supported", (unsigned)flags);
	pthread_mutex_lock(&g->mu);
	int fd = -1, freefd = -1;
	for (int i = 0; i < VC_GFS_MAX_FILES; i++) {
		if (g->files[i].path && strcmp(g->files[i].path, path) == 0)
			fd = i;
		else if (!g->files[i].path && freefd < 0)
			freefd = i;
	}
	struct gfs_file *f;
	int r = 0;
	if (fd >= 0) {
		f = &g->files[fd];
		pthread_mutex_unlock(&g->mu);
		if ((flags & VC_GO_RDWR) && !(f->flags & VC_GO_RDWR))
			return vc_err(-EACCES, "gpufs: %s is open read-only", path);
		if (flags & VC_GO_TRUNC)
			return vc_err(-EBUSY, "gpufs: O_TRUNC of %s, which is open", path);
		/* A stat that differs from the record is our change when the
		 * cache wrote the file since (file_changed): the record moves,
		 * nothing is dropped, no exclusive lock. Else it is someone
		 * else's: under f->rw alone, checked again, a new version. */
		struct stat st;
		pthread_rwlock_rdlock(&f->rw);
		bool changed = file_changed(f, path, &st);
		pthread_rwlock_unlock(&f->rw);
		if (changed)
			pthread_rwlock_wrlock(&f->rw);
		else
			pthread_rwlock_rdlock(&f->rw);
		if (changed && file_changed(f, path, &st)) {
			f->version++;
			atomic_fetch_add_explicit(&g->st.reopen_drops, 1, memory_order_relaxed);
			r = vc_volume_drop(f->v, 0, 0, 0);
			gfs_direct_stale(g, f);
			if (r == 0 && (uint64_t)st.st_size != vc_volume_size(f->v))
				r = vc_volume_resize(f->v, (uint64_t)st.st_size);
			if (r == 0)
				file_restat(f);
		}
		if (r == 0) {
			pthread_mutex_lock(&g->mu);
			f->opens++;
			pthread_mutex_unlock(&g->mu);
		}
		pthread_rwlock_unlock(&f->rw);
		*out = f;
		return r < 0 ? r : fd;
	}
	if (freefd < 0) {
		pthread_mutex_unlock(&g->mu);
		return vc_err(-EMFILE, "gpufs: %d files open already", VC_GFS_MAX_FILES);
	}
	f = &g->files[freefd];
	int ofl = O_CLOEXEC | ((flags & VC_GO_RDWR) ? O_RDWR : O_RDONLY) |
		  ((flags & VC_GO_CREAT) ? O_CREAT : 0) | ((flags & VC_GO_TRUNC) ? O_TRUNC : 0);
	int hfd = open(path, ofl, 0644);
	if (hfd < 0) {
		r = -errno;
		pthread_mutex_unlock(&g->mu);
		return vc_err(r, "gpufs: open %s: %s", path, strerror(-r));
	}
	char *p = strdup(path);
	if (!p || fstat(hfd, &f->st) < 0) {
		r = p ? -errno : -ENOMEM;
		goto fail;
	}
	if (!S_ISREG(f->st.st_mode)) {
		r = vc_err(-EINVAL, "gpufs: %s is not a regular file", path);
		goto fail;
	}
	r = vc_volume_open(g->c, NULL, hfd, (flags & VC_GO_RDWR) ? 0 : VC_OPEN_READONLY, &f->v);
	if (r < 0)
		goto fail;
	f->path = p;
	f->fd = hfd;
	f->flags = (uint32_t)flags & VC_GO_RDWR;
	f->version = 1;
	f->opens = 1;
	f->wseen = eng_gfs_writes(f->v, NULL);
	atomic_store(&f->synced, f->wseen);
	pthread_mutex_unlock(&g->mu);
	*out = f;
	return freefd;
fail:
	free(p);
	close(hfd);
	pthread_mutex_unlock(&g->mu);
	return r;
}

/* The file's writes, durable: 0 or -errno (f->rw held shared). */
static int file_sync(struct vc_gpufs *g, struct gfs_file *f)
{
	if (!(f->flags & VC_GO_RDWR))
		return 0;
	bool did;
	int r = eng_gfs_flush(f->v, &f->synced, &did);
	if (did)
		atomic_fetch_add_explicit(&g->st.syncs, 1, memory_order_relaxed);
	return r;
}

static struct gfs_file *file_of(struct vc_gpufs *g, uint32_t fd)
{
	if (fd >= VC_GFS_MAX_FILES)
		return NULL;
	pthread_mutex_lock(&g->mu);
	struct gfs_file *f = g->files[fd].path ? &g->files[fd] : NULL;
	pthread_mutex_unlock(&g->mu);
	return f;
}

/* One close: flushes (close-to-open: the writes are durable and visible;
 * no backing sync when the cache wrote nothing since the last, so the
 * closes of many warps after one write cost one fdatasync), returns the
 * opens left. Shared f->rw: a flush changes no size and drops nothing.
 * The volume stays open (its pages cached) until the context is
 * destroyed. */
static int file_close(struct vc_gpufs *g, struct gfs_file *f)
{
	pthread_rwlock_rdlock(&f->rw);
	int r = file_sync(g, f);
	pthread_mutex_lock(&g->mu);
	if (r == 0 && f->opens > 0)
		r = --f->opens;
	pthread_mutex_unlock(&g->mu);
	pthread_rwlock_unlock(&f->rw);
	return r;
}

/* ---- serving requests -------------------------------------------------------- */

static void answer(struct vc_gfs_req *s, uint64_t t, int64_t result)
{
	s->result = result;
	st64(&s->done, t + 1);
}

static void serve_one(struct vc_gpufs *g, uint64_t t)
{
	struct vc_gfs_req *s = &g->ring[t & (g->nring - 1)];
	unsigned char *data = g->data + (t & (g->nring - 1)) * (uint64_t)VC_GFS_SLOT_DATA;
	struct gfs_file *f = NULL;
	int64_t r = 0;
	atomic_fetch_add_explicit(&g->st.requests, 1, memory_order_relaxed);
	if (s->op != VC_GFS_OP_OPEN && s->op != VC_GFS_OP_NOP &&
	    !(f = file_of(g, s->fd))) {
		answer(s, t, -EBADF);
		return;
	}
	switch (s->op) {
	case VC_GFS_OP_NOP:
		break;
	case VC_GFS_OP_OPEN: {
		atomic_fetch_add_explicit(&g->st.opens, 1, memory_order_relaxed);
		char path[1024];
		uint64_t n = s->len < sizeof path - 1 ? s->len : sizeof path - 1;
		memcpy(path, data, n);
		path[n] = 0;
		r = file_open(g, path, (int)s->flags, &f);
		if (r >= 0) {
			pthread_rwlock_rdlock(&f->rw);
			s->base = eng_gfs_base(f->v);
			s->size = vc_volume_size(f->v);
			s->version = f->version;
			s->flags = f->flags;
			s->addr = f->dmap;
			s->dlen = f->dlen;
			s->res = f->res_dev;
			pthread_rwlock_unlock(&f->rw);
		}
		break;
	}
	case VC_GFS_OP_GET: {
		atomic_fetch_add_explicit(&g->st.gets, 1, memory_order_relaxed);
		uint32_t id;
		uint64_t addr;
		pthread_rwlock_rdlock(&f->rw);
		bool map = s->flags & VC_GFS_F_MAP;
		r = eng_gfs_pin(f->v, s->off, map, &id, &addr);
		uint32_t version = f->version;
		pthread_rwlock_unlock(&f->rw);
		if (r == 0) {
			atomic_fetch_add(&g->held[id], 1);
			atomic_fetch_add(&g->nheld, 1);
			bool cache = !map && atomic_load(&g->ncached) < g->max_cached;
			if (cache) {
				atomic_fetch_add(&g->ncached, 1);
				atomic_fetch_add_explicit(&g->st.get_cached, 1, memory_order_relaxed);
			} else if (!map) {
				atomic_store(&g->want_revoke, true);
			}
			s->id = id;
			s->addr = addr;
			s->version = version;
			s->rflags = cache ? VC_GFS_R_CACHE : 0;
		}
		break;
	}
	case VC_GFS_OP_WRITE:
		atomic_fetch_add_explicit(&g->st.writes, 1, memory_order_relaxed);
		if (s->len > VC_GFS_SLOT_DATA) {
			r = -EINVAL;
			break;
		}
		/* No re-stat: the engine counts the write (file_changed). */
		pthread_rwlock_rdlock(&f->rw);
		r = vc_volume_write(f->v, data, s->len, s->off);
		pthread_rwlock_unlock(&f->rw);
		break;
	case VC_GFS_OP_FSYNC:
		pthread_rwlock_rdlock(&f->rw);
		r = file_sync(g, f);
		pthread_rwlock_unlock(&f->rw);
		break;
	case VC_GFS_OP_CLOSE:
		r = file_close(g, f);
		break;
	case VC_GFS_OP_TRUNC:
		if (!(f->flags & VC_GO_RDWR)) {
			r = -EBADF;
			break;
		}
		pthread_rwlock_wrlock(&f->rw);
		/* Shrinking: the pages cut off go first (their pins may be the
		 * table's: the reaper revokes them while the drop sleeps). */
		r = vc_volume_resize(f->v, s->off);
		if (r == 0 && ftruncate(f->fd, (off_t)s->off) < 0)
			r = -errno;
		file_restat(f);
		s->size = vc_volume_size(f->v);
		s->dlen = f->dlen; /* 0: a writable file has no direct reads */
		pthread_rwlock_unlock(&f->rw);
		break;
	default:
		r = -ENOSYS;
	}
	answer(s, t, r);
}

/* Opportunistic batching of misses (GPUfs'16 §4.3.1): the GETs of one
 * claim (not gmmap's, which pin in the host tier) that miss the cache are
 * loaded into the GPU tier together before any is served: one backing
 * read per volume and one batched move (copy engines) a round of up to
 * batch_pages pages, instead of a round per page. serve_one then finds
 * them cached. The files' rw locks are held shared meanwhile (taken in fd
 * order: no truncation cuts a page off under the load). Cost: O(n log n)
 * host work besides the round; a claim of hits only costs n lock-free
 * index lookups. */
static void load_misses(struct vc_gpufs *g, uint64_t h, uint64_t n)
{
	uint64_t list[SVC_BATCH];
	bool used[VC_GFS_MAX_FILES] = { false };
	uint32_t nl = 0;
	for (uint64_t i = 0; i < n; i++) {
		const struct vc_gfs_req *s = &g->ring[(h + i) & (g->nring - 1)];
		if (s->op == VC_GFS_OP_GET && !(s->flags & VC_GFS_F_MAP) && file_of(g, s->fd))
			used[s->fd] = true;
	}
	for (uint32_t fd = 0; fd < VC_GFS_MAX_FILES; fd++)
		if (used[fd])
			pthread_rwlock_rdlock(&g->files[fd].rw);
	for (uint64_t i = 0; i < n; i++) {
		const struct vc_gfs_req *s = &g->ring[(h + i) & (g->nring - 1)];
		if (s->op != VC_GFS_OP_GET || (s->flags & VC_GFS_F_MAP) || s->fd >= VC_GFS_MAX_FILES ||
		    !used[s->fd])
			continue;
		vc_volume *v = g->files[s->fd].v;
		if (s->off < (vc_volume_size(v) + (1ull << g->page_shift) - 1) >> g->page_shift)
			list[nl++] = eng_gfs_base(v) | s->off;
	}
	uint32_t rounds = 0, loaded = 0;
	eng_gfs_load(g->c, list, nl, &rounds, &loaded);
	for (uint32_t fd = 0; fd < VC_GFS_MAX_FILES; fd++)
		if (used[fd])
			pthread_rwlock_unlock(&g->files[fd].rw);
	atomic_fetch_add_explicit(&g->st.miss_rounds, rounds, memory_order_relaxed);
	atomic_fetch_add_explicit(&g->st.miss_pages, loaded, memory_order_relaxed);
}

static void *svc_main(void *arg)
{
	struct vc_gpufs *g = arg;
	unsigned idle = 0;
	while (!atomic_load(&g->stop)) {
		pthread_mutex_lock(&g->mu);
		uint64_t h = g->head, n = 0;
		while (n < SVC_BATCH &&
		       ld64(&g->ring[(h + n) & (g->nring - 1)].seq) == h + n + 1)
			n++;
		g->head = h + n;
		if (n)
			atomic_fetch_add(&g->busy, 1);
		pthread_mutex_unlock(&g->mu);
		if (!n) {
			/* Idle past the quick polls: load hinted pages (an
			 * admission holds this thread for a load round, which
			 * requests arriving meanwhile must not wait behind while
			 * they keep coming). */
			if (++idle > 64 && gfs_admit(g))
				continue;
			if (idle > 64)
				nap(SVC_NAP_NS);
			else
				sched_yield();
			continue;
		}
		idle = 0;
		atomic_fetch_add_explicit(&g->st.batches, 1, memory_order_relaxed);
		load_misses(g, h, n);
		for (uint64_t i = 0; i < n; i++)
			serve_one(g, h + i);
		atomic_fetch_sub(&g->busy, 1);
	}
	return NULL;
}

/* ---- revoking ------------------------------------------------------------------ */

/* Revoke passes (entries nobody pins leave the table, their engine pins
 * drop) run without a kernel: the reaper asks for one by writing the
 * pass's words in device memory through the copy engines (CUDA; plain
 * stores on emu), and the user's warps share it at their next call or
 * while they wait for the host (vc_gfs_revoke_help); the warp that
 * finishes the last chunk publishes the revoked ids. The reaper polls for
 * that between its unpin drains, never waiting on the device. A pass that
 * no warp finishes within REVOKE_COOP_NS (the kernel computes without
 * calls, or has ended) gets the fallback: the revoke kernel on CUDA,
 * which takes the chunks left once an SM is free, the reaper itself on
 * emu. Everything here is under revoke_mu. */
#define REVOKE_COOP_NS 2000000
/* pass_select: reaper looks (REAPER_NS apart) with resource sleepers in a
 * row before a pass takes an eighth of the table for them: 5 ms. */
#define RESOURCE_TICKS 25

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Which entries the next pass revokes (sel: VC_GFS_BUCKETS bits), or
 * false for no pass. Those that engine sleepers may wait for: the buckets
 * of the pages they wait for, and, when room could not be made because of
 * pins (the engine's pin stalls grew) or the table holds max_cached
 * grants, an eighth of the rest more (32 buckets, the next eighth each
 * time). A table of grants that nobody waits for is left alone: the step
 * before revoked every entry at any sleeper, staging and I/O waits
 * included, and a kernel re-asked the host for pages it had been granted
 * (docs/GPUFS.md, step 4). */
static bool pass_select(struct vc_gpufs *g, uint32_t *sel)
{
	memset(sel, 0, VC_GFS_BUCKETS / 8);
	uint64_t stalls;
	bool resource;
	uint32_t n = eng_gfs_wait_sel(g->c, sel, &stalls, &resource);
	bool want = atomic_exchange(&g->want_revoke, false);
	/* Resource sleepers that stay (RESOURCE_TICKS looks in a row) may be
	 * waiting for pins after all: an eighth more each time, the net under
	 * every wait the engine does not tell apart. */
	g->rev_resource = resource ? g->rev_resource + 1 : 0;
	if (stalls != g->rev_stalls || want || g->rev_resource >= RESOURCE_TICKS) {
		g->rev_stalls = stalls;
		g->rev_resource = 0;
		sel[g->rev_eighth++ % (VC_GFS_BUCKETS / 32)] = ~0u;
		n++;
	}
	return n != 0;
}

/* Asks for pass g->rev_gen + 1: one store of ctl.rev_req (the counters
 * never go back: gpufs.h's struct vc_gfs_ctl). The previous pass is done
 * and its output taken. */
static int pass_start(struct vc_gpufs *g, const uint32_t *sel)
{
	uint32_t gen = g->rev_gen + 1;
	int r = 0;
	if (g->emu) {
		struct vc_gfs_ctl *ctl = (struct vc_gfs_ctl *)(uintptr_t)g->ctl_dev;
		memcpy(ctl->rev_sel, sel, sizeof ctl->rev_sel);
		__atomic_store_n(&ctl->rev_req, gen, __ATOMIC_RELEASE);
	} else {
#ifdef VC_HAVE_CUDA
		/* The copies read g->sig when they run: it stays put until the
		 * next pass, which starts after this one's output was seen. The
		 * selection lands first (one stream: in order), so a warp that
		 * claims a chunk of this pass reads this pass's. */
		memcpy(g->sig->sel, sel, sizeof g->sig->sel);
		g->sig->gen = gen;
		r = vc_cuda_gfs_put(g->dev, g->rev_stream, g->ctl_dev + offsetof(struct vc_gfs_ctl, rev_sel),
				    g->sig->sel, sizeof g->sig->sel);
		if (r == 0)
			r = vc_cuda_gfs_put(g->dev, g->rev_stream,
					    g->ctl_dev + offsetof(struct vc_gfs_ctl, rev_req), &g->sig->gen,
					    sizeof g->sig->gen);
#else
		r = -ENOTSUP;
#endif
	}
	if (r < 0)
		return r;
	g->rev_gen = gen;
	g->rev_active = true;
	g->rev_fallback = false;
	g->rev_t0 = now_ns();
	atomic_store(&g->st.pass_t0, g->rev_t0);
	return 0;
}

/* The pass in progress: drops the pins it revoked once published, sends
 * the fallback when it is overdue. */
static void pass_poll(struct vc_gpufs *g)
{
	if (__atomic_load_n(&g->rev[g->ntab + 1], __ATOMIC_ACQUIRE) != g->rev_gen) {
		if (g->rev_fallback || now_ns() - g->rev_t0 < REVOKE_COOP_NS)
			return;
		g->rev_fallback = true;
		atomic_fetch_add_explicit(&g->st.rev_fallbacks, 1, memory_order_relaxed);
		if (g->emu) {
			vc_gfs_revoke_help(&g->ctx, vc_gfs_warp_self());
		} else {
#ifdef VC_HAVE_CUDA
			(void)vc_cuda_gfs_revoke_kernel(g->dev, &g->ctx, g->rev_stream);
#endif
		}
		if (__atomic_load_n(&g->rev[g->ntab + 1], __ATOMIC_ACQUIRE) != g->rev_gen)
			return;
	}
	/* The pass's ids: rev_n's count since the last pass, from there on
	 * (mod entries; a pass revokes each entry at most once). */
	uint32_t end = __atomic_load_n(&g->rev[g->ntab], __ATOMIC_ACQUIRE);
	uint32_t n = end - g->rev_seen;
	if (n > g->ntab)
		n = g->ntab; /* a device bug: never trust a count blindly */
	for (uint32_t i = 0; i < n; i++)
		grant_drop(g, __atomic_load_n(&g->rev[(g->rev_seen + i) & (g->ntab - 1)], __ATOMIC_RELAXED),
			   true);
	g->rev_seen = end;
	g->rev_active = false;
	atomic_store(&g->st.pass_t0, 0);
	atomic_fetch_add_explicit(&g->st.revokes, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&g->st.revoked, n, memory_order_relaxed);
}

/* Release, after the user's kernels: no pass is left in progress (a
 * fallback kernel is waited for; a pass that warps left unfinished needs
 * nothing: release drops every pin and resets the words). */
static void pass_settle(struct vc_gpufs *g)
{
	if (g->rev_active && g->rev_fallback && !g->emu) {
#ifdef VC_HAVE_CUDA
		(void)vc_cuda_gfs_stream_sync(g->dev, g->rev_stream);
#endif
	}
	g->rev_active = false;
	atomic_store(&g->st.pass_t0, 0);
	g->rev_gen = 0;
	g->rev_seen = 0;
	__atomic_store_n(&g->rev[g->ntab], 0, __ATOMIC_RELEASE);
	__atomic_store_n(&g->rev[g->ntab + 1], 0, __ATOMIC_RELEASE);
}

/* Serves the unpin ring's published requests (the reaper's; never sleeps
 * in the engine). Under revoke_mu, which release takes too. */
static void drain_unpins(struct vc_gpufs *g)
{
	for (;;) {
		uint64_t t = g->uhead;
		struct vc_gfs_req *s = &g->uring[t & (g->nring - 1)];
		if (ld64(&s->seq) != t + 1)
			return;
		for (uint32_t i = 0; i < s->nids && i < VC_GFS_IDS; i++)
			grant_drop(g, s->ids[i], s->flags & VC_GFS_R_CACHE);
		atomic_fetch_add_explicit(&g->st.requests, 1, memory_order_relaxed);
		st64(&s->done, t + 1);
		st64(&s->ack, t + 1);
		g->uhead = t + 1;
	}
}

static void *reaper_main(void *arg)
{
	struct vc_gpufs *g = arg;
	unsigned k = 0;
	while (!atomic_load(&g->stop)) {
		nap(UNPIN_NS);
		pthread_mutex_lock(&g->revoke_mu);
		drain_unpins(g);
		if (g->rev_active) {
			pass_poll(g);
		} else if (++k >= REAPER_NS / UNPIN_NS) {
			k = 0;
			uint32_t sel[VC_GFS_BUCKETS / 32];
			if (atomic_load(&g->ncached) && pass_select(g, sel))
				(void)pass_start(g, sel);
		}
		pthread_mutex_unlock(&g->revoke_mu);
	}
	return NULL;
}

/* ---- the context ------------------------------------------------------------- */

void vc_gpufs_config_init(struct vc_gpufs_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->size = sizeof *cfg;
	cfg->version = VC_GPUFS_CONFIG_VERSION;
}

static bool pow2(uint32_t x)
{
	return x && !(x & (x - 1));
}

/* Zeroes device or mapped memory through the device (either backend). */
static int dev_zero(struct vc_gpufs *g, uint64_t dev_addr, size_t len)
{
	void *z = calloc(1, len);
	if (!z)
		return -ENOMEM;
	/* Both backends copy from any host memory (CUDA: unified addressing). */
	int r = g->dev->ops->memcpy_sync(g->dev, dev_addr, (uint64_t)(uintptr_t)z, len);
	free(z);
	return r;
}

/* Frees what create set up (threads stopped first). */
static void teardown(struct vc_gpufs *g)
{
	struct vc_device *d = g->dev;
#ifdef VC_HAVE_CUDA
	if (g->rev_stream) /* waits for a pass still running: it writes g->rev */
		vc_cuda_gfs_stream_free(g->dev, g->rev_stream);
#endif
	if (g->ring_mem)
		d->ops->host_free(d, g->ring_mem);
	if (g->rev)
		d->ops->host_free(d, g->rev);
	if (g->sig)
		d->ops->host_free(d, g->sig);
	if (g->hints)
		d->ops->host_free(d, g->hints);
	if (g->ctl_dev)
		d->ops->mem_free(d, g->ctl_dev);
	if (g->tab_dev)
		d->ops->mem_free(d, g->tab_dev);
	if (g->files_dev)
		d->ops->mem_free(d, g->files_dev);
	if (g->ack_dev)
		d->ops->mem_free(d, g->ack_dev);
	free((void *)g->held);
	free(g->svc);
	pthread_mutex_destroy(&g->mu);
	pthread_mutex_destroy(&g->revoke_mu);
	pthread_mutex_destroy(&g->admit_mu);
	for (int i = 0; i < VC_GFS_MAX_FILES; i++) {
		pthread_rwlock_destroy(&g->files[i].rw);
		pthread_mutex_destroy(&g->files[i].stmu);
	}
	free(g);
}

int vc_gpufs_create(vc_cache *c, const struct vc_gpufs_config *cfg, vc_gpufs **out)
{
	struct vc_gpufs_config d;
	vc_gpufs_config_init(&d);
	if (!c || !out)
		return vc_err(-EINVAL, "vc_gpufs_create: NULL argument");
	if (cfg) {
		/* Version 1 ends at timeout_ns: the rest keeps its defaults. */
		size_t n = cfg->version == 1 ? offsetof(struct vc_gpufs_config, flags)
		      : cfg->version == VC_GPUFS_CONFIG_VERSION ? sizeof d : 0;
		if (!n || cfg->size < n)
			return vc_err(-VC_ECONFIG, "vc_gpufs_create: config of size %u version %u",
				      cfg->size, cfg->version);
		memcpy(&d, cfg, n);
		d.size = sizeof d;
		d.version = VC_GPUFS_CONFIG_VERSION;
	}
	if (!d.ring_slots)
		d.ring_slots = 256;
	if (!d.table_entries)
		d.table_entries = 16384;
	if (!d.max_cached)
		d.max_cached = d.table_entries / 2;
	if (!d.service_threads)
		d.service_threads = 2;
	if (!d.timeout_ns)
		d.timeout_ns = 30ull * 1000000000u;
	if (!d.admit_every)
		d.admit_every = 8;
	if (!d.direct_max) {
		long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
		d.direct_max = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz / 2 : 0;
	}
	if (!pow2(d.ring_slots) || !pow2(d.table_entries) || d.ring_slots > 65536 ||
	    d.service_threads > 64 || !pow2(d.admit_every) ||
	    (d.flags & ~(VC_GPUFS_NO_DIRECT | VC_GPUFS_NO_ADMIT)))
		return vc_err(-EINVAL, "vc_gpufs_create: ring_slots, table_entries and admit_every "
				       "must be powers of two (ring at most 65536), at most 64 service "
				       "threads, flags VC_GPUFS_* only");
	int r = eng_gfs_check(c);
	if (r < 0)
		return r;
	struct vc_gpufs *g = calloc(1, sizeof *g);
	if (!g)
		return -ENOMEM;
	g->c = c;
	g->dev = eng_gfs_device(c);
	g->emu = strcmp(vc_device_name(c), "emu") == 0;
	g->nring = d.ring_slots;
	g->ntab = d.table_entries;
	g->max_cached = d.max_cached;
	g->no_direct = d.flags & VC_GPUFS_NO_DIRECT;
	g->direct_max = d.direct_max;
	g->npool = eng_gfs_npool(c);
	g->page_shift = (uint32_t)__builtin_ctz(vc_page_size(c));
	pthread_mutex_init(&g->mu, NULL);
	pthread_mutex_init(&g->revoke_mu, NULL);
	pthread_mutex_init(&g->admit_mu, NULL);
	for (int i = 0; i < VC_GFS_MAX_FILES; i++) {
		pthread_rwlock_init(&g->files[i].rw, NULL);
		pthread_mutex_init(&g->files[i].stmu, NULL);
	}
	g->held = calloc(g->npool ? g->npool : 1, sizeof *g->held);
	g->svc = calloc(d.service_threads, sizeof *g->svc);
	struct vc_device *dv = g->dev;
	uint64_t ring_dev = 0;
	size_t ring_bytes = 2 * (size_t)g->nring * sizeof(struct vc_gfs_req); /* ring, uring */
	size_t bytes = ring_bytes + (size_t)g->nring * VC_GFS_SLOT_DATA;
	r = g->held && g->svc ? 0 : -ENOMEM;
	if (r == 0)
		r = dv->ops->host_alloc(dv, bytes, &g->ring_mem, &ring_dev);
	if (r == 0)
		r = dv->ops->host_alloc(dv, (g->ntab + 2) * sizeof(uint32_t), (void **)&g->rev,
					&g->rev_dev);
	if (r == 0)
		r = dv->ops->host_alloc(dv, sizeof *g->sig, (void **)&g->sig, &g->sig_dev);
	uint64_t hints_dev = 0;
	g->nhint = HINT_SLOTS;
	if (r == 0)
		r = dv->ops->host_alloc(dv, g->nhint * sizeof *g->hints, (void **)&g->hints, &hints_dev);
	if (r == 0)
		r = dv->ops->mem_alloc(dv, (size_t)g->nring * sizeof(uint64_t), &g->ack_dev);
#ifdef VC_HAVE_CUDA
	if (r == 0 && !g->emu)
		r = vc_cuda_gfs_stream_new(dv, &g->rev_stream);
#endif
	if (r == 0)
		r = dv->ops->mem_alloc(dv, sizeof(struct vc_gfs_ctl), &g->ctl_dev);
	if (r == 0)
		r = dv->ops->mem_alloc(dv, (size_t)g->ntab * sizeof(struct vc_gfs_ent), &g->tab_dev);
	if (r == 0)
		r = dv->ops->mem_alloc(dv, VC_GFS_MAX_FILES * sizeof(struct vc_gfs_file), &g->files_dev);
	if (r == 0) {
		memset(g->ring_mem, 0, bytes);
		memset(g->rev, 0, (g->ntab + 2) * sizeof(uint32_t));
		memset(g->hints, 0, g->nhint * sizeof *g->hints);
		g->ring = g->ring_mem;
		g->uring = g->ring + g->nring;
		g->data = (unsigned char *)g->ring_mem + ring_bytes;
		r = dev_zero(g, g->ctl_dev, sizeof(struct vc_gfs_ctl));
	}
	if (r == 0)
		r = dev_zero(g, g->tab_dev, (size_t)g->ntab * sizeof(struct vc_gfs_ent));
	if (r == 0)
		r = dev_zero(g, g->files_dev, VC_GFS_MAX_FILES * sizeof(struct vc_gfs_file));
	if (r == 0)
		r = dev_zero(g, g->ack_dev, (size_t)g->nring * sizeof(uint64_t));
	if (r < 0) {
		teardown(g);
		return vc_err(r, "vc_gpufs_create: out of %s memory", r == -ENOMEM ? "host" : "device");
	}
	g->ctx = (struct vc_gfs_ctx){
		.ring = (struct vc_gfs_req *)(uintptr_t)ring_dev,
		.uring = (struct vc_gfs_req *)(uintptr_t)ring_dev + g->nring,
		.data = (unsigned char *)(uintptr_t)(ring_dev + ring_bytes),
		.ctl = (struct vc_gfs_ctl *)(uintptr_t)g->ctl_dev,
		.tab = (struct vc_gfs_ent *)(uintptr_t)g->tab_dev,
		.files = (struct vc_gfs_file *)(uintptr_t)g->files_dev,
		.rev = (uint32_t *)(uintptr_t)g->rev_dev,
		.ack = (uint64_t *)(uintptr_t)g->ack_dev,
		.ring_mask = g->nring - 1,
		.tab_mask = g->ntab - 1,
		.page_shift = g->page_shift,
		.admit_mask = (d.flags & VC_GPUFS_NO_ADMIT) ? ~0u : d.admit_every - 1,
		.timeout_ns = d.timeout_ns,
		.hints = (uint64_t *)(uintptr_t)hints_dev,
		.hint_mask = g->nhint - 1,
	};
	for (uint32_t i = 0; i < d.service_threads; i++) {
		if (pthread_create(&g->svc[i], NULL, svc_main, g) != 0)
			break;
		g->nsvc++;
	}
	g->reaper_on = g->nsvc && pthread_create(&g->reaper, NULL, reaper_main, g) == 0;
	if (!g->reaper_on) {
		atomic_store(&g->stop, true);
		for (uint32_t i = 0; i < g->nsvc; i++)
			pthread_join(g->svc[i], NULL);
		teardown(g);
		return vc_err(-EAGAIN, "vc_gpufs_create: cannot start threads");
	}
	/* From here until destroy the engine runs nothing on the SMs (its
	 * moves use the copy engines, cleaning defers): a user's kernel may
	 * hold every SM while it waits for the requests served here. */
	const char *q = getenv("VC_GPUFS_QUIET"); /* "off": for measuring and diagnosis */
	g->quiet = !(q && strcmp(q, "off") == 0);
	if (g->quiet)
		eng_gfs_quiet(c, true);
	*out = g;
	return 0;
}

int vc_gpufs_ctx(const vc_gpufs *g, struct vc_gfs_ctx *out)
{
	if (!g || !out)
		return vc_err(-EINVAL, "vc_gpufs_ctx: NULL argument");
	*out = g->ctx;
	return 0;
}

/* The device's ticket counter (device memory). */
static int read_tail(struct vc_gpufs *g, uint64_t *tail)
{
	struct vc_gfs_ctl ctl;
	int r = g->dev->ops->memcpy_sync(g->dev, (uint64_t)(uintptr_t)&ctl, g->ctl_dev, sizeof ctl);
	*tail = ctl.tail;
	return r;
}

int vc_gpufs_release(vc_gpufs *g)
{
	if (!g)
		return vc_err(-EINVAL, "vc_gpufs_release: NULL context");
	/* Requests published before the kernels ended are served first (a
	 * ticket claimed but never published, by a call that timed out, is
	 * left: the ring is reset below). */
	uint64_t tail;
	int r = read_tail(g, &tail);
	if (r < 0)
		return r;
	for (;;) {
		pthread_mutex_lock(&g->mu);
		uint64_t h = g->head;
		bool next = h < tail && ld64(&g->ring[h & (g->nring - 1)].seq) == h + 1;
		pthread_mutex_unlock(&g->mu);
		if (!next && atomic_load(&g->busy) == 0)
			break;
		nap(SVC_NAP_NS);
	}
	pthread_mutex_lock(&g->revoke_mu);
	drain_unpins(g);
	pass_settle(g);
	/* Every pin held for the device goes, whatever the table says. */
	pthread_mutex_lock(&g->mu);
	for (uint64_t id = 0; id < g->npool; id++) {
		uint32_t h = atomic_exchange(&g->held[id], 0);
		atomic_fetch_sub(&g->nheld, h);
		while (h--)
			eng_gfs_unpin(g->c, (uint32_t)id);
	}
	atomic_store(&g->ncached, 0);
	uint64_t dn = 0;
	r = g->dev->ops->memcpy_sync(g->dev, (uint64_t)(uintptr_t)&dn,
				     g->ctl_dev + offsetof(struct vc_gfs_ctl, direct), sizeof dn);
	g->direct_done += dn;
	if (r == 0)
		r = dev_zero(g, g->tab_dev, (size_t)g->ntab * sizeof(struct vc_gfs_ent));
	if (r == 0)
		r = dev_zero(g, g->ctl_dev, sizeof(struct vc_gfs_ctl));
	if (r == 0)
		r = dev_zero(g, g->ack_dev, (size_t)g->nring * sizeof(uint64_t));
	memset(g->ring, 0, 2 * (size_t)g->nring * sizeof *g->ring);
	g->head = 0;
	g->uhead = 0;
	pthread_mutex_unlock(&g->mu);
	pthread_mutex_unlock(&g->revoke_mu);
	return r;
}

int vc_gpufs_destroy(vc_gpufs *g)
{
	if (!g)
		return 0;
	int r = vc_gpufs_release(g);
	atomic_store(&g->stop, true);
	for (uint32_t i = 0; i < g->nsvc; i++)
		pthread_join(g->svc[i], NULL);
	pthread_join(g->reaper, NULL);
	for (int i = 0; i < VC_GFS_MAX_FILES; i++) {
		struct gfs_file *f = &g->files[i];
		if (!f->path)
			continue;
		gfs_direct_close(g, f);
		int e = vc_volume_close(f->v);
		if (r == 0)
			r = e;
		close(f->fd);
		free(f->path);
	}
	if (g->quiet)
		eng_gfs_quiet(g->c, false);
	teardown(g);
	return r;
}

int vc_gpufs_open(vc_gpufs *g, const char *path, int flags)
{
	if (!g || !path)
		return vc_err(-EINVAL, "vc_gpufs_open: NULL argument");
	struct gfs_file *f;
	int fd = file_open(g, path, flags, &f);
	if (fd < 0)
		return fd;
	/* Between kernels: the one place a registration cannot wait for a
	 * kernel that waits for this open. */
	pthread_rwlock_wrlock(&f->rw);
	int r = gfs_direct_open(g, f);
	pthread_rwlock_unlock(&f->rw);
	if (r < 0) {
		file_close(g, f);
		return r;
	}
	/* The device's entry, as a kernel's vc_gopen writes it, so that kernels
	 * may be handed the fd instead of opening the file themselves. */
	pthread_rwlock_rdlock(&f->rw);
	struct vc_gfs_file e = { .base = eng_gfs_base(f->v), .size = vc_volume_size(f->v),
				 .version = f->version, .flags = f->flags | VC_GFS_FD_OPEN,
				 .direct = f->dmap, .dlen = f->dlen, .res = f->res_dev };
	pthread_rwlock_unlock(&f->rw);
	r = g->dev->ops->memcpy_sync(g->dev, g->files_dev + (uint64_t)fd * sizeof e,
				     (uint64_t)(uintptr_t)&e, sizeof e);
	if (r < 0) {
		file_close(g, f);
		return r;
	}
	return fd;
}

int vc_gpufs_close(vc_gpufs *g, int fd)
{
	struct gfs_file *f = g && fd >= 0 ? file_of(g, (uint32_t)fd) : NULL;
	if (!f)
		return vc_err(-EBADF, "vc_gpufs_close: fd %d is not open", fd);
	int r = file_close(g, f);
	return r < 0 ? r : 0;
}

vc_volume *vc_gpufs_volume(vc_gpufs *g, int fd)
{
	struct gfs_file *f = g && fd >= 0 ? file_of(g, (uint32_t)fd) : NULL;
	return f ? f->v : NULL;
}

int vc_gpufs_stats(vc_gpufs *g, struct vc_gpufs_stats *st)
{
	if (!g || !st)
		return vc_err(-EINVAL, "vc_gpufs_stats: NULL argument");
	*st = (struct vc_gpufs_stats){
		.requests = atomic_load(&g->st.requests),
		.batches = atomic_load(&g->st.batches),
		.gets = atomic_load(&g->st.gets),
		.get_cached = atomic_load(&g->st.get_cached),
		.revokes = atomic_load(&g->st.revokes),
		.revoked = atomic_load(&g->st.revoked),
		.writes = atomic_load(&g->st.writes),
		.opens = atomic_load(&g->st.opens),
		.held = atomic_load(&g->nheld),
		.rev_fallbacks = atomic_load(&g->st.rev_fallbacks),
		.miss_rounds = atomic_load(&g->st.miss_rounds),
		.miss_pages = atomic_load(&g->st.miss_pages),
		.reopen_drops = atomic_load(&g->st.reopen_drops),
		.syncs = atomic_load(&g->st.syncs),
		.direct_files = atomic_load(&g->st.direct_files),
		.admitted = atomic_load(&g->st.admitted),
	};
	/* The device's count (a copy that waits for the legacy stream's
	 * kernels: call it between kernels for an exact figure). */
	uint64_t dn = 0;
	int r = g->dev->ops->memcpy_sync(g->dev, (uint64_t)(uintptr_t)&dn,
					 g->ctl_dev + offsetof(struct vc_gfs_ctl, direct), sizeof dn);
	if (r < 0)
		return r;
	st->direct_reads = g->direct_done + dn;
	uint64_t t0 = atomic_load(&g->st.pass_t0), t = now_ns();
	st->pass_age_ns = t0 && t > t0 ? t - t0 : 0;
	return 0;
}
