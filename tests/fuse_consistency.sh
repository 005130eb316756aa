#!/usr/bin/env bash
# Changes made to SRC behind the mount's back are seen on the next open
# (close-to-open): a file read through the mount (so cached) is then
# overwritten in SRC with other bytes of the same size, appended to, and
# truncated; each time a read through the mount must show SRC's bytes.
# A file replaced by rename in SRC is a new file. Then the same steps with
# --revalidate never must show the stale bytes: proof that the check, not
# luck (the kernel's cache, a miss), is what made the first half pass.
# Usage: fuse_consistency.sh VRAMCACHE_BINARY
. "$(dirname "$0")/fuse_lib.sh"

# run_steps EXPECT: EXPECT fresh|stale. Returns the number of steps whose
# read through the mount differed from SRC.
run_steps() {
	local stale=0
	head -c $((256 << 10)) /dev/urandom >"$src/f"
	cmp -s "$src/f" "$mnt/f" || fail "first read differs"
	cat "$mnt/f" >/dev/null # cached now
	# 1. Same size, other bytes (through a new fd: same inode).
	head -c $((256 << 10)) /dev/urandom | dd of="$src/f" conv=notrunc status=none
	cmp -s "$src/f" "$mnt/f" || stale=$((stale + 1))
	# 2. Appended to.
	cat "$mnt/f" >/dev/null
	head -c 5000 /dev/urandom >>"$src/f"
	cmp -s "$src/f" "$mnt/f" || stale=$((stale + 1))
	# 3. Truncated shorter, then bytes changed inside.
	cat "$mnt/f" >/dev/null
	truncate -s 100000 "$src/f"
	printf 'changed' | dd of="$src/f" bs=1 seek=4096 conv=notrunc status=none
	cmp -s "$src/f" "$mnt/f" || stale=$((stale + 1))
	# 4. Replaced by rename (a new inode: a new identity either way).
	cat "$mnt/f" >/dev/null
	head -c 70000 /dev/urandom >"$src/f.new"
	mv "$src/f.new" "$src/f"
	cmp -s "$src/f" "$mnt/f" || fail "a file replaced by rename in SRC read stale"
	return $stale
}

start_mount --attr-timeout 0
stale=0
run_steps || stale=$?
stop_mount
[ "$stale" -eq 0 ] || fail "$stale changes in SRC were not seen through the mount"

start_mount --attr-timeout 0 --revalidate never
stale=0
run_steps || stale=$?
stop_mount
[ "$stale" -eq 3 ] || fail "without the check $stale of 3 changes read stale: the test does not see staleness"
echo "fuse_consistency: ok (fresh with the check; 3 of 3 stale without it)"
