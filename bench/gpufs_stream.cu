/* Streaming read of a file larger than the GPU tier by a zero-compute
 * kernel (issue 15; GAIA Fig. 6a): warps read the file front to back in
 * chunks with vc_gread, each chunk into the warp's own device buffer, and
 * keep nothing but a check word. Side by side in one run, over the same
 * bytes:
 *
 *   memcpy       cudaMemcpy of the file's size from one pinned buffer
 *                (the link's limit; GAIA's baseline)
 *   pread+copy   16 CPU threads pread the file into pinned buffers, each
 *                chunk copied with cudaMemcpyAsync (what a program without
 *                a GPU file API does)
 *   gpufs        vramcache GPUfs, direct reads (the file is read-only:
 *                pages the cache does not hold come from the OS page cache)
 *   gpufs-cache  the same, VC_GPUFS_NO_DIRECT: every page through the
 *                cache (loaded into the GPU tier, evicting as it goes)
 *
 * The file is in the OS page cache for every variant (read once first).
 * The check: the XOR of every 4 KiB page's first 8 bytes, against the
 * host's. GB/s = file bytes / time; ratios against memcpy.
 *
 *   gpufs_stream --file F [--create-gib N] [--gpu-gib G] [--chunk-kib K]
 *                [--blocks B] [--threads T] [--json OUT]
 * Exit 77 without a GPU. */
#include <cuda_runtime.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#define BENCH_NAME "gpufs_stream"
#include "bench.h"
#include "vramcache/gpufs.cuh"

#define PG 4096u
#define WPB 4u /* warps per block */

/* Warps take chunks in a grid-stride loop; buf: chunk bytes per warp. */
__global__ void k_stream(struct vc_gfs_ctx g, int fd, uint64_t size, uint64_t chunk, unsigned char *bufs,
			 unsigned long long *check, unsigned long long *errs)
{
	unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
	unsigned nw = gridDim.x * blockDim.x / 32, lane = threadIdx.x & 31;
	unsigned char *buf = bufs + (uint64_t)warp * chunk;
	unsigned long long x = 0;
	for (uint64_t off = (uint64_t)warp * chunk; off < size; off += (uint64_t)nw * chunk) {
		uint64_t want = size - off < chunk ? size - off : chunk;
		int64_t r = vc_gread(&g, fd, off, want, buf);
		if (r != (int64_t)want) {
			if (lane == 0)
				atomicAdd(errs, 1ull);
			return;
		}
		__syncwarp();
		for (uint64_t p = lane * PG; p < want; p += 32 * PG)
			x ^= *(const unsigned long long *)(buf + p);
		__syncwarp();
	}
	atomicXor(check, x);
}

struct pjob {
	int fd;
	uint64_t size, chunk;
	unsigned id, n;
	unsigned char *pin; /* chunk bytes per thread */
	unsigned char *dev; /* chunk bytes per thread */
	cudaStream_t s;
	int err;
};

/* pread+copy: thread id reads chunks id, id + n, ... into its pinned
 * buffer and copies each to the device (waiting before reusing it). */
static void *pread_copy(void *p)
{
	struct pjob *j = (struct pjob *)p;
	for (uint64_t off = (uint64_t)j->id * j->chunk; off < j->size; off += (uint64_t)j->n * j->chunk) {
		size_t want = j->size - off < j->chunk ? j->size - off : j->chunk;
		if (pread(j->fd, j->pin, want, (off_t)off) != (ssize_t)want ||
		    cudaMemcpyAsync(j->dev, j->pin, want, cudaMemcpyHostToDevice, j->s) != cudaSuccess ||
		    cudaStreamSynchronize(j->s) != cudaSuccess) {
			j->err = 1;
			break;
		}
	}
	return NULL;
}

static void warm_os_cache(const char *path, uint64_t *xor_out)
{
	int fd = open(path, O_RDONLY);
	unsigned char *b = (unsigned char *)malloc(8u << 20);
	uint64_t x = 0;
	ssize_t n;
	while (fd >= 0 && b && (n = read(fd, b, 8u << 20)) > 0)
		for (ssize_t p = 0; p + 8 <= n; p += PG)
			x ^= *(const uint64_t *)(b + p);
	free(b);
	if (fd >= 0)
		close(fd);
	*xor_out = x;
}

int main(int argc, char **argv)
{
	const char *path = NULL, *json = NULL;
	double create_gib = 0, gpu_gib = 4;
	unsigned chunk_kib = 64, blocks = 0, threads = 16;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--file") && v) path = v, i++;
		else if (!strcmp(a, "--create-gib") && v) create_gib = atof(v), i++;
		else if (!strcmp(a, "--gpu-gib") && v) gpu_gib = atof(v), i++;
		else if (!strcmp(a, "--chunk-kib") && v) chunk_kib = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--blocks") && v) blocks = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--threads") && v) threads = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--json") && v) json = v, i++;
		else {
			fprintf(stderr, "usage: %s --file F [--create-gib N] [--gpu-gib G] [--chunk-kib K] "
					"[--blocks B] [--threads T] [--json OUT]\n", argv[0]);
			return 2;
		}
	}
	if (!path || chunk_kib < 4 || chunk_kib % 4 || threads == 0 || threads > 64)
		return fprintf(stderr, BENCH_NAME ": --file is required; --chunk-kib a multiple of 4; "
					       "threads 1..64\n"), 2;
	struct cudaDeviceProp prop;
	if (!bench_cuda_open(&prop))
		return 77;
	if (create_gib > 0) {
		if (bench_make_random_file(path, (uint64_t)(create_gib * (1ull << 30)), 7) < 0)
			return perror(path), 1;
	}
	struct stat st;
	if (stat(path, &st) < 0)
		return perror(path), 1;
	const uint64_t size = (uint64_t)st.st_size, chunk = (uint64_t)chunk_kib << 10;
	uint64_t want_x;
	warm_os_cache(path, &want_x);
	if (!blocks)
		blocks = 8u * (unsigned)prop.multiProcessorCount;
	const unsigned nwarps = blocks * WPB;
	const char *name[4] = { "memcpy", "pread+copy", "gpufs", "gpufs-cache" };
	double secs[4] = { 0 };
	bool ok[4] = { true, true, false, false };

	/* memcpy: the file's bytes from one pinned buffer, 1 GiB at a time. */
	const uint64_t piece = size < (1ull << 30) ? size : (1ull << 30);
	unsigned char *pin, *dbuf;
	BENCH_CUOK(cudaMallocHost(&pin, piece));
	BENCH_CUOK(cudaMalloc(&dbuf, piece));
	memset(pin, 1, piece);
	BENCH_CUOK(cudaMemcpy(dbuf, pin, piece, cudaMemcpyHostToDevice)); /* first-touch costs out */
	double t0 = bench_now_s();
	for (uint64_t off = 0; off < size; off += piece)
		BENCH_CUOK(cudaMemcpy(dbuf, pin, size - off < piece ? size - off : piece, cudaMemcpyHostToDevice));
	secs[0] = bench_now_s() - t0;
	BENCH_CUOK(cudaFreeHost(pin));
	BENCH_CUOK(cudaFree(dbuf));

	/* pread+copy. */
	{
		int fd = open(path, O_RDONLY);
		struct pjob j[64];
		pthread_t t[64];
		unsigned char *pins, *devs;
		BENCH_CUOK(cudaMallocHost(&pins, (size_t)threads * chunk));
		BENCH_CUOK(cudaMalloc(&devs, (size_t)threads * chunk));
		for (unsigned i = 0; i < threads; i++) {
			j[i] = (struct pjob){ fd, size, chunk, i, threads, pins + i * chunk, devs + i * chunk, 0, 0 };
			BENCH_CUOK(cudaStreamCreateWithFlags(&j[i].s, cudaStreamNonBlocking));
		}
		t0 = bench_now_s();
		for (unsigned i = 0; i < threads; i++)
			if (pthread_create(&t[i], NULL, pread_copy, &j[i]) != 0)
				abort();
		for (unsigned i = 0; i < threads; i++) {
			pthread_join(t[i], NULL);
			ok[1] = ok[1] && !j[i].err;
		}
		secs[1] = bench_now_s() - t0;
		for (unsigned i = 0; i < threads; i++)
			cudaStreamDestroy(j[i].s);
		cudaFreeHost(pins);
		cudaFree(devs);
		close(fd);
	}

	/* gpufs, direct reads and through the cache. */
	unsigned char *bufs;
	unsigned long long *check, *errs;
	BENCH_CUOK(cudaMalloc(&bufs, (size_t)nwarps * chunk));
	BENCH_CUOK(cudaMallocManaged(&check, sizeof *check));
	BENCH_CUOK(cudaMallocManaged(&errs, sizeof *errs));
	struct vc_gpufs_stats gst[2];
	double topen[2] = { 0 };
	for (int v = 0; v < 2; v++) {
		vc_cache *c = bench_ro_cuda_cache(path, (uint64_t)(gpu_gib * (1ull << 30)), 1ull << 30);
		vc_gpufs *gfs;
		struct vc_gfs_ctx g;
		struct vc_gpufs_config gcf;
		vc_gpufs_config_init(&gcf);
		gcf.flags = v ? VC_GPUFS_NO_DIRECT : 0;
		BENCH_OK(vc_gpufs_create(c, &gcf, &gfs));
		BENCH_OK(vc_gpufs_ctx(gfs, &g));
		topen[v] = bench_now_s();
		int fd = vc_gpufs_open(gfs, path, VC_GO_RDONLY);
		BENCH_OK(fd);
		topen[v] = bench_now_s() - topen[v];
		*check = 0;
		*errs = 0;
		t0 = bench_now_s();
		k_stream<<<blocks, WPB * 32>>>(g, fd, size, chunk, bufs, check, errs);
		BENCH_CUOK(cudaGetLastError());
		BENCH_CUOK(cudaDeviceSynchronize());
		secs[2 + v] = bench_now_s() - t0;
		ok[2 + v] = *errs == 0 && *check == want_x;
		BENCH_OK(vc_gpufs_stats(gfs, &gst[v]));
		BENCH_OK(vc_gpufs_close(gfs, fd));
		BENCH_OK(vc_gpufs_destroy(gfs));
		BENCH_OK(vc_close(c));
	}

	printf("%s: %.1f GiB file in the OS page cache, GPU tier %.1f GiB, %u warps, chunks of %u KiB, "
	       "%s\n", BENCH_NAME, size / (double)(1ull << 30), gpu_gib, nwarps, chunk_kib, prop.name);
	printf("%-12s %9s %9s %9s %s\n", "variant", "time s", "GB/s", "vs memcpy", "check");
	for (int i = 0; i < 4; i++)
		printf("%-12s %9.3f %9.2f %9.3f %s\n", name[i], secs[i], size / secs[i] / 1e9, secs[0] / secs[i],
		       ok[i] ? (i ? "ok" : "-") : "WRONG");
	for (int v = 0; v < 2; v++)
		printf("%s: open %.3f s, %llu direct reads, %llu gets, %llu pages loaded in %llu rounds\n",
		       name[2 + v], topen[v], (unsigned long long)gst[v].direct_reads,
		       (unsigned long long)gst[v].gets, (unsigned long long)gst[v].miss_pages,
		       (unsigned long long)gst[v].miss_rounds);
	if (json) {
		FILE *f = bench_json_open(json, BENCH_NAME, prop.name);
		bench_json_field(f, "  ", "file_bytes", (double)size);
		bench_json_field(f, "  ", "gpu_gib", gpu_gib);
		bench_json_field(f, "  ", "warps", nwarps);
		bench_json_field(f, "  ", "chunk_kib", chunk_kib);
		const char *key[4] = { "memcpy_gbs", "pread_copy_gbs", "gpufs_gbs", "gpufs_cache_gbs" };
		for (int i = 0; i < 4; i++)
			bench_json_field(f, "  ", key[i], size / secs[i] / 1e9);
		bench_json_field(f, "  ", "gpufs_open_s", topen[0]);
		bench_json_close(f);
	}
	for (int i = 0; i < 4; i++)
		if (!ok[i])
			return 1;
	return 0;
}
