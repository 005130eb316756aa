#!/usr/bin/env bash
# Issue 14, step 12: the indexer (dedup_later.c) against the direct trip's
# own lookup hold (VC_DD_LATER=0), same binary, 4 reps each, interleaved;
# then test_dedup and the dedup model runs on cuda, and memcheck.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins23.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 1 --prefetches 1"
for k in 1 2 3 4; do
  VC_DD_LATER=1 TMO=60 t later_$k ./dedup_moves $a --json $o/later_$k.json
  VC_DD_LATER=0 TMO=60 t inline_$k ./dedup_moves $a --json $o/inline_$k.json
done
for f in later inline; do for k in 1 2 3 4; do echo "== $f $k"; grep -A9 '^data' $o/${f}_$k.log | cut -c1-100 | sed -n '2,9p'; done; done
VC_TEST_DEVICE=cuda TMO=100 t test_dedup ./test_dedup; tail -n 2 $o/test_dedup.log; grep "stale\|later 1" $o/test_dedup.log | head -4
VC_TEST_DEVICE=cuda VC_MODEL_DEDUP_ONLY=1 TMO=100 t model ./test_engine_model; tail -n 2 $o/model.log; grep -c "indexed later [1-9]" $o/model.log
VC_TEST_DEVICE=cuda VC_TEST_OPS=150 VC_TEST_QUICK=1 TMO=150 t memcheck_dedup compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 ./test_dedup; grep -E "SUMMARY|match|check failed" $o/memcheck_dedup.log | head -5
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
