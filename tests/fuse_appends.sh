#!/usr/bin/env bash
# Appends and size changes through the mount, in both write modes:
#   1. 300 appends of 1000 bytes (sqlite's journal, a log) and a file cp
#      writes in 64 KiB pieces with a partial last page: the mount reads
#      nothing from SRC for them (the cache's backing_read_bytes stays 0:
#      pages wholly past the old end are written whole, and growing keeps
#      the page at the old end), and both read back right, through the
#      mount and in SRC after close.
#   2. A shrink to an odd size, then a write past a gap: the gap reads as
#      zeros (the shrink drops the page at the new end), and so does a
#      truncate up.
# Usage: fuse_appends.sh VRAMCACHE_BINARY
. "$(dirname "$0")/fuse_lib.sh"
need python3 python3
for mode in "" --write-back; do
	rm -rf "${src:?}"/*
	start_mount $mode --host-bytes 4M --gpu-bytes 8M
	python3 - "$mnt" "$src" "$vc" "$mode" <<'PY' || fail "appends ${mode:-write-through}"
import json, os, random, subprocess, sys
mnt, src, vc, mode = sys.argv[1:5]
r = random.Random(7)
def stats():
    return json.loads(subprocess.check_output([vc, "stat", mnt]))["cache"]
log = b""
with open(mnt + "/log", "wb", buffering=0) as f:
    for i in range(300):
        b = r.randbytes(1000)
        f.write(b)
        log += b
big = r.randbytes(5 * 65536 + 1234)
with open(mnt + "/big", "wb", buffering=0) as f:
    for o in range(0, len(big), 65536):
        f.write(big[o:o + 65536])
st = stats()
assert st["backing_read_bytes"] == 0, "appends read %d bytes from SRC" % st["backing_read_bytes"]
for name, want in (("log", log), ("big", big)):
    assert open(mnt + "/" + name, "rb").read() == want, name + " reads back wrong through the mount"
    assert open(src + "/" + name, "rb").read() == want, name + " is wrong in SRC after close"
# A shrink to an odd size, a write past a gap, a truncate up.
with open(mnt + "/big", "r+b", buffering=0) as f:
    f.truncate(10000)
    f.seek(20000)
    f.write(b"x" * 100)
    f.truncate(30000)
want = big[:10000] + bytes(10000) + b"x" * 100 + bytes(9900)
for where in (mnt, src):
    got = open(where + "/big", "rb").read()
    assert got == want, "shrink and regrowth: wrong bytes in " + where
print("appends (%s): no store reads; shrink and regrowth read zeros" % (mode or "write-through"))
PY
	stop_mount
done
echo "fuse appends: all checks passed"
