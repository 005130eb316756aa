#!/usr/bin/env bash
# `vramcache serve --gpus`: the GPU tier over several (emulated) GPUs under
# a real client. Data written with nbdcopy reads back byte-exact after it
# has gone through both parts (a tier far smaller than the data); `vramcache
# stat` shows each part as JSON and as Prometheus text; a bad list, and
# --gpus with --dedup, stop the server at start with a message naming it.
# (4 MiB of data over a 1 MiB host tier and 8 MiB of GPU tier: the second
# read is GPU-tier hits.) Usage: nbd_gpus.sh VRAMCACHE_BINARY
. "$(dirname "$0")/nbd_lib.sh"
need nbdcopy libnbd-bin

# Refusals first: nothing starts, and the message says why.
if "$vc" serve --device emu --foreground --socket "$sock" --gpus 0,x "$dir/a.img" 2>"$dir/err"; then
	echo "--gpus 0,x started" >&2; exit 1
fi
grep -q 'gpus "0,x"' "$dir/err" || { echo "no reason for --gpus 0,x:" >&2; cat "$dir/err"; exit 1; }
truncate -s $((16 << 20)) "$dir/a.img"
if "$vc" serve --device emu --foreground --socket "$sock" --gpus 0,1 --dedup on "$dir/a.img" 2>"$dir/err"; then
	echo "--gpus with --dedup started" >&2; exit 1
fi
grep -q 'dedup' "$dir/err" || { echo "no reason for --gpus with --dedup:" >&2; cat "$dir/err"; exit 1; }

rm -f "$dir/a.img"
head -c $((4 << 20)) /dev/urandom >"$dir/src.img"
truncate -s $((4 << 20)) "$dir/a.img"
start_server --write-back --gpus 0,1 --host-bytes 1M --gpu-bytes 8M "$dir/a.img"
nbdcopy "$dir/src.img" "$uri"
nbdcopy "$uri" "$dir/back.img"
cmp "$dir/src.img" "$dir/back.img"
nbdcopy "$uri" - | cmp - "$dir/src.img" # once more: hits in both parts now

"$vc" stat "$sock" >"$dir/stat.json"
python3 - "$dir/stat.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
g = s["gpus"]
assert len(g) == 2 and s["cache"]["gpus"] == 2 and s["cache"]["gpus_failed"] == 0, s
for p in g:
    assert not p["failed"] and p["weight"] == 1 and p["pages_capacity"] > 0, p
    assert p["hits"] > 0 and p["h2d_bytes"] > 0 and p["d2h_bytes"] > 0, p
assert sum(p["pages_cached"] for p in g) == s["cache"]["pages_cached_gpu"], s
PY
"$vc" stat --prometheus "$sock" >"$dir/prom"
grep -q '^vramcache_gpu_hits_total{gpu="1",ordinal="1"} [1-9]' "$dir/prom" &&
	grep -q '^vramcache_gpus 2' "$dir/prom" ||
	{ echo "per-GPU Prometheus lines missing" >&2; grep gpu "$dir/prom" >&2; exit 1; }
stop_server
cmp "$dir/src.img" "$dir/a.img" # write-back: flushed at exit
