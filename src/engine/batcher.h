/* Batched page moves between tiers (GRAM's batched miss handling).
 *
 * Two paths behind one interface. Where the device has device queues
 * (device/queue.h), moves go there: each add is one submission that the
 * device's server takes up at once (on the caller's home ring, or, past
 * a server round's 32 pieces, in shares over consecutive rings), and a
 * wait waits for those moves alone; nothing below about open batches
 * applies. With a key, an add of 512 pages or more goes to launched
 * batches submitted at once (batcher.c, dq_add_n: the rings' 16 SMs are
 * too few for a large add's AES; VC_DQ_LAUNCH_MIN and VC_DQ_LAUNCH_QPCT,
 * a share for the rings, change it, for measuring). VC_MOVE_PATH=batch
 * selects launched batches instead, VC_MOVE_PATH=dma the copy-engine mode
 * (vc_batcher_set_dma) for the cache's life (for measuring). Launched batches:
 *
 * Threads add page moves and then wait for them. Moves gather in an open
 * batch, which is submitted to the device when
 *   - it holds max_pages moves (size threshold), or
 *   - someone waits on it and the device is idle (no batch in flight): a
 *     lone request never waits for the timeout, or
 *   - someone waits on it and timeout_us has passed since it opened, or
 *   - the batch in flight completes and this one has waiters.
 * While a batch is in flight the next one fills, so under load batches grow
 * toward max_pages and the per-launch cost is amortised over them.
 *
 * Contract: a thread that adds waits for its tickets before it relies on
 * the data (a batch left open runs only when someone waits, at its
 * timeout, or at destroy). Moves in flight at the same time must not touch
 * the same page (the engine guarantees it by marking pages busy). Adders
 * never deadlock on each other, whatever they hold unwaited.
 */
#ifndef VC_BATCHER_H
#define VC_BATCHER_H

#include <stdbool.h>
#include <stdint.h>

#include "device/device.h"
#include "vramcache.h"

struct vc_batcher;

/* A move's ticket: a launched batch's (slot, generation) and the move's
 * index in the batch in seq, or, on the device-queue path,
 * VC_TICKET_QUEUE | ring and the move's last piece's ticket in seq. */
#define VC_TICKET_QUEUE 0x80000000u
struct vc_ticket {
	uint32_t slot;
	uint32_t gen;
	uint64_t seq;
};

struct vc_batcher_stats {
	uint64_t batches, pages;
	uint64_t hist[VC_BATCH_HIST]; /* batch sizes: [1], [2,3], [4,7], ... */
	uint64_t wait_ns;            /* summed over waiting threads */
};

/* key: for moves with a cipher flag (device.h), or NULL; the caller's,
 * unchanged until vc_batcher_destroy. */
int vc_batcher_create(struct vc_device *dev, uint32_t page_size, uint32_t max_pages,
		      uint32_t timeout_us, const struct vc_xts_key *key, struct vc_batcher **out);
/* "queue" or "batch": the path in use. */
const char *vc_batcher_path(const struct vc_batcher *b);
/* Copy-engine mode, on or off (calls nest: on while more ons than offs):
 * while on, moves without a cipher or fingerprint flag go out as launched
 * batches whose backend uses copy engines only (vc_dbatch.dma): no
 * device-queue server, no kernel, so they progress while other programs'
 * kernels hold every SM (GPUfs sets it for its context's life). Moves
 * with flags keep their usual path. Thread safe; moves already added
 * keep the path they took. */
void vc_batcher_set_dma(struct vc_batcher *b, bool on);
/* Waits for batches in flight, then frees. */
void vc_batcher_destroy(struct vc_batcher *b);

int vc_batcher_add(struct vc_batcher *b, const struct vc_move *m, struct vc_ticket *t);
/* Blocks until the move is done; returns the batch's status (0 or -VC_EDEVICE). */
int vc_batcher_wait(struct vc_batcher *b, const struct vc_ticket *t);
/* The same for n moves, taking the lock once: O(n) copying, one wait per
 * batch the tickets span. */
int vc_batcher_add_n(struct vc_batcher *b, const struct vc_move *m, uint32_t n,
		     struct vc_ticket *t);
/* The same on the caller's home ring plus `ring` (queue path), so that one
 * caller's moves can run on two servers' rounds at once; the batch path
 * ignores it. */
int vc_batcher_add_n_on(struct vc_batcher *b, uint32_t ring, const struct vc_move *m, uint32_t n,
			struct vc_ticket *t);
int vc_batcher_wait_n(struct vc_batcher *b, const struct vc_ticket *t, uint32_t n);
/* Whether the n moves are done, without waiting (queue path: one load per
 * lane their tickets touch). `ask`: if not, also ask the device whether it
 * failed (a driver call: pollers ask now and then, not on every poll); a
 * failed device counts as done with its error. On the launched-batch path
 * it waits, as vc_batcher_wait_n, and returns true, and so it does on
 * the queue path for a hybrid add's launched tickets. *err gets the
 * status once done. */
bool vc_batcher_poll_n(struct vc_batcher *b, const struct vc_ticket *t, uint32_t n, bool ask,
		       int *err);

/* After the n moves completed (a wait or poll returned 0 for them): the
 * fingerprint each move with VC_MOVE_FP computed (device.h), in out[i],
 * with ok[i] true; ok[i] false where it can no longer be read (its ring
 * slot or batch was reused since: the caller computes it itself). For
 * moves without the flag out[i] is meaningless. O(n); the batch path takes
 * b->mu once. */
struct vc_fp_digest;
void vc_batcher_fp_n(struct vc_batcher *b, const struct vc_ticket *t, uint32_t n,
		     struct vc_fp_digest *out, bool *ok);

void vc_batcher_get_stats(struct vc_batcher *b, struct vc_batcher_stats *st);

#endif
