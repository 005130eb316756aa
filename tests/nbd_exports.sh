#!/usr/bin/env bash
# Several exports sharing one cache: OPT_LIST names them all, each export
# is its own store (writes to one never show in another), the first also
# answers to "", base:allocation maps a sparse store's holes (nbdinfo
# --map), and `vramcache stat` reports per-export counters as JSON and as
# Prometheus text. Usage: nbd_exports.sh VRAMCACHE_BINARY
. "$(dirname "$0")/nbd_lib.sh"
need nbdinfo libnbd-bin
need_nbdsh

head -c $((4 << 20)) /dev/urandom >"$dir/a.img"
truncate -s $((8 << 20)) "$dir/b.img"
head -c 4096 /dev/urandom | dd of="$dir/b.img" bs=4096 seek=256 conv=notrunc status=none
start_server --write-back --host-bytes 1M --gpu-bytes 2M "a=$dir/a.img" "b=$dir/b.img"

nbdinfo --list "$uri" >"$dir/list"
grep -q 'export="a"' "$dir/list" && grep -q 'export="b"' "$dir/list" ||
	{ echo "OPT_LIST lacks an export" >&2; cat "$dir/list"; exit 1; }
nbdinfo "$uri" | grep -q 'export-size: 4194304' # "" is the first export
nbdinfo "nbd+unix:///b?socket=$sock" | grep -q 'export-size: 8388608'

# Holes: [0, 1M) and [1M+4K, 8M); data at [1M, 1M+4K) (when the file
# system reports holes; otherwise it is all data, which is also right).
nbdinfo --map "nbd+unix:///b?socket=$sock" >"$dir/map"
if grep -q hole "$dir/map"; then
	grep -Eq '^ +0 +1048576 +3 +hole,zero' "$dir/map" &&
		grep -Eq '^ +1048576 +4096 +0 +data' "$dir/map" ||
		{ echo "wrong allocation map" >&2; cat "$dir/map"; exit 1; }
fi

nbdsh -c '
import os
a = nbd.NBD(); a.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
a.connect_uri("nbd+unix:///a?socket='"$sock"'")
b = nbd.NBD(); b.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
b.connect_uri("nbd+unix:///b?socket='"$sock"'")
before = a.pread(65536, 0)
buf = os.urandom(65536)
b.pwrite(buf, 0)
assert b.pread(65536, 0) == buf
assert a.pread(65536, 0) == before
# A write into the hole is data at once, before any flush (write-back).
seen = []
b.block_status(4096, 0, lambda ctx, off, ents, err: seen.extend(ents))
assert seen[1] & 1 == 0, seen
b.flush(); a.shutdown(); b.shutdown()
'
cmp -n 65536 "$dir/b.img" - < <(nbdcopy "nbd+unix:///b?socket=$sock" - | head -c 65536)

"$vc" stat "$sock" >"$dir/stat.json"
python3 - "$dir/stat.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
ex = {e["name"]: e for e in s["exports"]}
assert set(ex) == {"a", "b"}, ex
assert ex["b"]["write"] >= 1 and ex["b"]["write_bytes"] >= 65536, ex["b"]
assert ex["a"]["read_bytes"] >= 65536 and ex["a"]["connections_total"] >= 2, ex["a"]
assert ex["b"]["block_status"] >= 1 and ex["b"]["flush"] >= 1, ex["b"]
assert s["cache"]["misses"] > 0 and s["device"] == "emu"
PY
"$vc" stat --prometheus "$sock.ctl" >"$dir/stat.prom"
grep -q '^# TYPE vramcache_misses_total counter$' "$dir/stat.prom"
grep -Eq '^vramcache_export_requests_total\{export="b",op="write"\} [1-9]' "$dir/stat.prom"
grep -Eq '^vramcache_hits_total\{tier="gpu"\} [0-9]' "$dir/stat.prom"
# Bad use: a clear error, not a hang or a crash.
if "$vc" stat "$dir/nothing" 2>"$dir/err"; then exit 1; fi
grep -q 'is `vramcache serve` running there' "$dir/err"
printf 'bogus\n' | python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"bogus\n")
r = s.makefile("rb").read(); assert r.startswith(b"error:"), r' "$sock.ctl"
stop_server
[ ! -e "$sock.ctl" ] || { echo "statistics socket left behind" >&2; exit 1; }
echo "nbd exports: all checks passed"
