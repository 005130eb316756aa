#!/usr/bin/env bash
# The strict mode, --revalidate MS: a change made in SRC while a file
# stays open through the mount (so no open checks it) is seen by a read
# within MS, even while the kernel asks for no attributes (--attr-timeout
# 3600: so no getattr's check sees it; fuse_tailf covers that one). A file
# is opened and read (cached), then overwritten in SRC with other bytes of
# the same size; reads through the still-open fd (the kernel's page cache
# dropped before each, so every read reaches the mount) must show the new
# bytes, polled every 50 ms for up to 30 s (a bound far past MS = 200, so
# a slow machine does not fail it; no time is asserted). With --revalidate
# open (opens and attributes only) and never, the same reads must stay
# stale for as long (2 s, 10 x MS) and after: proof that the strict check,
# not the kernel or a cache miss, made them fresh.
# Usage: fuse_revalidate.sh VRAMCACHE_BINARY
. "$(dirname "$0")/fuse_lib.sh"
need python3 python3

# poll MODE: prints "fresh" or "stale" (after the mode's bound).
poll() {
	python3 - "$mnt/f" "$src/f" "$1" <<'PY'
import os, sys, time
mnt, srcpath, mode = sys.argv[1:4]
size = 256 << 10
old, new = os.urandom(size), os.urandom(size)
with open(srcpath, "wb") as f:
    f.write(old)
fd = os.open(mnt, os.O_RDONLY)
def read():
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    return os.pread(fd, size, 0)
assert read() == old, "first read differs"
assert read() == old, "second read differs"
# Other bytes, same size, same inode, while the file stays open.
with open(srcpath, "r+b") as f:
    f.write(new)
# Fresh: up to 30 s (a generous bound, not a measurement). Stale modes:
# 2 s, ten times the strict mode's 200 ms.
bound = 30.0 if mode == "strict" else 2.0
end, got = time.monotonic() + bound, None
while True:
    got = read()
    if got == new or time.monotonic() > end:
        break
    time.sleep(0.05)
os.close(fd)
assert got in (old, new), "a read is neither the old bytes nor the new"
print("fresh" if got == new else "stale")
PY
}

start_mount --attr-timeout 3600 --revalidate 200
got=$(poll strict)
stop_mount
[ "$got" = fresh ] || fail "--revalidate 200: a change in SRC was not seen through an open file within 30 s"
for mode in open never; do
	start_mount --attr-timeout 3600 --revalidate $mode
	got=$(poll $mode)
	stop_mount
	[ "$got" = stale ] || fail "--revalidate $mode: the open file read SRC's change: the test does not see staleness"
done
echo "fuse_revalidate: ok (fresh within the bound with 200 ms; stale with open and never)"
