#!/usr/bin/env bash
# Issue 14: demoters in flight x demotion batch size, dedup off and on (D = 1).
set -uo pipefail
cd "$(dirname "$0")"
python3 -c "import tarfile; tarfile.open('bins6.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD
o=$OUT
for g in 4:32 8:32 2:64 4:64 8:64 4:128; do
  d=${g%:*}; b=${g#*:}
  VC_DEMOTERS=$d timeout 100 ./dedup_moves --device cuda --file-mib 512 --reps 2 --degrees 1 --demote-batch $b --json $o/m_${d}_${b}.json > $o/m_${d}_${b}.log 2>&1
  echo "== demoters $d batch $b rc=$?"; grep -A10 '^data ' $o/m_${d}_${b}.log | cut -c1-120
done
cd $o && tar czf all.tgz *.log *.json && rm -f *.log *.json
