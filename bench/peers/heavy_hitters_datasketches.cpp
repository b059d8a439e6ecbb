// Apache DataSketches' side of the heavy-hitters comparison (bench/peers/heavy_hitters_loop.h),
// from its public sources at the tag peers.sh pins:
//   HeavyHitters/datasketches_count_min       count_min_sketch<uint64_t>::update(uint64_t) with
//                                             suggest_num_buckets(1e-4) = 27,183 buckets and 7
//                                             hashes (the d of sketchd's δ = 0.001); no top-k
//   HeavyHitters/datasketches_frequent_items  frequent_items_sketch<uint64_t>::update(uint64_t)
//                                             (Misra–Gries with reverse purge), lg_max_map_size
//                                             9 and 10 (the argument), its top-10 read with
//                                             get_frequent_items(NO_FALSE_NEGATIVES)
// Each hashes the key itself (count_min: MurmurHash3 per row; frequent_items: its map's hash).
#include <algorithm>
#include <count_min.hpp>
#include <frequent_items_sketch.hpp>

#include "heavy_hitters_loop.h"

namespace {

constexpr std::uint8_t kCountMinHashes = 7;

void datasketches_count_min(benchmark::State& state) {
  using sketch_type = datasketches::count_min_sketch<std::uint64_t>;
  sketch_type cms(kCountMinHashes, sketch_type::suggest_num_buckets(1e-4));
  peers::run_heavy(
      state,
      [&](std::span<const std::uint64_t> keys) {
        for (const std::uint64_t key : keys) cms.update(key);
      },
      // No top-k of its own: the estimate of the first exact key stands for a result.
      [&] {
        const auto& top = peers::heavy_stream_of().exact_top;
        return std::vector<std::uint64_t>(cms.get_estimate(top.front()) > 0 ? top.size() : 0,
                                          top.front());
      },
      [&] {
        return std::uint64_t{cms.get_num_hashes()} * cms.get_num_buckets() * sizeof(std::uint64_t);
      });
}

void datasketches_frequent_items(benchmark::State& state) {
  const auto lg_max_map_size = static_cast<std::uint8_t>(state.range(0));
  datasketches::frequent_items_sketch<std::uint64_t> sketch(lg_max_map_size, lg_max_map_size);
  peers::run_heavy(
      state,
      [&](std::span<const std::uint64_t> keys) {
        for (const std::uint64_t key : keys) sketch.update(key);
      },
      [&] {
        auto rows = sketch.get_frequent_items(datasketches::NO_FALSE_NEGATIVES);
        std::sort(rows.begin(), rows.end(),
                  [](const auto& a, const auto& b) { return a.get_estimate() > b.get_estimate(); });
        std::vector<std::uint64_t> top;
        for (const auto& row : rows) {
          if (top.size() == peers::kHeavyTopK) break;
          top.push_back(row.get_item());
        }
        return top;
      },
      // Its map: 2^lg slots of a key (8 bytes), a weight (8 bytes) and a state (2 bytes).
      [&] { return (std::uint64_t{1} << lg_max_map_size) * (8 + 8 + 2); });
}

const bool registered_count_min =
    peers::register_heavy("HeavyHitters/datasketches_count_min", datasketches_count_min);
const bool registered_frequent_items = peers::register_heavy(
    "HeavyHitters/datasketches_frequent_items", datasketches_frequent_items, {9, 10});

}  // namespace
