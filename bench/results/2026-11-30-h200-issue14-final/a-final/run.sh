#!/usr/bin/env bash
# Issue 14, the final table at 7d1a44e's defaults (8 demotion batches in
# flight, the known trip's lookups under dd.mu alone): the remaining dedup
# tests on cuda (test_fp, test_logstore, test_gpusize's dedup runs), then
# dedup_moves with 1 s swaps, 8 calls of 2 reps, then one call with
# VC_LOCK_PROFILE=0.001 (the engine lock's holds by function, each phase).
# Results tarred after each step. Usage: bash run17.sh
set -uo pipefail
cd "$(dirname "$0")"
[ -x test_fp ] || python3 -c "import tarfile; tarfile.open('bins17.tar.xz').extractall('.')"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins16.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=/tmp/o17; rm -rf $o; mkdir -p $o
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; (cd $o && tar czf $OUT/all.tgz *); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt; nproc >> $o/env.txt
mkdir -p /tmp/try/tests && ln -sfn $(cd .. && pwd)/tests/data /tmp/try/tests/data
VC_TEST_DEVICE=cuda TMO=60 t test_fp ./test_fp; tail -n 1 $o/test_fp.log
VC_TEST_DEVICE=cuda TMO=60 t test_logstore ./test_logstore; tail -n 1 $o/test_logstore.log
VC_TEST_DEVICE=cuda VC_GPUSIZE_DEDUP_ONLY=1 TMO=120 t test_gpusize ./test_gpusize; tail -n 2 $o/test_gpusize.log
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2 --prefetches 1"
for k in 1 2 3 4 5 6 7 8; do TMO=80 t F_$k ./dedup_moves $a --json $o/F_$k.json; done
VC_LOCK_PROFILE=0.001 TMO=80 t lockprof ./dedup_moves $a --reps 1 --json $o/lockprof.json
