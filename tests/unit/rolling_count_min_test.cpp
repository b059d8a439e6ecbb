#include "sketch/rolling_count_min.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sketch/serialize.h"
#include "zipf_stream.h"

namespace sketch {
namespace {

using ::testing::HasSubstr;

using test_util::zipf_generator;

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

// A 1 s window of 10 slices of 100 ms; w = 272, d = 5; top 5, heavy at 10%.
rolling_count_min_options small_options() {
  rolling_count_min_options o;
  o.window_ms = 1000;
  o.buckets = 10;
  o.epsilon = 0.01;
  o.delta = 0.01;
  o.top_k = 5;
  o.threshold = 0.1;
  return o;
}

// ⌊a / b⌋ for b > 0.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a / b - (a % b != 0 && a < 0 ? 1 : 0);
}

std::vector<heavy_event> events_of(std::vector<heavy_event> events, std::string_view item) {
  std::erase_if(events, [&](const heavy_event& e) { return e.item != item; });
  return events;
}

// A record taken apart: its fixed fields (the 54 bytes before the nested records), then
// its nested records (the slices by ring position, the sum, the tracker).
struct record_parts {
  std::uint64_t seed = 0;
  std::string fixed;
  std::vector<std::string> nested;
};

record_parts split(std::string_view bytes) {
  detail::record_reader in(bytes, structure_type::rolling_count_min);
  record_parts p;
  p.seed = in.seed();
  p.fixed = std::string(in.view(54));
  while (in.remaining() > 0) p.nested.emplace_back(in.record());
  return p;
}

std::string join(const record_parts& p) {
  detail::record_writer w(structure_type::rolling_count_min, p.seed);
  w.bytes(p.fixed.data(), p.fixed.size());
  for (const std::string& n : p.nested) w.record(n);
  return std::move(w).finish();
}

// The record with `size` bytes at payload offset `offset` replaced by `value`, and its
// checksum recomputed, so that the decoder reaches the checks behind it.
std::string patched(std::string record, std::size_t offset, const void* value, std::size_t size) {
  std::memcpy(record.data() + kHeaderSize + offset, value, size);
  const std::size_t body = record.size() - kTrailerSize;
  const std::uint64_t checksum = XXH64(record.data(), body, 0);
  std::memcpy(record.data() + body, &checksum, sizeof checksum);
  return record;
}

template <class T>
T field(std::string_view record, std::size_t offset) {
  T v;
  std::memcpy(&v, record.data() + kHeaderSize + offset, sizeof v);
  return v;
}

// A window whose slices all hold items and whose tracker is full, after rotations.
rolling_count_min busy_window(bool conservative) {
  rolling_count_min_options o = small_options();
  o.conservative = conservative;
  rolling_count_min r(o);
  zipf_generator zipf(50, 1.1, 5);
  for (int i = 0; i < 3000; ++i) r.update(fmt::format("item-{}", zipf()), i / 2);
  return r;
}

TEST(RollingCountMin, OptionsAreValidatedByName) {
  const auto problem = [](auto change) {
    rolling_count_min_options o = small_options();
    change(o);
    return error_of([&] { rolling_count_min r(o); });
  };
  EXPECT_EQ(problem([](auto&) {}), "(no exception)");
  EXPECT_THAT(problem([](auto& o) { o.window_ms = 0; }), HasSubstr("window_ms"));
  EXPECT_THAT(problem([](auto& o) { o.window_ms = -5; }), HasSubstr("window_ms"));
  EXPECT_THAT(problem([](auto& o) { o.window_ms = 9; }), HasSubstr("window_ms"));
  EXPECT_THAT(problem([](auto& o) { o.buckets = 0; }), HasSubstr("buckets"));
  EXPECT_THAT(error_of([] {
                rolling_count_min_options o = small_options();
                o.buckets = 0;
                (void)rolling_count_min::slice_ms(o);
              }),
              HasSubstr("buckets"));
  EXPECT_THAT(problem([](auto& o) { o.buckets = 1001; }), HasSubstr("buckets"));
  EXPECT_THAT(problem([](auto& o) { o.epsilon = 0; }), HasSubstr("epsilon"));
  EXPECT_THAT(problem([](auto& o) { o.delta = 1; }), HasSubstr("delta"));
  EXPECT_THAT(problem([](auto& o) { o.top_k = 0; }), HasSubstr("top_k"));
  EXPECT_THAT(problem([](auto& o) { o.threshold = 0; }), HasSubstr("threshold"));
  EXPECT_THAT(problem([](auto& o) { o.threshold = 1.5; }), HasSubstr("threshold"));
  EXPECT_THAT(problem([](auto& o) {
                o.epsilon = 1e-6;
                o.buckets = 1000;
                o.window_ms = 1'000'000;
              }),
              HasSubstr("counters"));
}

TEST(RollingCountMin, SizesEverySliceFromEpsilonAndDelta) {
  const rolling_count_min r(small_options());
  EXPECT_EQ(r.slice_ms(), 100);
  EXPECT_LE(r.epsilon(), 0.01);
  EXPECT_LE(r.delta(), 0.01);
  EXPECT_EQ(r.threshold(), 0.1);
  EXPECT_EQ(r.options().top_k, 5u);
  // 10 slices and the sum, 272 × 5 counters of 4 bytes each, plus the tracker.
  EXPECT_EQ(r.size_bytes(), 11u * 272 * 5 * 4 + r.tracker().size_bytes());
  EXPECT_EQ(r.window_items(), 0u);
  EXPECT_EQ(r.error_bound(), 0.0);
}

TEST(RollingCountMin, ItemIsForgottenOnceTheWindowSlidesPastIt) {
  rolling_count_min r(small_options());
  for (int t = 0; t < 50; ++t) EXPECT_EQ(r.update("x", t), static_cast<std::uint64_t>(t + 1));
  r.update("y", 999);  // slice 9: the window is slices 0 … 9
  EXPECT_GE(r.estimate("x"), 50u);
  EXPECT_EQ(r.window_items(), 51u);
  r.advance(1000);  // slice 10: the window is slices 1 … 10, slice 0 is gone
  EXPECT_EQ(r.estimate("x"), 0u);
  EXPECT_EQ(r.estimate("y"), 1u);
  EXPECT_EQ(r.window_items(), 1u);
  EXPECT_EQ(r.estimate(hash_item("y", r.seed())), 1u);
}

// window_items() is exact: the number of updates (weighted) whose slice is among the last
// `buckets` slices, where an update's slice is that of the latest time seen so far.
TEST(RollingCountMin, WindowItemsIsTheExactCountOfTheLastBuckets) {
  rolling_count_min r(small_options());
  std::map<std::int64_t, std::uint64_t> per_slice;
  std::mt19937_64 rng(21);
  std::int64_t t = 0;
  std::int64_t current = floor_div(t, 100);
  for (int i = 0; i < 20'000; ++i) {
    const std::uint64_t dice = rng() % 1000;
    if (dice < 5) {
      t += 1000 + static_cast<std::int64_t>(rng() % 3000);  // a jump past the window
    } else if (dice < 50) {
      t -= static_cast<std::int64_t>(rng() % 500);  // out of order
    } else {
      t += static_cast<std::int64_t>(rng() % 4);
    }
    const auto weight = static_cast<std::uint32_t>(1 + rng() % 5);
    r.update(fmt::format("item-{}", rng() % 300), t, weight);
    current = std::max(current, floor_div(t, 100));
    per_slice[current] += weight;
    std::uint64_t expected = 0;
    for (auto it = per_slice.upper_bound(current - 10); it != per_slice.end(); ++it) {
      expected += it->second;
    }
    ASSERT_EQ(r.window_items(), expected) << "update " << i << " at " << t;
  }
}

// The window's sum is exactly the merge of one count_min_sketch per slice of the window,
// each updated by count_min_sketch::update (plain or conservative) with that slice's items:
// the rolling sketch's fused update writes the same counters as the plain sketch's, and
// returns the sum's estimate.
TEST(RollingCountMin, WindowIsTheMergeOfPerSliceSketches) {
  for (const bool conservative : {false, true}) {
    rolling_count_min_options o = small_options();
    o.conservative = conservative;
    rolling_count_min r(o);
    std::map<std::int64_t, count_min_sketch> slices;
    zipf_generator zipf(500, 1.1, 29);
    std::mt19937_64 rng(31);
    std::int64_t t = 0;
    for (int i = 1; i <= 30'000; ++i) {
      t = i / 10;  // 3 s: the window slides past its first 20 slices
      const std::string item = fmt::format("item-{}", zipf());
      const auto weight = static_cast<std::uint32_t>(1 + rng() % 5);
      const std::uint64_t returned = r.update(item, t, weight);
      const auto slice = slices.try_emplace(
          floor_div(t, 100), count_min_sketch::from_error(0.01, 0.01, o.seed, conservative));
      slice.first->second.update(item, weight);
      if (i % 1000 != 0) continue;
      count_min_sketch window = count_min_sketch::from_error(0.01, 0.01, o.seed, conservative);
      for (auto it = slices.upper_bound(floor_div(t, 100) - 10); it != slices.end(); ++it) {
        window.merge(it->second);
      }
      ASSERT_EQ(r.window_items(), window.total()) << i;
      ASSERT_EQ(returned, window.estimate(item)) << i;
      for (int k = 0; k < 500; ++k) {
        const std::string other = fmt::format("item-{}", k);
        ASSERT_EQ(r.estimate(other), window.estimate(other)) << i << " " << other;
      }
    }
  }
}

// The two-step update of a batch (locate the cells once, prefetch, update) leaves the same
// state and returns the same estimates as update(h, …), plain and conservative.
TEST(RollingCountMin, UpdateOfLocatedCellsIsTheUpdate) {
  for (const bool conservative : {false, true}) {
    rolling_count_min_options o = small_options();
    o.conservative = conservative;
    rolling_count_min one(o);
    rolling_count_min two(o);
    zipf_generator zipf(300, 1.1, 41);
    std::array<std::uint32_t, count_min_sketch::kMaxDepth> cells{};
    for (int i = 0; i < 20'000; ++i) {
      const std::string item = fmt::format("item-{}", zipf());
      const hash128 h = hash_item(item, o.seed);
      const std::int64_t t = i / 10;
      two.locate(h, cells.data());
      two.prefetch(cells.data());
      ASSERT_EQ(two.update(cells.data(), h, item, t), one.update(h, item, t)) << i;
    }
    EXPECT_EQ(two.serialize(), one.serialize()) << conservative;
  }
}

// count() then offer(), with the offers held back over runs of items as the daemon's batch
// does (and released before any count that rotates_at() says would rotate), is update() item
// by item: the same estimates, state and events. Time advances 1 ms per 10 items over 100 ms
// slices, so runs of a few hundred items (released at random) reach rotations.
TEST(RollingCountMin, CountThenOfferInOrderIsTheUpdate) {
  for (const bool conservative : {false, true}) {
    rolling_count_min_options o = small_options();
    o.conservative = conservative;
    rolling_count_min one(o);
    rolling_count_min two(o);
    zipf_generator zipf(300, 1.1, 43);
    std::mt19937_64 rng(9);
    struct counted {
      std::string item;
      hash128 h;
      std::uint64_t estimate;
      std::uint64_t n;
    };
    std::vector<counted> pending;
    std::array<std::uint32_t, count_min_sketch::kMaxDepth> cells{};
    const auto offer_pending = [&] {
      for (const counted& c : pending) two.offer(c.h, c.item, c.estimate, c.n);
      pending.clear();
    };
    int rotations = 0;
    for (int i = 0; i < 30'000; ++i) {
      const std::string item = fmt::format("item-{}", zipf());
      const hash128 h = hash_item(item, o.seed);
      const std::int64_t t = i / 10;
      if (two.rotates_at(t)) {
        offer_pending();
        ++rotations;
      }
      two.locate(h, cells.data());
      const std::uint64_t estimate = two.count(cells.data(), t);
      ASSERT_EQ(estimate, one.update(h, item, t)) << i;
      pending.push_back({item, h, estimate, two.window_items()});
      if (rng() % 300 == 0) offer_pending();
    }
    offer_pending();
    EXPECT_EQ(rotations, 29);  // 3,000 ms of 100 ms slices, the first one only starting
    EXPECT_EQ(two.serialize(), one.serialize()) << conservative;
    EXPECT_EQ(two.drain_events(), one.drain_events()) << conservative;
  }
}

TEST(RollingCountMin, RotatesAtSaysWhetherTheWindowWouldRotate) {
  rolling_count_min window(small_options());
  EXPECT_FALSE(window.rotates_at(1'000));  // not started: the first time only starts it
  static_cast<void>(window.update("a", 1'000));
  const std::int64_t s = window.slice_ms();
  const std::int64_t slice_end = (1'000 / s + 1) * s;
  EXPECT_FALSE(window.rotates_at(slice_end - 1));
  EXPECT_FALSE(window.rotates_at(0));  // time going backwards never rotates
  EXPECT_TRUE(window.rotates_at(slice_end));
  window.advance(slice_end);
  EXPECT_FALSE(window.rotates_at(slice_end));
}

// For every item and at every checkpoint: f ≤ estimate (always), and estimate ≤ f + εN for
// all but a fraction δ + 5·sqrt(δ(1 − δ)/Q) of the Q items (Cormode & Muthukrishnan 2005,
// Theorem 1 per item; binomial allowance of 5 standard deviations), with f the exact count
// over the window and N = window_items().
// The δ part is loose (Markov's bound, far above the real share, which a sketch with fewer
// rows would meet too); the rows themselves are checked exactly by
// WindowIsTheMergeOfPerSliceSketches and by count_min_sketch's own tests.
TEST(RollingCountMin, NeverUndercountsWithinTheWindow) {
  constexpr std::size_t kDistinct = 2000;
  for (bool conservative : {false, true}) {
    rolling_count_min_options o = small_options();
    o.window_ms = 10'000;
    o.conservative = conservative;
    rolling_count_min r(o);
    std::vector<hash128> hashes;
    std::vector<std::string> items;
    for (std::size_t i = 0; i < kDistinct; ++i) {
      items.push_back(fmt::format("item-{}", i));
      hashes.push_back(hash_item(items.back(), o.seed));
    }
    struct arrival {
      std::int64_t slice;
      std::uint32_t rank;
    };
    std::vector<arrival> history;
    zipf_generator zipf(kDistinct, 1.1, 31);
    std::mt19937_64 rng(32);
    std::int64_t t = 0;
    for (int i = 1; i <= 60'000; ++i) {
      t += static_cast<std::int64_t>(rng() % 4);  // 1.5 ms on average: 9 windows in all
      const auto rank = static_cast<std::uint32_t>(zipf());
      const std::uint64_t returned = r.update(hashes[rank], items[rank], t);
      ASSERT_EQ(returned, r.estimate(hashes[rank]));
      history.push_back({floor_div(t, 1000), rank});
      if (i % 6000 != 0) continue;

      std::vector<std::uint64_t> truth(kDistinct, 0);
      std::uint64_t n = 0;
      for (const arrival& a : history) {
        if (a.slice > floor_div(t, 1000) - 10) {
          ++truth[a.rank];
          ++n;
        }
      }
      ASSERT_EQ(r.window_items(), n);
      std::size_t violations = 0;
      for (std::size_t k = 0; k < kDistinct; ++k) {
        const std::uint64_t e = r.estimate(hashes[k]);
        ASSERT_GE(e, truth[k]) << items[k] << " at " << t << " conservative " << conservative;
        if (static_cast<double>(e - truth[k]) > r.error_bound()) ++violations;
      }
      const double delta = r.delta();
      EXPECT_LE(static_cast<double>(violations) / kDistinct,
                delta + 5 * std::sqrt(delta * (1 - delta) / kDistinct));
    }
  }
}

// Background: one item per ms, 200 distinct, so each has 5 of the ~1000 items of a window
// (far under φN = 100 once the window fills). Burst: 5 "hot" per ms during [200, 300), 500 in
// slice 2, a third of the window's items, so it enters; slice 2 leaves the window at the
// first time in slice 12 (t = 1200), when the refresh records that hot left.
TEST(RollingCountMin, HeavyItemLeavesAfterTheWindowSlidesPastItsBurst) {
  rolling_count_min r(small_options());
  std::int64_t entered = -1;
  std::int64_t left = -1;
  for (std::int64_t t = 0; t < 2000; ++t) {
    r.update(fmt::format("bg-{}", t % 200), t);
    if (t >= 200 && t < 300) {
      for (int i = 0; i < 5; ++i) r.update("hot", t);
    }
    for (const heavy_event& e : events_of(r.drain_events(), "hot")) {
      if (e.kind == heavy_event::kind::enter) {
        EXPECT_EQ(entered, -1);
        entered = t;
        EXPECT_GE(static_cast<double>(e.estimate), 0.1 * static_cast<double>(e.window_items));
      } else {
        EXPECT_EQ(left, -1);
        left = t;
        EXPECT_LT(static_cast<double>(e.estimate), 0.1 * static_cast<double>(e.window_items));
      }
    }
    if (t == 1199) {
      r.refresh();
      ASSERT_FALSE(r.top().empty());
      EXPECT_EQ(r.top()[0].item, "hot");
      EXPECT_GE(r.top()[0].estimate, 500u);
      EXPECT_TRUE(r.top()[0].heavy);
    }
  }
  EXPECT_GE(entered, 200);
  EXPECT_LT(entered, 300);
  EXPECT_EQ(left, 1200);
  r.refresh();
  for (const auto& e : r.top()) {
    EXPECT_NE(e.item, "hot");
    EXPECT_FALSE(e.heavy);
  }
}

TEST(RollingCountMin, TimeJumpBeyondTheWindowClearsEverything) {
  rolling_count_min r(small_options());
  for (int i = 0; i < 10; ++i) r.update("x", 0);
  for (int i = 0; i < 10; ++i) r.update("y", 950);  // slice 9; 10 = kMinHeavyEstimate
  (void)r.drain_events();
  r.advance(1850);  // slice 18: the window is 9 … 18, y stays
  EXPECT_EQ(r.estimate("x"), 0u);
  EXPECT_EQ(r.estimate("y"), 10u);
  r.update("z", 1850 + 10 * 1000);  // ten slices or more: everything goes at once
  EXPECT_EQ(r.estimate("y"), 0u);
  EXPECT_EQ(r.window_items(), 1u);
  EXPECT_EQ(r.estimate("z"), 1u);
  // y became the whole window at 1850 (enter), then the jump took it away (leave).
  const std::vector<heavy_event> y = events_of(r.drain_events(), "y");
  ASSERT_FALSE(y.empty());
  EXPECT_EQ(y.back().kind, heavy_event::kind::leave);
  EXPECT_EQ(y.back().window_items, 0u);
}

TEST(RollingCountMin, ExtremeTimesNeitherOverflowNorThrow) {
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  rolling_count_min r(small_options());
  r.update("a", kMin);
  EXPECT_EQ(r.window_items(), 1u);
  r.update("b", kMax);  // a jump of 2^64 ms: cleared
  EXPECT_EQ(r.window_items(), 1u);
  EXPECT_EQ(r.estimate("a"), 0u);
  r.update("c", kMin);  // backwards: counted in the current slice
  EXPECT_EQ(r.window_items(), 2u);
  r.advance(kMax);
  EXPECT_EQ(r.estimate("c"), 1u);
}

TEST(RollingCountMin, TimeGoingBackwardsNeverRotatesOrThrows) {
  rolling_count_min r(small_options());
  r.update("a", 500);  // slice 5
  r.update("b", 100);  // earlier: counted in slice 5, nothing rotates
  r.advance(50);
  EXPECT_EQ(r.window_items(), 2u);
  EXPECT_EQ(r.estimate("b"), 1u);
  r.advance(1499);  // slice 14: the window is 5 … 14
  EXPECT_EQ(r.window_items(), 2u);
  r.advance(1500);  // slice 15: slice 5 is gone with both
  EXPECT_EQ(r.window_items(), 0u);
  EXPECT_EQ(r.estimate("b"), 0u);
}

TEST(RollingCountMin, NegativeTimesUseFloorSlices) {
  rolling_count_min r(small_options());
  r.update("a", -1);  // slice −1, [−100, 0)
  r.advance(899);     // slice 8: the window is −1 … 8
  EXPECT_EQ(r.estimate("a"), 1u);
  r.advance(900);  // slice 9: the window is 0 … 9
  EXPECT_EQ(r.estimate("a"), 0u);
}

// A saturated counter of the sum cannot be subtracted from; the rotation recomputes the sum
// from the remaining slices, so the estimate is exact again once the big slice is gone.
TEST(RollingCountMin, SaturatedSumIsRecomputedWhenTheSliceLeaves) {
  rolling_count_min_options o = small_options();
  o.window_ms = 200;
  o.buckets = 2;
  rolling_count_min r(o);
  r.update("x", 0, UINT32_MAX);
  r.update("x", 100, 10);
  EXPECT_EQ(r.estimate("x"), std::uint64_t{UINT32_MAX} + 10);
  EXPECT_EQ(r.window_items(), std::uint64_t{UINT32_MAX} + 10);
  r.advance(200);
  EXPECT_EQ(r.estimate("x"), 10u);
  EXPECT_EQ(r.window_items(), 10u);
}

TEST(RollingCountMin, SingleBucketWindowIsTheCurrentSlice) {
  rolling_count_min_options o = small_options();
  o.buckets = 1;
  rolling_count_min r(o);
  r.update("x", 10);
  r.update("x", 999);
  EXPECT_EQ(r.estimate("x"), 2u);
  r.update("y", 1000);
  EXPECT_EQ(r.estimate("x"), 0u);
  EXPECT_EQ(r.window_items(), 1u);
}

// One bucket: the window is the current slice alone, with no ring of past slices. Over a
// seeded Zipf stream (200 items, s = 1.1) of 2000 updates in each of 8 windows of 1 s,
// adjacent or seconds apart, plain and conservative: within a window, window_items() is the
// exact count, no estimate is below the item's exact count in the window, and estimate ≤
// f + εN holds for all but a fraction δ + 5·sqrt(δ(1 − δ)/Q) of the Q items (as in
// NeverUndercountsWithinTheWindow). The first advance() or update() in a later window
// forgets everything: every estimate and window_items() are 0 (1 for the update's own
// item), the top-k is empty and the heavy item has left. A copy through serialize() goes
// on identically.
TEST(RollingCountMin, SingleBucketForgetsEverythingOnceItsWindowPasses) {
  constexpr std::size_t kDistinct = 200;
  constexpr int kPerWindow = 2000;
  // The windows' indices: adjacent ones, and jumps of several windows.
  const std::vector<std::int64_t> windows = {0, 1, 2, 5, 6, 40, 41, 1000};
  for (const bool conservative : {false, true}) {
    SCOPED_TRACE(conservative ? "conservative" : "plain");
    rolling_count_min_options o = small_options();
    o.buckets = 1;
    o.conservative = conservative;
    rolling_count_min r(o);
    ASSERT_EQ(r.slice_ms(), 1000);
    std::vector<std::string> items;
    std::vector<hash128> hashes;
    for (std::size_t i = 0; i <= kDistinct; ++i) {  // the last one, "fresh", opens windows
      items.push_back(i < kDistinct ? fmt::format("item-{}", i) : std::string("fresh"));
      hashes.push_back(hash_item(items.back(), o.seed));
    }
    zipf_generator zipf(kDistinct, 1.1, 43);
    std::mt19937_64 rng(44);
    std::vector<std::uint64_t> truth(kDistinct + 1, 0);
    for (std::size_t w = 0; w < windows.size(); ++w) {
      const std::int64_t start = windows[w] * 1000;
      for (int i = 0; i < kPerWindow; ++i) {
        // Any order within the window: one slice.
        const std::int64_t t = start + static_cast<std::int64_t>(rng() % 1000);
        const std::size_t rank = zipf();
        r.update(hashes[rank], items[rank], t);
        ++truth[rank];
      }
      std::uint64_t n = 0;
      for (const std::uint64_t f : truth) n += f;
      ASSERT_EQ(r.window_items(), n) << "window " << windows[w];
      std::size_t violations = 0;
      for (std::size_t k = 0; k <= kDistinct; ++k) {
        const std::uint64_t e = r.estimate(hashes[k]);
        ASSERT_GE(e, truth[k]) << items[k] << " in window " << windows[w];
        if (static_cast<double>(e - truth[k]) > r.error_bound()) ++violations;
      }
      const double delta = r.delta();
      EXPECT_LE(static_cast<double>(violations) / (kDistinct + 1),
                delta + 5 * std::sqrt(delta * (1 - delta) / (kDistinct + 1)));
      r.refresh();
      ASSERT_FALSE(r.top().empty());
      EXPECT_EQ(r.top()[0].item, "item-0");
      EXPECT_TRUE(r.top()[0].heavy);
      (void)r.drain_events();
      if (w == 3) {
        // A copy of the one-bucket window goes on as the original, across the next window.
        rolling_count_min copy = rolling_count_min::deserialize(r.serialize());
        EXPECT_EQ(copy.serialize(), r.serialize());
        copy.advance(windows[w + 1] * 1000);
        r.advance(windows[w + 1] * 1000);
        EXPECT_EQ(copy.serialize(), r.serialize());
        EXPECT_EQ(copy.drain_events(), r.drain_events());
        std::fill(truth.begin(), truth.end(), 0);
        continue;
      }
      if (w + 1 == windows.size()) break;
      const std::int64_t next = windows[w + 1] * 1000;
      std::fill(truth.begin(), truth.end(), 0);
      if (w % 2 == 0) {
        r.advance(next);
      } else {
        EXPECT_EQ(r.update(hashes[kDistinct], items[kDistinct], next), 1u);
        truth[kDistinct] = 1;
      }
      EXPECT_EQ(r.window_items(), truth[kDistinct]);
      for (std::size_t k = 0; k <= kDistinct; ++k) {
        ASSERT_EQ(r.estimate(hashes[k]), truth[k]) << items[k] << " after window " << windows[w];
      }
      r.refresh();
      const auto top = r.top();
      if (w % 2 == 0) {
        EXPECT_TRUE(top.empty());
      } else {
        ASSERT_EQ(top.size(), 1u);
        EXPECT_EQ(top[0].item, "fresh");
        EXPECT_FALSE(top[0].heavy);  // 1 is below kMinHeavyEstimate
      }
      const std::vector<heavy_event> left = events_of(r.drain_events(), "item-0");
      ASSERT_FALSE(left.empty()) << "after window " << windows[w];
      EXPECT_EQ(left.back().kind, heavy_event::kind::leave);
    }
  }
}

TEST(RollingCountMin, SerializationRoundTrips) {
  rolling_count_min_options o = small_options();
  o.conservative = true;
  o.seed = 77;
  const rolling_count_min empty(o);
  const std::string empty_bytes = empty.serialize();
  const rolling_count_min empty_back = rolling_count_min::deserialize(empty_bytes);
  EXPECT_EQ(empty_back.serialize(), empty_bytes);
  EXPECT_EQ(empty_back.options().seed, 77u);
  EXPECT_TRUE(empty_back.options().conservative);

  rolling_count_min r(o);
  zipf_generator zipf(500, 1.1, 41);
  std::int64_t t = 0;
  for (int i = 0; i < 20'000; ++i) {
    t += i % 3 == 0 ? 1 : 0;
    r.update(fmt::format("item-{}", zipf()), t);
  }
  r.refresh();
  const std::string bytes = r.serialize();
  rolling_count_min back = rolling_count_min::deserialize(bytes);
  EXPECT_EQ(back.serialize(), bytes);
  // serialize_to writes the same record after what the string holds.
  std::string appended = "before";
  r.serialize_to(appended);
  EXPECT_EQ(appended, "before" + bytes);
  EXPECT_EQ(back.window_items(), r.window_items());
  EXPECT_EQ(back.top(), r.top());
  EXPECT_EQ(back.slice_ms(), r.slice_ms());
  for (int i = 0; i < 500; ++i) {
    const std::string item = fmt::format("item-{}", i);
    ASSERT_EQ(back.estimate(item), r.estimate(item));
  }
  // Both go on identically, through rotations.
  (void)r.drain_events();
  for (int i = 0; i < 5'000; ++i) {
    t += 1;
    const std::string item = fmt::format("item-{}", zipf());
    ASSERT_EQ(back.update(item, t), r.update(item, t));
  }
  EXPECT_EQ(back.drain_events(), r.drain_events());
  EXPECT_EQ(back.serialize(), r.serialize());
}

// The record as drawn in rolling_count_min.cpp: slices by ring position (the oldest slot is
// reused for the newest slice), the current one at the recorded position, then the sum as a
// plain sketch. Snapshots written by earlier builds depend on it.
TEST(RollingCountMin, RecordLaysOutSlicesByRingPosition) {
  rolling_count_min_options o = small_options();
  o.window_ms = 300;
  o.buckets = 3;
  o.conservative = true;
  rolling_count_min r(o);
  r.update("a", 0, 1);    // slice 0, ring position 0
  r.update("b", 100, 2);  // slice 1, position 1
  r.update("c", 200, 3);  // slice 2, position 2
  r.update("d", 300, 4);  // slice 3 takes position 0: slice 0 leaves the window
  const std::string bytes = r.serialize();
  detail::record_reader in(bytes, structure_type::rolling_count_min);
  EXPECT_EQ(in.i64(), 300);
  EXPECT_EQ(in.u32(), 3u);
  (void)in.f64();
  (void)in.f64();
  (void)in.u32();
  (void)in.f64();
  EXPECT_EQ(in.u8(), 1);    // conservative
  EXPECT_EQ(in.u8(), 1);    // started
  EXPECT_EQ(in.u32(), 0u);  // ring position of the current slice
  EXPECT_EQ(in.i64(), 3);   // its index
  const struct {
    const char* item;
    std::uint64_t count;
  } expected[] = {{"d", 4}, {"b", 2}, {"c", 3}};
  for (const auto& e : expected) {
    const count_min_sketch slice = count_min_sketch::deserialize(in.record());
    EXPECT_TRUE(slice.conservative());
    EXPECT_EQ(slice.total(), e.count) << e.item;
    EXPECT_EQ(slice.estimate(e.item), e.count) << e.item;
  }
  const count_min_sketch sum = count_min_sketch::deserialize(in.record());
  EXPECT_FALSE(sum.conservative());
  EXPECT_EQ(sum.total(), 9u);
  EXPECT_EQ(sum.estimate("a"), r.estimate("a"));
  EXPECT_EQ(sum.estimate("d"), 4u);
  (void)in.record();  // the tracker
  in.done();
}

// prefetch() is a hint: on an empty sketch and on one whose window is full (every slice
// written, the tracker full), it leaves the state byte for byte as it was, and the updates
// that follow return what an untouched copy returns.
TEST(RollingCountMin, PrefetchChangesNothing) {
  for (const bool conservative : {false, true}) {
    rolling_count_min_options o = small_options();
    o.conservative = conservative;
    rolling_count_min empty(o);
    const std::string empty_bytes = empty.serialize();
    for (int i = 0; i < 100; ++i) empty.prefetch(hash_item(fmt::format("item-{}", i), o.seed));
    EXPECT_EQ(empty.serialize(), empty_bytes);

    rolling_count_min r(o);
    zipf_generator zipf(500, 1.1, 43);
    std::int64_t t = 0;
    for (int i = 0; i < 20'000; ++i) {
      t += i % 10 == 0 ? 1 : 0;  // 2 s: every slice written, rotations on the way
      r.update(fmt::format("item-{}", zipf()), t);
    }
    ASSERT_EQ(r.tracker().size(), r.tracker().capacity());
    rolling_count_min twin = rolling_count_min::deserialize(r.serialize());
    const std::string bytes = r.serialize();
    for (int i = 0; i < 600; ++i) r.prefetch(hash_item(fmt::format("item-{}", i), o.seed));
    EXPECT_EQ(r.serialize(), bytes);
    for (int i = 0; i < 2'000; ++i) {
      const std::string item = fmt::format("item-{}", zipf());
      const hash128 h = hash_item(item, o.seed);
      r.prefetch(h);
      ASSERT_EQ(r.update(h, item, t), twin.update(h, item, t)) << i;
    }
    EXPECT_EQ(r.serialize(), twin.serialize());
  }
}

TEST(RollingCountMin, CorruptOrTruncatedInputIsAFormatError) {
  rolling_count_min r(small_options());
  for (int t = 0; t < 300; ++t) r.update(fmt::format("item-{}", t % 7), t);
  const std::string bytes = r.serialize();
  for (std::size_t n :
       {std::size_t{0}, std::size_t{10}, kHeaderSize + 20, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_THROW((void)rolling_count_min::deserialize(bytes.substr(0, n)), format_error) << n;
  }
  for (std::size_t i = 0; i < bytes.size(); i += i < 200 ? 1 : 997) {
    std::string corrupt = bytes;
    corrupt[i] = static_cast<char>(corrupt[i] ^ 0x04);
    EXPECT_THROW((void)rolling_count_min::deserialize(corrupt), format_error) << i;
  }

  // Well-formed records (valid checksums) whose content does not fit together: 2 slices of
  // w = 6 (ε = 0.5), d = 1 (δ = 0.5).
  struct fake {
    std::uint32_t current = 0;
    std::uint32_t width = 6;
    bool wrong_sum = false;
    std::uint32_t k = 1;
  };
  const auto record = [](const fake& f) {
    detail::record_writer w(structure_type::rolling_count_min, kDefaultSeed);
    w.i64(200);
    w.u32(2);
    w.f64(0.5);
    w.f64(0.5);
    w.u32(1);
    w.f64(0.5);
    w.u8(0);
    w.u8(1);
    w.u32(f.current);
    w.i64(3);
    count_min_sketch slice(f.width, 1);
    slice.update("a");
    w.record(slice.serialize());
    w.record(count_min_sketch(f.width, 1).serialize());
    count_min_sketch sum(f.width, 1);
    if (!f.wrong_sum) sum.merge(slice);
    w.record(sum.serialize());
    w.record(top_k_tracker(f.k, 0.5).serialize());
    return std::move(w).finish();
  };
  const auto problem = [&](const fake& f) {
    return error_of([&] { (void)rolling_count_min::deserialize(record(f)); });
  };
  EXPECT_EQ(problem(fake{}), "(no exception)");
  EXPECT_THAT(problem(fake{.current = 2}), HasSubstr("ring position"));
  EXPECT_THAT(problem(fake{.width = 7}), HasSubstr("do not match"));
  EXPECT_THAT(problem(fake{.wrong_sum = true}), HasSubstr("sum"));
  EXPECT_THAT(problem(fake{.k = 2}), HasSubstr("tracker"));
  EXPECT_THROW((void)rolling_count_min::deserialize(count_min_sketch(6, 1).serialize()),
               format_error);
}

// Every candidate's estimate is the sum's estimate of it when it was offered or refreshed,
// and the sum only grows until the refresh after the next rotation; the tracker has the
// capacity the options give. A record whose tracker says otherwise is refused. (Tracker
// payload offsets: k 0, capacity 4, phi 8, size 16, candidates from 20: hash 20 and 28,
// estimate 36.)
TEST(RollingCountMin, TrackerThatDisagreesWithTheSumIsRefused) {
  for (const bool conservative : {false, true}) {
    const rolling_count_min r = busy_window(conservative);
    const std::string bytes = r.serialize();
    const record_parts parts = split(bytes);
    ASSERT_EQ(parts.nested.size(), r.options().buckets + 2);
    ASSERT_EQ(join(parts), bytes);  // the helpers are sound
    const std::string& tracker = parts.nested.back();
    ASSERT_GT(field<std::uint32_t>(tracker, 16), 0u);
    const hash128 first{field<std::uint64_t>(tracker, 20), field<std::uint64_t>(tracker, 28)};
    ASSERT_EQ(field<std::uint64_t>(tracker, 36), r.estimate(first));
    const auto with_tracker = [&](std::string bad) {
      record_parts p = parts;
      p.nested.back() = std::move(bad);
      return error_of([&] { (void)rolling_count_min::deserialize(join(p)); });
    };

    // Above the sum's estimate, although within N.
    const std::uint64_t over = r.estimate(first) + 1;
    ASSERT_LE(over, r.window_items());
    EXPECT_THAT(
        with_tracker(patched(tracker, 36, &over, 8)),
        HasSubstr(fmt::format("tracker: candidate 0 has estimate {}, more than the sum's {}", over,
                              over - 1)))
        << conservative;
    const std::uint64_t beyond_n = r.window_items() + 1;
    EXPECT_THAT(with_tracker(patched(tracker, 36, &beyond_n, 8)), HasSubstr("candidate 0"));

    const std::uint32_t capacity = r.tracker().capacity() + 1;
    ASSERT_EQ(r.tracker().capacity(), top_k_tracker::default_capacity(5, 0.1));
    EXPECT_THAT(
        with_tracker(patched(tracker, 4, &capacity, 4)),
        HasSubstr(fmt::format("tracker: capacity {} is not the {}", capacity, capacity - 1)));
    EXPECT_EQ(with_tracker(tracker), "(no exception)");
  }
}

// The sum is always written as a plain sketch, whatever the slices' mode: a conservative flag
// on it would be read back and then written back as another record.
TEST(RollingCountMin, SumRecordedAsConservativeIsRefused) {
  for (const bool conservative : {false, true}) {
    const rolling_count_min r = busy_window(conservative);
    record_parts parts = split(r.serialize());
    std::string& sum = parts.nested[r.options().buckets];
    ASSERT_EQ(field<std::uint8_t>(sum, 8), 0u);  // count-min payload: w 0, d 4, mode 8
    const std::uint8_t one = 1;
    sum = patched(sum, 8, &one, 1);
    EXPECT_THAT(error_of([&] { (void)rolling_count_min::deserialize(join(parts)); }),
                HasSubstr("sum: recorded as a conservative sketch"))
        << conservative;
  }
}

// An error inside a nested record names where it sits, as rolling_bloom's do.
TEST(RollingCountMin, ErrorOfANestedRecordSaysWhereItIs) {
  const rolling_count_min r = busy_window(false);
  const record_parts parts = split(r.serialize());
  const auto problem = [&](std::size_t which, std::string bad) {
    record_parts p = parts;
    p.nested[which] = std::move(bad);
    return error_of([&] { (void)rolling_count_min::deserialize(join(p)); });
  };
  // Slice 1's first counter above its N (count-min payload: N at 9, counters from 17).
  const std::string& slice = parts.nested[1];
  const auto too_big = static_cast<std::uint32_t>(field<std::uint64_t>(slice, 9) + 1);
  EXPECT_THAT(problem(1, patched(slice, 17, &too_big, 4)),
              testing::StartsWith("rolling count-min sketch: slice 1: count-min sketch: counter 0 "
                                  "holds"));
  const std::uint8_t bad_mode = 7;
  EXPECT_THAT(
      problem(r.options().buckets, patched(parts.nested[r.options().buckets], 8, &bad_mode, 1)),
      testing::StartsWith("rolling count-min sketch: sum: count-min sketch: update mode 7"));
  std::string tracker = parts.nested.back();
  tracker[kHeaderSize] ^= 1;  // not resealed
  EXPECT_EQ(problem(parts.nested.size() - 1, tracker),
            "rolling count-min sketch: tracker: top-k tracker: checksum mismatch (the data is "
            "corrupt)");
}

// The decoder's rules hold for every state the public operations reach: random windows of
// both modes, few buckets and narrow sketches (so that items collide and the tracker
// churns), after weighted updates up to saturation, rotations, time going backwards, jumps
// past the window and refreshes, all read back and write back the same record.
TEST(RollingCountMin, RecordsOfRealWindowsAreAccepted) {
  std::mt19937_64 rng(611);
  for (int trial = 0; trial < 60; ++trial) {
    rolling_count_min_options o;
    o.buckets = static_cast<std::uint32_t>(1 + rng() % 5);
    o.window_ms = 100 * o.buckets;
    o.epsilon = 0.5;
    o.delta = 0.1;
    o.top_k = static_cast<std::uint32_t>(1 + rng() % 3);
    o.threshold = 0.3;
    o.conservative = rng() % 2 == 0;
    rolling_count_min r(o);
    std::int64_t t = 0;
    for (int step = 0; step < 80; ++step) {
      switch (rng() % 10) {
        case 0:
          t -= static_cast<std::int64_t>(rng() % 150);
          break;
        case 1:
          t += static_cast<std::int64_t>(rng() % 1000);
          break;
        default:
          t += static_cast<std::int64_t>(rng() % 40);
          break;
      }
      const std::uint64_t kind = rng() % 20;
      const std::uint32_t weight =
          kind == 0 ? UINT32_MAX - static_cast<std::uint32_t>(rng() % 2)
                    : (kind < 5 ? static_cast<std::uint32_t>(rng() % 100'000) : 1);
      switch (rng() % 8) {
        case 0:
          r.advance(t);
          break;
        case 1:
          r.refresh();
          (void)r.drain_events();
          break;
        default:
          r.update(fmt::format("item-{}", rng() % 12), t, weight);
          break;
      }
      const std::string bytes = r.serialize();
      ASSERT_EQ(error_of([&] { (void)rolling_count_min::deserialize(bytes); }), "(no exception)")
          << "trial " << trial << ", step " << step;
      ASSERT_EQ(rolling_count_min::deserialize(bytes).serialize(), bytes);
    }
  }
}

}  // namespace
}  // namespace sketch
