/* OpenSSL's MD5 over blocks (device/fp.h): the independent implementation
 * our MD5 is checked against, and the CPU baseline DEDU's figures assume
 * (the 0.6 GB/s per core).
 *
 * One EVP context per call; the digest is fetched once per call (OpenSSL
 * 3: an implicit fetch per EVP_DigestInit_ex would take a lock per block),
 * then every block is one init, update and final on the same context.
 * Without OpenSSL (VC_HAVE_OPENSSL unset) the call returns -VC_ENOTBUILT. */
#include <errno.h>

#include "base/error.h"
#include "device/fp.h"
#include "vramcache.h"

#ifdef VC_HAVE_OPENSSL
#include <openssl/err.h>
#include <openssl/evp.h>

int vc_fp_md5_openssl(const void *p, uint32_t n, size_t size, struct vc_fp_digest *out)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx)
		return vc_err(-ENOMEM, "MD5: no memory for an OpenSSL context");
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
	EVP_MD *md = EVP_MD_fetch(NULL, "MD5", NULL);
#else
	const EVP_MD *md = EVP_md5();
#endif
	int r = 0;
	if (!md) {
		ERR_clear_error();
		r = vc_err(-EIO, "MD5: OpenSSL offers no MD5 here (a FIPS provider?)");
		goto out;
	}
	const unsigned char *b = p;
	for (uint32_t i = 0; i < n; i++, b += size) {
		unsigned int len = 0;
		if (EVP_DigestInit_ex(ctx, md, NULL) != 1 || EVP_DigestUpdate(ctx, b, size) != 1 ||
		    EVP_DigestFinal_ex(ctx, out[i].b, &len) != 1 || len != 16) {
			char buf[256];
			ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
			ERR_clear_error();
			r = vc_err(-EIO, "MD5: OpenSSL failed: %s", buf);
			break;
		}
	}
out:
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
	EVP_MD_free(md);
#endif
	EVP_MD_CTX_free(ctx);
	return r;
}

#else

int vc_fp_md5_openssl(const void *p, uint32_t n, size_t size, struct vc_fp_digest *out)
{
	(void)p, (void)n, (void)size, (void)out;
	return vc_err(-VC_ENOTBUILT, "MD5: this build has no OpenSSL (install libssl-dev and "
				     "configure again)");
}

#endif
