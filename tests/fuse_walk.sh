#!/usr/bin/env bash
# A tree of many more files than the mount may hold fds: VC_WALK_N (6000)
# files in 61 directories walked through a mount whose fd limit is 256
# (prlimit on the daemon: RLIMIT_NOFILE 256, soft and hard) with names and
# attributes kept by the kernel for an hour, so that it knows every inode
# at once: find -ls, then every object stat'ed and every file read
# (tests/fuse/walk.py), compared with the same walk of SRC. The inode table
# must know every inode and hold at most --max-path-fds idle fds (plus those
# in use), reopening the others by their file handles. A file opened
# through the mount and then deleted in SRC stays readable through its open
# fd across the walk (its inode keeps its fd while open). Then the same walk
# with --no-file-handles (an fd per inode, the old way) must fail with
# EMFILE: proof that the walk needs more fds than the limit, so the first
# half passes by the handles, not by a small tree.
# Usage: fuse_walk.sh VRAMCACHE_BINARY
. "$(dirname "$0")/fuse_lib.sh"
need python3 python3
need prlimit util-linux
n=${VC_WALK_N:-6000}
limit=256
walk() { python3 "$(dirname "$0")/fuse/walk.py" "$@"; }
walk make "$src" "$n"
head -c 300000 /dev/urandom >"$src/keep"
cp "$src/keep" "$dir/keep"
walk list "$src" | grep -v '^keep ' >"$dir/want"
(cd "$src" && find . -path ./keep -prune -o -printf '%p %y %m %s %l\n' | sort) >"$dir/want-find"
root_stat() {
	"$vc" stat "$mnt" | python3 -c 'import json, sys
s = json.load(sys.stdin)
for k in sys.argv[1].split("."): s = s[k]
print(s)' "$1"
}

VC_MOUNT_WRAPPER="prlimit --nofile=$limit:$limit" \
	start_mount --attr-timeout 3600 --max-path-fds 64 --max-fds 16 --host-bytes 64M --gpu-bytes 0
[ "$(root_stat inodes.file_handles)" = True ] || skip "SRC ($(df --output=fstype "$src" | tail -1)) gives no file handles"
exec 7<"$mnt/keep"
rm "$src/keep"
(cd "$mnt" && find . -path ./keep -prune -o -printf '%p %y %m %s %l\n' | sort) >"$dir/got-find" ||
	fail "find through the mount failed"
diff "$dir/want-find" "$dir/got-find" >/dev/null || fail "find through the mount differs from SRC's"
walk list "$mnt" >"$dir/got" || fail "walking the mount failed"
diff "$dir/want" "$dir/got" >/dev/null || fail "the walk through the mount differs from SRC's"
known=$(root_stat inodes.known)
fds=$(root_stat inodes.fds_open)
idle=$(root_stat inodes.fds_idle)
opens=$(root_stat inodes.fd_opens)
echo "objects $(wc -l <"$dir/want"): inodes known $known, fds held $fds ($idle idle), reopened by handle $opens"
[ "$known" -gt "$n" ] || fail "the kernel knows $known inodes, fewer than the $n files: the walk proves nothing"
[ "$idle" -le 64 ] || fail "$idle idle inode fds, past --max-path-fds 64"
[ "$opens" -gt 0 ] || fail "no inode fd was reopened by its handle"
cmp - "$dir/keep" <&7 || fail "a file deleted in SRC while open through the mount read other bytes"
exec 7<&-
stop_mount

# The old way: an fd per inode the kernel knows.
cp "$dir/keep" "$src/keep"
VC_MOUNT_WRAPPER="prlimit --nofile=$limit:$limit" \
	start_mount --attr-timeout 3600 --max-fds 16 --host-bytes 64M --gpu-bytes 0 --no-file-handles
if walk list "$mnt" >/dev/null 2>"$dir/err"; then
	fail "with an fd per inode the walk of $n files passed under $limit fds: the test does not need the handles"
fi
grep -q "Too many open files" "$dir/err" || fail "without handles: $(cat "$dir/err") (want EMFILE)"
stop_mount
echo "fuse_walk: ok ($n files under $limit fds; EMFILE with an fd per inode)"
