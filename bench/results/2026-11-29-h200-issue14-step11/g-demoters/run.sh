#!/usr/bin/env bash
# Issue 14, step 11: demotions in flight, 8 against 4 (VC_DEMOTERS), main's
# engine (d0d1435), same binary, same session, 2 reps each, interleaved.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins20.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; tail -n 2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 1 --prefetches 1"
for k in 1 2; do
  VC_DEMOTERS=8 TMO=60 t d8_$k ./dedup_moves $a --json $o/d8_$k.json
  grep -A11 '^data' $o/d8_$k.log
  VC_DEMOTERS=4 TMO=60 t d4_$k ./dedup_moves $a --json $o/d4_$k.json
  grep -A11 '^data' $o/d4_$k.log
done
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
