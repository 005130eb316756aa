#!/usr/bin/env bash
# After the review's refactor (8350459): test_device (P2P, fault: CUDA code
# moved to peer.c), test_multigpu, the model's multi-GPU runs, test_aio on
# one GPU; then compute-sanitizer memcheck and racecheck over test_device
# (the new kernel: the fault's trap).
set -uo pipefail
cd "$(dirname "$0")"
python3 -c "import tarfile; tarfile.open('bins4.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PWD MALLOC_PERTURB_=165
o=$OUT
t() { local n=$1; shift; s=$(date +%s); timeout 150 "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - s ))s"; tail -2 $o/$n.log; }
t device ./test_device
t multigpu ./test_multigpu
VC_MODEL_GPUS_ONLY=1 t model2 ./test_engine_model
CUDA_VISIBLE_DEVICES=1 t aio ./test_aio
t racecheck compute-sanitizer --tool racecheck ./test_device
t memcheck compute-sanitizer --tool memcheck ./test_device
grep -E 'RACECHECK SUMMARY|hazard|ERROR SUMMARY|Program hit|trap|Warp Illegal|Unspecified' $o/racecheck.log $o/memcheck.log | sort | uniq -c | head -20
