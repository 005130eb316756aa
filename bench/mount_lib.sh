# Sourced by the mount benchmarks (bench/mount.sh, bench/mount_kcache.sh)
# after they set $vc, $dev and $fsz: a temp dir $dir holding $src (4 files
# f0..f3 of $fsz made with fio) and $mnt, removed on exit with the mount;
# cpu_ticks PID (user+sys clock ticks), mnt_up ARGS... (`vramcache mount`
# as a daemon; $pid) and mnt_down (unmounts and waits for the daemon).
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/vc-mount-bench-XXXXXX")
src=$dir/src mnt=$dir/mnt
mkdir "$src" "$mnt"
pid=
cleanup() {
	mountpoint -q "$mnt" && umount -l "$mnt"
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
for i in 0 1 2 3; do fio --name=mk --filename="$src/f$i" --size="$fsz" --rw=write --bs=1M \
	--ioengine=psync --refill_buffers --output=/dev/null; done
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
mnt_up() {
	"$vc" mount --device "$dev" "$@" --pidfile "$dir/pid" "$src" "$mnt"
	pid=$(cat "$dir/pid")
}
mnt_down() { umount "$mnt"; while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; pid=; }
