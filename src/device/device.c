/* Backend selection. AUTO prefers CUDA and falls back to emu only when CUDA
 * is absent (not built, or no usable device); a CUDA device that exists but
 * fails is an error, not a silent fallback. */
#include "device/device.h"

#include <errno.h>
#include <string.h>

#include "core/error.h"
#include "vramcache.h"

int vc_device_open(int kind, int ordinal, struct vc_device **out)
{
	switch (kind) {
	case VC_DEVICE_EMU:
		return vc_emu_open(out);
	case VC_DEVICE_CUDA:
		return vc_cuda_open(ordinal, out);
	case VC_DEVICE_AUTO: {
		int r = vc_cuda_open(ordinal, out);
		if (r == -VC_ENOTBUILT || r == -VC_ENODEVICE)
			return vc_emu_open(out);
		return r;
	}
	default:
		return vc_err(-VC_ECONFIG, "unknown device kind %d", kind);
	}
}

void vc_device_close(struct vc_device *d)
{
	if (d)
		d->ops->close(d);
}

int vc_device_parse(const char *name)
{
	static const char *const names[] = { [VC_DEVICE_AUTO] = "auto", [VC_DEVICE_EMU] = "emu",
					     [VC_DEVICE_CUDA] = "cuda" };
	for (int k = 0; k < (int)(sizeof names / sizeof *names); k++)
		if (name && strcmp(name, names[k]) == 0)
			return k;
	return vc_err(-EINVAL, "unknown device \"%s\" (auto, cuda or emu)", name ? name : "");
}
