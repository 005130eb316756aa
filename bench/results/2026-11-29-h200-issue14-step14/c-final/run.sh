#!/usr/bin/env bash
# Issue 14, step 14, final tree: the tests on cuda (test_mutex with the
# default spin, test_logstore, test_dedup, test_gpusize's dedup runs, the
# model's dedup runs; memcheck of test_dedup), then the moves bench with
# the default (the engine's spin, 100 us on this machine) against
# VC_MU_SPIN_US=0, 2 reps a call, interleaved twice.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins47.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt; nproc >> $o/env.txt
TMO=60 t test_mutex ./test_mutex
VC_TEST_DEVICE=cuda TMO=60 t test_logstore ./test_logstore; tail -n 1 $o/test_logstore.log
VC_TEST_DEVICE=cuda TMO=100 t test_dedup ./test_dedup; tail -n 1 $o/test_dedup.log
VC_TEST_DEVICE=cuda VC_GPUSIZE_DEDUP_ONLY=1 TMO=120 t test_gpusize ./test_gpusize; tail -n 2 $o/test_gpusize.log
VC_TEST_DEVICE=cuda VC_MODEL_DEDUP_ONLY=1 TMO=100 t model ./test_engine_model; tail -n 1 $o/model.log
VC_TEST_DEVICE=cuda VC_TEST_OPS=150 VC_TEST_QUICK=1 TMO=150 t memcheck_dedup compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 ./test_dedup; grep -E "SUMMARY|check failed" $o/memcheck_dedup.log | head -5
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2 --prefetches 1"
for k in 1 2; do
  TMO=80 t spin_$k ./dedup_moves $a --json $o/spin_$k.json
  VC_MU_SPIN_US=0 TMO=80 t nospin_$k ./dedup_moves $a --json $o/nospin_$k.json
done
for f in spin_1 nospin_1; do echo "== $f"; grep -A9 '^data' $o/$f.log | cut -c1-100 | sed -n '2,9p'; done
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
