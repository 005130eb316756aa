#!/usr/bin/env bash
# Block dedup on real duplication (issue 14): VM images of one host.
#
#   bench/dedup_images.sh [--quick] VRAMCACHE_BINARY OUTDIR
#
# 1. Builds NIMG raw ext4 images the way a VM host has them: each holds the
#    same system tree, files from this machine's /usr/lib, /usr/share and
#    /etc (a deterministic selection of TREE_MIB: files ordered by a hash of
#    their path), with small differences per image: its own "packages" (a
#    different slice of further files, 5 % of the tree, under /opt), 2.5 %
#    of the files gone, 2 % rewritten (half with a header put in front, so
#    their blocks shift; half patched in place, one block changed), and a
#    different layout (inode count and image size per image, so the same
#    file lands at different offsets). `mkfs.ext4 -d` fills an image
#    without mounting it.
# 2. Ground truth offline (dedup_truth, built beside the binary): the
#    images' duplicate share at 512 B, 1 KiB, 2 KiB and 4 KiB blocks, over
#    their data extents (what nbdcopy reads) and over every block.
# 3. Serves all images as exports of one cache (`vramcache serve`, read
#    only, host tier HOST_MIB, GPU tier GPU_MIB, fixed), dedup off, on at
#    each degree of DEGREES, and adaptive at degree 4, and reads every
#    export through NBD with nbdcopy to null: (or, where nbdcopy is
#    missing or NBD_READER=python, a raw client reading the same data
#    extents) twice, cold then warm. From
#    `vramcache stat` before and after each pass: hit ratios, the dedup
#    factor the GPU tier reached, logical pages against physical ones
#    (blocks / degree), the engine's estimate, and the warm pass's hit
#    ratio with dedup against without: what dedup gains at a fixed GPU
#    tier. Prints a table; writes OUTDIR/dedup_images.json (and
#    dedup_truth.json).
#
# Environment: VC_DEVICE (auto), NIMG (quick 3, else 6), TREE_MIB (quick 16,
# else 384), HOST_MIB (quick 8, else 128), GPU_MIB (default: the images'
# distinct 1 KiB blocks x 1.6, from the ground truth: room for their
# distinct data, not for all of it), DEGREES (quick "4", else "1 2 4 8"),
# DEDUP_TRUTH (the ground-truth tool). Disk: about NIMG x TREE_MIB x 1.5
# plus one tree. Quick on the emulated device: a minute or two.
set -euo pipefail
. "$(dirname "$0")/nbd_lib.sh"
bench_start dedup_images "mkfs.ext4 python3" "$@"
dev=${VC_DEVICE:-auto}
if [ $quick = 1 ]; then
	: "${NIMG:=3}" "${TREE_MIB:=16}" "${HOST_MIB:=8}" "${DEGREES:=4}"
else
	: "${NIMG:=6}" "${TREE_MIB:=384}" "${HOST_MIB:=128}" "${DEGREES:=1 2 4 8}"
fi
truth=${DEDUP_TRUTH:-$(dirname "$vc")/dedup_truth}
[ -x "$truth" ] || { echo "dedup_images: $truth not found (build the benchmarks)" >&2; exit 1; }
sock=$dir/s.sock
t_start=$SECONDS

# --- 1. the images ----------------------------------------------------------
echo "== building $NIMG images of a ${TREE_MIB} MiB tree ($(date -u +%H:%M:%S))" >&2
python3 - "$dir" "$NIMG" "$TREE_MIB" >"$dir/sizes" <<'PY'
import hashlib, os, shutil, sys
out, nimg, tree_mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
budget = tree_mib << 20
def h(s):
    return int.from_bytes(hashlib.sha1(s.encode()).digest()[:8], "little")
cands = []
for root in ("/usr/lib", "/usr/share", "/etc"):
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in files:
            p = os.path.join(d, f)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if (st.st_mode & 0o170000) == 0o100000 and 0 < st.st_size <= 8 << 20 \
                    and os.access(p, os.R_OK):
                cands.append((h(p), p, st.st_size))
cands.sort()
base, extra, used = [], [], 0
for c in cands:
    if used < budget:
        base.append(c)
        used += c[2]
    else:
        extra.append(c)
# The base tree once, then each image's tree: hard links to it, except
# what the image changes.
bdir = os.path.join(out, "base")
def rel(p):
    return p.lstrip("/")
for _, p, _ in base:
    dst = os.path.join(bdir, rel(p))
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    try:
        shutil.copyfile(p, dst)
    except OSError:
        pass
pkg = budget // 20
pos = 0
for k in range(nimg):
    t = os.path.join(out, "tree%d" % k)
    size = 0
    for _, p, sz in base:
        src = os.path.join(bdir, rel(p))
        if not os.path.exists(src) or h("drop%d%s" % (k, p)) % 40 == 0:
            continue
        dst = os.path.join(t, rel(p))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        r = h("rewrite%d%s" % (k, p)) % 100
        if r < 2:
            data = open(src, "rb").read()
            if r == 0:  # a header in front: every block after it shifts
                data = ("# image %d, rewritten\n" % k).encode() + data
            else:       # patched in place: one block differs
                mid = len(data) // 2
                patch = ("<image %d>" % k).encode()
                data = data[:mid] + patch + data[mid + len(patch):]
            open(dst, "wb").write(data)
        else:
            os.link(src, dst)
        size += sz
    # its own packages: the next slice of further files, under /opt
    got = 0
    while got < pkg and pos < len(extra):
        _, p, sz = extra[pos]
        pos += 1
        dst = os.path.join(t, "opt", "pkg%d" % k, rel(p))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        try:
            shutil.copyfile(p, dst)
        except OSError:
            continue
        got += sz
    print(k, size + got)
PY
imgs=() exports=()
while read -r k bytes; do
	# Room for the files and ext4's metadata, plus a per-image margin so
	# that the block groups, and with them the files' offsets, differ.
	# Inodes: the tree's entries and a quarter more (machines' trees
	# differ in how many small files a MiB holds), plus the per-image step.
	mib=$((bytes * 13 / 10 / 1048576 + 48 + 16 * k))
	nent=$(find "$dir/tree$k" | wc -l)
	E2FSPROGS_FAKE_TIME=1700000000 mkfs.ext4 -q -F -b 4096 -N $((nent * 5 / 4 + 16384 + 4096 * k)) \
		-U "$(printf '00000000-0000-4000-8000-%012d' "$k")" -E root_owner=0:0,hash_seed="$(printf '00000000-0000-4000-8000-%012d' "$k")" \
		-d "$dir/tree$k" "$dir/img$k.img" "${mib}M" >&2
	imgs+=("$dir/img$k.img")
	exports+=("img$k=$dir/img$k.img")
	rm -rf "$dir/tree$k"
done <"$dir/sizes"
rm -rf "$dir/base"
du -m --apparent-size "${imgs[@]}" | awk '{s+=$1} END {printf "images: %d MiB apparent\n", s}' >&2
du -m "${imgs[@]}" | awk '{s+=$1} END {printf "images: %d MiB allocated\n", s}' >&2

# --- 2. ground truth --------------------------------------------------------
echo "== ground truth ($(date -u +%H:%M:%S))" >&2
"$truth" --allocated --json "$out/dedup_truth.json" "${imgs[@]}" | tee "$dir/truth.txt"
"$truth" "${imgs[@]}" | tee "$dir/truth-all.txt"
# The GPU tier: the data's distinct 1 KiB blocks (degree 4) x 1.6, for the
# log's slack (free segments, dead slots up to the cleaning threshold),
# in MiB: room for the distinct data, not for all of it.
if [ -z "${GPU_MIB:-}" ]; then
	GPU_MIB=$(python3 -c 'import json, sys
b = [x for x in json.load(open(sys.argv[1]))["block_sizes"] if x["block"] == 1024][0]
print(max(16, int(b["distinct"] * 1024 * 1.6 / 2**20 + 7) // 8 * 8))' "$out/dedup_truth.json")
fi
echo "GPU tier: $GPU_MIB MiB" >&2

# --- 3. through the cache ---------------------------------------------------
configs=(off)
for d in $DEGREES; do configs+=("on:$d"); done
configs+=(adaptive:4)
# Every pass's statistics before and after stay in OUTDIR/stats/ (the
# counters the table leaves out: evictions, cleaning, tail segments).
mkdir -p "$out/stats"
stat_to() { "$vc" stat "$sock" >"$1" && cp "$1" "$out/stats/$(basename "$1" | tr : _)"; }
# read_export K: reads export imgK to nowhere: nbdcopy (which asks the
# server for the extents and reads the data ones), or where it is missing
# (binaries carried to the GPU machine) a raw client reading the same
# extents, taken from the image file beside the server.
read_export() {
	if [ "${NBD_READER:-}" != python ] && command -v nbdcopy >/dev/null; then
		nbdcopy "nbd+unix:///img$1?socket=$sock" null:
		return
	fi
	python3 - "$sock" "img$1" "$dir/img$1.img" <<'PY'
import os, socket, struct, sys
sock, name, path = sys.argv[1:]
s = socket.socket(socket.AF_UNIX); s.connect(sock)
def rd(k):
    b = bytearray()
    while len(b) < k:
        d = s.recv(min(k - len(b), 1 << 20)); assert d; b += d
    return b
assert rd(18)[:16] == b"NBDMAGICIHAVEOPT"
s.sendall(struct.pack(">IQII", 3, 0x49484156454F5054, 1, len(name)) + name.encode())
size = struct.unpack(">QH", rd(10))[0]
fd = os.open(path, os.O_RDONLY)
off, h = 0, 0
while off < size:
    try:
        d = os.lseek(fd, off, os.SEEK_DATA)
    except OSError:
        break
    e = os.lseek(fd, d, os.SEEK_HOLE)
    d &= ~4095
    while d < e:
        n = min(1 << 20, e - d, size - d)
        s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 0, h, d, n))
        magic, err, _ = struct.unpack(">IIQ", rd(16)); assert magic == 0x67446698 and err == 0, err
        rd(n); d += n; h += 1
    off = e
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 2, h, 0, 0))  # DISC
PY
}
for cf in "${configs[@]}"; do
	mode=${cf%%:*} deg=${cf#*:}
	[ "$mode" = off ] && deg=4
	echo "== serve --dedup $mode --dedup-degree $deg ($(date -u +%H:%M:%S))" >&2
	"$vc" serve --device "$dev" --socket "$sock" --pidfile "$dir/vc.pid" --readonly \
		--host-bytes "${HOST_MIB}M" --gpu-bytes "${GPU_MIB}M" --dedup "$mode" \
		--dedup-degree "$deg" "${exports[@]}"
	pids+=("$(cat "$dir/vc.pid")")
	for pass in cold warm; do
		stat_to "$dir/$cf-$pass-0.json"
		t0=$(date +%s.%N)
		for k in $(seq 0 $((NIMG - 1))); do
			read_export "$k"
		done
		t1=$(date +%s.%N)
		stat_to "$dir/$cf-$pass-1.json"
		awk -v a="$t0" -v b="$t1" -v c="$cf" -v p="$pass" 'BEGIN { print c, p, b - a }' >>"$dir/times"
	done
	p=${pids[-1]}
	kill "$p"
	unset 'pids[-1]'
	for _ in $(seq 400); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
done

# --- report -----------------------------------------------------------------
python3 - "$dir" "$out" "${configs[*]}" "$NIMG" "$TREE_MIB" "$HOST_MIB" "$GPU_MIB" \
	"$((SECONDS - t_start))" "$quick" <<'PY'
import json, sys
d, out, configs, nimg, tree, host, gpu, secs, quick = sys.argv[1:]
configs = configs.split()
times = {}
for line in open(d + "/times"):
    c, p, t = line.split()
    times[(c, p)] = float(t)
truth = json.load(open(out + "/dedup_truth.json"))
rows, dev = [], None
for c in configs:
    deg = 1 if c == "off" else int(c.split(":")[1])
    for p in ("cold", "warm"):
        a = json.load(open("%s/%s-%s-0.json" % (d, c, p)))
        b = json.load(open("%s/%s-%s-1.json" % (d, c, p)))
        dev = b["device"]
        A, B = a["cache"], b["cache"]
        dl = {k: B[k] - A[k] for k in ("hits_host", "hits_gpu", "misses", "backing_read_bytes")}
        acc = dl["hits_host"] + dl["hits_gpu"] + dl["misses"]
        r = {"config": c, "pass": p, "degree": deg if c != "off" else None,
             "accesses": acc, "seconds": times[(c, p)],
             "mib_read": acc * b["page_size"] / 2**20,
             "hit_host": dl["hits_host"] / max(acc, 1), "hit_gpu": dl["hits_gpu"] / max(acc, 1),
             "miss": dl["misses"] / max(acc, 1),
             "backing_read_mib": dl["backing_read_bytes"] / 2**20,
             "gpu_pages": B["pages_cached_gpu"], "gpu_capacity_pages": B["pages_capacity_gpu"]}
        for k in ("dedup_pages", "dedup_blocks", "dedup_factor", "dedup_hits", "dedup_blocks_in",
                  "dedup_collisions", "dedup_est_factor", "dedup_volumes_on", "dedup_switches"):
            r[k] = B.get(k)
        r["physical_pages"] = (B.get("dedup_blocks") or 0) / deg if c != "off" else B["pages_cached_gpu"]
        r["hit"] = 1 - r["miss"]
        rows.append(r)
off_warm = next(r for r in rows if r["config"] == "off" and r["pass"] == "warm")
print("Dedup over %s images of a %s MiB tree on %s: host tier %s MiB, GPU tier %s MiB "
      "(%d s in all)" % (nimg, tree, dev, host, gpu, int(secs)))
print("%-11s %-4s | %8s %7s | %7s %7s %7s | %8s %9s %7s | %6s %6s | %s" % (
    "config", "pass", "MiB read", "MiB/s", "hit hst", "hit gpu", "miss", "logical", "physical",
    "factor", "est f", "on", "warm hit vs off"))
for r in rows:
    dd = r["config"] != "off"
    gain = "%+.1f points" % (100 * (r["hit"] - off_warm["hit"])) if r["pass"] == "warm" else ""
    print("%-11s %-4s | %8.0f %7.0f | %6.1f%% %6.1f%% %6.1f%% | %8d %9.0f %7s | %6s %6s | %s" % (
        r["config"], r["pass"], r["mib_read"], r["mib_read"] / max(r["seconds"], 1e-9),
        100 * r["hit_host"], 100 * r["hit_gpu"], 100 * r["miss"],
        r["gpu_pages"], r["physical_pages"],
        "%.2f" % r["dedup_factor"] if dd else "-",
        "%.2f" % r["dedup_est_factor"] if dd else "-",
        "%d" % r["dedup_volumes_on"] if dd else "-", gain))
print("ground truth (data extents): " + ", ".join(
    "%d B: factor %.2f (%.2f without zero blocks)" % (b["block"], b["factor"], b["factor_nonzero"])
    for b in truth["block_sizes"]))
res = {"bench": "dedup_images", "device": dev, "commit": truth.get("commit"),
       "date": truth.get("date"), "quick": quick == "1", "images": int(nimg),
       "tree_mib": int(tree), "host_mib": int(host), "gpu_mib": int(gpu), "truth": truth,
       "runs": rows}
json.dump(res, open(out + "/dedup_images.json", "w"), indent=1)
PY
