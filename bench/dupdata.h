/* Data whose blocks repeat with a controlled dedup factor, for the dedup
 * benchmarks (bench/dedup_fig5.c, bench/dedup_moves.c). Header only, after
 * bench.h (each bench is its own program).
 *
 * DEDU's setting (section 5.1): "given a duplication factor d, the working
 * set of w blocks and the block size b, we generate a file of w x b x d,
 * and each distinct block has d copies in the file". Here: a file of N
 * units (a unit is a block of `unit` bytes, unit <= page) gets its
 * contents from a pool of P = ceil(N / d) distinct units; unit i holds
 * pool entry perm(i) mod P, where perm is a bijection of [0, N), so every
 * entry has floor(N/P) or ceil(N/P) copies, scattered over the file. The
 * factor at `unit` granularity is exactly N / P; at a coarser granularity
 * (a larger dedup block) two neighbouring units seldom repeat together,
 * so the factor there is about 1; at a finer one it is at least N / P.
 * With unit = page the factor is the same at every degree.
 *
 * A unit's bytes are a function of its content id alone (xorshift64* from
 * a seed of the id), so a reader can check what it reads without a copy
 * of the file. Ids at or above P name contents that occur once (DUP_FRESH
 * plus a serial: the benchmarks' updates).
 */
#ifndef VC_BENCH_DUPDATA_H
#define VC_BENCH_DUPDATA_H

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "base/rand.h"

/* Contents from this id on are unique (an update's new bytes). */
#define DUP_FRESH (1ull << 62)

struct dupdata {
	uint64_t n;    /* units in the file */
	uint64_t pool; /* distinct contents: ceil(n / factor) */
	uint32_t unit; /* bytes per unit: a power of two, 8 .. page size */
	uint64_t mul;  /* perm(i) = (mul * i + 0x5bd1e995) mod n, mul coprime with n */
};

static inline uint64_t dup_gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static inline void dup_init(struct dupdata *d, uint64_t bytes, uint32_t unit, double factor)
{
	d->unit = unit;
	d->n = bytes / unit;
	d->pool = (uint64_t)ceil((double)d->n / (factor < 1 ? 1 : factor));
	if (d->pool == 0)
		d->pool = 1;
	/* A multiplier near n / golden ratio spreads neighbours far apart. */
	d->mul = (uint64_t)((double)d->n * 0.6180339887) | 1;
	while (dup_gcd(d->mul, d->n) != 1)
		d->mul += 2;
}

/* The content id of unit i. */
static inline uint64_t dup_id(const struct dupdata *d, uint64_t i)
{
	unsigned __int128 x = (unsigned __int128)d->mul * i + 0x5bd1e995u;
	return (uint64_t)(x % d->n) % d->pool;
}

/* The bytes of content `id`: len (a multiple of 8) bytes at out. */
static inline void dup_fill(uint64_t id, unsigned char *out, uint32_t len)
{
	uint64_t s = (id + 1) * 0x9E3779B97F4A7C15ull;
	s ^= s >> 29;
	if (!s)
		s = 1;
	for (uint32_t k = 0; k < len; k += 8) {
		uint64_t v = vc_rand64(&s);
		memcpy(out + k, &v, 8);
	}
}

/* The bytes of units [first, first + count) as the file holds them. */
static inline void dup_units(const struct dupdata *d, uint64_t first, uint64_t count,
			     unsigned char *out)
{
	for (uint64_t i = 0; i < count; i++)
		dup_fill(dup_id(d, first + i), out + i * d->unit, d->unit);
}

/* Writes the file: d->n units at path, in 1 MiB writes. 0 or -errno
 * (after saying why on stderr). */
static inline int dup_make_file(const struct dupdata *d, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;
		fprintf(stderr, BENCH_NAME ": cannot create %s: %s\n", path, strerror(e));
		return -e;
	}
	const uint64_t per = (1u << 20) / d->unit;
	unsigned char *buf = malloc(1u << 20);
	int r = buf ? 0 : -ENOMEM;
	for (uint64_t i = 0; r == 0 && i < d->n; i += per) {
		uint64_t k = d->n - i < per ? d->n - i : per;
		dup_units(d, i, k, buf);
		size_t len = (size_t)(k * d->unit), done = 0;
		while (r == 0 && done < len) {
			ssize_t w = pwrite(fd, buf + done, len - done, (off_t)(i * d->unit + done));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				r = w < 0 ? -errno : -EIO;
			else
				done += (size_t)w;
		}
	}
	free(buf);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r < 0)
		fprintf(stderr, BENCH_NAME ": cannot write %s: %s\n", path, strerror(-r));
	return r;
}

#endif
