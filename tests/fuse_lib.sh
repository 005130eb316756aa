# Sourced by the mount tests (each: bash fuse_TEST.sh VRAMCACHE_BINARY).
# Gives: $vc, skip REASON (exit 77), fail REASON, need CMD PACKAGE, a temp
# dir $dir (removed on exit) holding $src and $mnt, start_mount ARGS...
# (`vramcache mount` in the foreground as our child; returns once MNT is a
# mount point) and stop_mount (unmounts, waits, and fails the test if the
# daemon's exit status is not 0, a sanitizer's report in ASan/UBSan builds,
# or if it still runs a minute later: a write-back SRC refuses). Skips when FUSE is unusable:
# not root, no /dev/fuse, or a build without FUSE support.
set -euo pipefail
vc=$1
skip() { echo "SKIP: $*" >&2; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null || skip "$1 not found (Debian package: $2)"; }
[ "$(id -u)" -eq 0 ] || skip "not root: the mount tests mount FUSE file systems"
[ -c /dev/fuse ] || skip "no /dev/fuse (modprobe fuse; in a container, pass the device)"
"$vc" mount --help >/dev/null
dir=$(mktemp -d "${TMPDIR:-/tmp}/vc-fuse-XXXXXX")
src=$dir/src mnt=$dir/mnt
mkdir "$src" "$mnt"
pid=
cleanup() {
	local rc=$?
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -s "$dir/mount.log" ]; then
		echo "--- the daemon's messages:" >&2
		cat "$dir/mount.log" >&2
	fi
	# A dead mount (its daemon killed) is no mountpoint to mountpoint(1).
	umount -l "$mnt" 2>/dev/null || true
	if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
	for m in "${extra_mounts[@]}"; do umount -l "$m" 2>/dev/null || true; done
	rm -rf "$dir"
}
extra_mounts=()
trap cleanup EXIT
export MALLOC_PERTURB_=165
start_mount() {
	# VC_MOUNT_WRAPPER: a debugger or tracer to run the daemon under.
	# VC_MOUNT_ARGS: options every mount of the test gets (a variant of it:
	# tests/CMakeLists.txt runs some with --kernel-writeback).
	${VC_MOUNT_WRAPPER:-} "$vc" mount --device emu --foreground ${VC_MOUNT_ARGS:-} "$@" \
		"$src" "$mnt" 2>>"$dir/mount.log" &
	pid=$!
	for _ in $(seq 200); do
		mountpoint -q "$mnt" && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	cat "$dir/mount.log" >&2
	if grep -q "mounting on .* failed" "$dir/mount.log"; then skip "FUSE mount refused here"; fi
	fail "vramcache mount did not come up"
}
stop_mount() {
	local rc=0
	umount "$mnt" || { sleep 1; umount "$mnt"; }
	# Where SRC refuses the write-back the process stays after the
	# unmount, trying again: a failure here, not a hang.
	for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid"
		wait "$pid" || true
		pid=
		fail "vramcache mount still ran 60 s after the unmount (SRC refused its write-back)"
	fi
	wait "$pid" || rc=$?
	pid=
	if [ "$rc" -ne 0 ]; then cat "$dir/mount.log" >&2; fail "vramcache mount exited with $rc"; fi
}
