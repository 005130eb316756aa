# Sourced by the NBD benchmarks (bench/nbd_fio.sh, bench/nbd_tls.sh). Uses
# their $dir (scratch), $size, $rt (seconds per test), the tests array
# ("NAME:FIO-ARGS"), the res associative array and the pids array.

fio_run() { # NAME URI FIO-ARGS... -> prints "iops bw_bytes"
	local name=$1 uri=$2; shift 2
	fio --name="$name" --ioengine=nbd --uri="$uri" --size=$size --time_based --runtime="$rt" \
		--group_reporting --output-format=json "$@" >"$dir/$name.json" 2>"$dir/$name.err" ||
		{ cat "$dir/$name.err" >&2; exit 1; }
	python3 - "$dir/$name.json" <<'PY'
import json, sys
t = open(sys.argv[1]).read()
j = json.loads(t[t.index("{"):])["jobs"][0]  # the nbd engine prints a line first
r, w = j["read"], j["write"]
print("%.0f %.0f" % (r["iops"] + w["iops"], r["bw_bytes"] + w["bw_bytes"]))
PY
}

wait_sock() { for _ in $(seq 200); do [ -S "$1" ] && return 0; sleep 0.05; done; return 1; }

run_tests() { # KEY URI WARM-RW: warm up (every page cached, or allocated), run all, stop
	fio_run "$1-warm" "$2" --rw="$3" --bs=1m --iodepth=4 --time_based=0 >/dev/null
	for t in "${tests[@]}"; do
		res[$1:${t%%:*}]=$(fio_run "$1-${t%%:*}" "$2" ${t#*:})
	done
	kill "${pids[-1]}"; unset 'pids[-1]'
}
