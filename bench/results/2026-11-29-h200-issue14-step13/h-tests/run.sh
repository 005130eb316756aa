#!/usr/bin/env bash
# Issue 14, step 13, main at 3ba22fa (the AVX-512 lanes form's lane sum
# as uint64_t): test_fp and test_dedup on cuda, bench/fingerprint.
set -uo pipefail
cd "$(dirname "$0")"
[ -x test_fp ] && [ -x fingerprint ] || python3 -c "import tarfile; tarfile.open('bins43.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
lscpu | grep -E 'Model name|^CPU\(s\)' >> $o/env.txt
VC_TEST_DEVICE=cuda TMO=60 t test_fp ./test_fp; tail -n 1 $o/test_fp.log | cut -c1-60
VC_TEST_DEVICE=cuda TMO=100 t test_dedup ./test_dedup; tail -n 1 $o/test_dedup.log
TMO=120 t fingerprint ./fingerprint --device cuda --gib 2 --reps 3 --cpu-seconds 0.5 --json $o/fingerprint.json; grep -A9 '^ block' $o/fingerprint.log; grep -E 'lanes hash|goal|digests' $o/fingerprint.log
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
