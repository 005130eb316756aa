#!/usr/bin/env bash
# fio's nbd engine against `vramcache serve`: two jobs (two connections)
# write random 4 KiB blocks with crc32c verify headers on separate 8 MiB
# regions, then read every block back and verify it: err=0. Then, with the
# server stopped, one byte of the backing file is changed; a verify-only
# pass over a restarted server must fail at that block (so the check
# above can fail). Usage: nbd_fio.sh VRAMCACHE_BINARY
. "$(dirname "$0")/nbd_lib.sh"
need fio fio
fio --enghelp 2>/dev/null | grep -qx '[[:space:]]*nbd' || skip "this fio has no nbd engine"

truncate -s $((16 << 20)) "$dir/disk.img"
job=(--name=vc --ioengine=nbd --uri="$uri" --rw=randwrite --bs=4k --size=8M --offset_increment=8M
	--numjobs=2 --iodepth=16 --verify=crc32c --group_reporting)
for mode in --write-back ""; do
	start_server $mode --host-bytes 2M --gpu-bytes 4M "$dir/disk.img"
	fio "${job[@]}" --do_verify=1 >"$dir/out" 2>&1 || { cat "$dir/out" >&2; exit 1; }
	grep -q 'err= 0' "$dir/out" || { cat "$dir/out" >&2; exit 1; }
	grep -q 'verify' "$dir/out" && grep -qi 'bad\|fail' "$dir/out" && { cat "$dir/out" >&2; exit 1; }
	stop_server # write-back: flushed here
done

# Corrupt one byte of a block that fio wrote (every block is written: fio
# covers the region once without --norandommap).
printf 'Z' | dd of="$dir/disk.img" bs=1 seek=$((11 << 20)) conv=notrunc status=none
start_server --host-bytes 2M --gpu-bytes 4M "$dir/disk.img"
if fio "${job[@]}" --verify_only >"$dir/out" 2>&1; then
	echo "verify passed over a corrupted byte" >&2; cat "$dir/out" >&2; exit 1
fi
grep -q "verify: bad .* offset $((11 << 20))," "$dir/out" || { cat "$dir/out" >&2; exit 1; }
stop_server
echo "nbd fio: all checks passed"
