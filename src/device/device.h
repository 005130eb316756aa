/* Device interface: what the engine needs from a GPU, with two backends.
 *
 *   cuda  device/cuda/   the CUDA runtime; every call checked and mapped to -VC_E*
 *   emu   device/emu/    device memory emulated in host memory, batches run
 *                        later on a worker thread (the same asynchrony as a stream)
 *
 * The engine runs the same code over both. Addresses are "device-visible"
 * 64-bit values: for host memory from host_alloc, the address the GPU uses
 * to reach it (zero-copy, mapped pinned memory); for device memory, the
 * device pointer. A move batch lists page copies and swaps between any two
 * such addresses, so one batch may carry H2D, D2H and exchanges together.
 */
#ifndef VC_DEVICE_H
#define VC_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vc_device;

enum vc_move_op {
	VC_MOVE_COPY = 0, /* dst <- src */
	VC_MOVE_SWAP = 1, /* exchange the pages at src and dst */
};

/* One page move. 24 bytes; trivially copyable, read by kernels in place. */
struct vc_move {
	uint64_t src;
	uint64_t dst;
	uint32_t op; /* enum vc_move_op */
	uint32_t _pad;
};

/* A device batch. The batcher owns `moves` (allocated with host_alloc, so
 * the GPU reads it in place) and fills n and page_size; the backend owns the
 * rest. Invariant: no two moves of batches in flight touch the same page. */
struct vc_dbatch {
	struct vc_move *moves;
	uint64_t moves_dev; /* device-visible address of moves */
	uint32_t cap;
	uint32_t n;
	uint32_t page_size;
	void *priv; /* backend state, set by batch_init */
};

struct vc_device_ops {
	const char *name;
	void (*close)(struct vc_device *d);

	/* Pinned host memory the device can address; *dev_addr is its
	 * device-visible address. Alignment: at least 4096 bytes. */
	int (*host_alloc)(struct vc_device *d, size_t len, void **host, uint64_t *dev_addr);
	void (*host_free)(struct vc_device *d, void *host);
	/* Device memory, aligned to at least 4096 bytes. */
	int (*mem_alloc)(struct vc_device *d, size_t len, uint64_t *dev_addr);
	void (*mem_free)(struct vc_device *d, uint64_t dev_addr);

	/* Backend state of one reusable batch (events, flags). */
	int (*batch_init)(struct vc_device *d, struct vc_dbatch *b);
	void (*batch_fini)(struct vc_device *d, struct vc_dbatch *b);
	/* Starts the batch; returns before it completes. */
	int (*batch_submit)(struct vc_device *d, struct vc_dbatch *b);
	/* Blocks until a submitted batch completes; returns its status. May be
	 * called by several threads at once, and again after completion. */
	int (*batch_wait)(struct vc_device *d, struct vc_dbatch *b);

	/* Synchronous copy between device-visible addresses, for bulk data,
	 * tests and benchmarks. */
	int (*memcpy_sync)(struct vc_device *d, uint64_t dst, uint64_t src, size_t len);
};

struct vc_device {
	const struct vc_device_ops *ops;
	char desc[128]; /* "NVIDIA H200 (sm_90, 132 SMs)" or "emulated" */
};

/* Opens a backend: kind is enum vc_device_kind. AUTO tries CUDA, then emu. */
int vc_device_open(int kind, int ordinal, struct vc_device **out);
void vc_device_close(struct vc_device *d);

/* Backends. vc_cuda_open returns -VC_ENOTBUILT when CUDA was not compiled
 * in and -VC_ENODEVICE when no device is usable. */
int vc_emu_open(struct vc_device **out);
int vc_cuda_open(int ordinal, struct vc_device **out);

#endif
