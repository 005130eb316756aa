/* AES-256-GMAC through OpenSSL (base/gmac.h). */
#include "base/gmac.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/hash.h"
#include "vramcache.h"

#ifdef VC_HAVE_OPENSSL
#include "base/ssl_error.h"
#include <openssl/evp.h>

/* Contexts in the pool: more than the threads that tag at once, so a
 * thread finds a free one at its first or second try. */
#define GMAC_SLOTS 64

struct vc_gmac {
	const unsigned char *key;
	struct gslot { /* a cache line each: takers of neighbours do not share it */
		_Alignas(64) atomic_flag busy;
		EVP_CIPHER_CTX *ctx; /* made and keyed by its first taker */
	} s[GMAC_SLOTS];
};

/* The slot this thread took last: where it looks first. */
static _Thread_local unsigned hint = UINT32_MAX;

int vc_gmac_open(const unsigned char key[VC_GMAC_KEY_BYTES], struct vc_gmac **out)
{
	struct vc_gmac *g = aligned_alloc(64, sizeof *g); /* sizeof: a multiple of 64 */
	if (!g)
		return vc_err(-ENOMEM, "out of memory");
	memset(g, 0, sizeof *g);
	g->key = key;
	for (unsigned i = 0; i < GMAC_SLOTS; i++)
		atomic_flag_clear(&g->s[i].busy);
	*out = g;
	return 0;
}

void vc_gmac_close(struct vc_gmac *g)
{
	if (!g)
		return;
	for (unsigned i = 0; i < GMAC_SLOTS; i++)
		EVP_CIPHER_CTX_free(g->s[i].ctx); /* zeroes the key schedule */
	free(g);
}

static int slot_key(struct vc_gmac *g, struct gslot *s)
{
	s->ctx = EVP_CIPHER_CTX_new();
	if (!s->ctx)
		return vc_err(-ENOMEM, "GMAC: no memory for an OpenSSL context");
	if (EVP_EncryptInit_ex(s->ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_GCM_SET_IVLEN, VC_GMAC_IV_BYTES, NULL) != 1 ||
	    EVP_EncryptInit_ex(s->ctx, NULL, NULL, g->key, NULL) != 1) {
		EVP_CIPHER_CTX_free(s->ctx);
		s->ctx = NULL;
		return vc_ssl_fail("GMAC", "key setup");
	}
	return 0;
}

int vc_gmac_tag(struct vc_gmac *g, const unsigned char iv[VC_GMAC_IV_BYTES], const void *data,
		size_t len, unsigned char tag[VC_GMAC_TAG_BYTES])
{
	if (len >= (1u << 31))
		return vc_err(-EINVAL, "GMAC: %zu bytes: at most 2^31 - 1", len);
	if (hint == UINT32_MAX)
		hint = (unsigned)vc_mix64((uint64_t)(uintptr_t)&hint) % GMAC_SLOTS;
	struct gslot *s = NULL;
	for (unsigned i = hint, tries = 1;; i = (i + 1) % GMAC_SLOTS, tries++) {
		if (!atomic_flag_test_and_set_explicit(&g->s[i].busy, memory_order_acquire)) {
			s = &g->s[i];
			hint = i;
			break;
		}
		if (tries % GMAC_SLOTS == 0)
			sched_yield(); /* more threads than contexts: let holders finish */
	}
	int r = s->ctx ? 0 : slot_key(g, s);
	int outl = 0;
	unsigned char none[16];
	if (r == 0 && (EVP_EncryptInit_ex(s->ctx, NULL, NULL, NULL, iv) != 1 ||
		       (len && EVP_EncryptUpdate(s->ctx, NULL, &outl, data, (int)len) != 1) ||
		       EVP_EncryptFinal_ex(s->ctx, none, &outl) != 1 ||
		       EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_GCM_GET_TAG, VC_GMAC_TAG_BYTES, tag) != 1))
		r = vc_ssl_fail("GMAC", "tag");
	atomic_flag_clear_explicit(&s->busy, memory_order_release);
	return r;
}

#else

struct vc_gmac {
	int unused;
};

int vc_gmac_open(const unsigned char key[VC_GMAC_KEY_BYTES], struct vc_gmac **out)
{
	(void)key;
	*out = NULL;
	return vc_err(-VC_ENOTBUILT, "GMAC: this build has no OpenSSL (install libssl-dev and "
				     "configure again): the integrity mode needs it");
}

void vc_gmac_close(struct vc_gmac *g)
{
	(void)g;
}

int vc_gmac_tag(struct vc_gmac *g, const unsigned char iv[VC_GMAC_IV_BYTES], const void *data,
		size_t len, unsigned char tag[VC_GMAC_TAG_BYTES])
{
	(void)g, (void)iv, (void)data, (void)len, (void)tag;
	return vc_err(-VC_ENOTBUILT, "GMAC: this build has no OpenSSL");
}

#endif
