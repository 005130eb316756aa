#!/usr/bin/env bash
# The NBD server's throughput while the GPU tier gives memory back
# (issue 12): fio 4 KiB randread (QD32, 2 connections) over a working set
# that sits in the GPU tier; a third of the way in, a program asks over
# --release-socket for half of the tier; the tier grows back by itself
# after the hold-off (5 s). Prints IOPS per half second and the means
# before, during (the second after the request) and after, and writes
# nbd_shrink.json.
#
#   bench/nbd_shrink.sh [--quick] VRAMCACHE_BINARY OUTDIR
#
# --quick: 256 MiB working set on the emulated device (this machine);
# else 8 GiB in a 16 GiB tier on the GPU (its UUID from nvidia-smi).
set -euo pipefail
. "$(dirname "$0")/nbd_lib.sh"
bench_start nbd_shrink "fio python3" "$@"
if [ $quick = 1 ]; then
	dev=emu ws=256M tier=512M chunk=32M uuid=$(printf 'vramcache-emu\0\0\0' | od -An -tx1 | tr -d ' \n')
	secs=12
else
	dev=cuda ws=8G tier=16G chunk=256M secs=24
	uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | sed 's/^GPU-//; s/-//g')
fi
sock=$dir/s.sock
truncate -s "$ws" "$dir/disk.img"
"$vc" serve --device $dev --socket "$sock" --pidfile "$dir/pid" --host-bytes 64M --gpu-bytes $tier \
	--gpu-chunk-bytes $chunk --release-socket "$dir/r.sock" --log "$dir/log" "$dir/disk.img"
pids+=("$(cat "$dir/pid")")
# The working set into the GPU tier.
nbd_cache_all "$sock"
stat_gpu() { "$vc" stat "$sock" | python3 -c 'import json,sys; c=json.load(sys.stdin)["cache"]; print(int(c["gpu_bytes"]), c["gpu_shrink_last_seconds"])'; }
read -r before _ <<<"$(stat_gpu)"
half=$(python3 -c "print($before // 2)")
fio --name=r --ioengine=nbd --uri="nbd+unix:///?socket=$sock" --rw=randread --bs=4k --iodepth=32 \
	--numjobs=2 --size="$ws" --time_based --runtime=$secs --group_reporting \
	--write_iops_log="$dir/iops" --log_avg_msec=500 >"$dir/fio.txt" 2>&1 &
fiopid=$!
sleep $((secs / 3))
t_req=$(date +%s.%N)
reply=$(python3 - "$dir/r.sock" "RELEASE $half $uuid" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode() + b"\n")
print(s.makefile().readline().strip())
PY
)
t_rep=$(date +%s.%N)
read -r during shrink_s <<<"$(stat_gpu)"
wait $fiopid
read -r after _ <<<"$(stat_gpu)"
python3 - "$dir" "$secs" "$before" "$during" "$after" "$reply" "$shrink_s" "$t_req" "$t_rep" "$out/nbd_shrink.json" <<'PY'
import glob, json, sys
d, secs, before, during, after, reply, shrink_s, t_req, t_rep, out = sys.argv[1:]
secs = int(secs)
# fio's per-job IOPS logs: msec, value, ...; sum the jobs per interval.
per = {}
for f in glob.glob(d + "/iops_iops.*.log"):
    for line in open(f):
        ms, v = (int(x) for x in line.split(",")[:2])
        per[ms] = per.get(ms, 0) + v
xs = sorted(per.items())
req_ms = secs / 3 * 1000
def mean(lo, hi):
    v = [v for ms, v in xs if lo < ms <= hi]
    return sum(v) / len(v) if v else 0
res = {"tier_before": int(before), "tier_after_request": int(during), "tier_end": int(after),
       "reply": reply, "shrink_s": float(shrink_s), "request_to_reply_s": float(t_rep) - float(t_req),
       "iops_before": mean(0, req_ms), "iops_during": mean(req_ms, req_ms + 1000),
       "iops_after": mean(req_ms + 1000, secs * 1000), "series": xs}
json.dump(res, open(out, "w"), indent=1)
print("GPU tier %d MiB; asked for half: %s in %.1f ms (shrink %.1f ms); tier %d MiB, at the end %d MiB"
      % (int(before) >> 20, reply, res["request_to_reply_s"] * 1e3, res["shrink_s"] * 1e3,
         int(during) >> 20, int(after) >> 20))
print("4 KiB randread QD32 x2, IOPS: before %.0f, the second after the request %.0f (%.2fx), after %.0f"
      % (res["iops_before"], res["iops_during"], res["iops_during"] / max(res["iops_before"], 1),
         res["iops_after"]))
print("per half second:", " ".join("%.0fk" % (v / 1000) for _, v in xs))
PY
