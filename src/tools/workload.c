#include "tools/workload.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/rand.h"
#include "base/error.h"


int vc_wl_make_file(const char *path, uint64_t npages, uint32_t page_size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return vc_err(-errno, "cannot create %s: %s", path, strerror(errno));
	/* Written in 1 MiB chunks (at least a page). */
	size_t chunk = page_size > (1u << 20) ? page_size : (1u << 20);
	unsigned char *buf = malloc(chunk);
	if (!buf) {
		close(fd);
		return vc_err(-ENOMEM, "out of memory");
	}
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i + 8 <= chunk; i += 8) {
		uint64_t v = vc_rand64(&seed);
		memcpy(buf + i, &v, 8);
	}
	uint64_t per = chunk / page_size;
	int r = 0;
	for (uint64_t pno = 0; pno < npages && r == 0; pno += per) {
		uint64_t n = npages - pno < per ? npages - pno : per;
		for (uint64_t k = 0; k < n; k++) {
			uint64_t v = pno + k;
			memcpy(buf + k * page_size, &v, 8);
		}
		size_t len = (size_t)(n * page_size), done = 0;
		while (done < len) {
			ssize_t w = pwrite(fd, buf + done, len - done, (off_t)(pno * page_size + done));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				r = vc_err(-(w < 0 ? errno : EIO), "cannot write %s: %s", path,
					   strerror(w < 0 ? errno : EIO));
				break;
			}
			done += (size_t)w;
		}
	}
	free(buf);
	if (close(fd) < 0 && r == 0)
		r = vc_err(-errno, "cannot close %s", path);
	return r;
}

double vc_wl_io_cost_ms(double accesses, double backing_ios, double latency_ms, double move_ms)
{
	return accesses > 0 ? (backing_ios * latency_ms + move_ms) / accesses : 0;
}

double vc_wl_parse_ms(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || v < 0)
		return -1;
	if (*end == '\0' || strcmp(end, "ms") == 0)
		return v;
	if (strcmp(end, "us") == 0)
		return v / 1e3;
	if (strcmp(end, "ns") == 0)
		return v / 1e6;
	if (strcmp(end, "s") == 0)
		return v * 1e3;
	return -1;
}

int vc_wl_parse_bytes(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 'K': case 'k': shift = 10; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'G': case 'g': shift = 30; end++; break;
	case 'T': case 't': shift = 40; end++; break;
	}
	if (shift && strcmp(end, "iB") == 0)
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

/* Zipf sampling by inverse CDF over a precomputed table: O(log n) a draw,
 * 8 bytes a page of table. */
struct zipf {
	double *cdf;
	uint64_t n;
};

static int zipf_init(struct zipf *z, uint64_t n, double s)
{
	z->n = n;
	z->cdf = malloc(n * sizeof *z->cdf);
	if (!z->cdf)
		return -ENOMEM;
	double sum = 0;
	for (uint64_t i = 0; i < n; i++) {
		sum += 1.0 / pow((double)(i + 1), s);
		z->cdf[i] = sum;
	}
	for (uint64_t i = 0; i < n; i++)
		z->cdf[i] /= sum;
	return 0;
}

static uint64_t zipf_draw(const struct zipf *z, uint64_t *seed)
{
	double u = (double)(vc_rand64(seed) >> 11) / 9007199254740992.0;
	uint64_t lo = 0, hi = z->n - 1;
	while (lo < hi) {
		uint64_t mid = (lo + hi) / 2;
		if (z->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Scatter ranks over the working set so hot pages are not adjacent. */
	return (lo * 0x9E3779B97F4A7C15ull) % z->n;
}

struct wl_thread {
	vc_cache *c;
	const struct vc_wl_params *p;
	const struct zipf *z;
	uint64_t seed, n, bad;
	int err;
};

static void *wl_thread_main(void *arg)
{
	struct wl_thread *t = arg;
	uint32_t ps = vc_page_size(t->c);
	unsigned char *buf = malloc(ps);
	if (!buf) {
		t->err = -ENOMEM;
		return NULL;
	}
	uint64_t wthresh = (uint64_t)(t->p->write_ratio * 1e6);
	for (uint64_t i = 0; i < t->n; i++) {
		uint64_t pno = t->z ? zipf_draw(t->z, &t->seed) : vc_rand64(&t->seed) % t->p->working_set;
		uint64_t off = pno * ps;
		ssize_t r;
		if (vc_rand64(&t->seed) % 1000000 < wthresh) {
			for (uint32_t k = 0; k < ps; k += 8) {
				uint64_t v = k ? vc_rand64(&t->seed) : pno;
				memcpy(buf + k, &v, 8);
			}
			r = vc_write(t->c, buf, ps, off);
		} else {
			r = vc_read(t->c, buf, ps, off);
			uint64_t stamp;
			memcpy(&stamp, buf, 8);
			if (r == (ssize_t)ps && stamp != pno)
				t->bad++;
		}
		if (r < 0) {
			t->err = (int)r;
			break;
		}
	}
	free(buf);
	return NULL;
}

int vc_wl_run(vc_cache *c, const struct vc_wl_params *p, struct vc_wl_result *out)
{
	memset(out, 0, sizeof *out);
	uint64_t pages = vc_size(c) / vc_page_size(c);
	if (p->working_set == 0 || p->working_set > pages)
		return vc_err(-EINVAL, "working set of %llu pages does not fit a backing store of %llu",
			      (unsigned long long)p->working_set, (unsigned long long)pages);
	int nt = p->threads > 0 ? p->threads : 1;
	struct zipf z = { 0 };
	if (p->zipf > 0 && zipf_init(&z, p->working_set, p->zipf) < 0)
		return vc_err(-ENOMEM, "out of memory for the Zipf table");
	struct vc_stats s0 = { .size = sizeof s0 }, s1 = { .size = sizeof s1 };
	vc_get_stats(c, &s0);
	struct wl_thread *t = calloc((size_t)nt, sizeof *t);
	pthread_t *th = calloc((size_t)nt, sizeof *th);
	if (!t || !th) {
		free(t);
		free(th);
		free(z.cdf);
		return vc_err(-ENOMEM, "out of memory");
	}
	uint64_t t0 = vc_now_ns();
	for (int i = 0; i < nt; i++) {
		t[i] = (struct wl_thread){ .c = c, .p = p, .z = z.cdf ? &z : NULL,
					   .seed = p->seed * 31 + (uint64_t)i + 1,
					   .n = p->accesses / (uint64_t)nt };
		pthread_create(&th[i], NULL, wl_thread_main, &t[i]);
	}
	int err = 0;
	for (int i = 0; i < nt; i++) {
		pthread_join(th[i], NULL);
		if (t[i].err && !err)
			err = t[i].err;
		out->bad_pages += t[i].bad;
	}
	out->seconds = (double)(vc_now_ns() - t0) / 1e9;
	vc_get_stats(c, &s1);
	free(t);
	free(th);
	free(z.cdf);
	if (err)
		return err;

	struct vc_stats *d = &out->st;
	*d = s1;
	for (int k = 0; k < VC_TIER_COUNT; k++) {
		d->hits[k] -= s0.hits[k];
		d->evictions[k] -= s0.evictions[k];
	}
	d->misses -= s0.misses;
	d->writebacks -= s0.writebacks;
	d->h2d_bytes -= s0.h2d_bytes;
	d->d2h_bytes -= s0.d2h_bytes;
	d->backing_read_bytes -= s0.backing_read_bytes;
	d->backing_write_bytes -= s0.backing_write_bytes;
	d->backing_wait_ns -= s0.backing_wait_ns;
	d->batches -= s0.batches;
	d->batch_pages -= s0.batch_pages;
	d->batch_wait_ns -= s0.batch_wait_ns;
	for (int k = 0; k < VC_BATCH_HIST; k++)
		d->batch_hist[k] -= s0.batch_hist[k];
	d->gc_runs -= s0.gc_runs;
	d->gc_pages_moved -= s0.gc_pages_moved;
	d->gc_ns -= s0.gc_ns;
	d->gpu_segments_evicted -= s0.gpu_segments_evicted;
	d->early_releases -= s0.early_releases;

	double acc = (double)(d->hits[0] + d->hits[1] + d->misses);
	if (acc > 0) {
		out->hit_ratio[0] = (double)d->hits[0] / acc;
		out->hit_ratio[1] = (double)d->hits[1] / acc;
		out->miss_ratio = (double)d->misses / acc;
		/* Page I/Os on the backing store: loads are misses that read (a
		 * full-page write needs no read); write-through writes and
		 * write-backs each cost one page write. */
		double ps = vc_page_size(c);
		double ios = (double)d->backing_read_bytes / ps + (double)d->backing_write_bytes / ps;
		out->move_cost_ms = (double)d->batch_wait_ns / 1e6 / acc;
		out->io_cost_ms = vc_wl_io_cost_ms(acc, ios, p->latency_ms,
						   (double)d->batch_wait_ns / 1e6);
	}
	return 0;
}
