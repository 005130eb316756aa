#!/usr/bin/env bash
# Issue 14, step 13: the known trip's first hold split (measurement binary
# at 0ca529a plus marks, not committed). For the factor-4 known trips the
# phases print as: "placement of the rest" = prefetches and the wait for
# dd.mu; "fingerprints read" = classify(); "lookup" = known_lookup();
# "begin" = known_append() and the unlock. Then the engine lock by holds.
set -uo pipefail
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 1 --prefetches 1"
VC_DD_PROF=1 TMO=60 t prof ./dedup_moves_hold $a --json $o/prof.json
grep -A9 "dedup trips (demote)" $o/prof.log | grep -v "trips        0" | head -40
VC_LOCK_PROFILE=0.001 TMO=60 t lock ./dedup_moves_hold $a --json $o/lock.json
grep -A8 "engine lock, demote" $o/lock.log | grep -E 'demote|trip|acquire' | head -30
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
