#!/usr/bin/env bash
# Issue 14, step 10: the demote column against the number of readers
# (each reader runs the demotions its misses start, blocking for their
# trip): dedup_moves 1 GiB, 2 reps, 2 s swaps, at 4 and 16 readers.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dedup_moves ] || python3 -c "import tarfile; tarfile.open('bins15.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; tail -n 2 $o/$n.log; }
cat COMMIT > $o/env.txt
for n in 4 16; do
	VC_DD_PROF=1 t moves_t$n ./dedup_moves --device cuda --file-mib 1024 --degrees 1 --seconds 2 --reps 2 --threads $n --json $o/moves_t$n.json
	grep -A10 '^data' $o/moves_t$n.log
done
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
