#!/usr/bin/env bash
# Issue 14, step 12: ablations 2: what is left of the unique trip without its lookup hold
# ablate): VC_DD_NOLOOK (the unique direct trip without its lookup hold:
# the upper bound of indexing later), VC_DD_NOCMP + VC_DD_KNOWN_IN (the
# known trip without its compare, and its settle in one hold of c->mu),
# VC_DD_KNOWN_IN alone; same binary, interleaved, 2 reps each.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins22.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; echo ablate >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 1 --prefetches 1"
for k in 1 2 3; do
  TMO=70 t main_$k ./dedup_moves $a --json $o/main_$k.json
  VC_DD_NOLOOK=1 TMO=70 t nolook_$k ./dedup_moves $a --json $o/nolook_$k.json
  VC_DD_NOLOOK=1 VC_DD_NOFP=1 TMO=70 t nofp_$k ./dedup_moves $a --json $o/nofp_$k.json
  VC_DD_NOLOOK=1 VC_DD_NOFP=1 VC_DD_BARE=1 TMO=70 t bare_$k ./dedup_moves $a --json $o/bare_$k.json
done
for f in main nolook nofp bare; do for k in 1 2 3; do echo "== $f $k"; grep -A9 '^data' $o/${f}_$k.log | cut -c1-100 | sed -n '1,5p'; done; done
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
