#!/usr/bin/env bash
# `vramcache serve` beside other GPU programs (issue 12), on the emulated
# device (a 160 MiB device: VC_EMU_DEVICE_BYTES; what other programs hold:
# VC_EMU_FOREIGN_FILE), with a 64 MiB GPU tier in 8 MiB chunks, write-back,
# while a client writes and reads through NBD:
#   1. Another program takes device memory: the watermark (--gpu-keep-free
#      32M) shrinks the tier until 32 MiB are free again.
#   2. A program asks over --release-socket (the shim's protocol, spoken
#      here by hand): the tier gives back what was asked, in whole chunks
#      (the reply says what was asked: its most);
#      a request for another device gets 0, a bad one ERR EINVAL.
#   3. The other program exits: after the hold-off the tier grows back.
#   4. Every byte the client wrote reads back, and `vramcache stat` counts
#      the chunks released and regained.
# Usage: nbd_gpushare.sh VRAMCACHE_BINARY
. "$(dirname "$0")/nbd_lib.sh"
need_nbdsh
fail() { echo "FAIL: $*" >&2; exit 1; }
head -c $((96 << 20)) /dev/urandom >"$dir/disk.img"
echo 0 >"$dir/foreign"
export VC_EMU_DEVICE_BYTES=$((160 << 20)) VC_EMU_FOREIGN_FILE="$dir/foreign"
"$vc" serve --device emu --socket "$sock" --pidfile "$dir/pid" --write-back \
	--host-bytes 8M --gpu-bytes 64M --gpu-chunk-bytes 8M --gpu-keep-free 32M \
	--release-socket "$dir/r.sock" --log "$dir/log" "$dir/disk.img"
pid=$(cat "$dir/pid")

gpu_bytes() { "$vc" stat "$sock" | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["cache"]["gpu_bytes"]))'; }
wait_for() { # PYTHON-CONDITION-ON-g SECONDS
	for _ in $(seq $((${2} * 10))); do
		g=$(gpu_bytes)
		python3 -c "import sys; g=$g; sys.exit(0 if ($1) else 1)" && return 0
		sleep 0.1
	done
	fail "GPU tier at $g bytes, waited for $1"
}
[ "$(gpu_bytes)" = $((64 << 20)) ] || fail "GPU tier not 64 MiB at start"

scatter_writes 12 3000 "$dir/want" || fail "writes over NBD"

# 1. Another program takes 100 MiB: 160 - 100 = 60 free < 32 + the tier's 64.
echo $((100 << 20)) >"$dir/foreign"
wait_for "g <= 160*2**20 - 100*2**20 - 32*2**20" 5
grep -q "below the watermark" "$dir/log" || fail "no watermark line in the log"

# 2. Requests over the release socket.
emu_uuid=$(printf 'vramcache-emu\0\0\0' | od -An -tx1 | tr -d ' \n')
ask() { release_ask "$dir/r.sock" "$1"; }
before=$(gpu_bytes)
r=$(ask "RELEASE $((5 << 20)) $emu_uuid")
[ "$r" = "OK $((5 << 20))" ] || fail "release of 5 MiB answered '$r'" # the protocol's cap: what was asked
[ "$(gpu_bytes)" = $((before - (8 << 20))) ] || fail "the tier did not shrink by the chunk"
r=$(ask "RELEASE $((5 << 20)) 00112233445566778899aabbccddeeff")
[ "$r" = "OK 0" ] || fail "another device's request answered '$r'"
r=$(ask "RELEASE lots $emu_uuid")
case "$r" in "ERR EINVAL"*) ;; *) fail "a bad request answered '$r'" ;; esac
r=$(ask "RELEASE $((1 << 40)) $emu_uuid")
case "$r" in "OK "*) ;; *) fail "a request past the tier answered '$r'" ;; esac
[ "$(gpu_bytes)" = 0 ] || fail "a request past the tier left $(gpu_bytes) bytes"

# The data is all there while the tier is gone.
reads_match "$dir/want" || fail "reads with the GPU tier given back"

# 3. The other program exits: the tier grows back after the hold-off.
echo 0 >"$dir/foreign"
wait_for "g == 64*2**20" 20
grep -q "grown" "$dir/log" || fail "no grow line in the log"

# 4. Everything reads back; the counters say what happened.
reads_match "$dir/want" || fail "reads after growing back"
"$vc" stat "$sock" | python3 -c '
import json, sys
c = json.load(sys.stdin)["cache"]
assert c["gpu_chunks_released"] >= 8 and c["gpu_chunks_regained"] >= 8, c
assert c["gpu_bytes_released_requested"] == 64 * 2**20 - 0 or c["gpu_bytes_released_requested"] > 0, c
print("released %d chunks, regained %d" % (c["gpu_chunks_released"], c["gpu_chunks_regained"]))
' || fail "statistics"
stop_server
