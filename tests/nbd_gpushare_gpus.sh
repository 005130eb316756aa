#!/usr/bin/env bash
# `vramcache serve --gpus 0,1` beside other GPU programs: each GPU of the
# tier gives memory back on its own (two emulated devices, 32 MiB of tier
# each in 8 MiB chunks; their memory is one 160 MiB budget,
# VC_EMU_DEVICE_BYTES, which other programs' use, VC_EMU_FOREIGN_FILE,
# takes from):
#   1. A release request naming GPU 1's UUID shrinks GPU 1's part alone.
#   2. Another program takes memory: the watermark shrinks both GPUs'
#      parts until 32 MiB are free on each again.
#   3. It exits: both parts grow back after the hold-off.
#   4. Every byte a client wrote reads back.
# Usage: nbd_gpushare_gpus.sh VRAMCACHE_BINARY
. "$(dirname "$0")/nbd_lib.sh"
need_nbdsh
fail() { echo "FAIL: $*" >&2; exit 1; }
head -c $((48 << 20)) /dev/urandom >"$dir/disk.img"
echo 0 >"$dir/foreign"
export VC_EMU_DEVICE_BYTES=$((160 << 20)) VC_EMU_FOREIGN_FILE="$dir/foreign"
"$vc" serve --device emu --gpus 0,1 --socket "$sock" --pidfile "$dir/pid" --write-back \
	--host-bytes 4M --gpu-bytes 64M --gpu-chunk-bytes 8M --gpu-keep-free 32M \
	--release-socket "$dir/r.sock" --log "$dir/log" "$dir/disk.img"
pid=$(cat "$dir/pid")

parts() { "$vc" stat "$sock" | python3 -c 'import json,sys; print(" ".join(str(g["bytes"]) for g in json.load(sys.stdin)["gpus"]))'; }
wait_for() { # PYTHON-CONDITION-ON-a-AND-b SECONDS
	for _ in $(seq $((${2} * 10))); do
		set -- "$1" "$2" $(parts)
		python3 -c "import sys; a=$3; b=$4; sys.exit(0 if ($1) else 1)" && return 0
		sleep 0.1
	done
	fail "GPU parts at $(parts) bytes, waited for $1"
}
[ "$(parts)" = "$((32 << 20)) $((32 << 20))" ] || fail "parts not 32 MiB each at start: $(parts)"

scatter_writes 7 2000 "$dir/want" || fail "writes over NBD"

# 1. A request for GPU 1 (the emulated device's UUID ends in its ordinal).
uuid1=$(printf 'vramcache-emu\0\0\1' | od -An -tx1 | tr -d ' \n')
r=$(release_ask "$dir/r.sock" "RELEASE $((5 << 20)) $uuid1")
[ "$r" = "OK $((5 << 20))" ] || fail "release of 5 MiB on GPU 1 answered '$r'"
[ "$(parts)" = "$((32 << 20)) $((24 << 20))" ] || fail "after GPU 1's release: $(parts)"

# 2. Another program takes 120 MiB: 160 - 56 - 120 leaves nothing free. The
#    two GPUs share the emulated budget: GPU 0 gives all back first (32
#    MiB), then GPU 1 what is still missing.
echo $((120 << 20)) >"$dir/foreign"
wait_for "a < 32*2**20 and b < 24*2**20" 10
grep -q "below the watermark" "$dir/log" || fail "no watermark line in the log"

# 3. It exits: both parts grow back.
echo 0 >"$dir/foreign"
wait_for "a == 32*2**20 and b == 32*2**20" 30
grep -q "grown" "$dir/log" || fail "no grow line in the log"

# 4. Every byte.
reads_match "$dir/want" || fail "reads after the parts came back"
stop_server
