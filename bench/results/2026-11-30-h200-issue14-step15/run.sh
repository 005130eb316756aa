#!/usr/bin/env bash
# Issue 14, step 15 on the GPU machine: one binary, four configurations of
# the plain demote column interleaved (A default, B VC_DD_EARLY=1,
# C VC_DD_DEMOTERS=6, D both), 3 rounds of 4 reps each; swap shortened to
# 0.1 s (only the demote column is in question). grid1 ran first; grid
# then ran A, D, E (EARLY=1, 8 batches) and G (D with dedup off at 6
# batches too: VC_DEMOTERS=6).
# grid2: H (both at 8 batches, EARLY=1), K (both at 8), J (both at 6),
# then the dedup tests on cuda at two of those settings.
# Usage: bash run15.sh grid1|grid|grid2|tests
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins15.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=/tmp/o15; rm -rf $o; mkdir -p $o
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt; nproc >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 0.1 --reps 4 --prefetches 1"
if [ "$1" = grid2tests ]; then
  :
elif [ "$1" = grid ]; then
  for k in 1 2 3; do
    TMO=80 t A_$k ./dedup_moves $a --json $o/A_$k.json
    VC_DD_EARLY=1 VC_DD_DEMOTERS=6 TMO=80 t D_$k ./dedup_moves $a --json $o/D_$k.json
    VC_DD_EARLY=1 VC_DD_DEMOTERS=8 TMO=80 t E_$k ./dedup_moves $a --json $o/E_$k.json
    VC_DEMOTERS=6 VC_DD_EARLY=1 TMO=80 t G_$k ./dedup_moves $a --json $o/G_$k.json
  done
elif [ "$1" = grid1 ]; then
  for k in 1 2 3; do
    TMO=80 t A_$k ./dedup_moves $a --json $o/A_$k.json
    VC_DD_EARLY=1 TMO=80 t B_$k ./dedup_moves $a --json $o/B_$k.json
    VC_DD_DEMOTERS=6 TMO=80 t C_$k ./dedup_moves $a --json $o/C_$k.json
    VC_DD_EARLY=1 VC_DD_DEMOTERS=6 TMO=80 t D_$k ./dedup_moves $a --json $o/D_$k.json
  done
  VC_DD_PROF=1 TMO=80 t Aprof ./dedup_moves $a --reps 2 --json $o/Aprof.json
  VC_DD_EARLY=1 VC_DD_PROF=1 TMO=80 t Bprof ./dedup_moves $a --reps 2 --json $o/Bprof.json
elif [ "$1" = grid2 ]; then
  for k in 1 2 3; do
    VC_DEMOTERS=8 VC_DD_EARLY=1 TMO=80 t H_$k ./dedup_moves $a --json $o/H_$k.json
    VC_DEMOTERS=8 TMO=80 t K_$k ./dedup_moves $a --json $o/K_$k.json
    VC_DEMOTERS=6 TMO=80 t J_$k ./dedup_moves $a --json $o/J_$k.json
  done
fi
if [ "$1" = grid2 ] || [ "$1" = grid2tests ]; then
  mkdir -p /tmp/try/tests && ln -sfn $(cd .. && pwd)/tests/data /tmp/try/tests/data
  for nv in "d8e:VC_DEMOTERS=8 VC_DD_EARLY=1" "d6:VC_DEMOTERS=6"; do n=${nv%%:*}; v=${nv#*:}
    (export $v; VC_TEST_DEVICE=cuda TMO=90 t test_dedup_$n ./test_dedup); tail -n 1 $o/test_dedup_$n.log
    (export $v; VC_TEST_DEVICE=cuda VC_MODEL_DEDUP_ONLY=1 TMO=90 t model_$n ./test_engine_model); tail -n 1 $o/model_$n.log
  done
elif [ "$1" = tests ]; then
  mkdir -p /tmp/try/tests && ln -sfn $(cd .. && pwd)/tests/data /tmp/try/tests/data
  VC_TEST_DEVICE=cuda TMO=90 t test_dedup ./test_dedup; tail -n 1 $o/test_dedup.log
  VC_TEST_DEVICE=cuda VC_MODEL_DEDUP_ONLY=1 TMO=90 t model ./test_engine_model; tail -n 1 $o/model.log
  VC_TEST_DEVICE=cuda VC_DD_EARLY=1 VC_MODEL_DEDUP_ONLY=1 TMO=90 t model_early ./test_engine_model; tail -n 1 $o/model_early.log
  VC_TEST_DEVICE=cuda VC_MODEL_GPUS_ONLY=1 TMO=90 t model_gpus ./test_engine_model; tail -n 1 $o/model_gpus.log
  VC_TEST_DEVICE=cuda VC_TEST_OPS=150 VC_TEST_QUICK=1 TMO=150 t memcheck_dedup compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 ./test_dedup; grep -E "SUMMARY|check failed" $o/memcheck_dedup.log | head -5
fi
cd $o && tar czf $OUT/all.tgz *.log *.json env.txt 2>/dev/null; ls $o | wc -l
