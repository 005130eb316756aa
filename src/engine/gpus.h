/* The GPU tier's parts (vc_config.gpus; docs/MULTIGPU.md): what each part
 * holds, what the parts share, and the prototypes of the files that place
 * pages on parts (place.c) and handle a part that fails or pages that move
 * between parts (multigpu.c). The rest of the engine (engine.h, which
 * includes this) sees a part as c->gpus[k] and a page's part as p->gpu;
 * the lock rules are engine.h's. */
#ifndef VC_ENGINE_GPUS_H
#define VC_ENGINE_GPUS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tier/logstore.h"
#include "vramcache.h"

struct vc_batcher;
struct vc_cache;
struct vc_device;
struct vc_gmac;
struct vc_page;
struct vc_secret;
struct vc_tiermem;
struct vc_xts_key;
struct eng_seal;

/* One part of the GPU tier (vc_config.gpus; docs/MULTIGPU.md): a device's
 * share, with its own log, cleaner, move queues and streams, staging and
 * counters. c->gpus[0 .. c->ngpus) in the order the configuration names
 * them; a page in the GPU tier is in part p->gpu. Fields are under c->mu
 * unless said. */
struct vc_gpu {
	struct vc_device *dev;     /* part 0's also allocates the host tier's pinned memory */
	struct vc_batcher *bat;    /* page moves: the device queue (thread safe) */
	struct vc_ls *ls;          /* the part's log; NULL when the GPU tier is disabled */
	uint32_t idx;              /* its place in c->gpus */
	/* The part failed (a device error: eng_gpu_fail): no more pages go
	 * there, and its pages leave the tier as they are found (atomic:
	 * lock-free readers test it after pinning). */
	_Atomic bool off;
	bool reclaiming;           /* a thread is releasing early */
	/* Placement weight (vc_gpu_set_weight): its share of new pages; 0
	 * takes none. Read by placement under c->mu or with a pinned page's
	 * tier known (never torn: written under c->mu, read as a whole). */
	double weight;
	/* Quiet mode (eng_gfs_quiet; atomic, read without c->mu): while
	 * nonzero the engine runs nothing on the device's SMs: cleaning
	 * defers to tail eviction, a shrink evicts instead of moving, and
	 * moves use the copy engines (vc_batcher_set_dma). A count: GPUfs
	 * contexts each hold one for their life. */
	_Atomic uint32_t quiet;
	uint64_t clock;            /* demotion stamps: the part's LRU order */
	uint64_t gc_ns;            /* in cleaning steps under c->mu, attempts included */
	struct vc_page **gc_held;  /* pages a cleaning step claimed: gc_segments x per segment */
	struct vc_tiermem *stage_wb;   /* see WB_STAGING_PAGES */
	struct vc_tiermem *stage_bulk; /* flush, GPU prefetch, moves between parts;
					batch_pages pages a prefetch worker, within
					STAGE_BULK_BYTES (api.c) */
	/* Parts whose memory this part's moves reach (P2P, or one device):
	 * bit j for part j; set at open (vc_device_peer_enable). */
	uint32_t peers;
	/* Its figures (vc_get_gpu_stats): under c->mu but for the atomics,
	 * which lock-free paths add to. */
	_Atomic uint64_t n_h2d, n_d2h; /* pages moved host -> part, part -> host */
	uint64_t n_hits, n_evicted, n_peer_in, n_peer_out, n_peer_direct;
	/* Shrinking and growing (gpusize.c): one at a time, under resize_mu
	 * (taken before c->mu); the counters are atomics. */
	pthread_mutex_t resize_mu;
	struct {
		_Atomic uint64_t chunks_released, chunks_regained, bytes_released;
		_Atomic uint64_t bytes_released_req, pages_moved, shrinks;
		_Atomic uint64_t shrink_ns_total, shrink_ns_max, shrink_ns_last, drop_ns_total;
	} rs;
	/* The last shrink's dropper thread (its pages' entries), joined by
	 * the next shrink or grow and by close; under resize_mu. */
	pthread_t dropper;
	void *dropper_job;
	bool profile; /* VC_GPU_SHRINK_PROFILE: phases to stderr; set at open */
};

/* What the GPU tier's parts share: settings, the read bounce pages, the
 * cipher and the integrity mode (set at open unless said). */
struct eng_gtier {
	int gc_policy;
	uint32_t gc_segments;
	double gc_frag;
	bool serve;                /* GPU-tier reads served in place (VC_GPU_HITS_SERVE) */
	struct vc_tiermem *bounce; /* bounce_threads x bounce_per pinned pages (portable) */
	uint32_t bounce_per, bounce_threads;
	/* Dirty pages are written back as they go down (VC_GPU_DIRTY_CLEAN):
	 * no GPU page is ever dirty, so a failed part loses nothing. */
	bool clean_down;
	/* Encryption of the GPU tier (vc_config.encrypt): the key in locked
	 * host memory (base/secret.h) for the cache's life, xkey pointing
	 * into it; cipher when on. One key for every part: ciphertext is
	 * bound to its page (the tweak), not to a slot or a device, so it
	 * moves between parts as it is. */
	bool cipher;
	uint32_t units_per_page; /* cipher data units per page (tweak stride) */
	struct vc_secret *key;
	const struct vc_xts_key *xkey;
	/* The integrity mode (VC_ENCRYPT_XTS_GMAC; seal.c): a MAC key of its
	 * own (random per open, locked), and a seal per page id. */
	struct vc_secret *mac_key;
	struct vc_gmac *mac;     /* NULL: integrity off */
	struct eng_seal *seals;  /* [pool entries] */
	_Atomic uint64_t nonce;  /* the last nonce given out */
	_Atomic uint64_t integ_failures, integ_drops, integ_dirty_lost;
	/* Parts lost, dirty pages they took (under c->mu). */
	uint64_t failed, dirty_lost;
};

/* Part g takes pages: it exists, its device works, some of it is mapped
 * (a shrink may have given every chunk back) and its weight is not 0. */
static inline bool eng_part_usable(const struct vc_gpu *g)
{
	return g->ls && !atomic_load_explicit(&g->off, memory_order_relaxed) && g->weight > 0 &&
	       vc_ls_capacity(g->ls) > 0;
}

/* --- place.c: which part a page goes to --- */
/* Pages of one placement chunk (64 KiB of them, at least one) go to the
 * same part: a 128 KiB read meets at most three parts. */
#define PLACE_CHUNK_BYTES (64u << 10)
/* Under c->mu (or with the weights stable): the part page pno goes to,
 * by weighted rendezvous hashing of its chunk over the usable parts, or
 * -1 when none is. O(parts). Stable: a part's weight or loss moves only
 * the chunks whose best score was, or becomes, that part's. */
int eng_home(const struct vc_cache *c, uint64_t pno);
/* The same over an explicit weight list (tests and the simulator):
 * w[i] <= 0 excludes part i. */
int eng_place(uint64_t chunk, const double *w, uint32_t n);
/* Parses vc_config.gpus ("all" or "ORD[:WEIGHT],..."; NULL: one part on
 * `ordinal`) for device kind `kind`: *n parts, ord[i] and w[i]. 0, or
 * -VC_ECONFIG with a message naming what is wrong. */
int eng_gpus_parse(const char *spec, int kind, int ordinal, uint32_t *n, int *ord, double *w);

/* --- multigpu.c: failures, moves between parts --- */
/* Under c->mu: part g failed with device error err (a move, cleaning or
 * copy on it returned -VC_EDEVICE). From now on it takes no pages, and
 * every page it holds leaves the tier: those nobody holds are dropped
 * now (clean ones are read again from the store; dirty ones, possible
 * only with VC_GPU_DIRTY_KEEP, are lost and counted), the others by
 * whoever finds them next unheld (eng_gpu_lost). Idempotent. O(its live
 * pages), in DROP_CHUNK pieces with pauses of the lock. */
void eng_gpu_fail(struct vc_cache *c, struct vc_gpu *g, int err);
/* Unlocked form: takes c->mu. Returns err, for tail calls. */
int eng_gpu_fail_unlocked(struct vc_cache *c, struct vc_gpu *g, int err);
/* A public call's part argument: 0, or -EINVAL with a message (NULL
 * cache, no GPU tier, no part `gpu`). */
int eng_part_arg(struct vc_cache *c, unsigned gpu, const char *what);
/* Whether err is a device's failure (not a store's, nor a full tier). */
static inline bool eng_dev_err(int err)
{
	return err == -VC_EDEVICE;
}
/* Under c->mu: p, claimed (BUSY) by the caller, is in a failed part: it
 * leaves the tier (dirty: lost and counted). */
void eng_gpu_lost(struct vc_cache *c, struct vc_page *p);

#endif
