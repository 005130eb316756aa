/* The emulated device's parts, shared between its files. */
#ifndef VC_EMU_INTERNAL_H
#define VC_EMU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "device/device.h"

/* emu.c: 0, or -VC_EDEVICE (with a message) once the device has been
 * made to fail (device.h's fault op). One atomic load. */
int vc_emu_health(struct vc_device *d);

/* mem.c: memory that shrinks and grows (device.h). */
uint64_t vc_emu_granularity(void);
uint64_t vc_emu_total(void);
int vc_emu_mem_reserve(struct vc_device *d, size_t len, uint64_t *dev_addr);
void vc_emu_mem_unreserve(struct vc_device *d, uint64_t dev_addr, size_t len);
int vc_emu_mem_map(struct vc_device *d, uint64_t dev_addr, size_t len);
int vc_emu_mem_unmap(struct vc_device *d, uint64_t dev_addr, size_t len);
int vc_emu_mem_unmap_n(struct vc_device *d, const uint64_t *dev_addr, const uint64_t *len,
		       uint32_t n);
int vc_emu_mem_info(struct vc_device *d, uint64_t *free_bytes, uint64_t *total_bytes);
int vc_emu_uuid(struct vc_device *d, unsigned char out[16]);

/* fp.c: fingerprints (device/fp.h), on the caller's thread. */
struct vc_fp_job;
int vc_emu_fp_run(struct vc_device *d, const struct vc_fp_job *job);

/* cmp.c: byte compares (device/cmp.h), on the caller's thread. */
struct vc_cmp_job;
int vc_emu_cmp_start(struct vc_device *d, const struct vc_cmp_job *job);
int vc_emu_cmp_wait(struct vc_device *d);

#endif
