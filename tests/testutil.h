/* Helpers shared by the test programs (header only: each test is one binary). */
#ifndef VC_TESTUTIL_H
#define VC_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/rand.h"
#include "vramcache.h"

#define T_SKIP 77

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

#define CHECK_OK(expr)                                                                     \
	do {                                                                               \
		long long r_ = (long long)(expr);                                          \
		if (r_ < 0) {                                                              \
			fprintf(stderr, "%s:%d: %s = %lld (%s; %s)\n", __FILE__, __LINE__, #expr, \
				r_, vc_strerror((int)r_), vc_last_error());                \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

/* The device this run asks for: VC_TEST_DEVICE=emu|cuda (default emu). */
static inline int t_device_kind(void)
{
	const char *s = getenv("VC_TEST_DEVICE");
	if (s && strcmp(s, "cuda") == 0)
		return VC_DEVICE_CUDA;
	return VC_DEVICE_EMU;
}

/* Exits 77 with a message when the asked-for device cannot be opened
 * because it is absent; any other failure is a test failure. */
static inline void t_skip_if_absent(int r, const char *what)
{
	if (r == -VC_ENODEVICE || r == -VC_ENOTBUILT) {
		fprintf(stderr, "SKIP %s: %s (%s)\n", what, vc_strerror(r), vc_last_error());
		exit(T_SKIP);
	}
}

static inline uint64_t t_rand(uint64_t *s)
{
	return vc_rand64(s);
}

/* Makes a temporary backing file of `size` bytes of seeded random data;
 * returns its path (static buffer per call site is the caller's). */
static inline void t_make_file(char *path, size_t pathlen, uint64_t size, uint64_t seed)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(path, pathlen, "%s/vc-test-XXXXXX", dir);
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unsigned char buf[65536];
	uint64_t done = 0;
	while (done < size) {
		size_t k = size - done < sizeof buf ? (size_t)(size - done) : sizeof buf;
		for (size_t i = 0; i < k; i += 8) {
			uint64_t v = t_rand(&seed);
			memcpy(buf + i, &v, k - i < 8 ? k - i : 8);
		}
		CHECK(write(fd, buf, k) == (ssize_t)k);
		done += k;
	}
	close(fd);
}

#endif
