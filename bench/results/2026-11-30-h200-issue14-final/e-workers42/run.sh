#!/usr/bin/env bash
# Issue 14: 4 prefetch workers against 2 (dd2f98e's binary), 2 more calls
# each, interleaved; then at 4 one call with VC_LOCK_PROFILE=0.001 (the
# engine lock's holds by function, each phase) and one with VC_DD_PROF=1
# (each trip phase). Usage: bash run20.sh
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins18.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=/tmp/o20; rm -rf $o; mkdir -p $o
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; (cd $o && tar czf $OUT/all.tgz *); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt; nproc >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2 --prefetches 1"
for k in 5 6; do
  VC_PREFETCHERS=4 TMO=80 t P4_$k ./dedup_moves $a --json $o/P4_$k.json
  VC_PREFETCHERS=2 TMO=80 t Q2_$k ./dedup_moves $a --json $o/Q2_$k.json
done
VC_PREFETCHERS=4 VC_LOCK_PROFILE=0.001 TMO=80 t P4lock ./dedup_moves $a --reps 1 --json $o/P4lock.json
VC_PREFETCHERS=4 VC_DD_PROF=1 TMO=80 t P4prof ./dedup_moves $a --reps 1 --json $o/P4prof.json
