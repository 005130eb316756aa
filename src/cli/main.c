/* vramcache: the command-line front end. One file per command:
 *
 *   demo.c     vramcache demo, vramcache info
 *   sim.c      vramcache sim      (trace through the policies, no data)
 *   mrc.c      vramcache mrc      (miss-ratio curves: exact and SHARDS)
 *   replay.c   vramcache replay   (trace through the real engine)
 *   trace.c    vramcache trace    (trace statistics and conversion)
 *   serve.c    vramcache serve    (NBD server over the cache; protocol in src/nbd/)
 *   stat.c     vramcache stat     (a running server's statistics)
 *   mount.c    vramcache mount    (a caching FUSE overlay; file system in src/fuse/)
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "vc_build_commit.h"
#include "vramcache.h"

void cli_usage(FILE *f)
{
	fputs("Usage: vramcache COMMAND [OPTIONS]\n"
	      "\n"
	      "GPU memory as a cache tier for file and block I/O.\n"
	      "\n"
	      "Commands:\n"
	      "  demo      run a random-read workload through the engine over a generated\n"
	      "            sample file, first with the host tier alone, then with host and\n"
	      "            GPU tiers, and print hit ratios, page moves and the I/O cost per\n"
	      "            access under a backing-store latency model (GRAM, ICCS 2011)\n"
	      "  info      print the device backend that would be used and exit\n"
	      "  sim       replay a block trace through the replacement policies at many\n"
	      "            cache sizes (no data moved): hit ratios and I/O cost\n"
	      "  mrc       miss-ratio curve of a trace: exact LRU, or SHARDS sampling; CSV,\n"
	      "            SVG, and a GPU-tier size for a given host tier\n"
	      "  replay    drive the real engine with a trace: throughput, latency\n"
	      "  trace     print a trace's statistics, or convert it (--to FILE.vct)\n"
	      "  serve     serve a file or block device over NBD through the cache\n"
	      "  stat      a running server's statistics (JSON or Prometheus text)\n"
	      "  mount     show a directory at a mount point (FUSE), file data through\n"
	      "            the cache\n"
	      "\n"
	      "Each command takes --help. Traces: ARC .lis, CloudPhysics, MSR, SYSTOR'17,\n"
	      "Tencent CBS, a generic CSV and our binary .vct, read directly when zstd,\n"
	      "xz, bzip2 or gzip compressed.\n"
	      "\n"
	      "demo options:\n"
	      "  --device auto|cuda|emu   device backend (default auto: CUDA if usable)\n"
	      "  --backing-latency T      modelled latency per backing page I/O, e.g. 5ms\n"
	      "                           (disk, the default) or 80us (NVMe)\n"
	      "  --host-pages N           host tier size in pages (default 4096)\n"
	      "  --gpu-pages N            GPU tier size in pages (default 16384)\n"
	      "  --working-set N          pages touched (default 5x both tiers, as in GRAM)\n"
	      "  --accesses N             page accesses per run (default 400000)\n"
	      "  --write-ratio F          share of accesses that write (default 0)\n"
	      "  --zipf S                 Zipf-skewed accesses (default 0: uniform)\n"
	      "  --threads N              concurrent callers (default 1)\n"
	      "  --write-back             write-back instead of write-through\n"
	      "  --file PATH              sample file to create and use (default in $TMPDIR)\n"
	      "  --keep                   keep the sample file\n"
	      "\n"
	      "  -h, --help               this text\n"
	      "  -V, --version            version\n",
	      f);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		cli_usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
		cli_usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
		printf("vramcache %d.%d (%s)\n", VC_VERSION_MAJOR, VC_VERSION_MINOR, VC_BUILD_COMMIT);
		return 0;
	}
	if (strcmp(cmd, "demo") == 0)
		return cmd_demo(argc - 1, argv + 1);
	if (strcmp(cmd, "info") == 0)
		return cmd_info();
	if (strcmp(cmd, "sim") == 0)
		return cmd_sim(argc - 1, argv + 1);
	if (strcmp(cmd, "mrc") == 0)
		return cmd_mrc(argc - 1, argv + 1);
	if (strcmp(cmd, "replay") == 0)
		return cmd_replay(argc - 1, argv + 1);
	if (strcmp(cmd, "trace") == 0)
		return cmd_trace(argc - 1, argv + 1);
	if (strcmp(cmd, "serve") == 0)
		return cmd_serve(argc - 1, argv + 1);
	if (strcmp(cmd, "stat") == 0)
		return cmd_stat(argc - 1, argv + 1);
	if (strcmp(cmd, "mount") == 0)
		return cmd_mount(argc - 1, argv + 1);
	fprintf(stderr, "vramcache: unknown command '%s' (try --help)\n", cmd);
	return 2;
}
