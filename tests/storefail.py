"""What the store-failure tests share (nbd_storefail.sh, fuse_storefail.sh;
each runs its Python with this directory on PYTHONPATH)."""
import os
import subprocess


def leave_free(fs, n, filler):
    """Fills the file system of directory fs with the file filler (fallocate)
    until exactly n blocks are free: its n+1st new block is refused (ENOSPC)."""
    st = os.statvfs(fs)
    fd = os.open(filler, os.O_CREAT | os.O_WRONLY, 0o600)
    os.posix_fallocate(fd, 0, (st.f_bavail - n) * st.f_frsize)
    os.close(fd)
    assert os.statvfs(fs).f_bavail == n, "%s should have %d free blocks" % (fs, n)


def wait_exit(proc, secs):
    """proc's exit status, or None while it still runs secs later."""
    try:
        return proc.wait(secs)
    except subprocess.TimeoutExpired:
        return None


def clean_page(pg, size):
    """The bytes of page pg (of size bytes) of the data the tests never write."""
    return bytes([(pg * 7 + 1) & 255]) * size


def remove(paths):
    """Removes those of paths that exist."""
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
