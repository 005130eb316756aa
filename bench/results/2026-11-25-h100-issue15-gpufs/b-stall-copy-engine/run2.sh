#!/bin/bash
cd "$(dirname "$0")"; export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/env.txt
( time env VC_GPUFS_PROGRESS=5 VC_GPUFS_WARPS=4096 VC_GPUFS_OPS=20 timeout 40 ./new/test_gpufs_cuda ) > $L/d-new-4096.log 2>&1; echo "rc=$?" >> $L/d-new-4096.log
( time env VC_GPUFS_PROGRESS=5 VC_GPUFS_WARPS=2048 VC_GPUFS_OPS=20 timeout 45 ./new/test_gpufs_cuda ) > $L/d-new-2048.log 2>&1; echo "rc=$?" >> $L/d-new-2048.log
F=/tmp/rec2.bin
for b in diag new diag new; do
  ( time timeout 40 ./$b/gpufs_collage --file $F --create-gib 2 --gpu-gib 1 --warps 65536 --steps 1 --no-uvm ) >> $L/e-collage-65536-$b.log 2>&1; echo "rc=$?" >> $L/e-collage-65536-$b.log
done
( time timeout 140 compute-sanitizer --tool memcheck ./new/gpufs_collage --file $F --gpu-gib 1 --warps 65536 --steps 1 --no-uvm ) > $L/f-memcheck-collage-65536.log 2>&1; echo "rc=$?" >> $L/f-memcheck-collage-65536.log
cd $OUT && tar czf r.tgz logs
