#include "tools/replay.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/hash.h"
#include "tools/keymap.h"
#include "trace/trace.h"

/* Latencies go into log-linear bins: 64 per power of two of nanoseconds
 * (relative error under 1.6 %), 64 powers: 32 KiB, so percentiles need no
 * per-request storage however long the trace. */
#define LBITS 6
#define LBINS (64 << LBITS)

static unsigned lat_bin(uint64_t ns)
{
	if (ns < (1u << LBITS))
		return (unsigned)ns;
	unsigned e = 63u - (unsigned)__builtin_clzll(ns) - LBITS;
	return ((e + 1) << LBITS) + (unsigned)((ns >> e) - (1u << LBITS));
}

static double lat_value(unsigned b)
{
	if (b < (1u << LBITS))
		return b;
	unsigned e = (b >> LBITS) - 1, m = (b & ((1u << LBITS) - 1)) + (1u << LBITS);
	return ldexp(m + 0.5, (int)e);
}

static double lat_quantile(const uint64_t *h, uint64_t n, double q)
{
	uint64_t want = (uint64_t)ceil(q * (double)n), run = 0;
	for (unsigned b = 0; b < LBINS; b++) {
		run += h[b];
		if (run >= want && h[b])
			return lat_value(b);
	}
	return 0;
}

/* The synthesized contents of page p at version v (v >= 1). */
static void fill_page(unsigned char *buf, uint32_t ps, uint64_t p, uint64_t v)
{
	uint64_t x = vc_mix64(p ^ (v << 40)) | 1;
	for (uint32_t i = 0; i < ps; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + i, &x, 8);
	}
	memcpy(buf, &p, 8);
	memcpy(buf + 8, &v, 8);
	memcpy(buf + ps - 16, &p, 8);
	memcpy(buf + ps - 8, &v, 8);
}

static bool page_ok(const unsigned char *buf, uint32_t ps, uint64_t p, uint64_t v)
{
	if (v == 0) {
		static const unsigned char zero[16];
		return memcmp(buf, zero, 16) == 0 && memcmp(buf + ps - 16, zero, 16) == 0;
	}
	uint64_t a, b, c, d;
	memcpy(&a, buf, 8);
	memcpy(&b, buf + 8, 8);
	memcpy(&c, buf + ps - 16, 8);
	memcpy(&d, buf + ps - 8, 8);
	return a == p && b == v && c == p && d == v;
}

struct rp {
	struct vc_keymap dense;   /* trace page key -> dense page */
	struct vc_keymap version; /* dense page -> writes so far */
};

/* Dense numbers for every distinct page, in first-touch order. */
static int number_pages(const struct vc_replay_params *p, struct rp *s, uint64_t *npages)
{
	vc_trace *t;
	int r = vc_trace_open(p->trace, p->format, &t);
	if (r < 0)
		return r;
	uint64_t key, req = 0, n = 0;
	int op;
	uint32_t ps = p->cfg.page_size;
	while ((r = vc_trace_next_page(t, ps, !p->per_request, &key, &op)) == 1) {
		if (!vc_keymap_get(&s->dense, key) && vc_keymap_put(&s->dense, key, n++) < 0) {
			r = vc_err(-ENOMEM, "out of memory");
			break;
		}
		(void)req;
	}
	vc_trace_close(t);
	*npages = n;
	return r;
}

int vc_replay_run(const struct vc_replay_params *p, struct vc_replay_result *out)
{
	memset(out, 0, sizeof *out);
	uint32_t ps = p->cfg.page_size;
	if (ps < 512 || (ps & (ps - 1)))
		return vc_err(-EINVAL, "page size %u", ps);
	struct rp s;
	if (vc_keymap_init(&s.dense, 1 << 16) < 0 || vc_keymap_init(&s.version, 1 << 16) < 0)
		return vc_err(-ENOMEM, "out of memory");
	uint64_t *hist = calloc(LBINS, sizeof *hist);
	unsigned char *buf = aligned_alloc(4096, ps < 4096 ? 4096 : ps);
	vc_cache *c = NULL;
	vc_trace *t = NULL;
	int r = -ENOMEM;
	if (!hist || !buf)
		goto out;
	uint64_t npages;
	r = number_pages(p, &s, &npages);
	if (r < 0)
		goto out;
	if (npages == 0) {
		r = vc_err(-ENODATA, "%s: no page accesses (an empty trace, or one whose requests "
			   "all move no data)", p->trace); /* as sim and mrc say it */
		goto out;
	}
	out->distinct = npages;
	int fd = open(p->file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = vc_err(-errno, "%s: %s", p->file, strerror(errno));
		goto out;
	}
	if (ftruncate(fd, (off_t)(npages * ps)) < 0) { /* sparse: zeros until written */
		r = vc_err(-errno, "%s: %s", p->file, strerror(errno));
		close(fd);
		goto out;
	}
	close(fd);
	struct vc_config cfg = p->cfg;
	cfg.backing_path = p->file;
	cfg.backing_fd = -1;
	r = vc_open(&cfg, &c);
	if (r < 0)
		goto out;
	snprintf(out->device, sizeof out->device, "%s", vc_device_name(c));
	r = vc_trace_open(p->trace, p->format, &t);
	if (r < 0)
		goto out;
	struct vc_stats s0 = { .size = sizeof s0 };
	vc_get_stats(c, &s0);
	uint64_t t0 = vc_now_ns();
	struct vc_trace_req q;
	while ((!p->limit || out->requests < p->limit) && (r = vc_trace_next(t, &q)) == 1) {
		uint64_t first = q.offset / ps;
		uint64_t last = p->per_request || !q.size ? first : (q.offset + q.size - 1) / ps;
		uint64_t vol = (uint64_t)(q.volume & 0xffff) << VC_TRACE_VOL_SHIFT;
		uint64_t r0 = vc_now_ns();
		for (uint64_t pg = first; pg <= last; pg++) {
			uint64_t *dp = vc_keymap_get(&s.dense, vol | pg);
			if (!dp) {
				r = vc_err(-EIO, "%s: page not numbered (trace changed?)", p->trace);
				goto out;
			}
			uint64_t d = *dp, *vp = vc_keymap_get(&s.version, d), v = vp ? *vp : 0;
			ssize_t k;
			if (q.op == VC_TRACE_WRITE) {
				fill_page(buf, ps, d, v + 1);
				k = vc_write(c, buf, ps, d * ps);
				if (k == (ssize_t)ps && vc_keymap_put(&s.version, d, v + 1) < 0)
					k = -ENOMEM;
				out->writes++;
			} else {
				k = vc_read(c, buf, ps, d * ps);
				if (k == (ssize_t)ps && !page_ok(buf, ps, d, v))
					out->bad_pages++;
				out->reads++;
			}
			if (k != (ssize_t)ps) {
				r = k < 0 ? (int)k : vc_err(-EIO, "short I/O on page %llu",
							     (unsigned long long)d);
				goto out;
			}
			out->pages++;
		}
		hist[lat_bin(vc_now_ns() - r0)]++;
		out->requests++;
	}
	if (r < 0)
		goto out;
	r = 0;
	out->seconds = (double)(vc_now_ns() - t0) / 1e9;
	out->lat_us[0] = lat_quantile(hist, out->requests, 0.50) / 1e3;
	out->lat_us[1] = lat_quantile(hist, out->requests, 0.99) / 1e3;
	out->lat_us[2] = lat_quantile(hist, out->requests, 0.999) / 1e3;
	out->lat_us[3] = lat_quantile(hist, out->requests, 1.0) / 1e3;
	out->st.size = sizeof out->st;
	vc_get_stats(c, &out->st);
	for (int k = 0; k < VC_TIER_COUNT; k++)
		out->st.hits[k] -= s0.hits[k];
	out->st.misses -= s0.misses;
out:
	vc_trace_close(t);
	if (c) {
		int rc = vc_close(c);
		if (r == 0)
			r = rc;
	}
	unlink(p->file);
	vc_keymap_fini(&s.dense);
	vc_keymap_fini(&s.version);
	free(hist);
	free(buf);
	return r;
}
