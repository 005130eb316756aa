#!/usr/bin/env bash
# NBD over TLS with fio's nbd engine: vramcache against `nbdkit memory`,
# both with --tls=require and the same X.509 credentials, in one run.
#
#   bench/nbd_tls.sh [--quick] VRAMCACHE_BINARY OUTDIR
#
# Tests (a job is a connection): 4 KiB randread at QD32 with 1 and 2 jobs,
# 4 KiB randwrite at QD32, 4 KiB randread at QD128 with 4 jobs, 128 KiB
# sequential reads at QD32, over a Unix socket (nbds+unix://);
# NBD_TLS_ONLY="NAME..." runs only the tests named (seqread-128k-j1, ...). vramcache
# serves a file whose pages all sit in the host tier (warmed first),
# write-through; nbdkit serves RAM. A third column runs vramcache without
# TLS, so the table also shows what TLS costs. Prints a table and writes
# OUTDIR/nbd_tls.json with IOPS, bandwidth, and the ratio vramcache-TLS /
# nbdkit-TLS per test.
#
# Why X.509 and not PSK: fio's nbd engine connects with nbd_connect_uri,
# and libnbd refuses a URI's tls-psk-file (local file access) unless the
# program allows it, which fio does not. With TLS and no certificates in
# the URI, libnbd takes them from $HOME/.pki/libnbd, so the script makes a
# CA, server and client certificates (certtool) and points HOME there for
# fio. The record protection after the handshake (TLS 1.3, AES-GCM) is the
# same as with PSK.
# NBDKIT_MEMORY names the memory plugin's .so where nbdkit is not installed
# with its plugin directory (binaries carried to the GPU machine).
set -euo pipefail
. "$(dirname "$0")/nbd_lib.sh"
bench_start nbd_tls "fio nbdkit python3 certtool" "$@"
size=$([ $quick = 1 ] && echo 256M || echo 1G)

# --- credentials: a CA, the server's and fio's (libnbd's default place) ---
pki=$dir/pki cli=$dir/home/.pki/libnbd
mkdir -p "$pki" "$cli"
ct() { certtool "$@" 2>/dev/null; }
ct --generate-privkey --outfile "$dir/ca-key.pem"
printf 'cn = bench CA\nca\ncert_signing_key\nexpiration_days = 2\n' >"$dir/ca.info"
ct --generate-self-signed --load-privkey "$dir/ca-key.pem" --template "$dir/ca.info" \
	--outfile "$pki/ca-cert.pem"
printf 'cn = localhost\ndns_name = localhost\nip_address = 127.0.0.1\ntls_www_server\nencryption_key\nsigning_key\nexpiration_days = 2\n' >"$dir/s.info"
printf 'cn = fio\ntls_www_client\nencryption_key\nsigning_key\nexpiration_days = 2\n' >"$dir/c.info"
for who in server:$pki:s client:$cli:c; do
	IFS=: read -r n d t <<<"$who"
	ct --generate-privkey --outfile "$d/$n-key.pem"
	ct --generate-certificate --load-ca-certificate "$pki/ca-cert.pem" \
		--load-ca-privkey "$dir/ca-key.pem" --load-privkey "$d/$n-key.pem" \
		--template "$dir/$t.info" --outfile "$d/$n-cert.pem"
done
cp "$pki/ca-cert.pem" "$cli/"

export HOME=$dir/home # fio (libnbd) finds its certificates there
tests=("randread-4k-j1:--rw=randread --bs=4k --iodepth=32 --numjobs=1"
	"randread-4k-j2:--rw=randread --bs=4k --iodepth=32 --numjobs=2"
	"randwrite-4k-j1:--rw=randwrite --bs=4k --iodepth=32 --numjobs=1"
	"randread-4k-qd128-j4:--rw=randread --bs=4k --iodepth=128 --numjobs=4"
	"seqread-128k-j1:--rw=read --bs=128k --iodepth=32 --numjobs=1")
if [ -n "${NBD_TLS_ONLY:-}" ]; then # e.g. NBD_TLS_ONLY=seqread-128k-j1: those tests only
	only=()
	for t in "${tests[@]}"; do [[ " $NBD_TLS_ONLY " == *" ${t%%:*} "* ]] && only+=("$t"); done
	tests=("${only[@]}")
fi
declare -A res
head -c "$(numfmt --from=iec $size)" /dev/urandom >"$dir/disk.img"
host=$(python3 -c "print(int($(numfmt --from=iec $size) * 1.2) >> 20)")M
for mode in tls plain; do
	tlsargs=()
	[ $mode = tls ] && tlsargs=(--tls=require --tls-certificates "$pki")
	"$vc" serve --device emu --socket "$dir/v.sock" --pidfile "$dir/v.pid" --host-bytes "$host" \
		--gpu-bytes 0 "${tlsargs[@]}" "$dir/disk.img" 2>"$dir/v.log"
	pids+=("$(cat "$dir/v.pid")")
	scheme=$([ $mode = tls ] && echo nbds+unix || echo nbd+unix)
	run_tests "vc-$mode" "$scheme:///?socket=$dir/v.sock" read
	sleep 0.3
done
run_nbdkit nbds+unix --tls=require --tls-certificates="$pki"

{
	bench_json_head "\"tls\": \"X.509, --tls=require\", \"size\": \"$size\", "
	first=1
	for t in "${tests[@]}"; do
		n=${t%%:*}
		read -r vi vb <<<"${res[vc-tls:$n]}"
		read -r pi pb <<<"${res[vc-plain:$n]}"
		read -r ki kb <<<"${res[nk:$n]}"
		[ $first = 1 ] || echo ","
		first=0
		printf '  "%s": {"vramcache_tls_iops": %s, "vramcache_tls_bw": %s, "nbdkit_tls_iops": %s, "nbdkit_tls_bw": %s, "vramcache_plain_iops": %s, "vramcache_plain_bw": %s, "ratio": %.3f}' \
			"$n" "$vi" "$vb" "$ki" "$kb" "$pi" "$pb" "$(python3 -c "print($vi / max($ki, 1))")"
	done
	echo; echo "}}"
} >"$out/nbd_tls.json"
python3 - "$out/nbd_tls.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print("NBD over TLS (%s), Unix socket, fio nbd engine, %s s per test (%s)" %
      (j["tls"], j["runtime_s"], j["machine"]))
print("%-21s %14s %14s %8s %16s" % ("test", "vramcache TLS", "nbdkit TLS", "ratio",
                                    "vramcache plain"))
for n, t in j["tests"].items():
    unit = lambda i, b: ("%.0f MiB/s" % (b / 2**20)) if "128k" in n else ("%.1fk IOPS" % (i / 1000))
    print("%-21s %14s %14s %7.2fx %16s" % (n, unit(t["vramcache_tls_iops"], t["vramcache_tls_bw"]),
          unit(t["nbdkit_tls_iops"], t["nbdkit_tls_bw"]), t["ratio"],
          unit(t["vramcache_plain_iops"], t["vramcache_plain_bw"])))
PY
