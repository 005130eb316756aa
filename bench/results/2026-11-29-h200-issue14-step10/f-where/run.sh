#!/usr/bin/env bash
# Issue 14, step 10: a match's where[] line asked for with the lookups, the
# per-volume factor's scan in adaptive mode only. test_dedup on cuda;
# dedup_moves 1 GiB, 2 reps, 2 s swaps, against c970dca (dedup_moves_c970),
# same session.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins16.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; tail -n 2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
t dedup ./test_dedup
a="--device cuda --file-mib 1024 --degrees 1 --seconds 2 --reps 2"
VC_DD_PROF=1 TMO=110 t moves ./dedup_moves $a --json $o/moves.json
grep -A10 '^data' $o/moves.log
VC_DD_PROF=1 TMO=110 t moves_c970 ./dedup_moves_c970 $a --json $o/moves_c970.json
grep -A10 '^data' $o/moves_c970.log
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
