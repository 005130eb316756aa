/* A program of a library user: built against the installed header and
 * libvramcache.so (through pkg-config or find_package), outside this tree.
 * Opens a cache on the emulated device over a file, writes, reads back
 * through both tiers, checks the bytes and the statistics. Exit 0: ok. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vramcache.h>

#define PAGE 4096
#define PAGES 64

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: consumer FILE\n");
		return 2;
	}
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_path = argv[1];
	cfg.device = VC_DEVICE_EMU;
	cfg.host_bytes = 16 * PAGE; /* smaller than the file: pages go to the GPU tier */
	cfg.gpu_bytes = 1 << 20;
	cfg.write_mode = VC_WRITE_BACK;
	vc_cache *c;
	int r = vc_open(&cfg, &c);
	if (r < 0) {
		fprintf(stderr, "vc_open: %s: %s\n", vc_strerror(r), vc_last_error());
		return 1;
	}
	static unsigned char buf[PAGE], back[PAGE];
	for (unsigned i = 0; i < PAGES; i++) {
		memset(buf, (int)(i * 7 + 1), sizeof buf);
		if (vc_write(c, buf, PAGE, (uint64_t)i * PAGE) != PAGE) {
			fprintf(stderr, "vc_write: %s\n", vc_last_error());
			return 1;
		}
	}
	for (unsigned i = 0; i < PAGES; i++) {
		memset(buf, (int)(i * 7 + 1), sizeof buf);
		if (vc_read(c, back, PAGE, (uint64_t)i * PAGE) != PAGE || memcmp(buf, back, PAGE)) {
			fprintf(stderr, "page %u read back wrong\n", i);
			return 1;
		}
	}
	struct vc_stats st = { .size = sizeof st };
	if (vc_get_stats(c, &st) < 0 || st.hits[VC_TIER_GPU] == 0) {
		fprintf(stderr, "no GPU-tier hits\n");
		return 1;
	}
	printf("libvramcache %d.%d on %s: %u pages written and read back, %llu GPU-tier hits\n",
	       VC_VERSION_MAJOR, VC_VERSION_MINOR, vc_device_name(c), PAGES,
	       (unsigned long long)st.hits[VC_TIER_GPU]);
	return vc_close(c) < 0;
}
