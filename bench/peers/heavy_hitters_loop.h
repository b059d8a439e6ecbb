// The timed loop of the heavy-hitters comparison (HeavyHitters/*), shared by sketchd's side
// and Apache DataSketches' side, each instantiated in its own translation unit.
//
// Stream: 2 · 2^23 keys drawn from Zipf(1.1) over 1,000,000 distinct 64-bit keys (rank r is
// key_of(r), workload.h), fixed seed, the same for every structure. The first half warms the
// structure up, untimed; the second half is timed, kBlock keys per iteration (handed over one
// at a time or as one batch, as the structure does it), one pass. The exact top-10 of the
// whole stream is counted once, outside timing.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "workload.h"

namespace peers {

inline constexpr std::uint64_t kHeavyDistinct = 1'000'000;
inline constexpr double kHeavyZipf = 1.1;
inline constexpr std::size_t kHeavyHalf = std::size_t{1} << 23;  // warm-up keys, then timed keys
inline constexpr std::size_t kHeavyBlock = 1024;                 // keys per timed iteration
inline constexpr std::uint32_t kHeavyTopK = 10;

struct heavy_stream {
  std::vector<std::uint64_t> keys;       // 2 · kHeavyHalf keys
  std::vector<std::uint64_t> exact_top;  // the kHeavyTopK most frequent keys, most frequent first
};

// Built once, on first use.
[[nodiscard]] const heavy_stream& heavy_stream_of();

// The share of the exact top-10 that `reported` (any order) holds.
[[nodiscard]] inline double heavy_recall(const heavy_stream& s,
                                         const std::vector<std::uint64_t>& reported) {
  std::size_t hits = 0;
  for (const std::uint64_t key : s.exact_top) {
    hits += std::find(reported.begin(), reported.end(), key) != reported.end() ? 1 : 0;
  }
  return static_cast<double>(hits) / static_cast<double>(s.exact_top.size());
}

// `feed(std::span<const std::uint64_t>)` hands keys to the structure; `top()` returns its
// top-10 keys (called once, after timing); `bytes()` its memory. Counters: per_update,
// bytes, recall. No benchmark::DoNotOptimize: the reported top-10 is the loop's result.
template <class Feed, class Top, class Bytes>
void run_heavy(benchmark::State& state, Feed feed, Top top, Bytes bytes) {
  const heavy_stream& s = heavy_stream_of();
  const std::span<const std::uint64_t> all(s.keys);
  for (std::size_t i = 0; i < kHeavyHalf; i += kHeavyBlock) feed(all.subspan(i, kHeavyBlock));
  std::size_t pos = kHeavyHalf;
  for (auto _ : state) {
    if (pos == all.size()) pos = kHeavyHalf;  // only when asked for more than one pass
    feed(all.subspan(pos, kHeavyBlock));
    pos += kHeavyBlock;
  }
  const auto updates = static_cast<double>(state.iterations()) * kHeavyBlock;
  state.SetItemsProcessed(static_cast<std::int64_t>(updates));
  // Seconds of CPU per update, printed with its SI prefix ("16.3n" is 16.3 ns).
  state.counters["per_update"] =
      benchmark::Counter(updates, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["bytes"] = static_cast<double>(bytes());
  state.counters["recall"] = heavy_recall(s, top());
}

// One timed pass over the second half of the stream.
[[nodiscard]] inline benchmark::IterationCount heavy_iterations() noexcept {
  return static_cast<benchmark::IterationCount>(kHeavyHalf / kHeavyBlock);
}

// Registers `run` as benchmark `name` over the stream, once per argument in `args` (none:
// once, without one).
inline bool register_heavy(const char* name, void (*run)(benchmark::State&),
                           std::initializer_list<std::int64_t> args = {}) {
  auto* b = benchmark::RegisterBenchmark(name, run);
  for (const std::int64_t arg : args) b->Arg(arg);
  b->Iterations(heavy_iterations())->Unit(benchmark::kNanosecond);
  return true;
}

}  // namespace peers
