/* The README's GPUfs example, complete (README "Files from GPU kernels"):
 * every warp opens a file by path, reads the 4 KiB record its data chose
 * and sums its bytes; the host checks the total with pread.
 *
 *   gpufs_sum FILE [MIB]
 *
 * FILE is made (MIB MiB, default 64, a byte pattern) when it is missing.
 * Exit 0: the kernel's sum is the host's; 1: an error or a wrong sum;
 * 77: no usable GPU (the reason on stderr). Built with the CUDA backend;
 * the test example_gpufs_sum runs it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vramcache.h>
#include <vramcache/gpufs.cuh>

#define WARPS 4096
#define WPB 4 /* warps per block */

// Each warp reads the 4 KiB record its data chose and sums it.
__global__ void sum_records(struct vc_gfs_ctx g, const char *path, const uint32_t *which,
			    unsigned long long *out, int *errs)
{
	__shared__ unsigned char rec[WPB][4096];
	unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, w = threadIdx.x / 32;
	int fd = vc_gopen(&g, path, VC_GO_RDONLY); // all lanes, the same arguments
	int64_t n = fd < 0 ? fd : vc_gread(&g, fd, (uint64_t)which[warp] * 4096, 4096, rec[w]);
	if (n != 4096) {
		if (threadIdx.x % 32 == 0)
			atomicAdd(errs, 1);
	} else {
		unsigned long long s = 0;
		for (int i = threadIdx.x % 32; i < 4096; i += 32)
			s += rec[w][i];
		atomicAdd(out, s);
	}
	if (fd >= 0)
		vc_gclose(&g, fd);
}

static int make_file(const char *path, uint64_t mib)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		return -errno;
	static unsigned char buf[1 << 20];
	for (uint64_t m = 0; m < mib; m++) {
		for (size_t i = 0; i < sizeof buf; i++)
			buf[i] = (unsigned char)((m * 131 + i * 7 + i / 4096) & 0xff);
		if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) {
			close(fd);
			return -EIO;
		}
	}
	return close(fd) < 0 ? -errno : 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: gpufs_sum FILE [MIB]\n");
		return 1;
	}
	const char *path = argv[1];
	struct stat st;
	if (stat(path, &st) < 0) {
		int r = make_file(path, argc == 3 ? strtoull(argv[2], NULL, 0) : 64);
		if (r < 0 || stat(path, &st) < 0) {
			fprintf(stderr, "gpufs_sum: %s: cannot make it (%d)\n", path, r);
			return 1;
		}
	}
	const uint64_t nrec = (uint64_t)st.st_size / 4096;
	if (nrec == 0) {
		fprintf(stderr, "gpufs_sum: %s: smaller than one record\n", path);
		return 1;
	}
	int ndev = 0;
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		fprintf(stderr, "gpufs_sum: skipped: no CUDA device\n");
		return 77;
	}

	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path;
	cfg.flags = VC_OPEN_READONLY;
	cfg.device = VC_DEVICE_CUDA;
	cfg.gpu_bytes = 256ull << 20;
	vc_cache *c;
	vc_gpufs *gfs;
	struct vc_gfs_ctx g;
	int r = vc_open(&cfg, &c);
	if (r == 0)
		r = vc_gpufs_create(c, NULL, &gfs);
	if (r == 0)
		r = vc_gpufs_ctx(gfs, &g);
	if (r < 0) {
		fprintf(stderr, "gpufs_sum: %s\n", vc_strerror(r));
		return 1;
	}

	uint32_t *which;                 // record numbers: data the kernel chose from
	unsigned long long *out;
	int *errs;
	char *dpath;                     // the path, where the kernel can read it
	if (cudaMallocManaged(&which, WARPS * sizeof *which) != cudaSuccess ||
	    cudaMallocManaged(&out, sizeof *out) != cudaSuccess ||
	    cudaMallocManaged(&errs, sizeof *errs) != cudaSuccess ||
	    cudaMallocManaged(&dpath, strlen(path) + 1) != cudaSuccess) {
		fprintf(stderr, "gpufs_sum: cudaMallocManaged failed\n");
		return 1;
	}
	for (int i = 0; i < WARPS; i++)
		which[i] = (uint32_t)(((uint64_t)i * 2654435761u) % nrec);
	strcpy(dpath, path);
	*out = 0;
	*errs = 0;
	sum_records<<<WARPS / WPB, WPB * 32>>>(g, dpath, which, out, errs);
	cudaError_t ce = cudaDeviceSynchronize();
	vc_gpufs_release(gfs);           // after the kernels: the pins go back
	vc_gpufs_destroy(gfs);
	if (ce != cudaSuccess) {
		fprintf(stderr, "gpufs_sum: kernel: %s\n", cudaGetErrorString(ce));
		return 1;
	}

	unsigned long long want = 0;     // the same sum, with pread
	int fd = open(path, O_RDONLY);
	static unsigned char rec[4096];
	for (int i = 0; fd >= 0 && i < WARPS; i++) {
		if (pread(fd, rec, sizeof rec, (off_t)which[i] * 4096) != (ssize_t)sizeof rec)
			break;
		for (int k = 0; k < 4096; k++)
			want += rec[k];
	}
	if (fd >= 0)
		close(fd);
	printf("gpufs_sum: %d warps, %llu records in %s: sum %llu, host %llu, %d errors\n", WARPS,
	       (unsigned long long)nrec, path, *out, want, *errs);
	int bad = *errs != 0 || *out != want;
	return (vc_close(c) < 0 || bad) ? 1 : 0;
}
