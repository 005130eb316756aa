/* Dirty set: an ordered set of page numbers, one per volume.
 *
 * The engine calls vc_dset_add when a page of the volume becomes dirty and
 * vc_dset_del when its write-back completes, so the lock below is taken
 * once per dirtying and once per cleaning, never per write to a page that
 * is already dirty. Flush walks the set with vc_dset_collect (O(dirty
 * pages), not O(cache)), and extent queries ("is any page of [p0, p1]
 * dirty?") are one vc_dset_next.
 *
 * Keys: page numbers below VC_DSET_LIMIT (2^48, the engine's page-number
 * width, as in vc_ikey). A 64-ary radix tree whose height grows with the
 * largest member: at most 7 levels of nodes over 64-bit leaf words, so
 * "depth" below is at most 7; a set whose members are all below 2^(6+6h)
 * has depth h (2^24 pages, 64 GiB of 4 KiB pages: depth 3; 2^30: depth 4).
 *
 * Lock: each set has one pthread mutex; every call except count and bytes
 * takes it, for the time stated with the call. count and bytes read atomics
 * and take no lock.
 *
 * Memory: VC_DSET_NODE_BYTES per node; a dense run costs one node per 4096
 * pages (about one bit per page), a lone member at most one node per level.
 * Empty nodes are freed, so an emptied set holds 0 bytes of nodes.
 */
#ifndef VC_DIRTYSET_H
#define VC_DIRTYSET_H

#include <stdbool.h>
#include <stdint.h>

/* Members are page numbers below this. */
#define VC_DSET_LIMIT (1ull << 48)
/* Levels of nodes at most: ceil((48 - 6) / 6), over the leaf words. */
#define VC_DSET_MAX_DEPTH 7
/* One node: a 64-bit summary mask and 64 child pointers or leaf words. */
#define VC_DSET_NODE_BYTES 520

struct vc_dset;

/* An empty set: 0, or -ENOMEM. */
int vc_dset_create(struct vc_dset **out);
/* Frees the set and its nodes; O(nodes). No call may be running on it. */
void vc_dset_destroy(struct vc_dset *s);

/* 1 if pno was added, 0 if it was already present, -EINVAL if pno >=
 * VC_DSET_LIMIT, -ENOMEM if a node could not be allocated; on error the
 * set is unchanged. Lock held O(depth); allocates at most 2 * depth nodes,
 * before touching the tree. */
int vc_dset_add(struct vc_dset *s, uint64_t pno);
/* true if pno was present (and now is not). Lock held O(depth); frees the
 * nodes that become empty. */
bool vc_dset_del(struct vc_dset *s, uint64_t pno);
/* true if pno is present. Lock held O(depth). */
bool vc_dset_test(struct vc_dset *s, uint64_t pno);

/* The smallest member in [from, to] (inclusive) in *out: true, or false if
 * there is none (also when from > to). Lock held O(depth): at most two
 * nodes per level, found through the summary masks, whatever the width of
 * the range or the empty space crossed. */
bool vc_dset_next(struct vc_dset *s, uint64_t from, uint64_t to, uint64_t *out);
/* Writes up to max members of [from, to] to out[] in increasing order and
 * returns how many. To walk a range in batches, call again with from one
 * past the last member returned. Lock held O(depth + nodes holding the
 * members returned): about returned / 4096 nodes for dense runs, at most
 * depth per member for members far apart. */
uint32_t vc_dset_collect(struct vc_dset *s, uint64_t from, uint64_t to, uint64_t *out,
			 uint32_t max);

/* Members. Lock-free: exact when no add or del is running, otherwise a
 * value the set had during the call. */
uint64_t vc_dset_count(const struct vc_dset *s);
/* Bytes of nodes held (VC_DSET_NODE_BYTES each; 0 when empty), not counting
 * the struct itself. Lock-free, as count. */
uint64_t vc_dset_bytes(const struct vc_dset *s);

#endif
