#!/usr/bin/env bash
# Issue 14, step 9: where the demote's time goes. dedup_moves 2 GiB, 2 reps
# each, one binary: the default (the known trip's first hold ends early),
# VC_DD_EARLY=0 (classes and lookups in the caller's hold, dd.mu inside),
# and each with the engine lock adaptive (VC_MU_ADAPTIVE=1).
set -uo pipefail
cd "$(dirname "$0")"
python3 -c "import tarfile; tarfile.open('bins10.tar.xz').extractall('.')"
export LD_LIBRARY_PATH=$PWD VC_DD_PROF=1
o=$OUT
t() { local n=$1; shift; s=$(date +%s); timeout ${TMO:-140} "$@" > $o/$n.log 2>&1; echo "$n rc=$? $(( $(date +%s) - s ))s"; grep -A10 '^data' $o/$n.log | grep -v '^data'; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $o/env.txt; cat COMMIT >> $o/env.txt
a="--device cuda --file-mib 2048 --reps 2 --degrees 1 --json"
t early ./dedup_moves $a $o/early.json
VC_DD_EARLY=0 t inhold ./dedup_moves $a $o/inhold.json
VC_MU_ADAPTIVE=1 t early_ad ./dedup_moves $a $o/early_ad.json
VC_MU_ADAPTIVE=1 VC_DD_EARLY=0 t inhold_ad ./dedup_moves $a $o/inhold_ad.json
cd $o && tar czf all.tgz *.log *.json env.txt && rm -f *.log *.json env.txt
