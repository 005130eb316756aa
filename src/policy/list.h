/* Intrusive circular queues of vc_pnode with a sentinel, for the policies.
 *
 * q.head.next is the newest node (head), q.head.prev the oldest (tail); an
 * empty queue points at itself, so no operation tests for NULL or the
 * ends. Every operation is O(1). */
#ifndef VC_POLICY_LIST_H
#define VC_POLICY_LIST_H

#include <stdint.h>

#include "policy/policy.h"

struct vc_pqueue {
	struct vc_pnode head; /* sentinel */
	uint64_t n;
};

static inline void vc_pq_init(struct vc_pqueue *q)
{
	q->head.prev = q->head.next = &q->head;
	q->head.tier = VC_PNODE_NONE;
	q->n = 0;
}

static inline void vc_pq_push(struct vc_pqueue *q, struct vc_pnode *n)
{
	n->prev = &q->head;
	n->next = q->head.next;
	q->head.next->prev = n;
	q->head.next = n;
	q->n++;
}

static inline void vc_pq_del(struct vc_pqueue *q, struct vc_pnode *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = NULL;
	q->n--;
}

/* The oldest node, or NULL when empty. */
static inline struct vc_pnode *vc_pq_tail(const struct vc_pqueue *q)
{
	return q->n ? q->head.prev : NULL;
}

/* From a node toward the head (newer); NULL past the head. */
static inline struct vc_pnode *vc_pq_newer(const struct vc_pqueue *q, struct vc_pnode *n)
{
	return n->prev == &q->head ? NULL : n->prev;
}

/* The oldest node that skip() does not reject, or NULL: O(1 + skipped). */
static inline struct vc_pnode *vc_pq_first(const struct vc_pqueue *q, vc_skip_fn skip, void *arg)
{
	for (struct vc_pnode *n = q->head.prev; n != &q->head; n = n->prev)
		if (!skip || !skip(n, arg))
			return n;
	return NULL;
}

#endif
