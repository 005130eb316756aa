/* CUDA backend: every kernel of the library loaded when a device opens.
 *
 * Why. With lazy loading (CUDA_MODULE_LOADING=LAZY, the default on Linux
 * since CUDA 12.2) a kernel's code is loaded at its first launch, and a load
 * may synchronize the context: it waits until every running kernel ends.
 * The engine launches kernels while users' kernels run and wait for them:
 * a GPUfs call (vramcache/gpufs.h) waits for its miss, which the device
 * queue's server kernel, a move kernel or a cleaning job serves, and for
 * the revoke pass. The first such launch then waits for the user's kernel,
 * which waits for it: a deadlock that lasts until the GPUfs calls time out
 * (seen on an H100, docs/GPUFS.md: every call of test_gpufs_cuda returned
 * -ETIMEDOUT). Loading everything at open takes the load off that path.
 *
 * How. Each .cu file in kernels/ is one module; kernels/modules.h names one
 * kernel of each. The module that holds it is found through the driver
 * (cuFuncGetModule) and every function in it is loaded (cuFuncLoad), CUB's
 * sort kernels in gc.cu included, whichever of them a job will pick.
 * Cost: once per process and device, a few milliseconds; loaded code stays
 * for the context's life, as under eager loading.
 *
 * Local memory: a launch that needs more local memory per thread than the
 * context has reserved also waits for running kernels (to grow the
 * reservation). The library's kernels use none (0-byte stack frames, ptxas
 * -v with VC_PTXAS_VERBOSE), so they never grow it; keep it so.
 */
#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "device/cuda/internal.h"
#include "device/cuda/kernels/modules.h"
#include "vramcache.h"

static const void *(*const anchors[])(void) = {
	vc_cuda_cmp_module,  vc_cuda_fault_module,  vc_cuda_fp_module, vc_cuda_gc_module,
	vc_cuda_gfs_module,  vc_cuda_move_module,   vc_cuda_server_module, vc_cuda_xts_module,
};

struct drv_load {
	CUresult (*mode)(CUmoduleLoadingMode *);
	CUresult (*module_of)(CUmodule *, CUfunction);
	CUresult (*count)(unsigned int *, CUmodule);
	CUresult (*list)(CUfunction *, unsigned int, CUmodule);
	CUresult (*load)(CUfunction);
};

static struct drv_load drv;
static int drv_status;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

/* The entry points, from the driver the static runtime loaded (cuFuncLoad
 * and the enumeration: CUDA 12.4 drivers and later). */
static void drv_init(void)
{
	struct {
		const char *name;
		void **fn;
	} want[] = {
		{ "cuModuleGetLoadingMode", (void **)&drv.mode },
		{ "cuFuncGetModule", (void **)&drv.module_of },
		{ "cuModuleGetFunctionCount", (void **)&drv.count },
		{ "cuModuleEnumerateFunctions", (void **)&drv.list },
		{ "cuFuncLoad", (void **)&drv.load },
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		enum cudaDriverEntryPointQueryResult q;
		int r = CU(cudaGetDriverEntryPointByVersion(want[i].name, want[i].fn, 12040,
							   cudaEnableDefault, &q));
		if (r == 0 && (q != cudaDriverEntryPointSuccess || !*want[i].fn))
			r = vc_err(-VC_ENODEVICE, "cuda: the driver has no %s (older than CUDA 12.4)",
				   want[i].name);
		if (r < 0) {
			drv_status = r;
			return;
		}
	}
}

static int dcheck(CUresult e, const char *call)
{
	return e == CUDA_SUCCESS ? 0 : vc_err(-VC_EDEVICE, "cuda: %s failed (CUresult %d)", call, (int)e);
}

/* Loads every function of the module that holds `kernel`. */
static int load_module(const void *kernel)
{
	cudaFunction_t f;
	int r = CU(cudaGetFuncBySymbol(&f, kernel));
	CUmodule m;
	unsigned int n = 0;
	if (r == 0)
		r = dcheck(drv.module_of(&m, (CUfunction)f), "cuFuncGetModule");
	if (r == 0)
		r = dcheck(drv.count(&n, m), "cuModuleGetFunctionCount");
	if (r < 0 || n == 0)
		return r;
	CUfunction *fs = malloc(n * sizeof *fs);
	if (!fs)
		return vc_err(-ENOMEM, "out of memory");
	r = dcheck(drv.list(fs, n, m), "cuModuleEnumerateFunctions");
	for (unsigned int i = 0; r == 0 && i < n; i++)
		r = dcheck(drv.load(fs[i]), "cuFuncLoad");
	free(fs);
	return r;
}

int vc_cu_preload(struct cu_dev *c)
{
	int r = vc_cu_enter(c);
	if (r < 0)
		return r;
	pthread_once(&drv_once, drv_init);
	if (drv_status < 0) {
		vc_err_clear();
		return 1;
	}
	CUmoduleLoadingMode mode;
	if ((r = dcheck(drv.mode(&mode), "cuModuleGetLoadingMode")) < 0)
		return r;
	/* VC_CUDA_PRELOAD=off leaves loading lazy: for showing the deadlock. */
	const char *env = getenv("VC_CUDA_PRELOAD");
	if (mode == CU_MODULE_EAGER_LOADING || (env && strcmp(env, "off") == 0))
		return 0;
	for (size_t i = 0; r == 0 && i < sizeof anchors / sizeof anchors[0]; i++)
		r = load_module(anchors[i]());
	return r;
}
