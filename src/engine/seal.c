/* The integrity mode (VC_ENCRYPT_XTS_GMAC): page seals, their checks, and
 * dropping pages that fail them (engine.h, "seal.c").
 *
 * GMAC IV: the seal's nonce, 8 bytes little-endian, then 4 zero bytes. The
 * nonce counts every seal of the cache (64 bits: never wraps), so no IV
 * repeats under the cache's MAC key, which is random per open and never
 * leaves host memory. Cost per page moved: one GMAC of the page (about
 * 0.2-0.5 us per 4 KiB with carry-less multiply) on the moving thread,
 * and 24 bytes of host memory per page entry.
 */
#include "engine/engine.h"

static void iv_of(uint64_t nonce, unsigned char iv[VC_GMAC_IV_BYTES])
{
	for (int b = 0; b < 8; b++)
		iv[b] = (unsigned char)(nonce >> (8 * b));
	memset(iv + 8, 0, VC_GMAC_IV_BYTES - 8);
}

int eng_integ_open(struct vc_cache *c, uint64_t npool)
{
	int r = vc_secret_random(VC_GMAC_KEY_BYTES, &c->gt.mac_key);
	if (r == 0)
		r = vc_gmac_open(c->gt.mac_key->bytes, &c->gt.mac);
	if (r == 0 && !(c->gt.seals = calloc(npool, sizeof *c->gt.seals)))
		r = vc_err(-ENOMEM, "out of memory for %llu page seals (integrity mode)",
			   (unsigned long long)npool);
	return r;
}

void eng_integ_close(struct vc_cache *c)
{
	vc_gmac_close(c->gt.mac);
	c->gt.mac = NULL;
	vc_secret_free(c->gt.mac_key);
	c->gt.mac_key = NULL;
	free(c->gt.seals);
	c->gt.seals = NULL;
}

int eng_seal(struct vc_cache *c, const struct vc_page *p, const void *plain)
{
	struct eng_seal *s = &c->gt.seals[page_id(c, p)];
	unsigned char iv[VC_GMAC_IV_BYTES];
	s->nonce = atomic_fetch_add_explicit(&c->gt.nonce, 1, memory_order_relaxed) + 1;
	iv_of(s->nonce, iv);
	return vc_gmac_tag(c->gt.mac, iv, plain, c->page_size, s->tag);
}

int eng_check(struct vc_cache *c, const struct vc_page *p, const void *plain, uint64_t *nonce)
{
	const struct eng_seal *s = &c->gt.seals[page_id(c, p)];
	unsigned char iv[VC_GMAC_IV_BYTES], tag[VC_GMAC_TAG_BYTES];
	*nonce = s->nonce;
	iv_of(s->nonce, iv);
	int r = vc_gmac_tag(c->gt.mac, iv, plain, c->page_size, tag);
	if (r < 0)
		return r;
	unsigned char diff = 0; /* constant time: no early exit on the first byte that differs */
	for (int i = 0; i < VC_GMAC_TAG_BYTES; i++)
		diff |= (unsigned char)(tag[i] ^ s->tag[i]);
	if (diff == 0)
		return 0;
	atomic_fetch_add_explicit(&c->gt.integ_failures, 1, memory_order_relaxed);
	return vc_err(-EIO, "page %llu of volume %llu changed in GPU memory (its integrity tag does "
			    "not match): not returned, and dropped from the cache",
		      (unsigned long long)vc_pno_index(p->pno),
		      (unsigned long long)(p->pno >> VC_PNO_VOL_SHIFT));
}

void eng_integ_drop(struct vc_cache *c, struct vc_page *p, uint64_t pno, uint64_t nonce,
		    bool owned)
{
	eng_assert_locked(c);
	if (!owned) {
		/* Settled in the GPU tier and found under c->mu, its fields and
		 * seal hold still (page.h; seals change only before a page
		 * settles there). */
		if (!(st_of(p) & VC_ST_GPU) || p->pno != pno || p->tier != GPU ||
		    c->gt.seals[page_id(c, p)].nonce != nonce || !vc_page_claim(p, 0, VC_ST_GPU))
			return;
	}
	eng_integ_count_drop(c, p);
	eng_page_drop(c, p);
	eng_wake(c);
}

void eng_integ_count_drop(struct vc_cache *c, const struct vc_page *p)
{
	atomic_fetch_add_explicit(&c->gt.integ_drops, 1, memory_order_relaxed);
	if (p->dirty)
		atomic_fetch_add_explicit(&c->gt.integ_dirty_lost, 1, memory_order_relaxed);
}

bool eng_stage_bad(struct vc_cache *c, const struct vc_page *p, struct vc_bio *bio)
{
	uint64_t nonce;
	if (eng_check(c, p, bio->buf, &nonce) == 0)
		return false;
	bio->result = -EIO;
	return true;
}

void eng_integ_drop_unlocked(struct vc_cache *c, struct vc_page *p, uint64_t pno, uint64_t nonce)
{
	eng_lock(c);
	eng_integ_drop(c, p, pno, nonce, false);
	eng_unlock(c);
}
