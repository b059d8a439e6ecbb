// The state positions of the processor's partitions and the rules of a rebalance and a
// restart that move them, without Kafka and at injected times.
#include "sketchd/processor/partition_positions.h"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <utility>
#include <vector>

namespace sketchd {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;

constexpr kafka::topic_partition kP0{0, 0};
constexpr kafka::topic_partition kP1{0, 1};
constexpr std::int64_t kNow = 1'763'841'600'000;

// (partition, position) of every partition positions() gives.
std::vector<std::pair<std::int32_t, std::int64_t>> of(const partition_positions& p) {
  std::vector<std::pair<std::int32_t, std::int64_t>> out;
  for (const auto& o : p.positions()) out.emplace_back(o.partition, o.next_offset);
  return out;
}

using pairs = std::vector<std::pair<std::int32_t, std::int64_t>>;

TEST(PartitionPositions, AnAssignedPartitionHasAPositionOnceItsStartOrADeliveryIsKnown) {
  partition_positions p;
  p.assignment_begins();
  (void)p.assigned(kP0, std::nullopt);
  EXPECT_TRUE(of(p).empty());
  p.start_known(kP0, 40);
  EXPECT_EQ(of(p), (pairs{{0, 40}}));
  EXPECT_TRUE(p.delivered(0, 0, 45).store);
  EXPECT_EQ(of(p), (pairs{{0, 45}}));
  p.start_known(kP0, 40);  // late: the delivered position stays
  EXPECT_EQ(of(p), (pairs{{0, 45}}));
  p.start_known(kP1, 3);  // not assigned: nothing
  EXPECT_EQ(of(p), (pairs{{0, 45}}));
}

TEST(PartitionPositions, TheRestoredPositionsAreTheInstancesUntilTheFirstAssignment) {
  partition_positions p;
  p.restore({{0, 0, 100}, {0, 1, 200}}, kNow);
  EXPECT_EQ(of(p), (pairs{{0, 100}, {1, 200}}));
  p.assignment_begins();
  (void)p.assigned(kP0, p.take_restored(kP0));
  EXPECT_EQ(of(p), (pairs{{0, 100}}));  // partition 1 went to another member
}

TEST(PartitionPositions, AnEmptyAssignmentEndsTheRestoredPositions) {
  partition_positions p;
  p.restore({{0, 0, 100}}, kNow);
  p.assignment_begins();
  EXPECT_TRUE(of(p).empty());
}

TEST(PartitionPositions, ARestoredPositionIsTakenOnce) {
  partition_positions p;
  p.restore({{0, 0, 100}}, kNow);
  EXPECT_EQ(p.take_restored(kP0), 100);
  EXPECT_EQ(p.take_restored(kP0), std::nullopt);
  EXPECT_EQ(p.take_restored(kP1), std::nullopt);
}

TEST(PartitionPositions,
     APartitionWithoutASnapshotPositionIsTakenOverUnlessItReturnsInTheSameRebalance) {
  partition_positions p;
  p.assignment_begins();
  EXPECT_TRUE(p.assigned(kP0, std::nullopt));
  EXPECT_FALSE(p.assigned(kP1, 7));  // at the snapshot's position
  p.revoked(kP0);
  p.assignment_begins();
  EXPECT_FALSE(p.assigned(kP0, std::nullopt));  // revoked and assigned in one rebalance
  p.revoked(kP0);
  p.assignment_begins();  // the rebalance ends without it
  p.assignment_begins();  // a later one gives it back
  EXPECT_TRUE(p.assigned(kP0, std::nullopt));
}

TEST(PartitionPositions, ARevokedPartitionHasNoPositionAndItsLateDeliveriesAreNotStored) {
  partition_positions p;
  p.assignment_begins();
  (void)p.assigned(kP0, 10);
  p.revoked(kP0);
  EXPECT_TRUE(of(p).empty());
  EXPECT_FALSE(p.delivered(0, 0, 12).store);
  EXPECT_TRUE(of(p).empty());
}

TEST(PartitionPositions, AResetSlotsOffsetIsNotStored) {
  partition_positions p;
  p.assignment_begins();
  (void)p.assigned(kP0, 10);
  EXPECT_FALSE(p.delivered(0, 0, -1).store);
  EXPECT_EQ(of(p), (pairs{{0, 10}}));
}

TEST(PartitionPositions, ASnapshotYoungerThanTheWindowsIsReadAgainUpToTheCommittedOffset) {
  partition_positions p;
  p.restore({{0, 0, 100}}, kNow - 10 * 60 * 1000);
  p.assignment_begins();
  (void)p.assigned(kP0, p.take_restored(kP0));
  EXPECT_EQ(p.snapshot_age(kP0, kNow), minutes(10));
  EXPECT_TRUE(p.start_behind_commit(kP0, 105, minutes(60), kNow));
  EXPECT_TRUE(p.replaying(0, 0, 100));
  EXPECT_TRUE(p.replaying(0, 0, 104));
  EXPECT_FALSE(p.replaying(0, 0, 105));
  EXPECT_FALSE(p.replaying(0, 1, 100));
  // Below the committed offset: the position moves, nothing is stored.
  const auto below = p.delivered(0, 0, 103);
  EXPECT_FALSE(below.store);
  EXPECT_EQ(of(p), (pairs{{0, 103}}));
  // Reaching it: stored, and the reading again ends there.
  const auto reached = p.delivered(0, 0, 106);
  EXPECT_TRUE(reached.store);
  EXPECT_EQ(reached.read_again_ended_at, 105);
  EXPECT_FALSE(p.replaying(0, 0, 104));
  const auto after = p.delivered(0, 0, 110);
  EXPECT_TRUE(after.store);
  EXPECT_EQ(after.read_again_ended_at, std::nullopt);
}

// A partition filled from its log: its position is the fill's first offset (a snapshot
// written before its first delivery holds the fill), and it is read again up to the
// fill's end, whatever the group's commit said (on_start_known, told first).
TEST(PartitionPositions, AFilledPartitionIsReadAgainFromTheFillsStartToItsEnd) {
  partition_positions p;
  p.assignment_begins();
  EXPECT_TRUE(p.assigned(kP0, std::nullopt));
  p.start_known(kP0, 50);
  p.fill(kP0, 30, 50);
  EXPECT_EQ(of(p), (pairs{{0, 30}}));
  EXPECT_TRUE(p.replaying(0, 0, 30));
  EXPECT_TRUE(p.replaying(0, 0, 49));
  EXPECT_FALSE(p.replaying(0, 0, 50));
  EXPECT_FALSE(p.delivered(0, 0, 40).store);
  const auto reached = p.delivered(0, 0, 51);
  EXPECT_TRUE(reached.store);
  EXPECT_EQ(reached.read_again_ended_at, 50);
}

TEST(PartitionPositions, ASnapshotAsOldAsTheWindowsStartsAtTheCommittedOffset) {
  partition_positions p;
  p.restore({{0, 0, 100}}, kNow - 60 * 60 * 1000);
  p.assignment_begins();
  (void)p.assigned(kP0, p.take_restored(kP0));
  EXPECT_FALSE(p.start_behind_commit(kP0, 150, minutes(60), kNow));
  EXPECT_EQ(of(p), (pairs{{0, 150}}));
  EXPECT_FALSE(p.replaying(0, 0, 120));
}

// A snapshot's time comes from a file: one before 1970 (never written by sketchd) counts as
// older than any window.
TEST(PartitionPositions, ASnapshotFromBefore1970IsOlderThanAnyWindow) {
  partition_positions p;
  p.restore({{0, 0, 100}}, -5);
  p.assignment_begins();
  (void)p.assigned(kP0, p.take_restored(kP0));
  EXPECT_EQ(p.snapshot_age(kP0, kNow), milliseconds(std::numeric_limits<std::int64_t>::max()));
  EXPECT_FALSE(p.start_behind_commit(kP0, 150, minutes(60 * 24 * 365), kNow));
}

// A shard restored from the state topic brings its partition's position and the time of its
// own snapshot: each partition's age is its own.
TEST(PartitionPositions, EachRestoredPartitionKeepsTheAgeOfItsOwnSnapshot) {
  partition_positions p;
  p.restore({{0, 0, 100}}, kNow - 60 * 60 * 1000);
  p.restore_one(kP1, 70, kNow - 60 * 1000);
  EXPECT_TRUE(p.has_restored(kP1));
  p.assignment_begins();
  (void)p.assigned(kP0, p.take_restored(kP0));
  (void)p.assigned(kP1, p.take_restored(kP1));
  EXPECT_FALSE(p.has_restored(kP1));
  EXPECT_EQ(p.snapshot_age(kP0, kNow), minutes(60));
  EXPECT_EQ(p.snapshot_age(kP1, kNow), minutes(1));
  EXPECT_FALSE(p.start_behind_commit(kP0, 150, minutes(30), kNow));
  EXPECT_TRUE(p.start_behind_commit(kP1, 90, minutes(30), kNow));
  EXPECT_TRUE(p.replaying(0, 1, 80));
}

// A partition started at a restored position may have it stored at once (its messages'
// outputs were delivered), unless it is read again up to the group's commit; once.
TEST(PartitionPositions, ARestoredStartIsStoredOnceUnlessReadAgain) {
  partition_positions p;
  p.restore({{0, 0, 100}, {0, 1, 50}}, kNow);
  p.assignment_begins();
  (void)p.assigned(kP0, p.take_restored(kP0));
  (void)p.assigned(kP1, p.take_restored(kP1));
  (void)p.assigned({0, 2}, std::nullopt);
  EXPECT_TRUE(p.start_behind_commit(kP1, 80, minutes(60), kNow));
  std::vector<kafka::partition_offset> out;
  p.take_started(out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].partition, 0);
  EXPECT_EQ(out[0].next_offset, 100);
  out.clear();
  p.take_started(out);
  EXPECT_TRUE(out.empty());
}

TEST(PartitionPositions, AReassignmentOrARevocationEndsTheReadingAgain) {
  partition_positions p;
  p.restore({{0, 0, 100}, {0, 1, 100}}, kNow);
  p.assignment_begins();
  (void)p.assigned(kP0, p.take_restored(kP0));
  (void)p.assigned(kP1, p.take_restored(kP1));
  ASSERT_TRUE(p.start_behind_commit(kP0, 150, minutes(60), kNow));
  ASSERT_TRUE(p.start_behind_commit(kP1, 150, minutes(60), kNow));
  (void)p.assigned(kP0, std::nullopt);
  EXPECT_FALSE(p.replaying(0, 0, 120));
  p.revoked(kP1);
  EXPECT_FALSE(p.replaying(0, 1, 120));
}

}  // namespace
}  // namespace sketchd
