# Sourced by the NBD client tests (each: bash TEST.sh VRAMCACHE_BINARY).
# Gives: $vc, skip REASON (exit 77), need CMD PACKAGE, a temp dir $dir
# removed on exit, $sock and $uri, start_server ARGS... (a daemon with a
# pidfile; returns once it serves) and stop_server (SIGTERM, waits).
set -euo pipefail
vc=$1
skip() { echo "SKIP: $*" >&2; exit 77; }
need() { command -v "$1" >/dev/null || skip "$1 not found (Debian package: $2)"; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/vc-nbd-XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
	rm -rf "$dir"
}
trap cleanup EXIT
sock=$dir/s.sock
uri="nbd+unix:///?socket=$sock"
export MALLOC_PERTURB_=165
start_server() {
	"$vc" serve --device emu --socket "$sock" --pidfile "$dir/pid" "$@"
	pid=$(cat "$dir/pid")
}
stop_server() {
	kill -TERM "$pid"
	for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
	if kill -0 "$pid" 2>/dev/null; then echo "server did not exit on SIGTERM" >&2; exit 1; fi
	pid=
}
# bad_clients N: N clients in a row that send unknown client flags (a
# protocol violation: the server logs a line and hangs up on each).
bad_clients() {
	python3 - "$sock" "$1" <<'PY'
import socket, struct, sys
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
    s.recv(18); s.sendall(struct.pack(">I", 1 << 7))
    s.recv(1)  # the server hangs up
    s.close()
PY
}
# nbdsh runs `python3 -m nbd`: the first python3 on PATH must have the module.
need_nbdsh() {
	need nbdsh libnbd-bin
	if ! python3 -c 'import nbd' 2>/dev/null; then
		/usr/bin/python3 -c 'import nbd' 2>/dev/null || skip "python3 has no nbd module (python3-libnbd)"
		export PATH=/usr/bin:$PATH
	fi
}
# scatter_writes SEED N WANT: N random 4 KiB writes over the export (from
# $dir/disk.img's bytes), then a CACHE of all of it (the GPU tier fills);
# WANT gets what the export must hold.
scatter_writes() {
	python3 - "$sock" "$dir/disk.img" "$3" "$1" "$2" <<'PY'
import nbd, sys, random
sock, disk, want, seed, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
h = nbd.NBD(); h.connect_unix(sock)
data = bytearray(open(disk, "rb").read())
r = random.Random(seed)
for i in range(n):
    off = r.randrange(0, len(data) - 8192) & ~511
    b = bytes(r.getrandbits(8) for _ in range(512)) * 8
    h.pwrite(b, off); data[off:off + len(b)] = b
h.cache(len(data), 0)
open(want, "wb").write(data)
PY
}
# reads_match WANT: the export reads back as WANT, a MiB at a time.
reads_match() {
	python3 - "$sock" "$1" <<'PY'
import nbd, sys
h = nbd.NBD(); h.connect_unix(sys.argv[1]); want = open(sys.argv[2], "rb").read()
for off in range(0, len(want), 1 << 20):
    assert h.pread(1 << 20, off) == want[off:off + (1 << 20)], "wrong bytes at %d" % off
PY
}
# release_ask SOCKET LINE: one request of the release protocol; the reply.
release_ask() {
	python3 - "$1" "$2" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode() + b"\n")
print(s.makefile().readline().strip())
PY
}
