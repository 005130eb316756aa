#!/usr/bin/env bash
# Issue 14, step 10: kept blocks (GRAM swap) and the direct trip's unique
# lookups under dd.mu alone. Tests on cuda and memcheck; dedup_moves
# 2 GiB, 2 reps, the step's code against VC_DD_KEEP=0 VC_DD_ALONE=0
# (step 9's behaviour), same binary, same session.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins12.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; tail -n 2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
t dedup ./test_dedup
VC_MODEL_DEDUP_ONLY=1 t model ./test_engine_model
VC_GPUSIZE_DEDUP_ONLY=1 t gpusize ./test_gpusize
VC_TEST_QUICK=1 t memcheck compute-sanitizer --tool memcheck ./test_dedup
grep -h 'ERROR SUMMARY' $o/memcheck.log | sort | uniq -c
a="--device cuda --file-mib 2048 --reps 2 --degrees 1 --json"
VC_DD_PROF=1 t moves ./dedup_moves $a $o/moves.json
grep -A10 '^data' $o/moves.log
VC_DD_KEEP=0 VC_DD_ALONE=0 VC_DD_PROF=1 t moves_s9 ./dedup_moves $a $o/moves_s9.json
grep -A10 '^data' $o/moves_s9.log
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
