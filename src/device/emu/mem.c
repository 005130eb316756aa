/* The emulated device's memory that shrinks and grows (device.h,
 * mem_reserve .. mem_info), in host memory.
 *
 * A reserved range is an anonymous PROT_NONE mapping; mem_map makes a part
 * readable and writable, mem_unmap zeroes it, returns its pages to the
 * kernel (MADV_DONTNEED) and makes it PROT_NONE again. So a page move, a
 * cleaning job or a read that still touches a part given back faults at
 * once in the tests, where on a GPU it would read another program's data.
 *
 * The emulated device has a size and other programs on it, for the tests
 * of a tier that gives memory back:
 *   VC_EMU_DEVICE_BYTES   its total memory (default 64 GiB), read once
 *   VC_EMU_FOREIGN_FILE   a file holding the bytes other programs use now
 *                         (decimal), read at every mem_map and mem_info:
 *                         a test writes it to play a program that
 *                         allocates and exits
 * Free memory is total - mapped (every emulated device of the process)
 * - foreign; mem_map fails with -ENOMEM where that is short. (The
 * devices share one budget: they stand for GPUs, but all of their
 * memory is this host's.) After a fault (emu.c) reserve and map fail
 * with -VC_EDEVICE; unmap and unreserve go on, so a failed device's
 * tier can give its memory back.
 * Cost: mem_info and mem_map read the file (one open/read/close). */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/env.h"
#include "base/error.h"
#include "device/emu/internal.h"

#define EMU_GRANULE 4096ull
#define EMU_TOTAL_DEFAULT (64ull << 30)

static _Atomic uint64_t mapped; /* bytes mapped by every emulated device */

/* Bytes the other "programs" hold: the file's number, 0 without one. */
static uint64_t foreign_bytes(void)
{
	const char *path = getenv("VC_EMU_FOREIGN_FILE");
	if (!path || !*path)
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[32];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return strtoull(buf, NULL, 10);
}

uint64_t vc_emu_granularity(void)
{
	return EMU_GRANULE;
}

uint64_t vc_emu_total(void)
{
	return vc_env_u64("VC_EMU_DEVICE_BYTES", EMU_TOTAL_DEFAULT, 0, UINT64_MAX);
}

int vc_emu_mem_reserve(struct vc_device *d, size_t len, uint64_t *dev_addr)
{
	int r = vc_emu_health(d);
	if (r < 0)
		return r;
	if (!len || len % EMU_GRANULE)
		return vc_err(-EINVAL, "emu: reservation of %zu bytes is not a multiple of %llu", len,
			      (unsigned long long)EMU_GRANULE);
	void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return vc_err(-errno, "emu: cannot reserve %zu bytes", len);
	*dev_addr = (uint64_t)(uintptr_t)p;
	return 0;
}

void vc_emu_mem_unreserve(struct vc_device *d, uint64_t dev_addr, size_t len)
{
	(void)d;
	if (dev_addr)
		munmap((void *)(uintptr_t)dev_addr, len);
}

int vc_emu_mem_map(struct vc_device *d, uint64_t dev_addr, size_t len)
{
	int r = vc_emu_health(d);
	if (r < 0)
		return r;
	if (len % EMU_GRANULE || dev_addr % EMU_GRANULE)
		return vc_err(-EINVAL, "emu: map of %zu bytes at %#llx is not granule aligned", len,
			      (unsigned long long)dev_addr);
	uint64_t total = vc_emu_total(), other = foreign_bytes();
	uint64_t was = atomic_fetch_add(&mapped, len);
	if (was + len + other > total) {
		atomic_fetch_sub(&mapped, len);
		return vc_err(-ENOMEM, "emu: no room for %zu more bytes of device memory", len);
	}
	if (mprotect((void *)(uintptr_t)dev_addr, len, PROT_READ | PROT_WRITE) < 0) {
		int e = errno;
		atomic_fetch_sub(&mapped, len);
		return vc_err(-e, "emu: cannot map %zu bytes", len);
	}
	return 0;
}

int vc_emu_mem_unmap(struct vc_device *d, uint64_t dev_addr, size_t len)
{
	(void)d;
	void *p = (void *)(uintptr_t)dev_addr;
	memset(p, 0, len); /* the overwrite a GPU needs; here it also proves the range was mapped */
	int r = 0;
	if (madvise(p, len, MADV_DONTNEED) < 0 || mprotect(p, len, PROT_NONE) < 0)
		r = vc_err(-errno, "emu: cannot unmap %zu bytes", len);
	atomic_fetch_sub(&mapped, len);
	return r;
}

int vc_emu_mem_unmap_n(struct vc_device *d, const uint64_t *dev_addr, const uint64_t *len,
		       uint32_t n)
{
	int r = 0;
	for (uint32_t i = 0; i < n; i++) {
		int e = vc_emu_mem_unmap(d, dev_addr[i], len[i]);
		r = r ? r : e;
	}
	return r;
}

int vc_emu_mem_info(struct vc_device *d, uint64_t *free_bytes, uint64_t *total_bytes)
{
	(void)d;
	uint64_t total = vc_emu_total(), used = atomic_load(&mapped) + foreign_bytes();
	*total_bytes = total;
	*free_bytes = used < total ? total - used : 0;
	return 0;
}

/* "vramcache-emu", two zeros and the ordinal: device 0's is the UUID
 * scripts know (tests/nbd_gpushare.sh), and each device's is its own. */
int vc_emu_uuid(struct vc_device *d, unsigned char out[16])
{
	memcpy(out, "vramcache-emu\0\0\0", 16);
	out[15] = (unsigned char)d->ordinal;
	return 0;
}
