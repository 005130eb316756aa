/* The server beside other GPU programs (issue 12): a watermark that keeps
 * device memory free, and release requests from programs that ran out.
 *
 *   watermark  --gpu-keep-free N (bytes, or a share of the device: 10%):
 *              a thread polls the device's free memory every POLL_MS and
 *              shrinks the GPU tier whenever other programs' use leaves
 *              less than N free, by what is missing
 *   requests   --release-socket PATH: programs with libvramcache-shim.so
 *              (or anything speaking src/release's protocol) ask for bytes
 *              when an allocation fails; the tier shrinks by that much at
 *              once (device UUIDs must match) and the reply says how much
 *              went
 *   growing    the same thread grows the tier back, a chunk at a time,
 *              when the device has N + GROW_SLACK_CHUNKS chunks free, but
 *              not within HOLD_MS of the last shrink: the program that
 *              asked must have time to take what it was given, and a
 *              program that allocates and frees in bursts does not make the
 *              tier oscillate
 * With --gpus each GPU of the tier is watched on its own: its free memory
 * against its watermark, shrinks and grows of its parts (vc_gpu_shrink_on),
 * and requests naming its UUID.
 * Lock rules: g->mu guards the hold-off clock; the cache serialises
 * shrinks and grows itself. Cost: one cudaMemGetInfo per POLL_MS. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "cli/serve.h"
#include "release/release.h"

#define POLL_MS 100
#define HOLD_MS 5000
#define GROW_SLACK_CHUNKS 2

/* One GPU of the tier: its parts (vc_config.gpus may put several on one
 * GPU), what it keeps free and its UUID. */
struct sg_dev {
	unsigned parts[VC_GPUS_MAX], nparts;
	uint64_t keep_free; /* bytes; from the share at start when one was given */
	unsigned char uuid[16];
};

struct serve_gpu {
	vc_cache *c;
	uint64_t chunk;      /* the tier's chunk size */
	struct sg_dev dev[VC_GPUS_MAX];
	unsigned ndev;
	struct vc_release_server *rs;
	pthread_t poller;
	bool has_poller;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* stop */
	bool stop;
	uint64_t last_shrink_ns; /* under mu */
};

static void note_shrink(struct serve_gpu *g)
{
	pthread_mutex_lock(&g->mu);
	g->last_shrink_ns = vc_now_ns();
	pthread_mutex_unlock(&g->mu);
}

/* Gives back `bytes` from GPU d's parts, in turn until enough went:
 * *released says how much; the first error, if nothing went. */
static int dev_shrink(struct serve_gpu *g, const struct sg_dev *d, uint64_t bytes, unsigned flags,
		      uint64_t *released)
{
	int err = 0;
	*released = 0;
	for (unsigned i = 0; i < d->nparts && *released < bytes; i++) {
		uint64_t got = 0;
		int r = vc_gpu_shrink_on(g->c, d->parts[i], bytes - *released, flags, &got);
		*released += got;
		if (r < 0 && !err)
			err = r;
	}
	return *released ? 0 : err;
}

/* A release request (the release server's thread, one at a time). */
static int on_release(void *ctx, const unsigned char uuid[16], uint64_t bytes, uint64_t *released)
{
	struct serve_gpu *g = ctx;
	*released = 0;
	const struct sg_dev *d = NULL;
	for (unsigned i = 0; i < g->ndev && !d; i++)
		if (memcmp(uuid, g->dev[i].uuid, 16) == 0)
			d = &g->dev[i];
	if (!d)
		return 0; /* another GPU's program: nothing of ours helps */
	note_shrink(g); /* before: no grow slips in between */
	int r = dev_shrink(g, d, bytes, VC_SHRINK_REQUESTED, released);
	note_shrink(g);
	serve_log(r < 0 ? LOG_WARNING : LOG_INFO,
		  "GPU memory asked back: %llu bytes, %llu released%s%s",
		  (unsigned long long)bytes, (unsigned long long)*released, r < 0 ? ": " : "",
		  r < 0 ? vc_strerror(r) : "");
	return r;
}

/* One poll of GPU d: shrink below the watermark, grow back above it. */
static void dev_poll(struct serve_gpu *g, const struct sg_dev *d, uint64_t since)
{
	uint64_t fr = 0, tot = 0, got = 0;
	if (vc_gpu_mem_info_on(g->c, d->parts[0], &fr, &tot) < 0)
		return;
	uint64_t held = 0; /* what its parts hold now */
	for (unsigned i = 0; i < d->nparts; i++) {
		struct vc_gpu_stats ps = { .size = sizeof ps };
		if (vc_get_gpu_stats(g->c, d->parts[i], &ps) == 0 && !ps.failed)
			held += ps.bytes;
	}
	if (d->keep_free && fr < d->keep_free && held > 0) {
		note_shrink(g);
		int r = dev_shrink(g, d, d->keep_free - fr, 0, &got);
		note_shrink(g);
		serve_log(r < 0 ? LOG_WARNING : LOG_INFO,
			  "GPU memory below the watermark (%llu MiB free, keep %llu MiB): "
			  "%llu MiB released%s%s",
			  (unsigned long long)(fr >> 20), (unsigned long long)(d->keep_free >> 20),
			  (unsigned long long)(got >> 20), r < 0 ? ": " : "", r < 0 ? vc_strerror(r) : "");
	} else if (since > HOLD_MS * 1000000ull && fr > d->keep_free + GROW_SLACK_CHUNKS * g->chunk) {
		/* A part given back chunks takes one again (grow_on maps what it
		 * gave back, nothing past its configured size). */
		for (unsigned i = 0; i < d->nparts && !got; i++)
			if (vc_gpu_grow_on(g->c, d->parts[i], g->chunk, &got) == 0 && got)
				serve_log(LOG_INFO, "GPU memory free again: part %u grown by %llu MiB",
					  d->parts[i], (unsigned long long)(got >> 20));
	}
}

static void *poller_main(void *arg)
{
	struct serve_gpu *g = arg;
	pthread_mutex_lock(&g->mu);
	while (!g->stop) {
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		t.tv_nsec += POLL_MS * 1000000L;
		if (t.tv_nsec >= 1000000000L) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&g->cv, &g->mu, &t);
		if (g->stop)
			break;
		uint64_t since = vc_now_ns() - g->last_shrink_ns;
		pthread_mutex_unlock(&g->mu);
		for (unsigned i = 0; i < g->ndev; i++)
			dev_poll(g, &g->dev[i], since);
		pthread_mutex_lock(&g->mu);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

int serve_gpu_start(vc_cache *c, const struct serve_gpu_config *cfg, struct serve_gpu **out)
{
	*out = NULL;
	if (!cfg->keep_free && cfg->keep_free_share <= 0 && !cfg->release_socket)
		return 0;
	struct vc_stats st = { .size = sizeof st };
	vc_get_stats(c, &st);
	if (st.gpu_bytes_max == 0) {
		fprintf(stderr, "vramcache serve: --gpu-keep-free and --release-socket need a GPU tier\n");
		return -EINVAL;
	}
	struct serve_gpu *g = calloc(1, sizeof *g);
	if (!g)
		return -ENOMEM;
	g->c = c;
	g->chunk = st.gpu_chunk_bytes;
	/* The tier's GPUs: parts grouped by device (their UUIDs). */
	int r = 0;
	for (unsigned k = 0; k < vc_gpu_count(c) && r == 0; k++) {
		unsigned char u[16];
		if ((r = vc_gpu_uuid_on(c, k, u)) < 0)
			break;
		unsigned i = 0;
		while (i < g->ndev && memcmp(g->dev[i].uuid, u, 16) != 0)
			i++;
		if (i == g->ndev)
			memcpy(g->dev[g->ndev++].uuid, u, 16);
		g->dev[i].parts[g->dev[i].nparts++] = k;
	}
	for (unsigned i = 0; i < g->ndev && r == 0; i++) {
		uint64_t fr = 0, tot = 0;
		r = vc_gpu_mem_info_on(c, g->dev[i].parts[0], &fr, &tot);
		g->dev[i].keep_free = cfg->keep_free ? cfg->keep_free
						     : (uint64_t)(cfg->keep_free_share * (double)tot);
	}
	if (r == 0 && (r = vc_gpu_shrink_on(c, 0, 0, 0, NULL)) == -EOPNOTSUPP)
		fprintf(stderr, "vramcache serve: %s\n", vc_last_error());
	if (r < 0) {
		free(g);
		return r;
	}
	pthread_mutex_init(&g->mu, NULL);
	vc_cond_init_monotonic(&g->cv);
	if (cfg->release_socket &&
	    (r = vc_release_server_start(cfg->release_socket, on_release, g, &g->rs)) < 0) {
		fprintf(stderr, "vramcache serve: --release-socket %s: %s\n", cfg->release_socket,
			vc_last_error());
		serve_gpu_stop(g);
		return r;
	}
	if (pthread_create(&g->poller, NULL, poller_main, g) != 0) {
		serve_gpu_stop(g);
		return -EAGAIN;
	}
	g->has_poller = true;
	*out = g;
	return 0;
}

void serve_gpu_stop(struct serve_gpu *g)
{
	if (!g)
		return;
	vc_release_server_stop(g->rs);
	pthread_mutex_lock(&g->mu);
	g->stop = true;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	if (g->has_poller)
		pthread_join(g->poller, NULL);
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->cv);
	free(g);
}
