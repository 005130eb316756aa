#!/usr/bin/env bash
# `vramcache serve` driven by the real libnbd clients: nbdinfo (plain,
# --json, --list, and started by nbdinfo through socket activation),
# nbdcopy round trip compared with cmp, and an nbdsh script doing
# pwrite/pread/flush/zero/trim/cache with FUA plus requests the server must
# refuse (libnbd's strict mode off so they reach the server). Then SIGTERM,
# and the backing file must hold every write (write-back: flushed on exit).
# Skips (77) with the reason when a client is missing.
# Usage: nbd_clients.sh VRAMCACHE_BINARY
set -euo pipefail
vc=$1
skip() { echo "SKIP: $*" >&2; exit 77; }
for c in nbdinfo nbdcopy nbdsh; do
	command -v "$c" >/dev/null || skip "$c not found (Debian: libnbd-bin, python3-libnbd)"
done
# nbdsh runs `python3 -m nbd`: the first python3 on PATH must have the module.
if ! python3 -c 'import nbd' 2>/dev/null; then
	/usr/bin/python3 -c 'import nbd' 2>/dev/null || skip "python3 has no nbd module (python3-libnbd)"
	export PATH=/usr/bin:$PATH
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/vc-nbd-XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
	rm -rf "$dir"
}
trap cleanup EXIT
sock=$dir/s.sock
uri="nbd+unix:///?socket=$sock"
disk=$dir/disk.img
head -c $((8 << 20)) /dev/urandom >"$dir/in.bin"
truncate -s $((8 << 20)) "$disk"

# Daemon mode: serve returns once the socket is listening and the cache open.
"$vc" serve --device emu --socket "$sock" --pidfile "$dir/pid" --write-back \
	--host-bytes 1M --gpu-bytes 2M "$disk"
pid=$(cat "$dir/pid")
[ "$(stat -c %a "$sock")" = 600 ] || { echo "socket mode is not 0600" >&2; exit 1; }

nbdinfo "$uri" | grep -q 'export-size: 8388608'
nbdinfo --json "$uri" >"$dir/info.json"
for k in '"can_fua": true' '"can_trim": true' '"can_zero": true' '"can_cache": true' \
	'"can_multi_conn": true' '"block_size_maximum": 67108864' '"export-size": 8388608'; do
	grep -q "$k" "$dir/info.json" || { echo "nbdinfo --json lacks $k" >&2; cat "$dir/info.json"; exit 1; }
done

nbdcopy "$dir/in.bin" "$uri"
nbdcopy "$uri" "$dir/out.bin"
cmp "$dir/in.bin" "$dir/out.bin"

nbdsh -u "$uri" -c '
import os
h.set_strict_mode(0)
buf = os.urandom(65536)
h.pwrite(buf, 12345, nbd.CMD_FLAG_FUA)
assert h.pread(65536, 12345) == buf
h.flush()
h.zero(8192, 4096, nbd.CMD_FLAG_FUA)
assert h.pread(8192, 4096) == bytes(8192)
h.zero(100, 200, nbd.CMD_FLAG_NO_HOLE)
assert h.pread(100, 200) == bytes(100)
h.trim(1 << 20, 1 << 20, nbd.CMD_FLAG_FUA)
h.cache(1 << 20, 4 << 20)
assert h.pread(65536, 12345) == buf
def fails(errno, f, *a):
    try:
        f(*a)
    except nbd.Error as e:
        assert e.errno == errno, (e.errno, e)
        return
    raise AssertionError("expected " + errno)
size = h.get_size()
fails("EINVAL", h.pread, 10, size - 5)
fails("ENOSPC", h.pwrite, b"x" * 10, size - 5)
fails("ENOTSUP", h.zero, 4096, 0, nbd.CMD_FLAG_FAST_ZERO)
h.pwrite(b"last", size - 4, nbd.CMD_FLAG_FUA)
h.shutdown()
'
# Clean shutdown: write-back pages reach the file before the process exits.
kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && { echo "server did not exit on SIGTERM" >&2; exit 1; }
pid=
[ ! -e "$sock" ] || { echo "socket left behind" >&2; exit 1; }
[ "$(tail -c 4 "$disk")" = last ] || { echo "write-back data lost on SIGTERM" >&2; exit 1; }
cmp -n 200 "$dir/in.bin" "$disk"
# Past the trimmed MiB, nbdcopy's data must be on the file, the tail excepted.
cmp -i $((2 << 20)) -n $(((6 << 20) - 4)) "$dir/in.bin" "$disk"

# Socket activation: nbdinfo starts the server itself (fd 3), read-only.
nbdinfo --json -- [ "$vc" serve --device emu --readonly "$disk" ] >"$dir/act.json"
grep -q '"is_read_only": true' "$dir/act.json"
echo "nbd clients: all checks passed"
