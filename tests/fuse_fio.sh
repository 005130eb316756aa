#!/usr/bin/env bash
# fio writes and verifies through the mount: 4 KiB random writes
# (psync) and 1 MiB sequential ones with 8 in flight (libaio, O_DIRECT),
# two jobs at once, each verified by checksum (crc32c) through the mount,
# with a cache smaller than the data. After unmount fio verifies the same
# files in SRC directly (verify_only): what was acknowledged reached SRC.
# Write-through and write-back.
# Usage: fuse_fio.sh VRAMCACHE_BINARY
. "$(dirname "$0")/fuse_lib.sh"
need fio fio
jobs() { # DIR EXTRA...
	local d=$1; shift
	fio --output-format=terse --minimal --verify_state_save=0 "$@" \
		--name=rand --filename="$d/rand.dat" --size=24M --rw=randwrite --bs=4k \
		--ioengine=psync --verify=crc32c --verify_fatal=1 --randrepeat=1 \
		--name=seq --filename="$d/seq.dat" --size=32M --rw=write --bs=1M \
		--ioengine=libaio --direct=1 --iodepth=8 --verify=crc32c --verify_fatal=1 >/dev/null
}
for mode in write-through write-back; do
	rm -f "$src"/*.dat
	args=(--host-bytes 8M --gpu-bytes 16M)
	[ "$mode" = write-back ] && args+=(--write-back)
	start_mount "${args[@]}"
	jobs "$mnt" || fail "$mode: fio verify through the mount"
	stop_mount
	jobs "$src" --verify_only=1 || fail "$mode: fio verify of SRC after unmount"
done
echo "fuse_fio: ok"
