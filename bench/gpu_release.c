/* Giving GPU memory back (issue 12): how long vc_gpu_shrink takes to hand
 * B bytes of a full GPU tier back to the device, with clean pages and with
 * a share of them dirty, and how long vc_gpu_grow takes to map them again.
 *
 * Setup: a sparse backing file (holes read as zeros, so filling is cheap),
 * a host tier of 64 MiB (or a 16th of the GPU tier) and a GPU tier of --gpu-bytes, filled with
 * vc_prefetch into the GPU tier. Dirty case: write-back, and every k-th
 * page of the tier written after the fill (promoted, written, demoted back
 * dirty as the host tier turns over), so that --dirty of the GPU tier's
 * pages are dirty when the shrink starts, in a tier of --release bytes
 * given back whole; the shrink writes them back, and its time is bounded
 * by the store's write rate (reported).
 * Baseline, same run: the device's own cost of giving the same bytes back
 * by the same chunks without a cache in front (mem_map then mem_unmap of
 * each chunk, timed: the memset and the driver calls), so the table shows
 * what the engine adds.
 *
 * Usage: gpu_release [--device auto|emu|cuda] [--gpu-bytes B] [--release B]
 *                    [--chunk B] [--dirty SHARE] [--quick] [--json FILE]
 * Defaults: 12 GiB tier, 10 GiB released, 256 MiB chunks (the default
 * chunk), 10% dirty; --quick: 256 MiB tier, 192 MiB released, 32 MiB
 * chunks (the 2-core machine). Goal (issue 12): <= 20 ms for 10 GiB clean.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#define BENCH_NAME "gpu_release"
#include "bench.h"
#include "base/clock.h"
#include "device/device.h"

#define PS 4096u

struct result {
	const char *name;
	double shrink_ms, grow_ms;
	uint64_t released, dirty_pages, written, moved;
};

static double ms_since(uint64_t t0)
{
	return (double)(vc_now_ns() - t0) / 1e6;
}

static uint64_t parse_size(const char *s)
{
	char *e;
	double v = strtod(s, &e);
	switch (*e) {
	case 'G': case 'g': v *= 1024; /* fall through */
	case 'M': case 'm': v *= 1024; /* fall through */
	case 'K': case 'k': v *= 1024; e++; break;
	default: break;
	}
	if (*e || v <= 0) {
		fprintf(stderr, BENCH_NAME ": bad size \"%s\"\n", s);
		exit(2);
	}
	return (uint64_t)v;
}

static struct result run(int device, const char *path, uint64_t gpu, uint64_t release,
			 uint64_t chunk, double dirty, char *desc, size_t desclen)
{
	struct result res = { .name = dirty > 0 ? "dirty" : "clean" };
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.device = device;
	/* 64 MiB, or a 16th of the GPU tier (--quick): the dirty pages must
	 * not all fit the host tier. */
	cfg.host_bytes = gpu / 16 < (64ull << 20) ? gpu / 16 : 64ull << 20;
	cfg.gpu_bytes = gpu;
	cfg.gpu_chunk_bytes = chunk;
	cfg.write_mode = dirty > 0 ? VC_WRITE_BACK : VC_WRITE_THROUGH;
	vc_cache *c;
	BENCH_OK(vc_open(&cfg, &c));
	snprintf(desc, desclen, "%s", vc_device_desc(c));
	uint64_t t = vc_now_ns();
	BENCH_OK(vc_prefetch(c, 0, gpu, VC_TIER_GPU));
	if (dirty > 0) {
		unsigned char page[PS];
		memset(page, 0xA5, sizeof page);
		uint64_t every = (uint64_t)(1 / dirty + 0.5);
		for (uint64_t off = 0; off < gpu; off += every * PS) {
			ssize_t w = vc_write(c, page, PS, off);
			if (w != PS)
				bench_die("dirty write", w < 0 ? (int)w : -EIO);
		}
	}
	struct vc_stats a = { .size = sizeof a }, b = { .size = sizeof b };
	BENCH_OK(vc_get_stats(c, &a));
	fprintf(stderr, "%s: filled in %.1f s: %llu pages in the GPU tier, %llu dirty\n", res.name,
		ms_since(t) / 1e3, (unsigned long long)a.pages_cached[VC_TIER_GPU],
		(unsigned long long)a.dirty_pages);
	t = vc_now_ns();
	BENCH_OK(vc_gpu_shrink(c, release, VC_SHRINK_REQUESTED, &res.released));
	res.shrink_ms = ms_since(t);
	BENCH_OK(vc_get_stats(c, &b));
	res.dirty_pages = a.dirty_pages;
	res.written = b.backing_write_bytes - a.backing_write_bytes;
	res.moved = b.gpu_shrink_pages_moved - a.gpu_shrink_pages_moved;
	uint64_t got;
	t = vc_now_ns();
	BENCH_OK(vc_gpu_grow(c, res.released, &got));
	res.grow_ms = ms_since(t);
	BENCH_OK(vc_close(c));
	return res;
}

/* The store alone: the dirty run's write-back pattern (a page every
 * 1/dirty pages of `bytes`) written with pwrite, as the engine's write-back
 * does (no sync): MB/s, the limit of the dirty case. */
static double store_rate(const char *path, uint64_t bytes, double dirty)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		bench_die("store baseline", -errno);
	unsigned char page[PS];
	memset(page, 0x5A, sizeof page);
	uint64_t every = (uint64_t)(1 / dirty + 0.5), n = 0, t = vc_now_ns();
	for (uint64_t off = 0; off < bytes; off += every * PS, n++)
		if (pwrite(fd, page, PS, (off_t)off) != PS)
			bench_die("store baseline pwrite", -errno);
	double ms = ms_since(t);
	close(fd);
	return (double)n * PS / 1e3 / ms;
}

/* The device alone: map then unmap `release` bytes by chunks; the unmap's
 * time is what handing the bytes back costs without the cache. */
static void baseline(int device, uint64_t release, uint64_t chunk, double *map_ms, double *unmap_ms)
{
	struct vc_device *d;
	BENCH_OK(vc_device_open(device, 0, &d));
	uint64_t n = (release + chunk - 1) / chunk, base;
	*map_ms = *unmap_ms = 0;
	if (!d->ops->mem_reserve || !d->map_granularity) {
		vc_device_close(d);
		*map_ms = *unmap_ms = NAN;
		return;
	}
	BENCH_OK(d->ops->mem_reserve(d, n * chunk, &base));
	uint64_t t = vc_now_ns();
	for (uint64_t i = 0; i < n; i++)
		BENCH_OK(d->ops->mem_map(d, base + i * chunk, chunk));
	*map_ms = ms_since(t);
	t = vc_now_ns();
	for (uint64_t i = 0; i < n; i++)
		BENCH_OK(d->ops->mem_unmap(d, base + i * chunk, chunk));
	*unmap_ms = ms_since(t);
	d->ops->mem_unreserve(d, base, n * chunk);
	vc_device_close(d);
}

int main(int argc, char **argv)
{
	int device = VC_DEVICE_AUTO;
	uint64_t gpu = 12ull << 30, release = 10ull << 30, chunk = 256ull << 20;
	double dirty = 0.10;
	const char *json = NULL;
	bool quick = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--quick")) {
			quick = true;
			gpu = 256ull << 20, release = 192ull << 20, chunk = 32ull << 20;
		} else if (!strcmp(a, "--device") && v) {
			device = vc_device_parse(v), i++;
		} else if (!strcmp(a, "--gpu-bytes") && v) {
			gpu = parse_size(v), i++;
		} else if (!strcmp(a, "--release") && v) {
			release = parse_size(v), i++;
		} else if (!strcmp(a, "--chunk") && v) {
			chunk = parse_size(v), i++;
		} else if (!strcmp(a, "--dirty") && v) {
			dirty = atof(v), i++;
		} else if (!strcmp(a, "--json") && v) {
			json = v, i++;
		} else {
			fprintf(stderr, "usage: gpu_release [--device auto|emu|cuda] [--gpu-bytes B] "
					"[--release B] [--chunk B] [--dirty SHARE] [--quick] [--json FILE]\n");
			return 2;
		}
	}
	if (device < 0 || release > gpu || !(dirty > 0 && dirty <= 1)) {
		fprintf(stderr, BENCH_NAME ": bad --device, --release above --gpu-bytes, or --dirty "
				"outside (0, 1]\n");
		return 2;
	}
	char path[] = "/tmp/vc-release-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, (off_t)(gpu + (64ull << 20))) < 0) {
		perror(BENCH_NAME ": backing file");
		return 1;
	}
	char desc[160];
	struct result r[2];
	r[0] = run(device, path, gpu, release, chunk, 0, desc, sizeof desc);
	/* Dirty: a tier of just the bytes asked back, so that every dirty
	 * page is in the chunks that go (a larger tier would give back the
	 * chunks that hold clean pages and keep the dirty ones). */
	r[1] = run(device, path, release, release, chunk, dirty, desc, sizeof desc);
	double store_mbs = store_rate(path, release, dirty);
	close(fd);
	unlink(path);
	double map_ms, unmap_ms;
	baseline(device, release, chunk, &map_ms, &unmap_ms);

	printf("gpu_release on %s: GPU tier %.1f GiB in chunks of %llu MiB, %.1f GiB asked back\n",
	       desc, gpu / 1073741824.0, (unsigned long long)(chunk >> 20), release / 1073741824.0);
	printf("%-8s %10s %12s %10s %12s %12s %10s\n", "pages", "shrink ms", "released GiB",
	       "dirty", "written MiB", "store MB/s", "grow ms");
	for (int i = 0; i < 2; i++)
		printf("%-8s %10.2f %12.2f %10llu %12.1f %12.0f %10.2f\n", r[i].name, r[i].shrink_ms,
		       r[i].released / 1073741824.0, (unsigned long long)r[i].dirty_pages,
		       r[i].written / 1048576.0,
		       r[i].written ? r[i].written / 1e3 / r[i].shrink_ms : 0.0, r[i].grow_ms);
	printf("device alone, same chunks: unmap (zero + give back) %.2f ms, map %.2f ms; the store "
	       "alone, the dirty pages' pattern with pwrite: %.0f MB/s\n", unmap_ms, map_ms, store_mbs);
	printf("clean shrink / device alone: %.2fx; goal (issue 12) <= 20 ms for 10 GiB clean%s\n",
	       r[0].shrink_ms / unmap_ms, quick ? " (--quick: smaller)" : "");
	if (json) {
		FILE *f = bench_json_open(json, "gpu_release", desc);
		fprintf(f, ",\n  \"gpu_bytes\": %llu, \"release_bytes\": %llu, \"chunk_bytes\": %llu",
			(unsigned long long)gpu, (unsigned long long)release, (unsigned long long)chunk);
		bench_json_field(f, "  ", "device_unmap_ms", unmap_ms);
		bench_json_field(f, "  ", "device_map_ms", map_ms);
		bench_json_field(f, "  ", "store_alone_mb_s", store_mbs);
		fputs(",\n  \"runs\": [", f);
		for (int i = 0; i < 2; i++) {
			fprintf(f, "%s\n    {\"pages\": \"%s\", \"released\": %llu, \"dirty_pages\": %llu, "
				   "\"written_bytes\": %llu, \"moved_pages\": %llu, \"shrink_ms\": ",
				i ? "," : "", r[i].name, (unsigned long long)r[i].released,
				(unsigned long long)r[i].dirty_pages, (unsigned long long)r[i].written,
				(unsigned long long)r[i].moved);
			bench_json_num(f, r[i].shrink_ms);
			fputs(", \"grow_ms\": ", f);
			bench_json_num(f, r[i].grow_ms);
			fputs("}", f);
		}
		fputs("\n  ]", f);
		bench_json_close(f);
	}
	return 0;
}
