#!/usr/bin/env python3
"""pjdfstest-style checks of the operations that pass through the mount
(tests/fuse_posix.sh): run the same operations on the mount and on a twin
tree on the host file system, and compare what each returns (errno) and
the state it leaves.

Usage:
  posix.py setup ROOT UID GID    the fixture (as root)
  posix.py root ROOT             operations as root
  posix.py user ROOT             operations as an unprivileged user (the
                                 fixture's UID; run under setpriv)
  posix.py tree ROOT             the state of every object under ROOT
Prints one line per operation: its name, its result (ok or the errno's
name) and the state of the paths it touches (type, mode, owner, size,
links, a digest of the bytes, the link's target; mtime where the operation
sets it). No inode numbers or times that the operation does not set.
"""
import ctypes, errno, hashlib, os, stat, sys

libc = ctypes.CDLL(None, use_errno=True)
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
LONG = "n" * 256  # past NAME_MAX


def renameat2(a, b, flags):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), flags) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def state(p, times=False):
    try:
        st = os.lstat(p)
    except OSError as e:
        return "%s:%s" % (os.path.basename(p), errno.errorcode[e.errno])
    s = [os.path.basename(p), "%o" % st.st_mode, "%d:%d" % (st.st_uid, st.st_gid),
         "n%d" % st.st_nlink]
    if stat.S_ISREG(st.st_mode):
        s.append("%d" % st.st_size)
        try:
            with open(p, "rb") as f:
                s.append(hashlib.sha1(f.read()).hexdigest()[:12])
        except OSError as e:
            s.append(errno.errorcode[e.errno])
    elif stat.S_ISLNK(st.st_mode):
        s.append("->" + os.readlink(p))
    if times:
        s.append("m%d.%09d" % (st.st_mtime_ns // 10**9, st.st_mtime_ns % 10**9))
    return ":".join(s)


class Run:
    def __init__(self, root):
        self.root = root

    def p(self, rel):
        return os.path.join(self.root, rel)

    def op(self, name, fn, *paths, times=False):
        try:
            r = fn()
            res = "ok" if r is None or isinstance(r, int) else "ok=%r" % (r,)
        except OSError as e:
            res = errno.errorcode.get(e.errno, str(e.errno))
        print("%-40s %-14s %s" % (name, res, " ".join(state(self.p(x), times) for x in paths)))


def setup(root, uid, gid):
    os.chdir(root)
    for d, m in [("d", 0o755), ("d/sub", 0o755), ("d/e", 0o755), ("sticky", 0o1777),
                 ("ro", 0o555), ("noexec", 0o644), ("mine", 0o755), ("sgid", 0o2777)]:
        os.mkdir(d)
        os.chmod(d, m)
    for f, m, data in [("d/f", 0o644, b"hello"), ("d/g", 0o644, b"gg"), ("d/sub/x", 0o644, b"x"),
                       ("sticky/rootf", 0o666, b"r"), ("sticky/userf", 0o644, b"u"),
                       ("ro/f", 0o666, b"ro"), ("noexec/f", 0o644, b"n"), ("d/none", 0o000, b"0"),
                       ("d/wr", 0o666, b"w"), ("mine/f", 0o644, b"m"), ("d/nw", 0o644, b"nw")]:
        with open(f, "wb") as h:
            h.write(data)
        os.chmod(f, m)
    os.symlink("f", "d/l")
    os.symlink("nope", "d/dl")
    os.chmod("noexec", 0o644)
    os.chown("sticky/userf", uid, gid)
    os.chown("mine", uid, gid)
    os.chown("mine/f", uid, gid)
    os.setxattr("d/f", "user.a", b"1")


def as_root(r):
    p = r.p
    # chmod, chown
    r.op("chmod f 600", lambda: os.chmod(p("d/f"), 0o600), "d/f")
    r.op("chmod missing", lambda: os.chmod(p("d/nope"), 0o600))
    r.op("chmod through a file", lambda: os.chmod(p("d/f/x"), 0o600))
    r.op("chmod setgid dir", lambda: os.chmod(p("d/sub"), 0o2755), "d/sub")
    r.op("chown f 1000:1000", lambda: os.chown(p("d/f"), 1000, 1000), "d/f")
    r.op("chown f -1:2000", lambda: os.chown(p("d/f"), -1, 2000), "d/f")
    r.op("lchown symlink", lambda: os.chown(p("d/l"), 1000, 1000, follow_symlinks=False), "d/l", "d/f")
    r.op("chown through symlink", lambda: os.chown(p("d/l"), 0, 0), "d/l", "d/f")
    # link
    r.op("link f f2", lambda: os.link(p("d/f"), p("d/f2")), "d/f", "d/f2")
    r.op("link onto existing", lambda: os.link(p("d/f"), p("d/g")), "d/g")
    r.op("link missing", lambda: os.link(p("d/nope"), p("d/x")), "d/x")
    r.op("link a directory", lambda: os.link(p("d/sub"), p("d/sub2")), "d/sub2")
    r.op("link under a file", lambda: os.link(p("d/f"), p("d/f/x")))
    r.op("link long name", lambda: os.link(p("d/f"), p("d/" + LONG)))
    r.op("link a symlink", lambda: os.link(p("d/l"), p("d/l2"), follow_symlinks=False), "d/l2")
    # symlink
    r.op("symlink", lambda: os.symlink("some/target", p("d/s1")), "d/s1")
    r.op("symlink onto existing", lambda: os.symlink("t", p("d/g")), "d/g")
    r.op("symlink long name", lambda: os.symlink("t", p("d/" + LONG)))
    r.op("symlink long target", lambda: os.symlink("t" * 5000, p("d/s2")), "d/s2")
    # rename
    r.op("rename g g2", lambda: os.rename(p("d/g"), p("d/g2")), "d/g", "d/g2")
    r.op("rename missing", lambda: os.rename(p("d/nope"), p("d/y")), "d/y")
    r.op("rename dir onto file", lambda: os.rename(p("d/sub"), p("d/f2")), "d/sub", "d/f2")
    r.op("rename file onto dir", lambda: os.rename(p("d/f2"), p("d/e")), "d/f2", "d/e")
    r.op("rename dir onto non-empty", lambda: os.rename(p("d/e"), p("d/sub")), "d/e", "d/sub")
    r.op("rename dir into itself", lambda: os.rename(p("d/sub"), p("d/sub/x2")), "d/sub")
    r.op("rename long name", lambda: os.rename(p("d/g2"), p("d/" + LONG)), "d/g2")
    r.op("rename noreplace onto existing", lambda: renameat2(p("d/g2"), p("d/f2"), RENAME_NOREPLACE),
         "d/g2", "d/f2")
    r.op("rename noreplace", lambda: renameat2(p("d/g2"), p("d/g3"), RENAME_NOREPLACE), "d/g2", "d/g3")
    r.op("rename exchange", lambda: renameat2(p("d/g3"), p("d/wr"), RENAME_EXCHANGE), "d/g3", "d/wr")
    r.op("rename exchange missing", lambda: renameat2(p("d/g3"), p("d/zz"), RENAME_EXCHANGE), "d/g3")
    r.op("rename file onto hard link", lambda: os.rename(p("d/f"), p("d/f2")), "d/f", "d/f2")
    r.op("rename empty dir onto empty dir", lambda: (os.mkdir(p("d/e2")), os.rename(p("d/e2"), p("d/e")))[1],
         "d/e2", "d/e")
    # unlink, rmdir, mkdir
    r.op("unlink a directory", lambda: os.unlink(p("d/sub")), "d/sub")
    r.op("unlink missing", lambda: os.unlink(p("d/nope")))
    r.op("unlink under a file", lambda: os.unlink(p("d/f/x")))
    r.op("unlink symlink", lambda: os.unlink(p("d/l2")), "d/l2", "d/f")
    r.op("rmdir a file", lambda: os.rmdir(p("d/f2")), "d/f2")
    r.op("rmdir non-empty", lambda: os.rmdir(p("d/sub")), "d/sub")
    r.op("rmdir missing", lambda: os.rmdir(p("d/nope")))
    r.op("rmdir dot", lambda: os.rmdir(p("d/e/.")), "d/e")
    r.op("rmdir empty", lambda: os.rmdir(p("d/e")), "d/e")
    r.op("mkdir existing", lambda: os.mkdir(p("d/sub")), "d/sub")
    r.op("mkdir long name", lambda: os.mkdir(p("d/" + LONG)))
    r.op("mkdir mode 0712", lambda: os.mkdir(p("d/m"), 0o712), "d/m")
    r.op("mkdir in setgid dir", lambda: os.mkdir(p("sgid/dd")), "sgid/dd")
    r.op("mkfifo", lambda: os.mkfifo(p("d/fifo"), 0o640), "d/fifo")
    r.op("mkfifo existing", lambda: os.mkfifo(p("d/fifo")), "d/fifo")
    # open flags
    O = os.O_WRONLY | os.O_CREAT
    r.op("open excl existing", lambda: os.close(os.open(p("d/f2"), O | os.O_EXCL)), "d/f2")
    r.op("open excl new 0640", lambda: os.close(os.open(p("d/new"), O | os.O_EXCL, 0o640)), "d/new")
    r.op("open excl dangling symlink", lambda: os.close(os.open(p("d/dl"), O | os.O_EXCL)), "d/dl", "d/nope")
    r.op("open creat dangling symlink", lambda: os.close(os.open(p("d/dl"), O)), "d/dl", "d/nope")
    r.op("open trunc", lambda: os.close(os.open(p("d/f2"), os.O_WRONLY | os.O_TRUNC)), "d/f2")

    def append():
        fd = os.open(p("d/g3"), os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"more")
        os.lseek(fd, 0, 0)
        os.write(fd, b"end")
        os.close(fd)
    r.op("open append", append, "d/g3")
    r.op("open directory on a file", lambda: os.close(os.open(p("d/g3"), os.O_RDONLY | os.O_DIRECTORY)))
    r.op("open directory", lambda: os.close(os.open(p("d/sub"), os.O_RDONLY | os.O_DIRECTORY)))
    r.op("open nofollow symlink", lambda: os.close(os.open(p("d/l"), os.O_RDONLY | os.O_NOFOLLOW)))
    r.op("open write a directory", lambda: os.close(os.open(p("d/sub"), os.O_WRONLY)))
    r.op("open missing", lambda: os.close(os.open(p("d/nope2"), os.O_RDONLY)))
    r.op("open creat long name", lambda: os.close(os.open(p("d/" + LONG), O)))
    r.op("open creat under a file", lambda: os.close(os.open(p("d/g3/x"), O)))
    r.op("open excl creat directory", lambda: os.close(os.open(p("d/sub"), O | os.O_EXCL)))
    r.op("open fifo nonblock write", lambda: os.close(os.open(p("d/fifo"), os.O_WRONLY | os.O_NONBLOCK)))
    # truncate
    r.op("truncate grow", lambda: os.truncate(p("d/g3"), 10000), "d/g3")
    r.op("truncate shrink", lambda: os.truncate(p("d/g3"), 3), "d/g3")
    r.op("truncate negative", lambda: os.truncate(p("d/g3"), -1), "d/g3")
    r.op("truncate a directory", lambda: os.truncate(p("d/sub"), 0))
    r.op("truncate a fifo", lambda: os.truncate(p("d/fifo"), 0))
    # utimens
    t = (1000000000, 123456789)
    r.op("utimens", lambda: os.utime(p("d/g3"), ns=(t[0] * 10**9 + t[1], 2 * 10**9 + 5)), "d/g3", times=True)
    r.op("utimens symlink nofollow", lambda: os.utime(p("d/l"), ns=(5, 7 * 10**9), follow_symlinks=False),
         "d/l", times=True)
    r.op("utimens missing", lambda: os.utime(p("d/nope2"), ns=(1, 1)))
    r.op("utimens dir", lambda: os.utime(p("d/sub"), ns=(3 * 10**9, 4 * 10**9)), "d/sub", times=True)
    # xattrs
    r.op("getxattr", lambda: os.getxattr(p("d/f2"), "user.a"), "d/f2")
    r.op("getxattr missing", lambda: os.getxattr(p("d/f2"), "user.none"))
    r.op("setxattr create existing", lambda: os.setxattr(p("d/f2"), "user.a", b"2", os.XATTR_CREATE))
    r.op("setxattr replace missing", lambda: os.setxattr(p("d/f2"), "user.b", b"2", os.XATTR_REPLACE))
    r.op("setxattr replace", lambda: os.setxattr(p("d/f2"), "user.a", b"3", os.XATTR_REPLACE))
    r.op("getxattr replaced", lambda: os.getxattr(p("d/f2"), "user.a"))
    r.op("setxattr long name", lambda: os.setxattr(p("d/f2"), "user." + "x" * 300, b"1"))
    r.op("setxattr on symlink", lambda: os.setxattr(p("d/l"), "user.a", b"1", follow_symlinks=False))
    r.op("getxattr on symlink", lambda: os.getxattr(p("d/l"), "user.a", follow_symlinks=False))
    r.op("setxattr bad namespace", lambda: os.setxattr(p("d/f2"), "bogus.a", b"1"))
    r.op("setxattr on dir", lambda: os.setxattr(p("d/sub"), "user.d", b"1"))
    r.op("listxattr", lambda: sorted(os.listxattr(p("d/f2"))))
    r.op("listxattr dir", lambda: sorted(os.listxattr(p("d/sub"))))
    r.op("removexattr missing", lambda: os.removexattr(p("d/f2"), "user.none"))
    r.op("removexattr", lambda: os.removexattr(p("d/f2"), "user.a"))
    r.op("listxattr after", lambda: sorted(os.listxattr(p("d/f2"))))


def as_user(r):
    p = r.p
    r.op("u chmod root's file", lambda: os.chmod(p("d/wr"), 0o600), "d/wr")
    r.op("u chmod own file", lambda: os.chmod(p("mine/f"), 0o600), "mine/f")
    r.op("u chmod own setgid foreign group", lambda: os.chmod(p("mine/f"), 0o2644), "mine/f")
    r.op("u chown own file to root", lambda: os.chown(p("mine/f"), 0, -1), "mine/f")
    r.op("u chown own file -1:-1", lambda: os.chown(p("mine/f"), -1, -1), "mine/f")
    r.op("u chgrp own file to root's", lambda: os.chown(p("mine/f"), -1, 0), "mine/f")
    r.op("u unlink root's in sticky", lambda: os.unlink(p("sticky/rootf")), "sticky/rootf")
    r.op("u rename root's in sticky", lambda: os.rename(p("sticky/rootf"), p("sticky/r2")), "sticky/rootf")
    r.op("u rename own in sticky", lambda: os.rename(p("sticky/userf"), p("sticky/u2")), "sticky/u2")
    r.op("u rename own onto root's in sticky", lambda: os.rename(p("sticky/u2"), p("sticky/rootf")),
         "sticky/u2", "sticky/rootf")
    r.op("u unlink own in sticky", lambda: os.unlink(p("sticky/u2")), "sticky/u2")
    r.op("u create in sticky", lambda: os.close(os.open(p("sticky/new"), os.O_WRONLY | os.O_CREAT, 0o644)),
         "sticky/new")
    r.op("u mkdir in sticky", lambda: os.mkdir(p("sticky/dir")), "sticky/dir")
    r.op("u symlink in sticky", lambda: os.symlink("x", p("sticky/sl")), "sticky/sl")
    r.op("u mkfifo in sticky", lambda: os.mkfifo(p("sticky/ff")), "sticky/ff")
    r.op("u create in setgid dir", lambda: os.close(os.open(p("sgid/uf"), os.O_WRONLY | os.O_CREAT, 0o664)),
         "sgid/uf")
    r.op("u mkdir in setgid dir", lambda: os.mkdir(p("sgid/ud")), "sgid/ud")
    r.op("u create in read-only dir", lambda: os.close(os.open(p("ro/new"), os.O_WRONLY | os.O_CREAT)), "ro/new")
    r.op("u unlink in read-only dir", lambda: os.unlink(p("ro/f")), "ro/f")
    r.op("u rename in read-only dir", lambda: os.rename(p("ro/f"), p("ro/g")), "ro/f")
    r.op("u mkdir in read-only dir", lambda: os.mkdir(p("ro/dd")))
    r.op("u write into read-only dir's file", lambda: os.truncate(p("ro/f"), 1), "ro/f")
    r.op("u open mode 000", lambda: os.close(os.open(p("d/none"), os.O_RDONLY)))
    r.op("u stat in unsearchable dir", lambda: os.stat(p("noexec/f")))
    r.op("u list unsearchable dir", lambda: sorted(os.listdir(p("noexec"))))
    r.op("u open write root's 0644", lambda: os.close(os.open(p("d/nw"), os.O_WRONLY)))
    r.op("u truncate root's 0644", lambda: os.truncate(p("d/nw"), 0), "d/nw")
    r.op("u utimens set on writable foreign", lambda: os.utime(p("d/wr"), ns=(1, 2 * 10**9)), "d/wr")
    r.op("u utimens now on writable foreign", lambda: os.utime(p("d/wr")), "d/wr")
    r.op("u utimens now on foreign 0644", lambda: os.utime(p("d/nw")), "d/nw")
    r.op("u utimens set on own", lambda: os.utime(p("mine/f"), ns=(1, 3 * 10**9)), "mine/f", times=True)
    r.op("u link root's file", lambda: os.link(p("d/nw"), p("sticky/ln")), "sticky/ln")
    r.op("u setxattr foreign 0644", lambda: os.setxattr(p("d/nw"), "user.u", b"1"))
    r.op("u setxattr writable foreign", lambda: os.setxattr(p("d/wr"), "user.u", b"1"))
    r.op("u getxattr writable foreign", lambda: os.getxattr(p("d/wr"), "user.u"))
    r.op("u setxattr trusted", lambda: os.setxattr(p("mine/f"), "trusted.t", b"1"))
    r.op("u setxattr own", lambda: os.setxattr(p("mine/f"), "user.o", b"1"))
    r.op("u create in own dir 0600", lambda: os.close(os.open(p("mine/n"), os.O_WRONLY | os.O_CREAT, 0o600)),
         "mine/n")
    r.op("u rmdir in sticky foreign", lambda: os.rmdir(p("sticky/dir")), "sticky/dir")


def tree(root):
    out = []
    for d, dirs, names in os.walk(root):
        for n in sorted(dirs + names):
            pth = os.path.join(d, n)
            s = state(pth).split(":")
            s[0] = os.path.relpath(pth, root)
            out.append(":".join(s))
    print("\n".join(sorted(out)))


if __name__ == "__main__":
    cmd, root = sys.argv[1], sys.argv[2]
    os.umask(0o022)
    if cmd == "setup":
        setup(root, int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "root":
        as_root(Run(root))
    elif cmd == "user":
        as_user(Run(root))
    elif cmd == "tree":
        tree(root)
    else:
        sys.exit(__doc__)
