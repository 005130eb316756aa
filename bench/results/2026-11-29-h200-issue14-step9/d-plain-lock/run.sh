#!/usr/bin/env bash
# Issue 14, step 9: the adaptive engine lock's A/B, same binaries as
# run12: bench/scaling and dedup_moves 2 GiB with VC_MU_ADAPTIVE=0.
set -uo pipefail
cd "$(dirname "$0")"
[ -x scaling ] || python3 -c "import tarfile; tarfile.open('bins11.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD VC_MU_ADAPTIVE=0
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
cat COMMIT > $o/env.txt
TMO=120 t scaling_plain ./scaling --device cuda --cases gpu,host,miss --threads 1,4,16 --seconds 1 --latencies 0,20 --miss-bytes 1G --json $o/scaling_plain.json
grep -v '^$' $o/scaling_plain.log | tail -n 30
TMO=130 t moves_plainmu ./dedup_moves --device cuda --file-mib 2048 --reps 2 --degrees 1 --json $o/moves_plainmu.json
grep -A10 '^data' $o/moves_plainmu.log
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
