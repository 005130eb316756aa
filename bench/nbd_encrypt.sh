#!/usr/bin/env bash
# NBD with the GPU tier encrypted against the same server plain (issue 13):
# fio's nbd engine over a Unix socket, the working set in the GPU tier
# (prefetched with NBD_CMD_CACHE, a 64 MiB host tier), 4 KiB randread at
# QD128 with 1 and 4 connections and 128 KiB sequential reads at QD32. Two
# servers run side by side, `serve` and `serve --encrypt` (each its own
# copy of the file), and the tests alternate between them, ROUNDS times,
# so that both see the same machine; the figure per test is the median.
# Goal: encrypted IOPS >= 0.95 x plain. A third server, `serve
# --integrity`, runs in the same rotation: its cost is reported beside,
# with no goal. Writes nbd_encrypt.json.
#
#   bench/nbd_encrypt.sh [--quick] VRAMCACHE_BINARY OUTDIR
#
# --quick: 256 MiB working set, 1 round of 3 s tests, the emulated device
# (this machine); else 1 GiB, 2 rounds of 8 s tests, the GPU (--device
# auto).
set -euo pipefail
. "$(dirname "$0")/nbd_lib.sh"
bench_start nbd_encrypt "fio python3" "$@"
if [ $quick = 1 ]; then
	size=256M dev=emu rounds=1
else
	size=1G dev=auto rounds=2 rt=8
fi
tests=("randread-4k-qd128-j1:--rw=randread --bs=4k --iodepth=128 --numjobs=1"
	"randread-4k-qd128-j4:--rw=randread --bs=4k --iodepth=128 --numjobs=4"
	"seqread-128k-j1:--rw=read --bs=128k --iodepth=32 --numjobs=1")
declare -A res
for v in plain xts mac; do
	head -c $(($(numfmt --from=iec $size))) /dev/urandom >"$dir/$v.img"
	enc=; [ $v = xts ] && enc=--encrypt; [ $v = mac ] && enc=--integrity
	"$vc" serve --device $dev --socket "$dir/$v.sock" --pidfile "$dir/$v.pid" --host-bytes 64M \
		--gpu-bytes 2G --stat-socket "$dir/$v.ctl" $enc "$dir/$v.img"
	pids+=("$(cat "$dir/$v.pid")")
	nbd_cache_all "$dir/$v.sock"
done
for r in $(seq $rounds); do
	for t in "${tests[@]}"; do
		n=${t%%:*}
		for v in plain xts mac; do
			res[$v:$n:$r]=$(fio_run "$v-$n-$r" "nbd+unix:///?socket=$dir/$v.sock" ${t#*:})
		done
	done
done
"$vc" stat "$dir/xts.ctl" >"$dir/xts-stat.json" 2>/dev/null || echo '{}' >"$dir/xts-stat.json"
"$vc" stat "$dir/plain.ctl" >"$dir/plain-stat.json" 2>/dev/null || echo '{}' >"$dir/plain-stat.json"
"$vc" stat "$dir/mac.ctl" >"$dir/mac-stat.json" 2>/dev/null || echo '{}' >"$dir/mac-stat.json"
{
	echo "{\"machine\": \"$(nproc) cores, $(uname -r)\", \"fio\": \"$(fio --version)\","
	echo " \"runtime_s\": $rt, \"rounds\": $rounds, \"size\": \"$size\", \"goal\": \"xts/plain IOPS >= 0.95\","
	echo " \"stat_plain\": $(cat "$dir/plain-stat.json"), \"stat_xts\": $(cat "$dir/xts-stat.json"),"
	echo " \"stat_mac\": $(cat "$dir/mac-stat.json"),"
	echo " \"tests\": {"
	first=1
	for t in "${tests[@]}"; do
		n=${t%%:*}
		[ $first = 1 ] || echo ","
		first=0
		p=; x=; m=
		for r in $(seq $rounds); do
			p+="${res[plain:$n:$r]%% *},"
			x+="${res[xts:$n:$r]%% *},"
			m+="${res[mac:$n:$r]%% *},"
		done
		printf '  "%s": {"plain_iops": [%s], "xts_iops": [%s], "mac_iops": [%s]}' "$n" "${p%,}" \
			"${x%,}" "${m%,}"
	done
	echo; echo "}}"
} >"$out/nbd_encrypt.json"
python3 - "$out/nbd_encrypt.json" <<'PY'
import json, statistics, sys
j = json.load(open(sys.argv[1]))
dev = j["stat_xts"].get("device", "?")
print("NBD, GPU-tier working set (%s on %s), encrypted against plain, %d round(s) of %s s, median IOPS"
      % (j["size"], dev, j["rounds"], j["runtime_s"]))
print("%-22s %12s %12s %8s %12s %8s" % ("test", "plain", "encrypted", "ratio", "+integrity",
                                        "ratio"))
worst = 9
for n, t in j["tests"].items():
    p, x = statistics.median(t["plain_iops"]), statistics.median(t["xts_iops"])
    m = statistics.median(t["mac_iops"])
    t["plain_median"], t["xts_median"], t["ratio"] = p, x, x / max(p, 1)
    t["mac_median"], t["mac_ratio"] = m, m / max(p, 1)
    worst = min(worst, t["ratio"])
    print("%-22s %12.0f %12.0f %7.3fx %12.0f %7.3fx" % (n, p, x, t["ratio"], m, t["mac_ratio"]))
j["worst_ratio"], j["met"] = worst, worst >= 0.95
print("goal encrypted >= 0.95 x plain: %s (worst %.3f)" % ("met" if j["met"] else "NOT met", worst))
json.dump(j, open(sys.argv[1], "w"), indent=1)
PY
