/* Whole-buffer I/O on the client's stream (socket, or any fd for fuzzing). */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nbd/wire.h"

int nbd_read_full(int fd, void *buf, size_t n)
{
	unsigned char *p = buf;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ECONNRESET;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int nbd_skip(int fd, uint64_t n)
{
	unsigned char scratch[16384];
	while (n > 0) {
		size_t k = n < sizeof(scratch) ? (size_t)n : sizeof(scratch);
		int r = nbd_read_full(fd, scratch, k);
		if (r < 0)
			return r;
		n -= k;
	}
	return 0;
}

int nbd_write_full(int fd, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	int use_send = 1;
	while (n > 0) {
		ssize_t r = use_send ? send(fd, p, n, MSG_NOSIGNAL) : write(fd, p, n);
		if (r < 0 && errno == ENOTSOCK && use_send) {
			use_send = 0; /* a pipe or file (fuzzing); SIGPIPE is the caller's */
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}
