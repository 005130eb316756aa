/* Test hooks (engine/debug.h). */
#include "engine/debug.h"

#include "engine/engine.h"

#define DUMP_BOUNCE (4u << 20)

int eng_debug_gpu_dump(vc_cache *c, unsigned char **out, size_t *len)
{
	*out = NULL;
	*len = 0;
	if (!c->gpu.ls)
		return vc_err(-ENODEV, "no GPU tier to dump");
	struct vc_device *d = c->gpu.dev;
	void *bounce;
	uint64_t bounce_dev;
	int r = d->ops->host_alloc(d, DUMP_BOUNCE, &bounce, &bounce_dev);
	if (r < 0)
		return r;
	pthread_mutex_lock(&c->gpu.resize_mu);
	const uint64_t total = vc_ls_bytes(c->gpu.ls);
	unsigned char *buf = malloc(total ? total : 1);
	if (!buf)
		r = vc_err(-ENOMEM, "out of memory for a %llu-byte dump", (unsigned long long)total);
	uint64_t at = 0;
	for (uint32_t ch = 0; r == 0 && ch < vc_ls_nchunks(c->gpu.ls); ch++) {
		if (vc_ls_chunk_state(c->gpu.ls, ch) == VC_LS_CHUNK_OFF)
			continue;
		uint64_t addr, n;
		vc_ls_chunk_range(c->gpu.ls, ch, &addr, &n);
		for (uint64_t o = 0; r == 0 && o < n && at < total; o += DUMP_BOUNCE) {
			uint64_t k = n - o < DUMP_BOUNCE ? n - o : DUMP_BOUNCE;
			if (k > total - at)
				k = total - at;
			r = d->ops->memcpy_sync(d, bounce_dev, addr + o, k);
			if (r == 0)
				memcpy(buf + at, bounce, k);
			at += k;
		}
	}
	pthread_mutex_unlock(&c->gpu.resize_mu);
	d->ops->host_free(d, bounce);
	if (r < 0) {
		free(buf);
		return r;
	}
	*out = buf;
	*len = at;
	return 0;
}
