#!/usr/bin/env bash
# Issue 14, step 13: the lanes hash's AVX-512 host form (the loads' hash of
# a staged volume's pages): the CPU, test_fp and test_dedup on cuda, the
# fingerprint bench (host rows), then the moves with it against
# VC_FP_AVX512=0 (the scalar form), same binary, 2 reps a call, two calls
# each, interleaved.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] && [ -x fingerprint ] || python3 -c "import tarfile; tarfile.open('bins40.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
lscpu | grep -E 'Model name|^CPU\(s\)|Thread' >> $o/env.txt; grep -o 'avx512[a-z]*' /proc/cpuinfo | sort -u | tr '\n' ' ' >> $o/env.txt; echo >> $o/env.txt
cat $o/env.txt
VC_TEST_DEVICE=cuda TMO=60 t test_fp ./test_fp; tail -n 2 $o/test_fp.log | cut -c1-120
VC_TEST_DEVICE=cuda TMO=100 t test_dedup ./test_dedup; tail -n 1 $o/test_dedup.log
TMO=120 t fingerprint ./fingerprint --device cuda --gib 2 --reps 3 --cpu-seconds 0.5 --json $o/fingerprint.json; grep -A6 '^ block' $o/fingerprint.log; grep -E 'lanes hash|goal' $o/fingerprint.log
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2 --prefetches 1"
for k in 1 2; do
  TMO=80 t avx_$k ./dedup_moves $a --json $o/avx_$k.json
  VC_FP_AVX512=0 TMO=80 t scalar_$k ./dedup_moves $a --json $o/scalar_$k.json
done
for f in avx_1 avx_2 scalar_1 scalar_2; do echo "== $f"; grep -A9 '^data' $o/$f.log | cut -c1-100 | sed -n '2,9p'; done
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
