# Sourced by the NBD benchmarks (bench/nbd_fio.sh, bench/nbd_tls.sh). The
# functions below use their $dir (scratch), $size, $rt (seconds per test),
# the tests array ("NAME:FIO-ARGS"), the res associative array and the pids
# array (servers to kill on exit).

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

# bench_start NAME "TOOL..." ARGS...: parses [--quick] VRAMCACHE_BINARY
# OUTDIR (sets quick, vc, out, rt), checks the tools are there, and makes
# $dir, removed on exit with the servers in pids killed.
bench_start() {
	local name=$1 tools=$2; shift 2
	case "${1:-}" in -h | --help) usage; exit 0 ;; esac
	quick=0
	if [ "${1:-}" = --quick ]; then quick=1; shift; fi
	[ $# = 2 ] || { usage >&2; exit 2; }
	vc=$(realpath "$1")
	out=$2
	mkdir -p "$out"
	for c in $tools; do
		command -v $c >/dev/null || { echo "$name: $c not found" >&2; exit 1; }
	done
	rt=$([ $quick = 1 ] && echo 3 || echo 15)
	dir=$(mktemp -d "${TMPDIR:-/tmp}/vc-$name-XXXXXX")
	pids=()
	trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"' EXIT
}

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
	# Wait for it to go: a server still shutting down when the next one
	# starts would unlink the next one's pidfile (same path) on its way out.
	local p=${pids[-1]}
	kill "$p"; unset 'pids[-1]'
	for _ in $(seq 400); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
}

bench_json_head() { # FIELDS: the result file's first lines, FIELDS ("k": v, ...) included
	echo "{\"machine\": \"$(nproc) cores, $(uname -r)\", \"fio\": \"$(fio --version)\","
	echo " \"nbdkit\": \"$(nbdkit --version | head -1)\", $1\"runtime_s\": $rt, \"tests\": {"
}

# run_nbdkit URI-SCHEME NBDKIT-ARGS...: `nbdkit memory $size` on $dir/k.sock
# (NBDKIT_MEMORY: the plugin's .so where nbdkit has no plugin directory),
# then run_tests nk over it.
run_nbdkit() {
	local scheme=$1; shift
	nbdkit --exit-with-parent -U "$dir/k.sock" -P "$dir/k.pid" "$@" "${NBDKIT_MEMORY:-memory}" \
		$size &
	wait_sock "$dir/k.sock"
	pids+=("$(cat "$dir/k.pid")")
	run_tests nk "$scheme:///?socket=$dir/k.sock" write
}

# nbd_cache_all SOCK: sends NBD_CMD_CACHE over the whole export of the
# server on Unix socket SOCK, 64 MiB a request, one at a time (the working
# set into the GPU tier where there is one). A raw client: nbdsh may be
# missing where binaries were carried.
nbd_cache_all() {
	python3 - "$1" <<'PY'
import socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
def rd(k):
    b = b""
    while len(b) < k:
        d = s.recv(k - len(b)); assert d; b += d
    return b
assert rd(18)[:16] == b"NBDMAGICIHAVEOPT"
s.sendall(struct.pack(">IQII", 3, 0x49484156454F5054, 1, 0))  # NO_ZEROES, EXPORT_NAME ""
size = struct.unpack(">QH", rd(10))[0]
for n, off in enumerate(range(0, size, 64 << 20)):
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 5, n, off, min(64 << 20, size - off)))
    magic, err, _ = struct.unpack(">IIQ", rd(16)); assert magic == 0x67446698 and err == 0, err
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 2, 0, 0, 0))  # DISC
PY
}
