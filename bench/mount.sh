#!/usr/bin/env bash
# `vramcache mount` against SRC read directly and against the same build's
# FUSE passthrough (--passthrough: the cost of FUSE alone), with fio.
#
#   bench/mount.sh [--quick] VRAMCACHE_BINARY OUTDIR [DEVICE]
#
# SRC is a directory of 4 files (FILE_SIZE each, 4 GiB by default: 16 GiB,
# larger than the host tier of HOST_BYTES = 4G but inside host + GPU tiers
# of GPU_BYTES = 24G). Tests, each over all 4 files with one job per file:
# seqread (1 MiB, psync) and randread (4 KiB, psync, 8 jobs... 2 per file),
# for: src-cold (SRC after drop_caches, O_DIRECT), src-warm (SRC, OS page cache warm),
# passthrough (FUSE, no cache; page cache warm under it), and mount (warm:
# a full read first, so the pages are in the host and GPU tiers). Also the
# CPU time per GB read (the daemon's user+sys from /proc, for the FUSE
# columns). DEVICE: cuda (default) or emu. Prints a table and writes
# OUTDIR/mount.json. Goals (issue 16): >= 5 GB/s seqread from the GPU tier
# through one mount; randread latency within 2x of passthrough's.
set -euo pipefail
quick=0
[ "${1:-}" = --quick ] && { quick=1; shift; }
vc=$1 out=$2 dev=${3:-cuda}
mkdir -p "$out"
fsz=${FILE_SIZE:-$([ $quick = 1 ] && echo 256M || echo 4G)}
host=${HOST_BYTES:-$([ $quick = 1 ] && echo 256M || echo 4G)}
gpu=${GPU_BYTES:-$([ $quick = 1 ] && echo 1G || echo 24G)}
rt=${RUNTIME:-$([ $quick = 1 ] && echo 5 || echo 20)}
. "$(dirname "$0")/mount_lib.sh"
files="$src/f0:$src/f1:$src/f2:$src/f3"
# run NAME DIR: both tests over DIR's files; appends JSON lines.
run() {
	local name=$1 d=$2 t0 t1
	local fl="$d/f0:$d/f1:$d/f2:$d/f3"
	for test in seqread randread; do
		[ "$name" = src-cold ] && { sync; echo 3 >/proc/sys/vm/drop_caches; }
		local bs=1M jobs=4 rw=read
		[ $test = randread ] && { bs=4k; jobs=8; rw=randread; }
		[ -n "$pid" ] && t0=$(cpu_ticks "$pid")
		# O_DIRECT everywhere but src-warm: through FUSE it sends every read to
		# the daemon (our tiers, or passthrough's pread), where buffered reads
		# would be served by the kernel's page cache after the first touch
		# (measured: 1.6 us p50 4 KiB reads on both mounts); src-cold reads
		# the disk; src-warm is the OS page cache itself.
		local direct=1
		[ "$name" = src-warm ] && direct=0
		fio --name=$test --filename="$fl" --rw=$rw --bs=$bs --ioengine=psync --numjobs=$jobs \
			--direct=$direct \
			--group_reporting --time_based --runtime="$rt" --size="$fsz" \
			--output-format=json --output="$dir/$name-$test.json"
		local cpu=null
		[ -n "$pid" ] && { t1=$(cpu_ticks "$pid"); cpu=$(( (t1 - t0) )); }
		python3 - "$dir/$name-$test.json" "$name" "$test" "$cpu" "$(getconf CLK_TCK)" \
			>>"$out/mount.jsonl" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]["read"]
ticks, hz = sys.argv[4], int(sys.argv[5])
gb = j["io_bytes"] / 1e9
cpu = None if ticks == "null" else int(ticks) / hz / gb if gb else None
print(json.dumps({"config": sys.argv[2], "test": sys.argv[3], "GBps": j["bw_bytes"] / 1e9,
                  "iops": j["iops"], "lat_p50_us": j["clat_ns"]["percentile"]["50.000000"] / 1e3,
                  "lat_p99_us": j["clat_ns"]["percentile"]["99.000000"] / 1e3,
                  "daemon_cpu_s_per_GB": cpu}))
PY
	done
}
: >"$out/mount.jsonl"
run src-cold "$src"
cat "$src"/f* >/dev/null
run src-warm "$src"
mnt_up --passthrough
cat "$mnt"/f* >/dev/null
run passthrough "$mnt"
mnt_down
# MOUNT_ARGS: more options for the cached mount (e.g. --readahead 0).
mnt_up --host-bytes "$host" --gpu-bytes "$gpu" ${MOUNT_ARGS:-}
cat "$mnt"/f* >/dev/null
cat "$mnt"/f* >/dev/null
run mount "$mnt"
"$vc" stat "$mnt" >"$out/mount-stat.json"
mnt_down
python3 - "$out/mount.jsonl" "$out/mount.json" "$dev" "$fsz" "$host" "$gpu" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("%-12s %-9s %9s %10s %9s %9s %12s" % ("config", "test", "GB/s", "IOPS", "p50 us", "p99 us",
                                              "cpu s/GB"))
for r in rows:
    print("%-12s %-9s %9.2f %10.0f %9.1f %9.1f %12s" % (r["config"], r["test"], r["GBps"], r["iops"],
          r["lat_p50_us"], r["lat_p99_us"], "-" if r["daemon_cpu_s_per_GB"] is None
          else "%.3f" % r["daemon_cpu_s_per_GB"]))
json.dump({"device": sys.argv[3], "file_size": sys.argv[4], "files": 4, "host_bytes": sys.argv[5],
           "gpu_bytes": sys.argv[6], "baseline": "SRC direct and --passthrough of the same build",
           "rows": rows}, open(sys.argv[2], "w"), indent=1)
PY
