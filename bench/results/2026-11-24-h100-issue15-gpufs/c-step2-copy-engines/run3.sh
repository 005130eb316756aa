#!/bin/bash
# Run 3 (helper wt15b): is 8192 warps slow or stuck; which part of the 16 GiB collage crashed.
cd "$(dirname "$0")"; export LD_LIBRARY_PATH=$PWD/lib
L=$OUT/log3.txt
t() { # name bound cmd...
  local n=$1 b=$2; shift 2
  echo "== $n (bound $b s): $*" >>$L
  local s=$(date +%s%N)
  timeout $b "$@" >$OUT/$n.txt 2>&1; local rc=$?
  echo "rc=$rc  $(( ($(date +%s%N) - s) / 1000000 )) ms" >>$L
  tail -12 $OUT/$n.txt >>$L
}
VC_GPUFS_WARPS=4096 VC_GPUFS_OPS=20 t C3-4096x20 70 ./test_gpufs_cuda
VC_GPUFS_WARPS=8192 VC_GPUFS_OPS=10 t C4-8192x10 110 ./test_gpufs_cuda
t H1-65536w-2g 40 ./gpufs_collage --file /tmp/r2.bin --create-gib 2 --gpu-gib 1 --warps 65536 --steps 4 --no-uvm
rm -f /tmp/r2.bin
t H2-gpu6g 60 ./gpufs_collage --file /tmp/r6.bin --create-gib 6 --gpu-gib 5 --warps 8192 --steps 8 --no-uvm
rm -f /tmp/r6.bin
cat $L
