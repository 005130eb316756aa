#!/usr/bin/env bash
# The single-GPU tests the refactor touched, on cuda: GPU 0 and GPU 1 in two
# lanes at once (their own processes).
set -uo pipefail
cd "$(dirname "$0")"
[ -x test_dedup ] || python3 -c "import tarfile; tarfile.open('bins2.tar.xz').extractall('.')"
export VC_TEST_DEVICE=cuda MALLOC_PERTURB_=165 LD_LIBRARY_PATH=$PWD VC_TEST_DATA=$PWD/../tests/data
o=$OUT/s; mkdir -p $o
lane() {
	local gpu=$1; shift
	for t in "$@"; do
		s=$(date +%s); CUDA_VISIBLE_DEVICES=$gpu timeout 240 ./$t > $o/$t.log 2>&1; echo "$t (GPU $gpu) rc=$? $(( $(date +%s) - s ))s"
	done
}
lane 0 test_dedup test_flush test_volumes test_resize test_fp test_fullstore test_logstore > $o/lane0.txt 2>&1 &
lane 1 test_gpufs_cuda test_cmp test_gc test_replay test_xts > $o/lane1.txt 2>&1
wait
cat $o/lane0.txt $o/lane1.txt
for f in $o/*.log; do echo "== $f"; tail -2 $f; done | tail -60
cd $OUT && tar czf s.tgz s && rm -rf s
