# The trace commands end to end (bash cli_trace_tools.sh VRAMCACHE_BINARY):
#  1. a trace with no page accesses: sim, mrc and replay all refuse it with
#     the same message and a nonzero exit, and mrc writes no CSV or SVG;
#  2. an offset whose pages run past 2^64: `trace` refuses it as sim does
#     (the check they share), instead of counting 0 page accesses;
#  3. `mrc` by default is the accurate SHARDS variant (fixed size, 12288
#     keys), within 0.01 mean absolute error of the exact curve on a
#     generated trace;
#  4. a stream of big-endian 32-bit block numbers read with --format
#     lbn32be, and refused (naming the option) without it.
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
echo "cli_trace_tools: ok"
