#!/usr/bin/env bash
# Issue 14, step 11 final: the first hold without dd.mu and the direct
# trip's unique lookups under dd.mu alone (fb0bf5e = main's engine, the
# demoter threads undone after), against both off (VC_DD_FIRST=0
# VC_DD_ALONE=0: step 10's trip), same binary, same session, 4 reps each,
# interleaved by rep pairs. test_dedup on cuda.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins18.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; tail -n 2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
t dedup ./test_dedup
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2 --prefetches 3"
for k in 1 2; do
  TMO=100 t new$k ./dedup_moves $a --json $o/new$k.json
  grep -A11 '^data' $o/new$k.log
  VC_DD_FIRST=0 VC_DD_ALONE=0 TMO=100 t old$k ./dedup_moves $a --json $o/old$k.json
  grep -A11 '^data' $o/old$k.log
done
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
