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
