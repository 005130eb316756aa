/* The file backing store: open by path and by fd, sizes, byte-exact reads
 * and writes at unaligned offsets, end-of-file handling, batched submits
 * against a reference buffer (through io_uring where built, and again with
 * io_uring blocked by seccomp to run the fallback), read-only handling,
 * error messages, sync, injected latency and concurrent use. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include "backing/backing.h"
#include "base/clock.h"
#include "testutil.h"

/* Odd on purpose: the last page is partial and nothing is aligned. */
#define FSIZE ((1u << 20) + 4099u)

static char path[4096];
static unsigned char *ref; /* what the file should hold */

static void slurp(const char *p, unsigned char *buf, size_t len)
{
	int fd = open(p, O_RDONLY);
	CHECK(fd >= 0);
	size_t done = 0;
	while (done < len) {
		ssize_t r = pread(fd, buf + done, len - done, (off_t)done);
		CHECK(r > 0);
		done += (size_t)r;
	}
	close(fd);
}

/* The file on disk, read through another fd, equals ref. */
static void check_file(void)
{
	unsigned char *buf = malloc(FSIZE);
	CHECK(buf);
	slurp(path, buf, FSIZE);
	CHECK(memcmp(buf, ref, FSIZE) == 0);
	free(buf);
}

static void fill(unsigned char *p, size_t n, uint64_t *seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)t_rand(seed);
}

static void test_open_size_roundtrip(void)
{
	struct vc_backing *b;
	CHECK_OK(vc_backing_open(path, -1, 0, 0, &b));
	CHECK(vc_backing_size(b) == FSIZE);

	unsigned char *buf = malloc(FSIZE);
	CHECK(buf);
	CHECK_OK(vc_backing_read(b, buf, FSIZE, 0));
	CHECK(memcmp(buf, ref, FSIZE) == 0);

	uint64_t seed = 7;
	for (int i = 0; i < 300; i++) {
		uint64_t off = t_rand(&seed) % FSIZE;
		size_t len = (size_t)(t_rand(&seed) % 20000);
		if (len > FSIZE - off)
			len = (size_t)(FSIZE - off);
		if (t_rand(&seed) % 2) {
			fill(buf, len, &seed);
			CHECK_OK(vc_backing_write(b, buf, len, off));
			memcpy(ref + off, buf, len);
		} else {
			memset(buf, 0xa5, len + 1);
			CHECK_OK(vc_backing_read(b, buf, len, off));
			CHECK(memcmp(buf, ref + off, len) == 0);
			CHECK(buf[len] == 0xa5); /* nothing past len */
		}
	}
	/* The very last byte, and empty transfers (also at the end). */
	CHECK_OK(vc_backing_read(b, buf, 1, FSIZE - 1));
	CHECK(buf[0] == ref[FSIZE - 1]);
	CHECK(vc_backing_read(b, buf, 0, FSIZE) == 0);
	CHECK(vc_backing_write(b, buf, 0, 17) == 0);
	/* Past the end: refused, nothing changes. */
	CHECK(vc_backing_read(b, buf, 2, FSIZE - 1) == -EINVAL);
	CHECK(strstr(vc_last_error(), path) != NULL);
	CHECK(vc_backing_write(b, buf, 1, FSIZE) == -EINVAL);
	CHECK(vc_backing_read(b, buf, 1, UINT64_MAX) == -EINVAL);
	CHECK(vc_backing_read(b, buf, SIZE_MAX, 1) == -EINVAL);

	uint64_t w0 = vc_backing_wait_ns(b);
	CHECK(w0 > 0);
	CHECK_OK(vc_backing_sync(b));
	CHECK(vc_backing_wait_ns(b) >= w0);
	vc_backing_close(b);
	check_file();
	free(buf);
}

static void test_fd(void)
{
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	struct vc_backing *b;
	CHECK_OK(vc_backing_open(NULL, fd, 0, 0, &b));
	CHECK(vc_backing_size(b) == FSIZE);
	unsigned char buf[5000];
	CHECK_OK(vc_backing_read(b, buf, sizeof buf, 12345));
	CHECK(memcmp(buf, ref + 12345, sizeof buf) == 0);
	memset(buf, 0x3c, sizeof buf);
	CHECK_OK(vc_backing_write(b, buf, 333, 999));
	memcpy(ref + 999, buf, 333);
	CHECK_OK(vc_backing_sync(b));
	vc_backing_close(b);
	/* The adopted fd stays open, and its file offset was not used. */
	CHECK(fcntl(fd, F_GETFD) >= 0);
	CHECK(lseek(fd, 0, SEEK_CUR) == 0);
	CHECK(pread(fd, buf, 333, 999) == 333);
	CHECK(memcmp(buf, ref + 999, 333) == 0);

	/* A path given with the fd only names it. */
	CHECK_OK(vc_backing_open("named", fd, 1, 0, &b));
	vc_backing_close(b);
	CHECK(fcntl(fd, F_GETFD) >= 0);
	close(fd);

	/* A read-only fd serves a read-only cache and is refused otherwise. */
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	CHECK(vc_backing_open(NULL, fd, 0, 0, &b) == -EBADF);
	CHECK(strstr(vc_last_error(), "read-only") != NULL);
	CHECK_OK(vc_backing_open(NULL, fd, 1, 0, &b));
	CHECK_OK(vc_backing_read(b, buf, 10, 0));
	CHECK(vc_backing_write(b, buf, 10, 0) == -EROFS);
	vc_backing_close(b);
	CHECK(fcntl(fd, F_GETFD) >= 0);
	close(fd);

	/* A closed fd; no fd and no path. */
	CHECK(vc_backing_open(NULL, fd, 1, 0, &b) == -EBADF);
	CHECK(strstr(vc_last_error(), "fd ") != NULL);
	CHECK(vc_backing_open(NULL, -1, 1, 0, &b) == -EINVAL);
	CHECK(b == NULL);
	check_file();
}

/* --- batches ------------------------------------------------------------ */

#define NBIO 200

/* One round of n mixed bios over disjoint, unaligned ranges in random
 * order: reads must see ref, writes must land. Checks every result. */
static void submit_round(struct vc_backing *b, unsigned n, uint64_t *seed)
{
	struct vc_bio bios[NBIO];
	unsigned char *bufs[NBIO];
	CHECK(n <= NBIO);
	uint64_t seg = FSIZE / NBIO; /* disjoint: one range per segment */
	unsigned order[NBIO];
	for (unsigned i = 0; i < NBIO; i++)
		order[i] = i;
	for (unsigned i = NBIO - 1; i > 0; i--) {
		unsigned j = (unsigned)(t_rand(seed) % (i + 1));
		unsigned t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (unsigned i = 0; i < n; i++) {
		uint64_t start = order[i] * seg + t_rand(seed) % (seg / 2);
		uint32_t len = 1 + (uint32_t)(t_rand(seed) % (seg / 2 - 1));
		bufs[i] = malloc(len);
		CHECK(bufs[i]);
		bios[i] = (struct vc_bio){ .buf = bufs[i], .off = start, .len = len,
					   .write = (int)(t_rand(seed) % 2), .result = 12345 };
		if (bios[i].write)
			fill(bufs[i], len, seed);
		else
			memset(bufs[i], 0x5a, len);
	}
	CHECK_OK(vc_backing_submit(b, bios, n));
	for (unsigned i = 0; i < n; i++) {
		CHECK(bios[i].result == 0);
		if (bios[i].write)
			memcpy(ref + bios[i].off, bufs[i], bios[i].len);
		else
			CHECK(memcmp(bufs[i], ref + bios[i].off, bios[i].len) == 0);
		free(bufs[i]);
	}
}

static void test_submit(void)
{
	struct vc_backing *b;
	CHECK_OK(vc_backing_open(path, -1, 0, 0, &b));
	uint64_t seed = 99;
	CHECK(vc_backing_submit(b, NULL, 0) == 0);
	for (int r = 0; r < 5; r++)
		submit_round(b, NBIO, &seed);
	/* Around the queue depth, and one alone. */
	submit_round(b, 63, &seed);
	submit_round(b, 64, &seed);
	submit_round(b, 65, &seed);
	submit_round(b, 1, &seed);
	submit_round(b, 2, &seed);
	check_file();

	/* A bad request fails alone; the others complete. */
	unsigned char a[100], c[100], d[100];
	struct vc_bio bios[4] = {
		{ .buf = a, .off = 10, .len = 100 },
		{ .buf = c, .off = FSIZE - 50, .len = 100 }, /* past the end */
		{ .buf = d, .off = 5000, .len = 100, .write = 1 },
		{ .buf = c, .off = FSIZE, .len = 0 }, /* empty at the end: fine */
	};
	memset(d, 0x77, sizeof d);
	CHECK(vc_backing_submit(b, bios, 4) == -EINVAL);
	CHECK(strstr(vc_last_error(), path) && strstr(vc_last_error(), "request 1"));
	CHECK(bios[0].result == 0 && bios[1].result == -EINVAL && bios[2].result == 0 &&
	      bios[3].result == 0);
	CHECK(memcmp(a, ref + 10, 100) == 0);
	memcpy(ref + 5000, d, 100);
	CHECK_OK(vc_backing_sync(b));
	vc_backing_close(b);
	check_file();
}

/* Blocks io_uring_setup in this process (ENOSYS), as a seccomp profile
 * would; returns 0 on success. */
static int block_uring(void)
{
#ifdef __NR_io_uring_setup
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof f / sizeof f[0], .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
#else
	return -1;
#endif
}

/* The same batches with io_uring unavailable: the fallback must give the
 * same bytes. Runs in a child so the filter does not outlive it. */
static void test_submit_fallback(void)
{
	fflush(NULL);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		if (block_uring() < 0) {
			fprintf(stderr, "note: seccomp unavailable, fallback not forced\n");
			_exit(0);
		}
		test_submit();
		_exit(0);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The child changed the file: take its contents as the reference. */
	slurp(path, ref, FSIZE);
}

/* --- end of file, read-only, errors ------------------------------------ */

static void test_eof(void)
{
	char p2[4096];
	enum { SZ = 65536, CUT = 10000 };
	t_make_file(p2, sizeof p2, SZ, 3);
	unsigned char *orig = malloc(SZ), *buf = malloc(SZ);
	CHECK(orig && buf);
	slurp(p2, orig, SZ);
	struct vc_backing *b;
	CHECK_OK(vc_backing_open(p2, -1, 0, 0, &b));
	CHECK(truncate(p2, CUT) == 0); /* the file shrinks under us */
	CHECK(vc_backing_size(b) == SZ); /* size is fixed at open */

	/* Across the new end: data, then zeros. */
	memset(buf, 0xee, SZ);
	CHECK_OK(vc_backing_read(b, buf, 20000, CUT - 2000));
	CHECK(memcmp(buf, orig + CUT - 2000, 2000) == 0);
	for (int i = 2000; i < 20000; i++)
		CHECK(buf[i] == 0);
	CHECK(buf[20000] == 0xee);
	/* Wholly past it: zeros. */
	memset(buf, 0xee, SZ);
	CHECK_OK(vc_backing_read(b, buf, 1000, 30000));
	for (int i = 0; i < 1000; i++)
		CHECK(buf[i] == 0);
	/* The same through a batch. */
	unsigned char x[3000], y[3000], z[50];
	memset(x, 0xee, sizeof x);
	memset(y, 0xee, sizeof y);
	struct vc_bio bios[3] = {
		{ .buf = x, .off = CUT - 1000, .len = sizeof x },
		{ .buf = y, .off = SZ - sizeof y, .len = sizeof y },
		{ .buf = z, .off = 0, .len = sizeof z },
	};
	CHECK_OK(vc_backing_submit(b, bios, 3));
	CHECK(memcmp(x, orig + CUT - 1000, 1000) == 0);
	for (size_t i = 1000; i < sizeof x; i++)
		CHECK(x[i] == 0);
	for (size_t i = 0; i < sizeof y; i++)
		CHECK(y[i] == 0);
	CHECK(memcmp(z, orig, sizeof z) == 0);
	/* Past the size given at open: refused. */
	CHECK(vc_backing_read(b, buf, 1, SZ) == -EINVAL);
	/* Writing past the new end grows the file again. */
	memset(buf, 0x42, 10);
	CHECK_OK(vc_backing_write(b, buf, 10, SZ - 10));
	struct stat st;
	CHECK(stat(p2, &st) == 0 && st.st_size == SZ);
	vc_backing_close(b);
	unlink(p2);
	free(orig);
	free(buf);
}

static void test_readonly(void)
{
	struct vc_backing *b;
	CHECK_OK(vc_backing_open(path, -1, 1, 0, &b));
	CHECK(vc_backing_size(b) == FSIZE);
	unsigned char buf[4096];
	CHECK_OK(vc_backing_read(b, buf, sizeof buf, 4095));
	CHECK(memcmp(buf, ref + 4095, sizeof buf) == 0);
	CHECK(vc_backing_write(b, buf, 1, 0) == -EROFS);
	CHECK(strstr(vc_last_error(), path) != NULL);
	CHECK(vc_backing_write(b, buf, 0, 0) == -EROFS);
	unsigned char r1[64], r2[64];
	struct vc_bio bios[3] = {
		{ .buf = r1, .off = 1, .len = 64 },
		{ .buf = buf, .off = 100, .len = 64, .write = 1 },
		{ .buf = r2, .off = 200, .len = 64 },
	};
	CHECK(vc_backing_submit(b, bios, 3) == -EROFS);
	CHECK(bios[0].result == 0 && bios[1].result == -EROFS && bios[2].result == 0);
	CHECK(memcmp(r1, ref + 1, 64) == 0 && memcmp(r2, ref + 200, 64) == 0);
	CHECK_OK(vc_backing_sync(b));
	vc_backing_close(b);
	check_file();
}

static void test_errors(void)
{
	struct vc_backing *b = (struct vc_backing *)1;
	const char *bad = "/nonexistent-vc-dir/backing.img";
	CHECK(vc_backing_open(bad, -1, 0, 0, &b) == -ENOENT);
	CHECK(b == NULL);
	CHECK(strstr(vc_last_error(), bad) != NULL);
	CHECK(vc_backing_open(bad, -1, 1, 0, &b) == -ENOENT);
	CHECK(strstr(vc_last_error(), bad) != NULL);

	char dir[4096];
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(dir, sizeof dir, "%s/vc-test-dir-XXXXXX", tmp);
	CHECK(mkdtemp(dir) != NULL);
	for (int ro = 0; ro < 2; ro++) {
		int r = vc_backing_open(dir, -1, ro, 0, &b);
		CHECK(r == -EISDIR || r == -EINVAL);
		CHECK(strstr(vc_last_error(), dir) != NULL);
		CHECK(strstr(vc_last_error(), "directory") != NULL);
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0);
	CHECK(vc_backing_open(NULL, dfd, 1, 0, &b) == -EISDIR);
	close(dfd);

	/* A FIFO is refused, and opening it must not hang. */
	char fifo[4200];
	snprintf(fifo, sizeof fifo, "%s/fifo", dir);
	CHECK(mkfifo(fifo, 0600) == 0);
	for (int ro = 0; ro < 2; ro++) {
		CHECK(vc_backing_open(fifo, -1, ro, 0, &b) == -EINVAL);
		CHECK(strstr(vc_last_error(), fifo) && strstr(vc_last_error(), "FIFO"));
	}
	unlink(fifo);
	rmdir(dir);

	/* A character device. */
	CHECK(vc_backing_open("/dev/null", -1, 1, 0, &b) == -EINVAL);
	CHECK(strstr(vc_last_error(), "/dev/null") != NULL);
	CHECK(vc_backing_open(path, -1, 0, 0, NULL) == -EINVAL);
}

/* An optional block device (VC_TEST_BLOCKDEV=/dev/...): size and a read,
 * read-only. Needs permission on the device, so it is not run by default. */
static void test_blockdev(void)
{
	const char *dev = getenv("VC_TEST_BLOCKDEV");
	if (!dev)
		return;
	struct vc_backing *b;
	CHECK_OK(vc_backing_open(dev, -1, 1, 0, &b));
	uint64_t sz = vc_backing_size(b);
	CHECK(sz > 0);
	unsigned char buf[8192];
	size_t n = sz < sizeof buf ? (size_t)sz : sizeof buf;
	CHECK_OK(vc_backing_read(b, buf, n, 0));
	CHECK_OK(vc_backing_read(b, buf, 1, sz - 1));
	CHECK_OK(vc_backing_sync(b));
	printf("blockdev %s: %llu bytes\n", dev, (unsigned long long)sz);
	vc_backing_close(b);
}

/* --- latency model, threads ------------------------------------------- */

static void test_latency(void)
{
	const uint64_t lat = 5000000; /* 5 ms: well above timer slack */
	struct vc_backing *b;
	CHECK_OK(vc_backing_open(path, -1, 1, lat, &b));
	unsigned char buf[256];
	uint64_t t0 = vc_now_ns();
	CHECK_OK(vc_backing_read(b, buf, sizeof buf, 0));
	CHECK(vc_now_ns() - t0 >= lat);
	CHECK(vc_backing_wait_ns(b) >= lat);

	/* 130 requests = 3 rounds of up to 64: three latencies, not 130. */
	enum { N = 130 };
	static unsigned char bufs[N][256];
	struct vc_bio bios[N];
	for (int i = 0; i < N; i++)
		bios[i] = (struct vc_bio){ .buf = bufs[i], .off = (uint64_t)i * 7001, .len = 256 };
	uint64_t w0 = vc_backing_wait_ns(b);
	t0 = vc_now_ns();
	CHECK_OK(vc_backing_submit(b, bios, N));
	uint64_t dt = vc_now_ns() - t0;
	CHECK(dt >= 3 * lat);
	CHECK(dt < N * lat / 2);
	CHECK(vc_backing_wait_ns(b) - w0 >= 3 * lat);
	for (int i = 0; i < N; i++)
		CHECK(memcmp(bufs[i], ref + bios[i].off, 256) == 0);
	vc_backing_close(b);
}

#define NTHR 4

struct thr {
	struct vc_backing *b;
	uint64_t lo, hi; /* this thread's range of the file */
	uint64_t seed;
};

/* Each thread owns a quarter of the file and keeps ref for it. */
static void *thr_main(void *arg)
{
	struct thr *t = arg;
	enum { NB = 24, MAXLEN = 3000 };
	unsigned char(*bufs)[MAXLEN] = malloc(NB * sizeof *bufs);
	if (!bufs)
		return "out of memory";
	const char *err = NULL;
	for (int it = 0; it < 60 && !err; it++) {
		struct vc_bio bios[NB];
		uint64_t seg = (t->hi - t->lo) / NB;
		for (int i = 0; i < NB; i++) {
			uint32_t len = 1 + (uint32_t)(t_rand(&t->seed) % (MAXLEN - 1));
			if (len > seg)
				len = (uint32_t)seg;
			uint64_t off = t->lo + (uint64_t)i * seg + t_rand(&t->seed) % (seg - len + 1);
			bios[i] = (struct vc_bio){ .buf = bufs[i], .off = off, .len = len,
						   .write = (int)(t_rand(&t->seed) % 2) };
			if (bios[i].write)
				fill(bufs[i], len, &t->seed);
		}
		if (vc_backing_submit(t->b, bios, NB) != 0) {
			err = "submit failed";
			break;
		}
		for (int i = 0; i < NB; i++) {
			if (bios[i].write)
				memcpy(ref + bios[i].off, bufs[i], bios[i].len);
			else if (memcmp(bufs[i], ref + bios[i].off, bios[i].len) != 0)
				err = "submit read mismatch";
		}
		uint64_t off = t->lo + t_rand(&t->seed) % (t->hi - t->lo - MAXLEN);
		if (it % 2) {
			fill(bufs[0], MAXLEN, &t->seed);
			if (vc_backing_write(t->b, bufs[0], MAXLEN, off) != 0)
				err = "write failed";
			else
				memcpy(ref + off, bufs[0], MAXLEN);
		} else {
			if (vc_backing_read(t->b, bufs[0], MAXLEN, off) != 0)
				err = "read failed";
			else if (memcmp(bufs[0], ref + off, MAXLEN) != 0)
				err = "read mismatch";
		}
	}
	free(bufs);
	return (void *)err;
}

static void test_threads(void)
{
	struct vc_backing *b;
	CHECK_OK(vc_backing_open(path, -1, 0, 0, &b));
	struct thr t[NTHR];
	pthread_t tid[NTHR];
	for (int i = 0; i < NTHR; i++) {
		t[i] = (struct thr){ .b = b, .lo = (uint64_t)FSIZE * i / NTHR,
				     .hi = (uint64_t)FSIZE * (i + 1) / NTHR, .seed = 1000 + (uint64_t)i };
		CHECK(pthread_create(&tid[i], NULL, thr_main, &t[i]) == 0);
	}
	for (int i = 0; i < NTHR; i++) {
		void *res;
		CHECK(pthread_join(tid[i], &res) == 0);
		if (res) {
			fprintf(stderr, "thread %d: %s\n", i, (const char *)res);
			exit(1);
		}
	}
	CHECK_OK(vc_backing_sync(b));
	vc_backing_close(b);
	check_file();
}

int main(void)
{
	t_make_file(path, sizeof path, FSIZE, 12345);
	ref = malloc(FSIZE);
	CHECK(ref);
	slurp(path, ref, FSIZE);

	test_open_size_roundtrip();
	test_fd();
	test_submit();
	test_submit_fallback();
	test_eof();
	test_readonly();
	test_errors();
	test_blockdev();
	test_latency();
	test_threads();

	unlink(path);
	free(ref);
	printf("test_backing: ok\n");
	return 0;
}
