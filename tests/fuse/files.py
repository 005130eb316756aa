#!/usr/bin/env python3
"""Many files through the mount at once (tests/fuse_files.sh).

Usage:
  files.py make DIR N SEED       N small files (0 B to 20 KiB, in 50
                                 subdirectories) and 3 large ones (1 to 3
                                 MiB, odd sizes), random bytes
  files.py open-many MNT SRC N SEED
                                 opens N files of MNT's tree at once (more
                                 than the mount's --max-fds), then in random
                                 order reads each whole, overwrites a random
                                 range of some (through the open fd) and
                                 reads them again, every read compared with
                                 what SRC must hold; then closes them and
                                 compares each file in SRC
Exits 0, or 1 naming the file and the first differing byte.
"""
import os, random, sys


def make(root, n, seed):
    rng = random.Random(seed)
    for i in range(n):
        d = os.path.join(root, "d%02d" % (i % 50))
        os.makedirs(d, exist_ok=True)
        size = rng.choice([0, 1, 4095, 4096, 4097, rng.randrange(1, 20 << 10)])
        with open(os.path.join(d, "f%05d" % i), "wb") as f:
            f.write(rng.randbytes(size))
    big = os.path.join(root, "big")
    os.makedirs(big, exist_ok=True)
    for i, size in enumerate([(1 << 20) + 1, (2 << 20) - 7, (3 << 20) + 4099]):
        with open(os.path.join(big, "b%d" % i), "wb") as f:
            f.write(rng.randbytes(size))


def files_of(root):
    out = []
    for d, _, names in os.walk(root):
        for n in names:
            out.append(os.path.relpath(os.path.join(d, n), root))
    return sorted(out)


def check(what, got, want):
    if got == want:
        return
    i = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]),
             min(len(got), len(want)))
    print("FAIL: %s: %d bytes, want %d; first difference at byte %d" %
          (what, len(got), len(want), i), file=sys.stderr)
    sys.exit(1)


def read_all(fd):
    os.lseek(fd, 0, os.SEEK_SET)
    out = bytearray()
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return bytes(out)
        out += b


def open_many(mnt, src, n, seed):
    rng = random.Random(seed)
    names = files_of(src)
    rng.shuffle(names)
    names = names[:n]
    want = {}
    for name in names:
        with open(os.path.join(src, name), "rb") as f:
            want[name] = bytearray(f.read())
    fds = {name: os.open(os.path.join(mnt, name), os.O_RDWR) for name in names}
    for rnd in range(2):
        order = list(names)
        rng.shuffle(order)
        for name in order:
            check("%s (round %d, read)" % (name, rnd), read_all(fds[name]), bytes(want[name]))
            if rng.random() < 0.3:
                w = want[name]
                off = rng.randrange(0, len(w) + 5000)
                data = rng.randbytes(rng.randrange(1, 9000))
                os.pwrite(fds[name], data, off)
                if off > len(w):
                    w += bytes(off - len(w))
                w[off:off + len(data)] = data
                check("%s (round %d, after a write)" % (name, rnd), read_all(fds[name]),
                      bytes(w))
    for name in names:
        os.close(fds[name])
    for name in names:
        with open(os.path.join(src, name), "rb") as f:
            check("%s in SRC after close" % name, f.read(), bytes(want[name]))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "open-many":
        open_many(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        sys.exit("usage: see the docstring")
