/* `vramcache stat SOCKET`: a running server's statistics, as JSON or as
 * Prometheus text, read from its statistics socket (serve.c says what it
 * speaks). SOCKET is the NBD socket (its .ctl sibling is used) or the
 * statistics socket itself. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"

static void stat_usage(FILE *f)
{
	fputs("Usage: vramcache stat [--prometheus] SOCKET\n"
	      "       vramcache stat PATH\n"
	      "\n"
	      "Prints the statistics of the `vramcache serve` listening on SOCKET (its\n"
	      "NBD socket, or the statistics socket SOCKET.ctl) as JSON, or as\n"
	      "Prometheus text exposition with --prometheus.\n"
	      "\n"
	      "PATH, a file or directory under a `vramcache mount`: its statistics as\n"
	      "JSON (a file's bytes read, host-tier hits, writes, readahead; a\n"
	      "directory's sums over its files; the mount's root adds the cache's).\n",
	      f);
}

/* A file or directory under a mount: its statistics, the extended
 * attribute the mount answers (src/fuse/stats.c). */
static int mount_stat(const char *path)
{
	static const char name[] = "user.vramcache.stats";
	for (int tries = 0; tries < 3; tries++) { /* it may grow between the calls */
		ssize_t n = getxattr(path, name, NULL, 0);
		char *buf = n > 0 ? malloc((size_t)n + 1) : NULL;
		ssize_t k = buf ? getxattr(path, name, buf, (size_t)n) : -1;
		if (k >= 0) {
			fwrite(buf, 1, (size_t)k, stdout);
			free(buf);
			return 0;
		}
		int e = errno;
		free(buf);
		if (n < 0 || e != ERANGE) {
			fprintf(stderr, "vramcache stat: %s: %s\n", path,
				e == ENODATA || e == ENOTSUP ? "not under a `vramcache mount`"
							     : strerror(e));
			return 1;
		}
	}
	return 1;
}

int cmd_stat(int argc, char **argv)
{
	bool prom = false;
	static const struct option lo[] = {
		{ "prometheus", no_argument, 0, 'p' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 'p': prom = true; break;
		case 'h': stat_usage(stdout); return 0;
		default: stat_usage(stderr); return 2;
		}
	}
	if (optind + 1 != argc) {
		stat_usage(stderr);
		return 2;
	}
	const char *arg = argv[optind];
	struct stat pst;
	if (stat(arg, &pst) == 0 && (S_ISDIR(pst.st_mode) || S_ISREG(pst.st_mode))) {
		if (prom) {
			fprintf(stderr, "vramcache stat: --prometheus is for servers' sockets\n");
			return 2;
		}
		return mount_stat(arg);
	}
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t l = strlen(arg);
	bool is_ctl = l > 4 && strcmp(arg + l - 4, ".ctl") == 0;
	if (l + (is_ctl ? 0 : 4) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "vramcache stat: socket path too long: %s\n", arg);
		return 2;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s%s", arg, is_ctl ? "" : ".ctl");
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "vramcache stat: %s: %s (is `vramcache serve` running there?)\n",
			sa.sun_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	const char *req = prom ? "prometheus\n" : "json\n";
	if (send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req)) {
		fprintf(stderr, "vramcache stat: %s: %s\n", sa.sun_path, strerror(errno));
		close(fd);
		return 1;
	}
	char buf[65536];
	ssize_t n;
	size_t total = 0;
	bool err = false;
	while ((n = read(fd, buf, sizeof buf)) > 0) {
		if (total == 0 && strncmp(buf, "error:", 6) == 0)
			err = true;
		fwrite(buf, 1, (size_t)n, err ? stderr : stdout);
		total += (size_t)n;
	}
	close(fd);
	if (n < 0 || total == 0) {
		fprintf(stderr, "vramcache stat: %s: no answer\n", sa.sun_path);
		return 1;
	}
	return err ? 1 : 0;
}
