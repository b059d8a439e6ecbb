// Windowed dedup micro-benchmarks: ns per test_and_insert of sketch::rolling_bloom (the
// daemon's `dedup` structure), beside two baselines doing the same job in the same run:
//   - separate_generations: G blocked_bloom_filter objects of the same size, probed one after
//     the other (older generations first, then a test-and-insert into the newest), rotated
//     the same way: the layout rolling_bloom had before its generations were interleaved, so
//     an item's G blocks lie in G separate arrays instead of side by side;
//   - exact_generations: G absl::flat_hash_set<uint64_t> of the 64-bit hash, rotated the same
//     way: exact windowed dedup with the same semantics (and ~9 bytes per slot).
//
// Workload: a window of `capacity` items over G = 4 generations at fpr 0.001 (the harness's
// pipeline: capacity 2M, whose filters fit in the 32 MB L3; and 10M, about 32 MB of bits
// plus the other core's traffic, mostly out of cache). Time stands still, so generations
// rotate by capacity, every ⌈capacity / 3⌉ new items. Each stream item is, with probability
// 1/2, a repeat of one of the last capacity / 2 items (uniform; within the guaranteed
// horizon, so a duplicate) and otherwise a new id. Hashes are computed before timing (the
// daemon hashes an item once). Every structure is warmed up, untimed, with 2 · capacity
// stream items, so that all G generations are live and full; then one test_and_insert per
// timed iteration.
//
// Counters: items_per_second; bytes of the structure; duplicates, the share answered
// "present" (about 1/2, plus the false positives for the filters).
#include <absl/container/flat_hash_set.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "sketch/blocked_bloom.h"
#include "sketch/hash.h"
#include "sketch/rolling_bloom.h"

namespace {

using sketch::blocked_bloom_filter;
using sketch::hash128;

constexpr std::uint32_t kGenerations = 4;
constexpr double kFpr = 0.001;
constexpr std::uint64_t kStreamSeed = 20240603;
constexpr std::int64_t kNow = 1'000'000;  // time stands still: rotations by capacity only
constexpr std::int64_t kWindowMs = 3'600'000;

sketch::rolling_bloom_options options_for(std::uint64_t capacity) {
  return {.window_ms = kWindowMs, .capacity = capacity, .fpr = kFpr, .generations = kGenerations};
}

struct stream {
  std::uint64_t capacity = 0;
  std::vector<hash128> hashes;
};

constexpr std::int64_t kIterations = std::int64_t{1} << 23;

// 2 · capacity items to warm up, then kIterations timed ones.
std::unique_ptr<stream> make_stream(std::uint64_t capacity) {
  auto s = std::make_unique<stream>();
  s->capacity = capacity;
  const std::size_t n = 2 * capacity + kIterations;
  std::vector<std::uint64_t> ids;
  ids.reserve(n);
  std::mt19937_64 rng(kStreamSeed);
  std::uint64_t next_id = 0;
  const std::uint64_t recent = capacity / 2;
  for (std::size_t i = 0; i < n; ++i) {
    if (i >= recent && (rng() & 1) != 0) {
      ids.push_back(ids[i - 1 - rng() % recent]);
    } else {
      ids.push_back(next_id++);
    }
  }
  s->hashes.reserve(n);
  for (const std::uint64_t id : ids) {
    s->hashes.push_back(sketch::hash_bytes(&id, sizeof id, sketch::kDefaultSeed));
  }
  return s;
}

const stream& stream_of(std::uint64_t capacity) {
  static std::unique_ptr<stream> cached;
  if (!cached || cached->capacity != capacity) {
    cached.reset();
    cached = make_stream(capacity);
  }
  return *cached;
}

// G blocked filters probed in turn, rotated by capacity as rolling_bloom does.
class separate_generations {
 public:
  // Generations of the size and share rolling_bloom gives them.
  explicit separate_generations(const sketch::rolling_bloom& sized)
      : share_(sized.generation_capacity()) {
    const std::uint64_t bits = sized.generation(0).bits();
    for (std::size_t g = 0; g < sized.generations(); ++g) ring_.emplace_back(bits, sized.seed());
  }
  bool test_and_insert(hash128 h) noexcept {
    for (std::size_t g = 1; g < ring_.size(); ++g) {
      if (ring_[(newest_ + g) % ring_.size()].contains(h)) return true;
    }
    if (ring_[newest_].test_and_insert(h)) return true;
    if (++inserted_ == share_) {
      newest_ = (newest_ + ring_.size() - 1) % ring_.size();
      ring_[newest_].clear();
      inserted_ = 0;
    }
    return false;
  }
  // As rolling_bloom's batch call did with this layout: the item's block in every generation
  // prefetched kPrefetchDistance items ahead.
  void test_and_insert(std::span<const hash128> hashes, std::span<bool> present) noexcept {
    constexpr std::size_t kAhead = blocked_bloom_filter::kPrefetchDistance;
    const std::size_t n = std::min(hashes.size(), present.size());
    const auto prefetch = [&](const hash128& h) {
      for (const blocked_bloom_filter& f : ring_) f.prefetch(h);
    };
    for (std::size_t i = 0; i < std::min(n, kAhead); ++i) prefetch(hashes[i]);
    for (std::size_t i = 0; i < n; ++i) {
      if (i + kAhead < n) prefetch(hashes[i + kAhead]);
      present[i] = test_and_insert(hashes[i]);
    }
  }
  [[nodiscard]] std::size_t size_bytes() const noexcept {
    return ring_.size() * ring_[0].size_bytes();
  }

 private:
  std::uint64_t share_;
  std::vector<blocked_bloom_filter> ring_;
  std::size_t newest_ = 0;
  std::uint64_t inserted_ = 0;
};

// G exact sets of the 64-bit hash, rotated by capacity the same way.
class exact_generations {
 public:
  explicit exact_generations(const sketch::rolling_bloom& sized)
      : share_(sized.generation_capacity()), ring_(sized.generations()) {
    for (auto& set : ring_) set.reserve(share_);
  }
  bool test_and_insert(hash128 h) {
    for (std::size_t g = 1; g < ring_.size(); ++g) {
      if (ring_[(newest_ + g) % ring_.size()].contains(h.low)) return true;
    }
    if (!ring_[newest_].insert(h.low).second) return true;
    if (ring_[newest_].size() == share_) {
      newest_ = (newest_ + ring_.size() - 1) % ring_.size();
      ring_[newest_].clear();  // frees a large table: reserved again, as the others are
      ring_[newest_].reserve(share_);
    }
    return false;
  }
  [[nodiscard]] std::size_t size_bytes() const noexcept {
    std::size_t bytes = 0;
    for (const auto& set : ring_) bytes += set.capacity() * (sizeof(std::uint64_t) + 1);
    return bytes;
  }

 private:
  std::uint64_t share_;
  std::vector<absl::flat_hash_set<std::uint64_t>> ring_;
  std::size_t newest_ = 0;
};

template <class Structure, class TestAndInsert>
void run(benchmark::State& state, Structure& structure, const TestAndInsert& test_and_insert) {
  const stream& s = stream_of(static_cast<std::uint64_t>(state.range(0)));
  const std::size_t warm = 2 * s.capacity;
  for (std::size_t i = 0; i < warm; ++i) benchmark::DoNotOptimize(test_and_insert(s.hashes[i]));
  std::size_t pos = warm;
  std::uint64_t present = 0;
  for (auto _ : state) {
    present += test_and_insert(s.hashes[pos]) ? 1 : 0;
    ++pos;  // the stream holds every timed iteration (kIterations)
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.counters["bytes"] = static_cast<double>(structure.size_bytes());
  state.counters["duplicates"] =
      static_cast<double>(present) / static_cast<double>(state.iterations());
}

void rolling_bloom(benchmark::State& state) {
  sketch::rolling_bloom r(options_for(static_cast<std::uint64_t>(state.range(0))));
  run(state, r, [&](const hash128& h) { return r.test_and_insert(h, kNow); });
}

// The same stream handed over in batches of kBatch hashes to the batch call, which
// prefetches the item's blocks blocked_bloom_filter::kPrefetchDistance items ahead. Still one
// iteration per item: the first iteration of each batch processes it.
constexpr std::size_t kBatch = 1024;

template <class Structure, class Batch>
void run_batches(benchmark::State& state, Structure& r, const Batch& test_and_insert) {
  const stream& s = stream_of(static_cast<std::uint64_t>(state.range(0)));
  std::vector<char> answers(kBatch);
  auto* present = reinterpret_cast<bool*>(answers.data());
  std::size_t pos = 0;
  std::uint64_t duplicates = 0;
  const auto batch = [&](std::size_t n) {
    test_and_insert(std::span(s.hashes).subspan(pos, n), std::span(present, n));
    for (std::size_t i = 0; i < n; ++i) duplicates += present[i] ? 1 : 0;
    pos += n;
  };
  while (pos + kBatch <= 2 * s.capacity) batch(kBatch);
  duplicates = 0;
  std::size_t left = 0;
  for (auto _ : state) {
    if (left == 0) {
      left = std::min(kBatch, s.hashes.size() - pos);
      batch(left);
    }
    --left;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.counters["bytes"] = static_cast<double>(r.size_bytes());
  state.counters["duplicates"] =
      static_cast<double>(duplicates) / static_cast<double>(state.iterations());
}

void rolling_bloom_batch(benchmark::State& state) {
  sketch::rolling_bloom r(options_for(static_cast<std::uint64_t>(state.range(0))));
  run_batches(state, r, [&](std::span<const hash128> hashes, std::span<bool> present) {
    r.test_and_insert(hashes, kNow, present);
  });
}

void separate_batch(benchmark::State& state) {
  separate_generations r(
      sketch::rolling_bloom(options_for(static_cast<std::uint64_t>(state.range(0)))));
  run_batches(state, r, [&](std::span<const hash128> hashes, std::span<bool> present) {
    r.test_and_insert(hashes, present);
  });
}

void separate(benchmark::State& state) {
  separate_generations r(
      sketch::rolling_bloom(options_for(static_cast<std::uint64_t>(state.range(0)))));
  run(state, r, [&](const hash128& h) { return r.test_and_insert(h); });
}

void exact(benchmark::State& state) {
  exact_generations r(
      sketch::rolling_bloom(options_for(static_cast<std::uint64_t>(state.range(0)))));
  run(state, r, [&](const hash128& h) { return r.test_and_insert(h); });
}

}  // namespace

// Registered capacity by capacity, so that each stream is generated once.
int main(int argc, char** argv) {
  for (const std::int64_t capacity : {2'000'000, 10'000'000}) {
    benchmark::RegisterBenchmark("Window/rolling_bloom", rolling_bloom)
        ->Arg(capacity)
        ->Iterations(kIterations);
    benchmark::RegisterBenchmark("Window/rolling_bloom_batch", rolling_bloom_batch)
        ->Arg(capacity)
        ->Iterations(kIterations);
    benchmark::RegisterBenchmark("Window/separate_generations", separate)
        ->Arg(capacity)
        ->Iterations(kIterations);
    benchmark::RegisterBenchmark("Window/separate_generations_batch", separate_batch)
        ->Arg(capacity)
        ->Iterations(kIterations);
    benchmark::RegisterBenchmark("Window/exact_generations", exact)
        ->Arg(capacity)
        ->Iterations(kIterations);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
