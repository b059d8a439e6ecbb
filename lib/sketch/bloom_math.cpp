#include "sketch/bloom_math.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <stdexcept>

namespace sketch::bloom_math {
namespace {

constexpr double kLn2 = std::numbers::ln2;
// Sizes from 2^63 bits up are refused: they fit no memory, and a whole double below
// 2^63 converts to uint64 exactly.
constexpr double kMaxSuggestedBits = 9223372036854775808.0;  // 2^63

// The least m (up to floating-point rounding, then checked) with fpr_exact(m, n, k) <= p:
//   (1 - (1 - 1/m)^{kn})^k <= p  ⇔  (1 - 1/m)^{kn} >= 1 - p^{1/k}
//                                ⇔  1/m <= 1 - exp(ln(1 - p^{1/k}) / (kn)).
double least_bits(double n, double p, double k) {
  const double root = std::exp(std::log(p) / k);                  // p^{1/k}
  const double inv_m = -std::expm1(std::log1p(-root) / (k * n));  // upper bound on 1/m
  double m = std::max(1.0, std::ceil(1.0 / inv_m));
  // Rounding may leave m a few units short: step up by one bit (or one representable
  // step beyond 2^53) until it holds. The relative error is ~1e-15, so a few steps do.
  for (int i = 0; i < 64 && fpr_exact(m, n, k) > p; ++i) m += std::max(1.0, m * 0x1p-52);
  return m;
}

}  // namespace

double optimal_bits(double n, double p) noexcept { return -n * std::log(p) / (kLn2 * kLn2); }

std::uint32_t optimal_hashes(double bits_per_item) noexcept {
  const double k = std::round(bits_per_item * kLn2);
  if (!(k >= 1.0)) return 1;  // also catches NaN
  return k >= kMaxHashes ? kMaxHashes : static_cast<std::uint32_t>(k);
}

double fpr(double m, double n, double k) noexcept { return std::pow(-std::expm1(-k * n / m), k); }

double binary_entropy(double p) noexcept {
  if (p <= 0 || p >= 1) return 0.0;
  return -p * std::log2(p) - (1 - p) * std::log2(1 - p);
}

double entropy_bits_per_item(double bits_per_item, double k) noexcept {
  return bits_per_item * binary_entropy(std::exp(-k / bits_per_item));
}

namespace {

compressed_shape shape_of(double b, std::uint32_t k) {
  return {b, k, fpr(b, 1, k), entropy_bits_per_item(b, k)};
}

}  // namespace

compressed_shape shape_for_transmission(double transmitted_bits_per_item,
                                        double max_bits_per_item) {
  const double z = transmitted_bits_per_item;
  if (!(z > 0) || !std::isfinite(z)) {
    throw std::invalid_argument(fmt::format("transmitted bits per item {} is not positive", z));
  }
  if (!(max_bits_per_item >= 1) || !std::isfinite(max_bits_per_item)) {
    throw std::invalid_argument(fmt::format("max bits per item {} is below 1", max_bits_per_item));
  }
  std::optional<compressed_shape> best;
  for (std::uint32_t k = 1; k <= kMaxHashes; ++k) {
    double lo = k / std::numbers::ln2;  // half the bits set: z = b there
    if (lo > max_bits_per_item || entropy_bits_per_item(lo, k) > z) break;  // larger k: worse
    double hi = max_bits_per_item;
    if (entropy_bits_per_item(hi, k) <= z) {
      lo = hi;
    } else {
      for (int i = 0; i < 200 && hi - lo > 1e-9 * hi; ++i) {
        const double mid = lo + (hi - lo) / 2;
        (entropy_bits_per_item(mid, k) <= z ? lo : hi) = mid;
      }
    }
    const compressed_shape shape = shape_of(lo, k);
    if (!best || shape.fpr < best->fpr) best = shape;
  }
  if (!best) {
    throw std::invalid_argument(fmt::format(
        "transmitted bits per item {} is below 1/ln 2 = 1.4427, the least any filter needs", z));
  }
  return *best;
}

compressed_shape shape_for_fpr(double p, double max_bits_per_item) {
  if (!(p > 0 && p < 1)) {
    throw std::invalid_argument(fmt::format("fpr {} is not in (0, 1)", p));
  }
  if (!(max_bits_per_item >= 1) || !std::isfinite(max_bits_per_item)) {
    throw std::invalid_argument(fmt::format("max bits per item {} is below 1", max_bits_per_item));
  }
  std::optional<compressed_shape> best;
  for (std::uint32_t k = 1; k <= kMaxHashes; ++k) {
    // p ≤ 2^−k: the least b reaching p leaves at least half the bits zero.
    if (std::log2(p) > -static_cast<double>(k)) break;
    const double b = -static_cast<double>(k) / std::log1p(-std::pow(p, 1.0 / k));
    if (b > max_bits_per_item) continue;
    const compressed_shape shape = shape_of(b, k);
    if (!best || shape.transmitted_bits_per_item < best->transmitted_bits_per_item) best = shape;
  }
  if (!best) {
    throw std::invalid_argument(
        fmt::format("fpr {} needs more than {} bits per item", p, max_bits_per_item));
  }
  return *best;
}

double fpr_exact(double m, double n, double k) noexcept {
  if (n <= 0) return 0.0;
  // (1 - 1/m)^{kn} = exp(kn · log1p(-1/m)); 1 - that = -expm1(...).
  return std::pow(-std::expm1(k * n * std::log1p(-1.0 / m)), k);
}

double fpr_partitioned(double m_per_hash, double n, double k) noexcept {
  if (n <= 0) return 0.0;
  return std::pow(-std::expm1(n * std::log1p(-1.0 / m_per_hash)), k);
}

double fpr_from_fill(double fill, double k) noexcept { return std::pow(fill, k); }

double estimated_items(double m, double k, double fill) noexcept {
  if (fill >= 1.0) return std::numeric_limits<double>::infinity();
  return -(m / k) * std::log1p(-fill);
}

sizing suggest_classic(std::uint64_t n, double p) {
  if (n == 0) {
    throw std::invalid_argument("bloom sizing: the number of items n must be positive (got 0)");
  }
  if (!(p > 0.0 && p < 1.0)) {
    throw std::invalid_argument(
        fmt::format("bloom sizing: the false-positive rate p must be in (0, 1) (got {})", p));
  }
  const auto items = static_cast<double>(n);
  const double base = std::ceil(optimal_bits(items, p));
  if (!(base < kMaxSuggestedBits)) {
    throw std::invalid_argument(
        fmt::format("bloom sizing: n = {} items at p = {} need more than 2^63 bits", n, p));
  }

  // Candidate k: the integers around (m/n) ln 2, within [1, kMaxHashes]. The exact FPR is
  // unimodal in k, so its integer minimiser is one of them.
  const double real_k = base / items * kLn2;
  const auto lowest = static_cast<std::uint32_t>(
      std::clamp(std::floor(real_k) - 1.0, 1.0, static_cast<double>(kMaxHashes)));
  const auto highest = static_cast<std::uint32_t>(
      std::clamp(std::ceil(real_k) + 1.0, 1.0, static_cast<double>(kMaxHashes)));

  double needed = std::numeric_limits<double>::infinity();
  for (std::uint32_t k = lowest; k <= highest; ++k) {
    needed = std::min(needed, least_bits(items, p, k));
  }
  const double m = std::max(base, needed);
  if (!(m < kMaxSuggestedBits)) {
    throw std::invalid_argument(
        fmt::format("bloom sizing: n = {} items at p = {} need more than 2^63 bits", n, p));
  }

  sizing result;
  result.bits = static_cast<std::uint64_t>(m);
  result.fpr = std::numeric_limits<double>::infinity();
  for (std::uint32_t k = lowest; k <= highest; ++k) {
    const double f = fpr_exact(m, items, k);
    if (f < result.fpr) {
      result.fpr = f;
      result.hashes = k;
    }
  }
  return result;
}

}  // namespace sketch::bloom_math
