#!/usr/bin/env bash
# fsx-style random operations (writes, truncates, mmap reads, punched
# holes, fsyncs, reopens) on a file through the mount against a shadow
# (tests/fuse/fsx.py), in write-through and write-back, with a cache much
# smaller than the file so that pages move between the tiers and back to
# SRC all the time. After each run the file in the mount and in SRC equal
# the shadow. VC_FSX_OPS and VC_FSX_SEED change the run's length and seed.
# Usage: fuse_fsx.sh VRAMCACHE_BINARY
. "$(dirname "$0")/fuse_lib.sh"
need python3 python3
ops=${VC_FSX_OPS:-1500}
seed=${VC_FSX_SEED:-$RANDOM}
for mode in write-through write-back; do
	args=(--host-bytes 256K --gpu-bytes 512K)
	[ "$mode" = write-back ] && args+=(--write-back)
	start_mount "${args[@]}"
	python3 "$(dirname "$0")/fuse/fsx.py" "$mnt/f-$mode" "$src/f-$mode" "$ops" "$seed" ||
		fail "$mode: fsx (replay with VC_FSX_SEED=$seed)"
	stop_mount
done
echo "fuse_fsx: ok"
