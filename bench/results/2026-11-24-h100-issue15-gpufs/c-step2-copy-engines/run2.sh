#!/bin/bash
# Run 2 (helper wt15b): 8192 warps; gpufs_collage small (as the first step's smoke run) and at the issue's size.
cd "$(dirname "$0")"; export LD_LIBRARY_PATH=$PWD/lib
L=$OUT/log2.txt
t() { # name bound cmd...
  local n=$1 b=$2; shift 2
  echo "== $n (bound $b s): $*" >>$L
  local s=$(date +%s%N)
  timeout $b "$@" >$OUT/$n.txt 2>&1; local rc=$?
  echo "rc=$rc  $(( ($(date +%s%N) - s) / 1000000 )) ms" >>$L
  tail -14 $OUT/$n.txt >>$L
}
df -h /tmp . /dev/shm >>$L 2>&1; nproc >>$L; free -g >>$L
VC_GPUFS_WARPS=8192 VC_GPUFS_OPS=10 t C2-8192x10 75 ./test_gpufs_cuda
t G1-collage-1g 40 ./gpufs_collage --file /tmp/records.bin --create-gib 1 --gpu-gib 0.5 --warps 8192 --steps 8 --json $OUT/collage-1g.json
rm -f /tmp/records.bin
t G2-collage-16g 165 ./gpufs_collage --file /tmp/records16.bin --create-gib 16 --gpu-gib 8 --warps 65536 --steps 16 --json $OUT/collage-16g.json
rm -f /tmp/records16.bin
cat $L
