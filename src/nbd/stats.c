/* The server's statistics as JSON and as Prometheus text exposition
 * (version 0.0.4), from one table, so both formats always carry the same
 * numbers. Cache-wide counters come from vc_get_stats; per-export ones
 * from each export's nbd_counters. Cost: one vc_get_stats and a line per
 * metric; nothing is kept between calls. */
#include <errno.h>
#include <string.h>

#include "nbd/nbd.h"

struct metric {
	const char *name; /* JSON key; Prometheus: vramcache_<name> */
	const char *help;
	const char *label; /* Prometheus: one label, e.g. tier="host"; may be NULL */
	bool counter;      /* else a gauge */
	double v;
};

#define NMETRICS 64

static const char *const op_names[NBD_CMD_BLOCK_STATUS + 1] = {
	"read", "write", "disc", "flush", "trim", "cache", "write_zeroes", "block_status",
};

/* Cache metrics; returns how many were filled (cap: NMETRICS). */
static unsigned cache_metrics(const struct vc_stats *st, struct metric *m)
{
	unsigned n = 0;
#define M(nm, lb, ctr, val, hp) m[n++] = (struct metric){ nm, hp, lb, ctr, (double)(val) }
	M("hits_host", "tier=\"host\"", true, st->hits[VC_TIER_HOST], "Page accesses served by a tier.");
	M("hits_gpu", "tier=\"gpu\"", true, st->hits[VC_TIER_GPU], "Page accesses served by a tier.");
	M("misses", NULL, true, st->misses, "Page accesses that went to the backing store.");
	uint64_t acc = st->hits[0] + st->hits[1] + st->misses;
	M("hit_ratio", NULL, false, acc ? (double)(st->hits[0] + st->hits[1]) / (double)acc : 0,
	  "Share of page accesses served by the cache since start.");
	M("evictions_host", "tier=\"host\"", true, st->evictions[VC_TIER_HOST], "Pages pushed out of a tier.");
	M("evictions_gpu", "tier=\"gpu\"", true, st->evictions[VC_TIER_GPU], "Pages pushed out of a tier.");
	M("writebacks", NULL, true, st->writebacks, "Dirty pages written to the backing store.");
	M("h2d_bytes", NULL, true, st->h2d_bytes, "Bytes moved from the host tier to the GPU tier.");
	M("d2h_bytes", NULL, true, st->d2h_bytes, "Bytes moved from the GPU tier to the host tier.");
	M("backing_read_bytes", NULL, true, st->backing_read_bytes, "Bytes read from backing stores.");
	M("backing_write_bytes", NULL, true, st->backing_write_bytes, "Bytes written to backing stores.");
	M("backing_wait_seconds", NULL, true, (double)st->backing_wait_ns / 1e9,
	  "Time spent in backing store calls.");
	M("batches", NULL, true, st->batches, "Device move batches submitted.");
	M("batch_pages", NULL, true, st->batch_pages, "Pages in device move batches.");
	M("pages_cached_host", "tier=\"host\"", false, st->pages_cached[VC_TIER_HOST], "Pages cached in a tier now.");
	M("pages_cached_gpu", "tier=\"gpu\"", false, st->pages_cached[VC_TIER_GPU], "Pages cached in a tier now.");
	M("pages_capacity_host", "tier=\"host\"", false, st->pages_capacity[VC_TIER_HOST], "Pages a tier holds.");
	M("pages_capacity_gpu", "tier=\"gpu\"", false, st->pages_capacity[VC_TIER_GPU], "Pages a tier holds.");
	M("dirty_pages", NULL, false, st->dirty_pages, "Pages newer than the backing store now.");
	M("gpu_fragmentation", NULL, false, st->gpu_fragmentation, "Dead share of used GPU log slots.");
	M("gc_runs", NULL, true, st->gc_runs, "GPU log cleaning steps.");
	M("gc_pages_moved", NULL, true, st->gc_pages_moved, "Pages moved by GPU log cleaning.");
	M("gpu_bytes", NULL, false, st->gpu_bytes, "Device memory the GPU tier holds now.");
	M("gpu_bytes_max", NULL, false, st->gpu_bytes_max, "The GPU tier's configured size.");
	M("gpu_chunks_released", NULL, true, st->gpu_chunks_released, "GPU tier chunks given back to the device.");
	M("gpu_chunks_regained", NULL, true, st->gpu_chunks_regained, "GPU tier chunks taken again.");
	M("gpu_bytes_released", NULL, true, st->gpu_bytes_released, "Device memory given back.");
	M("gpu_bytes_released_requested", NULL, true, st->gpu_bytes_released_requested,
	  "Device memory given back at other programs' request.");
	M("gpu_shrinks", NULL, true, st->gpu_shrinks, "Shrinks of the GPU tier.");
	M("gpu_shrink_seconds", NULL, true, (double)st->gpu_shrink_ns_total / 1e9,
	  "Time from shrink requests to their memory given back.");
	M("gpu_shrink_last_seconds", NULL, false, (double)st->gpu_shrink_ns_last / 1e9,
	  "The last shrink's time to its memory given back.");
	M("gpu_shrink_max_seconds", NULL, false, (double)st->gpu_shrink_ns_max / 1e9,
	  "The longest shrink's time to its memory given back.");
	M("integrity_failures", NULL, true, st->integrity_failures,
	  "Moves out of the GPU tier whose page failed its integrity tag (--integrity).");
	M("integrity_drops", NULL, true, st->integrity_drops,
	  "Pages dropped because GPU memory changed under them.");
	M("integrity_dirty_lost", NULL, true, st->integrity_dirty_lost,
	  "Dirty pages among them: writes the backing store never got.");
	M("dedup_pages", NULL, false, st->dedup_pages, "Logical pages in the GPU tier (--dedup).");
	M("dedup_blocks", NULL, false, st->dedup_blocks, "Physical blocks the GPU tier stores (--dedup).");
	M("dedup_factor", NULL, false, st->dedup_factor, "Block uses per block stored now (--dedup).");
	M("dedup_blocks_in", NULL, true, st->dedup_blocks_in, "Blocks fingerprinted on their way down.");
	M("dedup_hits", NULL, true, st->dedup_hits, "Blocks shared with a stored block.");
	M("dedup_collisions", NULL, true, st->dedup_collisions,
	  "Fingerprint matches whose bytes differed (kept apart).");
	M("dedup_est_factor", NULL, false, st->dedup_est_factor,
	  "Sampled estimate of the dedup factor, all exports.");
	M("dedup_est_update_ratio", NULL, false, st->dedup_est_update_ratio,
	  "Sampled share of writes among accesses, all exports.");
	M("dedup_volumes_on", NULL, false, st->dedup_volumes_on, "Exports deduplicating now.");
	M("dedup_switches", NULL, true, st->dedup_switches, "Adaptive dedup turned on or off.");
	M("gpus", NULL, false, st->gpus, "Parts of the GPU tier (--gpus).");
	M("gpus_failed", NULL, false, st->gpus_failed, "Parts lost to a device error.");
	M("gpu_dirty_lost", NULL, true, st->gpu_dirty_lost,
	  "Dirty pages a failed part held (--gpu-dirty keep).");
	M("gpu_peer_pages", NULL, true, st->gpu_peer_pages, "Pages moved between parts.");
	M("dirty_limit", NULL, false, st->dirty_limit,
	  "Dirty pages at most (--dirty-ratio of the host tier).");
	M("writes_limited", NULL, true, st->writes_limited,
	  "Page writes sent through to the store at the dirty limit.");
	M("writeback_refusals", NULL, true, st->writeback_refusals,
	  "Page write-backs a backing store refused (the pages stayed dirty and cached).");
#undef M
	return n;
}

/* Prometheus family name: the JSON key less its tier suffix. */
static void family(const struct metric *m, char *out, size_t cap)
{
	size_t l = strlen(m->name);
	if (m->label && l > 5 && strcmp(m->name + l - 5, "_host") == 0)
		l -= 5;
	else if (m->label && l > 4 && strcmp(m->name + l - 4, "_gpu") == 0)
		l -= 4;
	snprintf(out, cap, "vramcache_%.*s%s", (int)l, m->name, m->counter ? "_total" : "");
}

/* A string inside JSON or Prometheus label quotes: \, " and controls escaped. */
static void put_str(FILE *f, const char *s, bool json)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch == '\n')
			fputs("\\n", f);
		else if (ch < 0x20)
			json ? fprintf(f, "\\u%04x", ch) : fputc(' ', f);
		else
			fputc(ch, f);
	}
}

static uint64_t ld(const _Atomic uint64_t *a)
{
	return atomic_load_explicit(a, memory_order_relaxed);
}

/* The cache's metrics now: their count, or -errno. */
static int snapshot(const struct nbd_server *srv, struct metric m[NMETRICS])
{
	struct vc_stats st = { .size = sizeof st };
	int r = vc_get_stats(srv->cache, &st);
	return r < 0 ? r : (int)cache_metrics(&st, m);
}

int nbd_stats_json(const struct nbd_server *srv, FILE *f)
{
	struct metric m[NMETRICS];
	int n = snapshot(srv, m);
	if (n < 0)
		return n;
	fprintf(f, "{\"device\": \"%s\", \"page_size\": %u, \"cache\": {", vc_device_name(srv->cache),
		vc_page_size(srv->cache));
	for (int i = 0; i < n; i++)
		fprintf(f, "%s\"%s\": %.17g", i ? ", " : "", m[i].name, m[i].v);
	fputs("}, \"gpus\": [", f);
	for (unsigned k = 0; k < vc_gpu_count(srv->cache); k++) {
		struct vc_gpu_stats g = { .size = sizeof g };
		if (vc_get_gpu_stats(srv->cache, k, &g) < 0)
			break;
		fprintf(f, "%s{\"ordinal\": %d, \"device\": \"", k ? ", " : "", g.ordinal);
		put_str(f, g.desc, true);
		fprintf(f, "\", \"failed\": %s, \"weight\": %.17g, \"pages_cached\": %llu, "
			   "\"pages_capacity\": %llu, \"bytes\": %llu, \"hits\": %llu, "
			   "\"h2d_bytes\": %llu, \"d2h_bytes\": %llu, \"evictions\": %llu, "
			   "\"gc_runs\": %llu, \"peer_in\": %llu, \"peer_out\": %llu, "
			   "\"peer_direct\": %llu}",
			g.failed ? "true" : "false", g.weight, (unsigned long long)g.pages_cached,
			(unsigned long long)g.pages_capacity, (unsigned long long)g.bytes,
			(unsigned long long)g.hits, (unsigned long long)g.h2d_bytes,
			(unsigned long long)g.d2h_bytes, (unsigned long long)g.evictions,
			(unsigned long long)g.gc_runs, (unsigned long long)g.peer_in,
			(unsigned long long)g.peer_out, (unsigned long long)g.peer_direct);
	}
	fputs("], \"exports\": [", f);
	for (unsigned i = 0; i < srv->n_exports; i++) {
		const struct nbd_export *e = &srv->exports[i];
		fputs(i ? ", {\"name\": \"" : "{\"name\": \"", f);
		put_str(f, e->name, true);
		fprintf(f, "\", \"size\": %llu, \"readonly\": %s",
			(unsigned long long)vc_volume_size(e->vol), e->readonly ? "true" : "false");
		const struct nbd_counters *c = e->counters;
		if (c) {
			fprintf(f, ", \"connections\": %llu, \"connections_total\": %llu",
				(unsigned long long)ld(&c->conns), (unsigned long long)ld(&c->conns_total));
			for (int op = 0; op <= NBD_CMD_BLOCK_STATUS; op++)
				if (op != NBD_CMD_DISC)
					fprintf(f, ", \"%s\": %llu", op_names[op],
						(unsigned long long)ld(&c->ops[op]));
			fprintf(f, ", \"read_bytes\": %llu, \"write_bytes\": %llu, \"errors\": %llu",
				(unsigned long long)ld(&c->read_bytes),
				(unsigned long long)ld(&c->write_bytes), (unsigned long long)ld(&c->errors));
		}
		fputc('}', f);
	}
	fputs("]}\n", f);
	return ferror(f) ? -EIO : 0;
}

static void prom_head(FILE *f, const char *fam, const char *help, bool counter)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", fam, help, fam, counter ? "counter" : "gauge");
}

static void prom_export(FILE *f, const char *fam, const struct nbd_export *e, const char *extra,
			uint64_t v)
{
	fprintf(f, "%s{export=\"", fam);
	put_str(f, e->name, false);
	fprintf(f, "\"%s} %llu\n", extra, (unsigned long long)v);
}

/* Each GPU part's figures, labelled gpu="K" (its place in --gpus). */
static void prom_gpus(const struct nbd_server *srv, FILE *f)
{
	const unsigned n = vc_gpu_count(srv->cache);
	struct vc_gpu_stats g[VC_GPUS_MAX];
	for (unsigned k = 0; k < n; k++) {
		g[k] = (struct vc_gpu_stats){ .size = sizeof g[k] };
		if (vc_get_gpu_stats(srv->cache, k, &g[k]) < 0)
			return;
	}
	static const struct {
		const char *fam, *help;
		bool counter;
		size_t off; /* into struct vc_gpu_stats: a uint64_t */
	} per[] = {
		{ "vramcache_gpu_pages_cached", "Pages a GPU part holds now.", false,
		  offsetof(struct vc_gpu_stats, pages_cached) },
		{ "vramcache_gpu_pages_capacity", "Pages a GPU part holds at most.", false,
		  offsetof(struct vc_gpu_stats, pages_capacity) },
		{ "vramcache_gpu_hits_total", "Page reads served from a GPU part.", true,
		  offsetof(struct vc_gpu_stats, hits) },
		{ "vramcache_gpu_h2d_bytes_total", "Bytes moved from host memory to a GPU part.", true,
		  offsetof(struct vc_gpu_stats, h2d_bytes) },
		{ "vramcache_gpu_d2h_bytes_total", "Bytes moved from a GPU part to host memory.", true,
		  offsetof(struct vc_gpu_stats, d2h_bytes) },
		{ "vramcache_gpu_evictions_total", "Pages evicted from a GPU part.", true,
		  offsetof(struct vc_gpu_stats, evictions) },
		{ "vramcache_gpu_peer_in_total", "Pages moved into a GPU part from another.", true,
		  offsetof(struct vc_gpu_stats, peer_in) },
	};
	for (size_t i = 0; n && i < sizeof per / sizeof per[0]; i++) {
		prom_head(f, per[i].fam, per[i].help, per[i].counter);
		for (unsigned k = 0; k < n; k++)
			fprintf(f, "%s{gpu=\"%u\",ordinal=\"%d\"} %llu\n", per[i].fam, k, g[k].ordinal,
				(unsigned long long)*(const uint64_t *)((const char *)&g[k] + per[i].off));
	}
	if (n)
		prom_head(f, "vramcache_gpu_failed", "1: the GPU part was lost to a device error.",
			  false);
	for (unsigned k = 0; k < n; k++)
		fprintf(f, "vramcache_gpu_failed{gpu=\"%u\",ordinal=\"%d\"} %u\n", k, g[k].ordinal,
			g[k].failed);
}

int nbd_stats_prometheus(const struct nbd_server *srv, FILE *f)
{
	struct metric m[NMETRICS];
	int n = snapshot(srv, m);
	if (n < 0)
		return n;
	char fam[96], prev[96] = "";
	for (int i = 0; i < n; i++) {
		family(&m[i], fam, sizeof fam);
		if (strcmp(fam, prev) != 0) /* a family's samples follow one header */
			prom_head(f, fam, m[i].help, m[i].counter);
		strcpy(prev, fam);
		fprintf(f, "%s%s%s%s %.17g\n", fam, m[i].label ? "{" : "", m[i].label ? m[i].label : "",
			m[i].label ? "}" : "", m[i].v);
	}
	prom_gpus(srv, f);
	prom_head(f, "vramcache_export_size_bytes", "Size of an export.", false);
	for (unsigned i = 0; i < srv->n_exports; i++)
		prom_export(f, "vramcache_export_size_bytes", &srv->exports[i], "",
			    vc_volume_size(srv->exports[i].vol));
	static const struct {
		const char *fam, *help;
		bool counter;
		size_t off; /* into struct nbd_counters */
	} per[] = {
		{ "vramcache_export_connections", "Connections open now.", false,
		  offsetof(struct nbd_counters, conns) },
		{ "vramcache_export_connections_total", "Connections accepted.", true,
		  offsetof(struct nbd_counters, conns_total) },
		{ "vramcache_export_read_bytes_total", "Bytes read by clients.", true,
		  offsetof(struct nbd_counters, read_bytes) },
		{ "vramcache_export_write_bytes_total", "Bytes written by clients.", true,
		  offsetof(struct nbd_counters, write_bytes) },
		{ "vramcache_export_errors_total", "Requests answered with an error.", true,
		  offsetof(struct nbd_counters, errors) },
	};
	for (size_t k = 0; k < sizeof per / sizeof per[0]; k++) {
		prom_head(f, per[k].fam, per[k].help, per[k].counter);
		for (unsigned i = 0; i < srv->n_exports; i++) {
			const struct nbd_counters *c = srv->exports[i].counters;
			if (c)
				prom_export(f, per[k].fam, &srv->exports[i], "",
					    ld((const _Atomic uint64_t *)((const char *)c + per[k].off)));
		}
	}
	prom_head(f, "vramcache_export_requests_total", "Requests run, by command.", true);
	for (unsigned i = 0; i < srv->n_exports; i++) {
		const struct nbd_counters *c = srv->exports[i].counters;
		for (int op = 0; c && op <= NBD_CMD_BLOCK_STATUS; op++) {
			if (op == NBD_CMD_DISC)
				continue;
			char lb[48];
			snprintf(lb, sizeof lb, ",op=\"%s\"", op_names[op]);
			prom_export(f, "vramcache_export_requests_total", &srv->exports[i], lb,
				    ld(&c->ops[op]));
		}
	}
	return ferror(f) ? -EIO : 0;
}
