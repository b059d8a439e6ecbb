// scope: partition: one shard of windows per input partition, sized from the partition
// counts, combined for the readers, dropped with the partition, and kept by snapshots.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "pipeline_gauge.h"
#include "sketch/shards.h"
#include "sketchd/pipeline/options.h"
#include "sketchd/pipeline/pipeline.h"
#include "sketchd/state/binary.h"

namespace sketchd {
namespace {

using test_support::pipeline_gauge;

constexpr std::int64_t kStart = 1'790'000'000'000;

pipeline_config sharded_config(std::vector<std::string> topics = {"events"}) {
  pipeline_config c;
  c.name = "users";
  c.topics = std::move(topics);
  c.item.from = item_source::key;
  c.clock = clock_kind::event;
  c.scope = state_scope::partition;
  c.heavy_hitters = heavy_hitters_config{.window = std::chrono::seconds(60),
                                         .buckets = 6,
                                         .epsilon = 0.001,
                                         .delta = 0.01,
                                         .top_k = 10,
                                         .threshold = 0.02,
                                         .alerts_topic = {}};
  c.dedup = dedup_config{.window = std::chrono::seconds(60),
                         .capacity = 20000,
                         .fpr = 0.001,
                         .output_topic = {},
                         .duplicates_topic = {}};
  return c;
}

// Feeds `key` read from (topic, partition) at time t, in a batch of its own.
verdict feed(pipeline& p, const std::string& key, std::int32_t partition, std::int64_t t = kStart,
             std::uint32_t topic = 0) {
  message_view m;
  m.key = key;
  m.has_key = true;
  const pipeline_input in{&m, t, topic, partition};
  verdict v{};
  p.begin_batch();
  p.process(std::span(&in, 1), t, std::span(&v, 1));
  static_cast<void>(p.end_batch(t));
  return v;
}

// Many keys in one batch, keys[i] read from partitions[i] at time t; the heavy-hitter events
// of the batch in `events` when given.
std::vector<verdict> feed_all(pipeline& p, const std::vector<std::string>& keys,
                              const std::vector<std::int32_t>& partitions, std::int64_t t,
                              std::vector<sketch::heavy_event>* events = nullptr) {
  std::vector<message_view> views(keys.size());
  std::vector<pipeline_input> in(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    views[i].key = keys[i];
    views[i].has_key = true;
    in[i] = {&views[i], t, 0, partitions[i]};
  }
  std::vector<verdict> out(keys.size());
  p.begin_batch();
  p.process(in, t, out);
  std::vector<sketch::heavy_event> e = p.end_batch(t);
  if (events != nullptr) *events = std::move(e);
  return out;
}

std::int32_t partition_of(std::size_t i, std::int32_t partitions) {
  return static_cast<std::int32_t>((i * 2654435761u) % static_cast<std::uint32_t>(partitions));
}

// Dedup compares items within a partition: an item repeated in another partition is first
// seen there too (producers key by the item, so that its duplicates share a partition).
TEST(PipelineShards, DedupComparesItemsWithinTheirPartition) {
  pipeline p(sharded_config());
  const std::uint32_t counts[] = {4};
  p.set_partition_counts(counts);
  EXPECT_EQ(p.shard_count(), 0u);
  EXPECT_EQ(feed(p, "u1", 0), verdict::first_seen);
  EXPECT_EQ(feed(p, "u1", 0), verdict::duplicate);
  EXPECT_EQ(feed(p, "u1", 1), verdict::first_seen);
  EXPECT_EQ(feed(p, "u1", 1), verdict::duplicate);
  EXPECT_EQ(p.shard_count(), 2u);
  EXPECT_EQ(pipeline_gauge(p, "sketchd_pipeline_shards"), 2.0);
  // The readers combine the shards: the item was counted twice in each.
  EXPECT_EQ(p.estimate("u1")->estimate, 4u);
  EXPECT_EQ(p.estimate("u1")->window_items, 4u);
  EXPECT_TRUE(p.seen("u1")->seen);
}

// Each Bloom shard holds its share of the capacity with the binomial margin of
// sketch::shards: P shards take about the memory of one filter, not P times it. While the
// partition counts are unknown, a shard takes the whole capacity (the FPR holds).
TEST(PipelineShards, BloomShardsAreSizedFromThePartitionCounts) {
  const pipeline_config c = sharded_config();
  const std::uint32_t partitions = 32;
  sketch::rolling_bloom_options whole = pipeline_options::bloom_of(*c.dedup, sketch::kDefaultSeed);
  sketch::rolling_bloom_options share = whole;
  share.capacity =
      sketch::shards::rolling_bloom_shard_capacity(whole.capacity, whole.generations, partitions);
  const double whole_bytes = static_cast<double>(sketch::rolling_bloom(whole).size_bytes());
  const double share_bytes = static_cast<double>(sketch::rolling_bloom(share).size_bytes());

  pipeline sized(c);
  const std::uint32_t counts[] = {partitions};
  sized.set_partition_counts(counts);
  static_cast<void>(feed(sized, "u1", 5));
  EXPECT_EQ(pipeline_gauge(sized, "sketchd_bloom_size_bytes"), share_bytes);
  // 625 items per shard and generation: a margin of about a fifth (sketch/shards.h); the
  // 32 shards take less than 1.5 times the one filter.
  EXPECT_LT(share_bytes * partitions, 1.5 * whole_bytes);
  EXPECT_GT(share_bytes * partitions, whole_bytes);

  pipeline unknown(c);
  static_cast<void>(feed(unknown, "u1", 5));
  EXPECT_EQ(pipeline_gauge(unknown, "sketchd_bloom_size_bytes"), whole_bytes);
}

// A keyed stream of n distinct items over P partitions: each shard's filter holds its items
// at the target rate, so the false positives among n new items stay within the target's
// share: at most p·n = 20 in expectation (fewer while the filters fill), asserted ≤ 40, over
// 4 standard deviations of a Poisson(20) away. Every repeat is caught.
TEST(PipelineShards, AKeyedStreamKeepsTheTargetRateOverItsShards) {
  pipeline p(sharded_config());
  const std::int32_t partitions = 8;
  const std::uint32_t counts[] = {partitions};
  p.set_partition_counts(counts);
  std::vector<std::string> keys;
  std::vector<std::int32_t> where;
  for (std::size_t i = 0; i < 20000; ++i) {
    keys.push_back(fmt::format("user-{}", i));
    where.push_back(partition_of(i, partitions));
  }
  const std::vector<verdict> first = feed_all(p, keys, where, kStart);
  const auto false_positives = std::count(first.begin(), first.end(), verdict::duplicate);
  EXPECT_LE(false_positives, 40);
  const std::vector<verdict> again = feed_all(p, keys, where, kStart + 1);
  EXPECT_EQ(std::count(again.begin(), again.end(), verdict::duplicate), 20000);
  EXPECT_EQ(p.shard_count(), static_cast<std::size_t>(partitions));
  EXPECT_LE(pipeline_gauge(p, "sketchd_bloom_estimated_false_positive_ratio"), 0.001);
}

// The combined estimate of an item spread over partitions is the sum of the shards', within
// εN of the truth; /topk ranks it by that sum; a shard dropped takes its counts with it.
TEST(PipelineShards, ReadersCombineTheShardsAndADroppedShardLeavesThem) {
  pipeline p(sharded_config());
  const std::uint32_t counts[] = {4};
  p.set_partition_counts(counts);
  std::vector<std::string> keys;
  std::vector<std::int32_t> where;
  for (int i = 0; i < 300; ++i) {
    keys.push_back("hot");
    where.push_back(i % 3);  // 100 in each of partitions 0, 1 and 2
  }
  for (int i = 0; i < 3000; ++i) {
    keys.push_back(fmt::format("cold-{}", i));
    where.push_back(i % 4);
  }
  static_cast<void>(feed_all(p, keys, where, kStart));
  const auto e = p.estimate("hot");
  ASSERT_TRUE(e);
  // εN over the shards: e/w · 3,300 with w = ⌈e/0.001⌉, about 3.3 (the guarantee holds with
  // probability 1 − δ; this stream, with its fixed keys, is within it).
  const auto bound = static_cast<std::uint64_t>(std::ceil(e->error_bound));
  EXPECT_NEAR(e->error_bound, 3.3, 0.01);
  EXPECT_GE(e->estimate, 300u);
  EXPECT_LE(e->estimate, 300u + bound);
  EXPECT_EQ(e->window_items, 3300u);
  const auto top = p.topk();
  ASSERT_TRUE(top && !top->items.empty());
  EXPECT_EQ(top->items[0].item, "hot");
  EXPECT_TRUE(top->items[0].heavy);  // 300 of 3,300 is 9 %, φ = 2 %

  const double rotations_before =
      pipeline_gauge(p, "sketchd_bloom_rotations_total");  // the time series comes first
  p.keep_partitions([](std::uint32_t, std::int32_t partition) { return partition != 2; });
  EXPECT_EQ(p.shard_count(), 3u);
  const auto after = p.estimate("hot");
  EXPECT_GE(after->estimate, 200u);
  EXPECT_LE(after->estimate, 200u + bound);
  EXPECT_EQ(after->window_items, 3300u - 100u - 750u);
  EXPECT_GE(pipeline_gauge(p, "sketchd_bloom_rotations_total"), rotations_before);
}

// Heavy-hitter events are those of the whole window: an item that fills its own partition
// but is 0.1 % of the window raises none; one heavy over the window enters, and leaves when
// the window no longer holds it.
TEST(PipelineShards, HeavyEventsAreThoseOfTheCombinedWindow) {
  pipeline p(sharded_config());
  const std::uint32_t counts[] = {2};
  p.set_partition_counts(counts);
  std::vector<std::string> keys;
  std::vector<std::int32_t> where;
  for (int i = 0; i < 10; ++i) {
    keys.push_back("alone");
    where.push_back(0);
  }
  for (int i = 0; i < 10000; ++i) {
    keys.push_back(fmt::format("u{}", i));
    where.push_back(1);
  }
  std::vector<sketch::heavy_event> events;
  static_cast<void>(feed_all(p, keys, where, kStart, &events));
  EXPECT_TRUE(events.empty());

  const std::vector<std::string> hot(1000, "hot");
  std::vector<std::int32_t> halves;
  for (int i = 0; i < 1000; ++i) halves.push_back(i % 2);
  std::vector<sketch::heavy_event> entered;
  static_cast<void>(feed_all(p, hot, halves, kStart + 1000, &entered));
  ASSERT_EQ(entered.size(), 1u);
  EXPECT_EQ(entered[0].kind, sketch::heavy_event::kind::enter);
  EXPECT_EQ(entered[0].item, "hot");
  EXPECT_EQ(entered[0].window_items, 11010u);
  EXPECT_GE(entered[0].estimate, 1000u);

  // Two windows on: every item has left.
  p.begin_batch();
  const std::vector<sketch::heavy_event> left = p.end_batch(kStart + 121'000);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].kind, sketch::heavy_event::kind::leave);
  EXPECT_EQ(left[0].item, "hot");
  EXPECT_EQ(p.counters().heavy_enter, 1u);
  EXPECT_EQ(p.counters().heavy_leave, 1u);
}

// A snapshot keeps every shard under its topic's name and partition; a shard of a topic the
// pipeline no longer reads is dropped at the restore; a state of the other scope is refused
// with the difference named.
TEST(PipelineShards, SnapshotsKeepEachShardUnderItsTopicAndPartition) {
  pipeline p(sharded_config({"a", "b"}));
  const std::uint32_t counts[] = {4, 2};
  p.set_partition_counts(counts);
  static_cast<void>(feed(p, "x", 0, kStart, 0));
  static_cast<void>(feed(p, "x", 3, kStart, 0));
  static_cast<void>(feed(p, "y", 1, kStart, 1));
  const std::string saved = p.save_state();

  pipeline q(sharded_config({"a", "b"}));
  q.restore_state(saved);
  EXPECT_EQ(q.shard_count(), 3u);
  EXPECT_EQ(q.estimate("x")->estimate, 2u);
  EXPECT_EQ(q.estimate("y")->estimate, 1u);
  EXPECT_EQ(feed(q, "x", 3, kStart + 1, 0), verdict::duplicate);
  EXPECT_EQ(feed(q, "y", 1, kStart + 1, 1), verdict::duplicate);
  EXPECT_EQ(feed(q, "y", 0, kStart + 1, 1), verdict::first_seen);
  EXPECT_EQ(q.clock_ms(), kStart + 1);

  pipeline only_b(sharded_config({"b"}));
  only_b.restore_state(saved);
  EXPECT_EQ(only_b.shard_count(), 1u);
  EXPECT_EQ(only_b.estimate("x")->estimate, 0u);
  EXPECT_EQ(feed(only_b, "y", 1, kStart + 1, 0), verdict::duplicate);

  pipeline_config instance = sharded_config({"a", "b"});
  instance.scope = state_scope::instance;
  pipeline other(instance);
  try {
    other.restore_state(saved);
    FAIL() << "restored a state of the other scope";
  } catch (const state::mismatch_error& e) {
    EXPECT_NE(std::string(e.what()).find("scope: partition in the snapshot, (not set) in the "
                                         "configuration"),
              std::string::npos)
        << e.what();
  }
  // The instance-wide state did not change: its shard is there, empty.
  EXPECT_EQ(other.shard_count(), 1u);
}

// A corrupt shard list is refused and leaves no shard behind.
TEST(PipelineShards, ACorruptShardListIsRefusedAndLeavesNoShard) {
  pipeline p(sharded_config());
  static_cast<void>(feed(p, "x", 0));
  std::string saved = p.save_state();
  saved.resize(saved.size() - 40);
  pipeline q(sharded_config());
  static_cast<void>(feed(q, "z", 2));
  EXPECT_THROW(q.restore_state(saved), state::snapshot_error);
  EXPECT_EQ(q.shard_count(), 0u);
  EXPECT_EQ(feed(q, "z", 2), verdict::first_seen);
}

// A shard record with its dedup window coded (state.compression: auto) restores as the plain
// one does.
TEST(PipelineShards, ACompressedShardRestoresAsThePlainOne) {
  pipeline_config config = sharded_config({"a", "b"});
  config.heavy_hitters.reset();  // the Count-Min sketch is written as it is either way
  pipeline p(config);
  for (int i = 0; i < 500; ++i) static_cast<void>(feed(p, fmt::format("x{}", i), 2));
  const std::optional<std::string> plain = p.save_shard(0, 2);
  const std::optional<std::string> coded =
      p.save_shard(0, 2, bit_coding_of(state_compression::automatic));
  ASSERT_TRUE(plain && coded);
  EXPECT_LT(coded->size(), plain->size() / 2);

  pipeline q(config);
  q.restore_shard(0, 2, *coded);
  EXPECT_EQ(q.save_shard(0, 2), plain);
  EXPECT_EQ(feed(q, "x7", 2, kStart + 1), verdict::duplicate);
  EXPECT_EQ(feed(q, "x7", 1, kStart + 1), verdict::first_seen);  // another partition
}

// The state topic's shard records: one partition's shard saved by itself and made another
// pipeline's shard of that partition, in place of the one it had; the others are untouched.
TEST(PipelineShards, OneShardTravelsByItself) {
  pipeline p(sharded_config({"a", "b"}));
  static_cast<void>(feed(p, "x", 2, kStart, 0));
  static_cast<void>(feed(p, "x", 2, kStart, 0));
  static_cast<void>(feed(p, "y", 1, kStart, 1));
  EXPECT_EQ(p.save_shard(0, 3), std::nullopt);  // no message of a [3]
  EXPECT_EQ(p.save_shard(1, 2), std::nullopt);
  const std::optional<std::string> saved = p.save_shard(0, 2);
  ASSERT_TRUE(saved.has_value());

  pipeline q(sharded_config({"a", "b"}));
  static_cast<void>(feed(q, "z", 2, kStart, 0));  // the shard the record replaces
  static_cast<void>(feed(q, "w", 0, kStart, 1));
  q.restore_shard(0, 2, *saved);
  EXPECT_EQ(q.shard_count(), 2u);
  EXPECT_EQ(q.estimate("x")->estimate, 2u);
  EXPECT_EQ(q.estimate("z")->estimate, 0u);
  EXPECT_EQ(q.estimate("w")->estimate, 1u);
  EXPECT_EQ(feed(q, "x", 2, kStart + 1, 0), verdict::duplicate);
  EXPECT_EQ(feed(q, "x", 1, kStart + 1, 0), verdict::first_seen);  // another partition

  // A corrupt record, or one whose structures do not fit, leaves the partition without a
  // shard; the others stay.
  std::string corrupt = *saved;
  corrupt.resize(corrupt.size() / 2);
  EXPECT_THROW(q.restore_shard(0, 2, corrupt), state::snapshot_error);
  EXPECT_EQ(q.estimate("x")->estimate, 1u);  // partition 1's
  EXPECT_EQ(q.estimate("w")->estimate, 1u);
  pipeline_config wider = sharded_config({"a", "b"});
  wider.heavy_hitters->epsilon = 0.01;
  pipeline r(wider);
  EXPECT_THROW(r.restore_shard(0, 2, *saved), state::snapshot_error);
  EXPECT_EQ(r.shard_count(), 0u);
}

}  // namespace
}  // namespace sketchd
