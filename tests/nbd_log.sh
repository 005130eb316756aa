#!/usr/bin/env bash
# Where a daemon's messages go (issue 11):
#   1. Started without --foreground, the server writes nothing more to the
#      launching terminal's stderr once it serves: three clients that break
#      the protocol would each log a line; stderr (a file here) stays empty.
#   2. --log FILE: 100 such clients in a row (a connect storm) leave at
#      least one "protocol violation" line but not 100 (rate limit), and a
#      line saying how many were left out (written at shutdown at the
#      latest).
# Without --log the daemon's lines go to syslog: nbd_syslog.sh.
# Usage: nbd_log.sh VRAMCACHE_BINARY
. "$(dirname "$0")/nbd_lib.sh"
need python3 python3
fail() { echo "FAIL: $*" >&2; exit 1; }
truncate -s $((1 << 20)) "$dir/disk.img"

start_server "$dir/disk.img" 2>"$dir/stderr"
bad_clients 3
stop_server
[ ! -s "$dir/stderr" ] || { cat "$dir/stderr" >&2; fail "the daemon wrote to the launching terminal"; }

start_server --log "$dir/log" "$dir/disk.img" 2>"$dir/stderr"
bad_clients 100
stop_server
n=$(grep -c 'protocol violation' "$dir/log" || true)
[ "$n" -ge 1 ] || { cat "$dir/log" >&2; fail "no line for a dropped connection in --log"; }
[ "$n" -lt 100 ] || fail "100 dropped connections logged 100 lines (no rate limit)"
grep -q 'left out' "$dir/log" || { cat "$dir/log" >&2; fail "no count of the lines left out"; }
[ ! -s "$dir/stderr" ] || { cat "$dir/stderr" >&2; fail "--log: the daemon wrote to stderr"; }
echo "nbd log: all checks passed"
