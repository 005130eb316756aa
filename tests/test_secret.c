/* Host key material (base/secret.h): locked memory, random keys, and the
 * key file's checks, each refusal with its message:
 *   sizes       0 and over 1 MiB refused
 *   lock        VmLck in /proc/self/status grows by the mapping (not in
 *               sanitizer builds, whose mlock does nothing)
 *   random      getrandom fills it; two keys differ
 *   key file    accepted: 0600, 0400, through a symbolic link; refused:
 *               missing, a directory, a FIFO (without blocking), mode 0644
 *               and 0640 ("chmod 600"), 63, 65 and 128 bytes ("exactly
 *               64"), another user's file (as root only: chown)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/secret.h"
#include "testutil.h"

static char dir[256];

/* kB of locked memory (VmLck), or -1 where /proc does not say or the
 * sanitizers' runtime turns mlock into a no-op (ASan, TSan). */
static long vm_locked_kb(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return -1;
#endif
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return -1;
	char line[256];
	long kb = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmLck: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static void write_file(const char *path, const unsigned char *data, size_t len, mode_t mode)
{
	unlink(path);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	CHECK(fwrite(data, 1, len, f) == len);
	CHECK(fclose(f) == 0);
	CHECK(chmod(path, mode) == 0);
}

/* Loading path must fail with err and a message containing want. */
static void refused(const char *path, int err, const char *want)
{
	struct vc_secret *s = (struct vc_secret *)1;
	const int r = vc_secret_load(path, 64, &s);
	if (r != err || s != NULL || !strstr(vc_last_error(), want)) {
		fprintf(stderr, "%s: got %d (%s), want %d with \"%s\"\n", path, r, vc_last_error(), err, want);
		exit(1);
	}
}

static void accepted(const char *path, const unsigned char *want)
{
	struct vc_secret *s = NULL;
	CHECK_OK(vc_secret_load(path, 64, &s));
	CHECK(s->len == 64 && memcmp(s->bytes, want, 64) == 0);
	vc_secret_free(s);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(dir, sizeof dir, "%s/vc-secret-XXXXXX", tmp);
	CHECK(mkdtemp(dir) != NULL);

	struct vc_secret *s;
	CHECK(vc_secret_alloc(0, &s) == -EINVAL && s == NULL);
	CHECK(vc_secret_alloc((1u << 20) + 1, &s) == -EINVAL);
	vc_secret_free(NULL);

	const long before = vm_locked_kb();
	struct vc_secret *a, *b;
	CHECK_OK(vc_secret_random(64, &a));
	if (before >= 0)
		CHECK(vm_locked_kb() >= before + 4);
	CHECK_OK(vc_secret_random(64, &b));
	CHECK(a->len == 64 && memcmp(a->bytes, b->bytes, 64) != 0);
	static const unsigned char zero[64];
	CHECK(memcmp(a->bytes, zero, 64) != 0);
	unsigned char key[64];
	memcpy(key, a->bytes, 64);
	vc_secret_free(a);
	vc_secret_free(b);
	if (before >= 0)
		CHECK(vm_locked_kb() == before);

	char path[512], other[512];
	snprintf(path, sizeof path, "%s/key", dir);
	write_file(path, key, 64, 0600);
	accepted(path, key);
	CHECK(chmod(path, 0400) == 0);
	accepted(path, key);
	snprintf(other, sizeof other, "%s/link", dir);
	CHECK(symlink(path, other) == 0);
	accepted(other, key); /* the checks apply to the file read */
	unlink(other);

	snprintf(other, sizeof other, "%s/missing", dir);
	refused(other, -ENOENT, "missing");
	refused(dir, -EINVAL, "not a regular file");
	snprintf(other, sizeof other, "%s/fifo", dir);
	CHECK(mkfifo(other, 0600) == 0);
	refused(other, -EINVAL, "not a regular file");
	unlink(other);

	write_file(path, key, 64, 0644);
	refused(path, -EACCES, "chmod 600");
	CHECK(chmod(path, 0640) == 0);
	refused(path, -EACCES, "mode 0640");
	static const size_t bad_len[] = { 0, 63, 65, 128 };
	unsigned char big[128] = { 1 };
	for (size_t i = 0; i < sizeof bad_len / sizeof bad_len[0]; i++) {
		write_file(path, big, bad_len[i], 0600);
		refused(path, -EINVAL, "exactly 64 raw bytes");
	}
	if (geteuid() == 0) {
		write_file(path, key, 64, 0600);
		CHECK(chown(path, 65534, 65534) == 0);
		refused(path, -EACCES, "owned by uid 65534");
	} else {
		fprintf(stderr, "note: not root: another user's key file is not tried\n");
	}
	unlink(path);
	rmdir(dir);
	printf("test_secret: locked keys, random keys, key file checks: ok\n");
	return 0;
}
