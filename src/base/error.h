/* Per-thread error messages and the mapping of codes to text. */
#ifndef VC_ERROR_H
#define VC_ERROR_H

/* Records a message for the calling thread and returns `code` unchanged
 * (a negative -errno or -VC_E*), so failures read `return vc_err(-EIO, ...)`. */
int vc_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Clears the calling thread's message. */
void vc_err_clear(void);

/* The library's internal conditions: codes far above any errno and above
 * the public VC_E* range, so that none can be mistaken for an error a
 * backing store returned (backing.h's rule keeps stores' codes to final
 * errnos) or for a public one. They pass between the engine's rooms and
 * never leave a public call. */
#define VC_EI_FIRST 20480
#define VC_EI_SHRUNK (VC_EI_FIRST + 0)  /* the GPU tier is smaller than the room asked for */
#define VC_EI_REFUSED (VC_EI_FIRST + 1) /* no room: what could leave holds dirty pages whose
					   store refuses their write-backs now */
#define VC_EI_NOROOM (VC_EI_FIRST + 2)  /* room promised to others: look again */

#endif
