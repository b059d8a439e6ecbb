// Zipf-distributed test streams, shared by the unit tests of the frequency sketches.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace sketch::test_util {

// Ranks 0 … n−1 with P(r) ∝ (r + 1)^{−s}, by inverse-CDF sampling on a precomputed CDF. The
// uniform variate is built from the top 53 bits of mt19937_64 so the stream is the same with
// every standard library (for a fixed seed).
// Thread safety: not thread-safe; one owner (it holds the random engine).
class zipf_generator {
 public:
  zipf_generator(std::size_t n, double s, std::uint64_t seed) : cdf_(n), rng_(seed) {
    double total = 0;
    for (std::size_t i = 0; i < n; ++i) {
      total += std::pow(static_cast<double>(i + 1), -s);
      cdf_[i] = total;
    }
    for (double& c : cdf_) c /= total;
    cdf_.back() = 1.0;
  }
  [[nodiscard]] std::size_t operator()() {
    const double u = static_cast<double>(rng_() >> 11) * 0x1p-53;
    return static_cast<std::size_t>(std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  }

 private:
  std::vector<double> cdf_;
  std::mt19937_64 rng_;
};

}  // namespace sketch::test_util
