#!/bin/bash
# Run 1 (helper wt15): the lazy-loading deadlock, then the fix, then memcheck.
cd "$(dirname "$0")"; export LD_LIBRARY_PATH=$PWD/lib
L=$OUT/log1.txt
nvidia-smi -L 2>&1 | tee -a $L
echo "== A: VC_CUDA_PRELOAD=off (lazy loading as before), 30 s bound" | tee -a $L
( time VC_CUDA_PRELOAD=off timeout 30 ./test_gpufs_cuda ) >>$L 2>&1; echo "rc=$?" >>$L
echo "== B: preload (the fix), 100 s bound, stacks at 50 s if still running" | tee -a $L
( time ./test_gpufs_cuda ) >$OUT/b.txt 2>&1 &
W=$!
for i in $(seq 1 50); do sleep 1; kill -0 $W 2>/dev/null || break; done
if kill -0 $W 2>/dev/null; then
  P=$(pgrep -f "^./test_gpufs_cuda" | head -1)
  echo "still running at 50 s, pid $P: stacks" >>$L
  timeout 40 cuda-gdb -batch -p $P -ex "info threads" -ex "thread apply all bt 12" >$OUT/stacks.txt 2>&1
  sleep 10; kill $W 2>/dev/null; pkill -P $W 2>/dev/null
fi
wait $W; echo "rc=$?" >>$L
cat $OUT/b.txt >>$L
echo "== C: memcheck, 75 s bound" | tee -a $L
( time timeout 75 compute-sanitizer --tool memcheck ./test_gpufs_cuda ) >>$L 2>&1; echo "rc=$?" >>$L
cat $L
