#!/usr/bin/env bash
# Issue 17 on the 2-GPU machine: topology, the multi-GPU tests on cuda (2
# GPUs; logical parts of one GPU; the failure runs in processes of their
# own), a single-GPU regression subset on GPU 1 meanwhile, compute-sanitizer
# memcheck of the multi-GPU paths, then bench/multigpu.sh.
set -uo pipefail
cd "$(dirname "$0")"
o=${OUT:-/tmp/out}/r
mkdir -p "$o"
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
{
	nvidia-smi topo -m; echo; nvidia-smi topo -p2p r; echo; nvidia-smi -L
	nvidia-smi --query-gpu=name,pci.bus_id,driver_version,pcie.link.gen.current,pcie.link.width.current,memory.total --format=csv
	lscpu | grep -iE 'numa|model name|^cpu\(s\)'; free -g | head -2; cat COMMIT
} > "$o/topo.txt" 2>&1
export VC_TEST_DEVICE=cuda MALLOC_PERTURB_=165 LD_LIBRARY_PATH=$PWD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
(
	for t in test_engine_api test_batcher test_aio test_encrypt test_integrity test_gpusize test_queue; do
		s=$(date +%s); CUDA_VISIBLE_DEVICES=1 timeout 200 ./$t > "$o/single-$t.log" 2>&1; echo "$t rc=$? $(( $(date +%s) - s ))s"
	done
	s=$(date +%s); CUDA_VISIBLE_DEVICES=1 VC_TEST_OPS=1500 timeout 300 ./test_engine_model > "$o/single-model.log" 2>&1; echo "test_engine_model (1 GPU, all runs, 1500 ops) rc=$? $(( $(date +%s) - s ))s"
) > "$o/single.txt" 2>&1 &
bg=$!
el "test_device"; timeout 120 ./test_device > "$o/device.log" 2>&1; echo "rc=$?"; tail -4 "$o/device.log"
el "test_multigpu"; timeout 120 ./test_multigpu > "$o/multigpu.log" 2>&1; echo "rc=$?"; tail -4 "$o/multigpu.log"
el "model, 2 GPUs (0,1 and 0,0,1)"; VC_MODEL_GPUS_ONLY=1 timeout 240 ./test_engine_model > "$o/model2.log" 2>&1; echo "rc=$?"; grep -E 'check failed|all runs|alone' "$o/model2.log" | tail -3
for wm in 1 0; do
	el "model, 2 GPUs, part 2 (GPU 1) faults, write mode $wm"; VC_MODEL_FAULT_ONLY=1 VC_MODEL_FAULT_WM=$wm timeout 100 ./test_engine_model > "$o/model2-fault$wm.log" 2>&1; echo "rc=$?"; grep -E 'parts|check failed|all runs' "$o/model2-fault$wm.log" | tail -3
done
el "model, one GPU cut in parts (CUDA_VISIBLE_DEVICES=0)"; CUDA_VISIBLE_DEVICES=0 VC_MODEL_GPUS_ONLY=1 VC_TEST_OPS=2000 timeout 150 ./test_engine_model > "$o/model1.log" 2>&1; echo "rc=$?"; grep -E 'check failed|all runs|left out' "$o/model1.log" | tail -3
el "memcheck: test_multigpu, model (2 GPUs, no fault, 300 ops)"
VC_TEST_NO_FAULT=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 ./test_multigpu > "$o/memcheck.log" 2>&1; echo "multigpu memcheck rc=$?"; tail -1 "$o/memcheck.log"
VC_TEST_NO_FAULT=1 VC_MODEL_GPUS_ONLY=1 VC_TEST_OPS=300 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 ./test_engine_model >> "$o/memcheck.log" 2>&1; echo "model memcheck rc=$?"; tail -1 "$o/memcheck.log"
el "waiting for the single-GPU runs"; wait $bg; cat "$o/single.txt"
el "tests done"
cd "$o/.." && tar czf "$OUT/tests.tgz" r && rm -rf r
