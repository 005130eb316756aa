#!/usr/bin/env bash
# Issue 14, step 13 (90e1e96: evict_tail keeps promised room, the indexer
# on by default): the tests on cuda, memcheck of test_dedup, then the moves
# bench with the new default against VC_DD_LATER=0, same binary, 4 reps a
# call, interleaved by call.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins36.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
VC_TEST_DEVICE=cuda TMO=60 t test_logstore ./test_logstore; tail -n 1 $o/test_logstore.log
VC_TEST_DEVICE=cuda TMO=100 t test_dedup ./test_dedup; tail -n 1 $o/test_dedup.log
VC_TEST_DEVICE=cuda VC_GPUSIZE_DEDUP_ONLY=1 TMO=120 t test_gpusize ./test_gpusize; tail -n 2 $o/test_gpusize.log
VC_TEST_DEVICE=cuda VC_MODEL_DEDUP_ONLY=1 TMO=100 t model ./test_engine_model; tail -n 1 $o/model.log; grep -c "indexed later [1-9]" $o/model.log
VC_TEST_DEVICE=cuda VC_TEST_OPS=150 VC_TEST_QUICK=1 TMO=150 t memcheck_dedup compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 ./test_dedup; grep -E "SUMMARY|match|check failed" $o/memcheck_dedup.log | head -5
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2 --prefetches 1"
for k in 1 2; do
  TMO=80 t final_$k ./dedup_moves $a --json $o/final_$k.json
  VC_DD_LATER=0 TMO=80 t inline_$k ./dedup_moves $a --json $o/inline_$k.json
done
for f in final_1 final_2 inline_1 inline_2; do echo "== $f"; grep -A9 '^data' $o/$f.log | cut -c1-100 | sed -n '2,9p'; done
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
