// sketchd's side of the heavy-hitters comparison (bench/peers/heavy_hitters_loop.h), as the
// daemon uses its structures: one XXH3-128 of the key's 8 bytes (sketch::hash_bytes, computed
// once per item), a Count-Min sketch of ε = 1e-4 and δ = 0.001 (w = 27,183, d = 7, plain
// update) and a top-k tracker (k = 10, φ = 0.01, the default 200 candidates) offered each
// item's estimate; its top-10 is read after refresh().
//   HeavyHitters/sketchd_count_min+top_k   one item at a time: update, then offer_growing
//   HeavyHitters/sketchd_count_min+top_k_batch
//                                          the same per block of 1,024 keys: each key hashed
//                                          and counted (update), its estimate kept; then the
//                                          block offered at once, top_k_tracker::
//                                          offer_growing(span, …)
//   HeavyHitters/sketchd_rolling+top_k_daemon
//                                          the daemon's batch path (pipeline::feed_group's
//                                          heavy-hitter pass, for one shard): a
//                                          rolling_count_min of the same ε and δ, with the
//                                          daemon's default conservative update, over a 5 min
//                                          window of 10 slices, in groups of 256 keys (the
//                                          daemon's extraction group): each key hashed and
//                                          located, its d cells prefetched 16 keys ahead,
//                                          counted into the current slice and the window
//                                          (count), then the group offered at once (offer);
//                                          the tracker refreshed once per block of 1,024 (the
//                                          daemon's end of batch). All keys have one time, as
//                                          within a slice (a rotation every 30 s is
//                                          negligible per item)
//   HeavyHitters/sketchd_rolling_plain+top_k_daemon
//                                          the same with plain update (conservative: false)
//   HeavyHitters/sketchd_rolling_count_daemon, …/sketchd_rolling_plain_count_daemon
//                                          the same two without the top-k (no offer, no
//                                          refresh): the floor of the daemon's rows
//   HeavyHitters/sketchd_count_min_update  the sketch's update alone (no top-k)
//   HeavyHitters/sketchd_hash_only         a control: the hashes alone
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string_view>

#include "heavy_hitters_loop.h"
#include "sketch/count_min.h"
#include "sketch/hash.h"
#include "sketch/rolling_count_min.h"
#include "sketch/top_k.h"

namespace {

constexpr double kEpsilon = 1e-4;
constexpr double kDelta = 0.001;
constexpr double kPhi = 0.01;

sketch::hash128 hash_of(const std::uint64_t& key) noexcept {
  return sketch::hash_bytes(&key, sizeof key, sketch::kDefaultSeed);
}

std::string_view bytes_of(const std::uint64_t& key) noexcept {
  return {reinterpret_cast<const char*>(&key), sizeof key};
}

// The keys of a top-k, in its order.
std::vector<std::uint64_t> keys_of(const std::vector<sketch::top_k_tracker::entry>& top) {
  std::vector<std::uint64_t> out;
  for (const auto& e : top) {
    std::uint64_t key = 0;
    std::memcpy(&key, e.item.data(), std::min(e.item.size(), sizeof key));
    out.push_back(key);
  }
  return out;
}

struct sketchd_heavy {
  sketch::count_min_sketch cms = sketch::count_min_sketch::from_error(kEpsilon, kDelta);
  sketch::top_k_tracker tracker{peers::kHeavyTopK, kPhi};

  std::vector<std::uint64_t> top() {
    tracker.refresh([&](const sketch::hash128& h) { return cms.estimate(h); }, cms.total());
    return keys_of(tracker.top());
  }
  [[nodiscard]] std::uint64_t bytes() const { return cms.size_bytes() + tracker.size_bytes(); }
};

void sketchd_one_by_one(benchmark::State& state) {
  sketchd_heavy s;
  peers::run_heavy(
      state,
      [&](std::span<const std::uint64_t> keys) {
        for (const std::uint64_t& key : keys) {
          const sketch::hash128 h = hash_of(key);
          const std::uint64_t estimate = s.cms.update(h);
          s.tracker.offer_growing(h, bytes_of(key), estimate, s.cms.total());
        }
      },
      [&] { return s.top(); }, [&] { return s.bytes(); });
}

void sketchd_batch(benchmark::State& state) {
  sketchd_heavy s;
  std::array<sketch::hash128, peers::kHeavyBlock> hashes;
  std::array<std::uint64_t, peers::kHeavyBlock> estimates;
  peers::run_heavy(
      state,
      [&](std::span<const std::uint64_t> keys) {
        const std::size_t n = keys.size();
        const std::uint64_t n_before = s.cms.total();
        for (std::size_t i = 0; i < n; ++i) {
          hashes[i] = hash_of(keys[i]);
          estimates[i] = s.cms.update(hashes[i]);
        }
        s.tracker.offer_growing(
            std::span<const sketch::hash128>(hashes).first(n),
            std::span<const std::uint64_t>(estimates).first(n),
            [&](std::size_t i) { return bytes_of(keys[i]); }, n_before);
      },
      [&] { return s.top(); }, [&] { return s.bytes(); });
}

// The daemon's heavy-hitter state for one pipeline (scope: instance), and its batch pass.
template <bool Conservative>
struct sketchd_rolling {
  static constexpr std::size_t kGroup = 256;  // extractor::kBatchMessages
  static constexpr std::size_t kAhead = 16;   // pipeline::feed_group's prefetch distance
  static constexpr std::int64_t kNowMs = 1'800'000'000'000;

  sketch::rolling_count_min heavy{sketch::rolling_count_min_options{.window_ms = 300'000,
                                                                    .buckets = 10,
                                                                    .epsilon = kEpsilon,
                                                                    .delta = kDelta,
                                                                    .top_k = peers::kHeavyTopK,
                                                                    .threshold = kPhi,
                                                                    .conservative = Conservative}};
  std::array<sketch::hash128, kGroup> hashes{};
  std::array<std::uint32_t, kGroup * sketch::count_min_sketch::kMaxDepth> cells{};
  std::array<std::uint64_t, kGroup> estimates{};
  std::array<std::uint64_t, kGroup> totals{};

  // The group's keys hashed, located, prefetched and counted; returns the sum of their
  // estimates.
  std::uint64_t count_group(std::span<const std::uint64_t> keys) {
    const std::size_t n = keys.size();
    const std::size_t depth = heavy.depth();
    for (std::size_t i = 0; i < n; ++i) {
      hashes[i] = hash_of(keys[i]);
      heavy.locate(hashes[i], &cells[i * depth]);
    }
    for (std::size_t i = 0; i < std::min(n, kAhead); ++i) heavy.prefetch(&cells[i * depth]);
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (i + kAhead < n) heavy.prefetch(&cells[(i + kAhead) * depth]);
      estimates[i] = heavy.count(&cells[i * depth], kNowMs);
      totals[i] = heavy.window_items();
      sum += estimates[i];
    }
    return sum;
  }
  void feed_group(std::span<const std::uint64_t> keys) {
    const std::size_t n = keys.size();
    count_group(keys);
    heavy.offer(
        std::span<const sketch::hash128>(hashes).first(n),
        std::span<const std::uint64_t>(estimates).first(n),
        [&](std::size_t i) { return bytes_of(keys[i]); }, [&](std::size_t i) { return totals[i]; });
  }
  void feed(std::span<const std::uint64_t> keys) {
    for (std::size_t done = 0; done < keys.size(); done += kGroup)
      feed_group(keys.subspan(done, std::min(kGroup, keys.size() - done)));
    heavy.refresh();
  }
  std::vector<std::uint64_t> top() {
    heavy.refresh();
    return keys_of(heavy.top());
  }
};

template <bool Conservative>
void sketchd_rolling_daemon(benchmark::State& state) {
  auto s = std::make_unique<sketchd_rolling<Conservative>>();
  peers::run_heavy(
      state, [&](std::span<const std::uint64_t> keys) { s->feed(keys); }, [&] { return s->top(); },
      [&] { return s->heavy.size_bytes(); });
}

// The daemon's pass without the top-k: each group hashed, located, prefetched and counted
// as above, no offer and no refresh. What is left of the daemon's row when the tracker
// costs nothing: the floor of its Count-Min part.
template <bool Conservative>
void sketchd_rolling_count_only(benchmark::State& state) {
  auto s = std::make_unique<sketchd_rolling<Conservative>>();
  std::uint64_t sum = 0;  // of the estimates: the loop's result
  peers::run_heavy(
      state,
      [&](std::span<const std::uint64_t> keys) {
        for (std::size_t done = 0; done < keys.size(); done += s->kGroup)
          sum += s->count_group(keys.subspan(done, std::min(s->kGroup, keys.size() - done)));
      },
      [&] { return std::vector<std::uint64_t>{}; }, [&] { return s->heavy.size_bytes(); });
  state.counters["estimate_sum"] = static_cast<double>(sum);
}

void sketchd_update_only(benchmark::State& state) {
  sketchd_heavy s;
  std::uint64_t sum = 0;  // of the estimates: the loop's result
  peers::run_heavy(
      state,
      [&](std::span<const std::uint64_t> keys) {
        for (const std::uint64_t& key : keys) sum += s.cms.update(hash_of(key));
      },
      [&] { return std::vector<std::uint64_t>{}; }, [&] { return s.cms.size_bytes(); });
  state.counters["estimate_sum"] = static_cast<double>(sum);
}

void sketchd_hash_only(benchmark::State& state) {
  std::uint64_t sum = 0;
  peers::run_heavy(
      state,
      [&](std::span<const std::uint64_t> keys) {
        for (const std::uint64_t& key : keys) sum += hash_of(key).low;
      },
      [&] { return std::vector<std::uint64_t>{}; }, [] { return std::uint64_t{0}; });
  state.counters["hash_sum"] = static_cast<double>(sum);
}

const bool registered_one_by_one =
    peers::register_heavy("HeavyHitters/sketchd_count_min+top_k", sketchd_one_by_one);
const bool registered_batch =
    peers::register_heavy("HeavyHitters/sketchd_count_min+top_k_batch", sketchd_batch);
const bool registered_daemon = peers::register_heavy("HeavyHitters/sketchd_rolling+top_k_daemon",
                                                     sketchd_rolling_daemon<true>);
const bool registered_daemon_plain = peers::register_heavy(
    "HeavyHitters/sketchd_rolling_plain+top_k_daemon", sketchd_rolling_daemon<false>);
const bool registered_daemon_count = peers::register_heavy(
    "HeavyHitters/sketchd_rolling_count_daemon", sketchd_rolling_count_only<true>);
const bool registered_daemon_plain_count = peers::register_heavy(
    "HeavyHitters/sketchd_rolling_plain_count_daemon", sketchd_rolling_count_only<false>);
const bool registered_update =
    peers::register_heavy("HeavyHitters/sketchd_count_min_update", sketchd_update_only);
const bool registered_hash =
    peers::register_heavy("HeavyHitters/sketchd_hash_only", sketchd_hash_only);

}  // namespace
