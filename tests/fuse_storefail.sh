#!/usr/bin/env bash
# A mount over an SRC that fills up at its Nth new page, for every N from 0
# to 64 (OCF's surprise-shutdown pattern; every VC_STOREFAIL_STEPth N and
# the EXT runs in the sanitizer builds: tests/CMakeLists.txt), more data written than the tiers
# hold (host 256 KiB, GPU tier 1 MiB or none). SRC is a tmpfs of its own
# with four sparse files of 160 pages and a clean file, filled (a file
# beside them) until exactly N pages are free: the kernel refuses the N+1st
# new page with ENOSPC. Each run starts a mount (a child in the foreground,
# whose exit status is checked) and checks:
#   - 640 page writes into the four files through the mount, an fsync of
#     one every 40 (so that SRC's Nth new page may be a write-back's, an
#     eviction's or a write-through's): each write is acknowledged (write(2)
#     returns the full count) or fails with ENOSPC, each fsync succeeds or
#     fails with ENOSPC, and another thread reads the clean file through the mount, correctly,
#     all along, until the mount is to go;
#   - every page then reads back what was acknowledged (zeros where a write
#     failed), through the writer's fds and through new opens, while SRC
#     still refuses; write-through: SRC has every acknowledged page;
#   - fsync and close of a file fail with ENOSPC exactly while SRC lacks
#     acknowledged pages of it (write-back);
#   - SIGTERM: with nothing missing the mount exits 0 within 10 s;
#     else it logs the ranges "kept in the cache" and serves on;
#   - even N: room is made (the filler goes), fsync of every file succeeds,
#     SIGTERM ends the mount with status 0 within 10 s, and SRC holds
#     exactly the acknowledged bytes; odd N: a second SIGTERM ends it within
#     10 s with a non-zero status, and the ranges it logs as lost, by file,
#     cover every acknowledged page SRC lacks (and those it logged kept,
#     every page SRC lacked then);
#   - N = 2, 15, 28, 41, 54: unmounted from outside (umount MNT) instead,
#     the process stays and logs by file what it keeps; even N: room made,
#     it writes them back and exits 0 (SRC exact); odd N: SIGTERM ends it
#     within 10 s, non-zero, naming what is lost.
# First, the issue's reproduction: dd of 100 MiB with conv=fsync into the
# full SRC fails with ENOSPC instead of hanging.
# Nothing may hang: each run has a minute (a watchdog thread kills the mount
# and fails the test: blocked calls do not see Python's signals).
# Usage: fuse_storefail.sh VRAMCACHE_BINARY write-back|write-through GPU_BYTES
. "$(dirname "$0")/fuse_lib.sh"
need python3 python3
need dd coreutils
mode=$2
gpu=$3
mount -t tmpfs -o size=32M tmpfs "$src" 2>/dev/null || skip "cannot mount a tmpfs here"
extra_mounts+=("$src")

PYTHONPATH="$(cd "$(dirname "$0")" && pwd)" python3 - "$vc" "$src" "$mnt" "$dir/mount.log" "$mode" "$gpu" <<'PY'
import errno, os, random, re, signal, subprocess, sys, threading, time
from storefail import leave_free, wait_exit, clean_page, remove

vc, src, mnt, log, mode, gpu = sys.argv[1:7]
PS, NF, FP = 4096, 4, 160          # four files of 160 pages
WRITES = 640                       # page writes: the tiers hold 320 pages
CLEAN = 256                        # pages of the clean file, never written
EXT = (2, 15, 28, 41, 54)          # runs unmounted from outside

mount = None  # the run's mount process: killed on failure
where = "starting"  # what the test is doing, for a hang's report


failing = threading.Lock()


def fail(msg):
    failing.acquire()  # the first failure speaks (a hang's kill fails the writer too)
    print("FAIL: " + msg, file=sys.stderr)  # fuse_lib.sh's cleanup shows the log
    sys.stderr.flush()
    if mount and mount.poll() is None:
        mount.kill()
        mount.wait()
        subprocess.run(["umount", "-l", mnt], stderr=subprocess.DEVNULL)
    os._exit(1)


def hung():  # a watchdog's thread: blocking calls do not see signals
    fail("a run hung (a minute), %s" % where)


def fname(f):
    return "f%d" % f


def log_has(what, secs):
    """what is in the log, and the report it heads has come whole (its
    last line counts the ranges)."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        text = open(log).read()
        if what in text and re.search(r"^  \d+ ranges in all", text.split(what)[-1], re.M):
            return True
        time.sleep(0.02)
    return False


def start(args_extra=()):
    global mount
    open(log, "w").close()
    args = [vc, "mount", "--device", "emu", "--foreground", "--host-bytes", "256K",
            "--gpu-bytes", gpu, *args_extra, src, mnt]
    if mode == "write-back":
        args.insert(2, "--write-back")
    with open(log, "a") as lf:
        mount = subprocess.Popen(args, stderr=lf)
    for _ in range(500):
        if os.path.ismount(mnt):
            return mount
        if mount.poll() is not None:
            break
        time.sleep(0.02)
    if re.search("mounting on .* failed", open(log).read()):
        print("SKIP: FUSE mount refused here", file=sys.stderr)
        sys.exit(77)
    fail("the mount did not come up")


def ranges_after(text, head):
    """(path, first byte, last byte) of the report lines after the last head."""
    if head not in text:
        return []
    part = text.split(head)[-1]
    return [(p, int(a), int(b)) for p, a, b in
            re.findall(r"^  (.+): bytes (\d+)-(\d+) \(", part, re.M)]


def covered(lacks, ranges):
    for f, pg in lacks:
        path = os.path.join(src, fname(f))
        if not any(p == path and a <= pg * PS and pg * PS + PS - 1 <= b for p, a, b in ranges):
            return (f, pg)
    return None


def reader(stop, errs):
    r = random.Random(1)
    n = 0
    fd = -1
    try:
        while not stop.is_set() or n < 32:
            if n % 16 == 0:  # opens too, not only reads
                if fd >= 0:
                    os.close(fd)
                fd = os.open(mnt + "/clean", os.O_RDONLY)
            pg = r.randrange(CLEAN)
            if os.pread(fd, PS, pg * PS) != clean_page(pg, PS):
                errs.append("clean page %d reads wrong" % pg)
                return
            n += 1
            time.sleep(0.002)  # throughout, but leaving the 2 cores to the writer
        os.close(fd)
    except OSError as e:
        errs.append("reading the clean file: %s" % e)


def dd_repro():
    """The issue's reproduction: dd into a full SRC fails, and does not hang."""
    global where
    where = "dd into a full SRC"
    start()
    p = subprocess.run(["dd", "if=/dev/zero", "of=" + mnt + "/dd", "bs=1M", "count=100",
                        "conv=fsync"], capture_output=True, text=True, timeout=50)
    if p.returncode == 0 or "No space left on device" not in p.stderr:
        fail("dd into a full SRC: status %d, %s" % (p.returncode, p.stderr.strip()))
    os.unlink(mnt + "/dd")  # its dirty pages go with it
    mount.send_signal(signal.SIGTERM)
    if wait_exit(mount, 10) != 0:
        fail("after dd: SIGTERM with nothing dirty did not exit 0")


def run(n):
    for f in range(NF):
        with open(os.path.join(src, fname(f)), "wb") as fh:
            fh.truncate(FP * PS)
    filler = src + "/filler"
    leave_free(src, n, filler)
    global where
    where = "N=%d: starting the mount" % n
    proc = start()

    stop, errs = threading.Event(), []
    th = threading.Thread(target=reader, args=(stop, errs), daemon=True)
    th.start()

    def stop_reader():
        stop.set()
        th.join()
        if errs:
            fail("N=%d: %s" % (n, errs[0]))

    r = random.Random(n)
    pages = [(f, pg) for f in range(NF) for pg in range(FP)]
    r.shuffle(pages)
    order = pages[:WRITES - 100] + [r.choice(pages[:WRITES - 100]) for _ in range(100)]
    fds = [os.open(mnt + "/" + fname(f), os.O_RDWR) for f in range(NF)]
    model, refused = {}, 0
    where = "N=%d: writing" % n
    for i, (f, pg) in enumerate(order):
        if i % 40 == 39:  # an fsync now and then: write-backs meet the full SRC too
            try:
                os.fsync(fds[r.randrange(NF)])
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    fail("N=%d: fsync during the writes: %s, not ENOSPC" % (n, e))
        b = os.urandom(16) + bytes([r.getrandbits(8)]) * (PS - 16)
        try:
            got = os.pwrite(fds[f], b, pg * PS)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                fail("N=%d: write of %s page %d: %s, not ENOSPC" % (n, fname(f), pg, e))
            refused += 1
            continue
        if got != PS:
            fail("N=%d: write of %s page %d: %d bytes" % (n, fname(f), pg, got))
        model[(f, pg)] = b

    def want(f, pg):
        return model.get((f, pg), bytes(PS))

    def check_mount(fds, when):
        for f in range(NF):
            data = os.pread(fds[f], FP * PS, 0)
            for pg in range(FP):
                if data[pg * PS:pg * PS + PS] != want(f, pg):
                    fail("N=%d, %s: %s page %d does not read what was acknowledged"
                         % (n, when, fname(f), pg))

    def src_lacks(files=range(NF)):
        out = []
        for f in files:
            with open(os.path.join(src, fname(f)), "rb") as fh:
                data = fh.read()
            out += [(f, pg) for pg in range(FP)
                    if (f, pg) in model and data[pg * PS:pg * PS + PS] != model[(f, pg)]]
        return out

    def src_exact():
        for f in range(NF):
            with open(os.path.join(src, fname(f)), "rb") as fh:
                data = fh.read()
            if len(data) != FP * PS:
                return "%s is %d bytes" % (fname(f), len(data))
            for pg in range(FP):
                if data[pg * PS:pg * PS + PS] != want(f, pg):
                    return "%s page %d" % (fname(f), pg)
        return None

    where = "N=%d: reading back" % n
    check_mount(fds, "after the writes")
    if mode == "write-through" and src_lacks():
        fail("N=%d: write-through acknowledged pages SRC lacks: %s" % (n, src_lacks()[:5]))

    def sync_or_close(what):  # fsync or close of each file: ENOSPC iff SRC lacks some of it
        for f in range(NF):
            err = None
            try:
                os.fsync(fds[f]) if what == "fsync" else os.close(fds[f])
            except OSError as e:
                err = e.errno
            if err not in (None, errno.ENOSPC):
                fail("N=%d: %s of %s: %s, not ENOSPC" % (n, what, fname(f), os.strerror(err)))
            lacks = src_lacks([f])
            if err is None and lacks:
                fail("N=%d: %s of %s succeeded, SRC lacks its pages %s"
                     % (n, what, fname(f), [pg for _, pg in lacks[:5]]))
            if err and not lacks:
                fail("N=%d: %s of %s failed with every acknowledged page in SRC"
                     % (n, what, fname(f)))

    where = "N=%d: fsync and close" % n
    def check_kept(head):  # pages SRC lacks now lacked when the report was made
        kept = ranges_after(open(log).read(), head)
        if covered(src_lacks(), kept):
            fail("N=%d: kept page %s not reported" % (n, covered(src_lacks(), kept)))

    def clean_end(when):  # SIGTERM: 0 within 10 s, SRC exactly what was acknowledged
        proc.send_signal(signal.SIGTERM)
        if wait_exit(proc, 10) != 0:
            fail("N=%d: %s, SIGTERM did not end the mount with 0" % (n, when))
        if src_exact():
            fail("N=%d: %s, SRC differs: %s" % (n, when, src_exact()))

    def forced_end(when):  # SIGTERM: non-zero within 10 s, naming what SRC lacks
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = wait_exit(proc, 12)
        if code is None or time.monotonic() - t0 > 10.5:
            fail("N=%d: SIGTERM %s did not end the mount within 10 s" % (n, when))
        if code == 0:
            fail("N=%d: SIGTERM %s: writes lost, and the mount exited 0" % (n, when))
        lost = ranges_after(open(log).read(), "lost:")
        if covered(src_lacks(), lost):
            fail("N=%d: lost page %s not reported" % (n, covered(src_lacks(), lost)))

    sync_or_close("fsync")
    sync_or_close("close")
    fds = [os.open(mnt + "/" + fname(f), os.O_RDONLY) for f in range(NF)]
    check_mount(fds, "opened again")
    for fd in fds:
        os.close(fd)
    lacks = src_lacks()

    where = "N=%d: ending the mount" % n
    if n in EXT and lacks:
        stop_reader()
        if subprocess.run(["umount", mnt]).returncode != 0:
            fail("N=%d: umount of the mount failed" % n)
        if not log_has("unmounted; writing back", 10):
            fail("N=%d: unmounted with SRC refusing: no report of what is kept" % n)
        time.sleep(1.2)  # a retry (every second)
        if proc.poll() is not None:
            fail("N=%d: unmounted with SRC refusing, the mount exited (%s)" % (n, proc.poll()))
        check_kept("unmounted; writing back")
        if n % 2 == 0:
            os.unlink(filler)
            if wait_exit(proc, 10) != 0:
                fail("N=%d: room made after the unmount: no write-back and exit 0" % n)
            if src_exact():
                fail("N=%d: after the write-back, SRC differs: %s" % (n, src_exact()))
            return refused, lacks
        forced_end("after the unmount")
        return refused, lacks

    if not lacks:
        stop_reader()
        clean_end("nothing dirty")
        return refused, lacks
    proc.send_signal(signal.SIGTERM)
    if not log_has("kept in the cache", 10) or proc.poll() is not None:
        fail("N=%d: SIGTERM with SRC refusing: no 'kept' report, or the mount left" % n)
    # The write-back may have taken some (pages SRC had room for already).
    check_kept("kept in the cache")
    fds = [os.open(mnt + "/" + fname(f), os.O_RDONLY) for f in range(NF)]
    check_mount(fds, "after SIGTERM")  # still serving, the acknowledged bytes with it
    if n % 2 == 0:
        os.unlink(filler)  # room again
        for fd in fds:
            os.fsync(fd)
            os.close(fd)
        stop_reader()
        clean_end("after a good fsync")
        return refused, lacks
    for fd in fds:
        os.close(fd)
    stop_reader()
    forced_end("again")
    return refused, lacks


with open(src + "/clean", "wb") as fh:
    for pg in range(CLEAN):
        fh.write(clean_page(pg, PS))
dog = threading.Timer(60, hung)
dog.start()
try:
    dd_repro()
except (OSError, subprocess.SubprocessError) as e:
    fail("dd into a full SRC: %s" % e)
dog.cancel()
total_refused = total_kept = 0
step = int(os.environ.get("VC_STOREFAIL_STEP", "1"))  # tests/CMakeLists.txt: sanitizer builds
for n in [n for n in range(65) if n % step == 0 or n in EXT]:
    dog = threading.Timer(60, hung)
    dog.start()
    try:
        refused, lacks = run(n)
    except OSError as e:  # a call through the mount that should have worked
        fail("%s: %s" % (where, e))
    dog.cancel()
    if re.search(r"Sanitizer|runtime error:", open(log).read()):
        fail("N=%d: a sanitizer's report" % n)  # exit status 1 is expected in some runs
    if os.path.ismount(mnt):
        fail("N=%d: still mounted after the mount exited" % n)
    total_refused += refused
    total_kept += len(lacks)
    remove([os.path.join(src, f) for f in [fname(f) for f in range(NF)] + ["filler"]])
if total_refused == 0 and total_kept == 0:
    fail("SRC never refused anything")
print("%s, GPU tier %s: N = 0..64 by %d and %s, %d writes refused, %d acknowledged pages kept "
      "past a refused fsync" % (mode, gpu, step, EXT, total_refused, total_kept))
PY
echo "fuse store failure ($mode, GPU tier $gpu): all checks passed"
