#!/usr/bin/env bash
# Many requests in flight on one connection, and no deadlock when a client
# sends before it reads. No timing: what shows the concurrency is where
# the reads went.
#
# 1. 256 reads of GPU-tier pages sent in one write on one connection (a raw
#    client, so they arrive together): the server must hand their GPU pages
#    to the device in few submissions, many pages each (cache stats:
#    batch_pages / batches). A server that runs reads on a pool of worker
#    threads, one synchronous call each, submits one page per submission
#    (4 KiB reads), whatever the pool's size, so this fails for it.
# 2. 1000 reads sent without reading any reply, then all replies read:
#    4 MiB of replies fill the socket long before the requests are all
#    read, so a server that stopped reading while its sends block would
#    deadlock (the client's socket timeout fails the test instead).
# 3. 256 reads of uncached pages over a slow store (--backing-latency 2ms)
#    issued by nbdsh before it waits for any: all complete, data right.
# Usage: nbd_inflight.sh VRAMCACHE_BINARY
. "$(dirname "$0")/nbd_lib.sh"
need_nbdsh

head -c $((32 << 20)) /dev/urandom >"$dir/disk.img"
start_server --host-bytes 1M --gpu-bytes 16M --backing-latency 2ms "$dir/disk.img"

# Prefetch [0, 8M) into the GPU tier (NBD_CMD_CACHE: serve's prefetch tier
# is the GPU tier when there is one); the host tier holds 256 pages.
nbdsh -u "$uri" -c 'h.cache(8 << 20, 0)'
"$vc" stat "$sock" >"$dir/s0.json"
python3 - "$dir/s0.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["cache"]
assert c["pages_cached_gpu"] >= 2048 - 256, "prefetch left %d GPU pages" % c["pages_cached_gpu"]
PY

cat >"$dir/raw.py" <<'PY'
# A raw NBD client: EXPORT_NAME handshake, simple replies; sends every
# request in one sendall, then reads every reply (any order, by cookie).
import random, socket, struct, sys
path, disk, n, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def recvall(s, k):
    b = bytearray()
    while len(b) < k:
        d = s.recv(k - len(b))
        assert d, "server hung up"
        b += d
    return bytes(b)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(60)  # a deadlocked server fails here, not by hanging ctest
s.connect(path)
g = recvall(s, 18)
assert g[:16] == b"NBDMAGICIHAVEOPT", g
s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
s.sendall(struct.pack(">QII", 0x49484156454F5054, 1, 0))  # OPT_EXPORT_NAME ""
recvall(s, 10)
blocks = random.sample(range(lo // 4096, hi // 4096), n)
s.sendall(b"".join(struct.pack(">IHHQQI", 0x25609513, 0, 0, i, b * 4096, 4096)
                   for i, b in enumerate(blocks)))
data = open(disk, "rb").read()
seen = set()
for _ in range(n):
    magic, err, cookie = struct.unpack(">IIQ", recvall(s, 16))
    assert magic == 0x67446698 and err == 0 and cookie < n and cookie not in seen, (magic, err, cookie)
    seen.add(cookie)
    off = blocks[cookie] * 4096
    assert recvall(s, 4096) == data[off:off + 4096], "wrong data at %d" % off
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 2, 0, 0, 0))  # DISC
print("%d replies" % n)
PY

# 1. GPU-tier reads arriving together travel together.
python3 "$dir/raw.py" "$sock" "$dir/disk.img" 256 $((1 << 20)) $((8 << 20))
"$vc" stat "$sock" >"$dir/s1.json"
python3 - "$dir/s0.json" "$dir/s1.json" <<'PY'
import json, sys
a, b = (json.load(open(f))["cache"] for f in sys.argv[1:])
d = {k: b[k] - a[k] for k in ("hits_gpu", "batches", "batch_pages", "misses")}
print("GPU-tier reads:", d)
assert d["hits_gpu"] >= 200, d  # most of the 256 were GPU-tier hits
assert d["batch_pages"] >= d["hits_gpu"], d
assert d["batch_pages"] >= 8 * d["batches"], \
    "GPU pages went to the device %.1f per submission: reads ran one at a time" % (
        d["batch_pages"] / max(d["batches"], 1))
PY

# 2. 1000 requests before any reply is read (misses and hits mixed).
python3 "$dir/raw.py" "$sock" "$dir/disk.img" 1000 0 $((16 << 20))

# 3. 256 misses at once through libnbd.
nbdsh -u "$uri" -c '
import random
data = open("'"$dir/disk.img"'", "rb").read()
blocks = random.sample(range((16 << 20) // 4096, (32 << 20) // 4096), 256)
bufs = [nbd.Buffer(4096) for _ in blocks]
cookies = [h.aio_pread(b, k * 4096) for b, k in zip(bufs, blocks)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for c, b, k in zip(cookies, bufs, blocks):
    assert h.aio_command_completed(c)
    assert b.to_bytearray() == data[k * 4096:(k + 1) * 4096], k
'
"$vc" stat "$sock" >"$dir/s2.json"
python3 - "$dir/s1.json" "$dir/s2.json" <<'PY'
import json, sys
a, b = (json.load(open(f))["cache"] for f in sys.argv[1:])
assert b["misses"] - a["misses"] >= 256, (a["misses"], b["misses"])
PY
stop_server
echo "nbd in flight: all checks passed"
