#!/usr/bin/env bash
# Issue 14, step 13, main at c1f3bde: more reps of f-final's comparison:
# the defaults against step 12's defaults (VC_DD_LATER=0 VC_FP_AVX512=0),
# same binary, 4 reps a call, final / step12 / final.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins44.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 4 --prefetches 1"
TMO=120 t final_3 ./dedup_moves $a --json $o/final_3.json
VC_DD_LATER=0 VC_FP_AVX512=0 TMO=120 t step12_2 ./dedup_moves $a --json $o/step12_2.json
TMO=120 t final_4 ./dedup_moves $a --json $o/final_4.json
for f in final_3 step12_2 final_4; do echo "== $f"; grep -A9 '^data' $o/$f.log | cut -c1-100 | sed -n '2,9p'; done
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
