/* `vramcache serve`: an NBD server in front of backing files or block
 * devices, with the cache's host and GPU tiers in between.
 *
 * Each BACKING is an export and a volume of one shared vc_cache, so the
 * exports compete for the same tiers. One thread per connection
 * (src/nbd/conn.c adds its vc_aio queue's helpers and one thread for the
 * rarer commands, each on first need), in serve_conns.c's table with its
 * limits. The main thread only accepts, answers the statistics socket,
 * hangs up on handshakes past their time, and waits for a signal. Options
 * may come from a file (serve_config.c); messages go through serve_log.c.
 *
 * Statistics: a second Unix socket beside the NBD one (SOCKET.ctl, 0600).
 * A client sends one line, "json" or "prometheus", gets the document and
 * the server hangs up (`vramcache stat`). A separate socket, not an NBD
 * option, so that scrapers need no NBD client and NBD clients never see
 * it; answered on the main thread, with a receive timeout bounding what a
 * silent client can hold it for. Shutdown (SIGTERM, SIGINT; serve_stop.c): a
 * flush while serving, then stop accepting, shut the read side of every
 * connection so its reader sees EOF, let in-flight requests finish and
 * reply, the last flush, and vc_close. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/serve.h"
#include "nbd/nbd.h"
#include "tools/workload.h"
#include "vramcache.h"

/* A statistics client has this long to send its line. */
#define CTL_TIMEOUT_MS 1000

static void serve_usage(FILE *f)
{
	fputs("Usage: vramcache serve [OPTIONS] [NAME=]BACKING...\n"
	      "       vramcache serve --config FILE [OPTIONS] [[NAME=]BACKING...]\n"
	      "\n"
	      "Serves each BACKING (a file or block device) over NBD as an export,\n"
	      "all through one cache. An export is named NAME, or with one BACKING\n"
	      "--export (default \"\"), else the file's base name; the first export\n"
	      "also answers to \"\". (A path with '=' in its first part: write ./a=b.)\n"
	      "\n"
	      "  --socket PATH          Unix socket to listen on (default\n"
	      "                         $XDG_RUNTIME_DIR/vramcache.sock or /tmp/...), mode 0600\n"
	      "  --tcp HOST:PORT        listen on TCP instead (only when asked)\n"
	      "  --host-bytes N         host tier size, e.g. 1G (default 64M)\n"
	      "  --gpu-bytes N          GPU tier size (default 256M; 0 for none)\n"
	      "  --gpu-chunk-bytes N    the GPU tier is given back and taken again in\n"
	      "                         chunks of N (default 256M, or less for a small tier)\n"
	      "  --gpu-keep-free N|P%   keep N bytes (or P% of the device) free for other\n"
	      "                         programs: the GPU tier shrinks while they use more,\n"
	      "                         and grows back once they let go\n"
	      "  --release-socket PATH  programs run with libvramcache-shim.so ask here for\n"
	      "                         GPU memory when an allocation fails (mode 0660)\n"
	      "  --encrypt              the GPU tier holds ciphertext only: AES-256-XTS\n"
	      "                         (aes-xts-plain64), a random key per run\n"
	      "  --key-file FILE        the key instead: 64 raw bytes, mode 0600\n"
	      "                         (implies --encrypt)\n"
	      "  --integrity            and authenticate every page the GPU tier holds\n"
	      "                         (AES-256-GMAC, tags in host memory): a page\n"
	      "                         changed there is never returned (EIO), and\n"
	      "                         dropped (implies --encrypt)\n"
	      "  --dedup off|on|adaptive  store equal blocks of the GPU tier once\n"
	      "                         (default off; adaptive: per export, while a\n"
	      "                         sampled estimate says it pays)\n"
	      "  --dedup-degree D       blocks per page: 1, 2, 4 or 8 (default: 4 KiB blocks)\n"
	      "  --dedup-hash H         the blocks' fingerprint: lanes (default: computed\n"
	      "                         in the move), murmur3 or md5 (a device job)\n"
	      "  --device auto|cuda|emu device backend (default auto)\n"
	      "  --gpus LIST            the GPU tier over several GPUs: \"all\", or\n"
	      "                         ORDINAL[:WEIGHT],... (e.g. 0,1 or 0:2,1:1); --gpu-bytes\n"
	      "                         is split over them by weight, pages are placed by\n"
	      "                         a hash of their number, and a GPU that fails drops\n"
	      "                         out while the others go on\n"
	      "  --gpu-dirty auto|keep|clean  whether dirty pages (--write-back) may live\n"
	      "                         in the GPU tier: clean writes them back as they go\n"
	      "                         down, so a failed GPU loses nothing (auto: keep with\n"
	      "                         one GPU, clean with several)\n"
	      "  --write-back           write-back instead of write-through\n"
	      "  --dirty-ratio R        write-back: dirty pages at most this share of the\n"
	      "                         host tier, 0.01 to 0.9 (default 0.5); a write past\n"
	      "                         it goes through to the store\n"
	      "  --readonly             refuse writes\n"
	      "  --export NAME          the export's name when there is one BACKING\n"
	      "  --description TEXT     what clients see as each export's description\n"
	      "                         (NBD_INFO_DESCRIPTION, LIST); default none\n"
	      "  --show-paths           describe each export by its backing path instead\n"
	      "                         (any client can then read the server's paths)\n"
	      "  --stat-socket PATH     statistics socket (default SOCKET.ctl with a Unix\n"
	      "                         socket; read it with `vramcache stat`)\n"
	      "  --workers N            threads per connection for requests that wait on\n"
	      "                         the store: misses, writes, flushes (default 4)\n"
	      "  --backing-latency T    add T (e.g. 100us, 2ms) to every backing store\n"
	      "                         read and write: models a slower device\n"
	      "  --pidfile PATH         write the server's pid here once it is ready\n"
	      "  --foreground           stay in the foreground (logs to stderr)\n"
	      "  --config FILE          options and exports from FILE: a [server] section\n"
	      "                         of these options without the dashes (KEY = VALUE,\n"
	      "                         flags true or false; the command line wins), and\n"
	      "                         [export NAME] sections with path, and optionally\n"
	      "                         readonly, write-back, description (see README)\n"
	      "  --log FILE             log to FILE (appended); without it a daemon logs\n"
	      "                         to syslog, and lines one per client (dropped\n"
	      "                         connections) are rate-limited either way\n"
	      "  --max-connections N    clients in transmission at once (default 128);\n"
	      "                         past it a client's GO is refused (NBD_REP_ERR_POLICY)\n"
	      "  --handshake-timeout S  seconds from connect to transmission, TLS included\n"
	      "                         (default 10; 0: no limit). Clients still in the\n"
	      "                         handshake do not count against --max-connections;\n"
	      "                         at most 64 at once, the oldest dropped for a new one\n"
	      "\n"
	      "TLS (NBD STARTTLS, GnuTLS; the flags are nbdkit's):\n"
	      "  --tls off|on|require   off (default): refuse STARTTLS; on: offer it;\n"
	      "                         require: refuse every option until it is done\n"
	      "  --tls-certificates DIR X.509: DIR/server-cert.pem, DIR/server-key.pem,\n"
	      "                         DIR/ca-cert.pem (for --tls-verify-peer)\n"
	      "  --tls-psk FILE         pre-shared keys, psktool's IDENTITY:HEXKEY lines\n"
	      "  --tls-verify-peer      X.509: clients must show a certificate that\n"
	      "                         DIR/ca-cert.pem signed\n"
	      "\n"
	      "Started with systemd socket activation (LISTEN_PID/LISTEN_FDS), as by\n"
	      "`nbdinfo [ vramcache serve FILE ]`, it serves the inherited socket (fd 3)\n"
	      "in the foreground.\n",
	      f);
}

/* The index of s among names[0..n) (an option's words, in their enum's
 * order), or -1. */
static int name_index(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

struct server {
	struct nbd_server nbd;
	struct serve_conns conns;
};

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "vramcache serve: socket path too long: %s\n", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	unlink(path);
	mode_t old = umask(0177); /* the socket is born 0600: no window for others */
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || listen(fd, SOMAXCONN) < 0) {
		fprintf(stderr, "vramcache serve: %s: %s\n", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int listen_tcp(const char *hostport)
{
	char host[256];
	const char *colon = strrchr(hostport, ':');
	if (!colon || (size_t)(colon - hostport) >= sizeof(host)) {
		fprintf(stderr, "vramcache serve: --tcp wants HOST:PORT\n");
		return -1;
	}
	memcpy(host, hostport, (size_t)(colon - hostport));
	host[colon - hostport] = 0;
	char *h = host;
	if (h[0] == '[' && h[strlen(h) - 1] == ']') { /* [::1]:10809 */
		h[strlen(h) - 1] = 0;
		h++;
	}
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai;
	int g = getaddrinfo(*h ? h : NULL, colon + 1, &hints, &ai);
	if (g) {
		fprintf(stderr, "vramcache serve: %s: %s\n", hostport, gai_strerror(g));
		return -1;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
		fprintf(stderr, "vramcache serve: %s: %s\n", hostport, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

/* systemd's protocol: LISTEN_PID is us and LISTEN_FDS >= 1; the first
 * socket is fd 3. The variables are removed so children do not see them. */
static int activated_fd(void)
{
	const char *pid = getenv("LISTEN_PID"), *n = getenv("LISTEN_FDS");
	if (!pid || !n || strtol(pid, NULL, 10) != (long)getpid() || strtol(n, NULL, 10) < 1)
		return -1;
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	fcntl(3, F_SETFD, FD_CLOEXEC);
	return 3;
}

/* One statistics request: a line naming the format, then the document.
 * Anything else gets an error line. Bounded by CTL_TIMEOUT_MS per read. */
static void ctl_answer(struct server *sv, int cfd)
{
	struct timeval tv = { .tv_sec = CTL_TIMEOUT_MS / 1000, .tv_usec = CTL_TIMEOUT_MS % 1000 * 1000 };
	setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	char line[64];
	size_t n = 0;
	while (n < sizeof line - 1) {
		ssize_t k = read(cfd, line + n, 1);
		if (k <= 0 || line[n] == '\n')
			break;
		n++;
	}
	line[n] = 0;
	char *doc = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&doc, &len);
	if (!f)
		return;
	int r = -EINVAL;
	if (strcmp(line, "json") == 0)
		r = nbd_stats_json(&sv->nbd, f);
	else if (strcmp(line, "prometheus") == 0)
		r = nbd_stats_prometheus(&sv->nbd, f);
	if (r < 0)
		fprintf(f, "error: %s\n", r == -EINVAL ? "unknown request (want json or prometheus)"
						      : strerror(-r));
	fclose(f);
	for (size_t off = 0; off < len;) {
		ssize_t k = send(cfd, doc + off, len - off, MSG_NOSIGNAL);
		if (k <= 0)
			break;
		off += (size_t)k;
	}
	free(doc);
}

/* Accepts clients and answers statistics until a signal comes
 * (serve_stop.c). */
static int accept_loop(struct server *sv, int lfd, int cfd)
{
	struct pollfd p[3] = { { .fd = lfd, .events = POLLIN },
			       { .fd = serve_stop_fd(), .events = POLLIN },
			       { .fd = cfd, .events = POLLIN } };
	while (!serve_stop_pending()) {
		/* Wakes for the next handshake due to time out, if any. */
		int timeout = conns_expire(&sv->conns);
		if (poll(p, cfd >= 0 ? 3 : 2, timeout) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (!serve_stop_pending() && cfd >= 0 && (p[2].revents & POLLIN)) {
			int c = accept4(cfd, NULL, NULL, SOCK_CLOEXEC);
			if (c >= 0) {
				ctl_answer(sv, c);
				close(c);
			}
		}
		if (serve_stop_pending() || !(p[0].revents & POLLIN))
			continue;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			conns_accept(&sv->conns, fd);
		/* else ECONNABORTED and friends: the next one may work */
	}
	return 0;
}

static void unlink_sockets(const char *sock, const char *ctl)
{
	if (sock)
		unlink(sock);
	if (ctl)
		unlink(ctl);
}

/* [NAME=]PATH arguments -> names and paths. A NAME has no '/' (so a path
 * with '=' past a slash stays a path). Unnamed: `single` for a lone
 * BACKING, else the file's base name. Names must differ. 0 or -1. */
static int parse_exports(char **args, unsigned n, const char *single,
			 char names[][NBD_MAX_STRING + 1], const char **paths)
{
	for (unsigned i = 0; i < n; i++) {
		const char *a = args[i], *eq = strchr(a, '=');
		const char *slash = strchr(a, '/');
		const char *name;
		size_t len;
		if (eq && (!slash || slash > eq)) {
			name = a;
			len = (size_t)(eq - a);
			paths[i] = eq + 1;
		} else {
			paths[i] = a;
			name = n == 1 ? single : (slash = strrchr(a, '/')) ? slash + 1 : a;
			len = strlen(name);
		}
		if (len > NBD_MAX_STRING || !*paths[i]) {
			fprintf(stderr, "vramcache serve: bad export '%s' (name over %d bytes or no path)\n",
				a, NBD_MAX_STRING);
			return -1;
		}
		memcpy(names[i], name, len);
		names[i][len] = 0;
		for (unsigned j = 0; j < i; j++)
			if (strcmp(names[i], names[j]) == 0) {
				fprintf(stderr, "vramcache serve: two exports named \"%s\"\n", names[i]);
				return -1;
			}
	}
	return 0;
}

/* Why a backing file did not open. A file we may not write names the
 * option that serves it anyway, not the library's flag. */
static void open_error(const char *path, int e, bool readonly)
{
	if (!readonly && (e == -EACCES || e == -EROFS || e == -EPERM))
		fprintf(stderr,
			"vramcache serve: %s: cannot open it for writing (%s); to serve it "
			"read-only, add --readonly\n",
			path, strerror(-e));
	else
		fprintf(stderr, "vramcache serve: %s: %s\n", path,
			*vc_last_error() ? vc_last_error() : vc_strerror(e));
}

/* --config's exports, after the command line's: names and paths, every
 * name unique. 0 or -1. */
static int config_exports(const struct serve_config *cf, unsigned npos,
			  char names[][NBD_MAX_STRING + 1], const char **paths)
{
	for (unsigned i = 0; i < cf->nexports; i++) {
		const struct serve_export *x = &cf->exports[i];
		for (unsigned j = 0; j < npos + i; j++)
			if (strcmp(names[j], x->name) == 0) {
				fprintf(stderr, "vramcache serve: two exports named \"%s\"\n", x->name);
				return -1;
			}
		strcpy(names[npos + i], x->name); /* at most NBD_MAX_STRING bytes */
		paths[npos + i] = x->path;
	}
	return 0;
}

int cmd_serve(int argc, char **argv)
{
	struct vc_config cfg;
	vc_config_init(&cfg);
	const char *sock = NULL, *tcp = NULL, *export = "", *pidfile = NULL, *ctl = NULL;
	bool foreground = false, readonly = false;
	int tls_mode = NBD_TLS_OFF;
	uint64_t max_conns = SERVE_MAX_CONNS;
	double hs_timeout_s = SERVE_HANDSHAKE_TIMEOUT_MS / 1000.0;
	const char *logpath = NULL, *description = NULL;
	bool show_paths = false;
	struct nbd_tls_config tls_cfg = { 0 };
	uint64_t workers = 0;
	struct serve_gpu_config gcfg = { 0 };
	enum { O_SOCK = 256, O_TCP, O_HOST, O_GPU, O_DEV, O_WB, O_RO, O_EXP, O_FG, O_PID, O_WORK,
	       O_CTL, O_LAT, O_TLS, O_TLS_CERTS, O_TLS_PSK, O_TLS_VERIFY, O_MAXC, O_HST, O_LOG,
	       O_DESC, O_SHOWP, O_CONF, O_CHUNK, O_KEEPF, O_RSOCK, O_ENC, O_KEYF, O_INTEG,
	       O_DEDUP, O_DDEG, O_DALGO, O_GPUS, O_GDIRTY, O_DRATIO };
	static const struct option lo[] = {
		{ "socket", required_argument, 0, O_SOCK },
		{ "tcp", required_argument, 0, O_TCP },
		{ "host-bytes", required_argument, 0, O_HOST },
		{ "gpu-bytes", required_argument, 0, O_GPU },
		{ "device", required_argument, 0, O_DEV },
		{ "write-back", no_argument, 0, O_WB },
		{ "readonly", no_argument, 0, O_RO },
		{ "export", required_argument, 0, O_EXP },
		{ "foreground", no_argument, 0, O_FG },
		{ "pidfile", required_argument, 0, O_PID },
		{ "workers", required_argument, 0, O_WORK },
		{ "stat-socket", required_argument, 0, O_CTL },
		{ "backing-latency", required_argument, 0, O_LAT },
		{ "tls", required_argument, 0, O_TLS },
		{ "tls-certificates", required_argument, 0, O_TLS_CERTS },
		{ "tls-psk", required_argument, 0, O_TLS_PSK },
		{ "tls-verify-peer", no_argument, 0, O_TLS_VERIFY },
		{ "max-connections", required_argument, 0, O_MAXC },
		{ "handshake-timeout", required_argument, 0, O_HST },
		{ "log", required_argument, 0, O_LOG },
		{ "description", required_argument, 0, O_DESC },
		{ "show-paths", no_argument, 0, O_SHOWP },
		{ "config", required_argument, 0, O_CONF },
		{ "gpu-chunk-bytes", required_argument, 0, O_CHUNK },
		{ "gpu-keep-free", required_argument, 0, O_KEEPF },
		{ "release-socket", required_argument, 0, O_RSOCK },
		{ "encrypt", no_argument, 0, O_ENC },
		{ "key-file", required_argument, 0, O_KEYF },
		{ "integrity", no_argument, 0, O_INTEG },
		{ "dedup", required_argument, 0, O_DEDUP },
		{ "dedup-degree", required_argument, 0, O_DDEG },
		{ "dedup-hash", required_argument, 0, O_DALGO },
		{ "gpus", required_argument, 0, O_GPUS },
		{ "gpu-dirty", required_argument, 0, O_GDIRTY },
		{ "dirty-ratio", required_argument, 0, O_DRATIO },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	static struct serve_config conf; /* static: optarg may point into it */
	char cerr[512];
	if (serve_config_apply(&argc, &argv, lo, &conf, cerr, sizeof cerr) < 0) {
		fprintf(stderr, "vramcache serve: --config: %s\n", cerr);
		return 2;
	}
	int ch;
	while ((ch = getopt_long(argc, argv, "hf", lo, NULL)) != -1) {
		switch (ch) {
		case O_SOCK: sock = optarg; break;
		case O_TCP: tcp = optarg; break;
		case O_HOST:
			if (vc_wl_parse_bytes(optarg, &cfg.host_bytes))
				goto bad;
			break;
		case O_GPU:
			if (vc_wl_parse_bytes(optarg, &cfg.gpu_bytes))
				goto bad;
			break;
		case O_DEV:
			if ((cfg.device = vc_device_parse(optarg)) < 0)
				goto bad;
			break;
		case O_GPUS: cfg.gpus = optarg; break; /* vc_open checks it, and says why */
		case O_GDIRTY:
			if (strcmp(optarg, "auto") == 0)
				cfg.gpu_dirty = VC_GPU_DIRTY_AUTO;
			else if (strcmp(optarg, "keep") == 0)
				cfg.gpu_dirty = VC_GPU_DIRTY_KEEP;
			else if (strcmp(optarg, "clean") == 0)
				cfg.gpu_dirty = VC_GPU_DIRTY_CLEAN;
			else
				goto bad;
			break;
		case O_WB: cfg.write_mode = VC_WRITE_BACK; break;
		case O_DRATIO: {
			char *end;
			cfg.dirty_ratio = strtod(optarg, &end);
			if (end == optarg || *end || !(cfg.dirty_ratio >= 0.01 && cfg.dirty_ratio <= 0.9))
				goto bad;
			break;
		}
		case O_RO: readonly = true; break;
		case O_EXP: export = optarg; break;
		case 'f':
		case O_FG: foreground = true; break;
		case O_PID: pidfile = optarg; break;
		case O_CTL: ctl = optarg; break;
		case O_LAT: {
			double ms = vc_wl_parse_ms(optarg);
			if (ms < 0)
				goto bad;
			cfg.backing_latency_ns = (uint64_t)(ms * 1e6);
			break;
		}
		case O_WORK:
			if (cli_u64(optarg, &workers) || workers < 1 || workers > 64)
				goto bad;
			break;
		case O_TLS:
			if (strcmp(optarg, "off") == 0)
				tls_mode = NBD_TLS_OFF;
			else if (strcmp(optarg, "on") == 0)
				tls_mode = NBD_TLS_ON;
			else if (strcmp(optarg, "require") == 0)
				tls_mode = NBD_TLS_REQUIRE;
			else
				goto bad;
			break;
		case O_TLS_CERTS: tls_cfg.cert_dir = optarg; break;
		case O_TLS_PSK: tls_cfg.psk_file = optarg; break;
		case O_TLS_VERIFY: tls_cfg.verify_peer = true; break;
		case O_MAXC:
			if (cli_u64(optarg, &max_conns) || max_conns < 1 || max_conns > 65536)
				goto bad;
			break;
		case O_HST: {
			char *end;
			hs_timeout_s = strtod(optarg, &end);
			if (end == optarg || *end || !(hs_timeout_s >= 0 && hs_timeout_s <= 86400))
				goto bad;
			break;
		}
		case O_LOG: logpath = optarg; break;
		case O_DESC:
			if (strlen(optarg) > NBD_MAX_STRING)
				goto bad;
			description = optarg;
			break;
		case O_SHOWP: show_paths = true; break;
		case O_CONF: break; /* read by serve_config_apply */
		case O_ENC:
			if (cfg.encrypt == VC_ENCRYPT_OFF)
				cfg.encrypt = VC_ENCRYPT_XTS;
			break;
		case O_KEYF:
			if (cfg.encrypt == VC_ENCRYPT_OFF)
				cfg.encrypt = VC_ENCRYPT_XTS;
			cfg.key_file = optarg;
			break;
		case O_INTEG: cfg.encrypt = VC_ENCRYPT_XTS_GMAC; break;
		case O_DEDUP: {
			/* In enum vc_dedup's order. */
			static const char *const modes[] = { "off", "on", "adaptive" };
			if ((cfg.dedup = name_index(optarg, modes, 3)) < 0)
				goto bad;
			break;
		}
		case O_DDEG: {
			uint64_t d;
			if (cli_u64(optarg, &d) || (d != 1 && d != 2 && d != 4 && d != 8))
				goto bad;
			cfg.dedup_degree = (uint32_t)d;
			break;
		}
		case O_DALGO: {
			/* In enum vc_dedup_algo's order. */
			static const char *const algos[] = { "lanes", "md5", "murmur3" };
			if ((cfg.dedup_algo = name_index(optarg, algos, 3)) < 0)
				goto bad;
			break;
		}
		case O_CHUNK:
			if (vc_wl_parse_bytes(optarg, &cfg.gpu_chunk_bytes) || !cfg.gpu_chunk_bytes)
				goto bad;
			break;
		case O_KEEPF: {
			size_t l = strlen(optarg);
			if (l > 1 && optarg[l - 1] == '%') {
				char *end;
				gcfg.keep_free_share = strtod(optarg, &end) / 100;
				if (end != optarg + l - 1 || !(gcfg.keep_free_share > 0 &&
								gcfg.keep_free_share < 1))
					goto bad;
			} else if (vc_wl_parse_bytes(optarg, &gcfg.keep_free) || !gcfg.keep_free) {
				goto bad;
			}
			break;
		}
		case O_RSOCK: gcfg.release_socket = optarg; break;
		case 'h': serve_usage(stdout); return 0;
		default: serve_usage(stderr); return 2;
		}
	}
	unsigned npos = (unsigned)(argc - optind), nex = npos + conf.nexports;
	if (nex < 1 || nex > SERVE_MAX_EXPORTS) {
		fprintf(stderr, "vramcache serve: want 1 to %d BACKING files (try --help)\n",
			SERVE_MAX_EXPORTS);
		return 2;
	}
	if (sock && tcp) {
		fprintf(stderr, "vramcache serve: --socket and --tcp exclude each other\n");
		return 2;
	}
	/* Credentials load before anything listens: a bad one is a start-up
	 * error, not every client's failed handshake. */
	static struct nbd_tls *tls; /* static: reachable on every early return */
	if (tls_mode == NBD_TLS_OFF && (tls_cfg.cert_dir || tls_cfg.psk_file || tls_cfg.verify_peer)) {
		fprintf(stderr, "vramcache serve: TLS credentials given but --tls is off "
				"(add --tls=on or --tls=require)\n");
		return 2;
	}
	int le = logpath ? serve_log_open(logpath) : 0;
	if (le < 0) {
		fprintf(stderr, "vramcache serve: --log %s: %s\n", logpath, strerror(-le));
		return 2;
	}
	if (tls_mode != NBD_TLS_OFF) {
		char err[512];
		if (nbd_tls_new(&tls_cfg, &tls, err, sizeof err) < 0) {
			fprintf(stderr, "vramcache serve: TLS: %s\n", err);
			return 2;
		}
	}
	static struct nbd_export ex[SERVE_MAX_EXPORTS];
	static struct nbd_counters counters[SERVE_MAX_EXPORTS];
	static char names[SERVE_MAX_EXPORTS][NBD_MAX_STRING + 1];
	const char *paths[SERVE_MAX_EXPORTS], *descs[SERVE_MAX_EXPORTS];
	bool ro[SERVE_MAX_EXPORTS], wb[SERVE_MAX_EXPORTS], any_wb = false;
	if (parse_exports(argv + optind, npos, export, names, paths) < 0 ||
	    config_exports(&conf, npos, names, paths) < 0)
		return 2;
	/* Per export: --config's setting, else the server's. The write mode
	 * is the cache's: write-back if any export wants it, and the others
	 * are write-through in it (every write with FUA). */
	for (unsigned i = 0; i < nex; i++) {
		const struct serve_export *x = i < npos ? NULL : &conf.exports[i - npos];
		ro[i] = x && x->readonly >= 0 ? x->readonly : readonly;
		wb[i] = x && x->write_back >= 0 ? x->write_back : cfg.write_mode == VC_WRITE_BACK;
		descs[i] = x && x->description ? x->description : show_paths ? paths[i] : description;
		any_wb |= wb[i];
	}
	cfg.write_mode = any_wb ? VC_WRITE_BACK : VC_WRITE_THROUGH;
	cfg.backing_path = paths[0];
	if (ro[0])
		cfg.flags |= VC_OPEN_READONLY;

	char defsock[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int lfd = activated_fd();
	if (lfd >= 0) {
		foreground = true;
	} else {
		if (!sock && !tcp) {
			const char *dir = getenv("XDG_RUNTIME_DIR");
			snprintf(defsock, sizeof(defsock), "%s/vramcache.sock", dir && *dir ? dir : "/tmp");
			sock = defsock;
		}
		lfd = tcp ? listen_tcp(tcp) : listen_unix(sock);
		if (lfd < 0)
			return 1;
	}
	char defctl[sizeof(defsock) + 8];
	if (!ctl && sock && strlen(sock) + 4 < sizeof(defctl) - 4) {
		snprintf(defctl, sizeof(defctl), "%s.ctl", sock);
		ctl = defctl;
	}
	int cfd = ctl ? listen_unix(ctl) : -1;
	if (ctl && cfd < 0)
		return 1;

	/* Daemon: the parent exits once the child reports the cache open (or
	 * not), so "serve returned 0" means "ready". The cache opens after the
	 * fork: its threads and any CUDA context would not survive one. */
	int ready[2] = { -1, -1 };
	if (!foreground) {
		if (pipe(ready) < 0)
			return 1;
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid > 0) {
			close(ready[1]);
			char c = 0;
			ssize_t n = read(ready[0], &c, 1);
			return n == 1 && c == 'y' ? 0 : 1;
		}
		close(ready[0]);
		setsid();
		int dn = open("/dev/null", O_RDWR);
		if (dn >= 0) {
			dup2(dn, 0);
			dup2(dn, 1);
			if (dn > 2)
				close(dn);
		}
	}

	vc_cache *c;
	int e = vc_open(&cfg, &c);
	if (e < 0) {
		open_error(cfg.backing_path, e, ro[0]);
		unlink_sockets(sock, ctl);
		return 1;
	}
	struct vc_stats st = { .size = sizeof(st) };
	vc_get_stats(c, &st);
	for (unsigned i = 0; i < nex; i++) {
		vc_volume *v = vc_volume_default(c);
		if (i > 0 && (e = vc_volume_open(c, paths[i], -1, ro[i] ? VC_OPEN_READONLY : 0, &v)) < 0) {
			open_error(paths[i], e, ro[i]);
			vc_close(c);
			unlink_sockets(sock, ctl);
			return 1;
		}
		ex[i] = (struct nbd_export){
			.name = names[i],
			.description = descs[i],
			.vol = v,
			.readonly = ro[i],
			.write_through = any_wb && !wb[i],
			.prefetch_tier = st.pages_capacity[VC_TIER_GPU] ? VC_TIER_GPU : VC_TIER_HOST,
			.counters = &counters[i],
		};
	}
	static struct server sv; /* static: the signal path never touches it */
	sv.nbd = (struct nbd_server){ .exports = ex, .n_exports = nex, .workers = (unsigned)workers,
				      .cache = c, .tls_mode = tls_mode, .tls = tls };
	if (conns_init(&sv.conns, &sv.nbd, (unsigned)max_conns, SERVE_MAX_HANDSHAKES,
		       (unsigned)(hs_timeout_s * 1000)) < 0) {
		vc_close(c);
		return 1;
	}
	struct serve_gpu *gpu = NULL;
	if (serve_gpu_start(c, &gcfg, &gpu) < 0) {
		conns_close(&sv.conns);
		vc_close(c);
		unlink_sockets(sock, ctl);
		return 1;
	}

	if (serve_stop_init() < 0)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	/* A store past the process's file-size limit refuses writes with
	 * EFBIG, as a full one does with ENOSPC: an error to report, not a
	 * reason to die with the cache's dirty pages. */
	signal(SIGXFSZ, SIG_IGN);

	if (pidfile) {
		FILE *pf = fopen(pidfile, "w");
		if (!pf || fprintf(pf, "%ld\n", (long)getpid()) < 0 || fclose(pf) != 0) {
			fprintf(stderr, "vramcache serve: %s: %s\n", pidfile, strerror(errno));
			vc_close(c);
			return 1;
		}
	}
	if (foreground) {
		fprintf(stderr, "vramcache serve: on %s, device %s, %s%s%s%s%s\n",
			tcp ? tcp : sock ? sock : "the activated socket", vc_device_name(c),
			cfg.write_mode == VC_WRITE_BACK ? "write-back" : "write-through",
			readonly ? ", read-only" : "",
			tls_mode == NBD_TLS_REQUIRE ? ", TLS required"
			: tls_mode == NBD_TLS_ON    ? ", TLS offered"
						    : "",
			ctl ? ", statistics on " : "", ctl ? ctl : "");
		for (unsigned i = 0; i < nex; i++)
			fprintf(stderr, "  export \"%s\": %s (%llu bytes%s%s)\n", names[i], paths[i],
				(unsigned long long)vc_volume_size(ex[i].vol), ro[i] ? ", read-only" : "",
				ex[i].write_through ? ", write-through" : "");
	}
	if (ready[1] >= 0) {
		if (write(ready[1], "y", 1) != 1) {
			/* the parent died: carry on serving */
		}
		close(ready[1]);
		serve_log_daemon(); /* from here on, nothing reaches the terminal */
	}

	/* Serves until a signal; the first one's flush runs while serving,
	 * and a store that refuses it keeps the server serving. */
	for (;;) {
		accept_loop(&sv, lfd, cfd);
		serve_stop_take();
		if (serve_stop_forced())
			break;
		serve_log(LOG_INFO, "SIGTERM: writing back dirty pages");
		e = vc_flush(c);
		if (e == 0 || serve_stop_forced())
			break;
		char head[256];
		snprintf(head, sizeof head, "flushing on SIGTERM: %s; writes acknowledged but not "
					    "written back, kept in the cache (serving on; SIGTERM "
					    "again exits without them):", vc_strerror(e));
		serve_report_unwritten(ex, nex, head);
	}
	if (serve_stop_forced())
		serve_stop_watchdog(ex, nex);
	serve_gpu_stop(gpu);

	close(lfd);
	if (cfd >= 0)
		close(cfd);
	unlink_sockets(sock, ctl);
	conns_close(&sv.conns);
	serve_log_flush();
	e = vc_flush(c);
	if (e < 0) {
		char head[256];
		snprintf(head, sizeof head, "flushing at shutdown: %s; writes acknowledged but not "
					    "written back, lost:", vc_strerror(e));
		serve_report_unwritten(ex, nex, head);
	}
	serve_stop_closing();
	int ce = vc_close(c);
	if (e == 0 && ce < 0) {
		e = ce;
		serve_log(LOG_ERR, "flushing on close: %s", vc_strerror(ce));
	}
	nbd_tls_free(tls);
	if (pidfile)
		unlink(pidfile);
	return e < 0 ? 1 : 0;
bad:
	fprintf(stderr, "vramcache serve: bad value for --%s: '%s'\n", lo[ch - O_SOCK].name, optarg);
	return 2;
}
