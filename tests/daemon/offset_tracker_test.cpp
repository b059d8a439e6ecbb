// The offset tracker stores an input offset only when every output of its message, and of
// every earlier message of its partition, is acknowledged — whatever order the delivery
// reports come in.
#include "sketchd/kafka/offset_tracker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <utility>
#include <vector>

namespace sketchd::kafka {
namespace {

// The committable offsets reported since the last call, by (topic, partition).
std::map<std::pair<std::size_t, std::int32_t>, std::int64_t> drain(offset_tracker& t) {
  std::map<std::pair<std::size_t, std::int32_t>, std::int64_t> out;
  t.drain_committable([&](std::size_t topic, std::int32_t partition, std::int64_t next) {
    out[{topic, partition}] = next;
  });
  return out;
}

TEST(OffsetTracker, MessagesWithoutOutputsAreCommittableAtOnce) {
  offset_tracker t;
  const std::size_t s = t.slot(0, 3);
  (void)t.add(s, 40, 0);
  (void)t.add(s, 41, 0);
  EXPECT_EQ(drain(t), (std::map<std::pair<std::size_t, std::int32_t>, std::int64_t>{{{0, 3}, 42}}));
  EXPECT_TRUE(drain(t).empty());  // nothing moved since
  EXPECT_EQ(t.pending_messages(), 0u);
}

TEST(OffsetTracker, OffsetWaitsForEveryOutputOfItsMessage) {
  offset_tracker t;
  const std::size_t s = t.slot(0, 0);
  const auto a = t.add(s, 10, 2);
  EXPECT_TRUE(drain(t).empty());
  t.report(a, true);
  EXPECT_TRUE(drain(t).empty());  // one of two outputs
  t.report(a, true);
  EXPECT_EQ((drain(t)[{0, 0}]), 11);
}

TEST(OffsetTracker, LaterAckDoesNotPassAnEarlierPendingMessage) {
  offset_tracker t;
  const std::size_t s = t.slot(1, 0);
  const auto first = t.add(s, 100, 1);
  (void)t.add(s, 101, 0);
  const auto third = t.add(s, 102, 1);
  t.report(third, true);
  EXPECT_TRUE(drain(t).empty());  // 100 still pending: nothing may be stored
  t.report(first, true);
  EXPECT_EQ((drain(t)[{1, 0}]), 103);  // 100, 101 and 102 complete together
}

TEST(OffsetTracker, PartitionsAreIndependent) {
  offset_tracker t;
  const std::size_t p0 = t.slot(0, 0);
  const std::size_t p1 = t.slot(0, 1);
  const auto blocked = t.add(p0, 5, 1);
  (void)t.add(p1, 7, 0);
  auto d = drain(t);
  EXPECT_EQ(d.count({0, 0}), 0u);
  EXPECT_EQ((d[{0, 1}]), 8);
  t.report(blocked, true);
  EXPECT_EQ((drain(t)[{0, 0}]), 6);
}

TEST(OffsetTracker, FinalFailureBlocksItsPartitionForGood) {
  offset_tracker t;
  const std::size_t s = t.slot(0, 2);
  (void)t.add(s, 1, 0);
  const auto failed = t.add(s, 2, 1);
  const auto after = t.add(s, 3, 1);
  EXPECT_FALSE(t.report(failed, false));
  t.report(after, true);
  EXPECT_EQ((drain(t)[{0, 2}]), 2);  // message 1 is done; 2 failed, so never past it
  EXPECT_TRUE(t.failed());
  EXPECT_EQ(t.first_failure().partition, 2);
  EXPECT_EQ(t.first_failure().offset, 2);
  (void)t.add(s, 4, 0);
  EXPECT_TRUE(drain(t).empty());
}

// A partition revoked with an output in flight and assigned back: this instance's dedup
// state holds the message's item, so reading it again forwards nothing, and only the
// first delivery can bring its output. The partition is not committed past the message
// until that output is acknowledged.
TEST(OffsetTracker, RetainedMessageHoldsItsPartitionWhenItComesBack) {
  offset_tracker t;
  const std::size_t s = t.slot(0, 0);
  (void)t.add(s, 49, 0);
  const auto old = t.add(s, 50, 1);  // forwarded, not yet acknowledged
  (void)t.add(s, 51, 0);
  EXPECT_EQ((drain(t)[{0, 0}]), 50);
  t.reset(0, 0);  // revoked
  t.reset(0, 0);  // assigned again, read again from the committed offset, 50
  EXPECT_EQ(t.pending_messages(), 1u);
  (void)t.add(s, 50, 0);  // now a duplicate: no output
  (void)t.add(s, 51, 0);
  (void)t.add(s, 52, 0);
  EXPECT_EQ((drain(t)[{0, 0}]), 50);  // not past the retained message
  t.report(old, true);                // its output, delivered at last
  EXPECT_EQ(t.pending_messages(), 0u);
  EXPECT_EQ((drain(t)[{0, 0}]), 53);
  EXPECT_FALSE(t.failed());
}

TEST(OffsetTracker, RetainedFailureBlocksItsPartitionAndIsReportedWhereItHappened) {
  offset_tracker t;
  const std::size_t s = t.slot(2, 7);
  const auto old = t.add(s, 50, 1);
  t.reset(2, 7);
  EXPECT_FALSE(t.report(old, false));  // after the revocation
  EXPECT_TRUE(t.failed());
  EXPECT_EQ(t.first_failure().topic_index, 2u);
  EXPECT_EQ(t.first_failure().partition, 7);
  EXPECT_EQ(t.first_failure().offset, 50);
  t.reset(2, 7);  // assigned again
  (void)t.add(s, 50, 0);
  (void)t.add(s, 51, 0);
  EXPECT_EQ((drain(t)[{2, 7}]), 50);  // never past the failed message
  (void)t.add(s, 52, 0);
  EXPECT_LE((drain(t)[{2, 7}]), 50);
}

// Reports of an earlier assignment complete its retained messages only, never a message of
// the new one, however many times the partition changes hands (sequences never repeat).
TEST(OffsetTracker, ReportsOfAnEarlierAssignmentNeverCompleteNewMessages) {
  offset_tracker t;
  const std::size_t s = t.slot(0, 0);
  const auto old = t.add(s, 10, 1);
  for (int i = 0; i < 200; ++i) t.reset(0, 0);
  const auto fresh = t.add(s, 10, 1);
  t.report(old, true);
  EXPECT_EQ(t.pending_messages(), 1u);
  for (const auto& [partition, next] : drain(t)) EXPECT_LT(next, 11);  // not past 10
  t.report(old, true);  // twice: the retained message has nothing left to report
  EXPECT_EQ(t.pending_messages(), 1u);
  t.report(fresh, true);
  EXPECT_EQ(t.pending_messages(), 0u);
  EXPECT_EQ((drain(t)[{0, 0}]), 11);
}

// Messages complete at the revocation are forgotten: nothing holds the partition back.
TEST(OffsetTracker, CompleteMessagesAreNotRetained) {
  offset_tracker t;
  const std::size_t s = t.slot(0, 0);
  const auto a = t.add(s, 10, 1);
  (void)t.add(s, 11, 0);
  t.report(a, true);
  t.reset(0, 0);
  (void)t.add(s, 5, 0);
  EXPECT_EQ((drain(t)[{0, 0}]), 6);
  EXPECT_EQ(t.pending_messages(), 0u);
}

// A random interleaving of acknowledgements, checked against the definition: the
// committable offset is one past the longest prefix of fully acknowledged messages.
TEST(OffsetTracker, RandomOrderMatchesTheDefinition) {
  std::mt19937_64 rng(42);
  offset_tracker t;
  const std::size_t s = t.slot(0, 0);
  struct message {
    std::int64_t offset;
    offset_tracker::ticket ticket;
    std::uint32_t outputs;
    std::uint32_t acked = 0;
  };
  std::vector<message> messages;
  std::vector<std::size_t> reports;  // one entry per output, by message index
  for (std::int64_t offset = 0; offset < 2000; ++offset) {
    const auto outputs = static_cast<std::uint32_t>(rng() % 3);
    messages.push_back({offset, t.add(s, offset, outputs), outputs});
    for (std::uint32_t i = 0; i < outputs; ++i) reports.push_back(messages.size() - 1);
  }
  std::shuffle(reports.begin(), reports.end(), rng);
  std::int64_t committed = -1;
  for (std::size_t r : reports) {
    t.report(messages[r].ticket, true);
    ++messages[r].acked;
    std::int64_t expected = 0;
    while (expected < static_cast<std::int64_t>(messages.size()) &&
           messages[static_cast<std::size_t>(expected)].acked ==
               messages[static_cast<std::size_t>(expected)].outputs) {
      ++expected;
    }
    const auto d = drain(t);
    if (d.count({0, 0})) committed = d.at({0, 0});
    if (expected > 0) {
      ASSERT_EQ(committed, expected);
    }
  }
  EXPECT_EQ(committed, 2000);
  EXPECT_EQ(t.pending_messages(), 0u);
}

// The same with registrations and acknowledgements interleaved, so that the queue of
// incomplete messages wraps around its array and grows while wrapped.
TEST(OffsetTracker, InterleavedRegistrationsMatchTheDefinition) {
  std::mt19937_64 rng(7);
  offset_tracker t;
  const std::size_t s = t.slot(0, 0);
  std::vector<offset_tracker::ticket> tickets;
  std::vector<bool> acked;
  std::vector<std::size_t> outstanding;  // message indexes not yet acknowledged
  std::int64_t committed = -1;
  for (int round = 0; round < 300; ++round) {
    const std::size_t adds = rng() % (round % 50 == 49 ? 300 : 40);
    for (std::size_t i = 0; i < adds; ++i) {
      tickets.push_back(t.add(s, static_cast<std::int64_t>(tickets.size()), 1));
      acked.push_back(false);
      outstanding.push_back(tickets.size() - 1);
    }
    std::shuffle(outstanding.begin(), outstanding.end(), rng);
    const std::size_t reports = std::min<std::size_t>(outstanding.size(), rng() % 45);
    for (std::size_t i = 0; i < reports; ++i) {
      const std::size_t m = outstanding.back();
      outstanding.pop_back();
      t.report(tickets[m], true);
      acked[m] = true;
    }
    std::int64_t expected = 0;
    while (expected < static_cast<std::int64_t>(acked.size()) &&
           acked[static_cast<std::size_t>(expected)]) {
      ++expected;
    }
    const auto d = drain(t);
    if (d.count({0, 0})) committed = d.at({0, 0});
    if (expected > 0) {
      ASSERT_EQ(committed, expected) << "round " << round;
    }
    ASSERT_EQ(t.pending_messages(), outstanding.size()) << "round " << round;
  }
  for (const std::size_t m : outstanding) t.report(tickets[m], true);
  const auto d = drain(t);
  if (d.count({0, 0})) committed = d.at({0, 0});
  EXPECT_EQ(committed, static_cast<std::int64_t>(tickets.size()));
  EXPECT_EQ(t.pending_messages(), 0U);
}

}  // namespace
}  // namespace sketchd::kafka
