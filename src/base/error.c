#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "vramcache.h"

/* One message per thread, as libnbd does: the caller that got the failure
 * can print it without racing other threads. */
static _Thread_local char last_msg[512];

int vc_err(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_msg, sizeof last_msg, fmt, ap);
	va_end(ap);
	return code;
}

void vc_err_clear(void)
{
	last_msg[0] = '\0';
}

const char *vc_last_error(void)
{
	return last_msg;
}

const char *vc_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case VC_EDEVICE:
		return "GPU device error";
	case VC_ENODEVICE:
		return "no usable CUDA device";
	case VC_ECONFIG:
		return "invalid configuration";
	case VC_ENOTBUILT:
		return "backend not compiled in";
	case VC_EI_SHRUNK:
	case VC_EI_REFUSED:
	case VC_EI_NOROOM:
		return "internal condition (a bug if a caller sees it)";
	default:
		return strerror(err);
	}
}
