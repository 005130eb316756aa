#!/bin/bash
# Run 4 (helper wt15b): the collage crash at a 6 GiB file / 5 GiB tier: main's binary, quiet mode off, capped grid, memcheck.
cd "$(dirname "$0")"; export LD_LIBRARY_PATH=$PWD/lib
L=$OUT/log4.txt
t() { # name bound cmd...
  local n=$1 b=$2; shift 2
  echo "== $n (bound $b s): $*" >>$L
  local s=$(date +%s%N)
  timeout $b "$@" >$OUT/$n.txt 2>&1; local rc=$?
  echo "rc=$rc  $(( ($(date +%s%N) - s) / 1000000 )) ms" >>$L
  tail -12 $OUT/$n.txt >>$L
}
F=/tmp/r6.bin
t J0-new-create 45 ./gpufs_collage --file $F --create-gib 6 --gpu-gib 5 --warps 8192 --steps 8 --no-uvm
t J1-main 40 ./gpufs_collage_main --file $F --gpu-gib 5 --warps 8192 --steps 8 --no-uvm
VC_GPUFS_QUIET=off t J2-quiet-off 40 ./gpufs_collage --file $F --gpu-gib 5 --warps 8192 --steps 8 --no-uvm
t J3-gridcap 40 ./gpufs_collage --file $F --gpu-gib 5 --warps 8192 --steps 8 --no-uvm --grid-cap 4
t J4-memcheck 90 compute-sanitizer --tool memcheck --show-backtrace device --print-limit 5 ./gpufs_collage --file $F --gpu-gib 5 --warps 2048 --steps 2 --no-uvm
rm -f $F
cat $L
