#!/usr/bin/env bash
# Issue 14: a GPU prefetch's workers (VC_PREFETCHERS, range.c). Tests on
# cuda that prefetch (test_prefetch, the API, volumes, integrity, encrypt,
# gpusize's dedup runs, test_dedup, the whole model), memcheck of
# test_prefetch; then dedup_moves at 1 and 2 workers interleaved, 5 calls
# each (1 s swaps, 2 reps a call), and one call with VC_DD_PROF=1 at 2.
# Usage: bash run18.sh tests|bench
set -uo pipefail
cd "$(dirname "$0")"
[ -x test_prefetch ] || python3 -c "import tarfile; tarfile.open('bins18.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=/tmp/o18-${1:-tests}; rm -rf $o; mkdir -p $o
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; (cd $o && tar czf $OUT/all.tgz *); }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt; nproc >> $o/env.txt
mkdir -p /tmp/try/tests && ln -sfn $(cd .. && pwd)/tests/data /tmp/try/tests/data
if [ "${1:-tests}" = tests ]; then
export VC_TEST_DEVICE=cuda
for x in test_prefetch test_engine_api test_volumes test_integrity test_encrypt test_dedup; do TMO=90 t $x ./$x; tail -n 1 $o/$x.log; done
VC_GPUSIZE_DEDUP_ONLY=1 TMO=120 t test_gpusize ./test_gpusize; tail -n 1 $o/test_gpusize.log
TMO=200 t model ./test_engine_model; tail -n 1 $o/model.log
VC_TEST_OPS=150 VC_TEST_QUICK=1 TMO=120 t memcheck_prefetch compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 ./test_prefetch; grep -E "SUMMARY|check failed" $o/memcheck_prefetch.log | head -3
exit 0
fi
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2 --prefetches 1"
for k in 1 2 3 4 5; do
  VC_PREFETCHERS=1 TMO=80 t P1_$k ./dedup_moves $a --json $o/P1_$k.json
  VC_PREFETCHERS=2 TMO=80 t P2_$k ./dedup_moves $a --json $o/P2_$k.json
done
VC_PREFETCHERS=2 VC_DD_PROF=1 TMO=80 t P2prof ./dedup_moves $a --reps 1 --json $o/P2prof.json
