#!/usr/bin/env bash
# A tree through the mount and back with real tools: `cp -a` of a tree
# (files from empty to several MiB, subdirectories, a symlink, a hard link,
# an extended attribute, odd names) into the mount, `rsync -a --checksum`
# of it back out, both compared with the original by `diff -r`; the copy
# in SRC itself must equal it too (write-through: no unmount needed). Then
# the same in write-back, where SRC is compared after unmount, and a
# second mount reads the tree from a warm identity table: cached reads
# match, and the statistics show host-tier hits.
# Usage: fuse_copy.sh VRAMCACHE_BINARY
. "$(dirname "$0")/fuse_lib.sh"
need rsync rsync
tree=$dir/tree
mkdir -p "$tree/sub/deeper" "$tree/empty-dir"
head -c 0 /dev/urandom >"$tree/empty"
head -c 1 /dev/urandom >"$tree/one"
head -c 4095 /dev/urandom >"$tree/sub/page-minus-one"
head -c 4097 /dev/urandom >"$tree/sub/page-plus-one"
head -c $((3 << 20)) /dev/urandom >"$tree/sub/deeper/three-mib"
head -c $((5 << 20 | 123)) /dev/urandom >"$tree/five-mib-odd"
printf 'name with spaces\n' >"$tree/sub/a file, with: odd name"
ln -s ../one "$tree/sub/link-to-one"
ln "$tree/one" "$tree/sub/hardlink-to-one"
setfattr -n user.vc -v tested "$tree/one" 2>/dev/null || true
chmod 0640 "$tree/sub/page-minus-one"
touch -d '2001-02-03 04:05:06' "$tree/sub/page-plus-one"

for mode in write-through write-back; do
	rm -rf "${src:?}"/* "$dir/back"
	args=(--host-bytes 2M --gpu-bytes 4M)
	[ "$mode" = write-back ] && args+=(--write-back)
	start_mount "${args[@]}"
	cp -a "$tree" "$mnt/copy"
	diff -r "$tree" "$mnt/copy" || fail "$mode: cp -a into the mount differs"
	[ "$(stat -c %h "$mnt/copy/one")" = 2 ] || fail "$mode: the hard link was not kept"
	[ "$(readlink "$mnt/copy/sub/link-to-one")" = ../one ] || fail "$mode: symlink"
	[ "$(stat -c %a "$mnt/copy/sub/page-minus-one")" = 640 ] || fail "$mode: mode"
	[ "$(stat -c %Y "$mnt/copy/sub/page-plus-one")" = "$(stat -c %Y "$tree/sub/page-plus-one")" ] ||
		fail "$mode: mtime"
	if getfattr -n user.vc "$tree/one" >/dev/null 2>&1; then
		[ "$(getfattr --only-values -n user.vc "$mnt/copy/one")" = tested ] || fail "$mode: xattr"
	fi
	rsync -a --checksum "$mnt/copy/" "$dir/back/"
	diff -r "$tree" "$dir/back" || fail "$mode: rsync -a --checksum out of the mount differs"
	[ "$mode" = write-through ] && { diff -r "$tree" "$src/copy" || fail "$mode: SRC differs"; }
	stop_mount
	diff -r "$tree" "$src/copy" || fail "$mode: SRC differs after unmount"
done

# A second pass over one mount: the first read loads, the second hits.
start_mount --host-bytes 16M --gpu-bytes 16M --readahead 0
cat "$mnt/copy/five-mib-odd" >/dev/null
cmp "$tree/five-mib-odd" "$mnt/copy/five-mib-odd" || fail "cached read differs"
stats=$("$vc" stat "$mnt/copy/five-mib-odd")
echo "$stats"
python3 - "$stats" <<'PY' || fail "no host-tier hits on the second read"
import json, sys
s = json.loads(sys.argv[1])
assert s["read_bytes"] >= 2 * (5 << 20), s
assert s["host_hit_bytes"] >= (5 << 20), s
PY
stop_mount
echo "fuse_copy: ok"
