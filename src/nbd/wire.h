/* Big-endian loads and stores for the NBD wire format, and whole-buffer
 * reads and writes on a stream fd. */
#ifndef VC_NBD_WIRE_H
#define VC_NBD_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

static inline uint16_t nbd_get16(const unsigned char *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}
static inline uint32_t nbd_get32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t nbd_get64(const unsigned char *p)
{
	return (uint64_t)nbd_get32(p) << 32 | nbd_get32(p + 4);
}
static inline void nbd_put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}
static inline void nbd_put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (24 - 8 * i));
}
static inline void nbd_put64(unsigned char *p, uint64_t v)
{
	nbd_put32(p, (uint32_t)(v >> 32));
	nbd_put32(p + 4, (uint32_t)v);
}

/* Reads exactly n bytes. 0, -ECONNRESET at end of stream (even after part
 * of the buffer), or -errno. EINTR is retried. */
int nbd_read_full(int fd, void *buf, size_t n);
/* Writes exactly n bytes; no SIGPIPE on a socket. 0 or -errno. */
int nbd_write_full(int fd, const void *buf, size_t n);
/* Sends iov[0..n) whole, in as few calls as the socket takes (sendmsg;
 * writev where fd is not a socket). Advances the iovecs past what went.
 * `dontwait`: returns -EAGAIN as soon as the socket is full, perhaps
 * after part of it (see nbd_iov_left). 0 or -errno. */
int nbd_writev_full(int fd, struct iovec *iov, int n);
int nbd_writev_some(int fd, struct iovec *iov, int n, bool dontwait);
/* Bytes of iov[0..n) not yet sent. */
size_t nbd_iov_left(const struct iovec *iov, int n);

#endif
