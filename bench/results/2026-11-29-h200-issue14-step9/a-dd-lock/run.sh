#!/usr/bin/env bash
# Issue 14, step 9: the block store under its own lock (dd.mu). Tests on
# cuda, memcheck; then dedup_moves 2 GiB: step 9 (3 reps) against step 8's
# binary (5bfc0ce, 2 reps) in the same session.
set -uo pipefail
cd "$(dirname "$0")"
python3 -c "import tarfile; tarfile.open('bins9.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; s=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - s ))s"; tail -n 2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
t dedup ./test_dedup
VC_MODEL_DEDUP_ONLY=1 t model ./test_engine_model
VC_GPUSIZE_DEDUP_ONLY=1 t gpusize ./test_gpusize
VC_TEST_QUICK=1 t memcheck compute-sanitizer --tool memcheck ./test_dedup
grep -h 'ERROR SUMMARY' $o/memcheck.log | sort | uniq -c
export VC_DD_PROF=1
TMO=240 t moves ./dedup_moves --device cuda --file-mib 2048 --reps 3 --degrees 1 --json $o/moves.json
grep -A12 '^demotion' $o/moves.log
TMO=160 t moves_s8 ./dedup_moves_s8 --device cuda --file-mib 2048 --reps 2 --degrees 1 --json $o/moves_s8.json
grep -A12 '^demotion' $o/moves_s8.log
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
