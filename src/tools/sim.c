#include "tools/sim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "policy/policy.h"
#include "tools/keymap.h"
#include "tools/workload.h"
#include "trace/trace.h"

enum { HOST = 0, GPU = 1 };

struct node {
	struct vc_pnode pn; /* pn.key is the page key */
};

struct vc_sim {
	struct vc_policy *pol;
	const struct vc_policy_ops *o;
	uint64_t cap[2];
	struct node *pool;
	uint64_t *free; /* stack of free pool indexes */
	uint64_t nfree;
	struct vc_keymap map; /* key -> pool index */
	struct vc_sim_stats st;
};

int vc_sim_create(const char *policy, uint64_t host_pages, uint64_t gpu_pages,
		  struct vc_sim **out)
{
	const struct vc_policy_ops *o = vc_policy_find(policy);
	if (!o)
		return vc_err(-EINVAL, "unknown policy \"%s\"", policy);
	if (host_pages == 0)
		return vc_err(-EINVAL, "a host tier of 0 pages");
	struct vc_sim *s = calloc(1, sizeof *s);
	if (!s)
		return vc_err(-ENOMEM, "out of memory");
	uint64_t n = host_pages + gpu_pages;
	s->o = o;
	s->cap[HOST] = host_pages;
	s->cap[GPU] = gpu_pages;
	s->pool = malloc(n * sizeof *s->pool);
	s->free = malloc(n * sizeof *s->free);
	if (!s->pool || !s->free || vc_keymap_init(&s->map, n) < 0) {
		vc_sim_destroy(s);
		return vc_err(-ENOMEM, "out of memory for a %llu-page simulation",
			      (unsigned long long)n);
	}
	for (uint64_t i = 0; i < n; i++) {
		s->pool[i].pn.tier = VC_PNODE_NONE;
		s->free[i] = n - 1 - i;
	}
	s->nfree = n;
	s->pol = o->create(s->cap, gpu_pages ? 2 : 1);
	if (!s->pol) {
		vc_sim_destroy(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void vc_sim_destroy(struct vc_sim *s)
{
	if (!s)
		return;
	if (s->pol)
		s->o->destroy(s->pol);
	if (s->map.keys)
		vc_keymap_fini(&s->map);
	free(s->pool);
	free(s->free);
	free(s);
}

static void drop(struct vc_sim *s, struct vc_pnode *n)
{
	vc_keymap_del(&s->map, n->key);
	s->free[s->nfree++] = (uint64_t)((struct node *)n - s->pool);
}

/* Makes room in the host tier for one page. */
static void host_room(struct vc_sim *s)
{
	const struct vc_policy_ops *o = s->o;
	if (o->count(s->pol, HOST) < s->cap[HOST])
		return;
	struct vc_pnode *hv = o->victim(s->pol, HOST, NULL, NULL);
	o->remove(s->pol, hv);
	s->st.evictions[HOST]++;
	if (!s->cap[GPU]) {
		drop(s, hv);
		return;
	}
	if (o->count(s->pol, GPU) == s->cap[GPU]) {
		struct vc_pnode *gv = o->victim(s->pol, GPU, NULL, NULL);
		o->remove(s->pol, gv);
		s->st.evictions[GPU]++;
		drop(s, gv);
	}
	o->insert(s->pol, hv, GPU);
	s->st.moves_h2d++;
}

int vc_sim_access(struct vc_sim *s, uint64_t key, int op)
{
	const struct vc_policy_ops *o = s->o;
	s->st.accesses++;
	s->st.writes += op == VC_TRACE_WRITE;
	uint64_t *idx = vc_keymap_get(&s->map, key);
	if (idx) {
		struct vc_pnode *n = &s->pool[*idx].pn;
		if (n->tier == HOST) {
			s->st.hits[HOST]++;
			o->hit(s->pol, n);
			return 0;
		}
		s->st.hits[GPU]++;
		s->st.moves_d2h++;
		o->remove(s->pol, n);
		if (o->miss)
			o->miss(s->pol, key, HOST);
		host_room(s);
		o->insert(s->pol, n, HOST);
		return 0;
	}
	s->st.misses++;
	s->st.read_misses += op != VC_TRACE_WRITE;
	if (o->miss)
		o->miss(s->pol, key, HOST);
	host_room(s);
	uint64_t i = s->free[--s->nfree];
	if (vc_keymap_put(&s->map, key, i) < 0) {
		s->nfree++;
		return vc_err(-ENOMEM, "out of memory");
	}
	struct vc_pnode *n = &s->pool[i].pn;
	n->key = key;
	o->insert(s->pol, n, HOST);
	return 0;
}

const struct vc_sim_stats *vc_sim_stats(const struct vc_sim *s)
{
	return &s->st;
}

uint64_t vc_sim_host_pages(const struct vc_sim *s)
{
	return s->cap[HOST];
}

uint64_t vc_sim_gpu_pages(const struct vc_sim *s)
{
	return s->cap[GPU];
}

const char *vc_sim_policy(const struct vc_sim *s)
{
	return s->o->name;
}

double vc_sim_io_cost_ms(const struct vc_sim_stats *st, double latency_ms, double move_ms)
{
	double ios = (double)(st->read_misses + st->writes);
	double moves = (double)(st->moves_h2d + st->moves_d2h) * move_ms;
	return vc_wl_io_cost_ms((double)st->accesses, ios, latency_ms, moves);
}
