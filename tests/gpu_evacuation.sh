#!/usr/bin/env bash
# Issue 12's scenario on a real GPU: `vramcache serve` (write-back) holds
# most of the device's memory while fio writes and verifies through NBD;
# PyTorch allocates a large tensor: without the shim it fails (out of
# memory), with libvramcache-shim.so it succeeds, the cache shrinks, fio's
# verification finds no error, and after PyTorch exits the tier grows back.
# Skips (77) without a GPU, PyTorch or fio's nbd engine.
# Usage: gpu_evacuation.sh VRAMCACHE_BINARY SHIM_SO
. "$(dirname "$0")/nbd_lib.sh"
shim=$2
torch_py=$(dirname "$0")/gpu/alloc_torch.py
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v nvidia-smi >/dev/null || skip "no nvidia-smi: no GPU here"
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || skip "no PyTorch with CUDA"
fio --enghelp=nbd >/dev/null 2>&1 || skip "fio has no nbd engine"
free_mib() { nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i 0 | tr -d ' '; }
gpu_bytes() { "$vc" stat "$sock" | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["cache"]["gpu_bytes"]))'; }
truncate -s 8G "$dir/disk.img"
before=$(free_mib)
tier=$((before - 3072))
"$vc" serve --device cuda --socket "$sock" --pidfile "$dir/pid" --write-back --host-bytes 256M \
	--gpu-bytes "${tier}M" --gpu-chunk-bytes 1G --release-socket "$dir/r.sock" --log "$dir/log" \
	"$dir/disk.img"
pid=$(cat "$dir/pid")
echo "GPU: $before MiB free before, tier $tier MiB, $(free_mib) MiB free now"
max=$(gpu_bytes)
fio --name=verify --ioengine=nbd --uri="nbd+unix:///?socket=$sock" --rw=randwrite --bs=4k \
	--size=6G --iodepth=16 --verify=crc32c --verify_backlog=4096 --verify_fatal=1 \
	--time_based --runtime=45 --output="$dir/fio.txt" &
fiopid=$!
sleep 5
ask=$(awk "BEGIN { print ($tier / 2) / 1024 }")
set +e
python3 "$torch_py" "$ask" >"$dir/alone.txt" 2>&1; rc=$?
set -e
echo "PyTorch alone, $ask GiB: $(head -1 "$dir/alone.txt") (exit $rc)"
[ $rc = 2 ] || fail "PyTorch without the shim: wanted out of memory"
LD_PRELOAD=$shim VRAMCACHE_RELEASE_SOCKET=$dir/r.sock VRAMCACHE_SHIM_DEBUG=1 \
	python3 "$torch_py" "$ask" 5 >"$dir/shim.txt" 2>&1 || { cat "$dir/shim.txt" "$dir/log"; fail "PyTorch with the shim"; }
grep -E "^OK|vramcache-shim" "$dir/shim.txt"
low=$(gpu_bytes)
echo "GPU tier after: $((low >> 20)) MiB of $((max >> 20)) MiB"
[ "$low" -lt "$max" ] || fail "the tier did not shrink"
for _ in $(seq 300); do [ "$(gpu_bytes)" = "$max" ] && break; sleep 0.1; done
echo "GPU tier after PyTorch exited: $(( $(gpu_bytes) >> 20 )) MiB"
[ "$(gpu_bytes)" = "$max" ] || fail "the tier did not grow back in 30 s"
wait $fiopid || { cat "$dir/fio.txt"; fail "fio verify failed"; }
grep -E "verify|err=|write:" "$dir/fio.txt" | head -5
grep -iE "asked back|grown" "$dir/log" | head -5
# SIGTERM flushes what fio left dirty (gigabytes, write-back): give it time.
kill -TERM "$pid"
for _ in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "serve did not exit in 120 s after SIGTERM"
pid=
