# The man pages document what exists: a page per command that
# `vramcache --help` lists, each option that the command's --help shows in
# its page (as *--option*), every command in vramcache(1), and every function
# of the public header in libvramcache(3). Reads the scdoc sources, so it
# runs without scdoc; where the build made the pages, checks they are there.
# Usage: bash pkg_man.sh VRAMCACHE_BINARY MAN_SOURCE_DIR HEADER [MAN_BUILD_DIR]
set -euo pipefail
vc=$1 man=$2 header=$3 built=${4:-}
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }
# *--opt* in scdoc, possibly with a value after it.
documents() { grep -qF -- "*$2*" "$1"; }

main=$man/vramcache.1.scd
[ -e "$main" ] || { echo "FAIL: no $main" >&2; exit 1; }
cmds=$("$vc" --help | sed -n '/^Commands:/,/^$/p' | sed -n 's/^  \([a-z][a-z0-9-]*\) .*/\1/p')
[ -n "$cmds" ] || bad "no commands in vramcache --help"
for o in --help --version; do
	documents "$main" "$o" || bad "vramcache.1 does not document $o"
done
for c in $cmds; do
	page=$man/vramcache-$c.1.scd
	[ -e "$page" ] || { bad "no man page for 'vramcache $c' ($page)"; continue; }
	grep -q "^\*$c\*$" "$main" || bad "vramcache.1 does not list the command $c"
	grep -q "vramcache-$c\*(1)" "$main" || bad "vramcache.1 does not refer to vramcache-$c(1)"
	case $c in
	info) continue ;; # takes no options
	demo) help=$("$vc" --help | sed -n '/^demo options:/,$p' | grep -v -- --version) ;;
	*) help=$("$vc" "$c" --help) ;;
	esac
	for o in $(echo "$help" | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u); do
		documents "$page" "$o" || bad "vramcache-$c.1 does not document $o"
	done
done
lib=$man/libvramcache.3.scd
[ -e "$lib" ] || bad "no $lib"
for f in $(${CC:-cc} -E -P -x c "$header" | tr '\n' ' ' | grep -oE '\bvc_[A-Za-z0-9_]+ *\(' |
	sed 's/ *($//' | sort -u); do
	grep -q "\b$f(" "$lib" || bad "libvramcache.3 does not document $f()"
done
if [ -n "$built" ] && [ -d "$built" ] && ls "$built"/*.[0-9] >/dev/null 2>&1; then
	for s in "$man"/*.scd; do
		p=$(basename "$s" .scd)
		[ -s "$built/$p" ] || bad "the build did not make $p"
		head -c 200 "$built/$p" | grep -q '^\.TH' || bad "$p is not roff"
	done
fi
[ "$fail" = 0 ] || exit 1
echo "man pages: $(echo "$cmds" | wc -w) commands and the library documented"
