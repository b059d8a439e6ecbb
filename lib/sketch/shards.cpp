#include "sketch/shards.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace sketch::shards {

namespace {

// log C(n, j) + j log q + (n − j) log(1 − q): the log of Binomial(n, q)'s mass at j.
double log_mass(double n, double q, double j) noexcept {
  return std::lgamma(n + 1) - std::lgamma(j + 1) - std::lgamma(n - j + 1) + j * std::log(q) +
         (n - j) * std::log1p(-q);
}

void check_same_shape(std::span<const rolling_count_min* const> shards) {
  if (shards.empty()) return;
  const rolling_count_min& first = *shards.front();
  for (const rolling_count_min* s : shards) {
    if (s->width() != first.width() || s->depth() != first.depth() || s->seed() != first.seed())
      throw std::invalid_argument(
          "shards::combined_estimate: the shards differ in width, depth or seed");
  }
}

// hash128 is already a hash: its low half spreads the buckets.
struct hash128_hasher {
  std::size_t operator()(const hash128& h) const noexcept {
    return static_cast<std::size_t>(h.low);
  }
};

struct ranked {
  hash128 hash;
  std::string item;
  std::uint64_t estimate = 0;
};

}  // namespace

double binomial_upper_tail(std::uint64_t n, double q, std::int64_t c) noexcept {
  if (c < 0) return 1.0;
  if (static_cast<std::uint64_t>(c) >= n) return 0.0;
  const double nn = static_cast<double>(n);
  const double ratio = q / (1 - q);
  double j = static_cast<double>(c) + 1;
  double term = std::exp(log_mass(nn, q, j));
  double sum = 0;
  // The terms above the mode only fall, each by the factor (n − j)/(j + 1)·q/(1 − q) < 1:
  // once a term no longer changes the sum, the rest (a geometric tail of a ratio below that
  // factor) cannot either.
  while (j <= nn && term > sum * std::numeric_limits<double>::epsilon()) {
    sum += term;
    term *= (nn - j) / (j + 1) * ratio;
    j += 1;
    if (term == 0) break;
  }
  return std::min(sum, 1.0);
}

std::uint64_t bloom_shard_capacity(std::uint64_t n, std::uint32_t partitions, double overflow) {
  if (partitions < 1)
    throw std::invalid_argument("shards::bloom_shard_capacity: partitions must be at least 1");
  if (!(overflow > 0 && overflow < 1))
    throw std::invalid_argument("shards::bloom_shard_capacity: overflow must be in (0, 1)");
  if (n == 0 || partitions == 1) return n;
  const double q = 1.0 / partitions;
  const double mean = static_cast<double>(n) * q;
  const double sd = std::sqrt(mean * (1 - q));
  const auto overflows = [&](std::uint64_t c) {
    return partitions * binomial_upper_tail(n, q, static_cast<std::int64_t>(c)) > overflow;
  };
  // The least c in [⌊mean⌋, hi] that does not overflow: the tail falls as c grows, and at
  // mean + 40 sd + 40 it is below any overflow a double can state (or c reaches n).
  std::uint64_t lo = static_cast<std::uint64_t>(mean);
  std::uint64_t hi = std::min<std::uint64_t>(n, static_cast<std::uint64_t>(mean + 40 * sd + 40));
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (overflows(mid)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

std::uint64_t rolling_bloom_shard_capacity(std::uint64_t n, std::uint32_t generations,
                                           std::uint32_t partitions, double overflow) {
  if (generations < 2)
    throw std::invalid_argument(
        "shards::rolling_bloom_shard_capacity: generations must be at least 2");
  const std::uint64_t share = (n + generations - 2) / (generations - 1);
  return (generations - 1) * bloom_shard_capacity(share, partitions, overflow);
}

bloom_figures combined_bloom_figures(std::span<const rolling_bloom* const> shards,
                                     std::int64_t now_ms) {
  bloom_figures f;
  if (shards.empty()) return f;
  const std::size_t generations = shards.front()->generations();
  f.fill_ratio.assign(generations, 0.0);
  f.guaranteed_horizon_ms = std::numeric_limits<std::int64_t>::max();
  f.effective_window_ms = std::numeric_limits<std::int64_t>::max();
  for (const rolling_bloom* s : shards) {
    f.estimated_fpr += s->estimated_fpr();
    f.estimated_items += s->estimated_items();
    for (std::size_t g = 0; g < generations; ++g) f.fill_ratio[g] += s->fill_ratio(g);
    f.guaranteed_horizon_ms = std::min(f.guaranteed_horizon_ms, s->guaranteed_horizon_ms());
    f.effective_window_ms = std::min(f.effective_window_ms, s->effective_window_ms(now_ms));
  }
  const double count = static_cast<double>(shards.size());
  f.estimated_fpr /= count;
  for (double& r : f.fill_ratio) r /= count;
  return f;
}

std::uint64_t combined_estimate(std::span<const rolling_count_min* const> shards, hash128 h) {
  check_same_shape(shards);
  std::uint64_t sum = 0;
  for (const rolling_count_min* s : shards) sum += s->estimate(h);
  return sum;
}

std::uint64_t combined_window_items(std::span<const rolling_count_min* const> shards) noexcept {
  std::uint64_t n = 0;
  for (const rolling_count_min* s : shards) n += s->window_items();
  return n;
}

std::vector<top_k_tracker::entry> combined_top(std::span<const rolling_count_min* const> shards,
                                               std::uint32_t k) {
  check_same_shape(shards);
  if (shards.empty()) return {};
  // The union of the candidates, once each (by hash), estimated over every shard.
  std::unordered_map<hash128, ranked, hash128_hasher> by_hash;
  for (const rolling_count_min* s : shards) {
    for (top_k_tracker::candidate& c : s->tracker().candidates()) {
      if (by_hash.contains(c.hash)) continue;
      by_hash.emplace(c.hash, ranked{c.hash, std::move(c.item), 0});
    }
  }
  std::vector<ranked> all;
  all.reserve(by_hash.size());
  for (auto& [h, r] : by_hash) {
    r.estimate = combined_estimate(shards, h);
    if (r.estimate > 0) all.push_back(std::move(r));
  }
  const auto before = [](const ranked& a, const ranked& b) {
    if (a.estimate != b.estimate) return a.estimate > b.estimate;
    if (const int c = a.item.compare(b.item); c != 0) return c < 0;
    if (a.hash.high != b.hash.high) return a.hash.high < b.hash.high;
    return a.hash.low < b.hash.low;
  };
  const std::size_t shown = std::min<std::size_t>(all.size(), k);
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(shown), all.end(),
                    before);
  const double n = static_cast<double>(combined_window_items(shards));
  const double phi = shards.front()->threshold();
  std::vector<top_k_tracker::entry> out;
  out.reserve(shown);
  for (std::size_t i = 0; i < shown; ++i) {
    const bool heavy = all[i].estimate >= top_k_tracker::kMinHeavyEstimate &&
                       static_cast<double>(all[i].estimate) >= phi * n;
    out.push_back({std::move(all[i].item), all[i].estimate, heavy});
  }
  return out;
}

}  // namespace sketch::shards
