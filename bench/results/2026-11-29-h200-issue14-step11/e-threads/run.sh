#!/usr/bin/env bash
# Issue 14, step 11: demoter threads keeping a reserve of free host slots,
# with the first hold without dd.mu and the lookups alone (default),
# against no threads (VC_DEMOTE_THREADS=0: fb0bf5e's behaviour), same
# binary, same session. Tests on cuda.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins19.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; tail -n 2 $o/$n.log; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
t dedup ./test_dedup
VC_MODEL_DEDUP_ONLY=1 TMO=120 t model ./test_engine_model
VC_GPUSIZE_DEDUP_ONLY=1 TMO=120 t gpusize ./test_gpusize
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 3"
VC_DD_PROF=1 TMO=150 t moves ./dedup_moves $a --json $o/moves.json
grep -A11 '^data' $o/moves.log
VC_DEMOTE_THREADS=0 VC_DD_PROF=1 TMO=150 t moves_nothreads ./dedup_moves $a --json $o/moves_nothreads.json
grep -A11 '^data' $o/moves_nothreads.log
VC_LOCK_PROFILE=0.001 TMO=90 t lock ./dedup_moves --device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 1 --prefetches 1 --json $o/lock.json
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
