#!/bin/bash
cd "$(dirname "$0")"; export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/env.txt
for w in 4096:20:90 8192:20:120 2048:100:60; do
  IFS=: read n o t <<< "$w"
  ( time env VC_GPUFS_PROGRESS=10 VC_GPUFS_WARPS=$n VC_GPUFS_OPS=$o timeout $t ./new/test_gpufs_cuda ) > $L/g-model-$n.log 2>&1; echo "rc=$?" >> $L/g-model-$n.log
done
( time timeout 40 ./new/test_gpufs_cuda ) > $L/g-model-256.log 2>&1; echo "rc=$?" >> $L/g-model-256.log
F=/tmp/rec2.bin
for i in 1 2 3; do
  ( time timeout 40 ./new/gpufs_collage --file $F --create-gib 2 --gpu-gib 1 --warps 65536 --steps 1 --no-uvm ) >> $L/h-collage-65536.log 2>&1; echo "rc=$?" >> $L/h-collage-65536.log
done
cd $OUT && tar czf r.tgz logs
