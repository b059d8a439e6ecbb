// The daemon's Kafka source against the in-process mock cluster: batches read ahead by
// the source's poller thread, offsets stored by the owner, rebalance hooks run on the
// owner's thread, and revoked partitions never handed over after their hook.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "sketchd/kafka/client.h"
#include "sketchd/kafka/mock_cluster.h"
#include "sketchd/kafka/source.h"

namespace sketchd::kafka {
namespace {

using namespace std::chrono_literals;

constexpr int kPartitions = 4;
constexpr int kMessages = 5000;
constexpr std::uint32_t kBatch = 100;

// Produces `count` messages "k<i>" → "v<i>" to `topic` (the value padded with "x" to
// `value_bytes` when that is longer) and waits for every delivery.
void produce_all(const mock_cluster& cluster, const std::string& topic, int count = kMessages,
                 std::size_t value_bytes = 0) {
  client_config config(
      property_map{{"bootstrap.servers", cluster.bootstrap_servers()}, {"linger.ms", "5"}});
  handle_ptr producer = std::move(config).create(RD_KAFKA_PRODUCER);
  for (int i = 0; i < count; ++i) {
    // fmt, not "k" + std::to_string(i): GCC 12 warns falsely (-Wrestrict) about the latter.
    const std::string key = fmt::format("k{}", i);
    std::string value = fmt::format("v{}", i);
    if (value.size() < value_bytes) value.resize(value_bytes, 'x');
    throw_if_error(
        rd_kafka_producev(producer.get(), RD_KAFKA_V_TOPIC(topic.c_str()),
                          RD_KAFKA_V_KEY(key.data(), key.size()),
                          RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
        "produce");
  }
  ASSERT_EQ(rd_kafka_flush(producer.get(), 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
}

source_options options_for(const mock_cluster& cluster, const std::string& group) {
  source_options o;
  o.bootstrap_servers = cluster.bootstrap_servers();
  o.group_id = group;
  o.properties = {{"session.timeout.ms", "6000"}, {"heartbeat.interval.ms", "500"}};
  o.topics = {"events"};
  o.batch_size = kBatch;
  o.poll_timeout_ms = 50;
  return o;
}

// A source with its hooks recorded, and the owner's bookkeeping of what it processed.
struct member {
  explicit member(const source_options& o) : src(o) {
    src.on_assign([this](const topic_partition& tp) {
      hook_threads.insert(std::this_thread::get_id());
      owned.insert(tp.partition);
      return std::optional<std::int64_t>{};
    });
    src.on_revoke([this](std::span<const topic_partition> revoked) {
      hook_threads.insert(std::this_thread::get_id());
      for (const auto& tp : revoked) {
        owned.erase(tp.partition);
        ++revocations;
      }
      if (consumed_at_first_revoke < 0)
        consumed_at_first_revoke = static_cast<int>(consumed.size());
    });
  }

  // One poll: checks and records the batch, stores its offsets (the owner's job). A batch
  // filled while the input was held may be longer than its bound (what librdkafka had
  // fetched ahead when the hold paused the assignment).
  void poll_once(bool bounded = true) {
    const auto batch = src.poll_batch();
    if (bounded) {
      EXPECT_LE(batch.size(), kBatch);
    }
    std::map<std::int32_t, std::int64_t> next;
    for (const record& r : batch) {
      // Never a message of a partition this member does not own (revoked ones are dropped).
      EXPECT_TRUE(owned.count(r.partition))
          << "partition " << r.partition << " offset " << r.offset;
      EXPECT_EQ(r.view.value.substr(1), r.view.key.substr(1));
      consumed.emplace_back(r.partition, r.offset);
      next[r.partition] = std::max(next[r.partition], r.offset + 1);
    }
    std::vector<partition_offset> offsets;
    for (const auto& [p, n] : next) offsets.push_back({0, p, n});
    src.store_offsets(offsets);
  }

  source src;
  std::set<std::thread::id> hook_threads;
  std::set<std::int32_t> owned;
  int revocations = 0;
  int consumed_at_first_revoke = -1;
  std::vector<std::pair<std::int32_t, std::int64_t>> consumed;
};

// The committed offsets of `group` on every partition of "events", in partition order.
std::vector<std::int64_t> committed(const mock_cluster& cluster, const std::string& group) {
  client_config config(
      property_map{{"bootstrap.servers", cluster.bootstrap_servers()}, {"group.id", group}});
  handle_ptr consumer = std::move(config).create(RD_KAFKA_CONSUMER);
  topic_partition_list_ptr list(rd_kafka_topic_partition_list_new(kPartitions));
  for (int p = 0; p < kPartitions; ++p) rd_kafka_topic_partition_list_add(list.get(), "events", p);
  EXPECT_EQ(rd_kafka_committed(consumer.get(), list.get(), 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
  std::vector<std::int64_t> out;
  for (int p = 0; p < kPartitions; ++p) out.push_back(list->elems[p].offset);
  rd_kafka_consumer_close(consumer.get());
  return out;
}

std::vector<std::int64_t> high_watermarks(const mock_cluster& cluster) {
  client_config config(property_map{{"bootstrap.servers", cluster.bootstrap_servers()}});
  handle_ptr producer = std::move(config).create(RD_KAFKA_PRODUCER);
  std::vector<std::int64_t> out;
  for (int p = 0; p < kPartitions; ++p) {
    std::int64_t low = 0;
    std::int64_t high = 0;
    EXPECT_EQ(rd_kafka_query_watermark_offsets(producer.get(), "events", p, &low, &high, 10000),
              RD_KAFKA_RESP_ERR_NO_ERROR);
    out.push_back(high);
  }
  return out;
}

TEST(Source, ReadsEveryMessageOnceInBatchesAndCommitsItsStoredOffsetsAtClose) {
  mock_cluster cluster;
  cluster.create_topic("events", kPartitions);
  produce_all(cluster, "events");

  {
    member m(options_for(cluster, "alone"));
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (m.consumed.size() < static_cast<std::size_t>(kMessages) &&
           std::chrono::steady_clock::now() < deadline) {
      m.poll_once();
    }
    const std::set<std::pair<std::int32_t, std::int64_t>> distinct(m.consumed.begin(),
                                                                   m.consumed.end());
    EXPECT_EQ(m.consumed.size(), static_cast<std::size_t>(kMessages));
    EXPECT_EQ(distinct.size(), m.consumed.size()) << "a message was handed over twice";
    m.src.close();
    // The hooks ran on this thread (the owner), never on the poller.
    ASSERT_EQ(m.hook_threads.size(), 1U);
    EXPECT_EQ(*m.hook_threads.begin(), std::this_thread::get_id());
    EXPECT_EQ(m.revocations, kPartitions);  // close() revokes everything
  }
  EXPECT_EQ(committed(cluster, "alone"), high_watermarks(cluster));
}

// Commits: sketchd's own, every auto.commit.interval.ms, each offset with the metadata the
// on_commit hook gives it (the outputs' positions, in the daemon); a member assigned a
// partition later is told that metadata (on_taken_over), before any message of it is read.
TEST(SourceCommit, EachCommitCarriesItsMetadataAndTheNextOwnerIsToldIt) {
  mock_cluster cluster;
  cluster.create_topic("events", kPartitions);
  produce_all(cluster, "events");
  const std::vector<std::int64_t> ends = high_watermarks(cluster);
  source_options o = options_for(cluster, "meta");
  o.properties["auto.commit.interval.ms"] = "200";
  const auto metadata_of = [](std::int32_t partition, std::int64_t offset) {
    return fmt::format("positions of {} at {}", partition, offset);
  };
  {
    member m(o);
    int hooks = 0;
    m.src.on_commit([&](std::span<commit_offset> offsets) {
      ++hooks;
      // Partition 3's commits carry none.
      for (commit_offset& c : offsets)
        if (c.partition != 3) c.metadata = metadata_of(c.partition, c.next_offset);
    });
    // Committed in the background, before the close: every partition at its end.
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (committed(cluster, "meta") != ends && std::chrono::steady_clock::now() < deadline) {
      for (int i = 0; i < 20; ++i) m.poll_once();
    }
    EXPECT_EQ(committed(cluster, "meta"), ends);
    EXPECT_GE(hooks, 1);
    m.src.close();
  }
  // A later member: told each partition's committed offset and metadata at its assignment,
  // before it reads anything.
  member next(o);
  std::vector<committed_metadata> told;
  std::size_t consumed_when_told = 1;
  next.src.on_taken_over([&](std::span<const committed_metadata> taken) {
    told.assign(taken.begin(), taken.end());
    consumed_when_told = next.consumed.size();
  });
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (told.empty() && std::chrono::steady_clock::now() < deadline) next.poll_once();
  ASSERT_EQ(told.size(), static_cast<std::size_t>(kPartitions - 1));
  EXPECT_EQ(consumed_when_told, 0U);
  for (const committed_metadata& t : told) {
    EXPECT_NE(t.tp.partition, 3) << "a commit without metadata was told";
    EXPECT_EQ(t.offset, ends[static_cast<std::size_t>(t.tp.partition)]);
    EXPECT_EQ(t.metadata, metadata_of(t.tp.partition, t.offset));
  }
  next.src.close();
}

TEST(Source, ARebalanceRunsTheHooksOnTheOwnerAndNothingIsLost) {
  mock_cluster cluster;
  cluster.create_topic("events", kPartitions);
  produce_all(cluster, "events");

  member a(options_for(cluster, "shared"));
  // A alone until it has read something, so that its partitions move with work done.
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (a.consumed.empty() && std::chrono::steady_clock::now() < deadline) a.poll_once();
  ASSERT_FALSE(a.consumed.empty());

  // A reads slowly (a batch of 100 every quarter of a second or so) while B joins (which
  // takes seconds), so that partitions move while A still has messages of them to read.
  member b(options_for(cluster, "shared"));
  deadline = std::chrono::steady_clock::now() + 60s;
  for (int i = 0;
       (a.revocations == 0 || b.owned.empty()) && std::chrono::steady_clock::now() < deadline;
       ++i) {
    if (i % 5 == 0) a.poll_once();
    b.poll_once();
  }
  ASSERT_GT(a.revocations, 0) << "B's join did not move any partition";
  EXPECT_LT(a.consumed_at_first_revoke, kMessages) << "A had read everything before the rebalance";
  ASSERT_FALSE(b.owned.empty());
  for (std::int32_t p : b.owned)
    EXPECT_FALSE(a.owned.count(p)) << "partition " << p << " owned twice";

  // Both read to the end; then every message was read by one of them at least once.
  deadline = std::chrono::steady_clock::now() + 60s;
  std::set<std::pair<std::int32_t, std::int64_t>> all;
  while (all.size() < static_cast<std::size_t>(kMessages) &&
         std::chrono::steady_clock::now() < deadline) {
    a.poll_once();
    b.poll_once();
    all.clear();
    all.insert(a.consumed.begin(), a.consumed.end());
    all.insert(b.consumed.begin(), b.consumed.end());
  }
  EXPECT_EQ(all.size(), static_cast<std::size_t>(kMessages));
  a.src.close();
  b.src.close();
  for (const member* m : {&a, &b}) {
    ASSERT_EQ(m->hook_threads.size(), 1U);
    EXPECT_EQ(*m->hook_threads.begin(), std::this_thread::get_id());
  }
}

// Backpressure: an owner that takes no batch for twice max.poll.interval.ms, its input
// held, stays in its group (no revocation, the four partitions still its own) and, once
// released, reads every message exactly once. Without the hold, librdkafka leaves the
// group after max.poll.interval.ms ("MAXPOLL") and the partitions are revoked.
TEST(Source, AHeldInputStaysInItsGroupAndLosesNothing) {
  mock_cluster cluster;
  cluster.create_topic("events", kPartitions);
  produce_all(cluster, "events");
  source_options o = options_for(cluster, "held");
  o.properties = {{"session.timeout.ms", "6000"},
                  {"heartbeat.interval.ms", "500"},
                  {"max.poll.interval.ms", "6000"}};
  member m(o);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (m.consumed.size() < 1000 && std::chrono::steady_clock::now() < deadline) m.poll_once();
  ASSERT_GE(m.consumed.size(), 1000U);
  m.src.hold();
  EXPECT_TRUE(m.src.held());
  std::this_thread::sleep_for(13s);  // the owner waits on its outputs
  m.src.release();
  EXPECT_FALSE(m.src.held());
  while (m.consumed.size() < static_cast<std::size_t>(kMessages) &&
         std::chrono::steady_clock::now() < deadline + 13s) {
    m.poll_once(/*bounded=*/false);
  }
  EXPECT_EQ(m.revocations, 0) << "the member left its group while held";
  EXPECT_EQ(m.src.assigned_partitions(), static_cast<std::size_t>(kPartitions));
  const std::set<std::pair<std::int32_t, std::int64_t>> distinct(m.consumed.begin(),
                                                                 m.consumed.end());
  EXPECT_EQ(m.consumed.size(), static_cast<std::size_t>(kMessages));
  EXPECT_EQ(distinct.size(), m.consumed.size()) << "a message was handed over twice";
  m.src.close();
  EXPECT_EQ(committed(cluster, "held"), high_watermarks(cluster));
}

TEST(Source, ABatchStopsGrowingAtItsBytesBound) {
  // 40 messages of 10 KiB, a bound of 32 KiB: a batch takes messages until its keys and
  // values reach the bound, so at most 4 (3 make 30 KiB, below it) whatever batch_size.
  constexpr int kLarge = 40;
  constexpr std::size_t kValueBytes = 10 * 1024;
  mock_cluster cluster;
  cluster.create_topic("events", kPartitions);
  produce_all(cluster, "events", kLarge, kValueBytes);

  source_options o = options_for(cluster, "bytes");
  o.batch_bytes = 32 * 1024;
  source src(o);
  std::set<std::pair<std::int32_t, std::int64_t>> consumed;
  std::size_t largest = 0;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (consumed.size() < static_cast<std::size_t>(kLarge) &&
         std::chrono::steady_clock::now() < deadline) {
    const auto batch = src.poll_batch();
    std::size_t before_last = 0;  // the bytes before the batch's last message
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const record& r = batch[i];
      EXPECT_EQ(r.view.value.size(), kValueBytes);
      EXPECT_TRUE(consumed.emplace(r.partition, r.offset).second) << "handed over twice";
      if (i + 1 < batch.size()) before_last += r.view.key.size() + r.view.value.size();
    }
    EXPECT_LT(before_last, o.batch_bytes);
    largest = std::max(largest, batch.size());
  }
  EXPECT_EQ(consumed.size(), static_cast<std::size_t>(kLarge));
  EXPECT_LE(largest, 4U);
  src.close();
}

// Produces `count` messages "k<i>" → "v<i>" to the partitions of "events" in turn (message i
// to partition i mod `partitions`), each in a record batch of its own, and waits for every
// delivery. The mock broker answers a fetch with one record batch per partition, so a
// consumer's queue then holds the partitions' messages interleaved (each batch of the
// source's, of 10, holds messages of every partition).
void produce_interleaved(const mock_cluster& cluster, int count, int partitions = kPartitions) {
  client_config config(property_map{{"bootstrap.servers", cluster.bootstrap_servers()},
                                    {"batch.num.messages", "1"},
                                    {"linger.ms", "0"}});
  handle_ptr producer = std::move(config).create(RD_KAFKA_PRODUCER);
  for (int i = 0; i < count; ++i) {
    const std::string key = fmt::format("k{}", i);
    const std::string value = fmt::format("v{}", i);
    throw_if_error(rd_kafka_producev(
                       producer.get(), RD_KAFKA_V_TOPIC("events"),
                       RD_KAFKA_V_PARTITION(i % partitions), RD_KAFKA_V_KEY(key.data(), key.size()),
                       RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                       RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
                   "produce");
  }
  ASSERT_EQ(rd_kafka_flush(producer.get(), 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
}

// How A's owner stops taking batches while B joins, in revoke_read_ahead().
enum class owner_pause {
  hold,        // waiting on its outputs: hold(), the poller polling on
  processing,  // busy with a batch: it takes the next one 300 ms after the last
};

// A consumer's read-ahead when its partitions move. A has read ahead (its poller holds a
// full batch ready and has filled the next, both of interleaved partitions) when its owner
// stops taking batches; B joins. The rebalance reaches A's poller inside a poll, which drops
// the revoked partitions' messages from the batches not yet handed over before the revoke
// hook is handed to the owner. Once A's owner takes batches again, the hook runs before the
// next batch, and no batch of A after it holds a record of a partition A no longer owns;
// B, their new owner, reads them from A's commit, and every message is read by one of the
// two.
//
// Where the rebalance meets the read-ahead depends on how the owner stopped:
//   - hold: the poller polls on during the hold and meets the rebalance there, with both
//     batches full (the one ready and the one it filled);
//   - processing: the poller, both batches full, does not poll until the owner takes the
//     ready one; it then moves the filled one into its place and meets the rebalance in its
//     next poll, while the owner still processes the batch it took. librdkafka pauses the
//     assigned partitions before it hands over a rebalance, discarding what it had queued
//     for them: the batch just made ready is what there is to drop.
// The owner takes batches again right as the group rejoins after the revocation: a commit it
// sent then, with the generation before the join (sketchd's commits did, before they waited
// for the join to end), made the coordinator answer ILLEGAL_GENERATION, librdkafka took A's
// assignment for lost, and A was given the revoked partitions back.
void revoke_read_ahead(owner_pause how) {
  constexpr int kCount = 400;
  constexpr std::uint32_t kSmallBatch = 10;
  mock_cluster cluster;
  cluster.create_topic("events", kPartitions);
  produce_interleaved(cluster, kCount);

  source_options o = options_for(cluster, "read-ahead");
  o.batch_size = kSmallBatch;
  member a(o);
  // A takes a batch every 200 ms until they come full: librdkafka's queue holds more than a
  // batch, so the poller fills each batch whole before it waits for the owner.
  auto deadline = std::chrono::steady_clock::now() + 60s;
  std::size_t last_batch = 0;
  while ((last_batch < kSmallBatch || a.owned.size() < static_cast<std::size_t>(kPartitions)) &&
         std::chrono::steady_clock::now() < deadline) {
    const std::size_t before = a.consumed.size();
    a.poll_once();
    last_batch = a.consumed.size() - before;
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_EQ(a.owned.size(), static_cast<std::size_t>(kPartitions));
  ASSERT_EQ(last_batch, kSmallBatch);
  const std::set<std::int32_t> owned_before = a.owned;
  // A stops taking batches (its poller holds one ready and has filled the next).
  if (how == owner_pause::hold) a.src.hold();

  member b(o);
  // B's first assignment of the cooperative rebalance (none of A's partitions yet) comes
  // with A's revocation.
  deadline = std::chrono::steady_clock::now() + 60s;
  while (!b.src.assigned_once() && std::chrono::steady_clock::now() < deadline) b.poll_once();
  ASSERT_TRUE(b.src.assigned_once());
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(a.revocations, 0) << "A's revoke hook ran while A took no batch";
  if (how == owner_pause::hold) {
    a.src.release();
  } else {
    a.poll_once();  // the batch ready before the rebalance: A still owns its partitions
    EXPECT_EQ(a.revocations, 0);
    std::this_thread::sleep_for(300ms);
  }

  // A takes batches again: the revoke hook runs first; poll_once() checks every record of
  // every batch against the partitions A owns at that moment.
  const std::size_t before_hook = a.consumed.size();
  deadline = std::chrono::steady_clock::now() + 60s;
  while (a.revocations == 0 && std::chrono::steady_clock::now() < deadline) {
    a.poll_once(/*bounded=*/false);
  }
  ASSERT_GT(a.revocations, 0) << "B's join did not move any partition";
  EXPECT_EQ(static_cast<std::size_t>(a.consumed_at_first_revoke), before_hook)
      << "a batch was handed over before the revoke hook";
  std::set<std::int32_t> revoked;
  for (std::int32_t p : owned_before) {
    if (!a.owned.count(p)) revoked.insert(p);
  }
  ASSERT_FALSE(revoked.empty());
  EXPECT_LT(a.consumed_at_first_revoke, kCount) << "A had read everything before the rebalance";

  // Both read on until every message has been read once by one of them.
  std::set<std::pair<std::int32_t, std::int64_t>> all;
  deadline = std::chrono::steady_clock::now() + 60s;
  while (all.size() < static_cast<std::size_t>(kCount) &&
         std::chrono::steady_clock::now() < deadline) {
    a.poll_once(/*bounded=*/false);
    b.poll_once();
    all.clear();
    all.insert(a.consumed.begin(), a.consumed.end());
    all.insert(b.consumed.begin(), b.consumed.end());
  }
  EXPECT_EQ(all.size(), static_cast<std::size_t>(kCount));
  // After its revoke hook, A was handed no record of a revoked partition.
  for (std::size_t i = static_cast<std::size_t>(a.consumed_at_first_revoke); i < a.consumed.size();
       ++i) {
    EXPECT_FALSE(revoked.count(a.consumed[i].first))
        << "partition " << a.consumed[i].first << " offset " << a.consumed[i].second
        << " handed to A after its revocation";
  }
  // B owns what A gave up. On a loaded machine A may also be expelled afterwards: the mock
  // cluster does not count a heartbeat during a join as activity (rdkafka_mock_handlers.c,
  // Heartbeat), and A, whose owner takes no batch until B's first assignment, rejoins only
  // about a second before its session expires; B then owns every partition.
  EXPECT_TRUE(std::includes(b.owned.begin(), b.owned.end(), revoked.begin(), revoked.end()))
      << "B does not own every partition A gave up";
  a.src.close();
  b.src.close();
}

TEST(Source, ReadAheadOfPartitionsRevokedDuringAHoldIsNeverHandedOver) {
  revoke_read_ahead(owner_pause::hold);
}

TEST(Source, ReadAheadOfPartitionsRevokedWhileTheOwnerProcessesIsNeverHandedOver) {
  revoke_read_ahead(owner_pause::processing);
}

// --- Restarts: where a partition starts when the snapshot's positions and the group's
// commits disagree, or cannot be compared. ------------------------------------------------

// Commits `next` (partition → offset) for `group` on "events" as a client outside the group
// would. The mock broker accepts such a commit only while the group has no member yet: call
// it before any source of the group starts.
void commit_offsets(const mock_cluster& cluster, const std::string& group,
                    const std::map<std::int32_t, std::int64_t>& next) {
  client_config config(
      property_map{{"bootstrap.servers", cluster.bootstrap_servers()}, {"group.id", group}});
  handle_ptr consumer = std::move(config).create(RD_KAFKA_CONSUMER);
  topic_partition_list_ptr list(rd_kafka_topic_partition_list_new(static_cast<int>(next.size())));
  for (const auto& [p, offset] : next)
    rd_kafka_topic_partition_list_add(list.get(), "events", p)->offset = offset;
  EXPECT_EQ(rd_kafka_commit(consumer.get(), list.get(), 0), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_consumer_close(consumer.get());
}

// The first and last offsets (low and high watermarks) of partition `p` of "events".
std::pair<std::int64_t, std::int64_t> watermarks(const mock_cluster& cluster, std::int32_t p) {
  client_config config(property_map{{"bootstrap.servers", cluster.bootstrap_servers()}});
  handle_ptr producer = std::move(config).create(RD_KAFKA_PRODUCER);
  std::int64_t low = -1;
  std::int64_t high = -1;
  EXPECT_EQ(rd_kafka_query_watermark_offsets(producer.get(), "events", p, &low, &high, 10000),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  return {low, high};
}

// A source started as the daemon starts from a snapshot: on_assign returns the snapshot's
// position of each partition in `restored` (nullopt for the others); on_start_behind_commit,
// when `behind_answer` is set, records what it is asked and answers that; on_start_known,
// when `want_known`, records what it is told. poll() records the first offset read of each
// partition.
struct restarted {
  restarted(const source_options& o, std::map<std::int32_t, std::int64_t> restored_starts,
            std::optional<bool> behind_answer, bool want_known)
      : src(o), restored(std::move(restored_starts)) {
    src.on_assign([this](const topic_partition& tp) -> std::optional<std::int64_t> {
      assigned.insert(tp.partition);
      const auto it = restored.find(tp.partition);
      if (it == restored.end()) return std::nullopt;
      return it->second;
    });
    if (behind_answer) {
      src.on_start_behind_commit([this, answer = *behind_answer](const topic_partition& tp,
                                                                 std::int64_t start,
                                                                 std::int64_t committed) {
        asked.emplace_back(tp.partition, start, committed);
        return answer;
      });
    }
    if (want_known) {
      src.on_start_known(
          [this](const topic_partition& tp, std::int64_t start) { known[tp.partition] = start; });
    }
  }

  // Polls until a record of each of `partitions` has been read (or 30 s have passed).
  void read_from(const std::set<std::int32_t>& partitions) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    const auto done = [&] {
      return std::all_of(partitions.begin(), partitions.end(),
                         [&](std::int32_t p) { return first.count(p) > 0; });
    };
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      for (const record& r : src.poll_batch()) first.try_emplace(r.partition, r.offset);
    }
  }

  // Polls until the partitions are assigned (or 30 s have passed), and at least once.
  void join(std::size_t partitions) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    do {
      for (const record& r : src.poll_batch()) first.try_emplace(r.partition, r.offset);
    } while (assigned.size() < partitions && std::chrono::steady_clock::now() < deadline);
  }

  source src;
  std::map<std::int32_t, std::int64_t> restored;
  std::set<std::int32_t> assigned;
  std::vector<std::tuple<std::int32_t, std::int64_t, std::int64_t>> asked;  // p, start, committed
  std::map<std::int32_t, std::int64_t> known;
  std::map<std::int32_t, std::int64_t> first;
};

using asked_list = std::vector<std::tuple<std::int32_t, std::int64_t, std::int64_t>>;

// The restart tests' log: one partition of 100 messages, group "restart" committed at 60.
void committed_at_60(mock_cluster& cluster) {
  cluster.create_topic("events", 1);
  produce_interleaved(cluster, 100, 1);
  commit_offsets(cluster, "restart", {{0, 60}});
}

// The group's committed offsets cannot be read (OffsetFetch fails) when a partition is
// assigned with a restored position: it starts at the snapshot's position, although the
// group has committed past it, and start_behind is not asked (read, the commit would have
// made it ask, and its "no" would have started the partition at the commit).
TEST(SourceRestart, UnreadableCommitsStartARestoredPartitionAtTheSnapshotsPosition) {
  mock_cluster cluster;
  committed_at_60(cluster);
  const std::vector<error_code> errors{error_code::group_authorization_failed};
  cluster.push_request_errors(api_key::offset_fetch, errors);
  restarted r(options_for(cluster, "restart"), {{0, 20}}, /*behind_answer=*/false,
              /*want_known=*/false);
  r.read_from({0});
  ASSERT_TRUE(r.first.count(0));
  EXPECT_EQ(r.first.at(0), 20);
  EXPECT_EQ(r.asked, asked_list{});
  r.src.close();
}

// The same for partitions assigned without a restored position while the daemon keeps state
// positions (on_start_known): their start cannot be known, so on_start_known is not called;
// the partition starts at the group's commit, which librdkafka reads after the assignment.
TEST(SourceRestart, UnreadableCommitsLeaveTheStartOfAFreshPartitionUntold) {
  mock_cluster cluster;
  committed_at_60(cluster);
  const std::vector<error_code> errors{error_code::group_authorization_failed};
  cluster.push_request_errors(api_key::offset_fetch, errors);
  restarted r(options_for(cluster, "restart"), {}, std::nullopt, /*want_known=*/true);
  r.read_from({0});
  ASSERT_TRUE(r.first.count(0));
  EXPECT_EQ(r.first.at(0), 60);
  EXPECT_TRUE(r.known.empty()) << "told a start that could not be known";
  r.src.close();
}

// The log's first and last offsets cannot be read (ListOffsets fails) for a restored
// partition behind the group's commit: it starts at the commit, the messages between are
// not read again, and start_behind is not asked (it would have answered "read them again").
TEST(SourceRestart, UnreadableWatermarksStartAPartitionBehindTheCommitAtTheCommit) {
  mock_cluster cluster;
  committed_at_60(cluster);
  // The watermark query asks for the first and the last offset in two requests.
  const std::vector<error_code> errors{error_code::topic_authorization_failed,
                                       error_code::topic_authorization_failed};
  cluster.push_request_errors(api_key::list_offsets, errors);
  restarted r(options_for(cluster, "restart"), {{0, 20}}, /*behind_answer=*/true,
              /*want_known=*/false);
  r.read_from({0});
  cluster.clear_request_errors(api_key::list_offsets);
  ASSERT_TRUE(r.first.count(0));
  EXPECT_EQ(r.first.at(0), 60);
  EXPECT_EQ(r.asked, asked_list{});
  r.src.close();
}

// ListOffsets failing for a partition without a restored position: whether its commit lies
// within the log cannot be told, so on_start_known is not called; the partition starts at
// the commit.
TEST(SourceRestart, UnreadableWatermarksLeaveTheStartOfAFreshPartitionUntold) {
  mock_cluster cluster;
  committed_at_60(cluster);
  const std::vector<error_code> errors{error_code::topic_authorization_failed};
  cluster.push_request_errors(api_key::list_offsets, errors);
  restarted r(options_for(cluster, "restart"), {}, std::nullopt, /*want_known=*/true);
  r.read_from({0});
  cluster.clear_request_errors(api_key::list_offsets);
  ASSERT_TRUE(r.first.count(0));
  EXPECT_EQ(r.first.at(0), 60);
  EXPECT_TRUE(r.known.empty()) << "told a start that could not be checked against the log";
  r.src.close();
}

// A log whose first messages retention has deleted (the mock keeps 5 MiB of a partition):
//   - partition 0, restored at 0, committed within the log: what is read again starts at
//     the log's first offset, and start_behind is asked with that start, not the snapshot's;
//   - partition 1, restored at 0, committed below the log's first offset: the log holds none
//     of the messages between, so the partition starts at the log's first offset, unasked;
//   - partition 2, not restored, committed below the log's first offset: its start is not
//     told (it is wherever auto.offset.reset puts it: the log's first offset).
TEST(SourceRestart, AStartBelowTheLogsFirstOffsetBeginsAtTheFirstOffset) {
  constexpr int kLarge = 60;
  constexpr std::size_t kValueBytes = 100 * 1024;  // 6 MiB in each partition
  mock_cluster cluster;
  cluster.create_topic("events", 3);
  for (int p = 0; p < 3; ++p) {
    client_config config(property_map{{"bootstrap.servers", cluster.bootstrap_servers()}});
    handle_ptr producer = std::move(config).create(RD_KAFKA_PRODUCER);
    for (int i = 0; i < kLarge; ++i) {
      const std::string key = fmt::format("k{}", i);
      std::string value(kValueBytes, 'x');
      throw_if_error(
          rd_kafka_producev(producer.get(), RD_KAFKA_V_TOPIC("events"), RD_KAFKA_V_PARTITION(p),
                            RD_KAFKA_V_KEY(key.data(), key.size()),
                            RD_KAFKA_V_VALUE(value.data(), value.size()),
                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
          "produce");
    }
    ASSERT_EQ(rd_kafka_flush(producer.get(), 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> marks;
  for (int p = 0; p < 3; ++p) {
    marks.push_back(watermarks(cluster, p));
    ASSERT_GE(marks.back().first, 2) << "retention deleted nothing of partition " << p;
    ASSERT_EQ(marks.back().second, kLarge);
  }
  const std::int64_t within = (marks[0].first + kLarge) / 2;
  commit_offsets(cluster, "restart",
                 {{0, within}, {1, marks[1].first - 1}, {2, marks[2].first - 1}});
  restarted r(options_for(cluster, "restart"), {{0, 0}, {1, 0}}, /*behind_answer=*/true,
              /*want_known=*/true);
  r.read_from({0, 1, 2});
  EXPECT_EQ(r.asked, (asked_list{{0, marks[0].first, within}}));
  EXPECT_EQ(r.first, (std::map<std::int32_t, std::int64_t>{
                         {0, marks[0].first}, {1, marks[1].first}, {2, marks[2].first}}));
  EXPECT_TRUE(r.known.empty()) << "told a start below the log's first offset";
  r.src.close();
}

// A commit beyond the log's end (a log truncated below it, by an unclean leader election):
//   - partition 0, restored at the log's end: nothing between to read again; it starts at
//     the log's end, unasked, and reads what is written there later;
//   - partition 1, restored within the log: start_behind is asked about the messages up to
//     the log's end (not up to the commit), and answered "no", starts at the log's end;
//   - partition 2, not restored: its start is not told, and auto.offset.reset (earliest)
//     reads it from the log's first offset;
//   - partition 3, not restored, committed within the log: told, and read from the commit.
TEST(SourceRestart, ACommitBeyondTheLogsEndIsTakenAsTheLogsEnd) {
  constexpr int kEach = 100;
  mock_cluster cluster;
  cluster.create_topic("events", kPartitions);
  produce_interleaved(cluster, kPartitions * kEach);
  commit_offsets(cluster, "restart", {{0, 500}, {1, 500}, {2, 500}, {3, 40}});
  restarted r(options_for(cluster, "restart"), {{0, kEach}, {1, 40}}, /*behind_answer=*/false,
              /*want_known=*/true);
  r.join(kPartitions);
  ASSERT_EQ(r.assigned.size(), static_cast<std::size_t>(kPartitions));
  produce_interleaved(cluster, kPartitions * 5);  // offsets 100 … 104 of each partition
  r.read_from({0, 1, 2, 3});
  EXPECT_EQ(r.asked, (asked_list{{1, 40, kEach}}));
  EXPECT_EQ(r.first,
            (std::map<std::int32_t, std::int64_t>{{0, kEach}, {1, kEach}, {2, 0}, {3, 40}}));
  EXPECT_EQ(r.known, (std::map<std::int32_t, std::int64_t>{{3, 40}}));
  r.src.close();
}

// A partition started at a restored position ahead of the group's commit (a shard written
// after it) has that position stored, and committed, though no message of it comes: stored
// from on_assigned, once the partition is the consumer's. (Stored before, from on_assign,
// librdkafka refuses it, and the assignment would reset it.)
TEST(SourceRestart, ARestoredStartStoredOnceAssignedIsCommittedWithoutAMessage) {
  constexpr int kEach = 100;
  mock_cluster cluster;
  cluster.create_topic("events", kPartitions);
  produce_interleaved(cluster, kPartitions * kEach);
  commit_offsets(cluster, "restart", {{0, 60}, {1, kEach}, {2, kEach}, {3, kEach}});
  restarted r(options_for(cluster, "restart"), {{0, kEach}}, /*behind_answer=*/false,
              /*want_known=*/false);
  int told = 0;
  r.src.on_assigned([&] {
    ++told;
    const std::vector<partition_offset> started{{0, 0, kEach}};
    r.src.store_offsets(started);
  });
  r.join(kPartitions);
  ASSERT_EQ(r.assigned.size(), static_cast<std::size_t>(kPartitions));
  r.src.close();
  EXPECT_EQ(told, 1);
  EXPECT_EQ(r.first, (std::map<std::int32_t, std::int64_t>{}));  // nothing past the ends
  EXPECT_EQ(committed(cluster, "restart"), (std::vector<std::int64_t>(kPartitions, kEach)));
}

// --- Filling the windows from the log: a partition assigned without a start. ------------

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Produces one message to partition 0 of "events" per timestamp, in order.
void produce_at(const mock_cluster& cluster, const std::vector<std::int64_t>& timestamps) {
  client_config config(property_map{{"bootstrap.servers", cluster.bootstrap_servers()}});
  handle_ptr producer = std::move(config).create(RD_KAFKA_PRODUCER);
  for (std::size_t i = 0; i < timestamps.size(); ++i) {
    const std::string value = fmt::format("v{}", i);
    throw_if_error(
        rd_kafka_producev(producer.get(), RD_KAFKA_V_TOPIC("events"), RD_KAFKA_V_PARTITION(0),
                          RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                          RD_KAFKA_V_TIMESTAMP(timestamps[i]),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
        "produce");
  }
  ASSERT_EQ(rd_kafka_flush(producer.get(), 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
}

// A source whose windows want the messages since `since` of every partition assigned
// without a start (none here): what on_filled tells is recorded, with the first offset read.
struct filling {
  filling(const source_options& o, std::int64_t since) : r(o, {}, std::nullopt, false) {
    r.src.on_fill_since([since](const topic_partition&) { return std::optional(since); });
    r.src.on_filled(
        [this](const topic_partition& tp, const fill_outcome& f) { outcomes[tp.partition] = f; });
  }
  restarted r;
  std::map<std::int32_t, fill_outcome> outcomes;
};

// One partition's log: `old` messages an hour old, then `recent` ones of the last minute;
// the group "fill" committed `commit` (nothing when unset); its windows want the last
// `window_ms`; auto.offset.reset is `reset`; with `commits_unreadable`, the group's
// committed offsets cannot be read (OffsetFetch fails once).
struct fill_case {
  int old = 0;
  int recent = 0;
  std::optional<std::int64_t> commit = std::nullopt;
  std::int64_t window_ms = 600'000;
  std::string reset = "earliest";
  bool commits_unreadable = false;
};
struct fill_result {
  fill_outcome outcome;
  std::int64_t first = -1;  // the first offset read, -1 when none was
};

fill_result fill_of(const fill_case& c) {
  mock_cluster cluster;
  cluster.create_topic("events", 1);
  const std::int64_t now = now_ms();
  std::vector<std::int64_t> times(static_cast<std::size_t>(c.old), now - 3'600'000);
  times.insert(times.end(), static_cast<std::size_t>(c.recent), now - 60'000);
  produce_at(cluster, times);
  if (c.commit) commit_offsets(cluster, "fill", {{0, *c.commit}});
  if (c.commits_unreadable) {
    const std::vector<error_code> errors{error_code::group_authorization_failed};
    cluster.push_request_errors(api_key::offset_fetch, errors);
  }
  source_options o = options_for(cluster, "fill");
  o.properties["auto.offset.reset"] = c.reset;
  filling f(o, now - c.window_ms);
  if (c.commits_unreadable) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (!f.outcomes.count(0) && std::chrono::steady_clock::now() < deadline) f.r.join(1);
  } else {
    f.r.read_from({0});
  }
  fill_result out;
  EXPECT_TRUE(f.outcomes.count(0)) << "on_filled was not called";
  if (f.outcomes.count(0)) out.outcome = f.outcomes.at(0);
  if (f.r.first.count(0)) out.first = f.r.first.at(0);
  f.r.src.close();
  return out;
}

// 30 messages an hour old, 20 of the last minute, committed at 45; the windows want the
// last 10 minutes: read from offset 30 (the first message of that time, found by reading
// timestamps: the mock cluster has no timestamp lookup), [30, 45) a fill, complete (a
// message before 30 is older than the time).
TEST(SourceFill, APartitionWithACommitStartsWhereItsLogReachesTheTimeAsked) {
  const fill_result r = fill_of({.old = 30, .recent = 20, .commit = 45});
  EXPECT_TRUE(r.outcome.filled);
  EXPECT_EQ(r.outcome.from, 30);
  EXPECT_EQ(r.outcome.until, 45);
  EXPECT_TRUE(r.outcome.complete);
  EXPECT_EQ(r.first, 30);
}

// Windows longer than the log: the fill starts at the log's first message, and is complete
// since nothing was ever deleted from the log (its first offset is 0).
TEST(SourceFill, WindowsLongerThanTheLogFillFromItsStart) {
  const fill_result r = fill_of({.recent = 20, .commit = 12, .window_ms = 3'600'000 * 2});
  EXPECT_TRUE(r.outcome.filled);
  EXPECT_EQ(r.outcome.from, 0);
  EXPECT_EQ(r.outcome.until, 12);
  EXPECT_TRUE(r.outcome.complete);
  EXPECT_EQ(r.first, 0);
}

// Nothing of the time asked before the commit: no fill, the partition starts at its
// commit, and the windows miss nothing.
TEST(SourceFill, NothingToFillBeforeTheCommitStartsAtTheCommit) {
  const fill_result r = fill_of({.old = 30, .recent = 10, .commit = 30});
  EXPECT_FALSE(r.outcome.filled);
  EXPECT_TRUE(r.outcome.complete);
  EXPECT_EQ(r.first, 30);
}

// A partition the group never committed, with auto.offset.reset at earliest (sketchd's
// default): read from its start as always, every message processed; no fill, but the
// windows are complete (the log starts at offset 0).
TEST(SourceFill, AnUncommittedPartitionReadFromTheEarliestIsNotFilled) {
  const fill_result r = fill_of({.recent = 10});
  EXPECT_FALSE(r.outcome.filled);
  EXPECT_TRUE(r.outcome.complete);
  EXPECT_EQ(r.first, 0);
}

// With auto.offset.reset at latest, a partition the group never committed is filled up to
// the log's end at the assignment: those messages go into the windows, and what comes
// after is new.
TEST(SourceFill, AnUncommittedPartitionReadFromTheLatestIsFilledUpToTheLogsEnd) {
  const fill_result r = fill_of({.old = 5, .recent = 10, .reset = "latest"});
  EXPECT_TRUE(r.outcome.filled);
  EXPECT_EQ(r.outcome.from, 5);
  EXPECT_EQ(r.outcome.until, 15);
  EXPECT_EQ(r.first, 5);
}

// The group's committed offsets cannot be read: no fill, and nothing known of the log.
TEST(SourceFill, UnreadableCommitsFillNothing) {
  const fill_result r = fill_of({.recent = 10, .commit = 5, .commits_unreadable = true});
  EXPECT_FALSE(r.outcome.filled);
  EXPECT_FALSE(r.outcome.complete);
}

}  // namespace
}  // namespace sketchd::kafka
