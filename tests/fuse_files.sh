#!/usr/bin/env bash
# Many more files than the engine has volumes (the mount once cached at
# most 1023), with fewer fds than files: a tree of VC_FILES_N (5000)
# small files and 3 large ones in SRC, read through a mount limited to 16
# open fds of SRC's files and compared byte for byte, twice: the second
# pass must read nothing from SRC (every file's pages stayed cached: the
# cache is effective past the old limit), and the identity table must know
# every file. Then, with 8 fds: 300 files open at once, read, written
# through their fds and read again, in random order (tests/fuse/files.py);
# `cp -a` of the tree into the mount in write-through and write-back with
# 64 files per volume (79 volumes) and diff -r; renames, unlinks with the
# file still open, truncates, and files replaced or rewritten in SRC
# behind the mount's back, each read fresh; and --max-files 100 (idle
# identities evicted) still reads right.
# Usage: fuse_files.sh VRAMCACHE_BINARY
. "$(dirname "$0")/fuse_lib.sh"
need python3 python3
py() { python3 "$(dirname "$0")/fuse/files.py" "$@"; }
n=${VC_FILES_N:-5000}
seed=${VC_FILES_SEED:-$RANDOM}
tree=$dir/tree
py make "$tree" "$n" "$seed"
cp -a "$tree/." "$src/"
stat_of() { "$vc" stat "$1"; }
# json FIELD-PATH: a number out of the root's statistics.
root_stat() {
	stat_of "$mnt" | python3 -c 'import json, sys
s = json.load(sys.stdin)
for k in sys.argv[1].split("."): s = s[k]
print(s)' "$1"
}

# 1. Read twice through 16 fds; the second pass is all hits.
start_mount --host-bytes 128M --gpu-bytes 0 --max-fds 16 --readahead 0 --max-files $((2 * n))
diff -r "$tree" "$mnt" || fail "first read of the tree differs (seed $seed)"
before=$(root_stat cache.backing_read_bytes)
diff -r "$tree" "$mnt" || fail "second read of the tree differs (seed $seed)"
after=$(root_stat cache.backing_read_bytes)
known=$(root_stat identities.known)
fds=$(root_stat identities.fds_open)
echo "files $n: identities $known, SRC bytes read by the second pass $((after - before)), fds open $fds"
[ "$known" -ge "$n" ] || fail "only $known identities for $n files"
[ "$after" -eq "$before" ] || fail "the second pass read $((after - before)) bytes of SRC: pages of files past the first ones were not kept"
[ "$fds" -le 16 ] || fail "$fds fds open, past --max-fds 16"
# Every directory's files were read from the host tier on the second
# pass: their host-hit bytes cover their sizes (files served uncached, as
# past the old limit, have none; nor do they count as SRC reads above).
for sub in "$tree"/*/; do
	sub=$(basename "$sub")
	want=$(find "$tree/$sub" -maxdepth 1 -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
	hit=$(stat_of "$mnt/$sub" | python3 -c 'import json, sys; print(json.load(sys.stdin)["host_hit_bytes"])')
	[ "$hit" -ge "$want" ] || fail "$sub: $hit bytes hit the host tier on the second pass, want $want"
done
stop_mount

# 2. More files open at once than fds allowed, read and written.
start_mount --host-bytes 16M --gpu-bytes 16M --max-fds 8
py open-many "$mnt" "$src" 300 "$seed" || fail "many open files (seed $seed)"
stop_mount
rm -rf "${src:?}"/* && cp -a "$tree/." "$src/"

# 3. cp -a into the mount, both write modes, many volumes, few fds.
for mode in write-through write-back; do
	args=(--host-bytes 8M --gpu-bytes 8M --max-fds 16 --slots-per-volume 64)
	[ "$mode" = write-back ] && args+=(--write-back)
	start_mount "${args[@]}"
	cp -a "$tree" "$mnt/copy"
	diff -r "$tree" "$mnt/copy" || fail "$mode: cp -a into the mount differs"
	vols=$(root_stat identities.volumes)
	[ "$vols" -gt 1 ] || fail "$mode: $vols files volume(s) for $n files at 64 a volume"
	stop_mount
	diff -r "$tree" "$src/copy" || fail "$mode: SRC differs after unmount"
	rm -rf "$src/copy"
done

# 4. Names and SRC changing under cached files, with 4 fds.
for mode in write-through write-back; do
	args=(--host-bytes 8M --gpu-bytes 8M --max-fds 4 --attr-timeout 0)
	[ "$mode" = write-back ] && args+=(--write-back)
	start_mount "${args[@]}"
	d=d07
	cat "$mnt/$d"/* >/dev/null # all cached
	# A rename through the mount: the pages follow the file.
	f=$(ls "$src/$d" | head -1)
	mv "$mnt/$d/$f" "$mnt/$d/renamed"
	cmp "$tree/$d/$f" "$mnt/$d/renamed" || fail "$mode: renamed file differs"
	# Unlinked through the mount while open: the open fd still reads it,
	# a new file of the name is new.
	g=$(ls "$src/$d" | sed -n 2p)
	exec 7<"$mnt/$d/$g"
	rm "$mnt/$d/$g"
	head -c 7000 /dev/urandom >"$dir/new" && cp "$dir/new" "$mnt/$d/$g"
	cmp "$dir/new" "$mnt/$d/$g" || fail "$mode: new file of an unlinked name differs"
	cmp - "$tree/$d/$g" <&7 || fail "$mode: the unlinked file's open fd reads other bytes"
	exec 7<&-
	# Truncated through the mount, shorter then longer.
	h=$(ls "$src/$d" | sed -n 3p)
	truncate -s 100 "$mnt/$d/$h" && truncate -s 9000 "$mnt/$d/$h"
	{ head -c 100 "$tree/$d/$h"; head -c $((9000 - $(stat -c %s "$tree/$d/$h" | awk '{print ($1 < 100 ? $1 : 100)}'))) /dev/zero; } >"$dir/want"
	cmp "$dir/want" "$mnt/$d/$h" || fail "$mode: truncated file differs"
	# Replaced in SRC by rename, rewritten in place, and deleted then
	# created anew (SRC may reuse the inode number), behind the mount.
	for k in 4 5 6; do
		x=$(ls "$src/$d" | sed -n ${k}p)
		cat "$mnt/$d/$x" >/dev/null
		head -c $((3000 + k)) /dev/urandom >"$dir/other"
		case $k in
		4) cp "$dir/other" "$src/$d/.tmp" && mv "$src/$d/.tmp" "$src/$d/$x" ;;
		5) cp "$dir/other" "$src/$d/$x" ;;
		6) rm "$src/$d/$x" && cp "$dir/other" "$src/$d/$x" ;;
		esac
		cmp "$dir/other" "$mnt/$d/$x" || fail "$mode: change $k in SRC read stale"
	done
	stop_mount
	rm -rf "${src:?}"/* && cp -a "$tree/." "$src/"
done

# 5. Fewer identities kept than files: evictions, still right.
start_mount --host-bytes 8M --gpu-bytes 8M --max-files 100 --max-fds 8
diff -r "$tree" "$mnt" || fail "with --max-files 100 the tree differs"
diff -r "$tree" "$mnt" || fail "with --max-files 100 a second read differs"
evicted=$(root_stat identities.evicted)
[ "$evicted" -gt 0 ] || fail "no identity evicted with --max-files 100"
stop_mount
echo "fuse_files: ok ($n files, seed $seed)"
