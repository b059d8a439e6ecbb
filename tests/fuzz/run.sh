#!/usr/bin/env bash
# Runs each fuzz target under libFuzzer for a while (`make fuzz`; see CMakeLists.txt here).
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS [NAME…]     (default: every target)
#   tests/fuzz/run.sh --merge BUILD_DIR [NAME…]
#
# Each target starts from its seeds in tests/fuzz/corpus/NAME and tests/fuzz/found/NAME
# and keeps what it finds in BUILD_DIR/fuzz/NAME/corpus (kept between runs); an input that
# breaks a property is written to BUILD_DIR/fuzz/NAME/ as crash-… (or leak-…, timeout-…,
# oom-…), the run goes on with the next target, and the exit status is 1. To keep such an
# input as a test, fix the bug and copy the file into tests/fuzz/corpus/NAME/.
#
# --merge rewrites tests/fuzz/found/NAME: the smallest set of inputs, from what it holds and
# what the runs kept in BUILD_DIR/fuzz/NAME/corpus, that reaches all the code they reach
# beyond what tests/fuzz/corpus/NAME reaches (libFuzzer's -merge=1). Every build replays
# both folders as the test fuzz_corpus_NAME.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
every=(library_records config extractor http http_connection snapshot values)

if [[ ${1:-} == --merge ]]; then
  build=${2:?usage: $0 --merge BUILD_DIR [NAME…]}
  shift 2
  names=("$@")
  [ ${#names[@]} -eq 0 ] && names=("${every[@]}")
  for name in "${names[@]}"; do
    binary=$build/tests/fuzz/${name}_fuzz
    if [ ! -x "$binary" ]; then
      echo "run.sh: $binary is missing: build the target ${name}_fuzz with -DSKETCHD_FUZZ=ON" >&2
      exit 2
    fi
    merged=$(mktemp -d)
    # The seeds go first, so that only what reaches beyond them is added; then they leave.
    cp "$here/corpus/$name"/* "$merged/"
    mkdir -p "$here/found/$name" "$build/fuzz/$name/corpus"
    if ! "$binary" -merge=1 -rss_limit_mb=4096 "$merged" "$here/found/$name" \
        "$build/fuzz/$name/corpus" >"$build/fuzz/$name/merge.txt" 2>&1; then
      echo "run.sh: merging $name failed (see $build/fuzz/$name/merge.txt)" >&2
      rm -rf "$merged"
      exit 1
    fi
    for seed in "$here/corpus/$name"/*; do rm -f "$merged/$(basename "$seed")"; done
    rm -rf "$here/found/$name"
    mv "$merged" "$here/found/$name"
    chmod 755 "$here/found/$name"
    echo "== $name: $(find "$here/found/$name" -type f | wc -l) inputs in tests/fuzz/found/$name"
  done
  exit 0
fi

build=${1:?usage: $0 BUILD_DIR SECONDS [NAME…]}
seconds=${2:?usage: $0 BUILD_DIR SECONDS [NAME…]}
shift 2
names=("$@")
[ ${#names[@]} -eq 0 ] && names=("${every[@]}")

# Inputs up to: a few records; the largest example configuration and then some; more than
# the extractor's batch buffer (256 KiB), so that full groups and values parsed alone for
# their size are reached; a request with its headers; a snapshot of a small pipeline; a value.
declare -A max_len=([library_records]=4096 [config]=16384 [extractor]=300000 [http]=4096 [snapshot]=8192
                    [values]=256)
failed=()
for name in "${names[@]}"; do
  binary=$build/tests/fuzz/${name}_fuzz
  if [ ! -x "$binary" ]; then
    echo "run.sh: $binary is missing: build the target ${name}_fuzz with -DSKETCHD_FUZZ=ON" >&2
    exit 2
  fi
  work=$build/fuzz/$name
  mkdir -p "$work/corpus"
  echo "== $name: ${seconds}s"
  touch "$work/started"
  if ! "$binary" -max_total_time="$seconds" -max_len="${max_len[$name]:-4096}" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/" \
      "$work/corpus" "$here/corpus/$name" "$here/found/$name" >"$work/log.txt" 2>&1; then
    failed+=("$name")
    grep -E -A3 "^(==[0-9]+==ERROR|SUMMARY)|fuzz check failed|runtime error" "$work/log.txt" | head -20
    echo "   the input: $(find "$work" -maxdepth 1 -newer "$work/started" \
      \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | head -1)"
  fi
  grep -E "^stat::(number_of_executed_units|new_units_added)" "$work/log.txt" | sed 's/^/   /'
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "run.sh: failed: ${failed[*]} (logs: $build/fuzz/NAME/log.txt)" >&2
  exit 1
fi
echo "run.sh: every target ran ${seconds}s without a failure"
