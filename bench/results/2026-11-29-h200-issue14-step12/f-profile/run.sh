#!/usr/bin/env bash
# Issue 14, step 12: where the trips' time goes now (6595c0f: the indexer
# and the bare first hold): the dedup trip's phases (VC_DD_PROF=1) and the
# engine lock by the function that ended each hold (VC_LOCK_PROFILE), 1
# rep each.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins25.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 1 --prefetches 1"
VC_DD_PROF=1 TMO=60 t prof ./dedup_moves $a --json $o/prof.json
VC_LOCK_PROFILE=0.001 TMO=60 t lock ./dedup_moves $a --json $o/lock.json
grep -A9 "dedup trips (demote)" $o/prof.log | grep -v "trips        0" | head -40
grep -B1 -A8 "engine lock, demote" $o/lock.log | head -80
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
