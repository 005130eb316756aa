#!/usr/bin/env bash
# Issue 14, step 14: the known trip feeding the estimate while its compare
# runs (b: 5ba2f27) against 0ee8127 (a): the tests on cuda first
# (test_cmp, test_device, test_dedup, the model's dedup runs), then the
# moves bench a / b interleaved, 2 reps a call, 4 calls each; memcheck of
# test_dedup last.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dm_b ] || python3 -c "import tarfile; tarfile.open('bins49.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt; nproc >> $o/env.txt
VC_TEST_DEVICE=cuda VC_TEST_QUICK=1 TMO=60 t test_cmp ./test_cmp; tail -n 1 $o/test_cmp.log
VC_TEST_DEVICE=cuda TMO=60 t test_device ./test_device; tail -n 1 $o/test_device.log
VC_TEST_DEVICE=cuda TMO=60 t test_dedup ./test_dedup; tail -n 1 $o/test_dedup.log
VC_TEST_DEVICE=cuda VC_MODEL_DEDUP_ONLY=1 TMO=60 t model ./test_engine_model; tail -n 1 $o/model.log
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2 --prefetches 1"
for k in 1 2 3 4; do
  TMO=60 t a_$k ./dm_a $a --json $o/a_$k.json
  TMO=60 t b_$k ./dm_b $a --json $o/b_$k.json
done
VC_TEST_DEVICE=cuda VC_TEST_OPS=150 VC_TEST_QUICK=1 TMO=90 t memcheck_dedup compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 ./test_dedup; grep -E "SUMMARY|check failed" $o/memcheck_dedup.log | head -5
