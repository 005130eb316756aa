#!/usr/bin/env bash
# Errors reach the application. 1. SRC read-only (a read-only bind mount):
# reads work; creating, writing, truncating and removing fail with EROFS.
# 2. SRC full (a 2 MiB tmpfs): in write-through a write fails with ENOSPC
# and every byte acknowledged before is in SRC; in write-back the failure
# comes at the latest from fsync (ENOSPC), and truncating the file through
# the mount then drops its dirty pages so that the mount unmounts cleanly.
# 3. Through the mount, permission errors are SRC's (a file of mode 000 for
# an unprivileged user, with default_permissions). Under the kernel's
# write-back cache (VC_MOUNT_ARGS=--kernel-writeback) write(2) is
# acknowledged by the kernel's page cache, so a full SRC fails fsync in
# both modes, as write-back does.
# Usage: fuse_errors.sh VRAMCACHE_BINARY
. "$(dirname "$0")/fuse_lib.sh"
need python3 python3

# 1. Read-only SRC.
ro=$dir/ro
mkdir "$ro"
echo hello >"$src/file"
mount --bind "$src" "$ro" 2>/dev/null || skip "cannot bind-mount here"
extra_mounts+=("$ro")
mount -o remount,bind,ro "$ro" || skip "cannot remount read-only here"
realsrc=$src
src=$ro
start_mount
[ "$(cat "$mnt/file")" = hello ] || fail "read from a read-only SRC"
for cmd in "echo x >'$mnt/file'" "echo x >'$mnt/new'" "truncate -s 0 '$mnt/file'" \
	"rm '$mnt/file'" "mkdir '$mnt/d'"; do
	if out=$(sh -c "$cmd" 2>&1); then fail "'$cmd' succeeded on a read-only SRC"; fi
	case $out in *"Read-only file system"*) ;; *) fail "'$cmd': $out (want EROFS)" ;; esac
done
stop_mount
src=$realsrc

# 2. Full SRC.
small=$dir/small
mkdir "$small"
mount -t tmpfs -o size=2M tmpfs "$small" 2>/dev/null || skip "cannot mount a tmpfs here"
extra_mounts+=("$small")
src=$small
late=0
case " ${VC_MOUNT_ARGS:-} " in *" --kernel-writeback "*) late=1 ;; esac
for mode in write-through write-back; do
	args=(--host-bytes 8M --gpu-bytes 8M)
	[ "$mode" = write-back ] && args+=(--write-back)
	start_mount "${args[@]}"
	python3 - "$mnt/big" "$small/big" "$mode" "$late" <<'PY' || fail "$mode: full SRC"
import errno, os, random, sys
path, srcpath, mode, late = sys.argv[1:5]
data = random.Random(7).randbytes(8 << 20)
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
acked, err = 0, None
try:
    while acked < len(data):
        acked += os.write(fd, data[acked:acked + (64 << 10)])
    os.fsync(fd)
except OSError as e:
    err = e.errno
assert err == errno.ENOSPC, "%s: got %s after %d bytes, want ENOSPC" % (mode, err, acked)
if mode == "write-through" and late == "0":
    got = open(srcpath, "rb").read()
    assert got[:acked] == data[:acked], "acknowledged bytes missing from SRC"
    os.close(fd)
else:
    # The dirty pages past what SRC holds cannot go back; cut them off.
    os.ftruncate(fd, 0)
    os.close(fd)
print("%s: ENOSPC after %d bytes acknowledged" % (mode, acked))
PY
	stop_mount
	rm -f "$small/big"
done
src=$realsrc

# 3. Permissions: SRC's, for an unprivileged user.
if command -v setpriv >/dev/null; then
	echo secret >"$src/private"
	chmod 000 "$src/private"
	start_mount --allow-other
	if out=$(setpriv --reuid=65534 --regid=65534 --clear-groups cat "$mnt/private" 2>&1); then
		fail "an unprivileged user read a file of mode 000"
	fi
	case $out in *"Permission denied"*) ;; *) fail "mode 000: $out (want EACCES)" ;; esac
	stop_mount
fi
echo "fuse_errors: ok"
