/* Page numbers: the one key for a page everywhere (engine, index, traces).
 *
 * Volumes share one cache: a page number is its volume id in bits 48..63
 * over its page index in the volume in bits 0..47. 48 index bits cover
 * 2^57 bytes at the smallest (512 B) page, so no real store is refused;
 * 16 volume bits leave room for far more volumes than VC_VOLUMES_MAX. */
#ifndef VC_PAGENO_H
#define VC_PAGENO_H

#include <stdint.h>

#define VC_PNO_VOL_SHIFT 48
#define VC_PNO_INDEX_MASK ((1ull << VC_PNO_VOL_SHIFT) - 1)

static inline uint64_t vc_pno(uint32_t vol, uint64_t index)
{
	return (uint64_t)(vol & 0xffff) << VC_PNO_VOL_SHIFT | (index & VC_PNO_INDEX_MASK);
}

static inline uint32_t vc_pno_vol(uint64_t pno)
{
	return (uint32_t)(pno >> VC_PNO_VOL_SHIFT);
}

static inline uint64_t vc_pno_index(uint64_t pno)
{
	return pno & VC_PNO_INDEX_MASK;
}

#endif
