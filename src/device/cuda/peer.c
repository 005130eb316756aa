/* The CUDA backend with several GPUs: peer access between two devices
 * (device.h's peer_enable, with vmem.c granting chunked memory to peers),
 * the fault hook (a kernel that traps: kernels/fault.cu) and the device
 * count. Setup and test paths: nothing here runs per move.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "base/error.h"
#include "device/cuda/internal.h"
#include "device/cuda/kernels/fault_launch.h"
#include "device/device.h"
#include "vramcache.h"

/* Ordinal pairs (x << 6 | y) whose peer access this process enabled:
 * a second cache opened on the same GPUs does not call the driver again,
 * whose cudaErrorPeerAccessAlreadyEnabled compute-sanitizer reports as an
 * API error even where it is handled. Primary contexts live as long as
 * the process (nothing here resets a device), and so does the access. */
static pthread_mutex_t peered_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t peered[64];

/* x's context opens y's memory: y's cudaMalloc memory (peer access) and
 * y's chunked memory (vmem.c's grant), all that y holds now and will
 * map. x's address space changes, so x's queue servers pause meanwhile,
 * as around an allocation. A second enable is the driver's
 * cudaErrorPeerAccessAlreadyEnabled, which is success here. */
static int open_to(struct cu_dev *x, struct cu_dev *y)
{
	int r = vc_cu_enter(x);
	if (r < 0)
		return r;
	if (x->ordinal >= 64 || y->ordinal >= 64)
		return vc_err(-ENOTSUP, "cuda: peer access between devices %d and %d: ordinals "
					"past 63", x->ordinal, y->ordinal);
	vc_cu_quiesce(x);
	pthread_mutex_lock(&peered_mu);
	cudaError_t e = cudaSuccess;
	if (!(peered[x->ordinal] >> y->ordinal & 1))
		e = cudaDeviceEnablePeerAccess(y->ordinal, 0);
	if (e == cudaErrorPeerAccessAlreadyEnabled) {
		(void)cudaGetLastError(); /* not sticky: clear it */
		e = cudaSuccess;
	}
	if (e == cudaSuccess)
		peered[x->ordinal] |= 1ull << y->ordinal;
	pthread_mutex_unlock(&peered_mu);
	r = CU(e);
	if (r == 0)
		r = vc_cu_vmem_grant(y->ordinal, x->ordinal);
	vc_cu_unquiesce(x);
	return r;
}

/* device.h's peer_enable. Two handles on one ordinal share a context:
 * nothing to open. Cost: two capability queries, then per direction one
 * pause of the queues, one driver call and one cuMemSetAccess per part
 * already mapped; once per pair of GPUs, at setup. */
int vc_cu_peer_enable(struct vc_device *d, struct vc_device *peer)
{
	struct cu_dev *a = CUD(d), *b = CUD(peer);
	if (a->ordinal == b->ordinal)
		return 0;
	int ab = 0, ba = 0;
	int r = CU(cudaDeviceCanAccessPeer(&ab, a->ordinal, b->ordinal));
	if (r == 0)
		r = CU(cudaDeviceCanAccessPeer(&ba, b->ordinal, a->ordinal));
	if (r < 0)
		return r;
	if (!ab || !ba)
		return vc_err(-ENOTSUP, "cuda: devices %d and %d cannot reach each other "
					"(peer access %d to %d: %s, %d to %d: %s)", a->ordinal,
			      b->ordinal, a->ordinal, b->ordinal, ab ? "yes" : "no", b->ordinal,
			      a->ordinal, ba ? "yes" : "no");
	if ((r = open_to(a, b)) < 0)
		return r;
	return open_to(b, a);
}

/* device.h's fault: a kernel that traps, on stream 0, then a wait for it.
 * The trap is the driver's own sticky error (cudaErrorLaunchFailure), so
 * every later call in the ordinal's primary context fails with it: this
 * handle's, every other handle's on the ordinal (they share the context:
 * a test that wants a device that goes on needs another GPU), a queue
 * server's, a batch's. Returns 0 once the device reports the sticky
 * error; -VC_EDEVICE if the trap left it working, or the launch failed. */
int vc_cu_fault(struct vc_device *d)
{
	struct cu_dev *c = CUD(d);
	int r = vc_cu_enter(c);
	if (r < 0)
		return r;
	if ((r = CU((cudaError_t)vc_cuda_fault_launch(c->streams[0]))) < 0)
		return r;
	if (CU(cudaStreamSynchronize(c->streams[0])) == 0)
		return vc_err(-VC_EDEVICE, "cuda: device %d: the trap kernel ended without a fault",
			      c->ordinal);
	/* Sticky: another stream of the context, which held no work, fails
	 * too (a query returns at once, whatever runs). */
	cudaError_t e = cudaStreamQuery(c->streams[1]);
	if (e == cudaSuccess || e == cudaErrorNotReady) {
		(void)cudaGetLastError();
		return vc_err(-VC_EDEVICE, "cuda: device %d: the trap's error did not stick",
			      c->ordinal);
	}
	(void)cudaGetLastError();
	vc_err_clear();
	return 0;
}

int vc_cuda_count(void)
{
	int n = 0;
	if (CU(cudaGetDeviceCount(&n)) < 0) {
		vc_err_clear(); /* no driver or no device: none to open, not an error */
		return 0;
	}
	return n;
}
