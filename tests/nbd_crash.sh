#!/usr/bin/env bash
# Crash test: `vramcache serve` (write-through) is killed with SIGKILL while
# two libnbd clients write, each logging a write only after its reply came.
# Every logged (acknowledged) write must then be on the backing file, and,
# after a restart, read back through the server. Blocks carry their offset
# and a random tag, so a block from another write cannot pass.
# Usage: nbd_crash.sh VRAMCACHE_BINARY
. "$(dirname "$0")/nbd_lib.sh"
need_nbdsh

size=$((64 << 20))
truncate -s $size "$dir/disk.img"
start_server --host-bytes 1M --gpu-bytes 2M "$dir/disk.img"

cat >"$dir/writer.py" <<'PY'
import nbd, os, random, sys
uri, part, log = sys.argv[1], int(sys.argv[2]), open(sys.argv[3], "w")
h = nbd.NBD()
h.connect_uri(uri)
blocks = h.get_size() // 4096
mine = list(range(part, blocks, 2))
random.shuffle(mine)
try:
    for b in mine:
        tag = os.urandom(8)
        buf = (b.to_bytes(8, "little") + tag) * 256
        h.pwrite(buf, b * 4096)
        log.write("%d %s\n" % (b, tag.hex()))  # only after the reply
        log.flush()
except nbd.Error:
    pass  # the server is gone
PY
python3 "$dir/writer.py" "$uri" 0 "$dir/log0" &
w0=$!
python3 "$dir/writer.py" "$uri" 1 "$dir/log1" &
w1=$!
# Kill once both have some writes acknowledged (mid-run: they write 16384).
for _ in $(seq 400); do
	[ "$(cat "$dir/log0" "$dir/log1" 2>/dev/null | wc -l)" -ge 400 ] && break
	sleep 0.05
done
kill -9 "$pid"
pid=
wait $w0 $w1 || true
n=$(cat "$dir/log0" "$dir/log1" | wc -l)
[ "$n" -ge 400 ] && [ "$n" -lt 16384 ] || { echo "not killed mid-run ($n writes)" >&2; exit 1; }

check='
import sys
def check(read):
    n = 0
    for name in sys.argv[1:]:
        for line in open(name):
            b, tag = line.split()
            b = int(b)
            want = (b.to_bytes(8, "little") + bytes.fromhex(tag)) * 256
            got = read(b * 4096)
            assert got == want, "acknowledged write of block %d lost" % b
            n += 1
    return n
'
python3 -c "$check"'
f = open("'"$dir/disk.img"'", "rb")
def read(off):
    f.seek(off); return f.read(4096)
print("on the file:", check(read), "acknowledged writes")' "$dir/log0" "$dir/log1"
start_server --host-bytes 1M --gpu-bytes 2M "$dir/disk.img"
python3 -c "$check"'
import nbd
h = nbd.NBD(); h.connect_uri("'"$uri"'")
print("through the server:", check(lambda off: h.pread(4096, off)), "acknowledged writes")
h.shutdown()' "$dir/log0" "$dir/log1"
stop_server
echo "nbd crash: all checks passed"
