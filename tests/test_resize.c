/* vc_volume_resize against a shadow: a volume over a file that grows and
 * shrinks as a file system front end makes it (src/fuse/), in both write
 * modes, with a cache far smaller than the file so that pages of the
 * volume are evicted (and, in write-back, written back) by other pages.
 * Random steps: unaligned writes (extending ones resize first), reads,
 * truncates (resize; ftruncate once the write-back of the edge page is
 * done), and flushes. The file, truncated to the shadow's size after a
 * flush, equals the shadow; reads never see bytes past an end that was
 * cut and then grown again (they read as zeros). Runs on VC_TEST_DEVICE.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "testutil.h"

#define MAXSZ (1u << 20)
#define OPS 4000

static void run(int mode, uint32_t page_size)
{
	char path[256];
	t_make_file(path, sizeof path, 0, 1);
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = path; /* volume 0: an empty file of its own */
	cfg.page_size = page_size;
	cfg.host_bytes = 32 * page_size;
	cfg.gpu_bytes = 64 * page_size;
	cfg.seg_bytes = 8 * page_size;
	cfg.device = t_device_kind();
	cfg.write_mode = mode;
	vc_cache *c;
	int r = vc_open(&cfg, &c);
	t_skip_if_absent(r, "test_resize");
	CHECK_OK(r);
	char path2[256];
	t_make_file(path2, sizeof path2, 0, 2);
	vc_volume *v;
	CHECK_OK(vc_volume_open(c, path2, -1, 0, &v));
	CHECK(vc_volume_size(v) == 0);
	int fd2 = open(path2, O_RDWR);
	CHECK(fd2 >= 0);

	unsigned char *shadow = calloc(MAXSZ, 1), *buf = malloc(MAXSZ);
	CHECK(shadow && buf);
	uint64_t size = 0, seed = 42 + page_size + (uint64_t)mode;
	for (int op = 0; op < OPS; op++) {
		uint64_t x = t_rand(&seed) % 100;
		if (x < 45) { /* write, perhaps past the end */
			uint64_t len = 1 + t_rand(&seed) % 20000;
			uint64_t off = t_rand(&seed) % (MAXSZ - len);
			if (off > size + 50000)
				off = size; /* mostly near the end: appends */
			for (uint64_t i = 0; i < len; i++)
				buf[i] = (unsigned char)t_rand(&seed);
			if (off + len > size) {
				CHECK_OK(vc_volume_resize(v, off + len));
				size = off + len;
			}
			CHECK(vc_volume_write(v, buf, len, off) == (ssize_t)len);
			memcpy(shadow + off, buf, len);
		} else if (x < 85) { /* read */
			uint64_t off = t_rand(&seed) % MAXSZ, len = t_rand(&seed) % 30000;
			ssize_t got = vc_volume_read(v, buf, len, off);
			uint64_t want = off >= size ? 0 : (len < size - off ? len : size - off);
			CHECK(got == (ssize_t)want);
			CHECK(want == 0 || memcmp(buf, shadow + off, want) == 0);
		} else if (x < 97) { /* truncate, shorter or longer */
			uint64_t ns = t_rand(&seed) % MAXSZ;
			if (t_rand(&seed) % 2)
				ns = size > 0 ? t_rand(&seed) % size : 0;
			CHECK_OK(vc_volume_resize(v, ns));
			CHECK(ftruncate(fd2, (off_t)ns) == 0);
			if (ns < size)
				memset(shadow + ns, 0, size - ns);
			size = ns;
			CHECK(vc_volume_size(v) == size);
		} else {
			CHECK_OK(vc_volume_flush(v));
		}
	}
	CHECK_OK(vc_volume_flush(v));
	CHECK(ftruncate(fd2, (off_t)size) == 0);
	t_check_file(path2, shadow, size);
	CHECK(vc_volume_resize(v, 1ull << 62) == -EFBIG);
	CHECK(vc_volume_resize(NULL, 0) == -EINVAL);
	CHECK_OK(vc_volume_close(v));
	CHECK_OK(vc_close(c));
	close(fd);
	close(fd2);
	unlink(path);
	unlink(path2);
	free(shadow);
	free(buf);
}

int main(void)
{
	for (int mode = VC_WRITE_THROUGH; mode <= VC_WRITE_BACK; mode++) {
		run(mode, 4096);
		run(mode, 512);
	}
	printf("test_resize: ok\n");
	return 0;
}
