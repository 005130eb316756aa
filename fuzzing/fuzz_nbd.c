/* Fuzzes the NBD server's parsers (handshake options and transmission
 * requests) end to end: the input is the whole byte stream a client sends,
 * fed through a socketpair to nbd_conn_run over a small cache, with
 * everything the server answers read and thrown away (as nbdkit's and
 * libnbd's fuzzing/ do).
 *
 * Built two ways: with -fsanitize=fuzzer (VC_FUZZ, clang) it is a libFuzzer
 * target; otherwise it has a main() that runs each file named on the
 * command line once, so the seed corpus (fuzzing/corpus) runs as a test in
 * every build, the sanitizer builds included.
 *
 * One cache and its exports live for the whole process: a rw export, a
 * read-only one and a sparse one (for BLOCK_STATUS), 1 MiB each, write-back,
 * so inputs cost no disk I/O until eviction. Each input is served twice:
 * as is, and with TLS required. The server must never crash, hang or
 * leak; whatever it answers is the protocol tests' business. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nbd/nbd.h"

#define FUZZ_SIZE (1u << 20)

static struct nbd_export exports[3];
static struct nbd_server srv = { .exports = exports, .n_exports = 3, .workers = 2 };
/* The same exports with --tls=require and no credentials: every input
 * also runs against the FORCEDTLS refusals (STARTTLS itself is refused
 * here: a TLS handshake is GnuTLS's to fuzz, not ours). */
static struct nbd_server forced;

static int backing(const char *tag, int sparse)
{
	char path[] = "/tmp/vc-fuzz-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, FUZZ_SIZE) < 0)
		abort();
	unlink(path);
	if (!sparse) {
		static unsigned char b[FUZZ_SIZE];
		memset(b, tag[0], sizeof b);
		if (pwrite(fd, b, sizeof b, 0) != (ssize_t)sizeof b)
			abort();
	}
	return fd;
}

static void setup(void)
{
	struct vc_config cfg;
	vc_config_init(&cfg);
	cfg.backing_fd = backing("r", 0);
	cfg.host_bytes = 64 * 4096;
	cfg.gpu_bytes = 64 * 4096;
	cfg.device = VC_DEVICE_EMU;
	cfg.write_mode = VC_WRITE_BACK;
	vc_cache *c;
	vc_volume *sp;
	if (vc_open(&cfg, &c) < 0 || vc_volume_open(c, NULL, backing("s", 1), 0, &sp) < 0) {
		fprintf(stderr, "fuzz_nbd: cannot open the cache: %s\n", vc_last_error());
		abort();
	}
	srv.cache = c;
	exports[0] = (struct nbd_export){ .name = "", .vol = vc_volume_default(c),
					  .prefetch_tier = VC_TIER_GPU };
	exports[1] = (struct nbd_export){ .name = "ro", .vol = vc_volume_default(c),
					  .readonly = true };
	exports[2] = (struct nbd_export){ .name = "sparse", .vol = sp };
	forced = srv;
	forced.tls_mode = NBD_TLS_REQUIRE;
}

struct serve_arg {
	int fd;
	const struct nbd_server *srv;
};

static void *serve(void *p)
{
	struct serve_arg *a = p;
	nbd_conn_run(a->fd, a->srv);
	shutdown(a->fd, SHUT_RDWR); /* as serve's close would: the client sees EOF */
	return NULL;
}

/* Sends the input to a server and drains the answers at once (poll), so
 * neither side blocks on a full socket buffer; ends when it hangs up. */
static void run_one(const uint8_t *data, size_t size, const struct nbd_server *server)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	pthread_t t;
	struct serve_arg a = { sv[1], server };
	if (pthread_create(&t, NULL, serve, &a) != 0)
		abort();
	int cfd = sv[0];
	fcntl(cfd, F_SETFL, O_NONBLOCK);
	size_t sent = 0;
	bool wr_open = true;
	for (;;) {
		if (wr_open && sent == size) {
			shutdown(cfd, SHUT_WR); /* end of input: EOF to the server */
			wr_open = false;
		}
		struct pollfd p = { .fd = cfd, .events = POLLIN | (wr_open ? POLLOUT : 0) };
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			abort();
		if (p.revents & POLLOUT) {
			ssize_t k = send(cfd, data + sent, size - sent, MSG_NOSIGNAL);
			if (k > 0)
				sent += (size_t)k;
			else if (k < 0 && errno != EAGAIN)
				wr_open = false; /* the server hung up mid-input */
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			char sink[65536];
			ssize_t k = recv(cfd, sink, sizeof sink, 0);
			if (k == 0 || (k < 0 && errno != EAGAIN))
				break;
		}
	}
	pthread_join(t, NULL);
	close(cfd);
	close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, setup);
	run_one(data, size, &srv);
	run_one(data, size, &forced);
	return 0;
}

#ifndef VC_LIBFUZZER
/* Replays the files named on the command line, each once. */
int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		if (!f) {
			fprintf(stderr, "fuzz_nbd: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		static uint8_t buf[1 << 22];
		size_t n = fread(buf, 1, sizeof buf, f);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, n);
	}
	printf("fuzz_nbd: %d inputs replayed\n", argc - 1);
	return 0;
}
#endif
