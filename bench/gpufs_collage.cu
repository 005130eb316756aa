/* Data-driven random reads (issue 15; the collage pattern of GPUfs'16 §2.4):
 * every warp reads a chain of 4 KiB records, each chosen by the checksum
 * of the one before, from a file larger than the GPU tier. Side by side in
 * one run, over the same chains (the final checksums must agree):
 *
 *   gpufs-cold  vramcache GPUfs, a fresh cache, the file dropped from the
 *               OS page cache first (posix_fadvise DONTNEED)
 *   gpufs-warm  the same chains again: records partly in the GPU tier
 *   cpu-orch    CPU-orchestrated CUDA: per step, 16 CPU threads pread each
 *               warp's record into pinned memory, one cudaMemcpy, a kernel
 *               computes the checksums and the next records
 *   uvm         the file in cudaMallocManaged memory (filled by the CPU
 *               first; that fill is timed apart), read by the kernel
 *   cpu         16 threads doing the whole chain with pread
 *
 * Effective bandwidth = records read x 4 KiB / time. Goals (issue 15):
 * cold >= 38 GB/s, >= 3x cpu-orch, >= 5x uvm, warm hits >= 1 TB/s.
 *
 *   gpufs_collage --file F [--create-gib N] [--warps W] [--steps S]
 *                 [--gpu-gib G] [--threads T] [--no-uvm] [--json OUT]
 * --os-cache: the file stays in the OS page cache for every variant (the
 * issue's "cold from the OS page cache"); --release: the grants go between
 * the cold and the warm pass (vc_gpufs_release), so the warm pass asks the
 * host again for every page. */
#include <cuda_runtime.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#define BENCH_NAME "gpufs_collage"
#include "bench.h"
#include "vramcache/gpufs.cuh"

#define REC 4096u
#define WPB 4u /* warps per block */

__host__ __device__ static uint64_t first_rec(unsigned warp, uint64_t nrec)
{
	return bench_mix64(warp + 1) % nrec;
}

__host__ __device__ static uint64_t next_rec(uint64_t sum, unsigned warp, unsigned step, uint64_t nrec)
{
	return bench_mix64(sum ^ ((uint64_t)warp << 32) ^ step) % nrec;
}

/* The checksum of one record: every lane its 16 words, reduced. */
__device__ static uint64_t warp_sum(const uint64_t *w)
{
	unsigned lane = threadIdx.x & 31;
	uint64_t s = 0;
	for (unsigned i = lane; i < REC / 8; i += 32)
		s += w[i] * (i + 1);
	for (int o = 16; o; o >>= 1)
		s += __shfl_xor_sync(0xffffffffu, s, o);
	return s;
}

static uint64_t host_sum(const uint64_t *w)
{
	uint64_t s = 0;
	for (unsigned i = 0; i < REC / 8; i++)
		s += w[i] * (i + 1);
	return s;
}

/* ---- gpufs ---- */
/* fd: opened by the host (vc_gpufs_open), so that 65536 warps do not each
 * send a gopen to the host. */
__global__ void k_gpufs(struct vc_gfs_ctx g, int fd, uint64_t nrec, unsigned steps,
			unsigned nwarps, uint64_t *out, unsigned long long *errs)
{
	__shared__ __align__(16) uint64_t buf[WPB][REC / 8];
	unsigned w = threadIdx.x / 32, stride = gridDim.x * blockDim.x / 32;
	/* With a capped grid (--grid-cap) each warp runs many chains. */
	for (unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32; warp < nwarps; warp += stride) {
		uint64_t r = first_rec(warp, nrec), s = 0;
		for (unsigned k = 0; k < steps; k++) {
			if (vc_gread(&g, fd, r * REC, REC, buf[w]) != REC) {
				if ((threadIdx.x & 31) == 0)
					atomicAdd(errs, 1ull);
				break;
			}
			s = warp_sum(buf[w]);
			__syncwarp();
			r = next_rec(s, warp, k, nrec);
		}
		if ((threadIdx.x & 31) == 0)
			out[warp] = s;
	}
}

/* ---- cpu-orchestrated: one step of every warp ---- */
__global__ void k_step(const uint64_t *recs, uint64_t *cur, uint64_t *sums, uint64_t nrec, unsigned step,
		       unsigned nwarps)
{
	unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
	if (warp >= nwarps)
		return;
	uint64_t s = warp_sum(recs + (uint64_t)warp * (REC / 8));
	if ((threadIdx.x & 31) == 0) {
		sums[warp] = s;
		cur[warp] = next_rec(s, warp, step, nrec);
	}
}

/* ---- uvm ---- */
__global__ void k_uvm(const uint64_t *file, uint64_t nrec, unsigned steps, unsigned nwarps, uint64_t *out)
{
	unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
	if (warp >= nwarps)
		return;
	uint64_t r = first_rec(warp, nrec), s = 0;
	for (unsigned k = 0; k < steps; k++) {
		s = warp_sum(file + r * (REC / 8));
		r = next_rec(s, warp, k, nrec);
	}
	if ((threadIdx.x & 31) == 0)
		out[warp] = s;
}

/* ---- CPU threads ---- */
struct cpu_job {
	int fd;
	uint64_t nrec;
	unsigned steps, nwarps, nthreads, id;
	const uint64_t *cur; /* cpu-orch: the records to fetch */
	unsigned char *dst;  /* cpu-orch: where (pinned) */
	uint64_t *out;       /* cpu: the final sums */
};

static void *cpu_fetch(void *p) /* cpu-orch: this thread's share of one step's records */
{
	struct cpu_job *j = (struct cpu_job *)p;
	for (unsigned w = j->id; w < j->nwarps; w += j->nthreads)
		if (pread(j->fd, j->dst + (uint64_t)w * REC, REC, (off_t)(j->cur[w] * REC)) != REC)
			abort();
	return NULL;
}

static void *cpu_chain(void *p) /* cpu: whole chains */
{
	struct cpu_job *j = (struct cpu_job *)p;
	uint64_t buf[REC / 8];
	for (unsigned w = j->id; w < j->nwarps; w += j->nthreads) {
		uint64_t r = first_rec(w, j->nrec), s = 0;
		for (unsigned k = 0; k < j->steps; k++) {
			if (pread(j->fd, buf, REC, (off_t)(r * REC)) != REC)
				abort();
			s = host_sum(buf);
			r = next_rec(s, w, k, j->nrec);
		}
		j->out[w] = s;
	}
	return NULL;
}

static void run_threads(struct cpu_job *proto, unsigned n, void *(*fn)(void *))
{
	pthread_t t[256];
	struct cpu_job j[256];
	for (unsigned i = 0; i < n; i++) {
		j[i] = *proto;
		j[i].id = i;
		j[i].nthreads = n;
		if (pthread_create(&t[i], NULL, fn, &j[i]) != 0)
			abort();
	}
	for (unsigned i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

/* --os-cache: every variant starts with the file in the OS page cache
 * (read once first) instead of on the disk. */
static bool keep_os_cache;

static void drop_os_cache(const char *path)
{
	if (keep_os_cache)
		return;
	int fd = open(path, O_RDONLY);
	if (fd >= 0) {
		fdatasync(fd);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
}

int main(int argc, char **argv)
{
	const char *path = NULL, *json = NULL;
	double create_gib = 0, gpu_gib = 32;
	unsigned nwarps = 65536, steps = 16, threads = 16, svc = 0, grid_cap = 0;
	unsigned table = 0, max_cached = 0, admit = 0, warm_reps = 3;
	double settle = 0;
	bool direct = true;
	bool uvm = true, os_cache = false, release = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--file") && v) path = v, i++;
		else if (!strcmp(a, "--create-gib") && v) create_gib = atof(v), i++;
		else if (!strcmp(a, "--warps") && v) nwarps = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--steps") && v) steps = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--gpu-gib") && v) gpu_gib = atof(v), i++;
		else if (!strcmp(a, "--threads") && v) threads = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--json") && v) json = v, i++;
		else if (!strcmp(a, "--svc") && v) svc = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--grid-cap") && v) grid_cap = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--table") && v) table = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--max-cached") && v) max_cached = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--admit") && v) admit = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--warm-reps") && v) warm_reps = (unsigned)atoi(v), i++;
		else if (!strcmp(a, "--settle") && v) settle = atof(v), i++;
		else if (!strcmp(a, "--no-direct")) direct = false;
		else if (!strcmp(a, "--no-uvm")) uvm = false;
		else if (!strcmp(a, "--os-cache")) os_cache = true;
		else if (!strcmp(a, "--release")) release = true;
		else {
			fprintf(stderr, "usage: %s --file F [--create-gib N] [--warps W] [--steps S] "
					"[--gpu-gib G] [--threads T] [--svc N] [--grid-cap B] [--table N] "
					"[--max-cached N] [--admit N] [--warm-reps N] [--settle S] [--no-direct] "
					"[--os-cache] [--release] [--no-uvm] "
					"[--json OUT]\n", argv[0]);
			return 2;
		}
	}
	if (!path || threads == 0 || threads > 256 || warm_reps < 1 || warm_reps > 16)
		return fprintf(stderr, BENCH_NAME ": --file is required (threads 1..256, warm-reps "
					       "1..16)\n"), 2;
	struct cudaDeviceProp prop;
	if (!bench_cuda_open(&prop))
		return 77;
	if (create_gib > 0) { /* random records, written once */
		uint64_t n = (uint64_t)(create_gib * (1ull << 30)) / REC;
		if (bench_make_random_file(path, n * REC, 1) < 0)
			return perror(path), 1;
	}
	struct stat st;
	if (stat(path, &st) < 0)
		return perror(path), 1;
	const uint64_t nrec = (uint64_t)st.st_size / REC;
	keep_os_cache = os_cache;
	if (os_cache) { /* into the OS page cache */
		int f = open(path, O_RDONLY);
		char *b = (char *)malloc(8u << 20);
		while (f >= 0 && b && read(f, b, 8u << 20) > 0)
			;
		free(b);
		if (f >= 0)
			close(f);
	}
	const double bytes = (double)nwarps * steps * REC;
	const unsigned blocks = (nwarps + WPB - 1) / WPB;
	/* The GPUfs kernel's grid: every block by default (the host's side
	 * needs no SM: copy engines, revokes by the warps, docs/GPUFS.md);
	 * --grid-cap B: at most B blocks per SM, looping over the chains. */
	const unsigned gcap = grid_cap * (unsigned)prop.multiProcessorCount;
	const unsigned gblocks = grid_cap && blocks > gcap ? gcap : blocks;
	uint64_t *out, *ref;
	unsigned long long *errs;
	BENCH_CUOK(cudaMallocManaged(&out, nwarps * sizeof *out));
	BENCH_CUOK(cudaMallocManaged(&errs, sizeof *errs));
	ref = (uint64_t *)calloc(nwarps, sizeof *ref);
	const char *name[5] = { "gpufs-cold", "gpufs-warm", "cpu-orch", "uvm", "cpu" };
	double secs[5] = { 0 }, extra_uvm_fill = 0;
	bool agree[5] = { false };

	/* cpu: the reference checksums. */
	int fd = open(path, O_RDONLY);
	struct cpu_job proto = { fd, nrec, steps, nwarps, threads, 0, NULL, NULL, ref };
	drop_os_cache(path);
	double t0 = bench_now_s();
	run_threads(&proto, threads, cpu_chain);
	secs[4] = bench_now_s() - t0;
	agree[4] = true;

	/* gpufs, cold then warm. */
	vc_cache *c = bench_ro_cuda_cache(path, (uint64_t)(gpu_gib * (1ull << 30)), 4ull << 30);
	vc_gpufs *gfs;
	struct vc_gfs_ctx g;
	struct vc_gpufs_config gcf;
	vc_gpufs_config_init(&gcf);
	gcf.service_threads = svc;
	gcf.table_entries = table;
	gcf.max_cached = max_cached;
	gcf.admit_every = admit;
	gcf.flags = direct ? 0 : VC_GPUFS_NO_DIRECT;
	BENCH_OK(vc_gpufs_create(c, &gcf, &gfs));
	BENCH_OK(vc_gpufs_ctx(gfs, &g));
	double topen = bench_now_s();
	int gfd = vc_gpufs_open(gfs, path, VC_GO_RDONLY);
	BENCH_OK(gfd);
	topen = bench_now_s() - topen; /* the mapping's registration, when direct */
	/* Pass 0 cold, passes 1..warm_reps warm (the first of them is the
	 * table's gpufs-warm; each one's time is printed): admissions and
	 * grants between them make later ones hit more. --settle S waits S
	 * seconds before each warm pass (hinted pages load meanwhile). */
	struct vc_gpufs_stats ps[17];
	double wsecs[17] = { 0 };
	for (unsigned pass = 0; pass <= warm_reps; pass++) {
		if (pass == 0)
			drop_os_cache(path);
		else if (settle > 0)
			usleep((useconds_t)(settle * 1e6));
		*errs = 0;
		t0 = bench_now_s();
		k_gpufs<<<gblocks, WPB * 32>>>(g, gfd, nrec, steps, nwarps, out, errs);
		BENCH_CUOK(cudaGetLastError());
		BENCH_CUOK(cudaDeviceSynchronize());
		wsecs[pass] = bench_now_s() - t0;
		bool ok = *errs == 0 && !memcmp(out, ref, nwarps * sizeof *out);
		if (pass <= 1) {
			secs[pass] = wsecs[pass];
			agree[pass] = ok;
		} else {
			agree[1] = agree[1] && ok;
		}
		BENCH_OK(vc_gpufs_stats(gfs, &ps[pass]));
		if (release) /* else the warm pass finds the cold pass's grants */
			BENCH_OK(vc_gpufs_release(gfs));
	}
	struct vc_gpufs_stats gs = ps[warm_reps];
	BENCH_OK(vc_gpufs_close(gfs, gfd));
	BENCH_OK(vc_gpufs_destroy(gfs));
	BENCH_OK(vc_close(c));

	/* cpu-orch: per step, the CPU gathers and copies, a kernel computes. */
	uint64_t *cur, *sums, *drecs;
	unsigned char *pin;
	BENCH_CUOK(cudaMallocManaged(&cur, nwarps * sizeof *cur));
	BENCH_CUOK(cudaMallocManaged(&sums, nwarps * sizeof *sums));
	BENCH_CUOK(cudaMallocHost(&pin, (size_t)nwarps * REC));
	BENCH_CUOK(cudaMalloc(&drecs, (size_t)nwarps * REC));
	for (unsigned w = 0; w < nwarps; w++)
		cur[w] = first_rec(w, nrec);
	drop_os_cache(path);
	t0 = bench_now_s();
	for (unsigned k = 0; k < steps; k++) {
		struct cpu_job pj = { fd, nrec, steps, nwarps, threads, 0, cur, pin, NULL };
		run_threads(&pj, threads, cpu_fetch);
		BENCH_CUOK(cudaMemcpy(drecs, pin, (size_t)nwarps * REC, cudaMemcpyHostToDevice));
		k_step<<<blocks, WPB * 32>>>(drecs, cur, sums, nrec, k, nwarps);
		BENCH_CUOK(cudaDeviceSynchronize());
	}
	secs[2] = bench_now_s() - t0;
	agree[2] = !memcmp(sums, ref, nwarps * sizeof *sums);

	/* uvm: the file in managed memory (this machine has no HMM). */
	if (uvm) {
		uint64_t *file;
		BENCH_CUOK(cudaMallocManaged(&file, (size_t)nrec * REC));
		drop_os_cache(path);
		t0 = bench_now_s();
		for (uint64_t off = 0; off < nrec * REC; off += 64u << 20) {
			size_t n = nrec * REC - off < (64u << 20) ? nrec * REC - off : (64u << 20);
			if (pread(fd, (char *)file + off, n, (off_t)off) != (ssize_t)n)
				abort();
		}
		extra_uvm_fill = bench_now_s() - t0;
		t0 = bench_now_s();
		k_uvm<<<blocks, WPB * 32>>>(file, nrec, steps, nwarps, out);
		BENCH_CUOK(cudaGetLastError());
		BENCH_CUOK(cudaDeviceSynchronize());
		secs[3] = bench_now_s() - t0;
		agree[3] = !memcmp(out, ref, nwarps * sizeof *out);
		cudaFree(file);
	}
	close(fd);

	printf("%s: %llu records of 4 KiB (%.1f GiB), %u warps x %u steps, %s\n", BENCH_NAME,
	       (unsigned long long)nrec, nrec * (double)REC / (1ull << 30), nwarps, steps, prop.name);
	printf("%-11s %9s %10s %s\n", "variant", "time s", "GB/s eff", "checksums");
	for (int i = 0; i < 5; i++)
		if (secs[i] > 0)
			printf("%-11s %9.3f %10.2f %s\n", name[i], secs[i], bytes / secs[i] / 1e9,
			       agree[i] ? "agree" : "DIFFER");
	if (uvm)
		printf("(uvm: the CPU's fill of managed memory took %.3f s more)\n", extra_uvm_fill);
	printf("gpufs: %llu requests in %llu batches, %llu gets, %llu revoke passes (%llu revoked, "
	       "%llu by the fallback kernel), misses: %llu pages in %llu rounds, grid %u blocks\n",
	       (unsigned long long)gs.requests, (unsigned long long)gs.batches,
	       (unsigned long long)gs.gets, (unsigned long long)gs.revokes,
	       (unsigned long long)gs.revoked, (unsigned long long)gs.rev_fallbacks,
	       (unsigned long long)gs.miss_pages, (unsigned long long)gs.miss_rounds, gblocks);
	printf("gpufs: open %.3f s (%llu file mapped for direct reads), %llu hinted pages loaded\n",
	       topen, (unsigned long long)gs.direct_files, (unsigned long long)gs.admitted);
	printf("%-6s %9s %10s %9s %9s %9s\n", "pass", "time s", "GB/s eff", "gets", "direct", "loaded");
	for (unsigned p = 0; p <= warm_reps; p++) {
		const struct vc_gpufs_stats *b = p ? &ps[p - 1] : NULL;
		printf("%-6u %9.4f %10.2f %9llu %9llu %9llu\n", p, wsecs[p], bytes / wsecs[p] / 1e9,
		       (unsigned long long)(ps[p].gets - (b ? b->gets : 0)),
		       (unsigned long long)(ps[p].direct_reads - (b ? b->direct_reads : 0)),
		       (unsigned long long)(ps[p].admitted - (b ? b->admitted : 0)));
	}
	if (json) {
		FILE *f = bench_json_open(json, BENCH_NAME, prop.name);
		bench_json_field(f, "  ", "records", (double)nrec);
		bench_json_field(f, "  ", "warps", nwarps);
		bench_json_field(f, "  ", "steps", steps);
		for (int i = 0; i < 5; i++)
			if (secs[i] > 0) {
				char key[64];
				snprintf(key, sizeof key, "%s_gbs", name[i]);
				bench_json_field(f, "  ", key, bytes / secs[i] / 1e9);
			}
		bench_json_field(f, "  ", "uvm_fill_s", extra_uvm_fill);
		bench_json_field(f, "  ", "open_s", topen);
		bench_json_field(f, "  ", "direct_files", (double)gs.direct_files);
		for (unsigned p = 0; p <= warm_reps; p++) {
			char key[64];
			const struct vc_gpufs_stats *b = p ? &ps[p - 1] : NULL;
			snprintf(key, sizeof key, "pass%u_gbs", p);
			bench_json_field(f, "  ", key, bytes / wsecs[p] / 1e9);
			snprintf(key, sizeof key, "pass%u_gets", p);
			bench_json_field(f, "  ", key, (double)(ps[p].gets - (b ? b->gets : 0)));
			snprintf(key, sizeof key, "pass%u_direct", p);
			bench_json_field(f, "  ", key, (double)(ps[p].direct_reads - (b ? b->direct_reads : 0)));
			snprintf(key, sizeof key, "pass%u_loaded", p);
			bench_json_field(f, "  ", key, (double)(ps[p].admitted - (b ? b->admitted : 0)));
		}
		bench_json_close(f);
	}
	for (int i = 0; i < 5; i++)
		if (secs[i] > 0 && !agree[i])
			return 1;
	return 0;
}
