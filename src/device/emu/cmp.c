/* The emulated device's byte compares (device/cmp.h): memcmp over each
 * pair's addresses, which on this backend are host pointers. On the
 * caller's thread, synchronous. Cost: n memcmp of len bytes.
 *
 * With a key: the n ciphertext blocks copied into one buffer, decrypted
 * there by OpenSSL in one call (vc_emu_xts_pages: one key schedule, unit
 * k of pair i with tweak tweaks[i] + k), compared, and the buffer (now
 * plaintext) zeroed before it is freed. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/secret.h"
#include "device/cmp.h"
#include "device/emu/internal.h"
#include "device/xts.h"

static int cmp_xts(const struct vc_cmp_job *job)
{
	const uint64_t *pairs = (const uint64_t *)(uintptr_t)job->pairs_dev;
	const uint64_t *tweaks = (const uint64_t *)(uintptr_t)job->tweaks_dev;
	uint8_t *out = (uint8_t *)(uintptr_t)job->out_dev;
	const uint32_t unit = job->len < VC_XTS_UNIT_MAX ? job->len : VC_XTS_UNIT_MAX;
	const uint32_t units = job->len / unit;
	const size_t bytes = (size_t)job->n * job->len, nt = (size_t)job->n * units;
	unsigned char *buf = malloc(bytes);
	uint64_t *tw = malloc(nt * sizeof *tw);
	int r = buf && tw ? 0 : vc_err(-ENOMEM, "compare: no memory for %zu bytes of decryption", bytes);
	for (uint32_t i = 0; r == 0 && i < job->n; i++) {
		memcpy(buf + (size_t)i * job->len, (const void *)(uintptr_t)pairs[2 * i + 1], job->len);
		for (uint32_t k = 0; k < units; k++)
			tw[(size_t)i * units + k] = tweaks[i] + k;
	}
	if (r == 0)
		r = vc_emu_xts_pages(job->key, buf, tw, (uint32_t)nt, unit, 0);
	for (uint32_t i = 0; r == 0 && i < job->n; i++)
		out[i] = memcmp((const void *)(uintptr_t)pairs[2 * i], buf + (size_t)i * job->len,
				job->len) == 0;
	if (buf)
		vc_secret_zero(buf, bytes);
	free(buf);
	free(tw);
	return r;
}

/* The whole compare, on the caller's thread: emu has nothing to overlap. */
int vc_emu_cmp_start(struct vc_device *d, const struct vc_cmp_job *job)
{
	int r = vc_emu_health(d);
	if (r < 0)
		return r;
	if (job->key)
		return cmp_xts(job);
	const uint64_t *pairs = (const uint64_t *)(uintptr_t)job->pairs_dev;
	uint8_t *out = (uint8_t *)(uintptr_t)job->out_dev;
	for (uint32_t i = 0; i < job->n; i++)
		out[i] = memcmp((const void *)(uintptr_t)pairs[2 * i],
				(const void *)(uintptr_t)pairs[2 * i + 1], job->len) == 0;
	return 0;
}

/* A device that failed since the start fails the wait too, as on CUDA,
 * whose results the failure may have cut short. */
int vc_emu_cmp_wait(struct vc_device *d)
{
	return vc_emu_health(d);
}
