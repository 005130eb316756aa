#!/usr/bin/env bash
# A file deleted in SRC and another created in its place with the same
# inode number, size, mtime and ctime is another file: its reads through
# the mount must not return the old file's cached pages. SRC is an ext4 of
# 128-byte inodes on a loop device: timestamps of whole seconds and no
# birth time, so that size, mtime and ctime can all be equal (mtime set
# with touch -d; ctime the same second, retried until it is), and ext4
# gives a freed inode number to the next file created. What tells the two
# files apart is the inode's generation: in the file handle (the
# identity's key), and FS_IOC_GETVERSION (without handles: `seen`). The
# file's fds in the mount are pushed out first (--max-fds 1,
# --max-path-fds 4, other files read), since an open fd keeps the old
# inode and its number from being reused.
# Usage: fuse_reuse.sh VRAMCACHE_BINARY
. "$(dirname "$0")/fuse_lib.sh"
need mkfs.ext4 e2fsprogs
img=$dir/ext4.img ext=$dir/ext4
truncate -s 32M "$img"
mkfs.ext4 -q -I 128 -N 256 "$img" 2>/dev/null || skip "mkfs.ext4 -I 128 failed"
mkdir "$ext"
mount -o loop "$img" "$ext" 2>/dev/null || skip "cannot mount a loop device here"
extra_mounts+=("$ext")
src=$ext
for i in $(seq -w 0 39); do head -c 5000 /dev/urandom >"$src/f$i"; done
when='2001-02-03 04:05:06'

start_mount --attr-timeout 0 --max-fds 1 --max-path-fds 4 --host-bytes 8M --gpu-bytes 0
tried=0
while :; do
	tried=$((tried + 1))
	[ "$tried" -le 10 ] || skip "no inode number reused in the same second in 10 tries"
	head -c 5000 /dev/urandom >"$dir/old"
	head -c 5000 /dev/urandom >"$dir/new"
	rm -f "$src/t"
	cp "$dir/old" "$src/t" && touch -d "$when" "$src/t"
	cmp "$dir/old" "$mnt/t" || fail "first read differs"
	before=$(stat -c '%i %Y %Z' "$src/t")
	gen_before=$(lsattr -v "$src/t" | cut -d' ' -f1)
	cat "$mnt"/f* >/dev/null # t's fds in the mount close
	rm "$src/t"
	cp "$dir/new" "$src/t" && touch -d "$when" "$src/t"
	after=$(stat -c '%i %Y %Z' "$src/t")
	gen_after=$(lsattr -v "$src/t" | cut -d' ' -f1)
	[ "$before" = "$after" ] && [ "$gen_before" != "$gen_after" ] && break
done
echo "inode, mtime, ctime of both files: $after (try $tried); generations $gen_before, $gen_after"
cmp "$dir/new" "$mnt/t" || fail "a file that reused a deleted file's inode number read the old file's bytes"
stop_mount
echo "fuse_reuse: ok"
