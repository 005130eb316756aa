#!/usr/bin/env bash
# A daemon without --log logs to syslog (issue 11). serve calls openlog and
# syslog(3), which send datagrams to /dev/log; so the test binds its own
# datagram socket and starts the server in a private mount namespace
# (unshare --mount) whose /dev is a tmpfs holding the host's null, zero,
# random and urandom and that socket as /dev/log. Nothing outside the test
# sees it, and the host's /dev and syslog are not touched.
# Three clients that break the protocol: each one's line reaches the socket
# as a syslog message from vramcache[PID], facility daemon, and the
# launching terminal's stderr stays empty.
# Needs root (a mount namespace) and unshare; skips with the reason when
# either is missing or namespaces are refused (an unprivileged container).
# Usage: nbd_syslog.sh VRAMCACHE_BINARY
. "$(dirname "$0")/nbd_lib.sh"
need python3 python3
need unshare util-linux
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root to make a private mount namespace for /dev/log"
unshare --mount --propagation private true 2>/dev/null ||
	skip "unshare --mount refused (no CAP_SYS_ADMIN here: an unprivileged container?)"

# The syslog socket: every datagram, one per line, into $dir/syslog.
python3 - "$dir/log.sock" "$dir/syslog" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
open(sys.argv[2] + ".ready", "w").close()
with open(sys.argv[2], "ab", buffering=0) as f:
    while True:
        f.write(s.recv(65536).rstrip(b"\0\n") + b"\n")
PY
rx=$!
trap 'kill $rx 2>/dev/null || true; cleanup' EXIT
for _ in $(seq 100); do [ -e "$dir/syslog.ready" ] && break; sleep 0.05; done
[ -S "$dir/log.sock" ] || fail "the test's syslog socket did not appear"

truncate -s $((1 << 20)) "$dir/disk.img"
# The server, daemonized inside the namespace (it stays there).
unshare --mount --propagation private bash -c '
	set -e
	d=$1; shift
	mkdir "$d/hostdev"
	mount --rbind /dev "$d/hostdev"
	mount -t tmpfs -o mode=755 vc-test-dev /dev
	for n in null zero random urandom; do
		touch "/dev/$n"
		mount --bind "$d/hostdev/$n" "/dev/$n"
	done
	touch /dev/log
	mount --bind "$d/log.sock" /dev/log
	exec "$@"' _ "$dir" "$vc" serve --device emu --socket "$sock" --pidfile "$dir/pid" \
	"$dir/disk.img" 2>"$dir/stderr"
pid=$(cat "$dir/pid")
bad_clients 3
for _ in $(seq 100); do
	[ "$(grep -c 'protocol violation' "$dir/syslog" 2>/dev/null)" -ge 3 ] && break
	sleep 0.05
done
server_pid=$pid
stop_server

echo "--- what reached /dev/log:"
cat "$dir/syslog"
# "<PRI>TIMESTAMP vramcache[PID]: message", PRI = facility * 8 + level.
python3 - "$dir/syslog" "$server_pid" <<'PY' || fail "syslog lines (above) are not what serve logs"
import re, sys
lines = open(sys.argv[1], "rb").read().decode(errors="replace").splitlines()
mine = [m for m in (re.match(r"<(\d+)>.*?vramcache\[(\d+)\]: (.*)", l) for l in lines) if m]
assert mine, "no line from vramcache[PID]"
assert all(m.group(2) == sys.argv[2] for m in mine), "a line from another pid"
assert all(int(m.group(1)) >> 3 == 3 for m in mine), "a facility other than daemon"
texts = [m.group(3) for m in mine]
assert sum("protocol violation" in t for t in texts) == 3, "not one line per bad client"
PY
[ ! -s "$dir/stderr" ] || { cat "$dir/stderr" >&2; fail "the daemon wrote to the launching terminal"; }
echo "nbd syslog: all checks passed"
