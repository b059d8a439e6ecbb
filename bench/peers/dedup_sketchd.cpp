// sketchd's side of the dedup comparison, compiled as the shipped library is (baseline x86-64,
// AVX2 chosen at run time): one XXH3-128 of the key (sketch::hash_bytes, what the daemon
// computes once per item), then one blocked_bloom_filter::test_and_insert, one call at a time.
#include <memory>

#include "dedup_loop.h"
#include "sketch/blocked_bloom.h"
#include "sketch/hash.h"

namespace {

struct sketchd_blocked {
  explicit sketchd_blocked(std::uint64_t distinct)
      : filter(peers::dedup_filter_bytes(distinct) * 8) {}
  bool test_and_insert(std::uint64_t key) noexcept {
    return filter.test_and_insert(sketch::hash_bytes(&key, sizeof key, sketch::kDefaultSeed));
  }
  [[nodiscard]] std::uint64_t bytes() const { return filter.size_bytes(); }
  sketch::blocked_bloom_filter filter;
};

void sketchd_single(benchmark::State& state) {
  peers::run_dedup(state, [&] {
    return std::make_unique<sketchd_blocked>(static_cast<std::uint64_t>(state.range(0)));
  });
}

}  // namespace

BENCHMARK(sketchd_single)
    ->Name("Dedup/sketchd_blocked")
    ->Arg(peers::kInCacheKeys)
    ->Iterations(peers::dedup_passes(peers::kInCacheKeys) * peers::kInCacheKeys)
    ->Unit(benchmark::kNanosecond);
BENCHMARK(sketchd_single)
    ->Name("Dedup/sketchd_blocked")
    ->Arg(peers::kOutOfCacheKeys)
    ->Iterations(peers::dedup_passes(peers::kOutOfCacheKeys) * peers::kOutOfCacheKeys)
    ->Unit(benchmark::kNanosecond);
