#!/usr/bin/env bash
# NBD benchmarks with fio's nbd engine (issue 4).
#
#   bench/nbd_fio.sh [--quick] VRAMCACHE_BINARY OUTDIR
#
# 1. Side by side with `nbdkit memory` (the baseline), both over a Unix
#    socket on this machine: 4 KiB randread and randwrite at QD32 with 1 and
#    2 jobs, 4 KiB randread at QD128 with 1 and 4 jobs (a job is a
#    connection), and 128 KiB sequential reads at QD32. vramcache serves a
#    file whose pages all sit in the host tier (warmed first), write-through,
#    so reads are cache hits and writes reach the file (the page cache)
#    before their reply; nbdkit serves RAM. The QD128 reads run a second
#    time against a server whose working set sits in the GPU tier (a 64 MiB
#    host tier; CUDA where a GPU is usable, else emulated), prefetched with
#    NBD_CMD_CACHE; its column says what share of the pages read came from
#    the GPU tier. Prints a table; writes nbd_fio.json with IOPS, bandwidth
#    and the ratio vramcache / nbdkit per test.
# 2. The cache's benefit over a slow store: the backing file with 100 us
#    injected per I/O, 4 KiB randread QD32 over working sets from below the
#    host tier to past host+GPU, host tier alone vs host+GPU (emulated here,
#    CUDA where a GPU is usable). Hit ratio from `vramcache stat` over the
#    measured run (after a warm-up run). Writes nbd_cache.json.
# NBDKIT_MEMORY names the memory plugin's .so where nbdkit is not installed
# with its plugin directory (binaries carried to the GPU machine).
set -euo pipefail
. "$(dirname "$0")/nbd_lib.sh"
bench_start nbd_fio "fio nbdkit python3" "$@"
size=1G
sock=$dir/s.sock

tests=("randread-4k-j1:--rw=randread --bs=4k --iodepth=32 --numjobs=1"
	"randread-4k-j2:--rw=randread --bs=4k --iodepth=32 --numjobs=2"
	"randwrite-4k-j1:--rw=randwrite --bs=4k --iodepth=32 --numjobs=1"
	"randwrite-4k-j2:--rw=randwrite --bs=4k --iodepth=32 --numjobs=2"
	"randread-4k-qd128-j1:--rw=randread --bs=4k --iodepth=128 --numjobs=1"
	"randread-4k-qd128-j4:--rw=randread --bs=4k --iodepth=128 --numjobs=4"
	"seqread-128k-j1:--rw=read --bs=128k --iodepth=32 --numjobs=1")
# Also run with the working set in the GPU tier.
gtests=(randread-4k-qd128-j1 randread-4k-qd128-j4)

# --- 1. vramcache vs nbdkit memory ---------------------------------------
declare -A res
truncate -s $size "$dir/disk.img"
head -c $((1 << 30)) /dev/urandom >"$dir/disk.img"
"$vc" serve --device emu --socket "$sock" --pidfile "$dir/vc.pid" --host-bytes 1200M \
	--gpu-bytes 0 "$dir/disk.img"
pids+=("$(cat "$dir/vc.pid")")
uri="nbd+unix:///?socket=$sock"
run_tests vc "$uri" read

# The GPU tier: 64 MiB of host tier, the whole file prefetched into the GPU
# tier (CACHE goes to the GPU tier when there is one), 64 MiB a request.
"$vc" serve --device auto --socket "$sock" --pidfile "$dir/vc.pid" --host-bytes 64M \
	--gpu-bytes 1200M "$dir/disk.img"
pids+=("$(cat "$dir/vc.pid")")
nbd_cache_all "$sock"
for n in "${gtests[@]}"; do
	"$vc" stat "$sock" >"$dir/g0.json"
	for t in "${tests[@]}"; do [ "${t%%:*}" = "$n" ] && args=${t#*:}; done
	res[vg:$n]=$(fio_run "vg-$n" "$uri" $args)
	"$vc" stat "$sock" >"$dir/g1.json"
	res[vgs:$n]=$(python3 - "$dir/g0.json" "$dir/g1.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
d = {k: b["cache"][k] - a["cache"][k] for k in ("hits_host", "hits_gpu", "misses")}
print("%.3f %s" % (d["hits_gpu"] / max(sum(d.values()), 1), b["device"]))
PY
)
done
kill "${pids[-1]}"; unset 'pids[-1]'
sleep 0.3

run_nbdkit nbd+unix

{
	bench_json_head ""
	first=1
	for t in "${tests[@]}"; do
		n=${t%%:*}
		read -r vi vb <<<"${res[vc:$n]}"
		read -r ki kb <<<"${res[nk:$n]}"
		[ $first = 1 ] || echo ","
		first=0
		gpu=
		if [ -n "${res[vg:$n]:-}" ]; then
			read -r gi gb <<<"${res[vg:$n]}"
			read -r gs gd <<<"${res[vgs:$n]}"
			gpu=$(printf ', "vramcache_gpu_iops": %s, "vramcache_gpu_bw": %s, "gpu_hit_share": %s, "gpu_device": "%s", "gpu_ratio": %.3f' \
				"$gi" "$gb" "$gs" "$gd" "$(python3 -c "print($gi / max($ki, 1))")")
		fi
		printf '  "%s": {"vramcache_iops": %s, "vramcache_bw": %s, "nbdkit_iops": %s, "nbdkit_bw": %s, "ratio": %.3f%s}' \
			"$n" "$vi" "$vb" "$ki" "$kb" "$(python3 -c "print($vi / max($ki, 1))")" "$gpu"
	done
	echo; echo "}}"
} >"$out/nbd_fio.json"
python3 - "$out/nbd_fio.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print("NBD over a Unix socket, fio nbd engine, %s s per test (%s)" % (j["runtime_s"], j["machine"]))
print("vramcache: working set in the host tier; GPU tier: in the GPU tier (share of pages from it)")
print("%-21s %14s %8s %14s %8s %14s" % ("test", "vramcache", "ratio", "GPU tier", "ratio",
                                        "nbdkit memory"))
for n, t in j["tests"].items():
    unit = lambda i, b: ("%.0f MiB/s" % (b / 2**20)) if "128k" in n else ("%.1fk IOPS" % (i / 1000))
    g, gr = "", ""
    if "vramcache_gpu_iops" in t:
        g = "%s %3.0f%%" % (unit(t["vramcache_gpu_iops"], t["vramcache_gpu_bw"]), 100 * t["gpu_hit_share"])
        gr = "%7.2fx" % t["gpu_ratio"]
    print("%-21s %14s %7.2fx %14s %8s %14s" % (n, unit(t["vramcache_iops"], t["vramcache_bw"]), t["ratio"],
                                             g, gr, unit(t["nbdkit_iops"], t["nbdkit_bw"])))
PY
[ "${NBD_BENCH_SKIP_CACHE:-0}" = 1 ] && exit 0

# --- 2. cache benefit over a slow store ----------------------------------
host=64M; gpu=256M
sets=(32M 128M 256M 512M)
[ $quick = 1 ] && sets=(32M 256M)
echo
echo "Cache benefit: backing store with 100 us per I/O, 4 KiB randread QD32, host tier $host, GPU tier $gpu"
printf '%-8s %-10s %10s %10s\n' "working" "tiers" "hit ratio" "IOPS"
json="["
for ws in "${sets[@]}"; do
	for g in 0 $gpu; do
		"$vc" serve --device auto --socket "$sock" --pidfile "$dir/vc.pid" --host-bytes $host \
			--gpu-bytes $g --backing-latency 100us "$dir/disk.img"
		pids+=("$(cat "$dir/vc.pid")")
		fio_run "cw-$ws-$g" "$uri" --rw=randread --bs=4k --iodepth=32 --size=$ws >/dev/null # warm-up
		"$vc" stat "$sock" >"$dir/s0.json"
		read -r iops _ <<<"$(fio_run "c-$ws-$g" "$uri" --rw=randread --bs=4k --iodepth=32 --size=$ws)"
		"$vc" stat "$sock" >"$dir/s1.json"
		dev=$(python3 -c "import json; print(json.load(open('$dir/s1.json'))['device'])")
		kill "${pids[-1]}"; unset 'pids[-1]'
		sleep 0.3
		hr=$(python3 - "$dir/s0.json" "$dir/s1.json" <<'PY'
import json, sys
a, b = (json.load(open(f))["cache"] for f in sys.argv[1:])
h = b["hits_host"] + b["hits_gpu"] - a["hits_host"] - a["hits_gpu"]
m = b["misses"] - a["misses"]
print("%.3f" % (h / max(h + m, 1)))
PY
)
		tiers=$([ $g = 0 ] && echo host || echo "host+$dev")
		printf '%-8s %-10s %10s %10s\n' "$ws" "$tiers" "$hr" "$iops"
		json+="{\"working_set\": \"$ws\", \"tiers\": \"$tiers\", \"hit_ratio\": $hr, \"iops\": $iops},"
	done
done
echo "${json%,}]" >"$out/nbd_cache.json"
