#!/usr/bin/env bash
# Issue 14, step 13: the known trip's settle split (measurement binary,
# not committed: marks after its dd.mu is taken, after feed(), after
# dd.mu is let go): "moves down" = waiting for dd.mu, "fingerprints read"
# = feed(), "lookup" = settle() and counts(), "settle" = waiting for c->mu.
set -uo pipefail
cd "$(dirname "$0")"
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
export LD_LIBRARY_PATH=$PWD
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 1 --prefetches 1"
VC_DD_PROF=1 TMO=60 t prof ./dedup_moves_prof $a --json $o/prof.json
grep -A9 "dedup trips (demote)" $o/prof.log | grep -v "trips        0" | head -40
grep -A9 '^data' $o/prof.log | cut -c1-100 | sed -n '2,9p'
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
