#!/usr/bin/env bash
# Issue 14, step 10: tests on cuda and memcheck at 458c42b (kept blocks,
# the direct trip's unique lookups under dd.mu alone, the note lines asked
# for ahead); dedup_moves 2 GiB, 3 reps, 2 s swaps, against e83d998 (the
# same without the prefetches, dedup_moves_a), 2 reps, same session.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins13.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; tail -n 2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
t dedup ./test_dedup
VC_MODEL_DEDUP_ONLY=1 t model ./test_engine_model
VC_GPUSIZE_DEDUP_ONLY=1 t gpusize ./test_gpusize
VC_TEST_QUICK=1 t memcheck compute-sanitizer --tool memcheck ./test_dedup
grep -h 'ERROR SUMMARY' $o/memcheck.log | sort | uniq -c
a="--device cuda --file-mib 2048 --degrees 1 --seconds 2"
VC_DD_PROF=1 TMO=260 t moves ./dedup_moves $a --reps 3 --json $o/moves.json
grep -A10 '^data' $o/moves.log
VC_DD_PROF=1 TMO=180 t moves_a ./dedup_moves_a $a --reps 2 --json $o/moves_a.json
grep -A10 '^data' $o/moves_a.log
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
