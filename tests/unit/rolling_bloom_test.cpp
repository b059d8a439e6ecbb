#include "sketch/rolling_bloom.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "sketch/serialize.h"

namespace sketch {
namespace {

constexpr std::uint64_t kSeed = 0x5eed5eedULL;
constexpr std::uint64_t kAbsent = std::uint64_t{1} << 40;  // keys from here on are never inserted
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

hash128 key(std::uint64_t i) { return hash_bytes(&i, sizeof i, kSeed); }

rolling_bloom_options options(std::int64_t window_ms, std::uint64_t capacity, double fpr,
                              std::uint32_t generations = 4) {
  rolling_bloom_options o;
  o.window_ms = window_ms;
  o.capacity = capacity;
  o.fpr = fpr;
  o.generations = generations;
  o.seed = kSeed;
  return o;
}

// Variance of the own false-positive rate of one blocked filter of `bits` bits holding n
// items, across filters: (E[h²] − E[h]²)/B with h = Π_i c_i/32 the rate of one block (see
// blocked_bloom_test.cpp for the derivation; Poisson(λ) block loads, conservative).
double filter_rate_variance(std::uint64_t bits, std::uint64_t n) {
  if (n == 0) return 0.0;
  const double p = blocked_bloom_filter::fpr(static_cast<double>(bits), static_cast<double>(n));
  const double blocks = static_cast<double>(bits / blocked_bloom_filter::kBlockBits);
  const double lambda = static_cast<double>(n) / blocks;
  const double q = 31.0 / 32.0;
  double second = 0.0;
  const int top = static_cast<int>(lambda + 40.0 * std::sqrt(lambda) + 100.0);
  for (int x = 0; x <= top; ++x) {
    const double pois = std::exp(-lambda + x * std::log(lambda) - std::lgamma(x + 1.0));
    const double ec = 32.0 * (1.0 - std::pow(q, x));
    const double ecc = 32.0 * 31.0 * (1.0 - 2.0 * std::pow(q, x) + std::pow(30.0 / 32.0, x));
    second += pois * std::pow((ec + ecc) / 1024.0, 8);
  }
  return (second - p * p) / blocks;
}

std::string reseal(std::string record) {
  const std::size_t body = record.size() - kTrailerSize;
  const std::uint64_t sum = XXH64(record.data(), body, 0);
  std::memcpy(record.data() + body, &sum, sizeof sum);
  return record;
}

// ---- construction -------------------------------------------------------------------------

TEST(RollingBloom, InvalidOptionsAreRejectedNamingTheOption) {
  const auto message = [](const rolling_bloom_options& o) -> std::string {
    try {
      rolling_bloom r(o);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no exception";
  };
  EXPECT_NE(message(options(0, 100, 0.01)).find("window_ms"), std::string::npos);
  EXPECT_NE(message(options(-5, 100, 0.01)).find("window_ms"), std::string::npos);
  EXPECT_NE(message(options(1000, 0, 0.01)).find("capacity"), std::string::npos);
  EXPECT_NE(message(options(1000, 100, 0.0)).find("fpr"), std::string::npos);
  EXPECT_NE(message(options(1000, 100, 1.0)).find("fpr"), std::string::npos);
  EXPECT_NE(message(options(1000, 100, std::nan(""))).find("fpr"), std::string::npos);
  EXPECT_NE(message(options(1000, 100, 0.01, 1)).find("generations"), std::string::npos);
  EXPECT_NE(message(options(1000, 100, 0.01, 65)).find("generations"), std::string::npos);
  EXPECT_NE(message(options(kMax, 100, 0.01, 2)).find("window_ms"), std::string::npos);
  EXPECT_NE(message(options(1000, std::uint64_t{1} << 50, 1e-9)).find("capacity"),
            std::string::npos);
  // The sizing helpers refuse the same, instead of dividing by G − 1 = 0.
  const auto sizing = [](const rolling_bloom_options& o) -> std::string {
    std::string what;
    for (const auto& f :
         {std::function<void()>([&] { (void)rolling_bloom::generation_capacity(o); }),
          std::function<void()>([&] { (void)rolling_bloom::generation_fpr(o); })}) {
      try {
        f();
        what += "no exception;";
      } catch (const std::invalid_argument& e) {
        what += std::string(e.what()) + ";";
      }
    }
    return what;
  };
  EXPECT_EQ(sizing(options(1000, 100, 0.01, 1)),
            "rolling_bloom: generations must be in [2, 64] (got 1);"
            "rolling_bloom: generations must be in [2, 64] (got 1);");
  EXPECT_EQ(sizing(options(1000, 100, 0.01, 0)),
            "rolling_bloom: generations must be in [2, 64] (got 0);"
            "rolling_bloom: generations must be in [2, 64] (got 0);");
  EXPECT_EQ(sizing(options(1000, 0, 2.0)),
            "rolling_bloom: capacity must be at least 1 (got 0);"
            "rolling_bloom: fpr must be in (0, 1) (got 2);");
  EXPECT_EQ(sizing(options(0, 100, 0.01)), "no exception;no exception;");  // no window needed
}

TEST(RollingBloom, GenerationPastTheLastIsOutOfRange) {
  rolling_bloom r(options(1000, 100, 0.01, 4));
  EXPECT_FALSE(r.test_and_insert("x", 0));
  EXPECT_TRUE(r.generation(0).contains("x"));
  EXPECT_FALSE(r.generation(3).contains("x"));  // the oldest, empty
  EXPECT_THROW((void)r.generation(4), std::out_of_range);
  EXPECT_THROW((void)r.generation(1000), std::out_of_range);
}

// S = ⌈window / (G − 1)⌉, c = ⌈capacity / (G − 1)⌉, fpr_g = 1 − (1 − fpr)^{1/G}.
TEST(RollingBloom, DerivedParametersFollowTheDesign) {
  const rolling_bloom r(options(1000, 3001, 0.01, 4));
  EXPECT_EQ(r.generations(), 4u);
  EXPECT_EQ(r.slice_ms(), 334);
  EXPECT_EQ(r.generation_capacity(), 1001u);
  EXPECT_EQ(r.guaranteed_horizon_ms(), 1002);
  EXPECT_GE(r.guaranteed_horizon_ms(), r.options().window_ms);
  EXPECT_NEAR(1.0 - std::pow(1.0 - r.generation_fpr(), 4), 0.01, 1e-15);
  EXPECT_EQ(r.target_fpr(), 0.01);
  EXPECT_EQ(r.seed(), kSeed);
  const std::uint64_t bits = blocked_bloom_filter::suggest_bits(1001, r.generation_fpr());
  for (std::size_t g = 0; g < r.generations(); ++g) {
    EXPECT_EQ(r.generation(g).bits(), bits);
    EXPECT_EQ(r.generation(g).seed(), kSeed);
  }
  EXPECT_EQ(r.size_bytes(), 4 * bits / 8);
  EXPECT_EQ(rolling_bloom(options(3000, 300, 0.01, 4)).slice_ms(), 1000);
  EXPECT_EQ(rolling_bloom(options(3000, 300, 0.01, 2)).slice_ms(), 3000);
}

TEST(RollingBloom, BeforeTheFirstTimeNothingIsLive) {
  const rolling_bloom r(options(1000, 100, 0.01));
  EXPECT_EQ(r.live_generations(), 0u);
  EXPECT_FALSE(r.contains(key(1)));
  EXPECT_EQ(r.effective_window_ms(12345), 0);
  EXPECT_EQ(r.estimated_items(), 0.0);
  EXPECT_EQ(r.estimated_fpr(), 0.0);
  EXPECT_EQ(r.fill_ratio(0), 0.0);
}

// ---- the horizon ----------------------------------------------------------------------------

// Time rotation only (capacity never reached), S = 334 ms, G = 4, horizon (G − 1)·S = 1002.
// A new key every millisecond for 6 s; at every t the key inserted at t − 1002 must be a
// duplicate, and every key of a slice that started G·S or more ago must be gone. With
// fpr = 1e-9 and about 6,000 queries that must answer "new" or "gone" (each new key's
// insertion, and a few dozen checks at the slice boundaries), a false positive has
// probability < 1e-5.
TEST(RollingBloom, ItemRepeatedWithinTheGuaranteedHorizonIsADuplicate) {
  rolling_bloom r(options(1000, 1000000, 1e-9));
  const std::int64_t s = r.slice_ms();
  const std::int64_t horizon = r.guaranteed_horizon_ms();
  ASSERT_EQ(horizon, 1002);
  for (std::int64_t t = 0; t <= 6000; ++t) {
    ASSERT_FALSE(r.test_and_insert(key(static_cast<std::uint64_t>(t)), t)) << t;
    if (t >= horizon) {
      ASSERT_TRUE(r.test_and_insert(key(static_cast<std::uint64_t>(t - horizon)), t)) << t;
    }
    // The slice [k·S, (k+1)·S) is dropped at (k + G)·S: at a boundary t = j·S the first
    // key still remembered is the one inserted at t − (G − 1)·S, the one before is gone.
    if (t % s == 0 && t >= 4 * s) {
      EXPECT_TRUE(r.contains(key(static_cast<std::uint64_t>(t - 3 * s)))) << t;
      EXPECT_FALSE(r.contains(key(static_cast<std::uint64_t>(t - 3 * s - 1)))) << t;
      EXPECT_FALSE(r.contains(key(static_cast<std::uint64_t>(t - 4 * s)))) << t;
    }
  }
  EXPECT_EQ(r.rotations_by_capacity(), 0u);
  EXPECT_EQ(r.rotations_by_time(), static_cast<std::uint64_t>(6000 / s));
}

// G·S = window + S when G − 1 divides the window: an item inserted at the start of a slice
// is a duplicate until G·S − 1 ms later and new again from G·S on.
TEST(RollingBloom, ItemSeenAfterWindowPlusSliceIsNewAgain) {
  rolling_bloom r(options(3000, 1000, 1e-9));
  ASSERT_EQ(r.slice_ms(), 1000);
  EXPECT_FALSE(r.test_and_insert("x", 0));
  EXPECT_TRUE(r.test_and_insert("x", 2000));
  EXPECT_TRUE(r.test_and_insert("x", 3000));  // the window itself
  EXPECT_TRUE(r.test_and_insert("x", 3999));
  EXPECT_FALSE(r.test_and_insert("x", 4000));  // window + slice: all its generations dropped
  EXPECT_TRUE(r.test_and_insert("x", 4001));   // and remembered again
  EXPECT_TRUE(r.contains("x"));
}

// Bursts: with e = now − t and f = items inserted after an item, the item is a duplicate
// whenever e / ((G − 1)·S) + f / ((G − 1)·c) < 1 (the header's guarantee). A random mix of
// idle gaps, steady traffic and bursts (fixed seed), checking every tracked item after every
// step. fpr = 1e-9 makes false positives among the ~37,000 insertions negligible (< 1e-4).
TEST(RollingBloom, BurstsKeepTheCombinedHorizonGuarantee) {
  rolling_bloom r(options(3000, 300, 1e-9));
  const double span_ms = 3.0 * static_cast<double>(r.slice_ms());                // (G−1)·S
  const double span_items = 3.0 * static_cast<double>(r.generation_capacity());  // (G−1)·c
  struct tracked {
    std::uint64_t key;
    std::int64_t t;
    std::uint64_t inserted_before;
  };
  std::deque<tracked> items;
  std::mt19937_64 rng(7);
  std::int64_t now = 0;
  std::uint64_t next_key = 0;
  std::uint64_t inserted = 0;
  std::uint64_t checks = 0;
  for (int step = 0; step < 4000; ++step) {
    const std::uint64_t kind = rng() % 10;
    now +=
        kind == 0 ? static_cast<std::int64_t>(rng() % 1500) : static_cast<std::int64_t>(rng() % 20);
    const std::uint64_t burst = kind == 1 ? 40 + rng() % 80 : rng() % 4;
    for (std::uint64_t i = 0; i < burst; ++i) {
      ASSERT_FALSE(r.test_and_insert(key(next_key), now));
      ++inserted;
      items.push_back({next_key++, now, inserted});
    }
    r.advance(now);
    while (!items.empty()) {
      const tracked& x = items.front();
      const double load = static_cast<double>(now - x.t) / span_ms +
                          static_cast<double>(inserted - x.inserted_before) / span_items;
      if (load < 1.0) break;  // newer items have a smaller load
      items.pop_front();
    }
    for (const tracked& x : items) {
      ++checks;
      ASSERT_TRUE(r.contains(key(x.key)))
          << "key " << x.key << " inserted at " << x.t << ", now " << now << ", "
          << inserted - x.inserted_before << " inserted since";
    }
  }
  EXPECT_GT(r.rotations_by_capacity(), 10u);
  EXPECT_GT(r.rotations_by_time(), 10u);
  EXPECT_GT(checks, 100000u);
}

// ---- bursts and the FPR -------------------------------------------------------------------

// 5 × capacity distinct items within one slice: generations rotate by capacity, each holds
// at most its share c, and a query for an absent item stays at or under the target.
// The rate expected from the actual loads is p = 1 − Π_g (1 − fpr(bits, n_g)) <= target
// (exact), and the measured rate over Q absent keys is within 5σ of it, with σ² the binomial
// p(1 − p)/Q plus the filter-to-filter variance Σ_g Var_g of the G independent generations.
TEST(RollingBloom, BurstRotatesByCapacityAndKeepsTheTargetFpr) {
  constexpr std::uint64_t kCapacity = 20000;
  constexpr double kTarget = 0.01;
  rolling_bloom r(options(3600000, kCapacity, kTarget));
  const std::uint64_t share = r.generation_capacity();
  ASSERT_EQ(share, 6667u);
  std::uint64_t first_seen = 0;
  for (std::uint64_t i = 0; i < 5 * kCapacity; ++i) {
    const auto now = static_cast<std::int64_t>(1000 + i / 100);  // 1 s to 2 s: one slice
    if (!r.test_and_insert(key(i), now)) ++first_seen;
  }
  EXPECT_EQ(r.rotations_by_time(), 0u);
  EXPECT_EQ(r.rotations_by_capacity(), first_seen / share);
  EXPECT_GE(r.rotations_by_capacity(), 14u);
  // The window shrank to the burst, far below the guaranteed (time-only) horizon.
  EXPECT_LT(r.effective_window_ms(2000), r.guaranteed_horizon_ms());

  double pass = 1.0;
  double variance = 0.0;
  for (std::size_t g = 0; g < r.generations(); ++g) {
    const std::uint64_t n = r.generation_items(g);
    EXPECT_LE(n, share);
    const std::uint64_t bits = r.generation(g).bits();
    pass *= 1.0 - blocked_bloom_filter::fpr(static_cast<double>(bits), static_cast<double>(n));
    variance += filter_rate_variance(bits, n);
  }
  const double expected = 1.0 - pass;
  EXPECT_LE(expected, kTarget);

  constexpr std::uint64_t kQueries = 300000;
  std::uint64_t hits = 0;
  for (std::uint64_t i = 0; i < kQueries; ++i) hits += r.contains(key(kAbsent + i)) ? 1 : 0;
  const double measured = static_cast<double>(hits) / kQueries;
  const double sigma = std::sqrt(expected * (1.0 - expected) / kQueries + variance);
  EXPECT_NEAR(measured, expected, 5 * sigma);
  EXPECT_LE(measured, kTarget + 5 * sigma);
}

// ---- time ---------------------------------------------------------------------------------

TEST(RollingBloom, SeveralElapsedSlicesRotateSeveralTimes) {
  rolling_bloom r(options(3000, 1000, 1e-9));
  EXPECT_FALSE(r.test_and_insert(key(1), 0));
  r.advance(2500);  // two slices ended: [0, 1000) and [1000, 2000)
  EXPECT_EQ(r.rotations_by_time(), 2u);
  EXPECT_EQ(r.live_generations(), 3u);
  EXPECT_EQ(r.generation_start_ms(0), 2000);
  EXPECT_EQ(r.generation_start_ms(1), 1000);
  EXPECT_EQ(r.generation_start_ms(2), 0);
  EXPECT_EQ(r.generation_items(2), 1u);
  EXPECT_TRUE(r.contains(key(1)));
  EXPECT_EQ(r.effective_window_ms(2500), 2500);
}

// A jump of many windows empties every generation at once (at most G rotations are
// performed), and the new generation 0 starts on the grid of slices.
TEST(RollingBloom, TimeJumpClearsEverything) {
  rolling_bloom r(options(3000, 100000, 1e-9));
  for (std::uint64_t i = 0; i < 100; ++i) {
    ASSERT_FALSE(r.test_and_insert(key(i), static_cast<std::int64_t>(i * 25)));
  }
  ASSERT_EQ(r.rotations_by_time(), 2u);  // at 1000 and 2000
  r.advance(2475 + 10 * 3000);
  EXPECT_EQ(r.rotations_by_time(), 2u + 4u);
  for (std::uint64_t i = 0; i < 100; ++i) EXPECT_FALSE(r.contains(key(i)));
  for (std::size_t g = 0; g < r.generations(); ++g) {
    EXPECT_EQ(r.fill_ratio(g), 0.0);
    EXPECT_EQ(r.generation_items(g), 0u);
  }
  EXPECT_EQ(r.estimated_items(), 0.0);
  EXPECT_EQ(r.generation_start_ms(0), 32000);
  EXPECT_EQ(r.generation_start_ms(3), 29000);
  EXPECT_EQ(r.effective_window_ms(32475), 3475);
  EXPECT_FALSE(r.test_and_insert(key(5), 32475));
  EXPECT_TRUE(r.contains(key(5)));
}

TEST(RollingBloom, OutOfOrderTimeNeverRotatesAndNeverThrows) {
  rolling_bloom r(options(3000, 1000, 1e-9));
  r.advance(10000);
  EXPECT_FALSE(r.test_and_insert(key(1), 10500));
  EXPECT_FALSE(r.test_and_insert(key(2), 5000));  // an event from the past
  EXPECT_TRUE(r.test_and_insert(key(1), 4000));
  EXPECT_TRUE(r.contains(key(2)));
  EXPECT_EQ(r.rotations_by_time(), 0u);
  EXPECT_EQ(r.generation_start_ms(0), 10000);
  EXPECT_EQ(r.effective_window_ms(5000), 0);  // never negative
  // Back to the present: the past item is kept like one inserted at the generation's start.
  EXPECT_TRUE(r.test_and_insert(key(2), 13999));
  EXPECT_FALSE(r.test_and_insert(key(2), 14000));

  // The extremes of the clock: no overflow (UBSan checks), a full jump empties the ring.
  rolling_bloom e(options(1000, 10, 0.01));
  EXPECT_FALSE(e.test_and_insert(key(1), kMin));
  EXPECT_FALSE(e.test_and_insert(key(1), kMax));
  EXPECT_EQ(e.rotations_by_time(), e.generations());
  EXPECT_GE(e.effective_window_ms(kMax), 0);
  EXPECT_LE(e.effective_window_ms(kMax), e.guaranteed_horizon_ms() + e.slice_ms());
  EXPECT_TRUE(e.test_and_insert(key(1), kMin));  // backwards again: nothing moves
  EXPECT_EQ(e.effective_window_ms(kMin), 0);
  for (std::uint64_t i = 2; i < 50; ++i) (void)e.test_and_insert(key(i), kMin);  // capacity
  EXPECT_GT(e.rotations_by_capacity(), 0u);
  for (std::size_t g = 1; g < e.live_generations(); ++g) {
    EXPECT_LE(e.generation_start_ms(g), e.generation_start_ms(g - 1));
  }
  // The widest jump with slices of 1 ms: 2^64 − 1 slices, still at most G rotations.
  for (const std::uint32_t g : {2u, 4u}) {
    rolling_bloom one(options(1, 10, 0.01, g));
    ASSERT_EQ(one.slice_ms(), 1);
    EXPECT_FALSE(one.test_and_insert(key(1), kMin));
    EXPECT_FALSE(one.test_and_insert(key(1), kMax));
    EXPECT_EQ(one.rotations_by_time(), g);
    EXPECT_EQ(one.generation_start_ms(0), kMax);
  }
}

// ---- introspection ------------------------------------------------------------------------

TEST(RollingBloom, IntrospectionDescribesTheGenerations) {
  rolling_bloom r(options(3000, 3000, 0.01));
  std::uint64_t next = 0;
  for (std::int64_t t = 0; t < 10000; t += 10) {
    for (int i = 0; i < 2; ++i) (void)r.test_and_insert(key(next++), t);
  }
  (void)r.test_and_insert("hello", 10000);
  EXPECT_TRUE(r.contains("hello"));
  EXPECT_TRUE(r.contains(hash_item("hello", kSeed)));
  // Steady time rotation: the ring reaches back between (G − 1)·S and G·S.
  EXPECT_EQ(r.live_generations(), 4u);
  EXPECT_GE(r.effective_window_ms(10000), 3000);
  EXPECT_LT(r.effective_window_ms(10000), 4000);
  EXPECT_EQ(r.rotations_by_capacity(), 0u);
  double items = 0.0;
  double pass = 1.0;
  for (std::size_t g = 0; g < r.generations(); ++g) {
    EXPECT_EQ(r.fill_ratio(g), r.generation(g).fill_ratio());
    items += r.generation(g).estimated_items();
    pass *= 1.0 - r.generation(g).estimated_fpr();
  }
  EXPECT_EQ(r.fill_ratio(r.generations()), 0.0);
  EXPECT_EQ(r.generation_items(r.generations()), 0u);
  EXPECT_DOUBLE_EQ(r.estimated_items(), items);
  EXPECT_NEAR(r.estimated_fpr(), 1.0 - pass, 1e-15);
  EXPECT_GT(r.estimated_fpr(), 0.0);
  EXPECT_LT(r.estimated_fpr(), r.target_fpr());  // 200 items per slice, share 1000
  EXPECT_GT(r.fill_ratio(1), 0.0);
  EXPECT_EQ(r.generation_items(1), 200u);
}

// ---- layout -------------------------------------------------------------------------------

// The generations share one interleaved array; each must still hold exactly the bits of a
// blocked filter of the same size and seed that took its items. Through rotations by time
// and by capacity, every first-seen item is recorded against the generation that took it
// (generation 0 at the time), and each generation is compared, bit for bit, with a filter
// built from its record.
TEST(RollingBloom, EachGenerationHoldsTheBitsOfABlockedFilterOfItsItems) {
  for (const std::uint32_t generations : {2u, 3u, 4u, 7u}) {
    rolling_bloom r(options(3000, 300, 0.01, generations));
    std::deque<std::vector<hash128>> taken(1);  // taken[g]: the items of generation g
    std::uint64_t next = 0;
    std::int64_t now = 0;
    for (int step = 0; step < 4000; ++step) {
      now += step % 500 == 0 ? 3100 : 1;  // rotations by time (S <= 3000) among those by capacity
      const hash128 h = key(step % 4 == 0 && next > 0 ? next / 2 : next++);
      const std::uint64_t by_time = r.rotations_by_time();
      r.advance(now);  // rotations by time come before the insert
      for (std::uint64_t t = by_time; t < r.rotations_by_time(); ++t) taken.emplace_front();
      const std::uint64_t by_capacity = r.rotations_by_capacity();
      if (!r.test_and_insert(h, now)) taken.front().push_back(h);
      if (r.rotations_by_capacity() > by_capacity) taken.emplace_front();  // after it
      while (taken.size() > generations) taken.pop_back();
    }
    ASSERT_GT(r.rotations_by_capacity(), 0u);
    ASSERT_GT(r.rotations_by_time(), 0u);
    for (std::size_t g = 0; g < r.generations(); ++g) {
      blocked_bloom_filter expected(r.generation(g).bits(), kSeed);
      if (g < taken.size()) {
        for (const hash128& h : taken[g]) expected.insert(h);
      }
      EXPECT_TRUE(r.generation(g) == expected) << generations << " generations, generation " << g;
      EXPECT_EQ(r.fill_ratio(g), expected.fill_ratio()) << g;
    }
  }
}

// The portable probes and the AVX2 ones (where the CPU has it) give the same answers and
// the same state, byte for byte, through rotations.
TEST(RollingBloom, ScalarAndAutomaticPathsAgree) {
  rolling_bloom automatic(options(3000, 300, 0.01));
  rolling_bloom scalar(options(3000, 300, 0.01), simd_path::scalar);
  std::uint64_t next = 0;
  for (std::int64_t t = 0; t < 20000; t += 2) {
    const hash128 h = key(t % 6 == 0 && next > 0 ? next / 2 : next++);
    ASSERT_EQ(automatic.test_and_insert(h, t), scalar.test_and_insert(h, t)) << t;
    if (t % 1000 == 0) {
      for (std::uint64_t i = 0; i < 50; ++i) {
        ASSERT_EQ(automatic.contains(key(i * 37)), scalar.contains(key(i * 37)));
        ASSERT_EQ(automatic.contains(key(kAbsent + i)), scalar.contains(key(kAbsent + i)));
      }
    }
  }
  EXPECT_GT(automatic.rotations_by_capacity(), 0u);
  EXPECT_EQ(automatic.serialize(), scalar.serialize());
}

// ---- serialization ------------------------------------------------------------------------

void expect_same_state(const rolling_bloom& a, const rolling_bloom& b) {
  EXPECT_EQ(a.options().window_ms, b.options().window_ms);
  EXPECT_EQ(a.options().capacity, b.options().capacity);
  EXPECT_EQ(a.options().fpr, b.options().fpr);
  EXPECT_EQ(a.options().generations, b.options().generations);
  EXPECT_EQ(a.seed(), b.seed());
  EXPECT_EQ(a.live_generations(), b.live_generations());
  EXPECT_EQ(a.rotations_by_time(), b.rotations_by_time());
  EXPECT_EQ(a.rotations_by_capacity(), b.rotations_by_capacity());
  for (std::size_t g = 0; g < a.generations(); ++g) {
    EXPECT_TRUE(a.generation(g) == b.generation(g)) << g;
    EXPECT_EQ(a.generation_items(g), b.generation_items(g)) << g;
    EXPECT_EQ(a.generation_start_ms(g), b.generation_start_ms(g)) << g;
  }
}

TEST(RollingBloom, SerializationRoundTripPreservesAnswersAndRotationState) {
  const rolling_bloom fresh(options(3000, 300, 0.01));
  const rolling_bloom fresh_back = rolling_bloom::deserialize(fresh.serialize());
  expect_same_state(fresh, fresh_back);

  rolling_bloom r(options(3000, 300, 0.01));
  std::uint64_t next = 0;
  for (std::int64_t t = 0; t < 5000; t += 10) (void)r.test_and_insert(key(next++), t);
  for (int i = 0; i < 250; ++i) (void)r.test_and_insert(key(next++), 5000);  // a burst
  ASSERT_GT(r.rotations_by_time(), 0u);
  ASSERT_GT(r.rotations_by_capacity(), 0u);

  rolling_bloom back = rolling_bloom::deserialize(r.serialize());
  expect_same_state(r, back);
  // Both go on identically: old keys, new keys, and time that rotates again.
  for (std::uint64_t i = 0; i < 3000; ++i) {
    const auto now = static_cast<std::int64_t>(5000 + i);
    const hash128 h = key(i % 2 == 0 ? i / 2 : next + i);
    ASSERT_EQ(r.test_and_insert(h, now), back.test_and_insert(h, now)) << i;
  }
  expect_same_state(r, back);
  EXPECT_EQ(r.serialize(), back.serialize());
  // serialize_to writes the same record after what the string holds.
  std::string appended = "before";
  r.serialize_to(appended);
  EXPECT_EQ(appended, "before" + r.serialize());
}

// prefetch() is a hint: on a filter before its first time, and on one whose every
// generation is live and filled by time and by bursts, it leaves the state byte for byte as
// it was, and the answers that follow are those of an untouched copy.
TEST(RollingBloom, PrefetchChangesNothing) {
  rolling_bloom empty(options(3000, 300, 0.01));
  const std::string empty_bytes = empty.serialize();
  for (std::uint64_t i = 0; i < 100; ++i) empty.prefetch(key(i));
  EXPECT_EQ(empty.serialize(), empty_bytes);
  EXPECT_EQ(empty.live_generations(), 0u);

  rolling_bloom r(options(3000, 300, 0.01));
  std::uint64_t next = 0;
  for (std::int64_t t = 0; t < 5000; t += 10) (void)r.test_and_insert(key(next++), t);
  for (int i = 0; i < 250; ++i) (void)r.test_and_insert(key(next++), 5000);
  ASSERT_EQ(r.live_generations(), r.generations());
  rolling_bloom twin = rolling_bloom::deserialize(r.serialize());
  const std::string bytes = r.serialize();
  for (std::uint64_t i = 0; i < next + 100; ++i) r.prefetch(key(i));
  EXPECT_EQ(r.serialize(), bytes);
  for (std::uint64_t i = 0; i < 1000; ++i) {
    const hash128 h = key(i % 2 == 0 ? next - 1 - i / 2 : kAbsent + i);
    r.prefetch(h);
    ASSERT_EQ(r.test_and_insert(h, 5000), twin.test_and_insert(h, 5000)) << i;
  }
  EXPECT_EQ(r.serialize(), twin.serialize());
}

// The batch call is the loop of single calls at the same time: same answers and state,
// through rotations by time (between batches) and by capacity (inside a batch).
TEST(RollingBloom, BatchTestAndInsertEqualsSingleCalls) {
  rolling_bloom single(options(3000, 300, 0.01));
  rolling_bloom batched(options(3000, 300, 0.01));
  std::uint64_t next = 0;
  std::int64_t now = 0;
  for (const std::size_t length : {0, 3, 16, 40, 250, 600, 7}) {
    std::vector<hash128> hashes;
    for (std::size_t i = 0; i < length; ++i) {
      hashes.push_back(key(i % 3 == 0 && next > 0 ? next / 2 : next++));
    }
    std::unique_ptr<bool[]> present(new bool[length]);
    batched.test_and_insert(hashes, now, std::span<bool>(present.get(), length));
    for (std::size_t i = 0; i < length; ++i) {
      ASSERT_EQ(present[i], single.test_and_insert(hashes[i], now)) << length << " " << i;
    }
    ASSERT_EQ(batched.serialize(), single.serialize()) << length;
    now += 700;
  }
  EXPECT_GT(single.rotations_by_time(), 0u);
  EXPECT_GT(single.rotations_by_capacity(), 0u);
}

TEST(RollingBloom, CorruptTruncatedOrForeignInputIsAFormatError) {
  rolling_bloom r(options(3000, 300, 0.01));
  for (std::uint64_t i = 0; i < 500; ++i)
    (void)r.test_and_insert(key(i), static_cast<std::int64_t>(i * 9));
  const std::string rec = r.serialize();

  std::string flipped = rec;
  flipped[rec.size() / 2] ^= 0x01;
  EXPECT_THROW((void)rolling_bloom::deserialize(flipped), format_error);
  EXPECT_THROW((void)rolling_bloom::deserialize(rec.substr(0, rec.size() - 1)), format_error);
  EXPECT_THROW((void)rolling_bloom::deserialize(rec.substr(0, 40)), format_error);
  EXPECT_THROW((void)rolling_bloom::deserialize(""), format_error);
  EXPECT_THROW((void)rolling_bloom::deserialize(r.generation(0).serialize()), format_error);

  // Valid checksums over inconsistent fields. Payload offsets: window 0, capacity 8, fpr 16,
  // generations 24, newest 28, live 32, rotations 36 and 44, slot entries from 52, each
  // (start, items, nested record length, nested record).
  const auto patched = [&](const std::string& base, std::size_t offset, const void* value,
                           std::size_t size) {
    std::string p = base;
    std::memcpy(p.data() + kHeaderSize + offset, value, size);
    return reseal(p);
  };
  const std::int64_t zero_window = 0;
  const std::uint64_t huge_capacity = std::uint64_t{1} << 50;
  const std::uint64_t other_capacity = 30000;
  const double bad_fpr = 1.5;
  const std::uint32_t one = 1;
  const std::uint32_t five = 5;
  const std::uint64_t too_many = r.generation_capacity() + 1;
  EXPECT_THROW((void)rolling_bloom::deserialize(patched(rec, 0, &zero_window, 8)), format_error);
  EXPECT_THROW((void)rolling_bloom::deserialize(patched(rec, 8, &huge_capacity, 8)), format_error);
  EXPECT_THROW((void)rolling_bloom::deserialize(patched(rec, 8, &other_capacity, 8)), format_error);
  EXPECT_THROW((void)rolling_bloom::deserialize(patched(rec, 16, &bad_fpr, 8)), format_error);
  EXPECT_THROW((void)rolling_bloom::deserialize(patched(rec, 24, &one, 4)), format_error);
  EXPECT_THROW((void)rolling_bloom::deserialize(patched(rec, 28, &five, 4)), format_error);
  EXPECT_THROW((void)rolling_bloom::deserialize(patched(rec, 32, &five, 4)), format_error);
  EXPECT_THROW((void)rolling_bloom::deserialize(patched(rec, 52 + 8, &too_many, 8)), format_error);
  // A start time after the newer generation's.
  const std::uint32_t newest = [&] {
    std::uint32_t v = 0;
    std::memcpy(&v, rec.data() + kHeaderSize + 28, 4);
    return v;
  }();
  const std::size_t entry = (rec.size() - kHeaderSize - kTrailerSize - 52) / 4;
  const std::size_t oldest_slot = (newest + 3) % 4;
  const std::int64_t late = 1000000;
  EXPECT_THROW((void)rolling_bloom::deserialize(patched(rec, 52 + oldest_slot * entry, &late, 8)),
               format_error);
  // Rotations counted although the clock never started.
  const std::string fresh = rolling_bloom(options(3000, 300, 0.01)).serialize();
  const std::uint64_t seven = 7;
  EXPECT_THROW((void)rolling_bloom::deserialize(patched(fresh, 36, &seven, 8)), format_error);
  // The unpatched record still reads (the patch helper itself is sound).
  EXPECT_NO_THROW((void)rolling_bloom::deserialize(reseal(rec)));
}

// An insert is counted only when it sets at least one new bit, and sets at most 8: a
// generation's set bits b and items n have n ≤ b ≤ 8n. One item with its 8 bits, recorded as
// 999 items, is refused (slot entries from payload offset 52: start, items, nested record).
TEST(RollingBloom, GenerationClaimingMoreItemsThanSetBitsIsRefused) {
  rolling_bloom r(options(3000, 30000, 0.01));
  ASSERT_GT(r.generation_capacity(), 999u);
  ASSERT_FALSE(r.test_and_insert(key(0), 0));
  ASSERT_EQ(r.generation_items(0), 1u);
  ASSERT_EQ(r.generation(0).bits_set(), 8u);
  const std::string rec = r.serialize();
  std::uint32_t newest = 0;
  std::memcpy(&newest, rec.data() + kHeaderSize + 28, 4);
  const std::size_t entry = (rec.size() - kHeaderSize - kTrailerSize - 52) / 4;
  const std::size_t items_at = kHeaderSize + 52 + newest * entry + 8;
  std::uint64_t items = 0;
  std::memcpy(&items, rec.data() + items_at, 8);
  ASSERT_EQ(items, 1u);

  const auto with_items = [&](std::uint64_t n) {
    std::string p = rec;
    std::memcpy(p.data() + items_at, &n, sizeof n);
    return reseal(p);
  };
  EXPECT_NO_THROW((void)rolling_bloom::deserialize(with_items(1)));
  EXPECT_NO_THROW((void)rolling_bloom::deserialize(with_items(8)));
  for (const std::uint64_t n : {std::uint64_t{0}, std::uint64_t{9}, std::uint64_t{999}}) {
    const std::string why = "generation in slot " + std::to_string(newest) +
                            ": 8 set bits do not fit " + std::to_string(n) + " items";
    EXPECT_THAT([&] { (void)rolling_bloom::deserialize(with_items(n)); },
                testing::ThrowsMessage<format_error>(testing::HasSubstr(why)))
        << n;
  }
}

}  // namespace
}  // namespace sketch
