#!/usr/bin/env bash
# kill -9 of a write-back mount: everything fsynced or closed survives in
# SRC. A writer through the mount (--write-back) writes file A and
# fsyncs it, then writes more to A without fsync (may be lost); writes file
# B and closes it (close writes it back to SRC); keeps file C open with
# unsynced writes; then the daemon is killed with SIGKILL mid-flight and
# the mount torn down. SRC must hold A's fsynced bytes and all of B; the
# unsynced bytes may or may not be there (not checked), and nothing the
# kill interrupted may corrupt the synced parts.
# Usage: fuse_crash.sh VRAMCACHE_BINARY
. "$(dirname "$0")/fuse_lib.sh"
need python3 python3
start_mount --write-back --host-bytes 4M --gpu-bytes 8M
python3 - "$mnt" "$dir" <<'PY' &
import os, sys, time
mnt, d = sys.argv[1:3]
def pattern(seed, n):
    import random
    return random.Random(seed).randbytes(n)
a = os.open(mnt + "/A", os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(a, pattern(1, 3 << 20), 0)
os.fsync(a)
os.pwrite(a, pattern(2, 1 << 20), 1 << 20)   # over synced bytes, not synced
b = os.open(mnt + "/B", os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(b, pattern(3, (2 << 20) + 77), 0)
os.close(b)
c = os.open(mnt + "/C", os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(c, pattern(4, 1 << 20), 0)
open(d + "/ready", "w").close()
time.sleep(60)
PY
writer=$!
for _ in $(seq 200); do [ -e "$dir/ready" ] && break; sleep 0.05; done
[ -e "$dir/ready" ] || fail "the writer did not get through its writes"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
pid=
kill "$writer" 2>/dev/null || true
wait "$writer" 2>/dev/null || true
umount -l "$mnt" 2>/dev/null || true
python3 - "$src" <<'PY' || fail "fsynced or closed data lost in the kill"
import random, sys
s = sys.argv[1]
def pattern(seed, n):
    return random.Random(seed).randbytes(n)
a = open(s + "/A", "rb").read()
want = pattern(1, 3 << 20)
assert len(a) == len(want), "A: %d bytes" % len(a)
# [1M, 2M) may hold the unsynced overwrite, in whole pages or not at all
assert a[:1 << 20] == want[:1 << 20] and a[2 << 20:] == want[2 << 20:], "A's synced bytes"
new = pattern(2, 1 << 20)
for p in range(0, 1 << 20, 4096):
    got = a[(1 << 20) + p:(1 << 20) + p + 4096]
    assert got in (want[(1 << 20) + p:(1 << 20) + p + 4096], new[p:p + 4096]), "A page %d torn" % p
assert open(s + "/B", "rb").read() == pattern(3, (2 << 20) + 77), "B (closed)"
print("A's fsynced bytes and B intact after kill -9")
PY
echo "fuse_crash: ok"
