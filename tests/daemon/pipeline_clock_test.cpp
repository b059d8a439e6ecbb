// pipeline_clock alone: every time is given to it, so these replay runs of minutes or hours
// at once (pipeline_test.cpp checks the windows the pipeline slides by it).
#include <gtest/gtest.h>

#include "sketchd/pipeline/clock.h"

namespace sketchd {
namespace {

constexpr std::int64_t kWall = 1'790'000'000'000;
constexpr std::int64_t kHold = pipeline_clock::kHoldStillMs;

TEST(PipelineClock, TheWallClockIsTheWallTime) {
  pipeline_clock c(clock_kind::wall, 0);
  EXPECT_EQ(c.end_batch(kWall), kWall);
  EXPECT_EQ(c.time_of(kWall - 3'600'000, kWall + 5), kWall + 5);  // the event time is ignored
  EXPECT_EQ(c.time_ms(), kWall + 5);
  EXPECT_EQ(c.end_batch(kWall + 1000), kWall + 1000);
}

TEST(PipelineClock, HoldsStillUntilTheFirstItem) {
  pipeline_clock c(clock_kind::event, 0);
  EXPECT_EQ(c.end_batch(kWall), 0);  // no time yet: the windows do not move
  EXPECT_EQ(c.end_batch(kWall + 10'000), 0);
  const std::int64_t t = kWall - 60'000;  // a backlog
  EXPECT_EQ(c.time_of(t, kWall + 10'000), t);
  EXPECT_EQ(c.time_ms(), t);
  EXPECT_EQ(c.wall_ms(), kWall + 10'000);
  EXPECT_EQ(c.end_batch(kWall + 10'000), t);
}

TEST(PipelineClock, AnIdleEventClockSlidesByTheWallTimeSinceItsLastItem) {
  pipeline_clock c(clock_kind::event, 0);
  const std::int64_t t = kWall - 60'000;
  EXPECT_EQ(c.time_of(t, kWall), t);
  EXPECT_EQ(c.end_batch(kWall + 5'000), t + 5'000);
  EXPECT_EQ(c.time_ms(), t);  // the newest event time is still t
  EXPECT_EQ(c.now_ms(), t + 5'000);
  // A later item moves the reference: the idle slide counts from it.
  EXPECT_EQ(c.time_of(t + 1'000, kWall + 6'000), t + 1'000);
  EXPECT_EQ(c.end_batch(kWall + 7'000), t + 2'000);
  EXPECT_EQ(c.now_ms(), t + 5'000);  // the windows never slide back
}

TEST(PipelineClock, ALateItemCountsAtTheClock) {
  pipeline_clock c(clock_kind::event, 0);
  const std::int64_t t = kWall - 60'000;
  EXPECT_EQ(c.time_of(t, kWall), t);
  EXPECT_EQ(c.time_of(t - 30'000, kWall), t);
  EXPECT_EQ(c.time_ms(), t);
}

TEST(PipelineClock, AnItemWithoutAUsableTimestampCountsAtTheClockAndDoesNotMoveIt) {
  pipeline_clock c(clock_kind::event, 0);
  // Before any time, such an item takes the wall time, which becomes the clock.
  EXPECT_EQ(c.time_of(-1, kWall), kWall);
  EXPECT_EQ(c.time_ms(), kWall);
  pipeline_clock d(clock_kind::event, 0);
  const std::int64_t t = kWall - 7'200'000;
  EXPECT_EQ(d.time_of(t, kWall), t);
  EXPECT_EQ(d.time_of(0, kWall + 1'000), t + 1'000);  // none: the clock plus the wall time since
  // Further ahead of the wall time than kMaxClockSkewMs: as if it had none.
  const std::int64_t ahead = kWall + 2'000 + pipeline_clock::kMaxClockSkewMs + 1;
  EXPECT_EQ(d.time_of(ahead, kWall + 2'000), t + 2'000);
  EXPECT_EQ(d.time_ms(), t);
  // Within the skew it is an event time like any other.
  const std::int64_t near = kWall + 3'000 + pipeline_clock::kMaxClockSkewMs;
  EXPECT_EQ(d.time_of(near, kWall + 3'000), near);
  EXPECT_EQ(d.time_ms(), near);
}

TEST(PipelineClock, ARestoredClockHoldsStillForAtMostTheHoldTime) {
  pipeline_clock c(clock_kind::event, 0);
  const std::int64_t t = kWall - 3'600'000;  // saved an hour ago
  c.restore(t, t, t);
  EXPECT_EQ(c.end_batch(kWall), t);
  EXPECT_EQ(c.end_batch(kWall + kHold - 1), t);
  // Then the stream is taken as idle: the downtime counts, as if sketchd had been running.
  EXPECT_EQ(c.end_batch(kWall + kHold), t + (kWall + kHold - t));
}

TEST(PipelineClock, ARestoredClockHoldsStillUntilTheAssignmentAndTheHoldTimeAfter) {
  pipeline_clock c(clock_kind::event, 0);
  const std::int64_t t = kWall - 3'600'000;
  c.hold_until_assigned();
  c.restore(t, t, t);
  EXPECT_EQ(c.end_batch(kWall), t);
  EXPECT_EQ(c.end_batch(kWall + 5 * kHold), t);  // the group is still joining
  c.input_assigned();
  EXPECT_EQ(c.end_batch(kWall + 6 * kHold), t);  // the hold time counts from here
  EXPECT_EQ(c.end_batch(kWall + 7 * kHold - 1), t);
  EXPECT_GT(c.end_batch(kWall + 7 * kHold), t);
}

TEST(PipelineClock, ARestoredClockSlidesFromTheFirstItemReadAgain) {
  pipeline_clock c(clock_kind::event, 0);
  const std::int64_t t = kWall - 3'600'000;
  c.restore(t, t, t);
  EXPECT_EQ(c.time_of(t - 1'000, kWall), t);  // older than the clock: counted at it
  EXPECT_EQ(c.time_ms(), t);
  // Live from that item on: an idle stream slides by the wall time since it, not since the
  // snapshot.
  EXPECT_EQ(c.end_batch(kWall + 4'000), t + 4'000);
}

TEST(PipelineClock, ARestoredClockCountsAnItemWithoutATimestampAtTheRestoredTime) {
  pipeline_clock c(clock_kind::event, 0);
  const std::int64_t t = kWall - 3'600'000;
  c.restore(t, t - 5, t);              // the wall time of another run
  EXPECT_EQ(c.time_of(-1, kWall), t);  // not t plus the hour of downtime
  EXPECT_EQ(c.time_of(-1, kWall + 4'000), t + 4'000);
  EXPECT_EQ(c.end_batch(kWall + 5'000), t + 5'000);
  EXPECT_EQ(c.time_ms(), t);
}

TEST(PipelineClock, ARestoreKeepsWhereTheWindowsHadBeenSlid) {
  pipeline_clock c(clock_kind::event, 0);
  const std::int64_t t = kWall - 3'600'000;
  c.restore(t, t, t + 60'000);  // an idle stream had slid them a minute past the last item
  EXPECT_EQ(c.time_ms(), t);
  EXPECT_EQ(c.now_ms(), t + 60'000);
}

TEST(PipelineClock, ATakeOverLeavesTheWindowIncompleteForTheGivenTime) {
  pipeline_clock c(clock_kind::wall, 12'000);
  EXPECT_EQ(c.end_batch(kWall), kWall);
  EXPECT_EQ(c.incomplete_ms(), 0);
  c.take_over();
  EXPECT_EQ(c.incomplete_ms(), 12'000);  // pending: counted from the next batch
  EXPECT_EQ(c.end_batch(kWall + 2'000), kWall + 2'000);
  EXPECT_EQ(c.incomplete_ms(), 12'000);
  EXPECT_EQ(c.end_batch(kWall + 9'000), kWall + 9'000);
  EXPECT_EQ(c.incomplete_ms(), 5'000);
  EXPECT_EQ(c.end_batch(kWall + 14'000), kWall + 14'000);
  EXPECT_EQ(c.incomplete_ms(), 0);
  // A second take-over while the first is still incomplete extends it, never shortens it.
  c.take_over();
  EXPECT_EQ(c.end_batch(kWall + 15'000), kWall + 15'000);
  EXPECT_EQ(c.incomplete_ms(), 12'000);
}

TEST(PipelineClock, ATakeOverWaitsForAnEventClockToHaveATime) {
  pipeline_clock c(clock_kind::event, 12'000);
  c.take_over();
  EXPECT_EQ(c.end_batch(kWall), 0);
  EXPECT_EQ(c.incomplete_ms(), 12'000);  // still pending
  const std::int64_t t = kWall - 60'000;
  EXPECT_EQ(c.time_of(t, kWall + 1'000), t);
  EXPECT_EQ(c.end_batch(kWall + 1'000), t);
  EXPECT_EQ(c.incomplete_ms(), 12'000);
  EXPECT_EQ(c.time_of(t + 4'000, kWall + 2'000), t + 4'000);
  EXPECT_EQ(c.end_batch(kWall + 2'000), t + 4'000);
  EXPECT_EQ(c.incomplete_ms(), 8'000);
}

}  // namespace
}  // namespace sketchd
