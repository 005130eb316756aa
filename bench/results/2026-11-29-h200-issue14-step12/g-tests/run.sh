#!/usr/bin/env bash
# Issue 14, step 12, main's final tree: test_dedup and the model's dedup
# runs on cuda, memcheck of test_dedup.
set -uo pipefail
cd "$(dirname "$0")"
[ -x test_dedup ] || python3 -c "import tarfile; tarfile.open('bins26.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
VC_TEST_DEVICE=cuda TMO=100 t test_dedup ./test_dedup; tail -n 1 $o/test_dedup.log; grep "stale" $o/test_dedup.log | tail -1
VC_TEST_DEVICE=cuda VC_MODEL_DEDUP_ONLY=1 TMO=100 t model ./test_engine_model; tail -n 1 $o/model.log; grep -c "indexed later [1-9]" $o/model.log
VC_TEST_DEVICE=cuda VC_TEST_OPS=150 VC_TEST_QUICK=1 TMO=150 t memcheck_dedup compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 ./test_dedup; grep -E "SUMMARY|match|check failed" $o/memcheck_dedup.log | head -5
cd $o && tar czf all.tgz *.log env.txt && rm -f *.log env.txt
