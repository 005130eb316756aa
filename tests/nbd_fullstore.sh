#!/usr/bin/env bash
# A write-back server over a store that fills up (issue 11). The server
# runs under a file-size limit of 1 MiB on a 4 MiB file (writes past it
# fail with EFBIG, as on a full file system; the server ignores SIGXFSZ):
#   1. Writes past 1 MiB are acknowledged while the cache has room, then
#      fail (EFBIG or ENOSPC): right.
#   2. Every byte of the file then reads back over NBD: the acknowledged
#      writes from the cache, the rest from the store, though the cache is
#      full of dirty pages it cannot evict (reads failed with the
#      write-backs' error before).
#   3. On SIGTERM the flush fails: the log names the byte ranges that
#      were acknowledged but not written back, and the server serves on
#      (they read back). A second SIGTERM ends it with status 1, and the
#      ranges it logs as lost cover every acknowledged write.
# Usage: nbd_fullstore.sh VRAMCACHE_BINARY
. "$(dirname "$0")/nbd_lib.sh"
need_nbdsh
fail() { echo "FAIL: $*" >&2; exit 1; }
head -c $((4 << 20)) /dev/urandom >"$dir/disk.img"
cp "$dir/disk.img" "$dir/orig.img"

(ulimit -f 1024 && exec "$vc" serve --device emu --socket "$sock" --pidfile "$dir/pid" \
	--write-back --host-bytes 256K --gpu-bytes 0 --log "$dir/log" "$dir/disk.img")
pid=$(cat "$dir/pid")

python3 - "$sock" "$dir/orig.img" "$dir/acked" <<'PY' || fail "reads over NBD on a full store"
import nbd, sys
sock, orig, acked = sys.argv[1:4]
want = bytearray(open(orig, "rb").read())
h = nbd.NBD()
h.connect_unix(sock)
ps, ok, refused = 4096, [], 0
for pg in range(256, 1024):
    data = bytes((pg * 31 + k * 7 + 1) & 255 for k in range(ps))
    try:
        h.pwrite(data, pg * ps)
    except nbd.Error as e:
        refused += 1
        if refused >= 4:
            break
        continue
    want[pg * ps:(pg + 1) * ps] = data
    ok.append(pg)
assert ok and refused, "the cache never filled: %d acknowledged, %d refused" % (len(ok), refused)
for off in range(0, len(want), 64 << 10):
    got = h.pread(64 << 10, off)
    assert got == want[off:off + (64 << 10)], "wrong bytes at %d" % off
open(acked, "w").write("\n".join(map(str, ok)) + "\n")
open(acked.rsplit("/", 1)[0] + "/want", "wb").write(want)
print("%d writes acknowledged, %d refused; 4 MiB read back" % (len(ok), refused))
PY

kill -TERM "$pid"
for _ in $(seq 200); do grep -q "kept in the cache" "$dir/log" && break; sleep 0.05; done
grep -q "kept in the cache" "$dir/log" || { cat "$dir/log" >&2; fail "no report of what the flush left"; }
kill -0 "$pid" || fail "the server left after a refused flush"
reads_match "$dir/want"
kill -TERM "$pid"
for _ in $(seq 240); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && fail "a second SIGTERM did not end the server within 12 s"
pid=
grep -q "not written back, lost" "$dir/log" || { cat "$dir/log" >&2; fail "no report of what was lost"; }
# Every acknowledged page lies in a reported range.
python3 - "$dir/log" "$dir/acked" <<'PY' || { cat "$dir/log" >&2; fail "the report misses acknowledged writes"; }
import re, sys
ranges = [(int(a), int(b)) for a, b in
          re.findall(r'bytes (\d+)-(\d+)', open(sys.argv[1]).read().split(", lost:")[-1])]
for pg in map(int, open(sys.argv[2]).read().split()):
    assert any(a <= pg * 4096 and pg * 4096 + 4095 <= b for a, b in ranges), "page %d" % pg
print("%d ranges reported" % len(ranges))
PY
echo "nbd full store: all checks passed"
