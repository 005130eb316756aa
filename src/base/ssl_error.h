/* OpenSSL's reason for its last failure, as our error (base/error.h): the
 * one message the callers of libcrypto (base/gmac.c, device/emu/xts.c)
 * give. Built only with OpenSSL (VC_HAVE_OPENSSL). */
#ifndef VC_BASE_SSL_ERROR_H
#define VC_BASE_SSL_ERROR_H

/* Records "WHO: OpenSSL WHAT failed: REASON" (and clears OpenSSL's error
 * queue); returns -EIO. */
int vc_ssl_fail(const char *who, const char *what);

#endif
