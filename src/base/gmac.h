/* Page tags on the host: AES-256-GMAC (GCM with no plaintext, NIST SP
 * 800-38D section 3: the data is authenticated as additional data, the tag
 * is 16 bytes), for the encrypted GPU tier's integrity mode.
 *
 * A context holds one 32-byte key for its life and answers from any
 * thread: it keeps a fixed pool of OpenSSL contexts, each keyed once and
 * taken by one thread at a time, so a tag costs an IV setup and one pass
 * of GHASH over the data (no key expansion per tag, no lock held while it
 * runs). Cost: about 0.2-0.5 us per 4 KiB on a core with carry-less
 * multiply; 64 contexts of a few KiB each.
 *
 * Where key bytes live: the caller's key (the engine keeps it in a locked
 * mapping, base/secret.h) and, derived from it, the AES key schedule and
 * GHASH tables inside OpenSSL's contexts, which are ordinary heap memory
 * (not locked), zeroed by OpenSSL when the context closes.
 *
 * Without OpenSSL (VC_HAVE_OPENSSL unset) vc_gmac_open returns
 * -VC_ENOTBUILT, naming the package to install.
 */
#ifndef VC_BASE_GMAC_H
#define VC_BASE_GMAC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VC_GMAC_KEY_BYTES 32
#define VC_GMAC_IV_BYTES 12
#define VC_GMAC_TAG_BYTES 16

struct vc_gmac;

/* A context over key (copied into OpenSSL's contexts as they are made;
 * the caller's bytes must stay valid until vc_gmac_close). */
int vc_gmac_open(const unsigned char key[VC_GMAC_KEY_BYTES], struct vc_gmac **out);
void vc_gmac_close(struct vc_gmac *g);

/* tag = GMAC(key, iv, data[0..len)); len below 2^31. Thread safe. 0, or
 * -EIO / -ENOMEM with OpenSSL's reason. */
int vc_gmac_tag(struct vc_gmac *g, const unsigned char iv[VC_GMAC_IV_BYTES], const void *data,
		size_t len, unsigned char tag[VC_GMAC_TAG_BYTES]);

#ifdef __cplusplus
}
#endif
#endif
