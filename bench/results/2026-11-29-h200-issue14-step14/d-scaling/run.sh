#!/usr/bin/env bash
# Issue 14, step 14 (0ee8127): the engine's spin (default, 100 us here)
# against VC_MU_SPIN_US=0 on the read scaling bench (gpu swap, host hits,
# misses; 1..16 threads), then two more interleaved moves calls each.
set -uo pipefail
cd "$(dirname "$0")"
[ -x scaling ] || python3 -c "import tarfile; tarfile.open('bins48.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt; nproc >> $o/env.txt
s="--device cuda --seconds 0.5 --latencies 0,20"
TMO=140 t scal_spin ./scaling $s --json $o/scal_spin.json
VC_MU_SPIN_US=0 TMO=140 t scal_nospin ./scaling $s --json $o/scal_nospin.json
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2 --prefetches 1"
for k in 3 4; do
  TMO=80 t spin_$k ./dedup_moves $a --json $o/spin_$k.json
  VC_MU_SPIN_US=0 TMO=80 t nospin_$k ./dedup_moves $a --json $o/nospin_$k.json
done
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
