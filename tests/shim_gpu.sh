#!/usr/bin/env bash
# Giving GPU memory back (issue 12), on a real GPU: `vramcache serve` takes
# most of device 0's free memory for its GPU tier, then each client asks
# for more than is left, first alone (it must fail: out of memory), then
# with libvramcache-shim.so preloaded (it must succeed: the shim asked the
# cache over --release-socket, the cache gave memory back, the retry got
# it). A fresh server for each client, so each starts from a full cache.
#   1. gpu_alloc_runtime         cudaMalloc, libcudart.so (runtime hooks)
#   2. gpu_alloc_runtime_static  cudaMalloc, cudart_static (driver hooks via dlsym)
#   3. gpu_alloc_driver          cuMemAlloc from cudaGetDriverEntryPointByVersion
#   4. tests/gpu/alloc_torch.py  torch.empty on cuda:0 (skipped without PyTorch)
# Then, with the shim and VRAMCACHE_SHIM_DEBUG=1, the line it prints; and
# no shim effect without a server (a stopped one: the client just fails).
# With --gpu-keep-free in `serve --help`: a client that fits under the
# watermark needs no shim.
# Skips (77) without nvidia-smi or a usable GPU, and while `serve` has no
# --release-socket (the lead's half of issue 12).
# Usage: shim_gpu.sh VRAMCACHE_BINARY SHIM_SO GPU_CLIENT_DIR
. "$(dirname "$0")/nbd_lib.sh"
shim=$2 bin=$3
torch_py=$(dirname "$0")/gpu/alloc_torch.py
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v nvidia-smi >/dev/null || skip "no nvidia-smi: no GPU here"
nvidia-smi -L >/dev/null 2>&1 || skip "nvidia-smi sees no GPU"
"$vc" serve --help | grep -q -- --release-socket || skip "vramcache serve has no --release-socket yet"
[ -f "$shim" ] || fail "no shim at $shim"
for p in gpu_alloc_runtime gpu_alloc_runtime_static gpu_alloc_driver; do
	[ -x "$bin/$p" ] || fail "no $bin/$p"
done

# CUDA and nvidia-smi number devices alike only in PCI order.
export CUDA_DEVICE_ORDER=PCI_BUS_ID
gpu=${CUDA_VISIBLE_DEVICES:-0}
gpu=${gpu%%,*}
case $gpu in '' | *[!0-9]*) gpu=0 ;; esac
free_mib() { nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i "$gpu" | tr -d ' '; }
truncate -s 1G "$dir/disk.img"
rsock=$dir/r.sock
# With the sanitizers, a preloaded library comes before their runtime.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0

# Starts the server with a GPU tier of all but HEADROOM MiB of the free
# memory, and returns once the tier holds it (nvidia-smi's free memory
# drops). Sets $ask: the client's size, MiB, more than what is left.
headroom=3072
start_cache() {
	local before tier
	before=$(free_mib)
	tier=$((before - headroom))
	[ "$tier" -gt 4096 ] || skip "only $before MiB free on GPU $gpu"
	"$vc" serve --device cuda --foreground --gpu-bytes "${tier}M" --host-bytes 64M \
		--socket "$sock" --release-socket "$rsock" "$@" "$dir/disk.img" >>"$dir/serve.log" 2>&1 &
	pid=$!
	local ready=
	for _ in $(seq 600); do
		if [ -S "$rsock" ] && [ $(($(free_mib) + 1024)) -lt $((before - tier / 2)) ]; then
			ready=1
			break
		fi
		kill -0 "$pid" 2>/dev/null || { cat "$dir/serve.log" >&2; fail "serve exited"; }
		sleep 0.1
	done
	[ -S "$rsock" ] || fail "serve made no release socket in 60 s"
	[ -n "$ready" ] || fail "the GPU tier did not take its memory in 60 s ($(free_mib) MiB free)"
	ask=$((headroom + tier / 4))
	echo "GPU $gpu: $before MiB free, tier ${tier} MiB, now $(free_mib) MiB free; clients ask ${ask} MiB"
}

stop_cache() {
	kill -TERM "$pid"
	for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && fail "serve did not exit on SIGTERM"
	wait "$pid" 2>/dev/null || true
	pid=
}

# run NAME EXPECT CMD...: EXPECT is OK or OOM (the first word printed).
run() {
	local name=$1 want=$2 out rc
	shift 2
	set +e
	out=$("$@" 2>>"$dir/client.log")
	rc=$?
	set -e
	[ "$rc" = 77 ] && { echo "  $name: skipped ($(tail -1 "$dir/client.log"))"; return 0; }
	echo "  $name: $out"
	case "$want:$out" in
	OK:OK\ * | OOM:OOM\ *) ;;
	*) cat "$dir/client.log" "$dir/serve.log" >&2; fail "$name: wanted $want, got '$out' (exit $rc)" ;;
	esac
}

with_shim() {
	LD_PRELOAD=$shim VRAMCACHE_RELEASE_SOCKET=$rsock VRAMCACHE_SHIM_DEBUG=1 "$@"
}

clients=(runtime runtime_static driver torch)
client_cmd() {
	case $1 in
	torch) echo python3 "$torch_py" "$(awk "BEGIN { print $ask / 1024 }")" ;;
	*) echo "$bin/gpu_alloc_$1" "${ask}M" ;;
	esac
}

for c in "${clients[@]}"; do
	echo "== $c"
	start_cache
	read -r -a cmd <<<"$(client_cmd "$c")"
	"$vc" stat "$sock" >"$dir/stat.before" 2>/dev/null || true
	run "$c alone" OOM "${cmd[@]}"
	: >"$dir/client.log"
	run "$c with the shim" OK with_shim "${cmd[@]}"
	if ! grep -q "^SKIP" "$dir/client.log"; then
		grep -E "^vramcache-shim: .* out of memory; asked $rsock for [0-9]+ B on [0-9a-f]{32}: released [1-9][0-9]* B; retry succeeded$" \
			"$dir/client.log" >"$dir/lines" || { cat "$dir/client.log" >&2; fail "$c: no debug line of a release"; }
		[ "$(wc -l <"$dir/lines")" = 1 ] || { cat "$dir/lines" >&2; fail "$c: more than one release asked"; }
		cat "$dir/lines"
	fi
	"$vc" stat "$sock" >"$dir/stat.after" 2>/dev/null || true
	diff "$dir/stat.before" "$dir/stat.after" | grep -i -E "gpu|release" | head -8 || true
	stop_cache
done

# No server: the shim changes nothing, says why, and the client fails.
echo "== no server"
start_cache
stop_cache
: >"$dir/client.log"
run "runtime with the shim, no server" OK "$bin/gpu_alloc_runtime" 64M
big=$(($(free_mib) + 1024))
run "runtime ${big} MiB, shim, no server" OOM with_shim "$bin/gpu_alloc_runtime" "${big}M"
grep -q "out of memory; asked $rsock .*: $rsock: No such file or directory" "$dir/client.log" ||
	grep -q "out of memory; asked $rsock .*Connection refused" "$dir/client.log" ||
	{ cat "$dir/client.log" >&2; fail "no debug line saying the cache is not there"; }

# The watermark: the cache keeps that much free for others, shim or not.
if "$vc" serve --help | grep -q -- --gpu-keep-free; then
	echo "== --gpu-keep-free"
	headroom=1024
	start_cache --gpu-keep-free 6G
	run "runtime 4 GiB under a 6 GiB watermark" OK "$bin/gpu_alloc_runtime" 4G
	stop_cache
fi
echo "shim on GPU $gpu: ok"
