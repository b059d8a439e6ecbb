// The processor's start of a partition restored from a snapshot behind the group's committed
// offset: the messages before that offset are read into the windows again, their offsets
// are not stored (the group's commit would move back), and the snapshot's age decides
// whether they are read at all. No Kafka: without output topics the processor has no
// producer, and the records are built here.
#include "sketchd/processor/processor.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "pipeline_gauge.h"
#include "sketchd/http/api.h"

namespace sketchd {
namespace {

using std::chrono::minutes;

config one_pipeline(bool fill_from_log = true) {
  config c;
  c.state.fill_from_log = fill_from_log;
  pipeline_config p;
  p.name = "orders";
  p.topics = {"events"};
  p.item.from = item_source::key;
  p.clock = clock_kind::wall;
  p.heavy_hitters = heavy_hitters_config{.window = minutes(5),
                                         .buckets = 5,
                                         .epsilon = 0.001,
                                         .delta = 0.01,
                                         .top_k = 10,
                                         .threshold = 0.02,
                                         .alerts_topic = {}};
  p.dedup = dedup_config{.window = minutes(60),
                         .capacity = 10000,
                         .fpr = 0.001,
                         .output_topic = {},
                         .duplicates_topic = {}};
  c.pipelines.push_back(p);
  return c;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr kafka::topic_partition kPartition{0, 0};

struct fixture {
  explicit fixture(bool fill_from_log = true) : cfg(one_pipeline(fill_from_log)) {}
  config cfg;
  pipeline pipe{cfg.pipelines[0]};
  processor proc{cfg, {&pipe}, {"events"}, nullptr, {}};
  std::vector<std::string> keys;

  // Restores position `start` of partition 0 from a snapshot `age_ms` old, and assigns it.
  void restore_and_assign(std::int64_t start, std::int64_t age_ms) {
    proc.restore_positions({{0, 0, start}}, now_ms() - age_ms);
    const auto restored = proc.take_restored_position(kPartition);
    ASSERT_EQ(restored, start);
    proc.assigned(kPartition, restored);
  }

  // Processes the messages at offsets [from, to) of partition 0, the item of each its
  // offset, and returns the offsets that became storable.
  std::vector<std::int64_t> process(std::int64_t from, std::int64_t to) {
    keys.clear();
    for (std::int64_t o = from; o < to; ++o) keys.push_back(fmt::format("k{}", o));
    std::vector<kafka::record> batch;
    for (std::int64_t o = from; o < to; ++o) {
      kafka::record r;
      r.partition = 0;
      r.offset = o;
      r.view.key = keys[static_cast<std::size_t>(o - from)];
      r.view.has_key = true;
      batch.push_back(r);
    }
    proc.process(batch, now_ms());
    std::vector<kafka::partition_offset> out;
    proc.poll(out);
    std::vector<std::int64_t> stored;
    for (const auto& p : out) stored.push_back(p.next_offset);
    return stored;
  }
};

TEST(Processor, ReadsAgainUpToTheCommittedOffsetWithoutStoringOffsetsBeforeIt) {
  fixture f;
  f.restore_and_assign(100, 10 * 60 * 1000);  // 10 minutes old
  // Younger than the longest window (60 minutes, dedup): read again from 100.
  EXPECT_TRUE(f.proc.start_behind_commit(kPartition, 100, 150));

  // Up to the committed offset 150: no offset stored, the position (for a snapshot) moves.
  EXPECT_TRUE(f.process(100, 120).empty());
  ASSERT_EQ(f.proc.positions().size(), 1u);
  EXPECT_EQ(f.proc.positions()[0].next_offset, 120);
  EXPECT_EQ(f.pipe.counters().first_seen, 20u);  // the items are in the windows
  // Reaching it, and past it: stored again.
  EXPECT_EQ(f.process(120, 150), std::vector<std::int64_t>{150});
  EXPECT_EQ(f.process(150, 160), std::vector<std::int64_t>{160});
  EXPECT_EQ(f.pipe.counters().first_seen, 60u);
}

TEST(Processor, ABatchAcrossTheCommittedOffsetStoresOnlyFromThere) {
  fixture f;
  f.restore_and_assign(100, 0);
  EXPECT_TRUE(f.proc.start_behind_commit(kPartition, 100, 110));
  EXPECT_EQ(f.process(100, 130), std::vector<std::int64_t>{130});
}

TEST(Processor, ASnapshotOlderThanEveryWindowStartsAtTheCommittedOffset) {
  fixture f;
  f.restore_and_assign(100, 61 * 60 * 1000);  // 61 minutes old
  EXPECT_FALSE(f.proc.start_behind_commit(kPartition, 100, 150));
  // The position is the committed offset, not the snapshot's.
  ASSERT_EQ(f.proc.positions().size(), 1u);
  EXPECT_EQ(f.proc.positions()[0].next_offset, 150);
  EXPECT_EQ(f.process(150, 155), std::vector<std::int64_t>{155});
}

TEST(Processor, AReassignmentEndsTheReadingAgain) {
  fixture f;
  f.restore_and_assign(100, 0);
  EXPECT_TRUE(f.proc.start_behind_commit(kPartition, 100, 150));
  const kafka::topic_partition revoked[] = {kPartition};
  f.proc.revoked(revoked);
  // Assigned again later: it starts at the committed offset (the restored position is used
  // once), and every offset is stored.
  f.proc.assigned(kPartition, f.proc.take_restored_position(kPartition));
  EXPECT_EQ(f.process(150, 152), std::vector<std::int64_t>{152});
}

// A snapshot written while the group is still joining (after a crash, the join waits for
// the dead member's session to expire) keeps the restored positions: the state it writes
// still holds those partitions' messages up to there. Once partitions are assigned, those
// the group gave to another member are no longer this instance's.
TEST(Processor, PositionsAreTheRestoredOnesUntilTheFirstAssignment) {
  fixture f;
  f.proc.restore_positions({{0, 0, 100}, {0, 1, 200}}, now_ms());
  auto positions = f.proc.positions();
  ASSERT_EQ(positions.size(), 2u);
  EXPECT_EQ(positions[0].next_offset, 100);
  EXPECT_EQ(positions[1].next_offset, 200);
  f.proc.assignment_begins();
  f.proc.assigned(kPartition, f.proc.take_restored_position(kPartition));
  (void)f.process(100, 105);
  positions = f.proc.positions();
  ASSERT_EQ(positions.size(), 1u);
  EXPECT_EQ(positions[0].partition, 0);
  EXPECT_EQ(positions[0].next_offset, 105);
}

// An assignment of no partition (more instances than partitions) ends it too: the
// positions are the group's now, and a snapshot that kept writing them with its own date
// would pass them off as recent at the next start.
TEST(Processor, AnEmptyAssignmentEndsTheRestoredPositions) {
  fixture f;
  f.proc.restore_positions({{0, 0, 100}}, now_ms());
  ASSERT_EQ(f.proc.positions().size(), 1u);
  f.proc.assignment_begins();
  EXPECT_TRUE(f.proc.positions().empty());
}

// A partition assigned without a snapshot's position has, until its first message is
// processed, the start its reading begins at as its position: a snapshot written before
// then holds it (a restart reads what was processed of it after the snapshot into the
// windows again). A restored position, or a message's, is not overridden.
TEST(Processor, APartitionWithoutMessagesYetHasItsStartAsPosition) {
  fixture f;
  f.proc.assignment_begins();
  f.proc.assigned(kPartition, std::nullopt);
  EXPECT_TRUE(f.proc.positions().empty());  // not known yet
  f.proc.start_known(kPartition, 40);
  ASSERT_EQ(f.proc.positions().size(), 1u);
  EXPECT_EQ(f.proc.positions()[0].next_offset, 40);
  EXPECT_EQ(f.process(40, 45), std::vector<std::int64_t>{45});
  f.proc.start_known(kPartition, 40);  // late: the message's position stays
  EXPECT_EQ(f.proc.positions()[0].next_offset, 45);
  // Another partition, not assigned: nothing.
  f.proc.start_known(kafka::topic_partition{0, 7}, 3);
  EXPECT_EQ(f.proc.positions().size(), 1u);
}

double incomplete_seconds(const pipeline& p) {
  return test_support::pipeline_gauge(p, "sketchd_cms_window_incomplete_seconds");
}

// Without state.fill_from_log, a partition assigned without a snapshot's position (taken
// over from another member, or at a start without a snapshot of it) leaves the heavy-hitter
// window incomplete for a window; one restored from the snapshot does not.
TEST(Processor, APartitionTakenOverLeavesTheWindowIncomplete) {
  fixture restored(/*fill_from_log=*/false);
  restored.restore_and_assign(100, 0);
  (void)restored.process(100, 105);
  EXPECT_EQ(incomplete_seconds(restored.pipe), 0.0);
  EXPECT_EQ(restored.proc.fill_since(kPartition), std::nullopt);

  fixture taken_over(/*fill_from_log=*/false);
  taken_over.proc.assignment_begins();
  taken_over.proc.assigned(kPartition, std::nullopt);
  (void)taken_over.process(100, 105);
  // 5 minutes and a slice (1 minute) from the batch on, less the little time the test takes.
  EXPECT_GT(incomplete_seconds(taken_over.pipe), 350.0);
  EXPECT_LE(incomplete_seconds(taken_over.pipe), 360.0);

  // A snapshot older than the windows: they have expired, and miss the partition's items.
  fixture expired(/*fill_from_log=*/false);
  expired.restore_and_assign(100, 61 * 60 * 1000);
  EXPECT_FALSE(expired.proc.start_behind_commit(kPartition, 100, 150));
  (void)expired.process(150, 155);
  EXPECT_GT(incomplete_seconds(expired.pipe), 350.0);
}

// A partition revoked and assigned again in one rebalance (an eager rebalance, or an
// assignment lost while the brokers were away) was counted here all along; one that comes
// back in a later rebalance (after another member held it) is taken over.
TEST(Processor, APartitionReturningInTheSameRebalanceIsNotTakenOver) {
  fixture f(/*fill_from_log=*/false);
  f.restore_and_assign(100, 0);
  (void)f.process(100, 105);
  const kafka::topic_partition partitions[] = {kPartition};
  f.proc.revoked(partitions);
  f.proc.assignment_begins();
  f.proc.assigned(kPartition, std::nullopt);
  (void)f.process(105, 110);
  EXPECT_EQ(incomplete_seconds(f.pipe), 0.0);

  f.proc.revoked(partitions);
  f.proc.assignment_begins();  // the rebalance ends without it
  f.proc.assignment_begins();  // a later one gives it back
  f.proc.assigned(kPartition, std::nullopt);
  (void)f.process(110, 115);
  EXPECT_GT(incomplete_seconds(f.pipe), 350.0);
}

// With state.fill_from_log (the default), a partition assigned without a snapshot's
// position asks for its messages since the longest window (dedup, 60 minutes); one
// restored, or returning in the same rebalance, asks for none.
TEST(Processor, APartitionTakenOverAsksForItsMessagesSinceTheLongestWindow) {
  fixture f;
  f.proc.assignment_begins();
  f.proc.assigned(kPartition, std::nullopt);
  const std::int64_t before = now_ms();
  const std::optional<std::int64_t> since = f.proc.fill_since(kPartition);
  ASSERT_TRUE(since.has_value());
  EXPECT_LE(*since, before - 60 * 60 * 1000 + 5'000);
  EXPECT_GE(*since, before - 60 * 60 * 1000 - 5'000);
  EXPECT_EQ(f.proc.fill_since({0, 1}), std::nullopt) << "a partition not assigned";

  fixture restored;
  restored.restore_and_assign(100, 0);
  EXPECT_EQ(restored.proc.fill_since(kPartition), std::nullopt);

  fixture returning;
  returning.restore_and_assign(100, 0);
  const kafka::topic_partition partitions[] = {kPartition};
  returning.proc.revoked(partitions);
  returning.proc.assignment_begins();
  returning.proc.assigned(kPartition, std::nullopt);
  EXPECT_EQ(returning.proc.fill_since(kPartition), std::nullopt);
}

// A fill's messages go into the windows without their offsets being stored (the group has
// committed them), and a fill the log completes leaves the window complete.
TEST(Processor, AFilledPartitionIsReadAgainUpToItsEndAndItsWindowIsComplete) {
  fixture f;
  f.proc.assignment_begins();
  f.proc.assigned(kPartition, std::nullopt);
  f.proc.filled(kPartition, {.filled = true, .from = 40, .until = 50, .complete = true});
  EXPECT_EQ(f.process(40, 45), std::vector<std::int64_t>{}) << "below the fill's end";
  EXPECT_EQ(f.process(45, 52), std::vector<std::int64_t>{52});
  EXPECT_EQ(incomplete_seconds(f.pipe), 0.0);
  const auto counts = f.pipe.counters();
  EXPECT_EQ(counts.items, 12u) << "the fill's messages are counted into the windows";
}

// A fill the log could not complete (retention deleted messages of the window, or the
// lookup failed) leaves the window incomplete, as a take-over without a fill does.
TEST(Processor, AnIncompleteFillLeavesTheWindowIncomplete) {
  fixture f;
  f.proc.assignment_begins();
  f.proc.assigned(kPartition, std::nullopt);
  f.proc.filled(kPartition, {.filled = true, .from = 40, .until = 50, .complete = false});
  (void)f.process(40, 50);
  EXPECT_GT(incomplete_seconds(f.pipe), 350.0);
}

// Heavy-set changes are logged a line each, at most 20 per pipeline every 10 s; the others
// are counted and told in one line (at the stop here, otherwise once the 10 s have passed):
// a low threshold over an even stream changes hundreds of items at once.
TEST(Processor, HeavySetChangesAreLoggedTwentyAtATime) {
  std::ostringstream lines;
  spdlog::drop("pipeline");
  spdlog::register_logger(std::make_shared<spdlog::logger>(
      "pipeline", std::make_shared<spdlog::sinks::ostream_sink_st>(lines)));
  config cfg = one_pipeline();
  cfg.pipelines[0].heavy_hitters->threshold = 0.001;
  cfg.pipelines[0].heavy_hitters->top_k = 1000;
  pipeline pipe{cfg.pipelines[0]};
  processor proc{cfg, {&pipe}, {"events"}, nullptr, {}};
  proc.assigned(kPartition, std::nullopt);
  // 100 items 20 times each: every one enters the heavy set (20 >= the minimum of 10, and
  // >= 0.1% of the window).
  std::vector<std::string> keys;
  for (int round = 0; round < 20; ++round)
    for (int item = 0; item < 100; ++item) keys.push_back(fmt::format("u{}", item));
  std::vector<kafka::record> batch(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    batch[i].offset = static_cast<std::int64_t>(i);
    batch[i].view.key = keys[i];
    batch[i].view.has_key = true;
  }
  proc.process(batch, now_ms());
  EXPECT_NE(http::topk_json(pipe).value_or("").find("\"heavy\":true"), std::string::npos);
  EXPECT_EQ(count(lines.str(), "entered the heavy set"), 20u) << lines.str();
  EXPECT_EQ(count(lines.str(), "more heavy-set change(s)"), 0u);
  proc.log_held_back_warnings();
  EXPECT_EQ(count(lines.str(), "orders: 80 more heavy-set change(s) in the last "), 1u)
      << lines.str();
  EXPECT_EQ(count(lines.str(), " s not logged (80 entered, 0 left; at most 20 lines every 10 s)"),
            1u)
      << lines.str();
  spdlog::drop("pipeline");
}

// scope: partition through the processor: each partition's messages go to its own shard,
// sized from the partition counts; a partition revoked and not given back loses its shard
// at the next batch, one revoked and assigned again in the same rebalance keeps it, and a
// shard restored from a snapshot without its partition's position is dropped at the
// assignment (the fill would count its items twice).
TEST(Processor, PartitionShardsFollowTheAssignment) {
  config cfg = one_pipeline(true);
  cfg.pipelines[0].scope = state_scope::partition;
  pipeline pipe{cfg.pipelines[0]};
  processor proc{cfg, {&pipe}, {"events"}, nullptr, {}};
  ASSERT_TRUE(proc.needs_partition_counts());
  const std::uint32_t counts[] = {4};
  proc.partition_counts(counts);
  std::vector<std::string> keys;
  const auto feed = [&](std::int32_t partition, std::int64_t offset, std::string key) {
    keys.push_back(std::move(key));
    kafka::record r;
    r.partition = partition;
    r.offset = offset;
    r.view.key = keys.back();
    r.view.has_key = true;
    proc.process(std::span(&r, 1), now_ms());
  };
  proc.assignment_begins();
  for (std::int32_t p = 0; p < 3; ++p) proc.assigned({0, p}, std::nullopt);
  feed(0, 0, "x");
  feed(1, 0, "x");
  feed(2, 0, "y");
  EXPECT_EQ(pipe.shard_count(), 3u);
  EXPECT_EQ(pipe.counters().first_seen, 3u);  // "x" on two partitions: first seen on each
  const std::string saved = pipe.save_state();

  // An eager rebalance: all revoked, 0 and 1 given back.
  const kafka::topic_partition all[] = {{0, 0}, {0, 1}, {0, 2}};
  proc.revoked(all);
  proc.assignment_begins();
  proc.assigned({0, 0}, std::nullopt);
  proc.assigned({0, 1}, std::nullopt);
  feed(0, 1, "x");
  EXPECT_EQ(pipe.shard_count(), 2u);
  EXPECT_EQ(pipe.counters().duplicates, 1u);  // partition 0 kept its shard
  EXPECT_EQ(pipe.estimate("y")->estimate, 0u);

  // A revocation, a batch (which drops the shard), then the partition back (a lost
  // assignment that returns): its state is gone, so it is taken over (filled from the log),
  // not taken for one that kept its shard.
  const kafka::topic_partition zero[] = {{0, 0}};
  proc.revoked(zero);
  proc.process({}, now_ms());
  EXPECT_EQ(pipe.shard_count(), 1u);
  proc.assignment_begins();
  proc.assigned({0, 0}, std::nullopt);
  EXPECT_TRUE(proc.fill_since({0, 0}).has_value());

  // Restored from the snapshot: partition 2 assigned with its position keeps its shard,
  // partition 1 assigned without one loses it.
  pipeline restored{cfg.pipelines[0]};
  processor after{cfg, {&restored}, {"events"}, nullptr, {}};
  restored.restore_state(saved);
  after.restore_positions({{0, 2, 1}}, now_ms());
  after.assignment_begins();
  after.assigned({0, 2}, after.take_restored_position({0, 2}));
  after.assigned({0, 1}, after.take_restored_position({0, 1}));
  EXPECT_EQ(restored.shard_count(), 2u);  // 0 waits for the next batch
  EXPECT_EQ(restored.estimate("y")->estimate, 1u);
  EXPECT_EQ(restored.estimate("x")->estimate, 1u);  // partition 0's
}

}  // namespace
}  // namespace sketchd
