#!/usr/bin/env bash
# Issue 14: where c->mu goes in the demote (VC_LOCK_PROFILE=1: holds of 1 us
# or more, by the function that ended them), dedup off and on, D = 1.
set -uo pipefail
cd "$(dirname "$0")"
python3 -c "import tarfile; tarfile.open('bins8.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
VC_LOCK_PROFILE=1 timeout 200 ./dedup_moves --device cuda --file-mib 512 --reps 1 --degrees 1 --json $o/lock.json > $o/lock.log 2>&1
echo rc=$?; grep -A12 '^demotion' $o/lock.log
cd $o && tar czf all.tgz *.log *.json && rm -f *.log *.json
