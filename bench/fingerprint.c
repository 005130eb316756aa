/* Block fingerprints (issue 14, step 1): the device's vc_fp_run over blocks
 * already in device memory, both algorithms (device/fp.h), block sizes
 * 4096 .. 512 bytes, with the SM cap at 13 (a tenth of an H100's or
 * H200's 132 SMs) and at all SMs; against OpenSSL's MD5 and our
 * MurmurHash3 (the host reference) on every CPU core, one thread per
 * core, the same block sizes, in the same run. Goal: MurmurHash3 at
 * >= 55 GB/s (line rate) for 4 KiB blocks with at most 13 SMs. The issue's
 * CPU baseline: OpenSSL MD5 at 0.6 GB/s per core, 8.9 GB/s on 16.
 *
 * Device: --gib GiB of blocks (default 4), one vc_fp_run per pass over all
 * of them (a job: launch, kernel, wait, as the engine will pay it), timed
 * on the host clock; each figure is the median of --reps passes (default
 * 5) after one warm-up pass. The block addresses are in device memory,
 * in order. After every configuration the first 256 digests are checked
 * against the host reference, and the bench says so. GB/s are 10^9 bytes
 * of blocks per second.
 * CPU: --threads threads (default: the online CPUs), each pinned to a CPU,
 * each on its own 64 MiB in calls of 1 MiB of blocks, for --cpu-seconds
 * (default 1) per figure.
 *
 * On the emulated device (--device emu, or auto without a GPU) the
 * "device" is the host reference on one core and the SM cap means
 * nothing; the bench runs and says so (use --quick: 32 MiB, 0.5 s per
 * CPU figure).
 *
 * Usage: fingerprint [--device auto|cuda|emu] [--gib N] [--reps R]
 *                    [--threads T] [--cpu-seconds S] [--quick] [--json FILE] */
#include <errno.h>
#include <unistd.h>

#define BENCH_NAME "fingerprint"
#include "bench.h"
#include "cores.h"
#include "base/rand.h"
#include "device/device.h"
#include "device/fp.h"

#define GOAL_GBS 55.0
#define GOAL_SMS 13u /* 132 / 10, rounded down: at most a tenth of the SMs */
#define CPU_BUF (64ull << 20)
#define CPU_CALL (1u << 20)
#define FILL_CHUNK (64ull << 20) /* random bytes made on the host, then repeated */
#define VERIFY 256u

enum { N_BS = 4, N_CAP = 2 };
static const uint32_t block_sizes[N_BS] = { 4096, 2048, 1024, 512 };
static const uint32_t caps[N_CAP] = { GOAL_SMS, 0 };
static const char *const algo_name[VC_FP_ALGOS] = { "murmur3", "md5" };

struct result {
	double dev[N_CAP], cpu; /* GB/s */
};

/* --- CPU: every core ---------------------------------------------------- */

struct cpu_arg {
	uint32_t algo, bs;
	unsigned char **bufs;       /* a CPU_BUF buffer per thread */
	struct vc_fp_digest **outs; /* a call's digests per thread */
};

static uint64_t cpu_loop(void *p, int t, uint64_t until, int *err)
{
	const struct cpu_arg *a = p;
	const uint32_t per_call = CPU_CALL / a->bs;
	uint64_t off = 0, bytes = 0;
	do {
		const unsigned char *buf = a->bufs[t] + off;
		if (a->algo == VC_FP_MD5) {
			if ((*err = vc_fp_md5_openssl(buf, per_call, a->bs, a->outs[t])) < 0)
				break;
		} else {
			for (uint32_t i = 0; i < per_call; i++)
				vc_fp_block(a->algo, buf + (size_t)i * a->bs, a->bs, &a->outs[t][i]);
		}
		bytes += CPU_CALL;
		off = (off + CPU_CALL) % CPU_BUF;
	} while (vc_now_ns() < until);
	return bytes;
}

/* Aggregate GB/s of nthreads threads; NAN where OpenSSL has no MD5. */
static double cpu_gbs(uint32_t algo, uint32_t bs, int nthreads, double seconds, unsigned char **bufs,
		      struct vc_fp_digest **outs)
{
	struct cpu_arg a = { .algo = algo, .bs = bs, .bufs = bufs, .outs = outs };
	int err;
	const double gbs = bench_cores_gbs(nthreads, seconds, cpu_loop, &a, &err);
	if (err == -VC_ENOTBUILT || err == -EIO) {
		fprintf(stderr, BENCH_NAME ": no CPU MD5 baseline: %s\n", vc_last_error());
		return NAN;
	}
	if (err < 0)
		bench_die("vc_fp_md5_openssl", err);
	return gbs;
}

/* The lanes hash on the calling thread, one form (fp.h), over the 4 KiB
 * blocks of buf's first LANES_SET bytes, again and again, for `seconds`:
 * GB/s. What a load of a staged volume's page pays on the reader's
 * thread (engine.h), where the page was just read into its host slot:
 * in the core's caches, as here. */
#define LANES_SET (256u << 10)
static double lanes_gbs(void (*form)(const void *, size_t, struct vc_fp_digest *),
			const unsigned char *buf, double seconds)
{
	struct vc_fp_digest d;
	uint64_t bytes = 0, off = 0;
	const uint64_t t0 = vc_now_ns(), until = t0 + (uint64_t)(seconds * 1e9);
	do {
		for (int i = 0; i < 256; i++) {
			form(buf + off, 4096, &d);
			off = (off + 4096) % LANES_SET;
		}
		bytes += 256 * 4096;
	} while (vc_now_ns() < until);
	return (double)bytes / ((double)(vc_now_ns() - t0) / 1e9) / 1e9;
}

/* --- the device -------------------------------------------------------- */

static struct vc_device *dev;

/* Median GB/s of reps jobs over n blocks. */
static double dev_gbs(const struct vc_fp_job *job, int reps)
{
	double *t = malloc(sizeof(double) * (size_t)reps);
	for (int i = -1; i < reps; i++) { /* i = -1: warm-up */
		const uint64_t t0 = vc_now_ns();
		BENCH_OK(vc_fp_run(dev, job));
		const double s = (double)(vc_now_ns() - t0) / 1e9;
		if (i >= 0)
			t[i] = (double)job->n * job->block_size / s / 1e9;
	}
	const double m = bench_quantile(t, reps, 0.5);
	free(t);
	return m;
}

/* The job's first VERIFY digests against the host reference. */
static bool verify(const struct vc_fp_job *job, uint64_t data_dev)
{
	const uint32_t k = job->n < VERIFY ? job->n : VERIFY;
	unsigned char *blocks = malloc((size_t)k * job->block_size);
	struct vc_fp_digest *got = malloc((size_t)k * 16), want;
	BENCH_OK(dev->ops->memcpy_sync(dev, (uint64_t)(uintptr_t)blocks, data_dev,
				       (size_t)k * job->block_size));
	BENCH_OK(dev->ops->memcpy_sync(dev, (uint64_t)(uintptr_t)got, job->out_dev, (size_t)k * 16));
	bool ok = true;
	for (uint32_t i = 0; i < k && ok; i++) {
		vc_fp_block(job->algo, blocks + (size_t)i * job->block_size, job->block_size, &want);
		ok = memcmp(want.b, got[i].b, 16) == 0;
	}
	free(blocks);
	free(got);
	return ok;
}

static void usage(void)
{
	fprintf(stderr, "usage: fingerprint [--device auto|cuda|emu] [--gib N] [--reps R] "
			"[--threads T] [--cpu-seconds S] [--quick] [--json FILE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct bench_cores_opts o = bench_cores_defaults();
	int kind = VC_DEVICE_AUTO;
	for (int i = 1; i < argc; i++) {
		if (bench_cores_opt(&o, argc, argv, &i))
			continue;
		if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
			if ((kind = vc_device_parse(argv[++i])) < 0)
				usage();
		} else if (strcmp(argv[i], "--quick") == 0) {
			o.gib = 1.0 / 32, o.reps = 3, o.cpu_seconds = 0.5;
		} else {
			usage();
		}
	}
	if (!bench_cores_valid(&o))
		usage();
	const double gib = o.gib, cpu_seconds = o.cpu_seconds;
	const int reps = o.reps, nthreads = o.nthreads;
	const char *json = o.json;

	int r = vc_device_open(kind, 0, &dev);
	if (r == -VC_ENODEVICE || r == -VC_ENOTBUILT) {
		fprintf(stderr, BENCH_NAME ": no such device: %s\n", vc_last_error());
		return 77;
	}
	BENCH_OK(r);
	const bool emu = strcmp(dev->ops->name, "emu") == 0;
	char cpu[128];
	bench_cpu_model(cpu, sizeof cpu);

	/* The blocks: FILL_CHUNK random bytes, repeated over the region. */
	const uint64_t bytes = (uint64_t)(gib * (double)(1ull << 30)) / 4096 * 4096;
	if (bytes == 0)
		usage();
	uint64_t data_dev, addr_dev, out_dev;
	BENCH_OK(dev->ops->mem_alloc(dev, bytes, &data_dev));
	const uint64_t fill = bytes < FILL_CHUNK ? bytes : FILL_CHUNK;
	unsigned char *rnd = malloc(fill);
	uint64_t seed = vc_now_ns() | 1;
	for (uint64_t i = 0; i < fill; i += 8) {
		const uint64_t v = vc_rand64(&seed);
		memcpy(rnd + i, &v, 8);
	}
	for (uint64_t off = 0; off < bytes; off += fill)
		BENCH_OK(dev->ops->memcpy_sync(dev, data_dev + off, (uint64_t)(uintptr_t)rnd,
					       bytes - off < fill ? bytes - off : fill));
	free(rnd);
	const uint64_t max_n = bytes / 512;
	uint64_t *addr = malloc(max_n * 8);
	BENCH_OK(dev->ops->mem_alloc(dev, max_n * 8, &addr_dev));
	BENCH_OK(dev->ops->mem_alloc(dev, max_n * 16, &out_dev));

	unsigned char **bufs = malloc(sizeof *bufs * (size_t)nthreads);
	struct vc_fp_digest **outs = malloc(sizeof *outs * (size_t)nthreads);
	for (int t = 0; t < nthreads; t++) {
		bufs[t] = malloc(CPU_BUF);
		outs[t] = malloc((CPU_CALL / 512) * sizeof(struct vc_fp_digest));
		memset(bufs[t], t + 1, CPU_BUF);
	}

	printf("fingerprint: %s, %.3f GiB of blocks in device memory, median of %d jobs\n", dev->desc,
	       (double)bytes / (1ull << 30), reps);
	if (emu)
		printf("(emulated device: the host reference on one core; the SM cap means nothing "
		       "here, so both device columns measure the same)\n");
	printf("baseline: OpenSSL MD5 and our MurmurHash3 on %d threads of %s\n\n", nthreads, cpu);
	printf("%6s %-8s %13s %13s %13s %9s %9s\n", "block", "algo", "dev 13 SMs", "dev all SMs",
	       "CPU all", "13SM/CPU", "all/CPU");
	struct result res[N_BS][VC_FP_ALGOS];
	bool all_ok = true;
	for (int b = 0; b < N_BS; b++) {
		const uint32_t bs = block_sizes[b];
		const uint32_t n = (uint32_t)(bytes / bs);
		for (uint32_t i = 0; i < n; i++)
			addr[i] = data_dev + (uint64_t)i * bs;
		BENCH_OK(dev->ops->memcpy_sync(dev, addr_dev, (uint64_t)(uintptr_t)addr, (size_t)n * 8));
		for (uint32_t a = 0; a < VC_FP_ALGOS; a++) {
			struct result *x = &res[b][a];
			for (int c = 0; c < N_CAP; c++) {
				const struct vc_fp_job job = { .blocks_dev = addr_dev, .out_dev = out_dev,
							       .n = n, .block_size = bs, .algo = a,
							       .max_sms = caps[c] };
				x->dev[c] = dev_gbs(&job, reps);
				if (!verify(&job, data_dev)) {
					fprintf(stderr, BENCH_NAME ": %s, %u-byte blocks, cap %u: digests "
							       "differ from the host reference\n",
						algo_name[a], bs, caps[c]);
					all_ok = false;
				}
			}
			x->cpu = cpu_gbs(a, bs, nthreads, cpu_seconds, bufs, outs);
			printf("%6u %-8s %8.2f GB/s %8.2f GB/s %8.2f GB/s %8.1fx %8.1fx\n", bs, algo_name[a],
			       x->dev[0], x->dev[1], x->cpu, x->dev[0] / x->cpu, x->dev[1] / x->cpu);
		}
	}
	/* The default hash's host form on one core (the loads' hash): the
	 * scalar form against AVX-512, which vc_fp_lanes takes where the
	 * CPU has it. */
	const double ls = lanes_gbs(vc_fp_lanes_scalar, bufs[0], cpu_seconds);
	const double lv = vc_fp_lanes_avx512_ok() ? lanes_gbs(vc_fp_lanes_avx512, bufs[0], cpu_seconds)
						 : NAN;
	if (vc_fp_lanes_avx512_ok())
		printf("\nlanes hash on the host, one core, 4 KiB blocks: scalar %.2f GB/s, AVX-512 "
		       "%.2f GB/s (%.1fx; the one vc_fp_lanes takes here)\n", ls, lv, lv / ls);
	else
		printf("\nlanes hash on the host, one core, 4 KiB blocks: scalar %.2f GB/s "
		       "(AVX-512 form off: not on this CPU, or VC_FP_AVX512=0)\n", ls);
	const double goal = res[0][VC_FP_MURMUR3].dev[0];
	printf("\ndigests against the host reference (first %u of every job): %s\n", VERIFY,
	       all_ok ? "equal" : "DIFFERENT: the device path is wrong");
	if (emu)
		printf("goal: murmur3 >= %.0f GB/s at 4 KiB blocks with <= %u SMs: not measured "
		       "(emulated device; run on a GPU)\n", GOAL_GBS, GOAL_SMS);
	else
		printf("goal: murmur3 >= %.0f GB/s at 4 KiB blocks with <= %u SMs: %.1f GB/s, %s\n",
		       GOAL_GBS, GOAL_SMS, goal, goal >= GOAL_GBS ? "met" : "not met");

	if (json) {
		FILE *f = bench_json_open(json, BENCH_NAME, dev->desc);
		fprintf(f, ",\n  \"backend\": \"%s\",\n  \"cpu\": \"%s\",\n  \"cpu_threads\": %d",
			dev->ops->name, cpu, nthreads);
		bench_json_field(f, "  ", "gib", (double)bytes / (1ull << 30));
		bench_json_field(f, "  ", "reps", reps);
		bench_json_field(f, "  ", "goal_gbs", GOAL_GBS);
		bench_json_field(f, "  ", "goal_sms", GOAL_SMS);
		bench_json_field(f, "  ", "murmur3_4k_capped_gbs", goal);
		bench_json_field(f, "  ", "host_lanes_4k_scalar_gbs", ls);
		bench_json_field(f, "  ", "host_lanes_4k_avx512_gbs", lv);
		fprintf(f, ",\n  \"goal_met\": %s,\n  \"digests_ok\": %s,\n  \"results\": [",
			!emu && goal >= GOAL_GBS ? "true" : "false", all_ok ? "true" : "false");
		for (int b = 0; b < N_BS; b++)
			for (uint32_t a = 0; a < VC_FP_ALGOS; a++) {
				const struct result *x = &res[b][a];
				fprintf(f, "%s\n    {\"block_size\": %u, \"algo\": \"%s\"", b + a ? "," : "",
					block_sizes[b], algo_name[a]);
				bench_json_field(f, "     ", "dev_13_sms_gbs", x->dev[0]);
				bench_json_field(f, "     ", "dev_all_sms_gbs", x->dev[1]);
				bench_json_field(f, "     ", a == VC_FP_MD5 ? "cpu_openssl_gbs" : "cpu_gbs",
						 x->cpu);
				fputs("}", f);
			}
		fputs("\n  ]", f);
		bench_json_close(f);
	}
	for (int t = 0; t < nthreads; t++) {
		free(bufs[t]);
		free(outs[t]);
	}
	free(bufs);
	free(outs);
	free(addr);
	dev->ops->mem_free(dev, data_dev);
	dev->ops->mem_free(dev, addr_dev);
	dev->ops->mem_free(dev, out_dev);
	vc_device_close(dev);
	return all_ok ? 0 : 1;
}
