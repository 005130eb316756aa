#!/usr/bin/env bash
# Issue 14, step 10 final: tests on cuda and memcheck; dedup_moves 2 GiB,
# 4 reps, 2 s swaps, the trips' phases (VC_DD_PROF=1).
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins15.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; tail -n 2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
t dedup ./test_dedup
VC_MODEL_DEDUP_ONLY=1 t model ./test_engine_model
VC_GPUSIZE_DEDUP_ONLY=1 t gpusize ./test_gpusize
VC_TEST_QUICK=1 t memcheck compute-sanitizer --tool memcheck ./test_dedup
grep -h 'ERROR SUMMARY' $o/memcheck.log | sort | uniq -c
VC_DD_PROF=1 TMO=400 t moves ./dedup_moves --device cuda --file-mib 2048 --degrees 1 --seconds 2 --reps 4 --json $o/moves.json
grep -A10 '^data' $o/moves.log
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
