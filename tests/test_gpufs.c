/* GPUfs on the emulated device (tests/gpufs_model.h): the model test with
 * CPU threads standing in for warps, gmmap under eviction pressure, and
 * the error cases; then what GPUfs refuses (dedup, encryption). */
#include <stdbool.h>

#include "base/hash.h"
#include "gpufs_model.h"

static void *t_alloc(size_t n)
{
	return malloc(n);
}

static void k_model(const struct vc_gfs_ctx *g, unsigned warp, void *arg)
{
	gm_model_warp(g, warp, arg);
}

static void k_mmap(const struct vc_gfs_ctx *g, unsigned warp, void *arg)
{
	gm_mmap_warp(g, warp, arg);
}

static void k_errors(const struct vc_gfs_ctx *g, unsigned warp, void *arg)
{
	gm_errors_warp(g, warp, arg);
}

static void k_timeout(const struct vc_gfs_ctx *g, unsigned warp, void *arg)
{
	gm_timeout_warp(g, warp, arg);
}

static int t_launch(vc_gpufs *g, enum gm_kernel k, unsigned nwarps, struct gm_arg *a)
{
	void (*fn)(const struct vc_gfs_ctx *, unsigned, void *) =
		k == GM_MODEL ? k_model : k == GM_MMAP ? k_mmap : k == GM_ERRORS ? k_errors : k_timeout;
	/* gmmap holders wait for others: every warp needs a thread. */
	const char *et = getenv("VC_GPUFS_EMU_THREADS"); /* warps at once (8) */
	unsigned threads = k == GM_MMAP || k == GM_TIMEOUT ? nwarps : et ? (unsigned)atoi(et) : 8;
	return vc_gpufs_emu_run(g, nwarps, threads, fn, a);
}

/* GPUfs refuses caches whose GPU tier kernels cannot read in place. */
static void refusals(void)
{
	char path[] = "/tmp/vc-gpufs-refuse-XXXXXX";
	int fd = mkstemp(path);
	GM_CHECK(fd >= 0 && ftruncate(fd, 1 << 20) == 0);
	close(fd);
	for (int k = 0; k < 2; k++) {
		struct vc_config cfg;
		vc_config_init(&cfg);
		cfg.backing_path = path;
		cfg.device = VC_DEVICE_EMU;
		if (k == 0)
			cfg.dedup = VC_DEDUP_ON;
		else
			cfg.encrypt = VC_ENCRYPT_XTS;
		vc_cache *c;
		int r = vc_open(&cfg, &c);
		if (r == -VC_ENOTBUILT) {
			fprintf(stderr, "refusals: %s not built, not checked\n", k ? "encryption" : "dedup");
			continue;
		}
		GM_CHECK(r == 0);
		vc_gpufs *g = NULL;
		r = vc_gpufs_create(c, NULL, &g);
		fprintf(stderr, "refusals: %s: %d (%s)\n", k ? "encryption" : "dedup", r, vc_last_error());
		GM_CHECK(r == -ENOTSUP && g == NULL);
		GM_CHECK(vc_close(c) == 0);
	}
	unlink(path);
}

/* A revoke pass selects entries by the engine's wait bucket of their page
 * (engine.h's pw_bucket: vc_mix64 of the page number): the public header's
 * copy must agree, or a sleeper's page would never be revoked for it. */
static void buckets(void)
{
	uint64_t k = 1;
	for (int i = 0; i < 100000; i++, k = k * 6364136223846793005ull + 1442695040888963407ull) {
		uint64_t key = i < 1000 ? (uint64_t)i | ((uint64_t)(i % 7) << 48) : k;
		GM_CHECK(vc_gfs_bucket(key) == (uint32_t)(vc_mix64(key) & (VC_GFS_BUCKETS - 1)));
	}
}

int main(void)
{
	buckets();
	const struct gm_env env = { VC_DEVICE_EMU, t_alloc, free, t_launch };
	refusals();
	/* Sized for CI under the sanitizers; VC_GPUFS_WARPS and VC_GPUFS_OPS
	 * make it larger. */
	unsigned warps = getenv("VC_GPUFS_WARPS") ? (unsigned)atoi(getenv("VC_GPUFS_WARPS")) : 16;
	unsigned ops = getenv("VC_GPUFS_OPS") ? (unsigned)atoi(getenv("VC_GPUFS_OPS")) : 120;
	return gm_main(&env, warps, ops, 4);
}
