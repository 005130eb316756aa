#!/usr/bin/env bash
# pjdfstest-style checks of what passes through: the same operations
# (tests/fuse/posix.py: chmod, chown, link, symlink, rename with
# NOREPLACE and EXCHANGE, unlink, rmdir, mkdir, mkfifo, open with O_EXCL,
# O_TRUNC, O_APPEND, O_DIRECTORY, O_NOFOLLOW, truncate, utimens, xattrs;
# ENOENT, EEXIST, ENOTDIR, EISDIR, ENOTEMPTY, ENAMETOOLONG, EINVAL, EACCES,
# EPERM in sticky, setgid and read-only directories) run as root and then
# as an unprivileged user (setpriv) on the mount and on a twin tree on the
# host file system SRC lives on; every result (errno) and the state each
# operation leaves (type, mode, owner, size, links, bytes, link target;
# the times it sets) must be the same, and so must the whole trees after.
# Usage: fuse_posix.sh VRAMCACHE_BINARY
. "$(dirname "$0")/fuse_lib.sh"
need python3 python3
need setpriv util-linux
py() { python3 "$(dirname "$0")/fuse/posix.py" "$@"; }
user=65534
twin=$dir/twin
mkdir "$twin"
chmod 755 "$src" "$twin" "$dir"
# The user's python: one the user may run (not root's own, e.g. pyenv's),
# and the script where the user may read it.
cp "$(dirname "$0")/fuse/posix.py" "$dir/posix.py"
asuser() { setpriv --reuid=$user --regid=$user --clear-groups "$@"; }
userpy=
for c in /usr/bin/python3 /usr/local/bin/python3 "$(command -v python3)"; do
	if [ -x "$c" ] && asuser "$c" -c '' 2>/dev/null; then userpy=$c; break; fi
done
[ -n "$userpy" ] || skip "no python3 that user $user may run"
start_mount --allow-other --attr-timeout 0
for root in "$twin" "$mnt"; do
	tag=$([ "$root" = "$mnt" ] && echo mnt || echo twin)
	py setup "$root" $user $user
	py root "$root" >"$dir/$tag.root"
	asuser "$userpy" "$dir/posix.py" user "$root" >"$dir/$tag.user"
	py tree "$root" >"$dir/$tag.tree"
done
stop_mount
py tree "$src" >"$dir/src.tree"
bad=0
for part in root user tree; do
	if ! diff -u "$dir/twin.$part" "$dir/mnt.$part" >"$dir/diff.$part"; then
		echo "--- $part: the host file system (-) and the mount (+) differ:" >&2
		cat "$dir/diff.$part" >&2
		bad=1
	fi
done
diff -u "$dir/mnt.tree" "$dir/src.tree" >&2 || { echo "--- SRC after unmount differs from the mount's view" >&2; bad=1; }
[ "$bad" -eq 0 ] || fail "the mount's results differ from the host file system's"
echo "fuse_posix: ok ($(wc -l <"$dir/twin.root") operations as root, $(wc -l <"$dir/twin.user") as a user, same as the host's)"
