#!/usr/bin/env bash
# The runs of bench/results/2026-11-30-h200-issue14-final, one mode a call
# of the device tool (carried as .carry/run17.sh to run20.sh; their
# commands unchanged, gathered here):
#   final      (a-final, 7d1a44e's binaries) test_fp, test_logstore and
#              test_gpusize's dedup runs on cuda; dedup_moves, 8 calls of
#              2 reps; one with VC_LOCK_PROFILE=0.001
#   tests      (b-tests, dd2f98e) the tests that prefetch, on cuda, the
#              whole model, memcheck of test_prefetch
#   bench      (c-workers12) VC_PREFETCHERS 1 against 2, 5 calls each,
#              and one at 2 with VC_DD_PROF=1
#   workers42  (d-workers42) 4 against 2, 4 calls each
#   workers42b (e-workers42) 4 against 2, 2 calls each; at 4 one with
#              VC_LOCK_PROFILE=0.001, one with VC_DD_PROF=1
#   tests4     (f-tests4/before) the tests mode's tests at 4 workers
#   tests4b    (f-tests4/after, bins22: test_gpusize's fix) test_gpusize
#              whole, test_multigpu, test_aio
#   staging    (g-staging, bins23: 8a823f0) test_prefetch, and memcheck
#   last       (h-final-tests, bins24: cbc56be) test_prefetch, test_dedup,
#              test_engine_api, test_gpusize whole, the whole model and its
#              gpus runs; memcheck of test_prefetch
#   helper     (i-run-workers, bins25: 0d593b7) test_prefetch, test_gpusize
#              whole with VC_GPU_SHRINK_PROFILE=1
# Usage: bash run.sh MODE (binaries and liburing.so.2 beside it)
set -uo pipefail
cd "$(dirname "$0")"
m=${1:?mode}
if [ "$m" = tests4b ]; then
  python3 -c "import tarfile; tarfile.open('bins22.tar.xz').extractall('.')"
elif [ "$m" = staging ]; then
  python3 -c "import tarfile; tarfile.open('bins23.tar.xz').extractall('.')"
elif [ "$m" = helper ]; then
  python3 -c "import tarfile; tarfile.open('bins25.tar.xz').extractall('.')"
elif [ "$m" = last ]; then
  python3 -c "import tarfile; tarfile.open('bins24.tar.xz').extractall('.')"
elif [ "$m" = final ]; then
  [ -x test_fp ] || python3 -c "import tarfile; tarfile.open('bins17.tar.xz').extractall('.')"
  [ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins16.tar.xz').extractall('.')"
else
  [ -x test_prefetch ] || python3 -c "import tarfile; tarfile.open('bins18.tar.xz').extractall('.')"
fi
export LD_LIBRARY_PATH=$PWD
o=/tmp/o-$m; rm -rf $o; mkdir -p $o
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; (cd $o && tar czf $OUT/all.tgz *); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt; nproc >> $o/env.txt
mkdir -p /tmp/try/tests && ln -sfn $(cd .. && pwd)/tests/data /tmp/try/tests/data
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2 --prefetches 1"
case $m in
final)
  VC_TEST_DEVICE=cuda TMO=60 t test_fp ./test_fp; tail -n 1 $o/test_fp.log
  VC_TEST_DEVICE=cuda TMO=60 t test_logstore ./test_logstore; tail -n 1 $o/test_logstore.log
  VC_TEST_DEVICE=cuda VC_GPUSIZE_DEDUP_ONLY=1 TMO=120 t test_gpusize ./test_gpusize; tail -n 2 $o/test_gpusize.log
  for k in 1 2 3 4 5 6 7 8; do TMO=80 t F_$k ./dedup_moves $a --json $o/F_$k.json; done
  VC_LOCK_PROFILE=0.001 TMO=80 t lockprof ./dedup_moves $a --reps 1 --json $o/lockprof.json ;;
tests)
  export VC_TEST_DEVICE=cuda
  for x in test_prefetch test_engine_api test_volumes test_integrity test_encrypt test_dedup; do TMO=90 t $x ./$x; tail -n 1 $o/$x.log; done
  VC_GPUSIZE_DEDUP_ONLY=1 TMO=120 t test_gpusize ./test_gpusize; tail -n 1 $o/test_gpusize.log
  TMO=200 t model ./test_engine_model; tail -n 1 $o/model.log
  VC_TEST_OPS=150 VC_TEST_QUICK=1 TMO=120 t memcheck_prefetch compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 ./test_prefetch; grep -E "SUMMARY|check failed" $o/memcheck_prefetch.log | head -3 ;;
bench)
  for k in 1 2 3 4 5; do
    VC_PREFETCHERS=1 TMO=80 t P1_$k ./dedup_moves $a --json $o/P1_$k.json
    VC_PREFETCHERS=2 TMO=80 t P2_$k ./dedup_moves $a --json $o/P2_$k.json
  done
  VC_PREFETCHERS=2 VC_DD_PROF=1 TMO=80 t P2prof ./dedup_moves $a --reps 1 --json $o/P2prof.json ;;
workers42|workers42b)
  [ $m = workers42 ] && ks="1 2 3 4" || ks="5 6"
  for k in $ks; do
    VC_PREFETCHERS=4 TMO=80 t P4_$k ./dedup_moves $a --json $o/P4_$k.json
    VC_PREFETCHERS=2 TMO=80 t Q2_$k ./dedup_moves $a --json $o/Q2_$k.json
  done
  if [ $m = workers42b ]; then
    VC_PREFETCHERS=4 VC_LOCK_PROFILE=0.001 TMO=80 t P4lock ./dedup_moves $a --reps 1 --json $o/P4lock.json
    VC_PREFETCHERS=4 VC_DD_PROF=1 TMO=80 t P4prof ./dedup_moves $a --reps 1 --json $o/P4prof.json
  fi ;;
tests4)
  export VC_TEST_DEVICE=cuda VC_PREFETCHERS=4
  for x in test_engine_api test_volumes test_integrity test_encrypt test_dedup; do TMO=90 t $x ./$x; tail -n 1 $o/$x.log; done
  VC_GPUSIZE_DEDUP_ONLY=1 TMO=120 t test_gpusize ./test_gpusize; tail -n 1 $o/test_gpusize.log
  TMO=200 t model ./test_engine_model; tail -n 1 $o/model.log
  VC_MODEL_GPUS_ONLY=1 TMO=200 t model_gpus ./test_engine_model; tail -n 1 $o/model_gpus.log ;;
tests4b)
  export VC_TEST_DEVICE=cuda
  for x in test_gpusize test_multigpu test_aio; do TMO=150 t $x ./$x; tail -n 2 $o/$x.log; done ;;
staging)
  export VC_TEST_DEVICE=cuda
  TMO=90 t test_prefetch ./test_prefetch; tail -n 3 $o/test_prefetch.log
  TMO=200 t memcheck_prefetch compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 ./test_prefetch; grep -E "SUMMARY|check failed" $o/memcheck_prefetch.log | head -3 ;;
last)
  export VC_TEST_DEVICE=cuda
  for x in test_prefetch test_dedup test_engine_api test_gpusize; do TMO=120 t $x ./$x; tail -n 1 $o/$x.log; done
  TMO=200 t model ./test_engine_model; tail -n 1 $o/model.log
  VC_MODEL_GPUS_ONLY=1 TMO=200 t model_gpus ./test_engine_model; tail -n 1 $o/model_gpus.log
  TMO=200 t memcheck_prefetch compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 ./test_prefetch; grep -E "SUMMARY|check failed" $o/memcheck_prefetch.log | head -3 ;;
helper)
  export VC_TEST_DEVICE=cuda
  TMO=90 t test_prefetch ./test_prefetch; tail -n 1 $o/test_prefetch.log
  VC_GPU_SHRINK_PROFILE=1 TMO=150 t test_gpusize ./test_gpusize; grep -m2 "claim threads" $o/test_gpusize.log; tail -n 1 $o/test_gpusize.log ;;
*) echo "unknown mode $m" >&2; exit 2 ;;
esac
