#!/usr/bin/env bash
# The kernel's page cache in front of `vramcache mount` (issue 16: keep_cache
# and writeback_cache chosen by measurement). Buffered I/O through the
# mount, each setting off and on; the tiers are warm for the reads, so what
# differs is whether the kernel's page cache answers before the daemon.
#
#   bench/mount_kcache.sh VRAMCACHE_BINARY OUTDIR [DEVICE]
#
# Reads (4 files of FILE_SIZE, 256M by default, host tier HOST_BYTES 2G so
# every page is a host-tier hit): mounted with and without --kernel-cache,
# the files read twice with cat (the tiers warm; with --kernel-cache the
# kernel's page cache too), then
#   seqread: PASSES passes of cat over the 4 files, each a new open (the
#            question: does the page cache survive the open), GB/s of the
#            passes after the first;
#   randread: fio 4 KiB psync buffered random reads, 2 jobs, each a new
#            open reading a quarter of the files (few repeats inside one
#            open; invalidate=0: fio's own fadvise would drop the page
#            cache before it starts), latency p50/p99;
# and the page cache the mount's files hold afterwards (what unmounting
# frees, from /proc/meminfo: approximate on a shared machine): the memory
# the kernel's copy costs besides the host tier.
# Writes (one file of WRITE_SIZE, 256M, fresh each run): fio buffered
# sequential writes of 1 MiB and of 4 KiB, psync, with the close's flush
# and an fsync inside the timing (end_fsync), with and without
# --kernel-writeback, write-through and write-back: GB/s, write(2)
# latency p50/p99, and CPU seconds per GB of the daemon and of the writer
# (fio's own user+sys: with the kernel's cache the copy into it is the
# writer's).
# DEVICE: emu (default) or cuda. Prints a table and writes
# OUTDIR/kcache.json; baseline: the same build with each setting off.
set -euo pipefail
vc=$1 out=$2 dev=${3:-emu}
mkdir -p "$out"
fsz=${FILE_SIZE:-256M} wsz=${WRITE_SIZE:-256M} host=${HOST_BYTES:-2G}
passes=${PASSES:-4}
. "$(dirname "$0")/mount_lib.sh"
hz=$(getconf CLK_TCK)
: >"$out/kcache.jsonl"
# row JSON: one line of results.
row() { echo "$1" >>"$out/kcache.jsonl"; }
# fio_row CONFIG TEST FIOJSON DIR T0 (daemon ticks before): a row from fio.
fio_row() {
	local t1
	t1=$(cpu_ticks "$pid")
	python3 - "$3" "$1" "$2" "$(( t1 - $5 ))" "$hz" "$4" <<'PY' >>"$out/kcache.jsonl"
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
d = sys.argv[6]
io = j[d]
gb = io["io_bytes"] / 1e9
rt = j["job_runtime"] / 1e3
print(json.dumps({"config": sys.argv[2], "test": sys.argv[3], "GBps": io["bw_bytes"] / 1e9,
                  "iops": io["iops"], "lat_p50_us": io["clat_ns"]["percentile"]["50.000000"] / 1e3,
                  "lat_p99_us": io["clat_ns"]["percentile"]["99.000000"] / 1e3,
                  "daemon_cpu_s_per_GB": int(sys.argv[4]) / int(sys.argv[5]) / gb,
                  "app_cpu_s_per_GB": (j["usr_cpu"] + j["sys_cpu"]) / 100 * rt / gb}))
PY
}

# --- reads: keep_cache off and on ---
for cfg in default kernel-cache; do
	args=()
	[ $cfg = kernel-cache ] && args=(--kernel-cache)
	mnt_up --host-bytes "$host" --gpu-bytes 0 "${args[@]}"
	cat "$mnt"/f* >/dev/null
	cat "$mnt"/f* >/dev/null
	t0=$(cpu_ticks "$pid")
	s0=$(date +%s.%N)
	for p in $(seq 2 "$passes"); do cat "$mnt"/f* >/dev/null; done
	s1=$(date +%s.%N)
	t1=$(cpu_ticks "$pid")
	bytes=$(( $(stat -c %s "$src"/f* | paste -sd+ | bc) * (passes - 1) ))
	row "$(python3 -c "import json,sys; b,s,t,hz=int(sys.argv[1]),float(sys.argv[2]),int(sys.argv[3]),int(sys.argv[4]); print(json.dumps({'config': sys.argv[5], 'test': 'seqread-cat', 'GBps': b/1e9/s, 'daemon_cpu_s_per_GB': t/hz/(b/1e9)}))" \
		"$bytes" "$(echo "$s1 - $s0" | bc)" "$(( t1 - t0 ))" "$hz" "$cfg")"
	t0=$(cpu_ticks "$pid")
	fio --name=randread --filename="$mnt/f0:$mnt/f1:$mnt/f2:$mnt/f3" --rw=randread --bs=4k \
		--ioengine=psync --numjobs=2 --group_reporting --size="$fsz" --invalidate=0 \
		--io_size=$(( $(stat -c %s "$src/f0") )) --output-format=json \
		--output="$dir/r.json"
	fio_row "$cfg" randread "$dir/r.json" read "$t0"
	# The page cache the mount's files hold: what unmounting frees (not
	# fincore, whose own open would drop it without --kernel-cache).
	c0=$(awk '/^Cached:/ {print $2}' /proc/meminfo)
	mnt_down
	c1=$(awk '/^Cached:/ {print $2}' /proc/meminfo)
	row "{\"config\": \"$cfg\", \"test\": \"page-cache\", \"bytes\": $(( (c0 - c1) * 1024 )), \"files_bytes\": $(stat -c %s "$src"/f* | paste -sd+ | bc)}"
done

# --- writes: writeback_cache off and on ---
for mode in write-through write-back; do
	for cfg in default kernel-writeback; do
		args=()
		[ $mode = write-back ] && args+=(--write-back)
		[ $cfg = kernel-writeback ] && args+=(--kernel-writeback)
		mnt_up --host-bytes "$host" --gpu-bytes 0 "${args[@]}"
		for bs in 1M 4k; do
			rm -f "$mnt/w"
			t0=$(cpu_ticks "$pid")
			fio --name=write --filename="$mnt/w" --rw=write --bs=$bs --ioengine=psync \
				--size="$wsz" --end_fsync=1 --output-format=json --output="$dir/w.json"
			fio_row "$mode/$cfg" "write-$bs" "$dir/w.json" write "$t0"
		done
		mnt_down
	done
done
python3 - "$out/kcache.jsonl" "$out/kcache.json" "$dev" "$fsz" "$wsz" "$host" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("%-32s %-12s %8s %9s %8s %8s %10s %10s" % ("config", "test", "GB/s", "IOPS", "p50 us",
      "p99 us", "dmn s/GB", "app s/GB"))
f = lambda r, k, fmt: "-" if r.get(k) is None else fmt % r[k]
for r in rows:
    if r["test"] == "page-cache":
        print("%-32s %-12s %s of %s MiB in the kernel's page cache" % (r["config"], r["test"],
              r["bytes"] >> 20, r["files_bytes"] >> 20))
        continue
    print("%-32s %-12s %8s %9s %8s %8s %10s %10s" % (r["config"], r["test"], f(r, "GBps", "%.2f"),
          f(r, "iops", "%.0f"), f(r, "lat_p50_us", "%.1f"), f(r, "lat_p99_us", "%.1f"),
          f(r, "daemon_cpu_s_per_GB", "%.3f"), f(r, "app_cpu_s_per_GB", "%.3f")))
json.dump({"device": sys.argv[3], "read_files": 4, "file_size": sys.argv[4],
           "write_size": sys.argv[5], "host_bytes": sys.argv[6],
           "baseline": "the same build with keep_cache / writeback_cache off", "rows": rows},
          open(sys.argv[2], "w"), indent=1)
PY
