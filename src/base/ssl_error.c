/* base/ssl_error.h. */
#include "base/ssl_error.h"

#ifdef VC_HAVE_OPENSSL
#include <errno.h>
#include <openssl/err.h>

#include "base/error.h"

int vc_ssl_fail(const char *who, const char *what)
{
	char buf[256];
	unsigned long e = ERR_get_error();
	ERR_error_string_n(e, buf, sizeof buf);
	ERR_clear_error();
	return vc_err(-EIO, "%s: OpenSSL %s failed: %s", who, what, e ? buf : "no reason given");
}
#endif
