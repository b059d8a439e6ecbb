// The daemon's Kafka source against the in-process mock cluster: batches read ahead by
// the source's poller thread, offsets stored by the owner, rebalance hooks run on the
// owner's thread, and revoked partitions never handed over after their hook.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <thread>
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

}  // namespace
}  // namespace sketchd::kafka
