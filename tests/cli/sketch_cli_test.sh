#!/usr/bin/env bash
# The `sketch` command end to end (DESIGN.md, "sketch command"), on real text: a word list
# (Debian's wamerican, installed by scripts/install-deps.sh; generated words when absent).
#
#   size, fpr     the README's figures and the lectures' examples (seeds 000, 003, 004);
#   compressed    seed 002's table of compressed filters;
#   dedup         against awk '!seen[$0]++' on the same input: every line it prints is a
#                 first occurrence, printed once and in order (no false negatives), and the
#                 first occurrences it drops (false positives) are at most a bound derived
#                 from the filter's false-positive rate (below); files, stdin and `-` give
#                 the same output; bytes are kept as they are (CR, NUL, a last line without
#                 a newline); more distinct lines than --items is warned about; the lines
#                 of a slow pipe come out as they come in;
#   topk          against exact counts: the format, the order, estimates within
#                 [true, true + εN], and the exact top items found;
#   bad arguments one line on stderr naming the argument, exit status 2, and no output
#                 (counts as the README writes them; a directory as FILE; limits of the
#                 library such as a Count-Min sketch too wide for --epsilon);
#   write errors  a full disk or a closed stdout: one line on stderr, exit status 1, and an
#                 endless input is not read to its end; a closed pipe ends dedup quietly;
#                 a FILE that fails midway keeps the output of the files before it;
#   memory        bounded whatever the input (not on a sanitizer build, whose allocator
#                 keeps freed memory on purpose);
#   progress      on stderr only when it is a terminal.
#
# The false-positive bound: each new line is dropped with a probability at most the
# filter's FPR once it holds all d distinct lines, p = `sketch fpr` at (bits, d), so the
# number dropped is at most Binomial(d, p) in distribution; the test allows its quantile at
# 1 − 10⁻⁶. Inputs come from fixed seeds, so a run is deterministic.
#
# Usage: tests/cli/sketch_cli_test.sh PATH/TO/sketch
set -euo pipefail

sketch=${1:?usage: $0 PATH/TO/sketch}
[[ -x $sketch ]] || { echo "FAIL: $sketch is not an executable" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/sketch-cli-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
ok() { echo "ok: $*"; }

# expect_lines NAME EXPECTED -- ARGS…: the command's stdout must be EXPECTED exactly.
expect_lines() {
  local name=$1 expected=$2 got
  shift 3
  got=$("$sketch" "$@") || { fail "$name: exit status $?"; return; }
  if [[ $got == "$expected" ]]; then ok "$name"; else fail "$name: got"$'\n'"$got"$'\n'"expected"$'\n'"$expected"; fi
}

# expect_near NAME VALUE TOLERANCE -- ARGS…: the command prints one number within
# TOLERANCE (relative) of VALUE.
expect_near() {
  local name=$1 value=$2 tolerance=$3 got
  shift 4
  got=$("$sketch" "$@") || { fail "$name: exit status $?"; return; }
  if python3 -c 'import sys; g, v, t = map(float, sys.argv[1:]); sys.exit(abs(g - v) > t * v)' \
    "$got" "$value" "$tolerance"; then
    ok "$name ($got)"
  else
    fail "$name: got $got, expected $value within ${tolerance} relative"
  fi
}

# field NAME OUTPUT: the value of the line "NAME: VALUE" of `sketch size`.
field() { sed -n "s/^$1: //p" <<<"$2"; }

# ---- size and fpr ----------------------------------------------------------------------
expect_lines "size, blocked (README)" $'bits: 168898304\nbytes: 21112288\nhashes: 8\nbits_per_item: 16.8898\nfpr: 0.000999998' \
  -- size --items 10M --fpr 0.001
expect_lines "size, classic (README)" $'bits: 143776394\nbytes: 17972050\nhashes: 10\nbits_per_item: 14.3776\nfpr: 0.00100000' \
  -- size --items 10M --fpr 0.001 --layout classic
# Six significant digits of the rounded value: a rate just below 1 rounds to 1.
expect_lines "fpr, nearly 1" '1' -- fpr --bits 100 --items 1600 --hashes 1
# Seed 003: n = 5,000,000, k = 30 vectors of 2,500,000 bits → 1.28%.
expect_near "fpr, partitioned (seed 003: 1.28%)" 0.0128 0.01 -- fpr --bits 2500000 --items 5000000 --hashes 30 --layout partitioned
# Seed 000: the spell checker, 8 bits per word and 5 hash functions → about 2%.
expect_near "fpr, 8 bits per item, k = 5 (seed 000: about 2%)" 0.0217 0.01 -- fpr --bits 8000000 --items 1000000 --hashes 5
# Seed 004's table: m/n = 10, k = 7 → 0.00819.
expect_near "fpr, m/n = 10, k = 7 (seed 004: 0.00819)" 0.00819 0.001 -- fpr --bits 10000000 --items 1000000 --hashes 7
# The classic formula (1 − (1 − 1/m)^(kn))^k, computed here independently.
expect_near "fpr, classic, exact formula" \
  "$(python3 -c 'm, n, k = 1000, 100, 7; print((1 - (1 - 1 / m) ** (k * n)) ** k)')" 1e-5 -- fpr --bits 1000 --items 100 --hashes 7

# ---- the text ----------------------------------------------------------------------------
dict=""
for f in /usr/share/dict/words /usr/share/dict/american-english; do
  [[ -r $f ]] && { dict=$f; break; }
done
python3 - "$dict" "$work" <<'EOF'
import random, sys
dict_path, work = sys.argv[1], sys.argv[2]
if dict_path:
    words = list(dict.fromkeys(open(dict_path, "rb").read().split(b"\n")))
    words = [w for w in words if w]
else:  # no word list: pseudo-words from a fixed seed
    rng = random.Random(3)
    words = list(dict.fromkeys(bytes(rng.choices(b"abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 12)))
                               for _ in range(100_000)))
rng = random.Random(7)
# dedup input: every word once, a third of them again, a tenth a third time, shuffled.
lines = words + rng.sample(words, len(words) // 3) + rng.sample(words, len(words) // 10)
rng.shuffle(lines)
with open(f"{work}/lines.txt", "wb") as f:
    f.write(b"\n".join(lines) + b"\n")
# topk input: 200,000 tokens, Zipf(1.2) over 5,000 words.
top = words[:5000]
weights = [1 / (r ** 1.2) for r in range(1, len(top) + 1)]
tokens = rng.choices(top, weights=weights, k=200_000)
with open(f"{work}/tokens.txt", "wb") as f:
    f.write(b"\n".join(tokens) + b"\n")
EOF
echo "text: ${dict:-generated words}, $(wc -l <"$work/lines.txt") lines"

# check_dedup NAME OUTPUT BITS [HASHES]: OUTPUT against awk's exact output, with the
# false-positive bound of a filter of BITS bits (and HASHES hashes: classic).
awk '!seen[$0]++' "$work/lines.txt" >"$work/exact.txt"
check_dedup() {
  local name=$1 output=$2 bits=$3 hashes=${4:-} distinct p
  distinct=$(wc -l <"$work/exact.txt")
  if [[ -n $hashes ]]; then
    p=$("$sketch" fpr --bits "$bits" --items "$distinct" --hashes "$hashes")
  else
    p=$("$sketch" fpr --bits "$bits" --items "$distinct" --layout blocked)
  fi
  if python3 - "$work/exact.txt" "$output" "$distinct" "$p" <<'EOF'; then ok "$name"; else fail "$name"; fi
import math, sys
exact = open(sys.argv[1], "rb").read().split(b"\n")[:-1]
got = open(sys.argv[2], "rb").read().split(b"\n")[:-1]
d, p = int(sys.argv[3]), float(sys.argv[4])
# The 1 - 1e-6 quantile of Binomial(d, p).
term, cdf, allowed = (1 - p) ** d, 0.0, 0
while True:
    cdf += term
    if 1 - cdf < 1e-6:
        break
    term *= (d - allowed) / (allowed + 1) * p / (1 - p)
    allowed += 1
i = 0
for line in got:  # a subsequence of the first occurrences
    while i < len(exact) and exact[i] != line:
        i += 1
    if i == len(exact):
        sys.exit(f"  {line!r} is printed but is no first occurrence (or out of order, or printed twice)")
    i += 1
dropped = len(exact) - len(got)
print(f"  {len(got)} of {len(exact)} first occurrences printed, {dropped} dropped "
      f"(false positives; p = {p}, allowed {allowed})")
sys.exit(dropped > allowed)
EOF
}

blocked_bits=$(field bits "$("$sketch" size --items 200k --fpr 0.001)")
"$sketch" dedup --items 200k --fpr 0.001 "$work/lines.txt" >"$work/blocked.txt"
check_dedup "dedup, blocked (the default)" "$work/blocked.txt" "$blocked_bits"
classic=$("$sketch" size --items 200k --fpr 0.001 --layout classic)
"$sketch" dedup --items 200k --fpr 0.001 --layout classic "$work/lines.txt" >"$work/classic.txt"
check_dedup "dedup, classic" "$work/classic.txt" "$(field bits "$classic")" "$(field hashes "$classic")"
"$sketch" dedup --items 200k --bits-per-item 12 --hashes 7 "$work/lines.txt" >"$work/bpi.txt"
check_dedup "dedup --bits-per-item 12 --hashes 7 (classic)" "$work/bpi.txt" 2400000 7
# 100 bits per item would want 69 hash functions; a classic filter takes at most 64.
"$sketch" dedup --items 200k --bits-per-item 100 --layout classic "$work/lines.txt" >"$work/bpi100.txt"
check_dedup "dedup --bits-per-item 100 (classic, 64 hashes)" "$work/bpi100.txt" 20000000 64
"$sketch" dedup --items 200k --bits-per-item 12 "$work/lines.txt" >"$work/bpi-blocked.txt"
check_dedup "dedup --bits-per-item 12 (blocked)" "$work/bpi-blocked.txt" \
  "$(python3 -c 'import math; print(math.ceil(12 * 200000 / 256) * 256)')"

# Over capacity: ten times more distinct lines than --items. Still no line printed twice
# and no false negative, and a warning says by how much.
"$sketch" dedup --items 10k "$work/lines.txt" >"$work/over.txt" 2>"$work/over.err"
if grep -q "more than --items 10000" "$work/over.err" && python3 - "$work/exact.txt" "$work/over.txt" <<'EOF'; then
import sys
exact = open(sys.argv[1], "rb").read().split(b"\n")[:-1]
got = open(sys.argv[2], "rb").read().split(b"\n")[:-1]
position = {line: i for i, line in enumerate(exact)}
order = [position.get(line, -1) for line in got]
sys.exit(min(order, default=0) < 0 or order != sorted(set(order)))
EOF
  ok "dedup over capacity: warned, $(wc -l <"$work/over.txt") lines printed, none twice"
else
  fail "dedup over capacity: $(cat "$work/over.err")"
fi

# The same output from stdin, from `-`, and from the input split into two files.
head -n 100000 "$work/lines.txt" >"$work/part1.txt"
tail -n +100001 "$work/lines.txt" >"$work/part2.txt"
"$sketch" dedup --items 200k --fpr 0.001 <"$work/lines.txt" >"$work/stdin.txt"
"$sketch" dedup --items 200k --fpr 0.001 - <"$work/lines.txt" >"$work/dash.txt"
"$sketch" dedup --items 200k --fpr 0.001 "$work/part1.txt" "$work/part2.txt" >"$work/parts.txt"
if cmp -s "$work/blocked.txt" "$work/stdin.txt" && cmp -s "$work/blocked.txt" "$work/dash.txt" &&
  cmp -s "$work/blocked.txt" "$work/parts.txt"; then
  ok "dedup: stdin, - and two files give the same output"
else
  fail "dedup: stdin, - or two files differ from one file"
fi

# A slow pipe (`tail -f log | sketch dedup | …`): each line first seen comes out while the
# input is still open, into a pipe as onto a terminal. The writer sends a line and waits
# for it (or its absence, for a duplicate) at the other end before it sends the next one;
# a dedup that waited for more input, or for its end, before it wrote would never answer.
if timeout 60 python3 - "$sketch" <<'EOF'; then
import os, select, subprocess, sys
p = subprocess.Popen([sys.argv[1], "dedup"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
out = p.stdout.fileno()
def answer(seconds):
    ready, _, _ = select.select([out], [], [], seconds)
    return os.read(out, 4096) if ready else b""
for line, expected in [(b"a", b"a\n"), (b"b", b"b\n"), (b"a", b""), (b"c", b"c\n")]:
    p.stdin.write(line + b"\n")
    p.stdin.flush()
    got = answer(10 if expected else 1)
    if got != expected:
        print(f"after {line!r}: got {got!r}, expected {expected!r}", file=sys.stderr)
        p.kill()
        sys.exit(1)
p.stdin.close()
sys.exit(p.wait())
EOF
  ok "dedup: each line of a slow pipe comes out while the input is open"
else
  fail "dedup holds back the lines of a slow pipe"
fi

# Bytes as they are: CR, NUL, invalid UTF-8, empty lines, a last line without a newline.
printf 'a\r\nb\na\r\n\n\xff\xfe\nx\0y\nx\0z\n\nx\0y\n\xff\xfe\nlast' >"$work/bytes.txt"
printf 'a\r\nb\n\n\xff\xfe\nx\0y\nx\0z\nlast\n' >"$work/bytes.expected"
"$sketch" dedup "$work/bytes.txt" >"$work/bytes.out"
if cmp -s "$work/bytes.out" "$work/bytes.expected"; then ok "dedup keeps bytes as they are"; else fail "dedup bytes: $(od -c "$work/bytes.out")"; fi
if [[ -z $("$sketch" dedup </dev/null) && -z $("$sketch" topk </dev/null) ]]; then
  ok "empty input: empty output"
else
  fail "empty input gives output"
fi
# A line of 20 MB, twice, between short ones.
python3 -c 'import sys; big = b"x" * 20_000_000; sys.stdout.buffer.write(b"a\n" + big + b"\nb\n" + big + b"\na\n")' \
  >"$work/long.txt"
if [[ $("$sketch" dedup "$work/long.txt" | awk '{ print length($0) }' | paste -sd' ') == "1 20000000 1" ]]; then
  ok "dedup: a 20 MB line"
else
  fail "dedup: a 20 MB line"
fi

# ---- topk --------------------------------------------------------------------------------
"$sketch" topk -k 10 "$work/tokens.txt" >"$work/topk.txt"
if python3 - "$work/tokens.txt" "$work/topk.txt" <<'EOF'; then ok "topk -k 10 against exact counts"; else fail "topk -k 10"; fi
import collections, re, sys
tokens = open(sys.argv[1], "rb").read().split(b"\n")[:-1]
lines = open(sys.argv[2], "rb").read().split(b"\n")[:-1]
n, eps = len(tokens), 0.0001  # the default --epsilon
counts = collections.Counter(tokens)
ranked = [c for _, c in counts.most_common()]
bad = []
if len(lines) != 10:
    bad.append(f"{len(lines)} lines, not 10")
got = []
for line in lines:
    m = re.fullmatch(rb"(\d+)\t(.+)", line)
    if not m:
        bad.append(f"not ESTIMATE<TAB>ITEM: {line!r}")
        continue
    got.append((int(m.group(1)), m.group(2)))
if [e for e, _ in got] != sorted((e for e, _ in got), reverse=True):
    bad.append("not highest first")
for estimate, item in got:
    # Count-Min: never below the truth, above it by at most εN (probability 1 − δ per item).
    if not counts[item] <= estimate <= counts[item] + eps * n:
        bad.append(f"{item!r}: estimate {estimate}, true count {counts[item]}")
    # Nothing much lighter than the true 10th.
    if counts[item] < ranked[9] - eps * n:
        bad.append(f"{item!r} (true count {counts[item]}) reported, the true 10th has {ranked[9]}")
# Every item heavier than the true 11th by more than εN is found.
for item, c in counts.most_common(10):
    if c > ranked[10] + eps * n and item not in {i for _, i in got}:
        bad.append(f"{item!r} (true count {c}) missing")
print("  " + "; ".join(bad) if bad else f"  {len(got)} items, estimates within [true, true + {eps * n:.0f}]")
sys.exit(bool(bad))
EOF
if [[ $(printf 'b\na\nb\n' | "$sketch" topk -k 10) == $'2\tb\n1\ta' ]]; then
  ok "topk: fewer distinct items than k"
else
  fail "topk: fewer distinct items than k"
fi

# ---- compressed (seed 002's table, Mitzenmacher 2002) -------------------------------------
# For each column: the formula's FPR within 1% of the table, the entropy within 0.02; a filter
# of 200,000 items coded within 2% of its entropy (below 16 bits per item for the sparse
# columns); its FPR measured over 1M queries within 30% of the formula (about 300 false
# positives expected: 30% is 5 standard deviations).
for column in "16 11 0.000459 16" "28 4 0.000314 15.84" "48 3 0.000222 15.82"; do
  read -r b k table_fpr table_bits <<<"$column"
  if got=$("$sketch" compressed --bits-per-item "$b" --hashes "$k" --items 200k) &&
    python3 - "$got" "$b" "$table_fpr" "$table_bits" <<'EOF'; then
import sys
got, b, table_fpr, table_bits = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
f = dict(line.split(": ") for line in got.splitlines())
fpr, entropy = float(f["fpr"]), float(f["entropy_bits_per_item"])
coded, measured = float(f["compressed_bits_per_item"]), float(f["measured_fpr"])
assert list(f) == ["fpr", "entropy_bits_per_item", "compressed_bits_per_item", "measured_fpr"], list(f)
assert abs(fpr - table_fpr) <= 0.01 * table_fpr, fpr
assert abs(entropy - table_bits) <= 0.02, entropy
assert entropy <= coded <= 1.02 * entropy, coded
assert b == 16 or coded < 16, coded
assert abs(measured - fpr) <= 0.3 * fpr, measured
EOF
    ok "compressed, b = $b, k = $k: $(tr '\n' ' ' <<<"$got")"
  else
    fail "compressed, b = $b, k = $k: $got"
  fi
done
# Sizing for transmission picks the table's columns back.
expect_lines "size, compressed, within 16 transmitted bits, at most 48 in memory (seed 002)" \
  $'bits: 48000000\nbytes: 6000000\nhashes: 3\nbits_per_item: 48.0000\nfpr: 0.000222401\ntransmitted_bits_per_item: 15.8290\ntransmitted_bytes: 1978623' \
  -- size --items 1M --transmitted-bits-per-item 16 --layout compressed --max-bits-per-item 48
expect_lines "size, compressed, at fpr 0.000314, at most 28.1 in memory (seed 002)" \
  $'bits: 28001231\nbytes: 3500154\nhashes: 4\nbits_per_item: 28.0012\nfpr: 0.000314000\ntransmitted_bits_per_item: 15.8466\ntransmitted_bytes: 1980822' \
  -- size --items 1M --fpr 0.000314 --layout compressed --max-bits-per-item 28.1
expect_lines "compressed, formulas only" $'fpr: 0.000222401\nentropy_bits_per_item: 15.8290' \
  -- compressed --bits-per-item 48 --hashes 3

# ---- bad arguments -----------------------------------------------------------------------
# expect_usage_error NAMED ARGS…: exit status 2 and one line on stderr that names NAMED.
expect_usage_error() {
  local named=$1 status=0
  shift
  "$sketch" "$@" </dev/null >"$work/usage.out" 2>"$work/usage.err" || status=$?
  if [[ $status == 2 && $(wc -l <"$work/usage.err") == 1 && ! -s $work/usage.out ]] &&
    grep -qF -- "$named" "$work/usage.err"; then
    ok "sketch $* → $(cat "$work/usage.err")"
  else
    fail "sketch $*: exit status $status, stderr: $(cat "$work/usage.err")"
  fi
}
expect_usage_error "bogus" bogus
expect_usage_error "--bits-per-item" compressed --hashes 3
expect_usage_error "--fpr" size --items 1M
expect_usage_error "--transmitted-bits-per-item" size --items 1M --transmitted-bits-per-item 16
expect_usage_error "--transmitted-bits-per-item" size --items 1M --fpr 0.01 --transmitted-bits-per-item 16 --layout compressed
expect_usage_error "--transmitted-bits-per-item" size --items 1M --transmitted-bits-per-item 1.4 --layout compressed
expect_usage_error "--max-bits-per-item" size --items 1M --fpr 1e-12 --layout compressed --max-bits-per-item 16
expect_usage_error "--bits-per-item" compressed --bits-per-item -1 --hashes 3
expect_usage_error "--hashes" compressed --bits-per-item 28 --hashes 0
expect_usage_error "--items" compressed --bits-per-item 28 --hashes 4 --items 0
expect_usage_error "--items" size --fpr 0.01
expect_usage_error "--items" size --items ten --fpr 0.01
expect_usage_error "--fpr" size --items 10 --fpr 1.5
expect_usage_error "--layout" size --items 10 --fpr 0.01 --layout round
expect_usage_error "--items, --fpr" size --items 100G --fpr 0.001
expect_usage_error "--items, --fpr: bloom_filter: 100000000000 items at fpr 0.001 need more than 2^40 bits" \
  size --items 100G --fpr 0.001 --layout classic
expect_usage_error "--items" size --items 0x10 --fpr 0.01
expect_usage_error "--items" size --items " 10" --fpr 0.01
expect_usage_error "--items" size --items 1e3 --fpr 0.01
expect_usage_error '--items: "1.5" is not a whole number' size --items 1.5 --fpr 0.01
expect_usage_error '--items: "0" must be at least 1' size --items 0 --fpr 0.01
expect_usage_error '--items: "2000000G" is too large' size --items 2000000G --fpr 0.01
# Counts as the README and --help write them, exactly (1.001M is 1000999.99… in a double).
for count in 10k:10000 10K:10000 1.5M:1500000 1.001M:1001000 2.01k:2010; do
  if [[ $("$sketch" size --items "${count%:*}" --fpr 0.01) == $("$sketch" size --items "${count#*:}" --fpr 0.01) ]]; then
    ok "--items ${count%:*} is ${count#*:}"
  else
    fail "--items ${count%:*} is not ${count#*:}"
  fi
done
expect_usage_error "--hashes" fpr --bits 100 --items 10
expect_usage_error "--hashes" fpr --bits 100 --items 10 --hashes 7 --layout blocked
expect_usage_error "--bits-per-item" dedup --fpr 0.01 --bits-per-item 10
expect_usage_error "--hashes" dedup --hashes 7
# A filter that cannot fit in memory (1.7 TiB) is refused before it is allocated, at once,
# instead of zeroing memory until the OOM killer comes.
expect_usage_error "--items, --fpr: " dedup --items 1000G --fpr 0.001
# Under an address-space limit of 1 GiB (ulimit -v), whatever the machine's memory: a
# filter over the limit is refused before it is allocated. The check sizes the filter of
# the layout asked for: at --fpr 1e-9 the blocked filter needs nearly 8 times the bits of a
# classic one (here 1.56 GiB against 206 MiB), so it is refused, the classic one is not.
printf '#!/bin/sh\nulimit -v 1048576 && exec "%s" "$@"\n' "$sketch" >"$work/sketch-1g"
chmod +x "$work/sketch-1g"
unlimited=$sketch
sketch=$work/sketch-1g
if ! "$sketch" --version >/dev/null 2>&1; then
  # A sanitizer's shadow memory alone takes more address space than that.
  echo "skipped: the memory checks under ulimit -v (this build does not start under it)"
else
  expect_usage_error "--items, --fpr: the filter needs at least 98.3 GiB, more than the 1 GiB" \
    dedup --items 50G --fpr 0.001
  expect_usage_error "the filter needs at least 1.56 GiB, more than the 1 GiB" dedup --items 40M --fpr 1e-9
  if "$sketch" dedup --items 40M --fpr 1e-9 --layout classic </dev/null >/dev/null 2>"$work/usage.err"; then
    ok "sketch dedup --items 40M --fpr 1e-9 --layout classic fits in 1 GiB"
  else
    fail "sketch dedup --items 40M --fpr 1e-9 --layout classic under 1 GiB: $(cat "$work/usage.err")"
  fi
  expect_usage_error "--epsilon, --delta: the sketch needs at least" topk --epsilon 2e-8 --delta 1e-9
fi
sketch=$unlimited
expect_usage_error "more than the" dedup --items 100G --bits-per-item 100 --hashes 7
expect_usage_error "--hashes" dedup --bits-per-item 10 --hashes 7 --layout blocked
expect_usage_error "--bits-per-item" dedup --bits-per-item 0
# Control characters in an argument are escaped: the error stays on one line.
expect_usage_error '--items: "10\n" is not a count' size --items $'10\n' --fpr 0.1
expect_usage_error '--fpr' size --items 10 --fpr $'0.1\nfoo'
expect_usage_error 'no\nsuch\x1b[2J' dedup $'no\nsuch\e[2J'
expect_usage_error "--nope" dedup --nope
expect_usage_error "$work/missing.txt" dedup "$work/lines.txt" "$work/missing.txt"
expect_usage_error "$work: Is a directory" dedup "$work/lines.txt" "$work"
expect_usage_error "-k" topk -k 0
expect_usage_error "--epsilon" topk --epsilon 2
expect_usage_error "--epsilon" topk --epsilon 1e-9
expect_usage_error "--delta" topk --delta 1e-300
expect_usage_error "$work/missing.txt" topk "$work/missing.txt"
expect_usage_error "$work: Is a directory" topk "$work"

# ---- write errors ------------------------------------------------------------------------
# expect_write_error ARGS…: stdout on a full disk (/dev/full), then closed: exit status 1 and
# one line on stderr, not a success with the output lost.
expect_write_error() {
  local stdout status
  for stdout in full closed; do
    status=0
    if [[ $stdout == full ]]; then
      "$sketch" "$@" >/dev/full 2>"$work/write.err" || status=$?
    else
      "$sketch" "$@" >&- 2>"$work/write.err" || status=$?
    fi
    if [[ $status == 1 && $(wc -l <"$work/write.err") == 1 ]] &&
      grep -q "cannot write the output" "$work/write.err"; then
      ok "sketch $* (stdout $stdout) → $(cat "$work/write.err")"
    else
      fail "sketch $* (stdout $stdout): exit status $status, stderr: $(cat "$work/write.err")"
    fi
  done
}
expect_write_error size --items 10 --fpr 0.1
expect_write_error fpr --bits 100 --items 10 --hashes 3
expect_write_error dedup "$work/lines.txt"
expect_write_error topk "$work/tokens.txt"
expect_write_error --help
# stderr closed or on a full disk: the exit status still tells (2 for a usage error, 1 for a
# write error), never an abort (it was SIGABRT: the error message's failed write threw).
for stderr in closed full; do
  status=0
  if [[ $stderr == closed ]]; then "$sketch" size 2>&- || status=$?; else "$sketch" size 2>/dev/full || status=$?; fi
  if [[ $status == 2 ]]; then ok "usage error with stderr $stderr: exit 2"; else fail "usage error with stderr $stderr: exit status $status, expected 2"; fi
  status=0
  if [[ $stderr == closed ]]; then
    "$sketch" dedup "$work/lines.txt" >/dev/full 2>&- || status=$?
  else
    "$sketch" dedup "$work/lines.txt" >/dev/full 2>/dev/full || status=$?
  fi
  if [[ $status == 1 ]]; then ok "write error with stderr $stderr: exit 1"; else fail "write error with stderr $stderr: exit status $status, expected 1"; fi
done
# Midway: dedup stops at the first failed write instead of reading an endless input.
status=0
seq 1 inf | timeout 20 "$sketch" dedup --items 1M >/dev/full 2>"$work/write.err" || status=$?
if [[ $status == 1 ]]; then ok "dedup stops at a write error"; else fail "dedup on an endless input to /dev/full: exit status $status"; fi
# A closed pipe: SIGPIPE ends dedup (exit status 141, or 0 when it was done), no message.
first=$({
  status=0
  "$sketch" dedup "$work/lines.txt" 2>"$work/pipe.err" || status=$?
  echo "$status" >"$work/pipe.status"
} | head -n 1)
if [[ $first == $(head -n 1 "$work/exact.txt") && $(<"$work/pipe.status") =~ ^(0|141)$ && ! -s $work/pipe.err ]]; then
  ok "dedup | head -n 1"
else
  fail "dedup | head -n 1: exit status $(<"$work/pipe.status"), stderr: $(cat "$work/pipe.err")"
fi
# A FILE that fails midway (/proc/self/mem: reading at offset 0 is an I/O error): the output
# of the files before it is kept, whole.
if [[ -r /proc/self/mem ]]; then
  status=0
  "$sketch" dedup --items 200k --fpr 0.001 "$work/lines.txt" /proc/self/mem >"$work/midway.txt" 2>"$work/midway.err" ||
    status=$?
  if [[ $status == 1 ]] && cmp -s "$work/midway.txt" "$work/blocked.txt" && grep -q "/proc/self/mem" "$work/midway.err"; then
    ok "dedup: a FILE failing midway → $(cat "$work/midway.err"), the output before it kept"
  else
    fail "dedup: a FILE failing midway: exit status $status, $(wc -l <"$work/midway.txt") lines out, stderr: $(cat "$work/midway.err")"
  fi
else
  echo "skipped: a FILE failing midway (no /proc/self/mem)"
fi

# ---- memory: bounded whatever the input --------------------------------------------------
if [[ ${SKETCH_SANITIZED:-0} == 1 ]]; then
  echo "skipped: the memory bound on a sanitizer build"
elif [[ ! -x /usr/bin/time ]]; then
  echo "skipped: the memory bound (GNU time is not installed)"
else
  # 4,000,000 distinct lines (53 MB) through a filter sized for 1M items (2 MiB) and through
  # topk: the peak resident set (GNU time's %M, KiB) must stay far below the input.
  for command in "dedup --items 1M" "topk"; do
    # shellcheck disable=SC2086  # the command's words
    python3 -c 'import sys; sys.stdout.buffer.write(b"".join(b"line-%d\n" % i for i in range(4_000_000)))' |
      /usr/bin/time -o "$work/rss" -f %M "$sketch" $command >/dev/null 2>"$work/memory.err"
    peak=$(tail -n 1 "$work/rss")
    if ((peak <= 32768)); then
      ok "sketch $command: peak resident set $((peak / 1024)) MiB on 53 MB of input"
    else
      fail "sketch $command: peak resident set $((peak / 1024)) MiB on 53 MB of input (bound: 32 MiB)"
    fi
  done
fi

# ---- progress: on stderr when it is a terminal, never otherwise --------------------------
if python3 - "$sketch" "$work/lines.txt" <<'EOF'; then ok "progress only on a terminal"; else fail "progress"; fi
import os, pty, re, subprocess, sys
sketch, lines = sys.argv[1], sys.argv[2]
primary, secondary = pty.openpty()
p = subprocess.run([sketch, "dedup", lines], stdout=subprocess.DEVNULL, stderr=secondary)
os.close(secondary)
shown = b""
while True:
    try:
        chunk = os.read(primary, 65536)
    except OSError:
        break
    if not chunk:
        break
    shown += chunk
quiet = subprocess.run([sketch, "dedup", lines], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
print(f"  on a terminal: {shown[:60]!r}…; to a pipe: {quiet.stderr!r}")
sys.exit(p.returncode != 0 or re.search(rb"sketch dedup: \d+ lines", shown) is None
         or not shown.endswith(b"\r\x1b[K") or quiet.stderr != b"")
EOF

if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all checks passed"
