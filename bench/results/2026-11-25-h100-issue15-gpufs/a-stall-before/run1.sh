#!/bin/bash
# GPU call 1: the 4096-warp stall, before (diag = step 2 + counters) and after (new).
cd "$(dirname "$0")"; export LD_LIBRARY_PATH=$PWD/lib:$LD_LIBRARY_PATH
L=$OUT/logs; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $L/env.txt
df -h /tmp >> $L/env.txt; mount | grep " /tmp " >> $L/env.txt
stacks() { # pid, file
  for t in /proc/$1/task/*; do echo "== $t $(cat $t/comm) $(awk '{print $3, $14, $15}' $t/stat) wchan=$(cat $t/wchan)"; done > $2 2>&1
  timeout 30 gdb -p $1 -batch -ex 'thread apply all bt' >> $2 2>&1
}
# a: before, 4096 warps x 20
( VC_GPUFS_PROGRESS=5 VC_GPUFS_WARPS=4096 VC_GPUFS_OPS=20 timeout 80 ./diag/test_gpufs_cuda > $L/a-diag-4096.log 2>&1; echo "rc=$?" >> $L/a-diag-4096.log ) &
sleep 40; P=$(pgrep -f "diag/test_gpufs_cuda" | head -1); [ -n "$P" ] && stacks $P $L/a-diag-4096-stacks.txt
wait
# b: after
for w in 4096:70 8192:100; do
  ( time env VC_GPUFS_PROGRESS=5 VC_GPUFS_WARPS=${w%:*} VC_GPUFS_OPS=20 timeout ${w#*:} ./new/test_gpufs_cuda ) > $L/b-new-${w%:*}.log 2>&1; echo "rc=$?" >> $L/b-new-${w%:*}.log
done
( time timeout 40 ./new/test_gpufs_cuda ) > $L/b-new-256.log 2>&1; echo "rc=$?" >> $L/b-new-256.log
# c: the 65536-warp crash
( time timeout 60 ./new/gpufs_collage --file /tmp/rec2.bin --create-gib 2 --gpu-gib 1 --warps 65536 --steps 1 --no-uvm ) > $L/c-new-collage-65536.log 2>&1; echo "rc=$?" >> $L/c-new-collage-65536.log
tail -3 $L/*.log
cd $OUT && tar czf r.tgz logs
