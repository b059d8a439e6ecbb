// Zipf-distributed test streams, shared by the unit tests of the frequency sketches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>

#include "sketch/zipf.h"

namespace sketch::test_util {

// Ranks 0 … n−1 with P(r) ∝ (r + 1)^{−s}: sketch::zipf_distribution, fed a uniform variate
// built from the top 53 bits of mt19937_64, so that the stream is the same with every
// standard library (for a fixed seed).
// Thread safety: not thread-safe; one owner (it holds the random engine).
class zipf_generator {
 public:
  zipf_generator(std::size_t n, double s, std::uint64_t seed) : zipf_(n, s), rng_(seed) {}
  [[nodiscard]] std::size_t operator()() {
    const double u = static_cast<double>(rng_() >> 11) * 0x1p-53;
    return static_cast<std::size_t>(zipf_.rank_of(u));
  }

 private:
  zipf_distribution zipf_;
  std::mt19937_64 rng_;
};

}  // namespace sketch::test_util
