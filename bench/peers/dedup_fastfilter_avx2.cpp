// fastfilter_cpp's SimdBlockFilterFixed (Impala's split-block filter), the peer of sketchd's
// blocked filter, built from its public source as its own benchmarks build it (with AVX2
// enabled at compile time, which its header requires). It has no test-and-insert: Find then
// Add of the same key, inlined, with its own hash (murmur64's finaliser of key + seed).
#include <cassert>
#include <climits>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

using std::vector;  // the header names vector unqualified

#include "dedup_loop.h"
#include "simd-block-fixed-fpp.h"

namespace {

struct fastfilter_blocked {
  explicit fastfilter_blocked(std::uint64_t distinct) : filter(static_cast<int>(distinct)) {}
  bool test_and_insert(std::uint64_t key) noexcept {
    const bool present = filter.Find(key);
    filter.Add(key);
    return present;
  }
  [[nodiscard]] std::uint64_t bytes() const { return filter.SizeInBytes(); }
  SimdBlockFilterFixed<> filter;
};

void fastfilter_single(benchmark::State& state) {
  peers::run_dedup(state, [&] {
    return std::make_unique<fastfilter_blocked>(static_cast<std::uint64_t>(state.range(0)));
  });
}

const bool registered_0 =
    peers::register_dedup("Dedup/fastfilter_SimdBlockFilterFixed", fastfilter_single);

}  // namespace
