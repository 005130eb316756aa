#!/usr/bin/env bash
# Issue 14: a GPU prefetch's workers, 2 (the default) against 4, same
# binary (dd2f98e), interleaved: 4 calls each of dedup_moves (1 s swaps, 2
# reps a call). Usage: bash run19.sh
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins18.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=/tmp/o19; rm -rf $o; mkdir -p $o
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; (cd $o && tar czf $OUT/all.tgz *); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt; nproc >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2 --prefetches 1"
for k in 1 2 3 4; do
  VC_PREFETCHERS=4 TMO=80 t P4_$k ./dedup_moves $a --json $o/P4_$k.json
  VC_PREFETCHERS=2 TMO=80 t Q2_$k ./dedup_moves $a --json $o/Q2_$k.json
done
