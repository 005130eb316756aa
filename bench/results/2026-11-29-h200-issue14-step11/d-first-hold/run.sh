#!/usr/bin/env bash
# Issue 14, step 11: a trip's first hold without dd.mu where its pages'
# notes allow, and the direct trip's unique lookups under dd.mu alone
# (fb0bf5e), against both off (VC_DD_FIRST=0 VC_DD_ALONE=0: step 10's
# trip), same binary, same session. Tests on cuda, memcheck of test_dedup.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins18.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; tail -n 2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
t dedup ./test_dedup
VC_MODEL_DEDUP_ONLY=1 TMO=120 t model ./test_engine_model
VC_GPUSIZE_DEDUP_ONLY=1 TMO=120 t gpusize ./test_gpusize
VC_TEST_QUICK=1 TMO=150 t memcheck compute-sanitizer --tool memcheck ./test_dedup
grep -h "ERROR SUMMARY" $o/memcheck.log | sort | uniq -c
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 3"
VC_DD_PROF=1 TMO=150 t moves ./dedup_moves $a --json $o/moves.json
grep -A11 '^data' $o/moves.log
VC_DD_FIRST=0 VC_DD_ALONE=0 VC_DD_PROF=1 TMO=150 t moves_old ./dedup_moves $a --json $o/moves_old.json
grep -A11 '^data' $o/moves_old.log
VC_LOCK_PROFILE=0.001 TMO=90 t lock ./dedup_moves --device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 1 --prefetches 1 --json $o/lock.json
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
