#!/usr/bin/env bash
# Issue 14, step 14: the working tree with the engine's own spin before a
# lock sleeps (base/mutex.h: VC_MU_SPIN_US, default 30), at 0 (glibc's
# adaptive spin alone), 10, 30 and 100 us, and at 0 with glibc's spin
# count raised (GLIBC_TUNABLES, as run45's spin); 2 reps a call, each
# configuration twice, interleaved.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dm_spin ] || python3 -c "import tarfile; tarfile.open('bins46.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt; nproc >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2 --prefetches 1"
for k in 1 2; do
  for s in 0 10 30 100; do VC_MU_SPIN_US=$s TMO=80 t us${s}_$k ./dm_spin $a --json $o/us${s}_$k.json; done
  VC_MU_SPIN_US=0 GLIBC_TUNABLES=glibc.pthread.mutex_spin_count=2000 TMO=80 t glibc_$k ./dm_spin $a --json $o/glibc_$k.json
done
for f in us0_1 us30_1; do echo "== $f"; grep -A9 '^data' $o/$f.log | cut -c1-100 | sed -n '2,9p'; done
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
