/* `vramcache mount [OPTIONS] SRC MNT`: SRC's tree at MNT, file data through
 * the cache (src/fuse/). This file is the command line; a build without
 * libfuse3 has the command and says what to install. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "tools/workload.h"
#include "vramcache.h"
#ifdef VC_HAVE_FUSE
#include "fuse/fs.h"
#endif

static void mount_usage(FILE *f)
{
	fputs("Usage: vramcache mount [OPTIONS] SRC MNT\n"
	      "\n"
	      "Shows the directory tree SRC at MNT (FUSE), with file data read and\n"
	      "written through the cache's host and GPU tiers, page by page on demand.\n"
	      "Everything else (names, attributes, links, xattrs) passes through to SRC.\n"
	      "A file's cached pages outlive its close; they are dropped when SRC's size,\n"
	      "mtime or ctime of the file changed at the next open (close-to-open).\n"
	      "Unmount with `umount MNT` (or fusermount3 -u MNT), or SIGTERM. Either\n"
	      "writes dirty pages back first; where SRC refuses them (full), SIGTERM\n"
	      "logs them by file and serves on (a second one exits 1, logging them\n"
	      "lost), and after an unmount the process stays and tries again each second.\n"
	      "\n"
	      "  --host-bytes N         host tier size, e.g. 1G (default 64M)\n"
	      "  --gpu-bytes N          GPU tier size (default 256M; 0 for none)\n"
	      "  --device auto|cuda|emu device backend (default auto)\n"
	      "  --write-back           writes stay in the cache until close or fsync,\n"
	      "                         which write them back and sync them (default:\n"
	      "                         write-through, each write in SRC before it returns)\n"
	      "  --dirty-ratio R        write-back: dirty pages at most this share of the\n"
	      "                         host tier, 0.01 to 0.9 (default 0.5); a write past\n"
	      "                         it goes through to SRC\n"
	      "  --readonly             refuse writes (EROFS)\n"
	      "  --revalidate WHEN      check files against SRC: open (default; on every\n"
	      "                         open and on an open file's attributes), MS (also\n"
	      "                         on a read when the last check is older than MS\n"
	      "                         milliseconds; 0: every read), or\n"
	      "                         never (only when SRC is not changed behind the mount)\n"
	      "  --attr-timeout S       seconds the kernel keeps names and attributes\n"
	      "                         (default 1; 0 sees SRC's changes at once)\n"
	      "  --kernel-cache         keep the kernel's page cache of an unchanged file\n"
	      "                         across opens (default: the tiers are the cache)\n"
	      "  --kernel-writeback     the kernel's write-back cache: writes stay in its\n"
	      "                         page cache until close, fsync or memory pressure\n"
	      "                         (default: each write reaches the mount at once);\n"
	      "                         the kernel then keeps files' sizes and times, so\n"
	      "                         SRC must change only through the mount\n"
	      "  --passthrough          no cache: file data straight to and from SRC (the\n"
	      "                         FUSE cost alone, a baseline for benchmarks)\n"
	      "  --readahead N          bytes prefetched ahead of a sequential reader into\n"
	      "                         the host tier (default 8M; 0: off)\n"
	      "  --max-files N          files whose pages stay cached after their close\n"
	      "                         (default: one per 16 KiB of host and GPU tier,\n"
	      "                         at least 4096)\n"
	      "  --max-fds N            fds of SRC's files kept open (default: half the\n"
	      "                         fd limit, at most 65536); more are reopened\n"
	      "  --max-path-fds N       idle fds of SRC's files and directories that the\n"
	      "                         kernel knows kept open (default: a quarter of\n"
	      "                         the fd limit, at most 65536); more are reopened\n"
	      "                         by their file handles\n"
	      "  --no-file-handles      do not use file handles: every file and directory\n"
	      "                         the kernel knows holds an fd (as where SRC's file\n"
	      "                         system gives no handles)\n"
	      "  --slots-per-volume N   files a cache volume holds (default: as many as\n"
	      "                         its page numbers allow; fewer: a test knob)\n"
	      "  --threads N            FUSE worker threads at most (default 16)\n"
	      "  --allow-other          let other users use the mount\n"
	      "  --backing-latency T    add T (e.g. 100us) to every read and write of SRC\n"
	      "  --pidfile PATH         write the daemon's pid here once mounted\n"
	      "  -f, --foreground       stay in the foreground (default: a daemon, which\n"
	      "                         returns once the mount is usable)\n"
	      "  -h, --help             this text\n",
	      f);
}

enum { O_HOST = 0x100, O_GPU, O_DEV, O_WB, O_RO, O_REVAL, O_ATTR, O_KCACHE, O_RA, O_MAXF,
       O_THR, O_OTHER, O_LAT, O_PID, O_PASS, O_MAXFD, O_SLOTS, O_MAXPFD, O_NOFH,
       O_KWB, O_DRATIO };

int cmd_mount(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "host-bytes", required_argument, 0, O_HOST },
		{ "gpu-bytes", required_argument, 0, O_GPU },
		{ "device", required_argument, 0, O_DEV },
		{ "write-back", no_argument, 0, O_WB },
		{ "readonly", no_argument, 0, O_RO },
		{ "revalidate", required_argument, 0, O_REVAL },
		{ "attr-timeout", required_argument, 0, O_ATTR },
		{ "kernel-cache", no_argument, 0, O_KCACHE },
		{ "readahead", required_argument, 0, O_RA },
		{ "max-files", required_argument, 0, O_MAXF },
		{ "threads", required_argument, 0, O_THR },
		{ "allow-other", no_argument, 0, O_OTHER },
		{ "backing-latency", required_argument, 0, O_LAT },
		{ "pidfile", required_argument, 0, O_PID },
		{ "passthrough", no_argument, 0, O_PASS },
		{ "max-fds", required_argument, 0, O_MAXFD },
		{ "slots-per-volume", required_argument, 0, O_SLOTS },
		{ "max-path-fds", required_argument, 0, O_MAXPFD },
		{ "no-file-handles", no_argument, 0, O_NOFH },
		{ "kernel-writeback", no_argument, 0, O_KWB },
		{ "dirty-ratio", required_argument, 0, O_DRATIO }, /* lo[ch - O_HOST]: enum order */
		{ "foreground", no_argument, 0, 'f' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct {
		struct vc_config cfg;
		int revalidate_ms;
		double attr_timeout;
		bool kernel_cache, kernel_writeback, readonly, allow_other, foreground, passthrough, no_handles;
		unsigned max_files, max_fds, max_path_fds, slots_per_volume, threads;
		uint64_t readahead;
		const char *pidfile;
	} o = { .revalidate_ms = -1, .attr_timeout = 1.0, .threads = 16,
		.readahead = 8ull << 20 };
	vc_config_init(&o.cfg);
	int ch;
	uint64_t u;
	char *end;
	while ((ch = getopt_long(argc, argv, "fh", lo, NULL)) != -1) {
		switch (ch) {
		case O_HOST:
			if (vc_wl_parse_bytes(optarg, &o.cfg.host_bytes))
				goto bad;
			break;
		case O_GPU:
			if (vc_wl_parse_bytes(optarg, &o.cfg.gpu_bytes))
				goto bad;
			break;
		case O_DEV:
			if ((o.cfg.device = vc_device_parse(optarg)) < 0)
				goto bad;
			break;
		case O_WB: o.cfg.write_mode = VC_WRITE_BACK; break;
		case O_DRATIO:
			o.cfg.dirty_ratio = strtod(optarg, &end);
			if (end == optarg || *end || !(o.cfg.dirty_ratio >= 0.01 &&
							o.cfg.dirty_ratio <= 0.9))
				goto bad;
			break;
		case O_RO: o.readonly = true; break;
		case O_REVAL:
			if (strcmp(optarg, "open") == 0)
				o.revalidate_ms = -1;
			else if (strcmp(optarg, "never") == 0)
				o.revalidate_ms = -2;
			else if (cli_u64(optarg, &u) == 0 && u <= 86400000)
				o.revalidate_ms = (int)u;
			else
				goto bad;
			break;
		case O_ATTR:
			errno = 0;
			o.attr_timeout = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o.attr_timeout >= 0) ||
			    o.attr_timeout > 86400)
				goto bad;
			break;
		case O_KCACHE: o.kernel_cache = true; break;
		case O_KWB: o.kernel_writeback = true; break;
		case O_RA:
			if (vc_wl_parse_bytes(optarg, &o.readahead) || o.readahead > (1ull << 30))
				goto bad;
			break;
		case O_MAXF:
			if (cli_u64(optarg, &u) || u < 1 || u > (1u << 30))
				goto bad;
			o.max_files = (unsigned)u;
			break;
		case O_MAXFD:
			if (cli_u64(optarg, &u) || u < 1 || u > (1u << 24))
				goto bad;
			o.max_fds = (unsigned)u;
			break;
		case O_MAXPFD:
			if (cli_u64(optarg, &u) || u < 1 || u > (1u << 24))
				goto bad;
			o.max_path_fds = (unsigned)u;
			break;
		case O_NOFH: o.no_handles = true; break;
		case O_SLOTS:
			if (cli_u64(optarg, &u) || u < 1 || u > (1u << 20))
				goto bad;
			o.slots_per_volume = (unsigned)u;
			break;
		case O_THR:
			if (cli_u64(optarg, &u) || u < 1 || u > 1024)
				goto bad;
			o.threads = (unsigned)u;
			break;
		case O_OTHER: o.allow_other = true; break;
		case O_LAT: {
			double ms = vc_wl_parse_ms(optarg);
			if (ms < 0)
				goto bad;
			o.cfg.backing_latency_ns = (uint64_t)(ms * 1e6);
			break;
		}
		case O_PID: o.pidfile = optarg; break;
		case O_PASS: o.passthrough = true; break;
		case 'f': o.foreground = true; break;
		case 'h': mount_usage(stdout); return 0;
		default: mount_usage(stderr); return 2;
		}
	}
	if (optind + 2 != argc) {
		fprintf(stderr, "vramcache mount: SRC and MNT are needed (try --help)\n");
		return 2;
	}
	const char *src = argv[optind], *mnt = argv[optind + 1];
	struct stat st;
	const char *paths[2] = { src, mnt };
	for (int i = 0; i < 2; i++) {
		const char *why = stat(paths[i], &st) < 0 ? strerror(errno)
			: !S_ISDIR(st.st_mode)		  ? "not a directory"
							  : NULL;
		if (why) {
			fprintf(stderr, "vramcache mount: %s: %s\n", paths[i], why);
			return 2;
		}
	}
#ifdef VC_HAVE_FUSE
	struct vc_fuse_opts fo = { .src = src, .mnt = mnt, .cfg = o.cfg,
				   .revalidate_ms = o.revalidate_ms, .attr_timeout = o.attr_timeout,
				   .kernel_cache = o.kernel_cache,
				   .kernel_writeback = o.kernel_writeback, .readonly = o.readonly,
				   .passthrough = o.passthrough,
				   .allow_other = o.allow_other, .foreground = o.foreground,
				   .max_files = o.max_files, .max_fds = o.max_fds,
				   .max_path_fds = o.max_path_fds, .no_handles = o.no_handles,
				   .slots_per_volume = o.slots_per_volume, .threads = o.threads,
				   .readahead = o.readahead, .pidfile = o.pidfile };
	return vc_fuse_main(&fo);
#else
	fprintf(stderr, "vramcache mount: this build has no FUSE support (install libfuse3-dev "
			"and pkg-config, then rebuild)\n");
	return 1;
#endif
bad:
	fprintf(stderr, "vramcache mount: bad value for --%s: %s\n", lo[ch - O_HOST].name, optarg);
	return 2;
}
