/* Device memory that shrinks and grows (device.h, mem_reserve .. uuid),
 * with CUDA's virtual memory management: one address range reserved with
 * cuMemAddressReserve, whose parts are backed by physical allocations
 * (cuMemCreate + cuMemMap + cuMemSetAccess) and given back (cuMemUnmap +
 * cuMemRelease) at run time. Addresses inside the range never change, so
 * the tier's slot arithmetic, the cleaning kernels and the device queues
 * work unchanged over a tier with holes.
 *
 * The driver API is reached through cudaGetDriverEntryPointByVersion, so
 * the library links no libcuda.so (the static runtime loads the driver).
 * Every part mapped is one physical allocation; the list below maps a
 * part's address to its handle (a handful: one per chunk of the tier).
 *
 * mem_unmap overwrites the part with zeros (cudaMemset, then a stream
 * sync) before it goes back: CUDA does not promise that the next owner of
 * the memory finds it cleared. Map and unmap pause the device queues
 * (vc_cu_quiesce), as cudaMalloc and cudaFree do.
 *
 * Several GPUs. cudaDeviceEnablePeerAccess opens a peer's cudaMalloc
 * memory, but not memory mapped with cuMemMap: each part has its own
 * access list (cuMemSetAccess). So each GPU has a set of peers (ordinals)
 * that may reach its memory, grown by peer_enable (vc_cu_vmem_grant) and
 * never shrunk, as peer access lasts the process; a part is mapped for
 * its owner and every peer in the set, and a peer added later is given
 * every part its owner has mapped already. Invariant, under access_mu:
 * every part in the list is accessible to its owner and to every peer in
 * its owner's set. Cost of a grant: one cuMemSetAccess per part the
 * owner holds (a handful). */
#include <cuda.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "device/cuda/internal.h"
#include "vramcache.h"

struct drv {
	CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
	CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*addr_free)(CUdeviceptr, size_t);
	CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
			   unsigned long long);
	CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
	CUresult (*unmap)(CUdeviceptr, size_t);
	CUresult (*release)(CUmemGenericAllocationHandle);
	CUresult (*err_name)(CUresult, const char **);
};

static struct drv drv;
static int drv_status; /* 0 or -errno, once loaded */
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void drv_load(void)
{
	struct {
		const char *name;
		void **fn;
	} want[] = {
		{ "cuMemGetAllocationGranularity", (void **)&drv.granularity },
		{ "cuMemAddressReserve", (void **)&drv.reserve },
		{ "cuMemAddressFree", (void **)&drv.addr_free },
		{ "cuMemCreate", (void **)&drv.create },
		{ "cuMemMap", (void **)&drv.map },
		{ "cuMemSetAccess", (void **)&drv.set_access },
		{ "cuMemUnmap", (void **)&drv.unmap },
		{ "cuMemRelease", (void **)&drv.release },
		{ "cuGetErrorName", (void **)&drv.err_name },
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		enum cudaDriverEntryPointQueryResult q;
		int r = CU(cudaGetDriverEntryPointByVersion(want[i].name, want[i].fn, 12000,
							   cudaEnableDefault, &q));
		if (r == 0 && (q != cudaDriverEntryPointSuccess || !*want[i].fn))
			r = vc_err(-VC_ENODEVICE, "cuda: the driver has no %s", want[i].name);
		if (r < 0) {
			drv_status = r;
			return;
		}
	}
}

static int drv_get(void)
{
	pthread_once(&drv_once, drv_load);
	return drv_status < 0 ? vc_err(drv_status, "cuda: driver entry points for virtual memory "
						   "management are missing")
			      : 0;
}

/* A driver call's result in our codes, with the call named. */
static int dcheck(CUresult e, const char *call)
{
	if (e == CUDA_SUCCESS)
		return 0;
	const char *name = "?";
	if (drv.err_name)
		drv.err_name(e, &name);
	return vc_err(e == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -VC_EDEVICE, "cuda: %s: %s", call,
		      name);
}

static CUmemAllocationProp prop_of(int ordinal)
{
	CUmemAllocationProp p;
	memset(&p, 0, sizeof p);
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = ordinal;
	return p;
}

/* One mapped part; the list is every device's, under parts_mu. */
struct part {
	struct part *next;
	uint64_t addr;
	size_t len;
	CUmemGenericAllocationHandle h;
	int ordinal; /* the GPU whose memory backs it */
};

static pthread_mutex_t parts_mu = PTHREAD_MUTEX_INITIALIZER;
static struct part *parts; /* few (a chunk of a tier each), found by address */

/* Peers: bit p of peers[o] lets ordinal p reach ordinal o's parts. A
 * part's access setup and its entry into the list happen under
 * access_mu, as does a grant's pass over the list, so that a part mapped
 * while a peer is added gets the peer one way or the other (the top).
 * Lock order: a device's dq_mu (vc_cu_quiesce), access_mu, parts_mu. */
#define VMEM_MAX_GPUS 64
static pthread_mutex_t access_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t peers[VMEM_MAX_GPUS];

/* The access list of a part of `owner`: the owner, then its peers.
 * Under access_mu. Returns the number of entries. */
static size_t access_of(int owner, CUmemAccessDesc a[VMEM_MAX_GPUS])
{
	size_t n = 0;
	for (int o = -1; o < VMEM_MAX_GPUS; o++) {
		if (o >= 0 && (o == owner || !(peers[owner] >> o & 1)))
			continue;
		memset(&a[n], 0, sizeof a[n]);
		a[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		a[n].location.id = o < 0 ? owner : o;
		a[n].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		n++;
	}
	return n;
}

int vc_cu_vmem_granularity(int ordinal, uint64_t *out)
{
	int r = drv_get();
	if (r < 0)
		return r;
	CUmemAllocationProp p = prop_of(ordinal);
	size_t g = 0;
	r = dcheck(drv.granularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
		   "cuMemGetAllocationGranularity");
	if (r == 0 && (!g || (g & (g - 1))))
		r = vc_err(-VC_EDEVICE, "cuda: allocation granularity %zu is not a power of two", g);
	if (r == 0)
		*out = g;
	return r;
}

int vc_cu_mem_reserve(struct vc_device *d, size_t len, uint64_t *dev_addr)
{
	int r = drv_get();
	if (r < 0 || (r = vc_cu_enter(CUD(d))) < 0)
		return r;
	if (!len || len % d->map_granularity)
		return vc_err(-EINVAL, "cuda: reservation of %zu bytes is not a multiple of %llu", len,
			      (unsigned long long)d->map_granularity);
	CUdeviceptr p = 0;
	r = dcheck(drv.reserve(&p, len, d->map_granularity, 0, 0), "cuMemAddressReserve");
	if (r == 0)
		*dev_addr = (uint64_t)p;
	return r;
}

int vc_cu_mem_map(struct vc_device *d, uint64_t dev_addr, size_t len)
{
	struct cu_dev *c = CUD(d);
	int r = drv_get();
	if (r < 0 || (r = vc_cu_enter(c)) < 0)
		return r;
	if (!len || len % d->map_granularity || dev_addr % d->map_granularity)
		return vc_err(-EINVAL, "cuda: map of %zu bytes at %#llx is not granule aligned", len,
			      (unsigned long long)dev_addr);
	if (c->ordinal >= VMEM_MAX_GPUS)
		return vc_err(-ENOTSUP, "cuda: device %d: chunked memory on at most %d GPUs",
			      c->ordinal, VMEM_MAX_GPUS);
	struct part *pt = calloc(1, sizeof *pt);
	if (!pt)
		return vc_err(-ENOMEM, "out of memory");
	CUmemAllocationProp p = prop_of(c->ordinal);
	CUmemAccessDesc a[VMEM_MAX_GPUS];
	pt->addr = dev_addr;
	pt->len = len;
	pt->ordinal = c->ordinal;
	vc_cu_quiesce(c);
	r = dcheck(drv.create(&pt->h, len, &p, 0), "cuMemCreate");
	if (r == 0) {
		r = dcheck(drv.map((CUdeviceptr)dev_addr, len, 0, pt->h, 0), "cuMemMap");
		if (r == 0) {
			pthread_mutex_lock(&access_mu);
			const size_t na = access_of(c->ordinal, a);
			r = dcheck(drv.set_access((CUdeviceptr)dev_addr, len, a, na),
				   "cuMemSetAccess");
			if (r == 0) {
				pthread_mutex_lock(&parts_mu);
				pt->next = parts;
				parts = pt;
				pthread_mutex_unlock(&parts_mu);
			}
			pthread_mutex_unlock(&access_mu);
			if (r < 0)
				(void)drv.unmap((CUdeviceptr)dev_addr, len);
		}
		if (r < 0)
			(void)drv.release(pt->h);
	}
	vc_cu_unquiesce(c);
	if (r < 0)
		free(pt);
	return r;
}

int vc_cu_vmem_grant(int owner, int peer)
{
	if (owner < 0 || owner >= VMEM_MAX_GPUS || peer < 0 || peer >= VMEM_MAX_GPUS)
		return vc_err(-ENOTSUP, "cuda: peer access between devices %d and %d: chunked "
					"memory on at most %d GPUs", owner, peer, VMEM_MAX_GPUS);
	if (drv_get() < 0) {
		vc_err_clear(); /* no VMM: no part to grant, and mem_map fails */
		return 0;
	}
	CUmemAccessDesc a;
	memset(&a, 0, sizeof a);
	a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.location.id = peer;
	a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	int r = 0;
	pthread_mutex_lock(&access_mu);
	if (!(peers[owner] >> peer & 1)) {
		/* Held while granting: a part in the list is mapped until an
		 * unmap takes it out, which needs parts_mu first. */
		pthread_mutex_lock(&parts_mu);
		for (struct part *pt = parts; pt && r == 0; pt = pt->next)
			if (pt->ordinal == owner)
				r = dcheck(drv.set_access((CUdeviceptr)pt->addr, pt->len, &a, 1),
					   "cuMemSetAccess");
		pthread_mutex_unlock(&parts_mu);
		if (r == 0)
			peers[owner] |= 1ull << peer;
	}
	pthread_mutex_unlock(&access_mu);
	return r;
}

static struct part *part_take(uint64_t addr, size_t len)
{
	pthread_mutex_lock(&parts_mu);
	struct part *pt = NULL;
	for (struct part **pp = &parts; *pp; pp = &(*pp)->next)
		if ((*pp)->addr == addr && (*pp)->len == len) {
			pt = *pp;
			*pp = pt->next;
			break;
		}
	pthread_mutex_unlock(&parts_mu);
	return pt;
}

int vc_cu_mem_unmap(struct vc_device *d, uint64_t dev_addr, size_t len)
{
	struct cu_dev *c = CUD(d);
	int r = vc_cu_enter(c);
	if (r < 0)
		return r;
	struct part *pt = part_take(dev_addr, len);
	if (!pt)
		return vc_err(-EINVAL, "cuda: no mapped part of %zu bytes at %#llx", len,
			      (unsigned long long)dev_addr);
	vc_cu_quiesce(c);
	/* The overwrite first: an unmap that fails still leaves zeros. */
	r = CU(cudaMemsetAsync((void *)(uintptr_t)dev_addr, 0, len, c->streams[0]));
	if (r == 0)
		r = CU(cudaStreamSynchronize(c->streams[0]));
	int e = dcheck(drv.unmap((CUdeviceptr)dev_addr, len), "cuMemUnmap");
	if (e == 0)
		e = dcheck(drv.release(pt->h), "cuMemRelease");
	vc_cu_unquiesce(c);
	free(pt);
	return r < 0 ? r : e;
}

int vc_cu_mem_unmap_n(struct vc_device *d, const uint64_t *dev_addr, const uint64_t *len,
		      uint32_t n)
{
	struct cu_dev *c = CUD(d);
	int r = vc_cu_enter(c);
	if (r < 0)
		return r;
	vc_cu_quiesce(c);
	/* Every overwrite queued, one wait, then the driver calls. */
	for (uint32_t i = 0; i < n && r == 0; i++)
		r = CU(cudaMemsetAsync((void *)(uintptr_t)dev_addr[i], 0, len[i], c->streams[0]));
	if (r == 0)
		r = CU(cudaStreamSynchronize(c->streams[0]));
	for (uint32_t i = 0; i < n; i++) {
		struct part *pt = part_take(dev_addr[i], len[i]);
		int e = pt ? 0 : vc_err(-EINVAL, "cuda: no mapped part of %llu bytes at %#llx",
					(unsigned long long)len[i], (unsigned long long)dev_addr[i]);
		if (e == 0)
			e = dcheck(drv.unmap((CUdeviceptr)dev_addr[i], len[i]), "cuMemUnmap");
		if (e == 0)
			e = dcheck(drv.release(pt->h), "cuMemRelease");
		free(pt);
		r = r ? r : e;
	}
	vc_cu_unquiesce(c);
	return r;
}

void vc_cu_mem_unreserve(struct vc_device *d, uint64_t dev_addr, size_t len)
{
	if (!dev_addr || drv_get() < 0 || vc_cu_enter(CUD(d)) < 0)
		return;
	/* Parts still mapped inside go first (a tier closed while shrunk
	 * has none; one closed on an error path may). */
	for (;;) {
		struct part *pt = NULL;
		pthread_mutex_lock(&parts_mu);
		for (struct part *p = parts; p; p = p->next)
			if (p->addr >= dev_addr && p->addr < dev_addr + len) {
				pt = p;
				break;
			}
		pthread_mutex_unlock(&parts_mu);
		if (!pt)
			break;
		(void)vc_cu_mem_unmap(d, pt->addr, pt->len);
	}
	(void)dcheck(drv.addr_free((CUdeviceptr)dev_addr, len), "cuMemAddressFree");
}

int vc_cu_mem_info(struct vc_device *d, uint64_t *free_bytes, uint64_t *total_bytes)
{
	int r = vc_cu_enter(CUD(d));
	if (r < 0)
		return r;
	size_t f = 0, t = 0;
	r = CU(cudaMemGetInfo(&f, &t));
	if (r == 0) {
		*free_bytes = f;
		*total_bytes = t;
	}
	return r;
}

int vc_cu_uuid(struct vc_device *d, unsigned char out[16])
{
	struct cu_dev *c = CUD(d);
	struct cudaDeviceProp p;
	int r = CU(cudaGetDeviceProperties(&p, c->ordinal));
	if (r == 0)
		memcpy(out, p.uuid.bytes, 16);
	return r;
}
