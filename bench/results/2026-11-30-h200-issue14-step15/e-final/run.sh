#!/usr/bin/env bash
# Issue 14, step 15 at the new defaults (8 demotion batches in flight, the
# known trip's lookups under dd.mu alone): the dedup tests on cuda, two
# dedup_moves calls, read scaling's miss case at VC_DEMOTERS=4 against the
# default 8, and memcheck of test_dedup. Results tarred after each step.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins16.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=/tmp/o16; rm -rf $o; mkdir -p $o
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; (cd $o && tar czf $OUT/all.tgz *); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt; nproc >> $o/env.txt
mkdir -p /tmp/try/tests && ln -sfn $(cd .. && pwd)/tests/data /tmp/try/tests/data
VC_TEST_DEVICE=cuda TMO=60 t test_dedup ./test_dedup; tail -n 1 $o/test_dedup.log
VC_TEST_DEVICE=cuda VC_MODEL_DEDUP_ONLY=1 TMO=60 t model ./test_engine_model; tail -n 1 $o/model.log
VC_TEST_DEVICE=cuda VC_MODEL_GPUS_ONLY=1 TMO=60 t model_gpus ./test_engine_model; tail -n 1 $o/model_gpus.log
a="--device cuda --file-mib 1024 --degrees 1 --seconds 0.1 --reps 4 --prefetches 1"
for k in 1 2; do TMO=60 t N_$k ./dedup_moves $a --json $o/N_$k.json; done
s="--device cuda --cases miss --seconds 0.3 --latencies 0,20"
TMO=60 t scal_d8 ./scaling $s --json $o/scal_d8.json
VC_DEMOTERS=4 TMO=60 t scal_d4 ./scaling $s --json $o/scal_d4.json
VC_TEST_DEVICE=cuda VC_TEST_OPS=150 VC_TEST_QUICK=1 TMO=120 t memcheck_dedup compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 ./test_dedup; grep -E "SUMMARY|check failed" $o/memcheck_dedup.log | head -5
