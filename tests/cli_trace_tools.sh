# The trace commands end to end (bash cli_trace_tools.sh VRAMCACHE_BINARY):
#  1. a trace with no page accesses: sim, mrc and replay all refuse it with
#     the same message and a nonzero exit, and mrc writes no CSV or SVG;
#  2. an offset whose pages run past 2^64: `trace` refuses it as sim does
#     (the check they share), instead of counting 0 page accesses;
#  3. `mrc` by default is the accurate SHARDS variant (fixed size, 12288
#     keys), within 0.01 mean absolute error of the exact curve on a
#     generated trace;
#  4. a stream of big-endian 32-bit block numbers read with --format
#     lbn32be, and refused (naming the option) without it;
#  5. binary data that is no trace: the message quotes its first line
#     escaped (\xNN, \t, ...) and cut at 60 bytes, and a bad field of a
#     known format likewise, so no control byte (ESC) reaches the terminal.
set -euo pipefail
vc=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/vc-tools-XXXXXX")
trap 'rm -rf "$dir"' EXIT
export MALLOC_PERTURB_=165
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. No page accesses: a CloudPhysics header and a SYNCHRONIZE CACHE (0x35),
#    which moves no data.
printf 'version,time,op,size,lbn\n1,5,35,0,0\n' > "$dir/empty.csv"
for cmd in "sim --no-progress --sizes 16" "sim --no-progress --sizes 10%" \
	"mrc --no-progress --csv $dir/e.csv --svg $dir/e.svg" \
	"mrc --no-progress --method exact --csv $dir/e.csv" \
	"replay --device emu --host 16 --gpu 0" "replay --device emu --host 10% --gpu 0"; do
	# shellcheck disable=SC2086
	if "$vc" $cmd "$dir/empty.csv" > "$dir/out" 2> "$dir/err"; then
		fail "$cmd accepted a trace with no page accesses"
	fi
	grep -q "empty.csv: no page accesses" "$dir/err" || fail "$cmd: $(cat "$dir/err")"
done
[ ! -e "$dir/e.csv" ] && [ ! -e "$dir/e.svg" ] || fail "mrc wrote a curve of an empty trace"

# 2. Pages past 2^64.
printf '0,R,18446744073709551000,4096\n' > "$dir/wrap.csv"
for cmd in trace "sim --no-progress --sizes 4"; do
	# shellcheck disable=SC2086
	if "$vc" $cmd "$dir/wrap.csv" > "$dir/out" 2> "$dir/err"; then
		fail "$cmd accepted an offset past 2^64: $(cat "$dir/out")"
	fi
	grep -q "wrap.csv:1: offset 18446744073709551000 + size 4096 out of range" "$dir/err" ||
		fail "$cmd: $(cat "$dir/err")"
done

# 3. The default MRC against the exact one. The trace: 400 K accesses, ARC
#    format, key = floor(200000 u^3) for u uniform (a skewed, Zipf-like
#    popularity), from the Park-Miller generator (exact in awk's doubles, so
#    every awk writes the same file).
awk 'BEGIN { x = 12345; for (i = 0; i < 400000; i++) { x = (x * 16807) % 2147483647;
	u = x / 2147483647; printf "%d 8 0 %d\n", int(200000 * u * u * u) * 8, i } }' \
	> "$dir/gen.lis"
"$vc" mrc --no-progress --csv "$dir/def.csv" "$dir/gen.lis" > "$dir/def.txt"
grep -q "(SHARDS S=12288)" "$dir/def.txt" ||
	fail "mrc's default is not SHARDS S=12288: $(head -2 "$dir/def.txt")"
"$vc" mrc --no-progress --method exact --points 100000 --csv "$dir/exact.csv" "$dir/gen.lis" \
	> /dev/null
# MAE over the default curve's sizes (1..100 % of its distinct estimate, up
# to the exact distinct count), the exact miss ratio interpolated between
# its 100 K points (under 2 pages apart).
mae=$(awk -F, 'NR == FNR { if (FNR > 1) { ex[n] = $1; ey[n] = $3; n++ } next }
	FNR > 2 { x = $1; if (x > ex[n - 1]) next
		while (j < n - 1 && ex[j + 1] < x) j++
		y = ex[j + 1] > ex[j] ? ey[j] + (ey[j + 1] - ey[j]) * (x - ex[j]) / (ex[j + 1] - ex[j]) : ey[j]
		d = $3 - y; s += d < 0 ? -d : d; m++ }
	END { printf "%.5f %d", s / m, m }' "$dir/exact.csv" "$dir/def.csv")
echo "default mrc against exact: MAE and sizes compared: $mae"
awk -v e="${mae% *}" -v m="${mae#* }" 'BEGIN { exit !(e < 0.01 && m >= 90) }' ||
	fail "default mrc MAE $mae, want under 0.01 over at least 90 sizes"

# 4. lbn32be: blocks 1, 2, 1, 0x01000000 (big-endian) are 3 distinct pages
#    of 4 KiB; little-endian reads 0x01000000, 0x02000000, 0x01000000, 1.
printf '\0\0\0\001\0\0\0\002\0\0\0\001\001\0\0\0' > "$dir/w.bin"
"$vc" trace --format lbn32be "$dir/w.bin" > "$dir/out"
grep -q "format lbn32be, 4 requests (4 reads, 0 writes), 0.0 MiB, 4 page accesses, 3 distinct pages" \
	"$dir/out" || fail "lbn32be: $(cat "$dir/out")"
"$vc" sim --no-progress --format lbn32be --policy lru --sizes 2 "$dir/w.bin" > "$dir/out"
grep -Eq "^lru +2 +0 +0.2500 " "$dir/out" || fail "lbn32be sim: $(cat "$dir/out")"
if "$vc" trace "$dir/w.bin" > "$dir/out" 2> "$dir/err"; then
	fail "a headerless binary trace was guessed: $(cat "$dir/out")"
fi
grep -q "give --format lbn32be or lbn32le" "$dir/err" || fail "binary guess: $(cat "$dir/err")"

# 5. Terminal escapes (set the title, clear the screen), BEL, C0, DEL, high
#    bytes, a tab, a quote, a backslash and a CR, then 100 bytes more: no
#    NUL in the first 16 bytes, so it is read as a text line.
{ printf '\033]0;x\007\033[2J\001\177\200\377\t"\\\rA'; printf 'A%.0s' $(seq 99); printf '\n'; } \
	> "$dir/bin.dat"
if "$vc" trace "$dir/bin.dat" > "$dir/out" 2> "$dir/err"; then
	fail "binary data taken for a trace: $(cat "$dir/out")"
fi
want='unknown trace format (first line "\x1b]0;x\x07\x1b[2J\x01\x7f\x80\xff\t\"\\\r'
want+="$(printf 'A%.0s' $(seq 42))...\")"
grep -qF "$want" "$dir/err" || fail "first line not quoted escaped: $(od -c "$dir/err" | head -5)"
printf '1,\033[31m,0,4096\n' > "$dir/op.csv"
if "$vc" trace --format csv "$dir/op.csv" > "$dir/out" 2> "$dir/err2"; then
	fail "a csv op of ESC [ 3 1 m accepted: $(cat "$dir/out")"
fi
grep -qF 'op.csv:1: op "\x1b[31m" is neither R nor W' "$dir/err2" ||
	fail "csv op not quoted escaped: $(od -c "$dir/err2" | head -5)"
if LC_ALL=C grep -q '[^[:print:]]' "$dir/err" "$dir/err2"; then
	fail "a message holds bytes outside printable ASCII: $(od -c "$dir/err" "$dir/err2" | head)"
fi
echo "cli_trace_tools: ok"
