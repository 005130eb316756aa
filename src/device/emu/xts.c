/* The emulated device's cipher: AES-256-XTS through OpenSSL's libcrypto
 * (device/xts.h), the reference the CUDA kernel is compared with byte for
 * byte.
 *
 * One EVP context per call, keyed once; each page then sets only its IV
 * (the tweak block) and is one EVP_CipherUpdate, which OpenSSL's XTS treats
 * as one whole data unit. In place: OpenSSL allows out == in. The context's
 * key schedule is zeroed by EVP_CIPHER_CTX_free (OPENSSL_clear_free).
 * Without OpenSSL (VC_HAVE_OPENSSL unset) every call returns
 * -VC_ENOTBUILT, naming the package to install. */
#include <errno.h>
#include <string.h>

#include "base/error.h"
#include "device/xts.h"
#include "vramcache.h"

#ifdef VC_HAVE_OPENSSL
#include "base/ssl_error.h"
#include <openssl/evp.h>

int vc_emu_xts_pages(const struct vc_xts_key *key, void *pages, const uint64_t *tweaks,
		     uint32_t n, uint32_t page_size, int encrypt)
{
	int r = vc_xts_check(key, page_size);
	if (r < 0 || n == 0)
		return r;
	if (!pages || !tweaks)
		return vc_err(-EINVAL, "XTS: no pages or no tweaks");
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	if (!ctx)
		return vc_err(-ENOMEM, "XTS: no memory for an OpenSSL context");
	const int enc = encrypt ? 1 : 0;
	if (EVP_CipherInit_ex(ctx, EVP_aes_256_xts(), NULL, key->bytes, NULL, enc) != 1) {
		r = vc_ssl_fail("XTS", "key setup");
		goto out;
	}
	unsigned char *p = pages;
	for (uint32_t i = 0; i < n; i++, p += page_size) {
		unsigned char iv[16] = { 0 };
		for (int b = 0; b < 8; b++)
			iv[b] = (unsigned char)(tweaks[i] >> (8 * b)); /* plain64 */
		int outl = 0;
		if (EVP_CipherInit_ex(ctx, NULL, NULL, NULL, iv, -1) != 1 ||
		    EVP_CipherUpdate(ctx, p, &outl, p, (int)page_size) != 1 ||
		    outl != (int)page_size) {
			r = vc_ssl_fail("XTS", enc ? "encryption" : "decryption");
			goto out;
		}
	}
out:
	EVP_CIPHER_CTX_free(ctx);
	return r;
}

#else

int vc_emu_xts_pages(const struct vc_xts_key *key, void *pages, const uint64_t *tweaks,
		     uint32_t n, uint32_t page_size, int encrypt)
{
	(void)key, (void)pages, (void)tweaks, (void)n, (void)page_size, (void)encrypt;
	return vc_err(-VC_ENOTBUILT, "XTS: this build has no OpenSSL (install libssl-dev and "
				     "configure again): the emulated device cannot encrypt");
}

#endif
