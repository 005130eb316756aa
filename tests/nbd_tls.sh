#!/usr/bin/env bash
# NBD over TLS (STARTTLS) with real clients. PSK (psktool) and X.509 (a CA,
# server and client certificates made here with certtool):
#   - nbdinfo and nbdcopy over nbds+unix:// and nbds://127.0.0.1:PORT, data
#     round-tripped and compared byte for byte;
#   - qemu-io writes a pattern and qemu-img convert reads the disk back,
#     with tls-creds-psk and tls-creds-x509 objects;
#   - under --tls=require a plaintext client is refused; under --tls=on it
#     is served; a wrong PSK is refused and the server goes on serving;
#   - --tls-verify-peer refuses a client without a certificate;
#   - --handshake-timeout also ends a TLS handshake that stalls;
#   - start-up errors: a missing certificate directory, a file that is not
#     psktool's format, credentials without --tls, a bad --tls value.
# Skips (77) with the reason when a tool is missing.
# Usage: nbd_tls.sh VRAMCACHE_BINARY
. "$(dirname "$0")/nbd_lib.sh"
need nbdinfo libnbd-bin
need nbdcopy libnbd-bin
need certtool gnutls-bin
need psktool gnutls-bin
"$vc" serve --tls=on --tls-psk /dev/null /dev/null 2>&1 | grep -q 'no TLS support' &&
	skip "this build has no GnuTLS (Debian: libgnutls28-dev)"

fail() { echo "FAIL: $*" >&2; exit 1; }
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
disk=$dir/disk.img
truncate -s $((8 << 20)) "$disk"
head -c $((8 << 20)) /dev/urandom >"$dir/in.bin"

# --- credentials ---------------------------------------------------------
psktool -u alice -p "$dir/keys.psk" >/dev/null
psktool -u alice -p "$dir/wrong.psk" >/dev/null # same identity, another key
mkdir -p "$dir/pki" "$dir/cli" "$dir/cacli"
cd "$dir"
certtool --generate-privkey --outfile ca-key.pem 2>/dev/null
printf 'cn = vramcache test CA\nca\ncert_signing_key\nexpiration_days = 2\n' >ca.info
certtool --generate-self-signed --load-privkey ca-key.pem --template ca.info \
	--outfile pki/ca-cert.pem 2>/dev/null
printf 'cn = localhost\ndns_name = localhost\nip_address = 127.0.0.1\ntls_www_server\nencryption_key\nsigning_key\nexpiration_days = 2\n' >server.info
certtool --generate-privkey --outfile pki/server-key.pem 2>/dev/null
certtool --generate-certificate --load-ca-certificate pki/ca-cert.pem --load-ca-privkey ca-key.pem \
	--load-privkey pki/server-key.pem --template server.info --outfile pki/server-cert.pem 2>/dev/null
printf 'cn = client\ntls_www_client\nencryption_key\nsigning_key\nexpiration_days = 2\n' >client.info
certtool --generate-privkey --outfile cli/client-key.pem 2>/dev/null
certtool --generate-certificate --load-ca-certificate pki/ca-cert.pem --load-ca-privkey ca-key.pem \
	--load-privkey cli/client-key.pem --template client.info --outfile cli/client-cert.pem 2>/dev/null
cp pki/ca-cert.pem cli/
cp pki/ca-cert.pem cacli/ # trusts the server, has no certificate of its own
mkdir noca && cp pki/server-cert.pem pki/server-key.pem noca/
cd - >/dev/null

psk_unix="nbds+unix://alice@/?socket=$sock&tls-psk-file=$dir/keys.psk"
psk_tcp="nbds://alice@127.0.0.1:$port/?tls-psk-file=$dir/keys.psk"
x509_unix="nbds+unix:///?socket=$sock&tls-certificates=$dir/cli"
x509_tcp="nbds://127.0.0.1:$port/?tls-certificates=$dir/cli"

roundtrip() { # URI: nbdcopy in, nbdinfo, nbdcopy out, byte for byte
	nbdinfo "$1" >"$dir/info" 2>&1 || { cat "$dir/info" >&2; fail "nbdinfo $1"; }
	grep -q 'with TLS' "$dir/info" || { cat "$dir/info" >&2; fail "no TLS: $1"; }
	grep -q 'export-size: 8388608' "$dir/info" || fail "size: $1"
	nbdcopy "$dir/in.bin" "$1" || fail "nbdcopy in: $1"
	rm -f "$dir/out.bin"
	nbdcopy "$1" "$dir/out.bin" || fail "nbdcopy out: $1"
	cmp "$dir/in.bin" "$dir/out.bin" || fail "data differ: $1"
	head -c $((8 << 20)) /dev/urandom >"$dir/in.bin" # the next round writes new bytes
}
refused() { # URI WHAT
	if nbdinfo "$1" >"$dir/info" 2>&1; then cat "$dir/info" >&2; fail "$2 was served"; fi
}

# --- start-up errors -----------------------------------------------------
startup_error() { # PATTERN ARGS...: serve must exit 2 saying PATTERN
	local pat=$1; shift
	if "$vc" serve --device emu --socket "$dir/bad.sock" "$@" "$disk" 2>"$dir/err"; then
		fail "serve started with $*"
	fi
	grep -q -- "$pat" "$dir/err" || { cat "$dir/err" >&2; fail "no '$pat' for $*"; }
	[ ! -e "$dir/bad.sock" ] || fail "a socket was made before the credentials were checked"
}
startup_error "$dir/nope/server-cert.pem" --tls=require --tls-certificates "$dir/nope"
startup_error "not a psktool line" --tls=on --tls-psk "$dir/pki/ca-cert.pem"
startup_error "$dir/nope.psk" --tls=on --tls-psk "$dir/nope.psk"
startup_error "--tls is off" --tls-psk "$dir/keys.psk"
startup_error "bad value for --tls" --tls=maybe --tls-psk "$dir/keys.psk"
startup_error "one of --tls-certificates" --tls=on
startup_error "needs $dir/noca/ca-cert.pem" --tls=on --tls-verify-peer --tls-certificates "$dir/noca"

# --- PSK, required -------------------------------------------------------
start_server --tls=require --tls-psk "$dir/keys.psk" --write-back "$disk"
roundtrip "$psk_unix"
refused "nbd+unix:///?socket=$sock" "a plaintext client under --tls=require"
refused "nbds+unix://alice@/?socket=$sock&tls-psk-file=$dir/wrong.psk" "a wrong PSK"
refused "nbds+unix://bob@/?socket=$sock&tls-psk-file=$dir/keys.psk" "an unknown PSK identity"
nbdinfo "$psk_unix" | grep -q 'export-size: 8388608' || fail "not served after refusals"
stop_server
# The handshake time limit covers the TLS handshake: a client that sends
# STARTTLS, gets its ACK and goes quiet is hung up on.
start_server --tls=require --tls-psk "$dir/keys.psk" --handshake-timeout 1 "$disk"
python3 - "$sock" <<'PY' || fail "a stalled TLS handshake was not hung up on"
import socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(60)
def rd(k):
    b = b""
    while len(b) < k:
        d = s.recv(k - len(b)); assert d, "EOF before the ACK"; b += d
    return b
assert rd(18)[:16] == b"NBDMAGICIHAVEOPT"
s.sendall(struct.pack(">I", 1) + struct.pack(">QII", 0x49484156454F5054, 5, 0))  # STARTTLS
magic, opt, typ, ln = struct.unpack(">QIII", rd(20))
assert opt == 5 and typ == 1, (opt, typ)  # ACK: the server now waits for a ClientHello
try:
    assert s.recv(1) == b""
except socket.timeout:
    sys.exit("no hang-up in 60 s")
PY
stop_server
"$vc" serve --device emu --tcp "127.0.0.1:$port" --pidfile "$dir/pid" --tls=require \
	--tls-psk "$dir/keys.psk" "$disk"
pid=$(cat "$dir/pid")
roundtrip "$psk_tcp"
refused "nbd://127.0.0.1:$port/" "a plaintext TCP client under --tls=require"
stop_server

# --- PSK, offered: both kinds of client ----------------------------------
start_server --tls=on --tls-psk "$dir/keys.psk" "$disk"
nbdinfo "nbd+unix:///?socket=$sock" | grep -q 'without TLS' || fail "plaintext under --tls=on"
roundtrip "$psk_unix"
stop_server

# --- X.509 ---------------------------------------------------------------
start_server --tls=require --tls-certificates "$dir/pki" "$disk"
roundtrip "$x509_unix"
nbdinfo "nbds+unix:///?socket=$sock&tls-certificates=$dir/cacli" | grep -q 'with TLS' ||
	fail "a client without a certificate, no --tls-verify-peer"
stop_server
"$vc" serve --device emu --tcp "127.0.0.1:$port" --pidfile "$dir/pid" --tls=require \
	--tls-certificates "$dir/pki" --tls-verify-peer "$disk"
pid=$(cat "$dir/pid")
roundtrip "$x509_tcp"
refused "nbds://127.0.0.1:$port/?tls-certificates=$dir/cacli" \
	"a client without a certificate under --tls-verify-peer"
stop_server

# --- qemu-io and qemu-img with tls-creds objects -------------------------
if command -v qemu-img >/dev/null && command -v qemu-io >/dev/null; then
	# qemu's PSK object wants DIR/keys.psk.
	mkdir "$dir/qpsk" && cp "$dir/keys.psk" "$dir/qpsk/keys.psk"
	qemu_check() { # OBJECT IMAGE-OPTS
		qemu-io --object "$1" --image-opts "$2" -c 'write -P 0xa5 65536 1M' \
			-c 'write -P 0x3c 4M 64k' -c flush >"$dir/qio" 2>&1 ||
			{ cat "$dir/qio" >&2; fail "qemu-io: $1"; }
		rm -f "$dir/q.raw"
		qemu-img convert --object "$1" --image-opts "$2" -O raw "$dir/q.raw" ||
			fail "qemu-img convert: $1"
		python3 - "$dir/q.raw" <<'PY' || fail "qemu-img read back other bytes: $1"
import sys
d = open(sys.argv[1], "rb").read()
assert len(d) == 8 << 20, len(d)
assert d[65536:65536 + (1 << 20)] == b"\xa5" * (1 << 20)
assert d[4 << 20:(4 << 20) + 65536] == b"\x3c" * 65536
PY
	}
	start_server --tls=require --tls-psk "$dir/keys.psk" "$disk"
	qemu_check "tls-creds-psk,id=tls0,dir=$dir/qpsk,username=alice,endpoint=client" \
		"driver=nbd,server.type=unix,server.path=$sock,tls-creds=tls0"
	stop_server
	"$vc" serve --device emu --tcp "127.0.0.1:$port" --pidfile "$dir/pid" --tls=require \
		--tls-certificates "$dir/pki" --tls-verify-peer "$disk"
	pid=$(cat "$dir/pid")
	qemu_check "tls-creds-x509,id=tls0,dir=$dir/cli,endpoint=client" \
		"driver=nbd,server.type=inet,server.host=127.0.0.1,server.port=$port,tls-creds=tls0"
	# qemu without TLS under require: refused.
	if qemu-img info "nbd://127.0.0.1:$port/" >/dev/null 2>&1; then
		fail "qemu-img without TLS was served"
	fi
	stop_server
else
	echo "qemu-img/qemu-io not found (Debian: qemu-utils): qemu checks skipped" >&2
fi
echo "nbd tls: all checks passed"
