#!/usr/bin/env bash
# qemu's NBD client against `vramcache serve`: qemu-img convert into the
# export and compare, create -f qcow2 on the export and check it, write
# through the qcow2 layer and read back, and qemu-io pattern writes and
# reads (unaligned ones too), with -P checking every byte. qemu-io's
# failures are printed, not returned, so its output is checked.
# Usage: nbd_qemu.sh VRAMCACHE_BINARY
. "$(dirname "$0")/nbd_lib.sh"
need qemu-img qemu-utils
need qemu-io qemu-utils

head -c $((16 << 20)) /dev/urandom >"$dir/src.img"
truncate -s $((64 << 20)) "$dir/disk.img"
start_server --write-back --host-bytes 2M --gpu-bytes 4M "$dir/disk.img"

qemu-img convert -n -f raw -O raw "$dir/src.img" "$uri"
# The export is larger; its tail reads as zeroes, so they compare equal
# (and unequal in strict mode, which also looks at sizes).
qemu-img compare -f raw -F raw "$dir/src.img" "$uri"
if qemu-img compare -q -s -f raw -F raw "$dir/src.img" "$uri"; then
	echo "strict compare passed on images of different sizes" >&2; exit 1
fi
truncate -s $((64 << 20)) "$dir/src.img"
# A byte changed in the export: compare must see it. Its bits inverted,
# so that it differs whatever the random byte was (a fixed 'x' matched it
# one run in 256).
old=$(od -An -tu1 -j 12345 -N 1 "$dir/src.img" | tr -d ' ')
printf "$(printf '\\%03o' $((old ^ 255)))" | dd of="$dir/src.img" bs=1 seek=12345 conv=notrunc status=none
if qemu-img compare -q -f raw -F raw "$dir/src.img" "$uri"; then
	echo "compare missed a changed byte" >&2; exit 1
fi

qio() { # qemu-io commands on the export; any failure fails the test
	local out
	out=$(qemu-io -f raw "$@" "$uri" 2>&1)
	if grep -Eiq 'fail|error|pattern' <<<"$out"; then echo "$out" >&2; exit 1; fi
}
qio -c 'write -P 0xab 4096 1M' -c 'read -P 0xab 4096 1M'
qio -c 'write -P 0x5c 1000001 77777' -c 'read -P 0x5c 1000001 77777' -c 'read -P 0xab 4096 995905'
qio -c 'write -z 8192 65536' -c 'read -P 0 8192 65536' -c 'read -P 0xab 4096 4096'
qio -c 'discard 2M 1M' -c 'flush'
# A wrong pattern must be reported (the check above can fail).
out=$(qemu-io -f raw -c 'read -P 0xee 4096 4096' "$uri" 2>&1 || true)
grep -qi 'pattern' <<<"$out" || { echo "qemu-io did not report a bad pattern: $out" >&2; exit 1; }

qemu-img create -q -f qcow2 "$uri" 48M
qemu-img check -f qcow2 "$uri" | grep -q 'No errors were found'
qemu-io -f qcow2 -c 'write -P 0x42 1M 3M' "$uri" >/dev/null
out=$(qemu-io -f qcow2 -c 'read -P 0x42 1M 3M' -c 'read -P 0 0 1M' "$uri" 2>&1)
grep -Eiq 'fail|error|pattern' <<<"$out" && { echo "$out" >&2; exit 1; }
qemu-img check -f qcow2 "$uri" | grep -q 'No errors were found'
qemu-img info --output=json "$uri" | grep -q '"format": "qcow2"'
stop_server
# Flushed on exit: the qcow2 image is whole on the backing file itself.
qemu-img check -f qcow2 "$dir/disk.img" | grep -q 'No errors were found'
echo "nbd qemu: all checks passed"
