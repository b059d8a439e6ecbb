#include "sketch/zipf.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sketch {

zipf_distribution::zipf_distribution(std::uint64_t n, double s) {
  if (n == 0) throw std::invalid_argument("zipf: n must be at least 1");
  if (!(s > 0)) throw std::invalid_argument("zipf: the exponent must be positive");
  cdf_.resize(n);
  double sum = 0;
  for (std::uint64_t r = 0; r < n; ++r) {
    sum += std::pow(static_cast<double>(r + 1), -s);
    cdf_[r] = sum;
  }
  for (double& c : cdf_) c /= sum;
  cdf_.back() = 1.0;
}

std::uint64_t zipf_distribution::rank_of(double u) const noexcept {
  const auto it = std::lower_bound(cdf_.begin(), cdf_.end(), u);
  return static_cast<std::uint64_t>(std::min<std::ptrdiff_t>(it - cdf_.begin(), cdf_.size() - 1));
}

double zipf_distribution::probability(std::uint64_t r) const noexcept {
  if (r >= cdf_.size()) return 0;
  return r == 0 ? cdf_[0] : cdf_[r] - cdf_[r - 1];
}

}  // namespace sketch
