#!/usr/bin/env bash
# Idle sockets must not lock clients out (issue 11):
#   1. A client in transmission, then 300 Unix-socket connections that send
#      nothing: while they stay open, nbdinfo is served, and the first
#      client's requests are answered (handshakes do not count against the
#      connection limit; the oldest handshake is dropped for a new one).
#      The handshake time limit is an hour here, so it is not what helps.
#   2. --handshake-timeout 1: a connection that sends nothing is hung up on
#      (the test waits up to 60 s for the EOF: no timing is asserted).
#   3. --max-connections 2: with two clients in transmission a third's GO
#      is refused with NBD_REP_ERR_POLICY; once one leaves, nbdinfo works.
# Usage: nbd_limits.sh VRAMCACHE_BINARY
. "$(dirname "$0")/nbd_lib.sh"
need nbdinfo libnbd-bin
need python3 python3
fail() { echo "FAIL: $*" >&2; exit 1; }
truncate -s $((4 << 20)) "$dir/disk.img"
printf 'vramcache' | dd of="$dir/disk.img" bs=1 seek=4096 conv=notrunc status=none

# A raw client: an established connection (GO), idle sockets, and checks.
cat >"$dir/client.py" <<'PY'
import socket, struct, sys, os, time
sock = sys.argv[1]
def conn():
    s = socket.socket(socket.AF_UNIX); s.connect(sock); return s
def rd(s, k):
    b = b""
    while len(b) < k:
        d = s.recv(k - len(b))
        if not d: raise EOFError
        b += d
    return b
def go(s):
    """Handshake to transmission with GO on the default export: the final reply type."""
    assert rd(s, 18)[:16] == b"NBDMAGICIHAVEOPT"
    s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
    s.sendall(struct.pack(">QII", 0x49484156454F5054, 7, 6) + struct.pack(">IH", 0, 0))
    while True:
        magic, opt, typ, ln = struct.unpack(">QIII", rd(s, 20)); rd(s, ln)
        if typ != 3:  # not NBD_REP_INFO
            return typ
def read4k(s, cookie):
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 0, cookie, 4096, 9))
    magic, err, c = struct.unpack(">IIQ", rd(s, 16))
    assert magic == 0x67446698 and err == 0 and c == cookie, (magic, err, c)
    return rd(s, 9)
mode = sys.argv[2]
if mode == "idle-storm":
    est = conn(); assert go(est) == 1
    idle = [conn() for _ in range(300)]
    time.sleep(0.5)  # let the server accept them all
    rc = os.system("nbdinfo 'nbd+unix:///?socket=%s' >/dev/null" % sock)
    assert rc == 0, "nbdinfo was locked out by 300 idle connections"
    assert read4k(est, 1) == b"vramcache", "the established client lost its connection"
    print("ok")
elif mode == "timeout":
    s = conn(); s.settimeout(60)
    assert rd(s, 18)[:8] == b"NBDMAGIC"
    try:
        d = s.recv(1)
    except socket.timeout:
        sys.exit("an idle handshake was not hung up on")
    assert d == b"", d
    print("ok")
elif mode == "limit":
    a, b = conn(), conn()
    assert go(a) == 1 and go(b) == 1
    c = conn()
    t = go(c)
    assert t == 0x80000002, "third GO past --max-connections 2: reply type %#x" % t
    a.close(); time.sleep(0.3)
    assert go(conn()) == 1, "a GO after a client left was refused"
    assert read4k(b, 2) == b"vramcache"
    print("ok")
PY

start_server --handshake-timeout 3600 --max-connections 128 "$dir/disk.img"
python3 "$dir/client.py" "$sock" idle-storm || fail "idle storm"
stop_server

start_server --handshake-timeout 1 "$dir/disk.img"
python3 "$dir/client.py" "$sock" timeout || fail "handshake timeout"
nbdinfo "$uri" >/dev/null || fail "not served after a timeout"
stop_server

start_server --max-connections 2 "$dir/disk.img"
python3 "$dir/client.py" "$sock" limit || fail "--max-connections"
stop_server

# Bad values are start-up errors.
for bad in "--max-connections 0" "--handshake-timeout -1" "--handshake-timeout x"; do
	if "$vc" serve --device emu --socket "$dir/b.sock" $bad "$dir/disk.img" 2>/dev/null; then
		fail "serve started with $bad"
	fi
done
echo "nbd limits: all checks passed"
