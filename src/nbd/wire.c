/* Whole-buffer I/O on the client's stream (socket, or any fd for fuzzing). */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>
#include <sys/uio.h>

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

size_t nbd_iov_left(const struct iovec *iov, int n)
{
	size_t t = 0;
	for (int i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

int nbd_writev_some(int fd, struct iovec *iov, int n, bool dontwait)
{
	int use_send = 1;
	while (n > 0 && iov[0].iov_len == 0) {
		iov++;
		n--;
	}
	while (n > 0) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		ssize_t r = use_send ? sendmsg(fd, &m, MSG_NOSIGNAL | (dontwait ? MSG_DONTWAIT : 0))
				     : writev(fd, iov, n);
		if (r < 0 && errno == ENOTSOCK && use_send) {
			use_send = 0; /* a pipe or file (fuzzing); SIGPIPE is the caller's */
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		for (size_t k = (size_t)r; n > 0 && (k > 0 || iov[0].iov_len == 0);) {
			size_t t = k < iov[0].iov_len ? k : iov[0].iov_len;
			iov[0].iov_base = (char *)iov[0].iov_base + t;
			iov[0].iov_len -= t;
			k -= t;
			if (iov[0].iov_len == 0) {
				iov++;
				n--;
			}
		}
	}
	return 0;
}

int nbd_writev_full(int fd, struct iovec *iov, int n)
{
	return nbd_writev_some(fd, iov, n, false);
}

int nbd_write_full(int fd, const void *buf, size_t n)
{
	struct iovec v = { (void *)buf, n };
	return nbd_writev_some(fd, &v, 1, false);
}
