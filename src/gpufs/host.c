/* GPUfs's host half: the context and the service threads (gpufs.h has the
 * lock rules, docs/GPUFS.md the design; files.c holds the file table,
 * revoke.c the reaper).
 *
 * Service threads take every published request at the ring's head in one
 * claim (opportunistic batching, GPUfs'16 §4.3.1: nothing waits for a batch
 * to fill) and serve them from the engine. Each grant (GET) is an engine
 * pin held for the device, counted in held[id], so that release can drop
 * every pin whatever the device did; the reaper (revoke.c) drops the pins
 * the device hands back or that revoke passes take from it.
 *
 * Nothing here, in files.c or in revoke.c runs a kernel or makes a CUDA
 * call that waits for one while users' kernels may run: the engine is in
 * quiet mode for the context's life (eng_gfs_quiet: moves by copy engine,
 * no cleaning jobs), revoke passes are asked for by copy engine, and
 * everything the service path uses is allocated at create. (memcpy_sync,
 * which waits for the legacy stream's kernels, is used only by create,
 * release and vc_gpufs_open, which run between kernels.)
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
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
/* Hint ring slots (direct.c's admissions): 512 KiB of mapped memory; a
 * hint that waits longer than this many others is lost. */
#define HINT_SLOTS 65536

/* ---- serving requests -------------------------------------------------------- */

static void answer(struct vc_gfs_req *s, uint64_t t, int64_t result)
{
	s->result = result;
	gfs_st64(&s->done, t + 1);
}

static void serve_one(struct vc_gpufs *g, uint64_t t)
{
	struct vc_gfs_req *s = &g->ring[t & (g->nring - 1)];
	unsigned char *data = g->data + (t & (g->nring - 1)) * (uint64_t)VC_GFS_SLOT_DATA;
	struct gfs_file *f = NULL;
	int64_t r = 0;
	atomic_fetch_add_explicit(&g->st.requests, 1, memory_order_relaxed);
	if (s->op != VC_GFS_OP_OPEN && s->op != VC_GFS_OP_NOP &&
	    !(f = gfs_file_of(g, s->fd))) {
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
		r = gfs_file_open(g, path, (int)s->flags, &f);
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
		/* No re-stat: the engine counts the write (files.c's file_changed). */
		pthread_rwlock_rdlock(&f->rw);
		r = vc_volume_write(f->v, data, s->len, s->off);
		pthread_rwlock_unlock(&f->rw);
		break;
	case VC_GFS_OP_FSYNC:
		pthread_rwlock_rdlock(&f->rw);
		r = gfs_file_sync(g, f);
		pthread_rwlock_unlock(&f->rw);
		break;
	case VC_GFS_OP_CLOSE:
		r = gfs_file_close(g, f);
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
		gfs_file_restat(f);
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
		if (s->op == VC_GFS_OP_GET && !(s->flags & VC_GFS_F_MAP) && gfs_file_of(g, s->fd))
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
		       gfs_ld64(&g->ring[(h + n) & (g->nring - 1)].seq) == h + n + 1)
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
				gfs_nap(SVC_NAP_NS);
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
	g->reaper_on = g->nsvc && pthread_create(&g->reaper, NULL, gfs_reaper_main, g) == 0;
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

/* One 8-byte control word that only user kernels write (ctl.tail,
 * ctl.direct; device memory), not the reaper's pass words: a copy that
 * waits for the legacy stream's kernels, so exact between kernels. */
static int read_ctl_u64(struct vc_gpufs *g, size_t off, uint64_t *v)
{
	return g->dev->ops->memcpy_sync(g->dev, (uint64_t)(uintptr_t)v, g->ctl_dev + off, sizeof *v);
}

int vc_gpufs_release(vc_gpufs *g)
{
	if (!g)
		return vc_err(-EINVAL, "vc_gpufs_release: NULL context");
	/* Requests published before the kernels ended are served first (a
	 * ticket claimed but never published, by a call that timed out, is
	 * left: the ring is reset below). */
	uint64_t tail, direct; /* the kernels ended: both are final */
	int r = read_ctl_u64(g, offsetof(struct vc_gfs_ctl, tail), &tail);
	if (r == 0)
		r = read_ctl_u64(g, offsetof(struct vc_gfs_ctl, direct), &direct);
	if (r < 0)
		return r;
	for (;;) {
		pthread_mutex_lock(&g->mu);
		uint64_t h = g->head;
		bool next = h < tail && gfs_ld64(&g->ring[h & (g->nring - 1)].seq) == h + 1;
		pthread_mutex_unlock(&g->mu);
		if (!next && atomic_load(&g->busy) == 0)
			break;
		gfs_nap(SVC_NAP_NS);
	}
	pthread_mutex_lock(&g->revoke_mu);
	gfs_drain_unpins(g);
	gfs_pass_settle(g);
	/* Every pin held for the device goes, whatever the table says. */
	pthread_mutex_lock(&g->mu);
	for (uint64_t id = 0; id < g->npool; id++) {
		uint32_t h = atomic_exchange(&g->held[id], 0);
		atomic_fetch_sub(&g->nheld, h);
		while (h--)
			eng_gfs_unpin(g->c, (uint32_t)id);
	}
	atomic_store(&g->ncached, 0);
	g->direct_done += direct;
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
	int fd = gfs_file_open(g, path, flags, &f);
	if (fd < 0)
		return fd;
	/* Between kernels: the one place a registration cannot wait for a
	 * kernel that waits for this open. */
	pthread_rwlock_wrlock(&f->rw);
	int r = gfs_direct_open(g, f);
	pthread_rwlock_unlock(&f->rw);
	if (r < 0) {
		gfs_file_close(g, f);
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
		gfs_file_close(g, f);
		return r;
	}
	return fd;
}

int vc_gpufs_close(vc_gpufs *g, int fd)
{
	struct gfs_file *f = g && fd >= 0 ? gfs_file_of(g, (uint32_t)fd) : NULL;
	if (!f)
		return vc_err(-EBADF, "vc_gpufs_close: fd %d is not open", fd);
	int r = gfs_file_close(g, f);
	return r < 0 ? r : 0;
}

vc_volume *vc_gpufs_volume(vc_gpufs *g, int fd)
{
	struct gfs_file *f = g && fd >= 0 ? gfs_file_of(g, (uint32_t)fd) : NULL;
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
	/* The device's count (call it between kernels for an exact figure). */
	uint64_t direct;
	int r = read_ctl_u64(g, offsetof(struct vc_gfs_ctl, direct), &direct);
	if (r < 0)
		return r;
	st->direct_reads = g->direct_done + direct;
	uint64_t t0 = atomic_load(&g->st.pass_t0), t = vc_now_ns();
	st->pass_age_ns = t0 && t > t0 ? t - t0 : 0;
	return 0;
}
