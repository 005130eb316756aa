#!/usr/bin/env bash
# Issue 14, step 11: the direct trip's lookups under dd.mu alone
# (VC_DD_ALONE=1) with background demoters (VC_DEMOTE_THREADS=4, reserve
# 128) against without; and alone with the readers demoting. Same binary.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins17c.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; tail -n 2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2"
VC_HOST_RESERVE=128 VC_DEMOTE_THREADS=4 VC_DD_ALONE=1 VC_DD_PROF=1 TMO=120 t th4_alone ./dedup_moves $a --json $o/th4_alone.json
grep -A11 '^data' $o/th4_alone.log
VC_HOST_RESERVE=128 VC_DEMOTE_THREADS=4 VC_DD_ALONE=0 VC_DD_PROF=1 TMO=120 t th4 ./dedup_moves $a --json $o/th4.json
grep -A11 '^data' $o/th4.log
VC_HOST_RESERVE=0 VC_DD_ALONE=1 VC_DD_PROF=1 TMO=120 t r0_alone ./dedup_moves $a --json $o/r0_alone.json
grep -A11 '^data' $o/r0_alone.log
VC_HOST_RESERVE=128 VC_DEMOTE_THREADS=4 VC_DD_ALONE=1 VC_LOCK_PROFILE=0.001 TMO=90 t th4_alone_lock ./dedup_moves --device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 1 --prefetches 1 --json $o/th4_alone_lock.json
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
