#!/usr/bin/env bash
# Issue 14 (dedup), session 14: swap pages back by reference, the trip's
# first and last holds folded into its caller's, VC_DEMOTERS. Tests on
# cuda, memcheck of test_dedup, then dedup_moves at D = 1: the default,
# VC_DEMOTERS=4, and VC_DD_BACK=0 (the swap A/B).
set -uo pipefail
cd "$(dirname "$0")"
python3 -c "import tarfile; tarfile.open('bins5.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; s=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - s ))s"; tail -2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv > $o/env.txt; nproc >> $o/env.txt
t dedup ./test_dedup
VC_MODEL_DEDUP_ONLY=1 t model ./test_engine_model
VC_GPUSIZE_DEDUP_ONLY=1 t gpusize ./test_gpusize
VC_TEST_QUICK=1 t memcheck compute-sanitizer --tool memcheck ./test_dedup
grep -h 'ERROR SUMMARY' $o/memcheck.log
export VC_DD_PROF=1
TMO=200 t moves ./dedup_moves --device cuda --file-mib 512 --reps 3 --degrees 1 --json $o/moves.json
grep -A12 'Tier moves' $o/moves.log
VC_DEMOTERS=4 TMO=200 t moves_d4 ./dedup_moves --device cuda --file-mib 512 --reps 3 --degrees 1 --json $o/moves_d4.json
grep -A12 'Tier moves' $o/moves_d4.log
VC_DD_BACK=0 TMO=200 t moves_noback ./dedup_moves --device cuda --file-mib 512 --reps 2 --degrees 1 --json $o/moves_noback.json
grep -A12 'Tier moves' $o/moves_noback.log
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
