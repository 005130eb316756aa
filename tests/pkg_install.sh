# `cmake --install` into a scratch prefix, then the library as a user gets
# it, outside this tree: tests/pkg/consumer.c built against the installed
# header and libvramcache.so alone, found through pkg-config (MODE
# pkgconfig) or CMake's find_package(vramcache) (MODE cmake), linked
# dynamically (NEEDED libvramcache.so.0) and run on the emulated device.
# pkgconfig also checks the installed layout.
# Usage: bash pkg_install.sh MODE CMAKE BUILD_DIR TESTS_PKG_DIR
# Environment: CC, and VC_TEST_CFLAGS (a sanitizer build's flags: the
# program must carry the runtime its libvramcache.so was built for).
set -euo pipefail
mode=$1 cmake=$2 build=$3 src=$4
skip() { echo "SKIP: $*" >&2; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
cc=${CC:-cc}
command -v "$cc" >/dev/null || skip "no C compiler ($cc)"
command -v readelf >/dev/null || skip "readelf not found (Debian package: binutils)"
dir=$(mktemp -d "${TMPDIR:-/tmp}/vc-inst-XXXXXX")
trap 'rm -rf "$dir"' EXIT
export MALLOC_PERTURB_=165
prefix=$dir/prefix
"$cmake" --install "$build" --prefix "$prefix" >"$dir/install.log" 2>&1 ||
	{ cat "$dir/install.log" >&2; fail "cmake --install failed"; }
pc=$(find "$prefix" -name vramcache.pc)
[ -n "$pc" ] || fail "no vramcache.pc installed"
libdir=$(dirname "$(dirname "$pc")")
truncate -s 256K "$dir/disk.img"

case $mode in
pkgconfig)
	command -v pkg-config >/dev/null || skip "pkg-config not found (Debian package: pkg-config)"
	for f in bin/vramcache include/vramcache.h lib/systemd/system/vramcache@.socket \
		lib/systemd/system/vramcache@.service share/doc/vramcache/example.env; do
		[ -e "$prefix/$f" ] || fail "not installed: $f"
	done
	for f in libvramcache.so libvramcache.so.0 libvramcache.a cmake/vramcache/vramcache-config.cmake \
		cmake/vramcache/vramcache-config-version.cmake cmake/vramcache/vramcache-targets.cmake; do
		[ -e "$libdir/$f" ] || fail "not installed: $libdir/$f"
	done
	# Man pages: where the build made them (scdoc found).
	for m in "$build"/man/*.[0-9]; do
		[ -e "$m" ] || continue
		s=${m##*.}
		[ -e "$prefix/share/man/man$s/$(basename "$m")" ] || fail "man page not installed: $(basename "$m")"
	done
	# Paths in installed files name the install-time prefix.
	grep -qx "prefix=$prefix" "$pc" || fail "vramcache.pc: $(grep ^prefix= "$pc"), want $prefix"
	grep -q "^ExecStart=$prefix/bin/vramcache serve " "$prefix/lib/systemd/system/vramcache@.service" ||
		fail "vramcache@.service does not start $prefix/bin/vramcache"
	"$prefix/bin/vramcache" --version | grep -q '^vramcache [0-9]' || fail "installed vramcache --version"

	export PKG_CONFIG_PATH=$libdir/pkgconfig
	ver=$(pkg-config --modversion vramcache)
	"$prefix/bin/vramcache" --version | grep -qxE "vramcache $ver( \(.+\))?" || fail "pkg-config says version $ver"
	flags=$(pkg-config --cflags --libs vramcache)
	echo "pkg-config --cflags --libs vramcache: $flags"
	# shellcheck disable=SC2086
	"$cc" ${VC_TEST_CFLAGS:-} -o "$dir/consumer" "$src/consumer.c" $flags
	;;
cmake)
	"$cmake" -S "$src" -B "$dir/b" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
		-DCMAKE_C_FLAGS="${VC_TEST_CFLAGS:-}" >"$dir/cmake.log" 2>&1 ||
		{ cat "$dir/cmake.log" >&2; fail "find_package(vramcache) failed"; }
	"$cmake" --build "$dir/b" >>"$dir/cmake.log" 2>&1 ||
		{ cat "$dir/cmake.log" >&2; fail "building against vramcache::vramcache failed"; }
	cp "$dir/b/consumer" "$dir/consumer"
	;;
*) fail "unknown mode $mode" ;;
esac

readelf -d "$dir/consumer" | grep -q 'NEEDED.*\[libvramcache\.so\.0\]' ||
	fail "the program is not linked to libvramcache.so.0"
LD_LIBRARY_PATH=$libdir "$dir/consumer" "$dir/disk.img" | tee "$dir/out"
grep -q "written and read back" "$dir/out" || fail "the consumer did not run through"
echo "installed library via $mode: ok"
