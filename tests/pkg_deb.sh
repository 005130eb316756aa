# scripts/package's .deb, unpacked into a scratch root (dpkg -x, no
# installation on this machine): its control data, its files in their
# places under /usr, `vramcache --version` from there, and the packaged
# systemd units at work: the command line of vramcache@.service, as the
# unit writes it, run from the scratch root under systemd-socket-activate
# on the socket of vramcache@.socket, then a real client (nbdinfo) and
# `vramcache stat` talking to it, and a clean stop on SIGTERM.
# Usage: bash pkg_deb.sh VRAMCACHE_BINARY SOURCE_DIR BUILD_DIR
# (nbd_lib.sh gives skip, need, the scratch $dir and the server's cleanup.)
source "$(dirname "$0")/nbd_lib.sh"
src=$2 build=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
need dpkg-deb dpkg

deb=$("$src/scripts/package" --build-dir "$build" --out "$dir" | tail -1)
[ -f "$deb" ] || fail "scripts/package made no .deb"
[ "$(dpkg-deb -f "$deb" Package)" = vramcache ] || fail "package name"
[ "$(dpkg-deb -f "$deb" Architecture)" = "$(dpkg --print-architecture)" ] || fail "architecture"
version=$(dpkg-deb -f "$deb" Version)
root=$dir/root
dpkg -x "$deb" "$root"

for f in usr/bin/vramcache usr/include/vramcache.h usr/lib/libvramcache.so.0 usr/lib/libvramcache.so \
	usr/lib/libvramcache.a usr/lib/pkgconfig/vramcache.pc usr/lib/cmake/vramcache/vramcache-config.cmake \
	usr/lib/systemd/system/vramcache@.socket usr/lib/systemd/system/vramcache@.service; do
	[ -e "$root/$f" ] || fail "not in the package: /$f"
done
if ls "$build"/man/*.1 >/dev/null 2>&1; then
	[ -e "$root/usr/share/man/man1/vramcache-serve.1.gz" ] || fail "no man pages in the package"
	[ -e "$root/usr/share/man/man3/libvramcache.3.gz" ] || fail "no libvramcache(3) in the package"
fi
grep -qx "prefix=/usr" "$root/usr/lib/pkgconfig/vramcache.pc" || fail "vramcache.pc: prefix is not /usr"

# The packaged program runs from the scratch root, and is the version packaged.
"$root/usr/bin/vramcache" --version | tee "$dir/version"
grep -qxE "vramcache ${version%%+*}( \(.+\))?" "$dir/version" || fail "vramcache --version does not match $version"

# The units: ExecStart and ListenStream as packaged.
svc=$root/usr/lib/systemd/system/vramcache@.service
skt=$root/usr/lib/systemd/system/vramcache@.socket
exec_start=$(sed -n 's/^ExecStart=//p' "$svc")
listen=$(sed -n 's/^ListenStream=//p' "$skt")
case $exec_start in /usr/bin/vramcache\ serve\ *) ;; *) fail "ExecStart runs '$exec_start'" ;; esac
case $listen in /run/vramcache/%i.sock) ;; *) fail "ListenStream is '$listen'" ;; esac
grep -q '^Accept=no' "$skt" || fail "the socket unit must hand the listening socket over (Accept=no)"
grep -q '^EnvironmentFile=/etc/vramcache/%i.env' "$svc" || fail "EnvironmentFile"

# The units as systemd reads them (instance "t", the program from the
# scratch root): any complaint, an unknown key say, fails.
if command -v systemd-analyze >/dev/null; then
	mkdir -p "$dir/units"
	sed "s|^ExecStart=/usr/bin/vramcache|ExecStart=$root/usr/bin/vramcache|" "$svc" >"$dir/units/vramcache@t.service"
	cp "$skt" "$dir/units/vramcache@t.socket"
	(cd "$dir/units" && systemd-analyze verify --man=no ./vramcache@t.socket ./vramcache@t.service) \
		>"$dir/verify.log" 2>&1 || true
	[ ! -s "$dir/verify.log" ] || { cat "$dir/verify.log" >&2; fail "systemd-analyze verify: the units"; }
fi

# (Past here a skip means the package's other checks passed.)
need systemd-socket-activate systemd
need nbdinfo libnbd-bin
# Instance "t", with /run/vramcache in the scratch directory and the
# settings an /etc/vramcache/t.env would give.
run=$dir/run
mkdir -p "$run"
truncate -s 3M "$dir/disk.img"
VRAMCACHE_OPTIONS="--device emu --host-bytes 1M --gpu-bytes 2M"
VRAMCACHE_EXPORTS="disk=$dir/disk.img"
cmd=${exec_start//%i/t}
cmd=${cmd//\/run\/vramcache/$run}
cmd=${cmd/#\/usr\/bin\/vramcache/$root/usr/bin/vramcache}
cmd=${cmd//\$VRAMCACHE_OPTIONS/$VRAMCACHE_OPTIONS}
cmd=${cmd//\$VRAMCACHE_EXPORTS/$VRAMCACHE_EXPORTS}
sock=${listen//%i/t}
sock=${sock//\/run\/vramcache/$run}
echo "systemd-socket-activate -l $sock $cmd"
# shellcheck disable=SC2086
systemd-socket-activate -l "$sock" $cmd 2>"$dir/server.log" &
pid=$!
for _ in $(seq 400); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || { cat "$dir/server.log" >&2; fail "systemd-socket-activate made no socket"; }
timeout 120 nbdinfo "nbd+unix:///disk?socket=$sock" | tee "$dir/info" || { cat "$dir/server.log" >&2; fail "nbdinfo"; }
grep -q "export-size: $((3 << 20))" "$dir/info" || fail "nbdinfo: wrong export size"
# The statistics socket the unit names, found from the NBD socket.
"$root/usr/bin/vramcache" stat "$sock" >"$dir/stat.json" || fail "vramcache stat on the unit's socket"
grep -q '"disk"' "$dir/stat.json" || fail "vramcache stat: no export \"disk\""
grep -q 'activated socket' "$dir/server.log" || fail "the server did not serve the activated socket"
kill -TERM "$pid"
wait "$pid" || { cat "$dir/server.log" >&2; fail "the server did not stop cleanly on SIGTERM"; }
pid=
[ ! -e "$sock.ctl" ] || fail "statistics socket left behind"
echo "package $version: unpacked, ran, served through socket activation"
