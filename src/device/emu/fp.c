/* The emulated device's fingerprints (device/fp.h): the host reference over
 * each block's address, which on this backend is a host pointer.
 *
 * Runs on the caller's thread, one block after another: the job is
 * synchronous on both backends, and on emu there is no device to overlap
 * with. max_sms has no meaning here and is ignored. Cost: n blocks of the
 * host reference (device/fp.c), plus one 8-byte read and one 16-byte write
 * per block. */
#include <stdint.h>

#include "device/emu/internal.h"
#include "device/fp.h"

int vc_emu_fp_run(struct vc_device *d, const struct vc_fp_job *job)
{
	int r = vc_emu_health(d);
	if (r < 0)
		return r;
	const uint64_t *blocks = (const uint64_t *)(uintptr_t)job->blocks_dev;
	struct vc_fp_digest *out = (struct vc_fp_digest *)(uintptr_t)job->out_dev;
	for (uint32_t i = 0; i < job->n; i++)
		vc_fp_block(job->algo, (const void *)(uintptr_t)blocks[i], job->block_size, &out[i]);
	return 0;
}
