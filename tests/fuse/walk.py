#!/usr/bin/env python3
"""A large tree for walks through the mount (tests/fuse_walk.sh).

Usage:
  walk.py make DIR N     N small files (each holds its own name and a few
                         hundred bytes that follow from it) in N/100 + 1
                         subdirectories, and a symlink every 100 files
  walk.py list ROOT      every object under ROOT, sorted, one a line: its
                         path, type, mode, size, link target and a digest
                         of its bytes (every file read whole)
Exits 0, or 1 naming the first object that could not be read.
"""
import hashlib, os, stat, sys


def make(root, n):
    for i in range(n):
        d = os.path.join(root, "d%03d" % (i // 100))
        os.makedirs(d, exist_ok=True)
        name = "f%06d" % i
        with open(os.path.join(d, name), "wb") as f:
            f.write((name * (1 + i % 37)).encode())
        if i % 100 == 0:
            os.symlink(name, os.path.join(d, "l%06d" % i))


def listing(root):
    out = []
    for d, dirs, names in os.walk(root):
        for n in dirs + names:
            p = os.path.join(d, n)
            st = os.lstat(p)
            line = [os.path.relpath(p, root), "%o" % st.st_mode]
            if stat.S_ISLNK(st.st_mode):
                line.append(os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    line += [str(st.st_size), hashlib.sha1(f.read()).hexdigest()]
            out.append(" ".join(line))
    for line in sorted(out):
        print(line)


if __name__ == "__main__":
    try:
        if sys.argv[1] == "make":
            make(sys.argv[2], int(sys.argv[3]))
        elif sys.argv[1] == "list":
            listing(sys.argv[2])
        else:
            sys.exit(__doc__)
    except OSError as e:
        print("walk.py: %s" % e, file=sys.stderr)
        sys.exit(1)
