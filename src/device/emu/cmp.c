/* The emulated device's byte compares (device/cmp.h): memcmp over each
 * pair's addresses, which on this backend are host pointers. On the
 * caller's thread, synchronous. Cost: n memcmp of len bytes. */
#include <stdint.h>
#include <string.h>

#include "device/cmp.h"
#include "device/emu/internal.h"

int vc_emu_cmp_run(struct vc_device *d, const struct vc_cmp_job *job)
{
	(void)d;
	const uint64_t *pairs = (const uint64_t *)(uintptr_t)job->pairs_dev;
	uint8_t *out = (uint8_t *)(uintptr_t)job->out_dev;
	for (uint32_t i = 0; i < job->n; i++)
		out[i] = memcmp((const void *)(uintptr_t)pairs[2 * i],
				(const void *)(uintptr_t)pairs[2 * i + 1], job->len) == 0;
	return 0;
}
