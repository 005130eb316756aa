/* Per-thread error messages and the mapping of codes to text. */
#ifndef VC_ERROR_H
#define VC_ERROR_H

/* Records a message for the calling thread and returns `code` unchanged
 * (a negative -errno or -VC_E*), so failures read `return vc_err(-EIO, ...)`. */
int vc_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Clears the calling thread's message. */
void vc_err_clear(void);

#endif
