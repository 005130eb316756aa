#!/usr/bin/env bash
# serve --config FILE (issue 11): a [server] section of options and
# [export NAME] sections with per-export settings.
#   - three exports from the file and one from the command line; a
#     [server] setting (socket, write-back) applies, and the command line
#     wins over the file (--description, --foreground);
#   - per export: read-only (writes refused, the others writable), a
#     description of its own, and write-through inside a write-back cache:
#     after writes with no FLUSH and a SIGKILL, the write-through export's
#     bytes are on its file (the write-back ones need not be);
#   - errors name FILE:LINE: an unknown setting, an export without a path,
#     a bad boolean; a missing file.
# Usage: nbd_config.sh VRAMCACHE_BINARY
. "$(dirname "$0")/nbd_lib.sh"
need nbdinfo libnbd-bin
need_nbdsh
fail() { echo "FAIL: $*" >&2; exit 1; }
for n in a b c d; do truncate -s $((4 << 20)) "$dir/$n.img"; done
cat >"$dir/vc.conf" <<CONF
# vramcache serve configuration (test)
[server]
socket = $sock
device = emu
host-bytes = 1G
gpu-bytes = 0
write-back = true
description = "from [server]"
foreground = false

[export ro]
path = $dir/a.img
readonly = true
description = "disk a, read-only"

[export wt]
path = $dir/b.img
write-back = false   # write-through, in a write-back cache

[export wb]
; write-back, as the server
path = $dir/c.img
CONF
"$vc" serve --config "$dir/vc.conf" --pidfile "$dir/pid" --foreground \
	--description "from the command line" \
	cli="$dir/d.img" 2>"$dir/banner" &
for _ in $(seq 200); do [ -s "$dir/pid" ] && break; sleep 0.05; done
pid=$(cat "$dir/pid")
nbdinfo --list --json "$uri" >"$dir/list.json"
python3 - "$dir/list.json" <<'PY' || fail "exports"
import json, sys
j = json.load(open(sys.argv[1]))
ex = {e["export-name"]: e for e in j["exports"]}
assert set(ex) == {"cli", "ro", "wt", "wb"}, set(ex)
assert ex["ro"]["description"] == "disk a, read-only", ex["ro"]
assert ex["wt"]["description"] == "from the command line", ex["wt"]
assert ex["ro"]["is_read_only"] and not ex["wt"]["is_read_only"] and not ex["cli"]["is_read_only"]
PY
nbdsh -c "
import os
def open_(name):
    h = nbd.NBD(); h.set_export_name(name); h.connect_uri('nbd+unix:///%s?socket=$sock' % name); return h
ro, wt, wb = open_('ro'), open_('wt'), open_('wb')
try:
    ro.pwrite(b'x' * 4096, 0)
    raise AssertionError('a write to the read-only export succeeded')
except nbd.Error as e:
    assert e.errno == 'EPERM', e
buf = bytes(range(256)) * 16 * 64     # 256 KiB
wt.pwrite(buf, 1 << 20)
wb.pwrite(buf, 1 << 20)
assert wt.pread(len(buf), 1 << 20) == buf
open('$dir/buf', 'wb').write(buf)
"
kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=
cmp -i $((1 << 20)):0 -n $((256 << 10)) "$dir/b.img" "$dir/buf" ||
	fail "write-through export in a write-back cache lost acknowledged writes on SIGKILL"

# Errors: FILE:LINE.
conf_error() { # PATTERN: with $dir/bad.conf
	if "$vc" serve --config "$dir/bad.conf" --socket "$dir/bad.sock" 2>"$dir/err"; then
		fail "serve started with a bad config"
	fi
	grep -q -- "$1" "$dir/err" || { cat "$dir/err" >&2; fail "no '$1'"; }
}
printf '[server]\nfrobnicate = 1\n[export x]\npath = %s\n' "$dir/a.img" >"$dir/bad.conf"
conf_error "bad.conf:2: unknown setting 'frobnicate'"
printf '[export x]\nreadonly = true\n' >"$dir/bad.conf"
conf_error "bad.conf:1: \[export x\] has no path"
printf '[export x]\npath = %s\nreadonly = maybe\n' "$dir/a.img" >"$dir/bad.conf"
conf_error "bad.conf:3: readonly wants true or false"
printf '[server]\nwrite-back = maybe\n[export x]\npath = %s\n' "$dir/a.img" >"$dir/bad.conf"
conf_error "bad.conf:2: write-back wants true or false"
rm "$dir/bad.conf"
conf_error "bad.conf: No such file"
echo "nbd config: all checks passed"
