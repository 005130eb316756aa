#!/usr/bin/env bash
# Issue 14, step 8: the known trip (host fingerprints noted at load),
# swap back by reference, demoters 4. Tests on cuda, memcheck, dedup_moves
# (default, and VC_DD_HOSTFP=0 for the A/B), Fig. 5 at D = 1.
set -uo pipefail
cd "$(dirname "$0")"
python3 -c "import tarfile; tarfile.open('bins7.tar.xz').extractall('.')"
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
TMO=200 t moves ./dedup_moves --device cuda --file-mib 512 --reps 3 --degrees 1 --json $o/moves.json
grep -A12 '^demotion' $o/moves.log
VC_DD_HOSTFP=0 TMO=200 t moves_nohfp ./dedup_moves --device cuda --file-mib 512 --reps 2 --degrees 1 --json $o/moves_nohfp.json
grep -A12 '^demotion' $o/moves_nohfp.log
unset VC_DD_PROF
TMO=150 t fig5 ./dedup_fig5 --device cuda --threads 8 --scale 0.1 --degree 1 --json $o/fig5.json
tail -30 $o/fig5.log
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
