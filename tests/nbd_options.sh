#!/usr/bin/env bash
# Small `serve` behaviours a user meets (issue 11):
#   - the export description: none by default (the backing path is not
#     shown to clients), --description TEXT, --show-paths;
#   - starting on a file it may not write names --readonly (run as an
#     unprivileged user when the test runs as root, who may write anyway);
#   - requests over 32 MiB: NBD_INFO_BLOCK_SIZE advertises 64 MiB, and a
#     50 MB write and read (the NBD project's integrityhuge size) round-trip.
# Usage: nbd_options.sh VRAMCACHE_BINARY
. "$(dirname "$0")/nbd_lib.sh"
need nbdinfo libnbd-bin
need_nbdsh
fail() { echo "FAIL: $*" >&2; exit 1; }
disk=$dir/disk.img
truncate -s $((64 << 20)) "$disk"

# --- descriptions ---------------------------------------------------------
start_server "$disk"
nbdinfo --list --json "$uri" >"$dir/l.json"
grep -q "$disk" "$dir/l.json" && { cat "$dir/l.json" >&2; fail "the backing path is shown to clients"; }
grep -q '"description"' "$dir/l.json" && fail "a description by default"
stop_server
start_server --description "scratch disk" "$disk"
nbdinfo --list "$uri" | grep -q 'description: scratch disk' || fail "--description"
nbdinfo "$uri" | grep -q 'description: scratch disk' || fail "--description (NBD_OPT_GO)"
stop_server
start_server --show-paths "$disk"
nbdinfo --list "$uri" | grep -q "description: $disk" || fail "--show-paths"
stop_server

# --- a read-only file ------------------------------------------------------
mkdir "$dir/ro" && chmod 755 "$dir" "$dir/ro"
truncate -s 1M "$dir/ro/f.img" && chmod 444 "$dir/ro/f.img"
as_user=()
if [ "$(id -u)" = 0 ]; then
	if command -v setpriv >/dev/null; then
		as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
	else
		as_user=(skip)
	fi
fi
if [ "${as_user[0]:-}" != skip ]; then
	chmod 777 "$dir/ro"
	if "${as_user[@]}" "$vc" serve --device emu --socket "$dir/ro/s.sock" "$dir/ro/f.img" \
		2>"$dir/err"; then
		fail "serve started read-write on a read-only file"
	fi
	grep -q -- '--readonly' "$dir/err" || { cat "$dir/err" >&2; fail "the error does not name --readonly"; }
	"${as_user[@]}" "$vc" serve --device emu --socket "$dir/ro/s.sock" --pidfile "$dir/ro/pid" \
		--readonly "$dir/ro/f.img" || fail "--readonly on a read-only file"
	pid=$(cat "$dir/ro/pid")
	stop_server
else
	echo "read-only file check skipped: root without setpriv" >&2
fi

# --- requests over 32 MiB ------------------------------------------------
start_server --host-bytes 16M --gpu-bytes 16M "$disk"
nbdinfo --json "$uri" | grep -q '"block_size_maximum": 67108864' || fail "maximum block size"
BIG=$dir/big.bin nbdsh -u "$uri" -c '
import os
buf = os.urandom(50000000)
open(os.environ["BIG"], "wb").write(buf)
h.pwrite(buf, 4096)
assert h.pread(50000000, 4096) == buf
'
stop_server
cmp -i 0:4096 -n 50000000 "$dir/big.bin" "$disk" || fail "the 50 MB write is not on the file"
echo "nbd options: all checks passed"
