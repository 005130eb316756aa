#!/usr/bin/env bash
# Issue 14, step 13, ablation (measurement binary, not committed): the
# load's host hash of a staged volume's page (eng_dd_note_load) over 64
# bytes instead of 4 KiB (VC_DD_FASTHASH=1; the compare still verifies
# every share), against the real hash, same binary, 2 reps a call, two
# calls each, interleaved: is the readers' hash on the demote column's
# critical path?
set -uo pipefail
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2 --prefetches 1"
for k in 1 2; do
  VC_DD_FASTHASH=1 TMO=80 t fast_$k ./dedup_moves_fast $a --json $o/fast_$k.json
  TMO=80 t full_$k ./dedup_moves_fast $a --json $o/full_$k.json
done
for f in fast_1 fast_2 full_1 full_2; do echo "== $f"; grep -A9 '^data' $o/$f.log | cut -c1-100 | sed -n '6,9p'; done
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
