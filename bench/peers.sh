#!/usr/bin/env bash
# The library beside its peers, in one benchmark binary, on the same keys (bench/peers/):
#   Dedup/*         blocked_bloom_filter::test_and_insert, one call at a time, with one XXH3-128
#                   per key, beside fastfilter_cpp's SimdBlockFilterFixed (Find then Add) at
#                   equal memory, in cache (1M keys) and out of cache (100M keys);
#   HeavyHitters/*  Count-Min + top-k beside Apache DataSketches' count_min and frequent_items.
# The peers are built from their public sources, cloned at the pinned versions below into
# BUILD_DIR/peers-src (never into this repository), in a build directory of their own so
# that the project's other builds never depend on them. Needs git, network access the first
# time, and a CPU with AVX2 (fastfilter's filter is compiled for it, as its own benchmarks
# are). Figures and how to read them: docs/PERFORMANCE.md, "Beside fastfilter_cpp, one call
# at a time" and "Beside Apache DataSketches".
#
# Usage: bench/peers.sh [BUILD_DIR]        (default build-peers; a Release build)
#   REPETITIONS=N  repetitions of each benchmark, interleaved at random (default 3);
#                  the table gives their median, mean and spread
#   FILTER=REGEX   only the benchmarks matching REGEX (--benchmark_filter)
#   PEERS_SRC=DIR  use existing checkouts DIR/fastfilter_cpp and DIR/datasketches-cpp
set -euo pipefail

fastfilter_commit=924e5608fb15566bc15913f7cddfeb4a095445b2  # master of 2025-08-28
datasketches_tag=5.2.0

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build_dir=${1:-build-peers}
repetitions=${REPETITIONS:-3}

if ! grep -qw avx2 /proc/cpuinfo; then
  echo "peers.sh: this CPU has no AVX2, which fastfilter's SimdBlockFilterFixed needs" >&2
  exit 1
fi

src=${PEERS_SRC:-$build_dir/peers-src}
mkdir -p "$build_dir"
if [ ! -d "$src/fastfilter_cpp/src/bloom" ]; then
  echo "== cloning fastfilter_cpp at $fastfilter_commit into $src =="
  rm -rf "$src/fastfilter_cpp"
  git clone -q https://github.com/FastFilter/fastfilter_cpp "$src/fastfilter_cpp"
  git -C "$src/fastfilter_cpp" checkout -q "$fastfilter_commit"
fi
if [ ! -d "$src/datasketches-cpp/fi/include" ]; then
  echo "== cloning datasketches-cpp $datasketches_tag into $src =="
  rm -rf "$src/datasketches-cpp"
  git clone -q --depth 1 --branch "$datasketches_tag" https://github.com/apache/datasketches-cpp \
    "$src/datasketches-cpp"
fi
src=$(cd "$src" && pwd)

cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DSKETCHD_BUILD_BENCH=ON \
  -DSKETCHD_PEERS_DIR="$src" >/dev/null
cmake --build "$build_dir" -j"$(nproc)" --target peers_bench

echo "== machine =="
echo "cpu: $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores available"
echo "fastfilter_cpp $fastfilter_commit, datasketches-cpp $datasketches_tag"
echo
args=(--benchmark_repetitions="$repetitions" --benchmark_enable_random_interleaving=true
  --benchmark_report_aggregates_only=true --benchmark_counters_tabular=true)
if [ -n "${FILTER:-}" ]; then args+=(--benchmark_filter="$FILTER"); fi
"$build_dir/bench/peers_bench" "${args[@]}"
