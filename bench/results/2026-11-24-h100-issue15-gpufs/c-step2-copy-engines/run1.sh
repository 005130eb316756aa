#!/bin/bash
# Run 1 (helper wt15b): copy-engine service path, cooperative revokes.
cd "$(dirname "$0")"; export LD_LIBRARY_PATH=$PWD/lib
L=$OUT/log1.txt
t() { # name bound cmd...
  local n=$1 b=$2; shift 2
  echo "== $n (bound $b s): $*" >>$L
  local s=$(date +%s%N)
  timeout $b "$@" >$OUT/$n.txt 2>&1; local rc=$?
  echo "rc=$rc  $(( ($(date +%s%N) - s) / 1000000 )) ms" >>$L
  tail -12 $OUT/$n.txt >>$L
}
nvidia-smi -L >>$L 2>&1
t A-256 40 ./test_gpufs_cuda
VC_GPUFS_WARPS=2048 VC_GPUFS_OPS=100 t B-2048 50 ./test_gpufs_cuda
VC_GPUFS_WARPS=8192 VC_GPUFS_OPS=50 t C-8192 60 ./test_gpufs_cuda
VC_GPUFS_WARPS=16 VC_GPUFS_OPS=20 t D1-memcheck 40 compute-sanitizer --tool memcheck ./test_gpufs_cuda
VC_GPUFS_WARPS=16 VC_GPUFS_OPS=20 VC_GPUFS_GPU_PAGES=0 t D2-memcheck-hosttier 40 compute-sanitizer --tool memcheck ./test_gpufs_cuda
VC_GPUFS_WARPS=16 VC_GPUFS_OPS=20 VC_GPUFS_GPU_PAGES=0 t E-racecheck 35 compute-sanitizer --tool racecheck ./test_gpufs_cuda
cat $L
