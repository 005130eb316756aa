#include "base/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

#define SECRET_MAX (1u << 20)

/* The header at the start of the mapping, the bytes 64 bytes in: one
 * mapping holds both, so both are locked and zeroed together. */
#define SECRET_OFF 64

int vc_secret_alloc(size_t len, struct vc_secret **out)
{
	*out = NULL;
	if (len == 0 || len > SECRET_MAX)
		return vc_err(-EINVAL, "secret: %zu bytes asked for (1 .. %u)", len, SECRET_MAX);
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	const size_t map_len = (SECRET_OFF + len + page - 1) / page * page;
	void *m = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return vc_err(-errno, "secret: mmap of %zu bytes: %s", map_len, strerror(errno));
	if (mlock(m, map_len) != 0) {
		const int e = errno;
		struct rlimit rl = { 0, 0 };
		getrlimit(RLIMIT_MEMLOCK, &rl);
		munmap(m, map_len);
		return vc_err(-e, "secret: cannot lock %zu bytes of key material in memory: %s "
				  "(RLIMIT_MEMLOCK is %llu bytes; raise it with ulimit -l or LimitMEMLOCK=)",
			      map_len, strerror(e), (unsigned long long)rl.rlim_cur);
	}
	(void)madvise(m, map_len, MADV_DONTDUMP); /* best effort: never an error */
	struct vc_secret *s = m;
	s->bytes = (unsigned char *)m + SECRET_OFF;
	s->len = len;
	s->map_len = map_len;
	*out = s;
	return 0;
}

void vc_secret_free(struct vc_secret *s)
{
	if (!s)
		return;
	const size_t map_len = s->map_len;
	explicit_bzero(s, map_len);
	munlock(s, map_len);
	munmap(s, map_len);
}

int vc_secret_random(size_t len, struct vc_secret **out)
{
	struct vc_secret *s;
	int r = vc_secret_alloc(len, &s);
	if (r < 0)
		return r;
	for (size_t got = 0; got < len;) {
		const ssize_t k = getrandom(s->bytes + got, len - got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = vc_err(-errno, "secret: getrandom: %s", strerror(errno));
			vc_secret_free(s);
			return r;
		}
		got += (size_t)k;
	}
	*out = s;
	return 0;
}

/* Reads exactly len bytes into buf; 0, -EINVAL if the file ends first. */
static int read_all(int fd, const char *path, unsigned char *buf, size_t len)
{
	for (size_t got = 0; got < len;) {
		const ssize_t k = read(fd, buf + got, len - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return vc_err(-errno, "key file %s: read: %s", path, strerror(errno));
		if (k == 0)
			return vc_err(-EINVAL, "key file %s: ended after %zu of %zu bytes (changed while read?)",
				      path, got, len);
		got += (size_t)k;
	}
	return 0;
}

int vc_secret_load(const char *path, size_t len, struct vc_secret **out)
{
	*out = NULL;
	/* O_NONBLOCK: opening a FIFO must not wait for a writer before the
	 * type check refuses it. */
	const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return vc_err(-errno, "key file %s: %s", path, strerror(errno));
	struct stat st;
	int r = 0;
	if (fstat(fd, &st) != 0) {
		r = vc_err(-errno, "key file %s: fstat: %s", path, strerror(errno));
	} else if (!S_ISREG(st.st_mode)) {
		r = vc_err(-EINVAL, "key file %s: not a regular file", path);
	} else if (st.st_uid != geteuid()) {
		r = vc_err(-EACCES, "key file %s: owned by uid %u, not by this user (uid %u)", path,
			   (unsigned)st.st_uid, (unsigned)geteuid());
	} else if ((st.st_mode & 077) != 0) {
		r = vc_err(-EACCES, "key file %s: mode %04o lets group or others read it; "
				    "it must be 0600 or stricter (chmod 600 %s)",
			   path, (unsigned)(st.st_mode & 07777), path);
	} else if ((uint64_t)st.st_size != len) {
		r = vc_err(-EINVAL, "key file %s: %lld bytes; it must hold exactly %zu raw bytes "
				    "(make one with: (umask 077; head -c %zu /dev/urandom > %s))",
			   path, (long long)st.st_size, len, len, path);
	}
	struct vc_secret *s = NULL;
	if (r == 0)
		r = vc_secret_alloc(len, &s);
	if (r == 0)
		r = read_all(fd, path, s->bytes, len);
	if (r == 0) {
		/* The file grew between fstat and read: refuse rather than take
		 * a prefix of something else. */
		unsigned char extra;
		ssize_t k;
		while ((k = read(fd, &extra, 1)) < 0 && errno == EINTR)
			;
		if (k != 0)
			r = vc_err(-EINVAL, "key file %s: longer than %zu bytes (changed while read?)",
				   path, len);
		explicit_bzero(&extra, sizeof extra);
	}
	close(fd);
	if (r < 0) {
		vc_secret_free(s);
		return r;
	}
	*out = s;
	return 0;
}

void vc_secret_zero(void *p, size_t n)
{
	explicit_bzero(p, n);
}
