#include <algorithm>
#include <random>
#include <unordered_map>

#include "heavy_hitters_loop.h"
#include "sketch/zipf.h"

namespace peers {

const heavy_stream& heavy_stream_of() {
  static const heavy_stream stream = [] {
    heavy_stream s;
    const sketch::zipf_distribution zipf(kHeavyDistinct, kHeavyZipf);
    std::mt19937_64 rng(20261130);
    std::vector<std::uint64_t> counts(kHeavyDistinct, 0);
    s.keys.reserve(2 * kHeavyHalf);
    for (std::size_t i = 0; i < 2 * kHeavyHalf; ++i) {
      const std::uint64_t rank = zipf(rng);
      ++counts[rank];
      s.keys.push_back(key_of(rank));
    }
    std::vector<std::uint64_t> order(kHeavyDistinct);
    for (std::uint64_t r = 0; r < kHeavyDistinct; ++r) order[r] = r;
    std::partial_sort(order.begin(), order.begin() + kHeavyTopK, order.end(),
                      [&](std::uint64_t a, std::uint64_t b) { return counts[a] > counts[b]; });
    for (std::uint32_t i = 0; i < kHeavyTopK; ++i) s.exact_top.push_back(key_of(order[i]));
    return s;
  }();
  return stream;
}

}  // namespace peers
