/* Can the GPU's copy engines take 4 KiB records straight from the OS page
 * cache? (issue 15's cold goal: >= 38 GB/s effective for records of a file
 * that the OS page cache holds; docs/GPUFS.md "Cold from the OS page cache").
 *
 * The file is read once (so the OS page cache holds it), mapped read-only
 * and registered with cudaHostRegisterReadOnly: its page-cache pages are
 * then pinned and device-visible, and a batch of scattered 4 KiB copies
 * (cudaMemcpyBatchAsync, the copy engines) gathers records into device
 * memory with no CPU copy. Side by side, in one run, over the same random
 * records:
 *
 *   register     what registering the mapping costs (once per file), s/GiB
 *   ce-gather    copy-engine batches from the registered mapping
 *   zc-gather    a kernel reading the records through the mapping (zero copy)
 *   pread+copy   what the miss path does today: T threads pread records into
 *                pinned staging, then one copy per batch
 *   bulk         one pinned buffer of the same bytes in one cudaMemcpy:
 *                the link's limit
 *
 * Every variant's records are checked against pread's (a checksum). Where
 * the device or the kernel refuses the registration (the attribute
 * cudaDevAttrHostRegisterReadOnlySupported, or the call), it says so and
 * the mapping variants are skipped: that answers the question too.
 *
 *   pagecache_dma --file F [--create-gib N] [--records N] [--batch N]
 *                 [--threads T] [--json OUT]
 * Exit 77 without a GPU. */
#include <cuda_runtime.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define BENCH_NAME "pagecache_dma"
#include "bench.h"

#define REC 4096u

/* The file, made when missing: each 8-byte word its own offset, mixed. */
static void make_file(const char *path, uint64_t gib)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0) {
		perror(path);
		exit(1);
	}
	static uint64_t buf[(8u << 20) / 8];
	for (uint64_t off = 0; off < (gib << 30); off += sizeof buf) {
		for (size_t i = 0; i < sizeof buf / 8; i++)
			buf[i] = bench_mix64(off / 8 + i);
		if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) {
			perror("write");
			exit(1);
		}
	}
	close(fd);
}

/* Reads the whole file once, so that the OS page cache holds it. */
static void warm(int fd, uint64_t size)
{
	static char buf[8u << 20];
	for (uint64_t off = 0; off < size;) {
		ssize_t n = pread(fd, buf, sizeof buf, (off_t)off);
		if (n <= 0)
			break;
		off += (uint64_t)n;
	}
}

/* The sum of a record's words, every record of a set: the check. */
static uint64_t sum_host(const uint64_t *recs, uint64_t n)
{
	uint64_t s = 0;
	for (uint64_t i = 0; i < n * (REC / 8); i++)
		s += recs[i];
	return s;
}

__global__ void k_sum(const uint64_t *recs, uint64_t words, unsigned long long *out)
{
	unsigned long long s = 0;
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < words;
	     i += (uint64_t)gridDim.x * blockDim.x)
		s += recs[i];
	atomicAdd(out, s);
}

/* Zero copy: warp w copies record idx[w] from the mapping (16 B a lane). */
__global__ void k_gather(const uint4 *map, const uint64_t *idx, uint64_t n, uint4 *dst)
{
	uint64_t w = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32;
	unsigned lane = threadIdx.x % 32;
	for (; w < n; w += (uint64_t)gridDim.x * blockDim.x / 32)
		for (unsigned k = lane; k < REC / 16; k += 32)
			dst[w * (REC / 16) + k] = map[idx[w] * (REC / 16) + k];
}

static uint64_t dev_sum(const uint64_t *d, uint64_t n, unsigned long long *acc)
{
	*acc = 0;
	k_sum<<<264, 256>>>(d, n * (REC / 8), acc);
	BENCH_CUOK(cudaDeviceSynchronize());
	return *acc;
}

struct pr_arg {
	int fd;
	const uint64_t *idx;
	uint64_t lo, hi;
	char *stage;
};

static void *pr_worker(void *p)
{
	struct pr_arg *a = (struct pr_arg *)p;
	for (uint64_t i = a->lo; i < a->hi; i++)
		if (pread(a->fd, a->stage + i * REC, REC, (off_t)(a->idx[i] * REC)) != (ssize_t)REC) {
			perror("pread");
			exit(1);
		}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *path = NULL, *json = NULL;
	uint64_t create_gib = 0, nrec = 262144, batch = 4096;
	int threads = 16;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--file") && i + 1 < argc)
			path = argv[++i];
		else if (!strcmp(argv[i], "--create-gib") && i + 1 < argc)
			create_gib = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--records") && i + 1 < argc)
			nrec = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			batch = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--json") && i + 1 < argc)
			json = argv[++i];
		else {
			fprintf(stderr, "usage: pagecache_dma --file F [--create-gib N] [--records N] "
					"[--batch N] [--threads T] [--json OUT]\n");
			return 2;
		}
	}
	if (!path || nrec == 0 || batch == 0 || threads < 1 || threads > 256) {
		fprintf(stderr, BENCH_NAME ": --file is required; records, batch, threads > 0\n");
		return 2;
	}
	struct cudaDeviceProp prop;
	if (!bench_cuda_open(&prop))
		return 77;
	struct stat st;
	if (stat(path, &st) < 0 && create_gib)
		make_file(path, create_gib);
	if (stat(path, &st) < 0 || (uint64_t)st.st_size < REC) {
		fprintf(stderr, BENCH_NAME ": %s: missing or smaller than a record\n", path);
		return 1;
	}
	const uint64_t size = (uint64_t)st.st_size / REC * REC, nfile = size / REC;
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		perror(path);
		return 1;
	}
	double t0 = bench_now_s();
	warm(fd, size);
	const double warm_s = bench_now_s() - t0;

	uint64_t *idx, *want_recs;
	BENCH_CUOK(cudaMallocManaged(&idx, nrec * sizeof *idx));
	for (uint64_t i = 0; i < nrec; i++)
		idx[i] = bench_mix64(i ^ 0x5bd1e995) % nfile;
	uint64_t *dst;
	BENCH_CUOK(cudaMalloc(&dst, nrec * REC));
	unsigned long long *acc;
	BENCH_CUOK(cudaMallocManaged(&acc, sizeof *acc));
	char *stage;
	BENCH_CUOK(cudaMallocHost(&stage, nrec * REC));
	want_recs = (uint64_t *)stage;

	/* pread + copy (and the reference records) */
	pthread_t th[256];
	struct pr_arg pa[256];
	double pr_s = 0;
	for (uint64_t b0 = 0; b0 < nrec; b0 += batch) {
		const uint64_t b1 = b0 + batch < nrec ? b0 + batch : nrec;
		t0 = bench_now_s();
		for (int t = 0; t < threads; t++) {
			pa[t] = (struct pr_arg){ fd, idx, b0 + (b1 - b0) * t / threads,
						 b0 + (b1 - b0) * (t + 1) / threads, stage };
			pthread_create(&th[t], NULL, pr_worker, &pa[t]);
		}
		for (int t = 0; t < threads; t++)
			pthread_join(th[t], NULL);
		BENCH_CUOK(cudaMemcpy((char *)dst + b0 * REC, stage + b0 * REC, (b1 - b0) * REC,
				      cudaMemcpyHostToDevice));
		pr_s += bench_now_s() - t0;
	}
	const uint64_t want = sum_host(want_recs, nrec);
	const bool pr_ok = dev_sum(dst, nrec, acc) == want;

	/* bulk: the same bytes, one pinned buffer, one copy */
	t0 = bench_now_s();
	BENCH_CUOK(cudaMemcpy(dst, stage, nrec * REC, cudaMemcpyHostToDevice));
	const double bulk_s = bench_now_s() - t0;

	/* register the mapping */
	int ro_attr = 0, reg_attr = 0, pageable = 0;
	cudaDeviceGetAttribute(&ro_attr, cudaDevAttrHostRegisterReadOnlySupported, 0);
	cudaDeviceGetAttribute(&reg_attr, cudaDevAttrHostRegisterSupported, 0);
	cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, 0);
	void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	t0 = bench_now_s();
	cudaError_t reg = cudaHostRegister(map, size, cudaHostRegisterReadOnly | cudaHostRegisterMapped);
	const double reg_s = bench_now_s() - t0;
	if (reg != cudaSuccess)
		(void)cudaGetLastError();
	double ce_s = -1, zc_s = -1;
	bool ce_ok = false, zc_ok = false;
	if (reg == cudaSuccess) {
		cudaStream_t s;
		BENCH_CUOK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
		void **dsts = (void **)malloc(batch * sizeof *dsts);
		const void **srcs = (const void **)malloc(batch * sizeof *srcs);
		size_t *sizes = (size_t *)malloc(batch * sizeof *sizes);
		BENCH_CUOK(cudaMemset(dst, 0, nrec * REC));
		t0 = bench_now_s();
		for (uint64_t b0 = 0; b0 < nrec; b0 += batch) {
			const uint64_t n = b0 + batch < nrec ? batch : nrec - b0;
			for (uint64_t i = 0; i < n; i++) {
				dsts[i] = (char *)dst + (b0 + i) * REC;
				srcs[i] = (const char *)map + idx[b0 + i] * REC;
				sizes[i] = REC;
			}
			struct cudaMemcpyAttributes a;
			memset(&a, 0, sizeof a);
			a.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
			a.flags = cudaMemcpyFlagPreferOverlapWithCompute;
			size_t first = 0;
			BENCH_CUOK(cudaMemcpyBatchAsync(dsts, srcs, sizes, n, &a, &first, 1, s));
			/* the batch's arrays are read at the call: reusable now */
		}
		BENCH_CUOK(cudaStreamSynchronize(s));
		ce_s = bench_now_s() - t0;
		ce_ok = dev_sum(dst, nrec, acc) == want;

		void *dmap;
		if (cudaHostGetDevicePointer(&dmap, map, 0) == cudaSuccess) {
			BENCH_CUOK(cudaMemset(dst, 0, nrec * REC));
			t0 = bench_now_s();
			k_gather<<<prop.multiProcessorCount * 8, 256>>>((const uint4 *)dmap, idx, nrec,
									(uint4 *)dst);
			BENCH_CUOK(cudaDeviceSynchronize());
			zc_s = bench_now_s() - t0;
			zc_ok = dev_sum(dst, nrec, acc) == want;
		}
		cudaHostUnregister(map);
		free(dsts);
		free(srcs);
		free(sizes);
		cudaStreamDestroy(s);
	}

	const double gb = (double)nrec * REC / 1e9;
	printf("Records of a file in the OS page cache to device memory: %s, %.1f GiB, "
	       "%llu random 4 KiB records, batches of %llu, %d pread threads (warm read %.1f s)\n",
	       prop.name, size / 1073741824.0, (unsigned long long)nrec, (unsigned long long)batch,
	       threads, warm_s);
	printf("device attributes: hostRegisterSupported %d, hostRegisterReadOnlySupported %d, "
	       "pageableMemoryAccess %d\n", reg_attr, ro_attr, pageable);
	printf("register (read-only mapping): %s, %.3f s (%.3f s/GiB)\n",
	       reg == cudaSuccess ? "ok" : cudaGetErrorString(reg), reg_s, reg_s / (size / 1073741824.0));
	printf("%-12s %10s %8s %6s\n", "variant", "GB/s", "vs bulk", "check");
	const double bulk = gb / bulk_s;
	printf("%-12s %10.2f %8.3f %6s\n", "bulk", bulk, 1.0, "-");
	printf("%-12s %10.2f %8.3f %6s\n", "pread+copy", gb / pr_s, gb / pr_s / bulk, pr_ok ? "ok" : "BAD");
	if (ce_s > 0)
		printf("%-12s %10.2f %8.3f %6s\n", "ce-gather", gb / ce_s, gb / ce_s / bulk, ce_ok ? "ok" : "BAD");
	else
		printf("%-12s %10s\n", "ce-gather", "skipped");
	if (zc_s > 0)
		printf("%-12s %10.2f %8.3f %6s\n", "zc-gather", gb / zc_s, gb / zc_s / bulk, zc_ok ? "ok" : "BAD");
	else
		printf("%-12s %10s\n", "zc-gather", "skipped");
	if (json) {
		FILE *f = bench_json_open(json, BENCH_NAME, prop.name);
		bench_json_field(f, "  ", "file_gib", size / 1073741824.0);
		bench_json_field(f, "  ", "records", (double)nrec);
		bench_json_field(f, "  ", "batch", (double)batch);
		bench_json_field(f, "  ", "threads", threads);
		bench_json_field(f, "  ", "register_ro_supported", ro_attr);
		bench_json_field(f, "  ", "register_ok", reg == cudaSuccess);
		bench_json_field(f, "  ", "register_s_per_gib", reg_s / (size / 1073741824.0));
		bench_json_field(f, "  ", "bulk_gbs", bulk);
		bench_json_field(f, "  ", "pread_copy_gbs", gb / pr_s);
		bench_json_field(f, "  ", "ce_gather_gbs", ce_s > 0 ? gb / ce_s : 0);
		bench_json_field(f, "  ", "zc_gather_gbs", zc_s > 0 ? gb / zc_s : 0);
		bench_json_field(f, "  ", "checks_ok", pr_ok && (ce_s < 0 || ce_ok) && (zc_s < 0 || zc_ok));
		bench_json_close(f);
	}
	munmap(map, size);
	close(fd);
	return pr_ok && (ce_s < 0 || ce_ok) && (zc_s < 0 || zc_ok) ? 0 : 1;
}
