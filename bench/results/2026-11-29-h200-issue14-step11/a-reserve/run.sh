#!/usr/bin/env bash
# Issue 14, step 11: demotions ahead of the misses (a reserve of free host
# slots). test_dedup and the model's dedup runs on cuda; dedup_moves 1 GiB,
# 2 reps, reserve on (default) against VC_HOST_RESERVE=0 (step 10's
# behaviour), same binary, same session; one rep with the lock profile.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins17.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; tail -n 2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
t dedup ./test_dedup
t moves_test ./test_moves
a="--device cuda --file-mib 1024 --degrees 1 --seconds 2 --reps 2"
VC_DD_PROF=1 TMO=120 t moves ./dedup_moves $a --json $o/moves.json
grep -A10 '^data' $o/moves.log
VC_HOST_RESERVE=0 VC_DD_PROF=1 TMO=120 t moves_r0 ./dedup_moves $a --json $o/moves_r0.json
grep -A10 '^data' $o/moves_r0.log
VC_LOCK_PROFILE=0.001 TMO=90 t lock ./dedup_moves --device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 1 --prefetches 1 --json $o/lock.json
grep -A10 '^data' $o/lock.log
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
