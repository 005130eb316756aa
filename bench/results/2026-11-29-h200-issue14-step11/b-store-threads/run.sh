#!/usr/bin/env bash
# Issue 14, step 11: the store alone against the demote column; demotions
# by background threads (VC_DEMOTE_THREADS=4, reserve 128) against step
# 10's behaviour (VC_HOST_RESERVE=0), same binary, same session.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins17b.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; tail -n 2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
df -h /tmp >> $o/env.txt; mount | grep -E " /tmp | / " >> $o/env.txt; free -g >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2"
VC_HOST_RESERVE=0 VC_DD_PROF=1 TMO=120 t r0 ./dedup_moves $a --json $o/r0.json
grep -A12 '^data' $o/r0.log
VC_HOST_RESERVE=128 VC_DEMOTE_THREADS=4 VC_DD_PROF=1 TMO=120 t th4 ./dedup_moves $a --json $o/th4.json
grep -A12 '^data' $o/th4.log
VC_HOST_RESERVE=128 VC_DEMOTE_THREADS=4 VC_LOCK_PROFILE=0.001 TMO=90 t th4lock ./dedup_moves --device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 1 --prefetches 1 --json $o/th4lock.json
grep -A12 '^data' $o/th4lock.log
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
