#!/usr/bin/env bash
# Issue 14, step 13: the known trip's lookups at the load (eng_dd_note_load
# notes the stored block and its generation; the first hold checks it)
# against VC_DD_LOAD_LOOK=0 (the lookups in the first hold), same binary,
# 2 reps a call, two calls each, interleaved; test_dedup on cuda first.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins38.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
VC_TEST_DEVICE=cuda TMO=100 t test_dedup ./test_dedup; tail -n 1 $o/test_dedup.log; grep -A1 "stale load" $o/test_dedup.log | tail -2
VC_TEST_DEVICE=cuda VC_MODEL_DEDUP_ONLY=1 TMO=100 t model ./test_engine_model; tail -n 1 $o/model.log
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2 --prefetches 1"
for k in 1 2; do
  TMO=80 t load_$k ./dedup_moves $a --json $o/load_$k.json
  VC_DD_LOAD_LOOK=0 TMO=80 t hold_$k ./dedup_moves $a --json $o/hold_$k.json
done
for f in load_1 load_2 hold_1 hold_2; do echo "== $f"; grep -A9 '^data' $o/$f.log | cut -c1-100 | sed -n '2,9p'; done
VC_DD_PROF=1 TMO=60 t prof ./dedup_moves --device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 1 --prefetches 1 --json $o/prof.json
grep -A9 "dedup trips (demote)" $o/prof.log | grep -v "trips        0" | sed -n '/plain/,/swap/p' | head -24
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
