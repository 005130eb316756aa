#!/usr/bin/env bash
# Issue 14, step 8 final: tests on cuda, memcheck, then dedup_moves on a
# 2 GiB file (demote and prefetch 4x longer than the 512 MiB runs, whose
# dedup-off rates moved by 10-20 % between runs), the default against
# VC_DD_HOSTFP=0 (step 7's trips) in the same session.
set -uo pipefail
cd "$(dirname "$0")"
python3 -c "import tarfile; tarfile.open('bins8.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; s=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - s ))s"; tail -2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
t dedup ./test_dedup
grep 'known trip\|back by' $o/dedup.log | head -8
VC_MODEL_DEDUP_ONLY=1 t model ./test_engine_model
VC_GPUSIZE_DEDUP_ONLY=1 t gpusize ./test_gpusize
VC_TEST_QUICK=1 t memcheck compute-sanitizer --tool memcheck ./test_dedup
grep -h 'ERROR SUMMARY' $o/memcheck.log | sort | uniq -c
export VC_DD_PROF=1
TMO=330 t moves ./dedup_moves --device cuda --file-mib 2048 --reps 3 --degrees 1 --json $o/moves.json
grep -A12 '^demotion' $o/moves.log
VC_DD_HOSTFP=0 TMO=200 t moves_nohfp ./dedup_moves --device cuda --file-mib 2048 --reps 2 --degrees 1 --json $o/moves_nohfp.json
grep -A12 '^demotion' $o/moves_nohfp.log
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
