#!/bin/bash
# Run 2 (helper wt15): larger grid, memcheck and racecheck at a small size, the collage benchmark.
cd "$(dirname "$0")"; export LD_LIBRARY_PATH=$PWD/lib
L=$OUT/log2.txt
echo "== D: test_gpufs_cuda at defaults, then 2048 warps (40 s bound)" >>$L
( time timeout 20 ./test_gpufs_cuda ) 2>&1 | tail -4 >>$L
( time VC_GPUFS_WARPS=2048 VC_GPUFS_OPS=100 timeout 40 ./test_gpufs_cuda ) >>$L 2>&1; echo "rc=$?" >>$L
echo "== E: memcheck, 16 warps x 20 ops (70 s bound)" >>$L
( time VC_GPUFS_WARPS=16 VC_GPUFS_OPS=20 timeout 70 compute-sanitizer --tool memcheck ./test_gpufs_cuda ) >>$L 2>&1; echo "rc=$?" >>$L
echo "== F: racecheck, 16 warps x 20 ops (45 s bound)" >>$L
( time VC_GPUFS_WARPS=16 VC_GPUFS_OPS=20 timeout 45 compute-sanitizer --tool racecheck ./test_gpufs_cuda ) >>$L 2>&1; echo "rc=$?" >>$L
echo "== G: gpufs_collage, 1 GiB file, GPU tier 0.5 GiB, 8192 warps x 8 steps (55 s bound)" >>$L
nproc >>$L; df -h /tmp | tail -1 >>$L
( time timeout 55 ./gpufs_collage --file /tmp/records.bin --create-gib 1 --gpu-gib 0.5 --warps 8192 --steps 8 --json $OUT/gpufs_collage.json ) >$OUT/collage.txt 2>&1; echo "rc=$?" >>$OUT/collage.txt
cat $OUT/collage.txt >>$L
cat $L
