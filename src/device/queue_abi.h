/* Device queues: the constants that host code and the CUDA server kernel
 * share (plain C and C++: no atomics, no pthreads). See queue.h. */
#ifndef VC_DEVICE_QUEUE_ABI_H
#define VC_DEVICE_QUEUE_ABI_H

#define VC_DQ_MAX_RINGS 32
#define VC_DQ_MAX_LANES 32
/* Descriptor words carry their publication's tag in bits 48..63, so
 * addresses must lie below 2^48 (x86-64 user space and CUDA's unified
 * address space do; vc_dq_submit checks). */
#define VC_DQ_ADDR_BITS 48
#define VC_DQ_ADDR_MASK ((1ull << VC_DQ_ADDR_BITS) - 1)
/* A piece is what one descriptor moves: min(page size, 4 KiB). Larger
 * pages travel as several pieces, so a 2 MiB page spreads over lanes. */
#define VC_DQ_PIECE_MAX 4096u
/* Descriptor layout: four 64-bit words, each with the tag in bits 48..63:
 *   0  src address
 *   1  dst address
 *   2  op word (device.h's vc_move.op, 8 bits) | tweak bits 48..63 << 8
 *   3  tweak bits 0..47
 * The tweak is the piece's own (a piece is one cipher data unit). */
#define VC_DQ_DESC_WORDS 4
#define VC_DQ_OP_BITS 8

#endif
