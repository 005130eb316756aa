#!/usr/bin/env bash
# A server over a store that fills up at its Nth new page, for every N from
# 0 to 64 (OCF's surprise-shutdown pattern; every VC_STOREFAIL_STEPth N in
# the sanitizer builds: tests/CMakeLists.txt), more data written than the
# tiers hold (host 256 KiB, GPU tier 1 MiB or none). The store is a sparse
# file on a tmpfs of its own, filled (a file beside it) until exactly N
# pages are free: the kernel refuses the N+1st new page with ENOSPC. Each
# run starts a server and checks:
#   - every write is acknowledged or fails with ENOSPC, and another client
#     reads the store's other half, correctly, all along;
#   - every page then reads back what was acknowledged (zeros where a
#     write failed), while the store still refuses;
#   - write-back: a FLUSH fails while acknowledged pages are missing from
#     the store; SIGTERM logs them, "kept", and the server serves on;
#   - even N: room is made (the filler goes), FLUSH succeeds, SIGTERM ends
#     the server with status 0, and the store holds every acknowledged
#     byte; odd N: a second SIGTERM ends it within 10 s with a non-zero
#     status, and the ranges it logs as lost cover every acknowledged page
#     the store lacks.
# Nothing may hang: each run has a minute.
# Usage: nbd_storefail.sh VRAMCACHE_BINARY write-back|write-through GPU_BYTES
. "$(dirname "$0")/nbd_lib.sh"
need_nbdsh
mode=$2
gpu=$3
[ "$(id -u)" = 0 ] || skip "needs root: the full store is a tmpfs of its own"
mkdir "$dir/fs"
mount -t tmpfs -o size=32M tmpfs "$dir/fs" 2>/dev/null || skip "cannot mount a tmpfs here"
trap 'umount -l "$dir/fs" 2>/dev/null || true; cleanup' EXIT

PYTHONPATH="$(cd "$(dirname "$0")" && pwd)" python3 - "$vc" "$dir" "$mode" "$gpu" <<'PY'
import errno, os, re, signal, subprocess, sys, threading, time, random
import nbd
from storefail import leave_free, wait_exit, clean_page, remove

vc, d, mode, gpu = sys.argv[1:5]
fs, sock, log = d + "/fs", d + "/s.sock", d + "/log"
PS, PAGES, CLEAN0 = 4096, 2048, 1024  # pages [CLEAN0, PAGES) are never written
WRITES = 640                           # pages written: the tiers hold 320


server = None  # the run's server: killed on failure


def fail(msg):
    if server and server.poll() is None:
        server.kill()
    print("FAIL: " + msg, file=sys.stderr)
    try:
        print(open(log).read(), file=sys.stderr)
    except OSError:
        pass
    sys.exit(1)


def hung():  # a watchdog's thread: blocking client calls do not see signals
    if server and server.poll() is None:
        server.kill()
    print("FAIL: a run hung (a minute)", file=sys.stderr)
    os._exit(1)


def hang_up(h):
    try:
        h.shutdown()
    except nbd.Error:
        pass


def log_has(what, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if what in open(log).read():
            return True
        time.sleep(0.02)
    return False


def reader(stop, errs):
    h = nbd.NBD()
    h.connect_unix(sock)
    r = random.Random(1)
    n = 0
    while not stop.is_set() or n < 32:
        pg = r.randrange(CLEAN0, PAGES)
        try:
            got = h.pread(PS, pg * PS)
        except nbd.Error as e:
            errs.append("read of clean page %d: %s" % (pg, e))
            return
        if got != clean_page(pg, PS):
            errs.append("clean page %d reads wrong" % pg)
            return
        n += 1
    h.shutdown()


def run(n):
    disk, filler = fs + "/disk", fs + "/filler"
    with open(disk, "wb") as f:
        f.truncate(PAGES * PS)
        for pg in range(CLEAN0, PAGES):
            f.seek(pg * PS)
            f.write(clean_page(pg, PS))
    leave_free(fs, n, filler)
    open(log, "w").close()
    args = [vc, "serve", "--device", "emu", "--foreground", "--socket", sock, "--log", log,
            "--host-bytes", "256K", "--gpu-bytes", gpu, disk]
    if mode == "write-back":
        args.insert(2, "--write-back")
    if os.path.exists(sock):
        os.unlink(sock)
    global server
    proc = server = subprocess.Popen(args, stderr=subprocess.DEVNULL)
    for _ in range(500):  # serving once the socket answers
        try:
            h = nbd.NBD()
            h.connect_unix(sock)
            break
        except nbd.Error:
            if proc.poll() is not None:
                fail("N=%d: the server did not start" % n)
            time.sleep(0.01)

    stop, errs = threading.Event(), []
    th = threading.Thread(target=reader, args=(stop, errs))
    th.start()
    r = random.Random(n)
    order = list(range(CLEAN0))
    r.shuffle(order)
    order = order[:WRITES - 100] + [r.choice(order[:WRITES - 100]) for _ in range(100)]
    model = {}
    refused = 0
    for pg in order:
        b = bytes([r.getrandbits(8)]) * 64 * (PS // 64)
        b = os.urandom(16) + b[16:]
        try:
            h.pwrite(b, pg * PS)
            model[pg] = b
        except nbd.Error as e:
            if e.errnum != errno.ENOSPC:
                fail("N=%d: write of page %d: %s, not ENOSPC" % (n, pg, e))
            refused += 1
    stop.set()
    th.join()
    if errs:
        fail("N=%d: %s" % (n, errs[0]))
    for pg in range(CLEAN0):  # acknowledged bytes, or the store's zeros
        want = model.get(pg, bytes(PS))
        if h.pread(PS, pg * PS) != want:
            fail("N=%d: page %d does not read back what was acknowledged" % (n, pg))

    def store_lacks():
        with open(disk, "rb") as f:
            return [pg for pg, b in model.items() if (f.seek(pg * PS), f.read(PS))[1] != b]

    lacks = store_lacks() if mode == "write-through" else None
    if mode == "write-through" and lacks:
        fail("N=%d: write-through acknowledged pages the store lacks: %s" % (n, lacks[:5]))
    flushed = True
    try:
        h.flush()
    except nbd.Error as e:
        if e.errnum != errno.ENOSPC:
            fail("N=%d: flush: %s, not ENOSPC" % (n, e))
        flushed = False
    lacks = store_lacks()
    if flushed and lacks:
        fail("N=%d: FLUSH succeeded but the store lacks pages %s" % (n, lacks[:5]))
    if not flushed and not lacks:
        fail("N=%d: FLUSH failed with every acknowledged page in the store" % n)

    proc.send_signal(signal.SIGTERM)
    if flushed:
        if wait_exit(proc, 10) != 0:
            fail("N=%d: nothing dirty, but SIGTERM did not end the server with 0" % n)
        hang_up(h)
        return refused, lacks
    if not log_has("kept in the cache", 10) or proc.poll() is not None:
        fail("N=%d: SIGTERM with a refusing store: no 'kept' report, or the server left" % n)
    for pg in lacks[:8]:  # still serving, the acknowledged bytes with it
        if h.pread(PS, pg * PS) != model[pg]:
            fail("N=%d: after SIGTERM, page %d lost its acknowledged bytes" % (n, pg))
    if n % 2 == 0:
        os.unlink(filler)  # room again
        h.flush()
        proc.send_signal(signal.SIGTERM)
        hang_up(h)
        if wait_exit(proc, 10) != 0:
            fail("N=%d: after a good flush, SIGTERM did not end the server with 0" % n)
        if store_lacks():
            fail("N=%d: the store lacks acknowledged pages after a good flush" % n)
        return refused, []
    hang_up(h)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = wait_exit(proc, 12)
    if code is None or time.monotonic() - t0 > 10.5:
        fail("N=%d: a second SIGTERM did not end the server within 10 s" % n)
    if code == 0:
        fail("N=%d: the server lost writes and exited 0" % n)
    text = open(log).read()
    if "lost" not in text:
        fail("N=%d: no report of what was lost" % n)
    ranges = [(int(a), int(b)) for a, b in re.findall(r"bytes (\d+)-(\d+)", text.split("lost")[-1])]
    for pg in lacks:
        if not any(a <= pg * PS and pg * PS + PS - 1 <= b for a, b in ranges):
            fail("N=%d: page %d was lost and not reported" % (n, pg))
    return refused, lacks


total_refused = total_kept = 0
step = int(os.environ.get("VC_STOREFAIL_STEP", "1"))  # tests/CMakeLists.txt: sanitizer builds
for n in range(0, 65, step):
    dog = threading.Timer(60, hung)
    dog.start()
    refused, lacks = run(n)
    dog.cancel()
    total_refused += refused
    total_kept += len(lacks)
    remove([fs + "/disk", fs + "/filler"])
if total_refused == 0 and total_kept == 0:
    fail("the store never refused anything")
print("%s, GPU tier %s: N = 0..64 by %d, %d writes refused, %d acknowledged pages kept past a "
      "refused flush" % (mode, gpu, step, total_refused, total_kept))
PY
echo "nbd store failure ($mode, GPU tier $gpu): all checks passed"
