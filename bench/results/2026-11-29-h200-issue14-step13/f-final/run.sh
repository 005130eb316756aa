#!/usr/bin/env bash
# Issue 14, step 13, main at 44e661d: the tests on cuda, memcheck of
# test_dedup, the fingerprint bench (host lanes rows), then the moves:
# the defaults (the indexer for plain and encrypted volumes, the AVX-512
# host hash) against step 12's defaults (VC_DD_LATER=0 VC_FP_AVX512=0),
# same binary, 4 reps a call, interleaved.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] && [ -x test_gpusize ] || python3 -c "import tarfile; tarfile.open('bins41.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
lscpu | grep -E 'Model name|^CPU\(s\)' >> $o/env.txt
VC_TEST_DEVICE=cuda TMO=60 t test_fp ./test_fp; tail -n 1 $o/test_fp.log | cut -c1-60
VC_TEST_DEVICE=cuda TMO=60 t test_logstore ./test_logstore; tail -n 1 $o/test_logstore.log
VC_TEST_DEVICE=cuda TMO=100 t test_dedup ./test_dedup; tail -n 1 $o/test_dedup.log
VC_TEST_DEVICE=cuda VC_GPUSIZE_DEDUP_ONLY=1 TMO=120 t test_gpusize ./test_gpusize; tail -n 1 $o/test_gpusize.log
VC_TEST_DEVICE=cuda VC_MODEL_DEDUP_ONLY=1 TMO=100 t model ./test_engine_model; tail -n 1 $o/model.log; grep -c "indexed later [1-9]" $o/model.log
VC_TEST_DEVICE=cuda VC_TEST_OPS=150 VC_TEST_QUICK=1 TMO=150 t memcheck_dedup compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 ./test_dedup; grep -E "SUMMARY|match|check failed" $o/memcheck_dedup.log | head -5
TMO=120 t fingerprint ./fingerprint --device cuda --gib 2 --reps 3 --cpu-seconds 0.5 --json $o/fingerprint.json; grep -E 'lanes hash|goal' $o/fingerprint.log
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 4 --prefetches 1"
TMO=120 t final_1 ./dedup_moves $a --json $o/final_1.json
VC_DD_LATER=0 VC_FP_AVX512=0 TMO=120 t step12_1 ./dedup_moves $a --json $o/step12_1.json
TMO=120 t final_2 ./dedup_moves $a --json $o/final_2.json
for f in final_1 step12_1 final_2; do echo "== $f"; grep -A9 '^data' $o/$f.log | cut -c1-100 | sed -n '2,9p'; done
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
