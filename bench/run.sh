#!/usr/bin/env bash
# Every benchmark of the repository, in one run, and the goals of the performance issue beside
# the baselines measured in the same run (docs/PERFORMANCE.md explains the figures):
#   1. filter_bench --bits_per_item_table     memory per item: classic, blocked, exact set
#   2. filter_bench                           ns per test_and_insert vs absl::flat_hash_set
#                                             (single calls and batches)
#   3. count_min_bench                        ns per Count-Min update + top-k offer vs a hash map
#      window_bench                           ns per rolling-window dedup (rolling_bloom) vs
#                                             separate generations and exact sets
#   4. a summary of the goals, from the JSON of 2 and 3 (needs python3)
#   5. bench/cli_bench.sh                     `sketch dedup` / `sketch topk` vs awk, sort | uniq
#
# Usage: bench/run.sh BUILD_DIR   (a Release build with SKETCHD_BUILD_BENCH=ON; `make bench`
#                                  runs it on build/). About 8-10 minutes; uses up to 4 GB of RAM.
# MIN_TIME (default 0.3) is --benchmark_min_time, in seconds, of the benchmarks that repeat
# (the out-of-cache and Count-Min ones run a fixed number of iterations).
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build_dir=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
min_time=${MIN_TIME:-0.3}

for exe in filter_bench count_min_bench window_bench; do
  if [ ! -x "$build_dir/bench/$exe" ]; then
    echo "run.sh: $build_dir/bench/$exe not found: configure with -DSKETCHD_BUILD_BENCH=ON and build" >&2
    exit 1
  fi
done
if grep -qs '^CMAKE_BUILD_TYPE:STRING=\(Debug\|\)$' "$build_dir/CMakeCache.txt"; then
  echo "run.sh: warning: $build_dir is not an optimised build; the figures mean little" >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== machine =="
echo "cpu: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores available"
echo "memory: $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown)"
echo

echo "== bits per item =="
"$build_dir/bench/filter_bench" --bits_per_item_table
echo

common=(--benchmark_min_time="$min_time" --benchmark_counters_tabular=true --benchmark_out_format=json)

echo "== filter_bench: dedup, ns per test_and_insert =="
"$build_dir/bench/filter_bench" "${common[@]}" --benchmark_out="$work/filter.json"
echo

echo "== count_min_bench: heavy hitters, ns per item =="
"$build_dir/bench/count_min_bench" "${common[@]}" --benchmark_out="$work/count_min.json"
echo

echo "== window_bench: windowed dedup, ns per test_and_insert =="
"$build_dir/bench/window_bench" --benchmark_counters_tabular=true
echo

echo "== goals =="
if command -v python3 >/dev/null; then
  python3 - "$work/filter.json" "$work/count_min.json" <<'EOF'
import json
import sys

runs = {}
for path in sys.argv[1:]:
    with open(path) as f:
        for b in json.load(f)["benchmarks"]:
            runs[b["name"].split("/iterations:")[0]] = b

def ns(name):
    b = runs[name]
    scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
    return b["real_time"] * scale

def row(goal, measured, target, met):
    print(f"| {goal:<66} | {measured:<34} | {target:<10} | {'met' if met else 'NOT met':<7} |")

print(f"| {'goal':<66} | {'measured':<34} | {'target':<10} | {'':<7} |")
print(f"|{'-' * 68}|{'-' * 36}|{'-' * 12}|{'-' * 9}|")
blocked_in = ns("Dedup/in_cache/blocked")
batch_in = ns("Dedup/in_cache/blocked_batch")
floor_in = ns("Dedup/in_cache/floor_one_line")
row("blocked test_and_insert, in cache", f"{blocked_in:.1f} ns (1-line floor {floor_in:.1f} ns)",
    "<= 3 ns", blocked_in <= 3)
row("  same, in batches (test_and_insert(span, span))", f"{batch_in:.1f} ns", "<= 3 ns",
    batch_in <= 3)
blocked_l1 = ns("Dedup/in_l1/blocked")
floor_l1 = ns("Dedup/in_l1/floor_one_line")
row("  same, in L1 (a 26 KiB filter)", f"{blocked_l1:.1f} ns (1-line floor {floor_l1:.1f} ns)",
    "<= 3 ns", blocked_l1 <= 3)
blocked_out = ns("Dedup/out_of_cache/blocked")
batch_out = ns("Dedup/out_of_cache/blocked_batch")
floor_out = ns("Dedup/out_of_cache/floor_one_line")
row("blocked test_and_insert, out of cache", f"{blocked_out:.1f} ns (1-line floor {floor_out:.1f} ns)",
    "<= 10 ns", blocked_out <= 10)
floor_batch_out = ns("Dedup/out_of_cache/floor_one_line_batch")
row("  same, in batches (prefetching)",
    f"{batch_out:.1f} ns (prefetched floor {floor_batch_out:.1f} ns)", "<= 10 ns", batch_out <= 10)
set_out = ns("Dedup/out_of_cache/exact_set")
speedup = set_out / blocked_out
row("blocked vs exact set, out of cache: speed",
    f"{speedup:.1f}x ({set_out:.1f} ns vs {blocked_out:.1f} ns)", ">= 5x", speedup >= 5)
set_batch_out = ns("Dedup/out_of_cache/exact_set_batch")
speedup = set_batch_out / batch_out
row("  same, both in batches with prefetching",
    f"{speedup:.1f}x ({set_batch_out:.1f} ns vs {batch_out:.1f} ns)", ">= 5x", speedup >= 5)
blocked_bytes = runs["Dedup/out_of_cache/blocked"]["bytes"]
set_bytes = runs["Dedup/out_of_cache/exact_set"]["bytes"]
memory = blocked_bytes / set_bytes
row("blocked vs exact set, out of cache: memory",
    f"1/{1 / memory:.1f} ({blocked_bytes / 2**20:.0f} MiB vs {set_bytes / 2**20:.0f} MiB)",
    "<= 1/8", memory <= 1 / 8)
for universe in ("1000000", "10000000"):
    for variant in ("count_min+top_k", "conservative_count_min+top_k"):
        t = ns(f"HeavyHitters/{variant}/{universe}")
        exact = ns(f"HeavyHitters/exact_map/{universe}")
        row(f"{variant} (d=5, k=20), Zipf(1.1), U={int(universe):,}",
            f"{t:.1f} ns (exact map {exact:.1f} ns)", "<= 30 ns", t <= 30)
    t = ns(f"HeavyHitters/rolling_count_min+top_k/{universe}")
    row(f"  rolling_count_min+top_k (10 slices), U={int(universe):,}", f"{t:.1f} ns", "<= 30 ns",
        t <= 30)
EOF
else
  echo "(python3 not found: no summary; the tables above hold every figure)"
fi
echo

echo "== cli_bench: the sketch command vs awk and sort | uniq =="
bash "$here/cli_bench.sh" "$build_dir"
