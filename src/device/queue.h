/* Device queues: page moves that the device consumes continuously.
 *
 * A launched batch (device.h's vc_dbatch) pays a kernel launch, a grid's
 * ramp-up and a completion signal per batch: about 10 us, so callers that
 * each move one page wait for each other to fill a batch, or pay 10 us
 * apiece. A device queue instead keeps consumers running on the device,
 * which read move descriptors from rings in mapped pinned host memory as
 * producers publish them, and write a completion word per descriptor back
 * to host memory. A lone move then costs a PCIe round trip or two, and
 * many producers share the device without meeting anywhere but their ring.
 *
 *   cuda  a persistent server kernel: one block per ring, one warp per lane
 *         (device/cuda/kernels/server.cu); it runs while moves flow and is
 *         stopped after idle_us without any, so it holds its SMs only
 *         while there is I/O
 *   emu   worker threads, one per ring lane
 *
 * Rings. Ring r has `depth` descriptor slots (a power of two) and a
 * completion word per slot. A producer claims tickets with one atomic add
 * on the ring's tail, waits until each ticket's slot is free (its last use,
 * ticket - depth, completed), writes the descriptor and then makes sure
 * the consumers run. Ticket t goes to slot t % depth and lane t % lanes;
 * a lane takes its tickets in order, lanes run independently, so ticket t
 * completing says nothing of t - 1 unless both are one lane's.
 *
 * Descriptor publication is tagged, not ordered: each of a descriptor's
 * four words carries the tag of its use, (t / depth + 1) mod 2^16, in
 * bits 48..63 (addresses are below 2^48), so a consumer that reads the
 * four words in one PCIe request knows they are one publication, whatever
 * order they reached memory in. A host consumer (emu) reads the op word
 * first with acquire, which the producer stores last with release.
 *
 * Completion: done[t % depth] = t + 1, stored after the data with a
 * system-scope fence (cuda) or release (emu); monotonic, so a slot's later
 * use never hides an earlier completion.
 *
 * Fingerprints: a move with VC_MOVE_FP (device.h) writes its digest to
 * fp[t % depth] of its ring before its completion word, so a waiter that
 * saw done[t] reads it with vc_dq_fp. The slot is free for ticket t +
 * depth as soon as t completes, so a reader that comes late may find it
 * rewritten: vc_dq_fp reads the digest, then the descriptor's op word, and
 * reports the digest only if the descriptor still carries t's tag (a
 * later move rewrites its descriptor before the consumer writes its
 * digest). The caller computes the digest itself otherwise.
 *
 * Costs: submit is one atomic add per call plus four 8-byte stores per
 * 4 KiB piece; completion checks read one word per lane touched; the
 * consumers' polling is O(lanes) PCIe reads per microsecond while they run.
 * Moves in flight must not touch the same bytes (the engine marks pages
 * busy), as with batches.
 */
#ifndef VC_DEVICE_QUEUE_H
#define VC_DEVICE_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "device/device.h"
#include "device/queue_abi.h"

/* One slot: 32 bytes (one sector), in mapped pinned host memory
 * (queue_abi.h has the layout). */
struct vc_dq_desc {
	_Atomic uint64_t src;   /* address | tag << 48 */
	_Atomic uint64_t dst;   /* address | tag << 48 */
	_Atomic uint64_t op;    /* op word | tweak >> 48 << 8 | tag << 48 */
	_Atomic uint64_t tweak; /* tweak & 2^48 - 1 | tag << 48 */
};

_Static_assert(sizeof(struct vc_dq_desc) == VC_DQ_DESC_WORDS * 8, "descriptor layout");

static inline uint64_t vc_dq_tag(uint64_t ticket, unsigned depth_shift)
{
	return ((ticket >> depth_shift) + 1) & 0xffff;
}

/* The piece's tweak from its op and tweak words (tags included). */
static inline uint64_t vc_dq_desc_tweak(uint64_t op, uint64_t tweak)
{
	return ((op >> VC_DQ_OP_BITS) & 0xffff) << VC_DQ_ADDR_BITS | (tweak & VC_DQ_ADDR_MASK);
}

/* A move's fingerprint (struct vc_fp_digest's 16 bytes as two words),
 * 16-byte aligned: the CUDA server stores it as one uint4. */
struct vc_dq_fp {
	_Atomic uint64_t w[2];
} __attribute__((aligned(16)));

struct vc_dq_ring {
	_Atomic uint64_t tail; /* next ticket to claim */
	_Atomic uint64_t submits, pieces; /* statistics */
	char _line[40];        /* producers' line: keep it to themselves */
	struct vc_dq_desc *desc;  /* host view */
	_Atomic uint64_t *done;   /* host view */
	struct vc_dq_fp *fp;      /* host view: [depth] */
	uint64_t desc_dev, done_dev, fp_dev; /* device-visible addresses */
	void *priv;               /* backend state of this ring */
};

/* What a submission claimed: tickets [first, first + n) of one ring. */
struct vc_dq_span {
	uint32_t ring;
	uint32_t n;
	uint64_t first;
};

struct vc_dq;

/* The consumer side, supplied by the backend (device ops' dq_init). */
struct vc_dq_ops {
	/* Once the rings exist (end of vc_dq_create); may be NULL. */
	int (*ready)(struct vc_dq *q);
	/* Under q->mu: consumers run, each lane from q->pos. NULL when the
	 * consumers always run (then `running` is always true). */
	int (*start)(struct vc_dq *q);
	/* Under q->mu: consumers exit after their current piece and save
	 * their next tickets in q->pos. Returns the device's status. */
	int (*stop)(struct vc_dq *q);
	/* 0, or the device's sticky error (moves will not complete). */
	int (*health)(struct vc_dq *q);
	/* After a producer published on ring r; may be NULL. */
	void (*notify)(struct vc_dq *q, uint32_t r);
	/* Waits a bounded while for ticket t of ring r (the caller spun
	 * first and checks again after); NULL: the caller yields. */
	void (*block)(struct vc_dq *q, uint32_t r, uint64_t t);
	void (*fini)(struct vc_dq *q);
};

struct vc_dq_config {
	uint32_t page_size; /* power of two, 512 B .. 2 MiB */
	/* For cipher moves (device.h), or NULL; the caller's, unchanged
	 * until vc_dq_destroy. Backends copy it only into what a launch
	 * takes (the server's parameters) and wipe their copies. */
	const struct vc_xts_key *key;
	uint32_t nrings;    /* 0: the backend's default */
	uint32_t depth;     /* slots per ring, a power of two; 0: 4096 */
	uint32_t idle_us;   /* stop consumers after this long without moves; 0: VC_DQ_IDLE_US */
};

/* 10 ms: a server restart costs about 40 us (measured on an H100), so
 * callers that pause for less than this keep the warm latency (5 us);
 * while idle the server costs its SMs and one 32-byte PCIe read per ring
 * every microsecond or two. */
#define VC_DQ_IDLE_US 10000

struct vc_dq {
	const struct vc_dq_ops *ops;
	struct vc_device *dev;
	uint32_t page_size, piece, pieces_per_page;
	uint32_t nrings, lanes, depth;
	const struct vc_xts_key *key; /* vc_dq_config's */
	unsigned dshift;
	uint64_t idle_ns;
	uint64_t spin_ns; /* waiters spin this long before the backend's waits */
	struct vc_dq_ring rings[VC_DQ_MAX_RINGS];
	/* Mapped: pos[r * lanes + l] is lane l of ring r's next ticket while
	 * the consumers are stopped; stop asks them to exit. */
	uint64_t *pos, pos_dev;
	volatile uint32_t *stopw;
	uint64_t stop_dev;
	void *mem; /* one host_alloc holding all of the above */

	pthread_mutex_t mu; /* start, stop, pause; lock order: before none */
	pthread_cond_t cv;  /* the idler's */
	_Atomic bool running;
	int paused;         /* under mu: no start while > 0 */
	bool closing;       /* under mu */
	bool has_idler;
	pthread_t idler;
	_Atomic uint64_t stops, starts; /* statistics */
	void *priv; /* backend state */
};

/* Creates a queue on d (d->ops->dq_init supplies the consumers). */
int vc_dq_create(struct vc_device *d, const struct vc_dq_config *cfg, struct vc_dq **out);
/* Waits for everything submitted, stops the consumers, frees. */
void vc_dq_destroy(struct vc_dq *q);

/* The ring this thread submits to by default: threads are spread over the
 * rings round robin, once each. */
uint32_t vc_dq_home(const struct vc_dq *q);

/* Checks n moves as vc_dq_submit does (the address, op word and
 * fingerprint rules below), without submitting: 0 or -EINVAL. O(n). */
int vc_dq_check(const struct vc_dq *q, const struct vc_move *m, uint32_t n);
/* Submits n page moves on ring r (pages of q->page_size; each becomes
 * pieces_per_page descriptors). Waits for free slots as needed, never for
 * its own moves. *sp names the claimed tickets. 0, or -EINVAL for a bad
 * ring, an address past 2^48, a bad op word (vc_move_check), or
 * VC_MOVE_FP on pages of more than one piece; or the device's error
 * (health) when it failed while this call waited for a slot. */
int vc_dq_submit(struct vc_dq *q, uint32_t r, const struct vc_move *m, uint32_t n,
		 struct vc_dq_span *sp);
/* Whether every piece of the span has completed: one load per lane the
 * span touches (at most q->lanes). */
bool vc_dq_done(const struct vc_dq *q, const struct vc_dq_span *sp);
/* After ticket t of ring r completed (vc_dq_done or vc_dq_wait said so):
 * the fingerprint its move computed (VC_MOVE_FP) into *out, true; false
 * when the slot has been reused since (see the top). Two loads and a
 * copy. */
struct vc_fp_digest;
bool vc_dq_fp(const struct vc_dq *q, uint32_t r, uint64_t t, struct vc_fp_digest *out);
/* Waits for the span: spins, then the backend's bounded waits, checking
 * the device's health between them. 0 or the device's error. */
int vc_dq_wait(struct vc_dq *q, const struct vc_dq_span *sp);

/* Stops the consumers and keeps them stopped until vc_dq_resume, for
 * calls that may wait for all device work (freeing memory). Nests. */
void vc_dq_pause(struct vc_dq *q);
void vc_dq_resume(struct vc_dq *q);

struct vc_dq_stats {
	uint64_t submits, pieces, starts, stops;
};
void vc_dq_get_stats(const struct vc_dq *q, struct vc_dq_stats *st);

#endif
