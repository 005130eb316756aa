# libvramcache.so exports the public API and nothing else: its dynamic
# symbols are exactly the functions include/vramcache.h declares, each under
# a version node of src/vramcache.map, and its SONAME carries the major
# version. A helper that loses its `static`, an internal vc_* function, a
# symbol of a library linked in (the CUDA runtime) or a header function
# missing from the map fails here.
# Usage: bash pkg_symbols.sh LIBVRAMCACHE.so HEADER MAP SONAME
set -euo pipefail
lib=$1 header=$2 map=$3 soname=$4
skip() { echo "SKIP: $*" >&2; exit 77; }
command -v nm >/dev/null || skip "nm not found (Debian package: binutils)"
command -v readelf >/dev/null || skip "readelf not found (Debian package: binutils)"
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/vc-sym-XXXXXX")
trap 'rm -rf "$dir"' EXIT

got=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$got" = "$soname" ] || bad "SONAME is '$got', want '$soname'"

# The header's functions: after the preprocessor (no comments, no macros),
# a vc_ name followed by '(' is a function declaration.
${CC:-cc} -E -P -x c "$header" | tr '\n' ' ' | grep -oE '\bvc_[A-Za-z0-9_]+ *\(' |
	sed 's/ *($//' | sort -u >"$dir/header"
[ -s "$dir/header" ] || bad "no functions found in $header"
# The map's global names.
sed 's,/\*.*\*/,,; /\/\*/,/\*\//d' "$map" | grep -oE '^\s*vc_[A-Za-z0-9_]+;' |
	tr -d ' \t;' | sort >"$dir/map"
# What the library defines and exports (version nodes, type A, aside).
nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' >"$dir/exported.v"
sed 's/@.*//' "$dir/exported.v" | sort >"$dir/exported"

while read -r s; do
	grep -qx "$s" "$dir/header" || bad "exports $s, which include/vramcache.h does not declare"
done <"$dir/exported"
while read -r s; do
	grep -qx "$s" "$dir/exported" || bad "does not export $s, which the header declares (add it to $map)"
done <"$dir/header"
while read -r s; do
	grep -qx "$s" "$dir/header" || bad "the map lists $s, which the header does not declare"
done <"$dir/map"
[ -z "$(sort "$dir/map" | uniq -d)" ] || bad "the map lists a name twice: $(sort "$dir/map" | uniq -d)"
# Every export carries a version (name@@VRAMCACHE_x.y).
unversioned=$(grep -v '@@VRAMCACHE_' "$dir/exported.v" || true)
[ -z "$unversioned" ] || bad "exported without a version: $unversioned"

[ "$fail" = 0 ] || exit 1
echo "libvramcache: $(wc -l <"$dir/exported") symbols, all declared in the header, SONAME $got"
