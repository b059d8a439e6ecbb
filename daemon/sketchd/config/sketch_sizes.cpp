// Sizes of the sketches, checked against the limits of the sketch library so that a file
// that passes here builds its pipelines without an error.
#include <chrono>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <numbers>
#include <stdexcept>

#include "sketch/blocked_bloom.h"
#include "sketch/count_min.h"
#include "sketch/rolling_bloom.h"
#include "sketchd/config/config.h"
#include "sketchd/config/sections.h"

namespace sketchd {
namespace config_detail {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// A count computed in floating point, grouped; in scientific notation when too large.
std::string grouped_estimate(double n) {
  if (n >= 1e18) return fmt::format("{:.3g}", n);
  return grouped(static_cast<std::uint64_t>(n));
}

// The least number of five significant digits that `accepted` takes, searched upwards from
// `limit` (the exact bound): what a message can print as "at least …" such that the printed
// value itself passes.
double smallest_accepted(double limit, const std::function<bool(double)>& accepted) {
  const int exponent = static_cast<int>(std::floor(std::log10(limit))) - 4;
  auto mantissa = static_cast<std::uint64_t>(std::floor(limit / std::pow(10.0, exponent)));
  for (int tries = 0; tries < 1000; ++tries, ++mantissa) {
    const double v = parse_real(fmt::format("{}e{}", mantissa, exponent));
    if (accepted(v)) return v;
  }
  return limit;
}

// Reports `message` at the first of `keys` given in `m`, else at the mapping itself (the
// keys all have their defaults).
void error_at_first(checker& c, const mapping& m, std::initializer_list<std::string_view> keys,
                    std::string_view message) {
  for (std::string_view key : keys) {
    if (const auto f = m.get(key)) {
      c.error(*f, message);
      return;
    }
  }
  c.error(m.mark(), prefix(m.path()) + std::string(message));
}

std::optional<std::uint32_t> count_min_width(double epsilon) {
  try {
    return sketch::count_min_sketch::suggest_width(epsilon);
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

std::optional<std::uint32_t> count_min_depth(double delta) {
  try {
    return sketch::count_min_sketch::suggest_depth(delta);
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

// The G generations of a dedup section's rolling Bloom filter against the library's limit of
// blocked_bloom_filter::kMaxBits bits in all (the library takes up to that much per
// generation; 2^40 bits, 128 GiB, is already more than a pipeline should hold). Each
// generation holds c = rolling_bloom::generation_capacity items at fpr_g =
// rolling_bloom::generation_fpr, in blocked_bloom_filter::suggest_bits(c, fpr_g) bits.
// Immutable: safe for concurrent readers.
class bloom_budget {
 public:
  explicit bloom_budget(const dedup_config& d)
      : generations_(d.generations),
        max_bits_(sketch::blocked_bloom_filter::kMaxBits / generations_ /
                  sketch::blocked_bloom_filter::kBlockBits *
                  sketch::blocked_bloom_filter::kBlockBits) {
    options_.capacity = d.capacity;
    options_.fpr = d.fpr;
    options_.generations = d.generations;
  }

  // The items of one generation.
  [[nodiscard]] std::uint64_t share() const {
    return sketch::rolling_bloom::generation_capacity(options_);
  }

  // The rate of each generation for an overall rate `fpr`.
  [[nodiscard]] double generation_fpr(double fpr) const {
    sketch::rolling_bloom_options o = options_;
    o.fpr = fpr;
    return sketch::rolling_bloom::generation_fpr(o);
  }

  // Whether G generations of `items` each at `fpr_g` fit.
  [[nodiscard]] bool fits(std::uint64_t items, double fpr_g) const {
    if (!(fpr_g > 0)) return false;  // a rate that underflows to 0 in fpr_g
    try {
      return sketch::blocked_bloom_filter::suggest_bits(items, fpr_g) <= max_bits_;
    } catch (const std::invalid_argument&) {
      return false;
    }
  }

  // The largest share that fits at `fpr_g`, by bisection (fits(lo), !fits(hi)); for a share
  // that does not fit and a single item that does.
  [[nodiscard]] std::uint64_t largest_share(double fpr_g) const {
    std::uint64_t lo = 1;
    std::uint64_t hi = share();
    while (hi - lo > 1) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      (fits(mid, fpr_g) ? lo : hi) = mid;
    }
    return lo;
  }

  // The least overall rate (below 0.5, as printed) at which generations of `items` fit.
  [[nodiscard]] std::optional<double> least_fpr(std::uint64_t items) const {
    const double best_g = sketch::blocked_bloom_filter::fpr(static_cast<double>(max_bits_),
                                                            static_cast<double>(items));
    const double limit = -std::expm1(static_cast<double>(generations_) * std::log1p(-best_g));
    const auto accepted = [&](double fpr) { return fpr < 0.5 && fits(items, generation_fpr(fpr)); };
    if (!(limit < 0.5)) return std::nullopt;
    const double least = smallest_accepted(limit, accepted);
    if (!accepted(least)) return std::nullopt;
    return least;
  }

 private:
  std::uint64_t generations_;
  std::uint64_t max_bits_;  // of one generation
  sketch::rolling_bloom_options options_;
};

}  // namespace

// Its width ⌈e/ε⌉ (count_min_sketch::suggest_width), its depth ⌈ln(1/δ)⌉ (suggest_depth),
// and the buckets + 1 sketches of the window (one per slice and their sum) at most
// count_min_sketch::kMaxCounters counters in all, as rolling_count_min requires.
void check_count_min_size(checker& c, const mapping& m, const heavy_hitters_config& hh,
                          bool epsilon_ok, bool delta_ok, bool buckets_ok) {
  using sketch::count_min_sketch;
  std::optional<std::uint32_t> width;
  std::optional<std::uint32_t> depth;
  if (epsilon_ok) {
    width = count_min_width(hh.epsilon);
    if (!width) {
      const double least =
          smallest_accepted(std::numbers::e / count_min_sketch::kMaxWidth,
                            [](double e) { return count_min_width(e).has_value(); });
      error_at_first(
          c, m, {"epsilon"},
          fmt::format("{} needs a Count-Min width of {} counters (⌈e/ε⌉), over the "
                      "maximum of {}: use an epsilon of at least {}",
                      hh.epsilon, grouped_estimate(std::ceil(std::numbers::e / hh.epsilon)),
                      grouped(std::uint64_t{count_min_sketch::kMaxWidth}), least));
    }
  }
  if (delta_ok) {
    depth = count_min_depth(hh.delta);
    if (!depth) {
      const double least =
          smallest_accepted(std::exp(-static_cast<double>(count_min_sketch::kMaxDepth)),
                            [](double d) { return count_min_depth(d).has_value(); });
      error_at_first(c, m, {"delta"},
                     fmt::format("{} needs a Count-Min depth of {} rows (⌈ln(1/δ)⌉), over the "
                                 "maximum of {}: use a delta of at least {}",
                                 hh.delta, grouped_estimate(std::ceil(std::log(1 / hh.delta))),
                                 count_min_sketch::kMaxDepth, least));
    }
  }
  if (!width || !depth || !buckets_ok) return;
  const std::uint64_t sketches = std::uint64_t{hh.buckets} + 1;
  const std::uint64_t counters = std::uint64_t{*width} * *depth * sketches;
  if (counters <= count_min_sketch::kMaxCounters) return;
  error_at_first(
      c, m, {"epsilon", "delta", "buckets"},
      fmt::format("epsilon {}, delta {} and {} buckets need {} Count-Min sketches of {} × {} "
                  "counters, {} in all ({:.3g} GiB), over the maximum of {} ({:.0f} GiB): use a "
                  "larger epsilon or delta, or fewer buckets",
                  hh.epsilon, hh.delta, hh.buckets, sketches, grouped(std::uint64_t{*width}),
                  *depth, grouped(counters), static_cast<double>(counters) * 4 / kGiB,
                  grouped(count_min_sketch::kMaxCounters),
                  static_cast<double>(count_min_sketch::kMaxCounters) * 4 / kGiB));
}

// Too large a capacity at the file's fpr is reported at capacity, with the most that fits;
// too small an fpr at fpr, with the least that fits; both at fault, each.
void check_bloom_size(checker& c, const mapping& m, const dedup_config& d) {
  const bloom_budget budget(d);
  const std::uint64_t share = budget.share();
  const double fpr_g = budget.generation_fpr(d.fpr);
  if (budget.fits(share, fpr_g)) {
    if (d.sizing == dedup_sizing::memory) return;
    const double sized = sized_fpr(d);
    if (budget.fits(share, budget.generation_fpr(sized))) return;
    error_at_first(c, m, {"sizing"},
                   fmt::format("{} items at fpr {} sized for transmission (a window "
                               "rate of {}) need Bloom filters of more than the maximum of 2^40 "
                               "bits (128 GiB) in all, over {} generations; use sizing: memory, "
                               "or a smaller capacity",
                               grouped(d.capacity), d.fpr, sized, d.generations));
    return;
  }

  const std::string too_large = fmt::format(
      "need Bloom filters of more than the maximum of 2^40 bits (128 GiB) in all, over {} "
      "generations",
      d.generations);
  if (budget.fits(1, fpr_g)) {
    const std::uint64_t parts = std::uint64_t{d.generations} - 1;
    error_at_first(c, m, {"capacity"},
                   fmt::format("{} items at fpr {} {}: at this fpr capacity can be at most {} "
                               "(or use a larger fpr)",
                               grouped(d.capacity), d.fpr, too_large,
                               grouped(budget.largest_share(fpr_g) * parts)));
    return;
  }
  // The rate is too small even for one item per generation.
  if (const auto least = budget.least_fpr(share)) {
    error_at_first(c, m, {"fpr"},
                   fmt::format("{} is too small: {} items at this fpr {}; use an fpr of at least "
                               "{}",
                               d.fpr, grouped(d.capacity), too_large, *least));
    return;
  }
  error_at_first(c, m, {"fpr"},
                 fmt::format("{} is too small: even one item per generation at this fpr would {}; "
                             "use an fpr of at least {}",
                             d.fpr, too_large, budget.least_fpr(1).value_or(0.5)));
  error_at_first(c, m, {"capacity"},
                 fmt::format("{} items {} at any fpr below 0.5", grouped(d.capacity), too_large));
}

}  // namespace config_detail

double sized_fpr(const dedup_config& d) {
  if (d.sizing == dedup_sizing::memory) return d.fpr;
  sketch::rolling_bloom_options o;
  o.window_ms = std::chrono::milliseconds(std::chrono::hours(1)).count();  // not used to size
  o.capacity = d.capacity;
  o.fpr = d.fpr;
  o.generations = d.generations;
  return sketch::rolling_bloom::transmission_fpr(o);
}

std::uint64_t sketch_bytes_at_least(const pipeline_config& p) {
  std::uint64_t bytes = 0;
  if (p.heavy_hitters) {
    const auto& hh = *p.heavy_hitters;
    bytes += std::uint64_t{sketch::count_min_sketch::suggest_width(hh.epsilon)} *
             sketch::count_min_sketch::suggest_depth(hh.delta) * (std::uint64_t{hh.buckets} + 1) *
             sizeof(std::uint32_t);
  }
  if (p.dedup) {
    sketch::rolling_bloom_options options;
    options.capacity = p.dedup->capacity;
    options.fpr = sized_fpr(*p.dedup);
    options.generations = p.dedup->generations;
    bytes += sketch::blocked_bloom_filter::suggest_bits(
                 sketch::rolling_bloom::generation_capacity(options),
                 sketch::rolling_bloom::generation_fpr(options)) /
             8 * p.dedup->generations;
  }
  return bytes;
}

}  // namespace sketchd
