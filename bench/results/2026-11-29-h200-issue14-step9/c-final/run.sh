#!/usr/bin/env bash
# Issue 14, step 9 final: tests on cuda and memcheck; dedup_moves 2 GiB,
# 2 reps: step 9 (dd.mu, the adaptive engine lock) against step 8's code
# (4ffb06e) with the adaptive lock, same session; bench/scaling with the
# adaptive lock and without (the lock is every path's).
set -uo pipefail
cd "$(dirname "$0")"
python3 -c "import tarfile; tarfile.open('bins11.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; s=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - s ))s"; tail -n 2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
t dedup ./test_dedup
VC_MODEL_DEDUP_ONLY=1 t model ./test_engine_model
VC_GPUSIZE_DEDUP_ONLY=1 t gpusize ./test_gpusize
VC_TEST_QUICK=1 t memcheck compute-sanitizer --tool memcheck ./test_dedup
grep -h 'ERROR SUMMARY' $o/memcheck.log | sort | uniq -c
a="--device cuda --file-mib 2048 --reps 2 --degrees 1 --json"
VC_DD_PROF=1 t moves ./dedup_moves $a $o/moves.json
grep -A10 '^data' $o/moves.log
VC_DD_PROF=1 t moves_s8ad ./dedup_moves_s8ad $a $o/moves_s8ad.json
grep -A10 '^data' $o/moves_s8ad.log
s="--device cuda --cases gpu,host,miss --threads 1,4,16 --seconds 1 --latencies 0,20 --miss-bytes 1G --json"
TMO=120 t scaling ./scaling $s $o/scaling.json
VC_MU_ADAPTIVE=0 TMO=120 t scaling_plain ./scaling $s $o/scaling_plain.json
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
