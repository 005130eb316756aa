#!/usr/bin/env bash
# A file kept open through the mount follows SRC's changes behind the
# mount's back with the default --revalidate open: once the kernel asks
# for the file's attributes again (--attr-timeout), the size it reports
# and the bytes read agree with SRC.
#  1. `tail -n0 -f` of a log on the mount prints the lines appended to it
#     in SRC (lines are appended until one is printed, so the moment tail
#     takes its starting end does not matter; bounded by 20 s).
#  2. An fd held open (python3): SRC appended to (the old last page was
#     partial), shrunk, shrunk and grown again with other bytes, changed
#     in place at the same size; after each, once fstat shows SRC's size
#     (at once: --attr-timeout 0), a read from 0 returns exactly SRC's
#     bytes, and a read at the old end the new ones.
#     The same for SRC appended to while the file is being written
#     through the mount, once the writer has closed it.
#  3. Appending through the mount itself, with a reader fstat'ing the
#     file after every write, drops no cached page (`drops` of
#     `vramcache stat` unchanged): our own writes are not taken for
#     changes in SRC.
# Both write modes. Not run with --kernel-writeback: the kernel then keeps
# the size of an open file itself (docs/MOUNT.md).
# Usage: fuse_tailf.sh VRAMCACHE_BINARY
. "$(dirname "$0")/fuse_lib.sh"
need python3 python3
need tail coreutils

# follow_tail: step 1 on the mount at $mnt.
follow_tail() {
	printf 'a\n' >"$src/log"
	: >"$dir/tail.out" # empty before tail starts, not once it has
	timeout 60 tail -n0 -s 0.2 -f "$mnt/log" >>"$dir/tail.out" &
	local tp=$! i=0 deadline=$((SECONDS + 20))
	until [ -s "$dir/tail.out" ]; do
		if [ $SECONDS -ge $deadline ]; then
			kill "$tp" 2>/dev/null || true
			fail "tail -f printed none of $i lines appended in SRC in 20 s ($1)"
		fi
		i=$((i + 1))
		echo "line $i" >>"$src/log"
		sleep 0.2
	done
	echo end >>"$src/log"
	until grep -qx end "$dir/tail.out"; do
		if [ $SECONDS -ge $deadline ]; then
			kill "$tp" 2>/dev/null || true
			fail "tail -f did not print the last line appended in SRC in 20 s ($1)"
		fi
		sleep 0.1
	done
	kill "$tp" 2>/dev/null || true
	wait "$tp" 2>/dev/null || true
	# A run of the appended lines up to the last one, nothing else (no
	# NUL bytes from a page cached past the old end).
	python3 - "$dir/tail.out" "$i" <<'PY' || fail "tail -f printed other lines than SRC's ($1)"
import sys
got = open(sys.argv[1], "rb").read().split(b"\n")
n = int(sys.argv[2])
assert got[-1] == b"" and got[-2] == b"end", got
first = int(got[0].split()[1])
assert got[:-2] == [b"line %d" % k for k in range(first, n + 1)], (n, got)
PY
}

# held_fd: steps 2 and 3 on the mount at $mnt.
held_fd() {
	python3 - "$mnt/f" "$src/f" <<'PY' || fail "an fd held open disagreed with SRC ($1)"
import json, os, sys, time
mnt, srcp = sys.argv[1:3]

def src_bytes():
    with open(srcp, "rb") as f:
        return f.read()

def check(fd, what, old_end=None, same_size=False):
    want = src_bytes()
    # Bounds, not measurements: attributes are asked for at once here.
    end = time.monotonic() + 20
    while True:
        size = os.fstat(fd).st_size
        got = os.pread(fd, len(want) + 4096, 0)
        if size == len(want) and (got == want or not same_size):
            break
        if time.monotonic() > end:
            break
        time.sleep(0.05)
    if size != len(want):
        sys.exit(f"{what}: fstat says {size}, SRC has {len(want)}")
    if got != want:
        diff = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                    min(len(got), len(want)))
        sys.exit(f"{what}: read {len(got)} bytes of the {size} fstat reports, "
                 f"first differing at {diff}")
    if old_end is not None and os.pread(fd, len(want), old_end) != want[old_end:]:
        sys.exit(f"{what}: a read at the old end {old_end} differs from SRC")

def drops():
    return json.loads(os.getxattr(mnt, "user.vramcache.stats"))["drops"]

with open(srcp, "wb") as f:
    f.write(os.urandom(10000))  # the last 4 KiB page partial
fd = os.open(mnt, os.O_RDONLY)
check(fd, "first read")
check(fd, "second read (cached)")
with open(srcp, "ab") as f:
    f.write(os.urandom(5000))
check(fd, "appended in SRC", old_end=10000)
os.truncate(srcp, 3000)
check(fd, "shrunk in SRC")
os.truncate(srcp, 1000)
with open(srcp, "ab") as f:
    f.write(os.urandom(4000))
check(fd, "shrunk and grown in SRC", old_end=1000)
with open(srcp, "r+b") as f:
    f.write(os.urandom(5000))
check(fd, "changed in place in SRC", same_size=True)
# Appended in SRC while written through the mount (not followed then: SRC
# changes by our hand too); the writer's close makes the cache follow.
w = os.open(mnt, os.O_WRONLY)
os.pwrite(w, b"ours", 0)
with open(srcp, "ab") as f:
    f.write(os.urandom(3000))
os.close(w)
check(fd, "appended in SRC while written through the mount", old_end=5000)

# Our own appends, a reader asking for attributes after each.
before = drops()
w = os.open(mnt, os.O_WRONLY | os.O_APPEND)
for i in range(50):
    os.write(w, b"appended through the mount %d\n" % i)
    os.fstat(fd)
    os.pread(fd, 1 << 20, 0)
os.close(w)
check(fd, "appended through the mount")
after = drops()
if after != before:
    sys.exit(f"appending through the mount dropped the cache {after - before} times")
os.close(fd)
PY
}

for mode in write-through write-back; do
	args=()
	[ $mode = write-back ] && args=(--write-back)
	start_mount "${args[@]}"
	follow_tail $mode
	stop_mount
	start_mount "${args[@]}" --attr-timeout 0
	held_fd $mode
	stop_mount
done
echo "fuse_tailf: ok (tail -f and a held fd follow SRC's appends and shrinks; our own appends drop nothing; both write modes)"
