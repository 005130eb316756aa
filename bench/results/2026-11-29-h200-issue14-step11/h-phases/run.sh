#!/usr/bin/env bash
# Issue 14, step 11: the dedup trip's phases (VC_DD_PROF) at 8 demotions in
# flight against 4, main's engine (d0d1435), 1 rep each.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins20.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; tail -n 2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 1 --prefetches 1"
VC_DEMOTERS=8 VC_DD_PROF=1 TMO=60 t prof8 ./dedup_moves $a --json $o/prof8.json
VC_DEMOTERS=4 VC_DD_PROF=1 TMO=60 t prof4 ./dedup_moves $a --json $o/prof4.json
for f in prof8 prof4; do echo "== $f"; grep -A5 "dedup trips (demote)" $o/$f.log | head -24; grep "rep 1" $o/$f.log; done
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
