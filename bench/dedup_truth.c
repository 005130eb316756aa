/* Ground truth for block dedup over a set of images (bench/dedup_images.sh):
 * how many of their blocks are duplicates, at 512 B, 1 KiB, 2 KiB and
 * 4 KiB blocks (the engine's degrees 8, 4, 2, 1), counted offline.
 *
 * For each block size: blocks, distinct contents, all-zero blocks, the
 * dedup factor (blocks / distinct), the same without the zero blocks
 * (free space reads as zeros and dedups to one block; what remains is
 * the data's own), and the duplicate share 1 - distinct / blocks. And,
 * at 4 KiB, the share of each image's blocks equal to the block at the
 * same offset of the first image: what a sample taken by page index (the
 * engine's adaptive estimate samples the same offsets of every volume)
 * can see. Contents are told apart by MurmurHash3_x64_128 (the host
 * reference, device/fp.h); 128 bits make a false match over some 10^7
 * blocks negligible (about 10^-24).
 *
 * --allocated: only the files' data extents (SEEK_DATA/SEEK_HOLE, whole
 * 4 KiB pages), which is what `nbdcopy` reads from a server that reports
 * holes; without it every block, holes read as zeros.
 *
 * Usage: dedup_truth [--allocated] [--json FILE] IMAGE...
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define BENCH_NAME "dedup_truth"
#include "bench.h"
#include "device/fp.h"

#define NBS 4
#define CHUNK (4u << 20)
static const uint32_t bsizes[NBS] = { 512, 1024, 2048, 4096 };

/* A set of 128-bit digests: open addressing, linear probing; an all-zero
 * digest marks an empty slot (a real one that is zero is kept aside). */
struct set {
	struct vc_fp_digest *slot;
	uint64_t mask, n;
	bool has_zero;
};

static void set_init(struct set *s, uint64_t cap)
{
	uint64_t n = 1024;
	while (n < 2 * cap)
		n <<= 1;
	s->slot = calloc(n, sizeof *s->slot);
	if (!s->slot) {
		fprintf(stderr, BENCH_NAME ": out of memory for %llu digests\n", (unsigned long long)n);
		exit(1);
	}
	s->mask = n - 1;
	s->n = 0;
	s->has_zero = false;
}

static bool digest_zero(const struct vc_fp_digest *d)
{
	static const struct vc_fp_digest z;
	return memcmp(d, &z, sizeof z) == 0;
}

static void set_add(struct set *s, const struct vc_fp_digest *d)
{
	if (digest_zero(d)) {
		s->n += !s->has_zero;
		s->has_zero = true;
		return;
	}
	uint64_t h;
	memcpy(&h, d->b, sizeof h);
	for (uint64_t i = h & s->mask;; i = (i + 1) & s->mask) {
		if (digest_zero(&s->slot[i])) {
			s->slot[i] = *d;
			s->n++;
			return;
		}
		if (memcmp(&s->slot[i], d, sizeof *d) == 0)
			return;
	}
}

struct count {
	uint64_t blocks, zero;
	struct set set;
};

static bool all_zero(const unsigned char *p, uint32_t len)
{
	for (uint32_t i = 0; i < len; i += 8) {
		uint64_t v;
		memcpy(&v, p + i, 8);
		if (v)
			return false;
	}
	return true;
}

/* Counts len bytes at buf at every block size. */
static void count_range(struct count *c, const unsigned char *buf, uint64_t len)
{
	for (int b = 0; b < NBS; b++)
		for (uint64_t o = 0; o + bsizes[b] <= len; o += bsizes[b]) {
			struct vc_fp_digest d;
			c[b].blocks++;
			if (all_zero(buf + o, bsizes[b])) {
				c[b].zero++;
				continue;
			}
			vc_fp_murmur3(buf + o, bsizes[b], 0, &d);
			set_add(&c[b].set, &d);
		}
}

/* Counts one image: its data extents in whole pages with `allocated`,
 * else all of it; against image 0 (fd0) at the same offsets when fd0 >= 0. */
static int scan(const char *path, bool allocated, struct count *c, int fd0, uint64_t *same,
		uint64_t *pages)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(path);
		return -1;
	}
	unsigned char *buf = malloc(CHUNK), *ref = malloc(CHUNK);
	uint64_t size = (uint64_t)st.st_size, off = 0;
	while (off < size) {
		uint64_t start = off, end = size;
		if (allocated) {
			off_t d = lseek(fd, (off_t)off, SEEK_DATA);
			if (d < 0)
				break; /* ENXIO: no data past off */
			off_t h = lseek(fd, d, SEEK_HOLE);
			start = (uint64_t)d & ~4095ull;
			end = h < 0 ? size : ((uint64_t)h + 4095) & ~4095ull;
			if (end > size)
				end = size;
		}
		for (uint64_t o = start; o < end; o += CHUNK) {
			uint64_t len = end - o < CHUNK ? end - o : CHUNK;
			ssize_t r = pread(fd, buf, len, (off_t)o);
			if (r != (ssize_t)len) {
				perror(path);
				exit(1);
			}
			count_range(c, buf, len);
			*pages += len / 4096;
			if (fd0 >= 0) {
				ssize_t r0 = pread(fd0, ref, len, (off_t)o);
				for (uint64_t k = 0; r0 > 0 && k + 4096 <= (uint64_t)r0; k += 4096)
					*same += memcmp(buf + k, ref + k, 4096) == 0;
			}
		}
		off = end;
	}
	free(buf);
	free(ref);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	bool allocated = false;
	const char *json = NULL;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--allocated") == 0)
			allocated = true;
		else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
			json = argv[++i];
		else
			break;
	}
	if (i == argc || argv[i][0] == '-') {
		fprintf(stderr, "usage: dedup_truth [--allocated] [--json FILE] IMAGE...\n");
		return 2;
	}
	const int nimg = argc - i;
	char **img = argv + i;
	uint64_t total = 0;
	for (int k = 0; k < nimg; k++) {
		struct stat st;
		if (stat(img[k], &st) < 0) {
			perror(img[k]);
			return 1;
		}
		total += (uint64_t)st.st_size;
	}
	struct count c[NBS] = { 0 };
	for (int b = 0; b < NBS; b++)
		set_init(&c[b].set, allocated ? total / bsizes[b] / 2 : total / bsizes[b]);
	uint64_t *same = calloc((size_t)nimg, sizeof *same), *pages = calloc((size_t)nimg, sizeof *pages);
	int fd0 = -1;
	for (int k = 0; k < nimg; k++) {
		if (scan(img[k], allocated, c, fd0, &same[k], &pages[k]) < 0)
			return 1;
		if (k == 0 && (fd0 = open(img[0], O_RDONLY | O_CLOEXEC)) < 0) {
			perror(img[0]);
			return 1;
		}
	}
	printf("Block dedup ground truth: %d images, %.1f MiB %s\n", nimg,
	       (double)(c[NBS - 1].blocks * 4096) / (1 << 20),
	       allocated ? "of data extents (what a hole-aware reader reads)" : "(every block)");
	printf("%6s %10s %10s %7s | %7s %12s | %7s\n", "block", "blocks", "distinct", "zero", "factor",
	       "w/o zeroes", "dup");
	for (int b = 0; b < NBS; b++) {
		const struct count *x = &c[b];
		uint64_t nz = x->blocks - x->zero, dnz = x->set.n;
		uint64_t distinct = dnz + (x->zero > 0);
		printf("%6u %10llu %10llu %6.1f%% | %7.3f %12.3f | %6.1f%%\n", bsizes[b],
		       (unsigned long long)x->blocks, (unsigned long long)distinct,
		       100.0 * (double)x->zero / (double)x->blocks, (double)x->blocks / (double)distinct,
		       dnz ? (double)nz / (double)dnz : NAN,
		       100.0 * (1 - (double)distinct / (double)x->blocks));
	}
	printf("4 KiB blocks equal to the first image's at the same offset:");
	for (int k = 1; k < nimg; k++)
		printf(" %.1f%%", 100.0 * (double)same[k] / (double)(pages[k] ? pages[k] : 1));
	putchar('\n');
	if (json) {
		FILE *f = bench_json_open(json, "dedup_truth", "host CPU");
		fprintf(f, ",\n  \"images\": %d,\n  \"allocated_only\": %s,\n  \"block_sizes\": [", nimg,
			allocated ? "true" : "false");
		for (int b = 0; b < NBS; b++) {
			const struct count *x = &c[b];
			uint64_t distinct = x->set.n + (x->zero > 0);
			fprintf(f, "%s\n    {\"block\": %u, \"blocks\": %llu, \"distinct\": %llu, "
				   "\"zero\": %llu",
				b ? "," : "", bsizes[b], (unsigned long long)x->blocks,
				(unsigned long long)distinct, (unsigned long long)x->zero);
			bench_json_field(f, "", "factor", (double)x->blocks / (double)distinct);
			bench_json_field(f, "", "factor_nonzero",
					 (double)(x->blocks - x->zero) / (double)(x->set.n ? x->set.n : 1));
			fputc('}', f);
		}
		fputs("\n  ],\n  \"same_offset_4k\": [", f);
		for (int k = 1; k < nimg; k++) {
			fputs(k > 1 ? ", " : "", f);
			bench_json_num(f, (double)same[k] / (double)(pages[k] ? pages[k] : 1));
		}
		fputc(']', f);
		bench_json_close(f);
	}
	if (fd0 >= 0)
		close(fd0);
	return 0;
}
