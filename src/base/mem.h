/* Memory helpers shared by the layers. */
#ifndef VC_BASE_MEM_H
#define VC_BASE_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

/* Asks for transparent huge pages over the whole 4 KiB pages of [p, p +
 * len), before they are first touched: large tables read at random (the
 * page entries, the index) then cost one TLB entry per 2 MiB instead of
 * one per 4 KiB, a page walk less per lookup. A no-op where the kernel
 * will not (THP off) or the range is small; never an error. */
static inline void vc_mem_huge(void *p, size_t len)
{
	uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, e = ((uintptr_t)p + len) & ~(uintptr_t)4095;
	if (len >= (4u << 20) && e > a)
		(void)madvise((void *)a, e - a, MADV_HUGEPAGE);
}

#endif
