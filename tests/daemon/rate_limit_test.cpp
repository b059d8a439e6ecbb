#include "sketchd/util/rate_limit.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace sketchd {
namespace {

using namespace std::chrono_literals;
using clock_type = log_rate_limit::clock;

const clock_type::time_point t0{std::chrono::hours(1)};

TEST(LogRateLimit, TheFirstLineIsWrittenAndTheNextOnesOfItsIntervalAreHeldBack) {
  log_rate_limit limit(10s);
  EXPECT_TRUE(limit.admit(t0, "a"));
  EXPECT_FALSE(limit.admit(t0 + 1s, "b"));
  EXPECT_FALSE(limit.admit(t0 + 2s, "c"));
  EXPECT_EQ(limit.take_held(t0 + 9s), std::nullopt) << "the interval runs on";
  const auto held = limit.take_held(t0 + 10s);
  ASSERT_TRUE(held);
  EXPECT_EQ(held->count, 2U);
  EXPECT_EQ(held->last, "c");
  EXPECT_EQ(held->over, 10s);
  EXPECT_EQ(held->ago, 8s);
  EXPECT_EQ(limit.take_held(t0 + 30s), std::nullopt) << "told once";
}

TEST(LogRateLimit, ALineAfterAQuietIntervalIsWrittenAtOnce) {
  log_rate_limit limit(10s);
  EXPECT_TRUE(limit.admit(t0));
  EXPECT_TRUE(limit.admit(t0 + 10s));
  EXPECT_FALSE(limit.admit(t0 + 19s));
  EXPECT_TRUE(limit.take_held(t0 + 20s));
  // The line that told them is the new interval's first.
  EXPECT_FALSE(limit.admit(t0 + 25s));
  EXPECT_TRUE(limit.take_held(t0 + 30s));
}

TEST(LogRateLimit, LinesHeldBackAreToldBeforeTheNextIsWritten) {
  log_rate_limit limit(10s);
  EXPECT_TRUE(limit.admit(t0));
  EXPECT_FALSE(limit.admit(t0 + 1s));
  // The interval has passed, but a line is held back: it must be told first.
  EXPECT_FALSE(limit.admit(t0 + 11s, "late"));
  const auto held = limit.take_held(t0 + 11s);
  ASSERT_TRUE(held);
  EXPECT_EQ(held->count, 2U);
  EXPECT_EQ(held->last, "late");
}

TEST(LogRateLimit, ABurstOfLinesIsWrittenInEachInterval) {
  log_rate_limit limit(10s, 3);
  EXPECT_TRUE(limit.admit(t0));
  EXPECT_TRUE(limit.admit(t0 + 1s));
  EXPECT_TRUE(limit.admit(t0 + 2s));
  EXPECT_FALSE(limit.admit(t0 + 3s));
  EXPECT_FALSE(limit.admit(t0 + 4s));
  EXPECT_EQ(limit.take_held(t0 + 10s)->count, 2U);
  // The line that told them, and two more.
  EXPECT_TRUE(limit.admit(t0 + 10s));
  EXPECT_TRUE(limit.admit(t0 + 10s));
  EXPECT_FALSE(limit.admit(t0 + 10s));
}

TEST(LogRateLimit, HeldLinesCanBeToldBeforeTheIntervalEnds) {
  log_rate_limit limit(10s);
  EXPECT_TRUE(limit.admit(t0));
  EXPECT_FALSE(limit.admit(t0 + 1s));
  const auto held = limit.take_held(t0 + 2s, /*now_anyway=*/true);
  ASSERT_TRUE(held);
  EXPECT_EQ(held->count, 1U);
  EXPECT_EQ(limit.take_held(t0 + 2s, true), std::nullopt);
}

TEST(KeyedRateLimit, EachKeyIsLimitedApartAndItsNextLineCountsWhatWasHeld) {
  keyed_rate_limit limit(10s);
  EXPECT_EQ(limit.admit("a", t0, "x"), 0U);
  EXPECT_EQ(limit.admit("b", t0, "x"), 0U);
  EXPECT_EQ(limit.admit("a", t0 + 1s, "y"), std::nullopt);
  EXPECT_EQ(limit.admit("a", t0 + 2s, "z"), std::nullopt);
  EXPECT_EQ(limit.admit("a", t0 + 10s, "w"), 2U);
  EXPECT_EQ(limit.admit("a", t0 + 11s, "v"), std::nullopt);
  EXPECT_EQ(limit.admit("a", t0 + 20s, "w"), 1U);
}

TEST(KeyedRateLimit, OverdueLinesAreToldWithTheirKey) {
  keyed_rate_limit limit(10s);
  ASSERT_TRUE(limit.admit("a", t0, "x"));
  ASSERT_FALSE(limit.admit("a", t0 + 3s, "last"));
  std::vector<std::string> told;
  limit.take_overdue(t0 + 5s, [&](const std::string& key, const log_rate_limit::held_back&) {
    told.push_back(key);
  });
  EXPECT_TRUE(told.empty());
  limit.take_overdue(t0 + 10s, [&](const std::string& key, const log_rate_limit::held_back& h) {
    told.push_back(key + ":" + h.last + ":" + std::to_string(h.count));
  });
  EXPECT_EQ(told, std::vector<std::string>{"a:last:1"});
}

}  // namespace
}  // namespace sketchd
