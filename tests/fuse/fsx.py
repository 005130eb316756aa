#!/usr/bin/env python3
"""fsx-style random operations on one file against a shadow in memory.

Usage: fsx.py FILE SRCFILE OPS SEED

FILE is the file under the mount, SRCFILE the same file in SRC. Each step
is one of: pwrite at a random offset (often past the end), pread, ftruncate
(shorter or longer), a read through mmap, a punched hole
(fallocate PUNCH_HOLE | KEEP_SIZE), fsync, or closing and reopening the
file (which revalidates it against SRC and must keep its cached pages).
Every read is compared with the shadow; at the end, after close, FILE and
SRCFILE must both equal the shadow. Exits 0, or 1 naming the step, the
operation and the first differing byte.
"""
import ctypes, errno, mmap, os, random, sys

path, srcpath, nops, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
MAXLEN = 1 << 20
rng = random.Random(seed)
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
PUNCH = 0x02 | 0x01  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
shadow = bytearray()
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
punch_ok = True
log = []


def die(step, what, got, want):
    for i in range(min(len(got), len(want))):
        if got[i] != want[i]:
            break
    else:
        i = min(len(got), len(want))
    print("fsx: step %d (%s): differs at byte %d of %d/%d (seed %d); last ops: %s"
          % (step, what, i, len(got), len(want), seed, log[-8:]), file=sys.stderr)
    sys.exit(1)


def rand_range():
    off = rng.randrange(0, MAXLEN)
    n = rng.choice([1, 7, 512, 4096, 4097, 65536, 200000, rng.randrange(1, 300000)])
    return off, n


for step in range(nops):
    op = rng.choices(["write", "read", "trunc", "mmap", "punch", "fsync", "reopen"],
                     [30, 25, 8, 15, 8, 4, 6])[0]
    if op == "write":
        off, n = rand_range()
        if rng.random() < 0.3:
            off = len(shadow) + rng.randrange(0, 10000)  # appends and gaps
        data = os.urandom(n)
        assert os.pwrite(fd, data, off) == n
        if off > len(shadow):
            shadow.extend(bytes(off - len(shadow)))
        shadow[off:off + n] = data
        log.append("write %d+%d" % (off, n))
    elif op == "read":
        off, n = rand_range()
        got = os.pread(fd, n, off)
        log.append("read %d+%d" % (off, n))
        if got != bytes(shadow[off:off + n]):
            die(step, "pread", got, shadow[off:off + n])
    elif op == "trunc":
        ns = rng.randrange(0, MAXLEN) if rng.random() < 0.5 else rng.randrange(0, len(shadow) + 1)
        os.ftruncate(fd, ns)
        if ns < len(shadow):
            del shadow[ns:]
        else:
            shadow.extend(bytes(ns - len(shadow)))
        log.append("trunc %d" % ns)
    elif op == "mmap":
        if not shadow:
            continue
        m = mmap.mmap(fd, len(shadow), mmap.MAP_SHARED, mmap.PROT_READ)
        off = rng.randrange(0, len(shadow))
        n = min(rng.randrange(1, 300000), len(shadow) - off)
        got = m[off:off + n]
        m.close()
        log.append("mmap %d+%d" % (off, n))
        if got != bytes(shadow[off:off + n]):
            die(step, "mmap read", got, shadow[off:off + n])
    elif op == "punch":
        if not punch_ok or not shadow:
            continue
        off, n = rand_range()
        if libc.fallocate(fd, PUNCH, off, n) != 0:
            e = ctypes.get_errno()
            if e in (errno.EOPNOTSUPP, errno.ENOSYS):
                punch_ok = False
                continue
            raise OSError(e, os.strerror(e))
        end = min(off + n, len(shadow))
        if off < end:
            shadow[off:end] = bytes(end - off)
        log.append("punch %d+%d" % (off, n))
    elif op == "fsync":
        os.fsync(fd)
        log.append("fsync")
    else:
        os.close(fd)
        fd = os.open(path, os.O_RDWR)
        log.append("reopen")

size = os.fstat(fd).st_size
if size != len(shadow):
    print("fsx: size %d, shadow %d (seed %d)" % (size, len(shadow), seed), file=sys.stderr)
    sys.exit(1)
os.close(fd)
for p in (path, srcpath):
    with open(p, "rb") as f:
        got = f.read()
    if got != bytes(shadow):
        die(nops, "final compare of " + p, got, shadow)
print("fsx: %d ops, seed %d, final size %d, punch %s" % (nops, seed, len(shadow),
      "tested" if punch_ok else "unsupported by SRC"))
