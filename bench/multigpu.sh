#!/usr/bin/env bash
# The multi-GPU issue's benchmarks, for one short run on a machine with two
# GPUs: the topology, then bench/multigpu (scattered 4 KiB batch moves on
# each GPU alone and on both at once, against the bulk-copy limit, and GPU
# to GPU), then bench/scaling's GPU-tier hits over one GPU (--gpus 0) and
# two (--gpus 0,1). Goal: all/single >= 1.8 for two GPUs where each has its
# own PCIe link (topo.txt says whether they do).
#
#   bench/multigpu.sh RESULTS_DIR
#
# From the repository root, with a CUDA build in ${BUILD:-build}. Writes
# into RESULTS_DIR: topo.txt and gpus.txt (nvidia-smi), then a .log (all
# the output) and a .json per benchmark: multigpu, scaling-gpus0,
# scaling-gpus01. Every step runs under a time limit, and a failed step
# does not stop the next; the exit status is 1 if any failed.
#
# Time: about 3 minutes. multigpu ~45 s (3 configurations x 2 directions x
# 5 repetitions of 1 s, peer, the data check). Each scaling run ~50 s: an
# 8 GiB file written and read into the OS page cache, the tier warmed
# (vc_prefetch and one pass of reads), 5 thread counts x 2 sizes x (ours,
# pread) x 0.5 s, and the asynchronous points (24 x 0.5 s). Sizes: host
# tier 1 GiB, GPU tier 16 GiB in all (8 GiB a GPU with --gpus 0,1),
# working set 8 GiB: it does not fit the host tier, so 7 in 8 reads are
# GPU-tier hits (scaling.c, case gpu), spread over both GPUs by the
# engine's placement; a larger working set mostly adds set-up time.
set -uo pipefail

out=${1:?usage: bench/multigpu.sh RESULTS_DIR}
b=${BUILD:-build}
for x in multigpu scaling; do
	[ -x "$b/$x" ] || { echo "multigpu.sh: no $b/$x (a CUDA build: BUILD=dir)" >&2; exit 2; }
done
mkdir -p "$out"
failed=0

# step NAME LIMIT_S CMD...: CMD's output to the terminal and NAME.log.
step() {
	local name=$1 limit=$2
	shift 2
	echo "== $name: $*" | tee "$out/$name.log"
	# Line-buffered, so that a step stopped at its limit leaves its output.
	timeout --kill-after=10 "$limit" stdbuf -oL -eL "$@" 2>&1 | tee -a "$out/$name.log"
	local rc=${PIPESTATUS[0]}
	if [ "$rc" != 0 ]; then
		echo "== $name: exit status $rc" | tee -a "$out/$name.log"
		failed=1
	fi
}

{
	echo "# nvidia-smi topo -m"
	nvidia-smi topo -m
	echo
	echo "# nvidia-smi topo -p2p r (P2P reads)"
	nvidia-smi topo -p2p r
	echo
	echo "# NUMA"
	lscpu | grep -i numa
} >"$out/topo.txt" 2>&1
{
	echo "# nvidia-smi -L"
	nvidia-smi -L
	echo
	echo "# PCIe links"
	nvidia-smi --query-gpu=name,pci.bus_id,pcie.link.gen.current,pcie.link.width.current \
		--format=csv
	echo
	echo "# tree: $(git rev-parse HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | wc -l) changed files"
} >"$out/gpus.txt" 2>&1
cat "$out/topo.txt" "$out/gpus.txt"

step multigpu 150 "$b/multigpu" --device cuda --seconds 1 --reps 5 --json "$out/multigpu.json"

sc=(--device cuda --cases gpu --threads 1,4,8,16,32 --seconds 0.5 --host-bytes 1G
	--gpu-bytes 16G --ws-bytes 8G)
step scaling-gpus0 120 "$b/scaling" "${sc[@]}" --gpus 0 --json "$out/scaling-gpus0.json"
step scaling-gpus01 120 "$b/scaling" "${sc[@]}" --gpus 0,1 --json "$out/scaling-gpus01.json"

echo "multigpu.sh: results in $out$([ $failed = 0 ] || echo '; some steps FAILED (see the logs)')"
exit $failed
