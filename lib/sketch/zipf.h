// A Zipf-distributed rank source: the skewed streams of the demo generator, the tests and
// the benchmarks of the frequency sketches.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace sketch {

// Draws ranks 0..n-1 with P(rank r) ∝ 1 / (r + 1)^s, by inverting a precomputed CDF
// (binary search): exact for any s > 0, O(log n) per draw, 8·n bytes. Deterministic for a
// given seed. Not thread-safe; one owner.
class zipf_distribution {
 public:
  // Throws std::invalid_argument for n = 0 or s ≤ 0 (or NaN).
  zipf_distribution(std::uint64_t n, double s);

  template <class Rng>
  [[nodiscard]] std::uint64_t operator()(Rng& rng) const {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    return rank_of(u);
  }
  // The inverse CDF: the smallest rank r with CDF(r) ≥ u, at most n − 1 (u uniform in
  // [0, 1) gives a draw).
  [[nodiscard]] std::uint64_t rank_of(double u) const noexcept;
  // The probability of rank r.
  [[nodiscard]] double probability(std::uint64_t r) const noexcept;
  [[nodiscard]] std::uint64_t size() const noexcept { return cdf_.size(); }

 private:
  std::vector<double> cdf_;
};

}  // namespace sketch
