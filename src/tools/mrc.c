#include "tools/mrc.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/hash.h"
#include "tools/hsdist.h"
#include "tools/sdist.h"

/* Fixed-size histograms bin scaled distances log-linearly: exact below
 * 2^LIN_BITS, then 2^(LIN_BITS-1) bins per power of two (relative width
 * under 1/128), so 64-bit distances need under 8 K bins (64 KiB) and the
 * binning moves a curve by well under the sampling error. */
#define LIN_BITS 8
#define LIN (1u << LIN_BITS)
#define HALF (LIN / 2)
#define NBINS (LIN + (64 - LIN_BITS) * HALF)

struct vc_mrc {
	int kind;
	uint64_t t;       /* threshold: sample when (hash >> 40) < t */
	uint64_t smax;
	struct vc_sdist sd;   /* exact and fixed rate */
	struct vc_hsdist hs;  /* fixed size: the sample, by 64-bit hash */
	uint64_t n;       /* all accesses */
	double cold;      /* first accesses (in sample units, rescaled) */
	/* exact and fixed rate: counts by (sampled) distance, index d */
	uint64_t *hist;
	uint64_t hcap;
	/* fixed size: log-linear bins of scaled distance, each count times
	 * `unit` (rescaling multiplies `unit`, O(1), instead of every bin) */
	double *bins;
	double unit, inv_unit;
	double inv_r;   /* 1 / R: a sampled distance d stands for d / R */
	uint64_t *heap; /* max-heap of the sampled keys' 64-bit hashes */
	uint64_t nheap;
	/* after finish: cumulative hits by index */
	double *cum;
	uint64_t ncum;
	double total; /* the denominator: N for exact, N R (adjusted) else */
	size_t peak;
};

static uint64_t bin_of(uint64_t v)
{
	/* e = 0 below LIN (the bin is v), else v >> e lies in [HALF, LIN) and
	 * the bin is LIN + (e - 1) HALF + (v >> e) - HALF = e HALF + (v >> e):
	 * one formula, no branch. */
	int e = 63 - __builtin_clzll(v | 1) - (LIN_BITS - 1);
	e = e < 0 ? 0 : e;
	return (uint64_t)e * HALF + (v >> e);
}

/* [lo, hi] of the distances in bin i. */
static void bin_range(uint64_t i, double *lo, double *hi)
{
	if (i < LIN) {
		*lo = *hi = (double)i;
		return;
	}
	uint64_t e = (i - LIN) / HALF + 1, m = (i - LIN) % HALF + HALF;
	*lo = ldexp((double)m, (int)e);
	*hi = *lo + ldexp(1.0, (int)e) - 1;
}

static size_t bytes_now(const struct vc_mrc *m)
{
	if (m->kind == VC_MRC_FIXED_SIZE)
		return vc_hsdist_bytes(&m->hs) + NBINS * sizeof *m->bins +
		       (m->smax + 1) * sizeof *m->heap;
	return vc_sdist_bytes(&m->sd) + m->hcap * sizeof *m->hist;
}

static void note_peak(struct vc_mrc *m)
{
	size_t b = bytes_now(m);
	if (b > m->peak)
		m->peak = b;
}

int vc_mrc_create(const struct vc_mrc_params *p, struct vc_mrc **out)
{
	struct vc_mrc *m = calloc(1, sizeof *m);
	if (!m)
		return vc_err(-ENOMEM, "out of memory");
	m->kind = p->kind;
	m->t = VC_SHARDS_P;
	m->unit = m->inv_unit = m->inv_r = 1;
	int r = 0;
	switch (p->kind) {
	case VC_MRC_EXACT:
		break;
	case VC_MRC_FIXED_RATE:
		if (!(p->rate > 0 && p->rate <= 1)) {
			r = vc_err(-EINVAL, "sampling rate %g: must be in (0, 1]", p->rate);
			goto fail;
		}
		m->t = (uint64_t)llround(p->rate * VC_SHARDS_P);
		if (m->t == 0)
			m->t = 1;
		break;
	case VC_MRC_FIXED_SIZE:
		if (p->smax < 16 || p->smax >= (1ull << 30)) {
			r = vc_err(-EINVAL, "sample size %llu: must be 16 to 2^30 - 1",
				   (unsigned long long)p->smax);
			goto fail;
		}
		m->smax = p->smax;
		m->bins = calloc(NBINS, sizeof *m->bins);
		m->heap = malloc((p->smax + 1) * sizeof *m->heap);
		if (!m->bins || !m->heap || vc_hsdist_init(&m->hs, p->smax) < 0) {
			r = vc_err(-ENOMEM, "out of memory");
			goto fail;
		}
		break;
	default:
		r = vc_err(-EINVAL, "unknown MRC kind %d", p->kind);
		goto fail;
	}
	if (p->kind != VC_MRC_FIXED_SIZE && vc_sdist_init(&m->sd) < 0) {
		r = vc_err(-ENOMEM, "out of memory");
		goto fail;
	}
	note_peak(m);
	*out = m;
	return 0;
fail:
	vc_hsdist_fini(&m->hs);
	free(m->bins);
	free(m->heap);
	free(m);
	return r;
}

void vc_mrc_destroy(struct vc_mrc *m)
{
	if (!m)
		return;
	if (m->kind == VC_MRC_FIXED_SIZE)
		vc_hsdist_fini(&m->hs);
	else
		vc_sdist_fini(&m->sd);
	free(m->hist);
	free(m->bins);
	free(m->heap);
	free(m->cum);
	free(m);
}

static int hist_add(struct vc_mrc *m, uint64_t d)
{
	if (d >= m->hcap) {
		uint64_t nc = m->hcap ? m->hcap : 1024;
		while (nc <= d)
			nc *= 2;
		uint64_t *h = realloc(m->hist, nc * sizeof *h);
		if (!h)
			return vc_err(-ENOMEM, "out of memory");
		memset(h + m->hcap, 0, (nc - m->hcap) * sizeof *h);
		m->hist = h;
		m->hcap = nc;
	}
	m->hist[d]++;
	return 0;
}

/* The sample's hashes in a max-heap: the key that leaves when the sample
 * is full is at the top. O(log S) a new key. */
static void heap_push(struct vc_mrc *m, uint64_t h)
{
	uint64_t i = m->nheap++;
	while (i > 0) {
		uint64_t p = (i - 1) / 2;
		if (m->heap[p] >= h)
			break;
		m->heap[i] = m->heap[p];
		i = p;
	}
	m->heap[i] = h;
}

static uint64_t heap_pop(struct vc_mrc *m)
{
	uint64_t top = m->heap[0], last = m->heap[--m->nheap];
	uint64_t i = 0;
	for (;;) {
		uint64_t c = 2 * i + 1;
		if (c >= m->nheap)
			break;
		if (c + 1 < m->nheap && m->heap[c + 1] > m->heap[c])
			c++;
		if (m->heap[c] <= last)
			break;
		m->heap[i] = m->heap[c];
		i = c;
	}
	if (m->nheap)
		m->heap[i] = last;
	return top;
}

/* Fixed size: the sample is over S keys; the largest hashes leave and the
 * threshold drops to the largest one that left, rescaling what was
 * counted at the old rate. */
static void shrink(struct vc_mrc *m)
{
	uint64_t told = m->t;
	while (m->nheap > m->smax) {
		uint64_t h = heap_pop(m);
		m->t = h >> 40;
		vc_hsdist_forget(&m->hs, h);
		while (m->nheap && m->heap[0] >> 40 >= m->t)
			vc_hsdist_forget(&m->hs, heap_pop(m));
	}
	double f = (double)m->t / (double)told;
	m->unit *= f;
	m->inv_unit = 1 / m->unit;
	m->inv_r = (double)VC_SHARDS_P / (double)m->t;
	m->cold *= f;
}

/* A key that passed the sampling test (h: its 64-bit hash); m->n already
 * counts it. */
static int sampled(struct vc_mrc *m, uint64_t key, uint64_t h)
{
	if (m->kind == VC_MRC_FIXED_SIZE) {
		uint64_t d = vc_hsdist_access(&m->hs, h);
		if (d == 0) {
			m->cold++;
			heap_push(m, h);
			if (m->nheap > m->smax)
				shrink(m);
			return 0;
		}
		/* d / R rounded to the nearest (llround's result for d > 0) */
		uint64_t scaled = (uint64_t)(int64_t)((double)d * m->inv_r + 0.5);
		m->bins[bin_of(scaled)] += m->inv_unit;
		return 0;
	}
	int64_t d = vc_sdist_access(&m->sd, key);
	if (d < 0)
		return vc_err(-ENOMEM, "out of memory");
	if (d == 0) {
		m->cold++;
	} else if (hist_add(m, (uint64_t)d) < 0) {
		return -ENOMEM;
	}
	if ((m->n & 0xfff) == 0 || d == 0)
		note_peak(m);
	return 0;
}

int vc_mrc_access(struct vc_mrc *m, uint64_t key)
{
	m->n++;
	uint64_t h = vc_mix64(key);
	return h >> 40 < m->t ? sampled(m, key, h) : 0;
}

int vc_mrc_access_batch(struct vc_mrc *m, const uint64_t *keys, size_t n)
{
	uint64_t base = m->n;
	for (size_t i = 0; i < n; i++) {
		uint64_t h = vc_mix64(keys[i]);
		if (h >> 40 < m->t) {
			m->n = base + i + 1; /* the count as the one-by-one calls see it */
			int r = sampled(m, keys[i], h);
			if (r < 0)
				return r;
		}
	}
	m->n = base + n;
	return 0;
}

int vc_mrc_finish(struct vc_mrc *m)
{
	double r = (double)m->t / VC_SHARDS_P;
	uint64_t n = m->kind == VC_MRC_FIXED_SIZE ? NBINS : m->hcap;
	free(m->cum);
	m->ncum = n ? n : 1;
	m->cum = calloc(m->ncum, sizeof *m->cum);
	if (!m->cum)
		return vc_err(-ENOMEM, "out of memory");
	double sum = 0;
	for (uint64_t i = 0; i < n; i++) {
		sum += m->kind == VC_MRC_FIXED_SIZE ? m->bins[i] * m->unit : (double)m->hist[i];
		m->cum[i] = sum;
	}
	if (m->kind == VC_MRC_EXACT) {
		m->total = (double)m->n;
		return 0;
	}
	/* SHARDS_adj: the expected sampled accesses are N R; the shortfall
	 * (or excess) goes to the first bucket, distance 1. (For fixed size,
	 * the ratio of sampled misses to sampled accesses, which does not
	 * depend on R, was tried: better on the Tencent sample, 25x worse on
	 * a Zipf trace, where whether the hottest keys are sampled decides
	 * N_s; docs/TRACES.md.) */
	double expect = (double)m->n * r, adj = expect - (sum + m->cold);
	for (uint64_t i = 1; i < m->ncum; i++)
		m->cum[i] += adj;
	m->total = expect;
	return 0;
}

double vc_mrc_miss_ratio(const struct vc_mrc *m, double c)
{
	if (m->total <= 0)
		return 0;
	double hits;
	if (c < 1) {
		hits = 0;
	} else if (m->kind == VC_MRC_FIXED_SIZE) {
		/* Whole bins below c, and the share of c's bin up to c, its
		 * distances taken as spread evenly. */
		uint64_t b = bin_of((uint64_t)c);
		double lo, hi;
		bin_range(b, &lo, &hi);
		double below = b ? m->cum[b - 1] : 0;
		double in = m->cum[b] - below;
		hits = below + in * ((c - lo + 1) / (hi - lo + 1));
	} else {
		/* Sampled distance d stands for d / R (the paper's scaling):
		 * hits are d <= c R. */
		double r = (double)m->t / VC_SHARDS_P;
		double x = floor(c * r + 1e-9);
		uint64_t i = x >= (double)(m->ncum - 1) ? m->ncum - 1 : (uint64_t)x;
		hits = m->cum[i];
	}
	double mr = 1 - hits / m->total;
	return mr < 0 ? 0 : mr > 1 ? 1 : mr;
}

uint64_t vc_mrc_accesses(const struct vc_mrc *m)
{
	return m->n;
}

double vc_mrc_distinct(const struct vc_mrc *m)
{
	double r = (double)m->t / VC_SHARDS_P;
	if (m->kind == VC_MRC_FIXED_SIZE)
		return (double)m->nheap / r;
	return (double)m->sd.nlive / r;
}

double vc_mrc_rate(const struct vc_mrc *m)
{
	return (double)m->t / VC_SHARDS_P;
}

size_t vc_mrc_peak_bytes(const struct vc_mrc *m)
{
	return m->peak;
}
