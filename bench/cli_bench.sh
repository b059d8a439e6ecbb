#!/usr/bin/env bash
# The `sketch` command against the classic shell tools, on the same input:
#   sketch dedup      vs  awk '!seen[$0]++'                 (and mawk, when installed)
#   sketch topk -k 10 vs  sort | uniq -c | sort -rn | head -10
# Wall time and peak memory come from GNU time (/usr/bin/time -f '%e s %M KiB'); for a pipeline
# that is the peak RSS of its largest process, not the sum of its processes. The outputs are
# checked against each other: dedup prints the same lines up to the filter's false positives
# (counted), topk reports the same items (estimates never below the true counts).
#
# Input: 20M lines with about 5M distinct, "user<id>" with id = floor(N^u), u uniform (a
# log-uniform, Zipf-like law: a few very frequent lines and a long tail), from gawk's seeded
# rand(), so the same file every time. It is written once to BUILD_DIR/bench-data and reused.
# If a word list is installed (/usr/share/dict/words, Debian package wamerican), a second
# input of 10M words drawn the same way from it is used as well.
#
# Usage: bench/cli_bench.sh BUILD_DIR        (about 2-3 minutes; the first run also writes the
#                                             input, about 20 s)
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build_dir=$1
sketch=$build_dir/cli/sketch
if [ ! -x "$sketch" ]; then
  echo "cli_bench: $sketch not found; build the sketch_cli target first" >&2
  exit 1
fi
if [ ! -x /usr/bin/time ]; then
  echo "cli_bench: /usr/bin/time not found (Debian package: time)" >&2
  exit 1
fi
if command -v gawk >/dev/null; then gen_awk=gawk; else gen_awk=awk; fi
words_file=${WORDS_FILE:-/usr/share/dict/words}
awk_name=$(awk --version 2>/dev/null | head -1 | cut -d, -f1) || true
awk_name=${awk_name:-awk}

# The C locale for every tool: byte comparisons, the fastest setting of sort and awk.
export LC_ALL=C

data_dir=$build_dir/bench-data
mkdir -p "$data_dir"
work=$(mktemp -d "$data_dir/run.XXXXXX")
trap 'rm -rf "$work"' EXIT

# generate FILE LINES UNIVERSE SEED: LINES lines "user<floor(UNIVERSE^u)>".
generate_users() {
  local file=$1 lines=$2 universe=$3 seed=$4
  if [ -s "$file" ]; then return; fi
  echo "cli_bench: writing $lines lines to $file" >&2
  "$gen_awk" -v n="$lines" -v N="$universe" -v seed="$seed" 'BEGIN {
      srand(seed); lnN = log(N)
      for (i = 0; i < n; i++) printf "user%d\n", int(exp(rand() * lnN))
    }' >"$file.tmp"
  mv "$file.tmp" "$file"
}

# generate_words FILE LINES SEED: LINES words drawn log-uniformly by rank from the word list.
generate_words() {
  local file=$1 lines=$2 seed=$3
  if [ -s "$file" ]; then return; fi
  echo "cli_bench: writing $lines words to $file" >&2
  "$gen_awk" -v n="$lines" -v seed="$seed" '
    { w[NR] = $0 }
    END {
      srand(seed); lnW = log(NR)
      for (i = 0; i < n; i++) print w[int(exp(rand() * lnW))]
    }' "$words_file" >"$file.tmp"
  mv "$file.tmp" "$file"
}

# measure NAME OUTPUT COMMAND: runs COMMAND with sh, stdout to OUTPUT; records "S s K KiB".
measure() {
  local name=$1 output=$2 command=$3
  /usr/bin/time -f '%e s %M KiB' -o "$work/$name.time" sh -c "$command" >"$output"
}
seconds() { cut -d' ' -f1 "$work/$1.time"; }
mebibytes() { awk '{ printf "%.1f", $3 / 1024 }' "$work/$1.time"; }
row() {  # row TASK TOOL NAME
  printf '| %-6s | %-44s | %8s | %13s |\n' "$1" "$2" "$(seconds "$3")" "$(mebibytes "$3")"
}

# suite LABEL INPUT ITEMS: the comparisons on one input; ITEMS sizes the dedup filter.
suite() {
  local label=$1 input=$2 items=$3
  local lines
  lines=$(wc -l <"$input")
  echo
  echo "== $label: $input ($lines lines, $(du -m "$input" | cut -f1) MiB) =="

  # ---- dedup ------------------------------------------------------------------------------
  measure "$label-dedup-sketch" "$work/dedup.sketch" \
    "'$sketch' dedup --items $items --fpr 0.001 '$input'"
  measure "$label-dedup-awk" "$work/dedup.awk" "awk '!seen[\$0]++' '$input'"
  local have_mawk=0
  if command -v mawk >/dev/null; then
    have_mawk=1
    measure "$label-dedup-mawk" "$work/dedup.mawk" "mawk '!seen[\$0]++' '$input'"
  fi
  local exact sketched unique_sketched
  exact=$(wc -l <"$work/dedup.awk")
  sketched=$(wc -l <"$work/dedup.sketch")
  unique_sketched=$(sort -u "$work/dedup.sketch" | wc -l)
  local dedup_check="ok"
  if [ "$unique_sketched" -ne "$sketched" ]; then dedup_check="FAILED: sketch printed a line twice"; fi
  if [ "$sketched" -gt "$exact" ]; then dedup_check="FAILED: sketch printed more lines than awk"; fi
  if [ "$have_mawk" -eq 1 ] && ! cmp -s "$work/dedup.awk" "$work/dedup.mawk"; then
    dedup_check="FAILED: awk and mawk disagree"
  fi
  local false_positives=$((exact - sketched))

  # ---- topk -------------------------------------------------------------------------------
  measure "$label-topk-sketch" "$work/topk.sketch" "'$sketch' topk -k 10 '$input'"
  measure "$label-topk-sort" "$work/topk.sort" "sort '$input' | uniq -c | sort -rn | head -10"
  # Same items in the same order, and how far the estimates are above the exact counts.
  local topk_check
  topk_check=$(awk -F'\t' '
      NR == FNR { sub(/^ +/, ""); split($0, f, " "); exact[FNR] = f[2]; count[f[2]] = f[1]; n = FNR; next }
      { got[FNR] = $2; est[$2] = $1 }
      END {
        same_order = 1; max_over = 0
        for (i = 1; i <= n; i++) {
          if (got[i] != exact[i]) same_order = 0
          if (!(exact[i] in est)) { printf "FAILED: %s (rank %d) missing", exact[i], i; exit }
          over = est[exact[i]] - count[exact[i]]
          if (over < 0) { printf "FAILED: %s underestimated", exact[i]; exit }
          if (over > max_over) max_over = over
        }
        order = same_order ? "same 10 items in the same order" : "same 10 items, order differs"
        printf "%s, estimates at most %d above the exact counts", order, max_over
      }' "$work/topk.sort" "$work/topk.sketch")

  echo
  printf '| %-6s | %-44s | %8s | %13s |\n' "task" "command" "wall (s)" "max RSS (MiB)"
  printf '|--------|----------------------------------------------|----------|---------------|\n'
  row dedup "sketch dedup --items $items --fpr 0.001" "$label-dedup-sketch"
  row dedup "awk '!seen[\$0]++' ($awk_name)" "$label-dedup-awk"
  if [ "$have_mawk" -eq 1 ]; then row dedup "mawk '!seen[\$0]++'" "$label-dedup-mawk"; fi
  row topk "sketch topk -k 10" "$label-topk-sketch"
  row topk "sort | uniq -c | sort -rn | head -10" "$label-topk-sort"
  echo
  local share
  share=$(awk -v f="$false_positives" -v n="$exact" 'BEGIN { printf "%.4f%%", 100 * f / n }')
  echo "dedup: awk printed $exact distinct lines, sketch $sketched: $false_positives false" \
    "positives ($share of the distinct lines); $dedup_check"
  echo "topk:  $topk_check"
  case "$dedup_check $topk_check" in *FAILED*) failures=$((failures + 1)) ;; esac
  echo "top 3 (sketch):"
  head -3 "$work/topk.sketch" | sed 's/^/  /'
}

failures=0
users=$data_dir/users-20M.txt
generate_users "$users" 20000000 50000000 42
suite users "$users" 5M

if [ -r "$words_file" ]; then
  words=$data_dir/words-10M.txt
  generate_words "$words" 10000000 43
  suite words "$words" "$(wc -l <"$words_file")"
else
  echo
  echo "(no word list at $words_file: the natural-language input is skipped; Debian package wamerican)"
fi
if [ "$failures" -ne 0 ]; then
  echo "cli_bench: the outputs disagree (see FAILED above)" >&2
  exit 1
fi
