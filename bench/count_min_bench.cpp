// Heavy-hitter micro-benchmarks: ns per item of a Count-Min sketch (d = 5 rows, ε = 0.0001,
// so w = ⌈e/ε⌉ = 27,183 and δ = e^-5) updated and followed by a top-k offer (k = 20, φ = 0.01,
// as the daemon does per item), plain and conservative, beside an exact baseline in the same
// run: an absl::flat_hash_map<uint64_t, uint64_t> counting the same stream, which computes its
// top-k only once, at the end of the stream (the fairest schedule for it).
//
// Stream: 2 · 2^23 items drawn from Zipf(1.1) over a universe of U distinct items (U = 1M, the
// demo generator's default, and 10M), fixed seed. Items are 12-byte strings; their hash128
// (XXH3-128, sketch::hash_item) is computed before timing, so hashing is EXCLUDED for all
// structures alike (the daemon hashes an item once and hands the hash to every structure).
// The first half of the stream warms every structure up untimed; the second half is timed,
// one item per iteration, and ends (inside the timed region) with the top-k read out: for the
// sketch tracker.refresh() and top(), for the map a partial sort of all its entries.
//
// count_min_update_only times the update alone; count_min_update_only_w64 does the same with
// w = 64, all counters in L1 (a control: useless estimates, the update's cost without misses).
// rolling_count_min+top_k is the daemon's structure with the same sketch shape: a window of
// 10 slices (each update writes its slice and the window's sum) and the same top-k, time
// advancing 1 ms per 1,000 items, so the window slides every 1,000,000 items (the rotations,
// each a subtraction of one slice and a refresh of the tracker, are timed too).
//
// Counters: items_per_second; bytes of the structures (sketch counters + tracker buffers; for
// the map capacity() · (sizeof(slot) + 1)); recall, the share of the exact top-20 of the whole
// stream that the top-20 reported holds; distinct, the items the map holds.
#include <absl/container/flat_hash_map.h>
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sketch/count_min.h"
#include "sketch/hash.h"
#include "sketch/rolling_count_min.h"
#include "sketch/top_k.h"
#include "sketch/zipf.h"

namespace {

using sketch::count_min_sketch;
using sketch::hash128;
using sketch::top_k_tracker;

constexpr double kZipfExponent = 1.1;
constexpr std::uint64_t kStreamSeed = 20240602;
constexpr std::size_t kHalf = std::size_t{1} << 23;  // warm-up items, then timed items
constexpr std::size_t kItemBytes = 12;               // "item" and 8 digits
constexpr double kEpsilon = 0.0001;
constexpr std::uint32_t kDepth = 5;  // δ = e^-5
constexpr std::uint32_t kTopK = 20;
constexpr double kPhi = 0.01;

struct stream_item {
  hash128 hash;
  std::uint32_t rank;  // 0 = the most frequent item of the universe
};

// The stream of one universe, its item strings, and the exact top-k of the whole stream.
struct zipf_stream {
  std::uint32_t universe = 0;
  std::vector<char> names;  // item r is names[r · 12, r · 12 + 12)
  std::vector<stream_item> items;
  std::vector<std::string> exact_top;

  [[nodiscard]] std::string_view name(std::uint32_t rank) const {
    return {names.data() + std::size_t{rank} * kItemBytes, kItemBytes};
  }
};

std::unique_ptr<zipf_stream> make_stream(std::uint32_t universe) {
  auto s = std::make_unique<zipf_stream>();
  s->universe = universe;
  s->names.resize(std::size_t{universe} * kItemBytes);
  std::vector<hash128> hashes(universe);
  for (std::uint32_t r = 0; r < universe; ++r) {
    fmt::format_to_n(&s->names[std::size_t{r} * kItemBytes], kItemBytes, "item{:08d}", r);
    hashes[r] = sketch::hash_item(s->name(r), sketch::kDefaultSeed);
  }
  const sketch::zipf_distribution zipf(universe, kZipfExponent);
  std::mt19937_64 rng(kStreamSeed);
  s->items.reserve(2 * kHalf);
  std::vector<std::uint64_t> counts(universe, 0);
  for (std::size_t i = 0; i < 2 * kHalf; ++i) {
    const auto rank = static_cast<std::uint32_t>(zipf(rng));
    s->items.push_back({hashes[rank], rank});
    ++counts[rank];
  }
  std::vector<std::uint32_t> order(universe);
  for (std::uint32_t r = 0; r < universe; ++r) order[r] = r;
  std::partial_sort(order.begin(), order.begin() + kTopK, order.end(),
                    [&](std::uint32_t a, std::uint32_t b) { return counts[a] > counts[b]; });
  for (std::uint32_t i = 0; i < kTopK; ++i) s->exact_top.emplace_back(s->name(order[i]));
  return s;
}

// One stream at a time (they are 400 MB each); benchmarks of a universe run together.
const zipf_stream& stream_of(std::uint32_t universe) {
  static std::unique_ptr<zipf_stream> cached;
  if (!cached || cached->universe != universe) {
    cached.reset();
    cached = make_stream(universe);
  }
  return *cached;
}

double recall(const zipf_stream& s, const std::vector<std::string>& reported) {
  std::size_t hits = 0;
  for (const std::string& item : s.exact_top) {
    hits += std::count(reported.begin(), reported.end(), item) > 0 ? 1 : 0;
  }
  return static_cast<double>(hits) / static_cast<double>(s.exact_top.size());
}

// A control: the width that keeps all 5 · 64 counters in L1, to separate the update's own
// cost from the cache misses of the real width.
constexpr std::uint32_t kNarrowWidth = 64;

// The walk every heavy-hitter benchmark makes: the first half of the stream warms the
// structure up, untimed; then one item per timed iteration over the second half, and at its
// end `at_end()` (timed: the report of the top-k) before the walk restarts at the middle.
template <class Process, class AtEnd>
void run_stream(benchmark::State& state, const zipf_stream& s, const Process& process,
                const AtEnd& at_end) {
  for (std::size_t i = 0; i < kHalf; ++i) process(s.items[i]);
  std::size_t pos = kHalf;
  for (auto _ : state) {
    process(s.items[pos]);
    if (++pos == s.items.size()) {
      at_end();
      pos = kHalf;
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void count_min_top_k(benchmark::State& state, bool conservative, bool with_top_k,
                     std::uint32_t width = count_min_sketch::suggest_width(kEpsilon)) {
  const zipf_stream& s = stream_of(static_cast<std::uint32_t>(state.range(0)));
  count_min_sketch cms(width, kDepth, sketch::kDefaultSeed, conservative);
  top_k_tracker tracker(kTopK, kPhi);
  const auto process = [&](const stream_item& item) {
    const std::uint64_t estimate = cms.update(item.hash);
    if (with_top_k) tracker.offer_growing(item.hash, s.name(item.rank), estimate, cms.total());
  };
  std::vector<top_k_tracker::entry> top;
  run_stream(state, s, process, [&] {
    if (with_top_k) {
      tracker.refresh([&](const hash128& h) { return cms.estimate(h); }, cms.total());
      top = tracker.top();
    }
  });
  benchmark::DoNotOptimize(top.data());
  state.counters["bytes"] =
      static_cast<double>(cms.size_bytes() + (with_top_k ? tracker.size_bytes() : 0));
  if (with_top_k) {
    std::vector<std::string> reported;
    for (const auto& e : top) reported.push_back(e.item);
    state.counters["recall"] = recall(s, reported);
  }
}

void rolling_count_min_top_k(benchmark::State& state) {
  const zipf_stream& s = stream_of(static_cast<std::uint32_t>(state.range(0)));
  sketch::rolling_count_min_options options;
  options.window_ms = 10'000;
  options.buckets = 10;
  options.epsilon = kEpsilon;
  options.delta = 0.007;  // d = ⌈ln(1/0.007)⌉ = 5 = kDepth
  options.top_k = kTopK;
  options.threshold = kPhi;
  sketch::rolling_count_min window(options);
  std::int64_t tick = 0;
  const auto process = [&](const stream_item& item) {
    window.update(item.hash, s.name(item.rank), tick++ / 1000);
  };
  std::vector<top_k_tracker::entry> top;
  run_stream(state, s, process, [&] {
    window.refresh();
    top = window.top();
  });
  benchmark::DoNotOptimize(top.data());
  state.counters["bytes"] = static_cast<double>(window.size_bytes());
}

// The exact baseline: a count per 64-bit hash, and the item bytes kept beside it (a rank here,
// standing for the pointer a real exact counter would keep) to report the top-k.
void exact_map(benchmark::State& state) {
  const zipf_stream& s = stream_of(static_cast<std::uint32_t>(state.range(0)));
  struct count {
    std::uint64_t n = 0;
    std::uint32_t rank = 0;
  };
  absl::flat_hash_map<std::uint64_t, count> counts;
  const auto process = [&](const stream_item& item) {
    count& c = counts[item.hash.low];
    ++c.n;
    c.rank = item.rank;
  };
  std::vector<std::pair<std::uint64_t, std::uint32_t>> all;
  std::vector<std::string> top;
  run_stream(state, s, process, [&] {
    all.clear();
    all.reserve(counts.size());
    for (const auto& [hash, c] : counts) all.emplace_back(c.n, c.rank);
    const std::size_t shown = std::min<std::size_t>(kTopK, all.size());
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(shown), all.end(),
                      [](const auto& a, const auto& b) { return a.first > b.first; });
    top.clear();
    for (std::size_t i = 0; i < shown; ++i) top.emplace_back(s.name(all[i].second));
  });
  state.counters["bytes"] =
      static_cast<double>(counts.capacity() * (sizeof(std::pair<const std::uint64_t, count>) + 1));
  state.counters["distinct"] = static_cast<double>(counts.size());
  state.counters["recall"] = recall(s, top);
}

void register_benchmarks() {
  const auto iterations = static_cast<benchmark::IterationCount>(kHalf);
  for (const std::int64_t universe : {1'000'000, 10'000'000}) {
    benchmark::RegisterBenchmark("HeavyHitters/count_min+top_k",
                                 [](benchmark::State& st) {
                                   count_min_top_k(st, /*conservative=*/false, /*with_top_k=*/true);
                                 })
        ->Arg(universe)
        ->Iterations(iterations);
    benchmark::RegisterBenchmark("HeavyHitters/conservative_count_min+top_k",
                                 [](benchmark::State& st) {
                                   count_min_top_k(st, /*conservative=*/true, /*with_top_k=*/true);
                                 })
        ->Arg(universe)
        ->Iterations(iterations);
    benchmark::RegisterBenchmark("HeavyHitters/count_min_update_only",
                                 [](benchmark::State& st) {
                                   count_min_top_k(st, /*conservative=*/false,
                                                   /*with_top_k=*/false);
                                 })
        ->Arg(universe)
        ->Iterations(iterations);
    benchmark::RegisterBenchmark("HeavyHitters/count_min_update_only_w64",
                                 [](benchmark::State& st) {
                                   count_min_top_k(st, /*conservative=*/false, /*with_top_k=*/false,
                                                   kNarrowWidth);
                                 })
        ->Arg(universe)
        ->Iterations(iterations);
    benchmark::RegisterBenchmark("HeavyHitters/rolling_count_min+top_k", rolling_count_min_top_k)
        ->Arg(universe)
        ->Iterations(iterations);
    benchmark::RegisterBenchmark("HeavyHitters/exact_map", exact_map)
        ->Arg(universe)
        ->Iterations(iterations);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
