#!/bin/bash
cd "$(dirname "$0")"; export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $L/env.txt
( time env VC_GPUFS_WARPS=16 VC_GPUFS_OPS=20 timeout 90 compute-sanitizer --tool memcheck ./new/test_gpufs_cuda ) > $L/i-memcheck-model-16.log 2>&1; echo "rc=$?" >> $L/i-memcheck-model-16.log
( time env VC_GPUFS_WARPS=16 VC_GPUFS_OPS=20 VC_GPUFS_GPU_PAGES=0 timeout 90 compute-sanitizer --tool racecheck ./new/test_gpufs_cuda ) > $L/i-racecheck-model-16.log 2>&1; echo "rc=$?" >> $L/i-racecheck-model-16.log
( time timeout 100 compute-sanitizer --tool memcheck ./new/gpufs_collage --file /tmp/rec2.bin --create-gib 2 --gpu-gib 1 --warps 65536 --steps 1 --no-uvm ) > $L/i-memcheck-collage-65536.log 2>&1; echo "rc=$?" >> $L/i-memcheck-collage-65536.log
cd $OUT && tar czf r.tgz logs
