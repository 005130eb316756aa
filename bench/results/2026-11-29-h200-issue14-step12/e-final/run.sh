#!/usr/bin/env bash
# Issue 14, step 12, final: dedup_moves at its defaults (4 reps, 3
# prefetches, D = 1, 1 GiB), the indexer and the bare first hold (the
# default) against step 11's trip (VC_DD_LATER=0 VC_DD_FIRST=0), same
# binary, two runs each, alternating.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins25.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 4 --prefetches 3"
for k in 1 2; do
  TMO=140 t final_$k ./dedup_moves $a --json $o/final_$k.json
  VC_DD_LATER=0 VC_DD_FIRST=0 TMO=140 t step11_$k ./dedup_moves $a --json $o/step11_$k.json
done
for f in final step11; do for k in 1 2; do echo "== $f $k"; grep -A11 '^data' $o/${f}_$k.log | cut -c1-100 | sed -n '2,9p;11p'; done; done
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
