#!/usr/bin/env bash
# Issue 14, step 10: where the engine lock's time goes, by phase: every
# hold of c->mu counted by the function that ended it (VC_LOCK_PROFILE=0.001),
# dedup_moves 1 GiB, 1 rep, 2 s swaps.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins14.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
cat COMMIT > $o/env.txt
VC_LOCK_PROFILE=0.001 VC_DD_PROF=1 timeout 200 ./dedup_moves --device cuda --file-mib 1024 --reps 1 --degrees 1 --seconds 2 --json $o/lock.json > $o/lock.log 2>&1
echo rc=$?; grep -A10 '^data' $o/lock.log
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
