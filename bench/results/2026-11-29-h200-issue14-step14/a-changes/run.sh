#!/usr/bin/env bash
# Issue 14, step 14: main 05d2019 (old) against the working tree (new:
# dd.mu spins before it sleeps, as c->mu does; a promotion's note and
# release in one hold of dd.mu; the known trip's pair addresses after its
# first hold), 2 reps a call, old/new interleaved 4 times; then new with
# glibc's adaptive spin count raised (GLIBC_TUNABLES), 2 calls.
set -uo pipefail
cd "$(dirname "$0")"
[ -x dm_new ] || python3 -c "import tarfile; tarfile.open('bins45.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
t() { local n=$1; shift; local t0=$(date +%s); timeout ${TMO:-150} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - t0 ))s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt; ldd --version | head -1 >> $o/env.txt
a="--device cuda --file-mib 1024 --degrees 1 --seconds 1 --reps 2 --prefetches 1"
for k in 1 2 3 4; do
  TMO=80 t old_$k ./dm_old $a --json $o/old_$k.json
  TMO=80 t new_$k ./dm_new $a --json $o/new_$k.json
done
for k in 1 2; do
  GLIBC_TUNABLES=glibc.pthread.mutex_spin_count=2000 TMO=80 t spin_$k ./dm_new $a --json $o/spin_$k.json
done
for f in old_1 new_1 spin_1; do echo "== $f"; grep -A9 '^data' $o/$f.log | cut -c1-100 | sed -n '2,9p'; done
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
