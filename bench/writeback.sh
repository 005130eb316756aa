#!/usr/bin/env bash
# Write-back against write-through with tiny tiers (issue 37, item 4): host
# tier 16 MiB, GPU tier 32 MiB (emulated: what is measured is host work),
# stores on the disk under $TMPDIR (/var/tmp by default).
#
#   bench/writeback.sh [--quick] VRAMCACHE_BINARY OUTDIR
#
# 1. fio 4 KiB random writes, QD32, 1 job, over a 256 MiB file: through
#    `vramcache serve` (NBD) in write-through and in write-back, and on the
#    file itself (io_uring, buffered: the store's own rate, the limit).
# 2. cp -a of a tree (TREE, default /usr/include: ~8000 files, 130 MiB)
#    into SRC directly, and into the mount: --passthrough (FUSE alone),
#    write-through, write-back; then sync.
# 3. sqlite (python3's sqlite3): SQL_TXNS transactions (an insert and an
#    update each, default 2000) in DELETE and WAL journal modes, in SRC
#    directly and in the mount as in 2.
# Each run REPS times (3; --quick: 1, shorter), the configurations
# interleaved, the median kept. Prints a table and writes
# OUTDIR/writeback.json with the ratios the issue asks for: fio write-back /
# write-through (goal >= 0.9; of the medians, and the median of each rep's
# pair), sqlite mount / passthrough (goal <= 1.2, each mode), and cp -a
# write-back / write-through.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
quick=0
[ "${1:-}" = --quick ] && { quick=1; shift; }
[ $# = 2 ] || { echo "usage: bench/writeback.sh [--quick] VRAMCACHE_BINARY OUTDIR" >&2; exit 2; }
vc=$(realpath "$1")
out=$2
mkdir -p "$out"
for c in fio python3; do command -v $c >/dev/null || { echo "writeback: $c not found" >&2; exit 1; }; done
[ "$(id -u)" = 0 ] || { echo "writeback: the mount runs need root" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/vc-writeback-XXXXXX")
trap 'mountpoint -q "$dir/mnt" && umount -l "$dir/mnt"; [ -f "$dir/pid" ] && kill "$(cat "$dir/pid")" 2>/dev/null; rm -rf "$dir"' EXIT
python3 - "$vc" "$dir" "$out" "$quick" "${TREE:-/usr/include}" "${REPS:-}" "${SQL_TXNS:-}" <<'PY'
import json, os, shutil, sqlite3, statistics, subprocess, sys, time

vc, d, out, quick, tree, reps, txns = sys.argv[1:8]
quick = quick == "1"
reps = int(reps or (1 if quick else 3))
txns = int(txns or (300 if quick else 2000))
rt = 5 if quick else 15
tiers = ["--host-bytes", "16M", "--gpu-bytes", "32M", "--device", "emu"]
src, mnt = d + "/src", d + "/mnt"
os.makedirs(mnt)


def fio(name, args):
    r = subprocess.run(["fio", "--name=" + name, "--rw=randwrite", "--bs=4k", "--iodepth=32",
                        "--size=256M", "--time_based", "--runtime=%d" % rt,
                        "--output-format=json"] + args, capture_output=True, text=True, check=True)
    t = r.stdout
    j = json.loads(t[t.index("{"):])["jobs"][0]
    return j["write"]["bw_bytes"] / 2**20


def fio_nbd(mode):
    disk, sock = d + "/disk.img", d + "/s.sock"
    with open(disk, "wb") as f:
        f.truncate(256 << 20)
    args = [vc, "serve", "--socket", sock, "--pidfile", d + "/pid"] + tiers + [disk]
    if mode == "write-back":
        args.insert(2, "--write-back")
    subprocess.run(args, check=True)
    try:
        return fio("nbd", ["--ioengine=nbd", "--uri=nbd+unix:///?socket=" + sock])
    finally:
        pid = int(open(d + "/pid").read())
        os.kill(pid, 15)
        while os.path.exists("/proc/%d" % pid):  # its pidfile goes with it
            time.sleep(0.05)
        os.unlink(disk)


def fio_file():
    try:
        return fio("file", ["--ioengine=io_uring", "--filename=" + d + "/disk.img"])
    finally:
        os.unlink(d + "/disk.img")


def fresh_src():
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)


def mount(mode):
    args = [vc, "mount", "--pidfile", d + "/mpid"] + tiers + [src, mnt]
    if mode != "write-through":
        args.insert(2, "--" + mode)
    subprocess.run(args, check=True)


def umount():
    pid = int(open(d + "/mpid").read())
    subprocess.run(["umount", mnt], check=True)
    while os.path.exists("/proc/%d" % pid):  # the daemon writes back and leaves
        time.sleep(0.05)


def cp(where):
    t0 = time.monotonic()
    subprocess.run(["cp", "-a", tree, where + "/tree"], check=True)
    subprocess.run(["sync", "-f", where], check=True)
    return time.monotonic() - t0


def sql(where, jm):
    p = where + "/t.db"
    db = sqlite3.connect(p, isolation_level=None)
    db.execute("PRAGMA journal_mode=%s" % jm)
    db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
    t0 = time.monotonic()
    for i in range(txns):
        db.execute("BEGIN")
        db.execute("INSERT INTO t (v) VALUES (?)", (os.urandom(200),))
        db.execute("UPDATE t SET v = ? WHERE k = ?", (os.urandom(100), 1 + (i * 7919) % (i + 1)))
        db.execute("COMMIT")
    dt = time.monotonic() - t0
    db.close()
    for s in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(p + s):
            os.unlink(p + s)
    return dt


res = {}
def note(key, v):
    res.setdefault(key, []).append(v)


confs = ["src", "passthrough", "write-through", "write-back"]
for rep in range(reps):
    note("fio:write-through", fio_nbd("write-through"))
    note("fio:write-back", fio_nbd("write-back"))
    with open(d + "/disk.img", "wb") as f:
        f.truncate(256 << 20)
    note("fio:file", fio_file())
    for c in confs:
        fresh_src()
        where = src
        if c != "src":
            mount(c)
            where = mnt
        try:
            note("cp:" + c, cp(where))
            for jm in ("DELETE", "WAL"):
                note("sql-%s:%s" % (jm.lower(), c), sql(where, jm))
        finally:
            if c != "src":
                umount()
med = {k: statistics.median(v) for k, v in res.items()}
ratios = {
    "fio_writeback_over_writethrough": med["fio:write-back"] / med["fio:write-through"],
    # each rep's two runs side by side (back to back): the VM's drift between reps cancels
    "fio_writeback_over_writethrough_paired": statistics.median(
        b / t for b, t in zip(res["fio:write-back"], res["fio:write-through"])),
    "cp_writeback_over_writethrough": med["cp:write-back"] / med["cp:write-through"],
}
for jm in ("delete", "wal"):
    for m in ("write-through", "write-back"):
        ratios["sql_%s_%s_over_passthrough" % (jm, m)] = med["sql-%s:%s" % (jm, m)] / med["sql-%s:passthrough" % jm]
print("%-28s %12s %12s %12s %12s" % ("", "store", "passthrough", "write-thru", "write-back"))
print("%-28s %12.1f %12s %12.1f %12.1f" % ("fio randwrite 4k QD32 MiB/s", med["fio:file"], "-",
                                           med["fio:write-through"], med["fio:write-back"]))
for k, label in (("cp", "cp -a %s s" % os.path.basename(tree)), ("sql-delete", "sqlite DELETE %d txns s" % txns),
                 ("sql-wal", "sqlite WAL %d txns s" % txns)):
    print("%-28s %12.2f %12.2f %12.2f %12.2f" % (label, med[k + ":src"], med[k + ":passthrough"],
                                                 med[k + ":write-through"], med[k + ":write-back"]))
for k, v in ratios.items():
    print("%-44s %.2f" % (k, v))
json.dump({"machine": "%d cores, %s" % (os.cpu_count(), os.uname().release), "reps": reps,
           "fio_runtime_s": rt, "sql_txns": txns, "tree": tree, "tiers": " ".join(tiers),
           "median": med, "runs": res, "ratios": ratios},
          open(out + "/writeback.json", "w"), indent=1)
PY
