// The state topic against the in-process mock cluster: ensure_topic() takes the fallback
// the mock forces (no CreateTopics, no DescribeConfigs) with its warnings; shard snapshots
// make a round trip, spread over the state partitions by input partition, and split into
// chunks; the newest complete snapshot wins, an incomplete or corrupt newer one leaves the
// older one in place (with the reason), records of another cluster or other parameters
// are refused with a message; a shorter snapshot deletes its stale chunk keys; and the
// record's and key's encodings and the input-offset check, without a broker.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "sketchd/kafka/admin.h"
#include "sketchd/kafka/client.h"
#include "sketchd/kafka/mock_cluster.h"
#include "sketchd/state/topic_store.h"

namespace sketchd::state {
namespace {

using namespace std::chrono_literals;
using kafka::mock_cluster;

constexpr auto kTimeout = 10s;
constexpr const char* kTopic = "sketchd-state";
const std::map<std::string, std::string> kParameters{{"clicks", "window=5m epsilon=0.001"},
                                                     {"orders", "window=1h capacity=1000"}};

std::string random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(random());
  return out;
}

shard_snapshot make_snapshot(shard_id shard, std::string state, std::int64_t input_offset) {
  shard_snapshot s;
  s.shard = std::move(shard);
  s.state = std::move(state);
  s.input_offset = input_offset;
  s.outputs = {{"clicks.unique", 0, 17}, {"clicks.unique", 1, 4}};
  s.created_ms = 1'700'000'000'000;
  s.parameters = kParameters.at(s.shard.pipeline);
  return s;
}

topic_store make_store(const mock_cluster& cluster, std::int32_t partitions,
                       std::size_t chunk_size = kDefaultChunkSize, std::string cluster_id = {}) {
  return topic_store(
      {cluster.bootstrap_servers(), {}, kTopic, partitions, chunk_size, std::move(cluster_id)},
      kTimeout);
}

void expect_same(const shard_snapshot& got, const shard_snapshot& want) {
  EXPECT_EQ(got.shard, want.shard);
  EXPECT_EQ(got.state, want.state);
  EXPECT_EQ(got.input_offset, want.input_offset);
  EXPECT_EQ(got.outputs, want.outputs);
  EXPECT_EQ(got.created_ms, want.created_ms);
  EXPECT_EQ(got.parameters, want.parameters);
}

// A message of the state topic as a test looks at it.
struct raw_message {
  std::int32_t partition = 0;
  std::string key;
  bool tombstone = false;
  std::map<std::string, std::string> headers;
};

// Every message of the state topic, read from the start by a consumer of a group of its
// own (assign, never subscribe), until `count` arrived or 10 s passed.
std::vector<raw_message> read_raw(const mock_cluster& cluster, int partitions, std::size_t count) {
  kafka::client_config config(
      kafka::property_map{{"bootstrap.servers", cluster.bootstrap_servers()},
                          {"group.id", "state-topic-test"},
                          {"enable.auto.commit", "false"}});
  const kafka::handle_ptr consumer = std::move(config).create(RD_KAFKA_CONSUMER);
  const kafka::topic_partition_list_ptr list(rd_kafka_topic_partition_list_new(partitions));
  for (int p = 0; p < partitions; ++p)
    rd_kafka_topic_partition_list_add(list.get(), kTopic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  EXPECT_EQ(rd_kafka_assign(consumer.get(), list.get()), RD_KAFKA_RESP_ERR_NO_ERROR);
  std::vector<raw_message> out;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
    const kafka::message_ptr m(rd_kafka_consumer_poll(consumer.get(), 100));
    if (!m || m->err != RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    raw_message r{m->partition,
                  std::string(static_cast<const char*>(m->key), m->key_len),
                  m->payload == nullptr,
                  {}};
    rd_kafka_headers_t* headers = nullptr;
    if (rd_kafka_message_headers(m.get(), &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      const char* name = nullptr;
      const void* value = nullptr;
      std::size_t size = 0;
      for (std::size_t i = 0;
           rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
           ++i) {
        r.headers[name] = std::string(static_cast<const char*>(value), size);
      }
    }
    out.push_back(std::move(r));
  }
  rd_kafka_consumer_close(consumer.get());
  return out;
}

// A plain producer that writes chunks as a test makes them: missing, corrupt or foreign.
class raw_producer {
 public:
  explicit raw_producer(const mock_cluster& cluster) {
    kafka::client_config config(
        kafka::property_map{{"bootstrap.servers", cluster.bootstrap_servers()}});
    producer_ = std::move(config).create(RD_KAFKA_PRODUCER);
  }
  void chunk(std::int32_t partition, const std::string& key, std::string_view value,
             std::string_view id, std::uint32_t index, std::uint32_t count) {
    const std::string i = std::to_string(index);
    const std::string n = std::to_string(count);
    ASSERT_EQ(rd_kafka_producev(
                  producer_.get(), RD_KAFKA_V_TOPIC(kTopic), RD_KAFKA_V_PARTITION(partition),
                  RD_KAFKA_V_KEY(key.data(), key.size()),
                  RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                  RD_KAFKA_V_HEADER("sketchd-snapshot", id.data(), static_cast<ssize_t>(id.size())),
                  RD_KAFKA_V_HEADER("sketchd-chunk", i.data(), static_cast<ssize_t>(i.size())),
                  RD_KAFKA_V_HEADER("sketchd-chunks", n.data(), static_cast<ssize_t>(n.size())),
                  RD_KAFKA_V_END),
              RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  void flush() { ASSERT_EQ(rd_kafka_flush(producer_.get(), 10000), RD_KAFKA_RESP_ERR_NO_ERROR); }

 private:
  kafka::handle_ptr producer_;
};

TEST(StateTopicEnsure, MockClusterTopicIsUsedAsItIsWithWarnings) {
  const mock_cluster cluster(1);
  const kafka::ensure_result r = kafka::ensure_topic(cluster.bootstrap_servers(), {},
                                                     {kTopic, 3, state_topic_configs()}, kTimeout);
  // No DescribeConfigs (nor CreateTopics): the metadata request created the topic, with the
  // mock's default partition count and no compaction, and a warning says so.
  EXPECT_EQ(r.origin, kafka::topic_origin::used_as_is);
  EXPECT_EQ(r.compacted, kafka::compaction::unknown);
  EXPECT_EQ(r.partitions, mock_cluster::kAutoCreatePartitions);
  ASSERT_EQ(r.warnings.size(), 1U);
  EXPECT_EQ(r.warnings[0],
            "the cluster names no controller among its brokers, so its Admin API (CreateTopics, "
            "DescribeConfigs) cannot be used (librdkafka's mock cluster has none); using topic "
            "sketchd-state as it is, with 4 partition(s): make sure its cleanup.policy is "
            "compact, or it grows without bound");
}

TEST(StateTopicEnsure, ExistingTopicKeepsItsPartitionCount) {
  mock_cluster cluster(1);
  cluster.create_topic(kTopic, 2);
  const kafka::ensure_result r = kafka::ensure_topic(cluster.bootstrap_servers(), {},
                                                     {kTopic, 6, state_topic_configs()}, kTimeout);
  EXPECT_EQ(r.origin, kafka::topic_origin::used_as_is);
  EXPECT_EQ(r.partitions, 2);
  EXPECT_EQ(r.warnings.size(), 1U);
  EXPECT_THROW(
      (void)kafka::ensure_topic(cluster.bootstrap_servers(), {}, {kTopic, 0, {}}, kTimeout),
      std::invalid_argument);
}

TEST(StateTopicEnsure, CompactingPoliciesAreRecognised) {
  EXPECT_TRUE(kafka::is_compacting_policy("compact"));
  EXPECT_TRUE(kafka::is_compacting_policy("compact,delete"));
  EXPECT_TRUE(kafka::is_compacting_policy("delete, compact"));
  EXPECT_FALSE(kafka::is_compacting_policy("delete"));
  EXPECT_FALSE(kafka::is_compacting_policy(""));
  EXPECT_FALSE(kafka::is_compacting_policy("compaction"));
  EXPECT_EQ(kafka::to_string(kafka::topic_origin::used_as_is), "used as it is");
  EXPECT_EQ(kafka::to_string(kafka::compaction::unknown), "unknown");
}

TEST(StateTopicStore, OneShardMakesARoundTrip) {
  mock_cluster cluster(1);
  cluster.create_topic(kTopic, 2);
  topic_store store = make_store(cluster, 2);
  EXPECT_FALSE(store.cluster_id().empty());
  const shard_snapshot s = make_snapshot({"clicks", "events", 3}, random_bytes(5000, 1), 1234);
  const auto written = store.write(s, kTimeout);
  EXPECT_EQ(written.chunks, 1U);
  EXPECT_EQ(written.tombstones, 0U);

  const std::vector<shard_id> shards{s.shard};
  const read_result r = make_store(cluster, 2).read(shards, kParameters, kTimeout);
  ASSERT_EQ(r.restored.size(), 1U);
  expect_same(r.restored.at(s.shard), s);
  EXPECT_EQ(r.restored.at(s.shard).cluster_id, store.cluster_id());
  EXPECT_TRUE(r.refused.empty());
  EXPECT_TRUE(r.skipped.empty());
}

TEST(StateTopicStore, NothingWrittenReadsAsNothing) {
  mock_cluster cluster(1);
  cluster.create_topic(kTopic, 2);
  const std::vector<shard_id> shards{{"clicks", "events", 0}, {"clicks", "events", 1}};
  const read_result r = make_store(cluster, 2).read(shards, kParameters, kTimeout);
  EXPECT_TRUE(r.restored.empty());
  EXPECT_TRUE(r.refused.empty());
  EXPECT_TRUE(r.skipped.empty());
}

TEST(StateTopicStore, ShardsSpreadOverStatePartitionsByInputPartition) {
  mock_cluster cluster(1);
  cluster.create_topic(kTopic, 3);
  topic_store store = make_store(cluster, 3);
  std::vector<shard_snapshot> written;
  for (std::int32_t p = 0; p < 6; ++p) {
    written.push_back(make_snapshot({"clicks", "events", p}, random_bytes(700, p), 100 + p));
    written.push_back(make_snapshot({"orders", "purchases", p}, random_bytes(300, 50 + p), p));
  }
  for (const auto& s : written) (void)store.write(s, kTimeout);

  std::vector<shard_id> shards;
  for (const auto& s : written) shards.push_back(s.shard);
  const read_result r = make_store(cluster, 3).read(shards, kParameters, kTimeout);
  ASSERT_EQ(r.restored.size(), written.size());
  for (const auto& s : written) expect_same(r.restored.at(s.shard), s);
  EXPECT_TRUE(r.skipped.empty());

  // Each chunk sits on input partition mod 3, under its shard's key.
  const auto raw = read_raw(cluster, 3, written.size());
  ASSERT_EQ(raw.size(), written.size());
  for (const auto& m : raw) {
    const auto key = parse_shard_key(m.key);
    ASSERT_TRUE(key) << m.key;
    EXPECT_EQ(m.partition, key->shard.partition % 3) << m.key;
  }

  // A reader of one shard reads one state partition and returns that shard only.
  const std::vector<shard_id> one{{"orders", "purchases", 4}};
  const read_result single = make_store(cluster, 3).read(one, kParameters, kTimeout);
  ASSERT_EQ(single.restored.size(), 1U);
  expect_same(single.restored.at(one[0]), written[9]);
}

TEST(StateTopicStore, LargeRecordIsSplitIntoChunksAndReassembled) {
  mock_cluster cluster(1);
  cluster.create_topic(kTopic, 1);
  topic_store store = make_store(cluster, 1, 4096);
  const shard_snapshot s = make_snapshot({"clicks", "events", 0}, random_bytes(300'000, 7), 99);
  const auto written = store.write(s, kTimeout);
  EXPECT_EQ(written.chunks, (written.bytes + 4095) / 4096);
  EXPECT_GT(written.chunks, 70U);

  const std::vector<shard_id> shards{s.shard};
  const read_result r = make_store(cluster, 1, 4096).read(shards, kParameters, kTimeout);
  ASSERT_EQ(r.restored.size(), 1U);
  expect_same(r.restored.at(s.shard), s);

  const auto raw = read_raw(cluster, 1, written.chunks);
  ASSERT_EQ(raw.size(), written.chunks);
  for (std::uint32_t i = 0; i < written.chunks; ++i) {
    EXPECT_EQ(raw[i].key, shard_key(s.shard, i));
    EXPECT_EQ(raw[i].headers.at("sketchd-chunk"), std::to_string(i));
    EXPECT_EQ(raw[i].headers.at("sketchd-chunks"), std::to_string(written.chunks));
    EXPECT_EQ(raw[i].headers.at("sketchd-snapshot"), raw[0].headers.at("sketchd-snapshot"));
    EXPECT_EQ(raw[i].headers.at("sketchd-snapshot").size(), 16U);
  }
}

TEST(StateTopicStore, NewestCompleteSnapshotWins) {
  mock_cluster cluster(1);
  cluster.create_topic(kTopic, 1);
  topic_store store = make_store(cluster, 1, 2048);
  const shard_id shard{"clicks", "events", 0};
  (void)store.write(make_snapshot(shard, random_bytes(10'000, 1), 10), kTimeout);
  const shard_snapshot newer = make_snapshot(shard, random_bytes(9'000, 2), 20);
  (void)store.write(newer, kTimeout);

  const std::vector<shard_id> shards{shard};
  const read_result r = make_store(cluster, 1, 2048).read(shards, kParameters, kTimeout);
  ASSERT_EQ(r.restored.size(), 1U);
  expect_same(r.restored.at(shard), newer);
  EXPECT_TRUE(r.skipped.empty());
}

TEST(StateTopicStore, IncompleteNewerSnapshotFallsBackToTheOlderComplete) {
  mock_cluster cluster(1);
  cluster.create_topic(kTopic, 1);
  topic_store store = make_store(cluster, 1, 1024);
  const shard_id shard{"clicks", "events", 0};
  const shard_snapshot older = make_snapshot(shard, random_bytes(3000, 1), 10);
  ASSERT_EQ(store.write(older, kTimeout).chunks, 4U);
  // A writer that died after two of four chunks.
  const std::string record = encode_shard(make_snapshot(shard, random_bytes(3000, 2), 20));
  raw_producer raw(cluster);
  raw.chunk(0, shard_key(shard, 0), std::string_view(record).substr(0, 1024), "00000000deadbeef", 0,
            4);
  raw.chunk(0, shard_key(shard, 1), std::string_view(record).substr(1024, 1024), "00000000deadbeef",
            1, 4);
  raw.flush();

  const std::vector<shard_id> shards{shard};
  const read_result r = make_store(cluster, 1, 1024).read(shards, kParameters, kTimeout);
  ASSERT_EQ(r.restored.size(), 1U);
  expect_same(r.restored.at(shard), older);
  ASSERT_EQ(r.skipped.size(), 1U);
  EXPECT_NE(r.skipped[0].find("snapshot 00000000deadbeef"), std::string::npos) << r.skipped[0];
  EXPECT_NE(r.skipped[0].find("is incomplete (2 of 4 chunks)"), std::string::npos) << r.skipped[0];
}

TEST(StateTopicStore, CorruptSnapshotIsSkippedWithItsReason) {
  mock_cluster cluster(1);
  cluster.create_topic(kTopic, 1);
  topic_store store = make_store(cluster, 1);
  const shard_id shard{"clicks", "events", 0};
  const shard_snapshot good = make_snapshot(shard, random_bytes(2000, 1), 10);
  (void)store.write(good, kTimeout);
  std::string record = encode_shard(make_snapshot(shard, random_bytes(2000, 2), 20));
  record[record.size() / 2] ^= 0x40;  // one bit of the state flipped
  raw_producer raw(cluster);
  raw.chunk(0, shard_key(shard, 0), record, "0123456789abcdef", 0, 1);
  raw.chunk(0, "someone else's key", "x", "0123456789abcdef", 0, 1);
  // An intact record of another shard under this shard's key.
  raw.chunk(0, shard_key(shard, 0), encode_shard(make_snapshot({"clicks", "events", 1}, "x", 30)),
            "fedcba9876543210", 0, 1);
  raw.flush();

  const std::vector<shard_id> shards{shard};
  const read_result r = make_store(cluster, 1).read(shards, kParameters, kTimeout);
  ASSERT_EQ(r.restored.size(), 1U);
  expect_same(r.restored.at(shard), good);
  ASSERT_EQ(r.skipped.size(), 3U);
  EXPECT_NE(r.skipped[0].find("snapshot 0123456789abcdef"), std::string::npos) << r.skipped[0];
  EXPECT_NE(r.skipped[0].find("corrupt: checksum mismatch"), std::string::npos) << r.skipped[0];
  EXPECT_NE(r.skipped[1].find("offset 2: not a sketchd shard key"), std::string::npos)
      << r.skipped[1];
  EXPECT_NE(r.skipped[2].find("snapshot fedcba9876543210 at state partition 0 offset 3: its record "
                              "is of shard clicks/events/1, not of its key's"),
            std::string::npos)
      << r.skipped[2];
}

TEST(StateTopicStore, RecordOfAnotherClusterIsRefused) {
  mock_cluster cluster(1);
  cluster.create_topic(kTopic, 1);
  const shard_id shard{"clicks", "events", 0};
  topic_store elsewhere = make_store(cluster, 1, kDefaultChunkSize, "another-cluster-id");
  (void)elsewhere.write(make_snapshot(shard, "state", 10), kTimeout);

  topic_store here = make_store(cluster, 1);
  const std::vector<shard_id> shards{shard};
  const read_result r = here.read(shards, kParameters, kTimeout);
  EXPECT_TRUE(r.restored.empty());
  ASSERT_EQ(r.refused.size(), 1U);
  EXPECT_NE(r.refused.at(shard).find(fmt::format("made on Kafka cluster another-cluster-id, this "
                                                 "is cluster {}",
                                                 here.cluster_id())),
            std::string::npos)
      << r.refused.at(shard);
}

TEST(StateTopicStore, RecordOfOtherParametersIsRefused) {
  mock_cluster cluster(1);
  cluster.create_topic(kTopic, 1);
  const shard_id shard{"clicks", "events", 0};
  topic_store store = make_store(cluster, 1);
  shard_snapshot s = make_snapshot(shard, "state", 10);
  s.parameters = "window=10m epsilon=0.001";
  (void)store.write(s, kTimeout);

  const std::vector<shard_id> shards{shard};
  const read_result r = make_store(cluster, 1).read(shards, kParameters, kTimeout);
  EXPECT_TRUE(r.restored.empty());
  ASSERT_EQ(r.refused.size(), 1U);
  EXPECT_NE(r.refused.at(shard).find("made under other parameters than this configuration's (the "
                                     "record's: window=10m epsilon=0.001)"),
            std::string::npos)
      << r.refused.at(shard);
  EXPECT_THROW(
      (void)store.read(std::vector<shard_id>{{"unknown", "events", 0}}, kParameters, kTimeout),
      std::invalid_argument);
}

TEST(StateTopicStore, ShorterSnapshotDeletesItsStaleChunkKeys) {
  mock_cluster cluster(1);
  cluster.create_topic(kTopic, 1);
  const shard_id shard{"clicks", "events", 0};
  {
    topic_store store = make_store(cluster, 1, 1024);
    ASSERT_EQ(store.write(make_snapshot(shard, random_bytes(4500, 1), 10), kTimeout).chunks, 5U);
    const auto shorter = store.write(make_snapshot(shard, random_bytes(1500, 2), 20), kTimeout);
    EXPECT_EQ(shorter.chunks, 2U);
    EXPECT_EQ(shorter.tombstones, 3U);
  }
  // 5 chunks, 2 chunks, then tombstones of chunks 2, 3 and 4.
  auto raw = read_raw(cluster, 1, 10);
  ASSERT_EQ(raw.size(), 10U);
  for (std::uint32_t i = 2; i < 5; ++i) {
    EXPECT_EQ(raw[5 + i].key, shard_key(shard, i));
    EXPECT_TRUE(raw[5 + i].tombstone);
  }

  // A new writer learns the live chunk count from its read: a 3-chunk snapshot, then a
  // 1-chunk one from the new writer, which deletes chunks 1 and 2 it never wrote.
  {
    topic_store store = make_store(cluster, 1, 1024);
    ASSERT_EQ(store.write(make_snapshot(shard, random_bytes(2500, 3), 30), kTimeout).chunks, 3U);
  }
  topic_store fresh = make_store(cluster, 1, 1024);
  const std::vector<shard_id> shards{shard};
  const read_result r = fresh.read(shards, kParameters, kTimeout);
  ASSERT_EQ(r.restored.size(), 1U);
  EXPECT_EQ(r.restored.at(shard).input_offset, 30);
  const auto last = fresh.write(make_snapshot(shard, "small", 40), kTimeout);
  EXPECT_EQ(last.chunks, 1U);
  EXPECT_EQ(last.tombstones, 2U);
}

TEST(StateTopicStore, WriteFailsUnlessEveryChunkIsAcknowledgedInTime) {
  mock_cluster cluster(1);
  cluster.create_topic(kTopic, 1);
  const shard_id shard{"clicks", "events", 0};
  const shard_snapshot good = make_snapshot(shard, random_bytes(3000, 1), 10);
  {
    topic_store store = make_store(cluster, 1, 1024);
    (void)store.write(good, kTimeout);
    cluster.set_broker_down(1);
    try {
      (void)store.write(make_snapshot(shard, random_bytes(3000, 2), 20), 1s);
      FAIL() << "a write to a broker that is down succeeded";
    } catch (const kafka::kafka_error& e) {
      EXPECT_EQ(e.code(), kafka::error_code::timed_out);
      EXPECT_NE(std::string(e.what()).find("write a state snapshot [topic sketchd-state, "
                                           "partition 0]: 4 message(s) not acknowledged"),
                std::string::npos)
          << e.what();
    }
  }  // the store, and the chunks it still held, are gone before the broker is back
  cluster.set_broker_up(1);
  const std::vector<shard_id> shards{shard};
  const read_result r = make_store(cluster, 1, 1024).read(shards, kParameters, kTimeout);
  ASSERT_EQ(r.restored.size(), 1U);
  expect_same(r.restored.at(shard), good);
}

TEST(StateTopicStore, TooSmallChunksAndNoPartitionsAreRefused) {
  const mock_cluster cluster(1);
  EXPECT_THROW((void)make_store(cluster, 0), std::invalid_argument);
  EXPECT_THROW((void)make_store(cluster, 1, 100), std::invalid_argument);
}

TEST(ShardRecord, RoundTripAndCorruptionsAreErrors) {
  shard_snapshot s = make_snapshot({"clicks", "events", 2}, random_bytes(100, 3), 5);
  s.cluster_id = "cluster";
  const std::string record = encode_shard(s);
  const shard_snapshot back = decode_shard(record, "record");
  expect_same(back, s);
  EXPECT_EQ(back.cluster_id, "cluster");
  EXPECT_THROW((void)decode_shard(record.substr(0, record.size() - 1), "record"), snapshot_error);
  EXPECT_THROW((void)decode_shard("SKDSNAP", "record"), snapshot_error);
  std::string flipped = record;
  flipped[30] ^= 1;
  try {
    (void)decode_shard(flipped, "shard x");
    FAIL() << "a flipped bit was not noticed";
  } catch (const snapshot_error& e) {
    EXPECT_STREQ(e.what(), "shard x: corrupt: checksum mismatch");
  }
}

TEST(ShardKey, NamesWithSpacesAndColonsParseBackUnambiguously) {
  const shard_id tricky{"a 3:b c", "t:1 2", 7};
  const std::string key = shard_key(tricky, 12);
  EXPECT_EQ(key, "sketchd-shard/1 7:a 3:b c 5:t:1 2 7 12");
  const auto parsed = parse_shard_key(key);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->shard, tricky);
  EXPECT_EQ(parsed->chunk, 12U);
  EXPECT_FALSE(parse_shard_key("sketchd-shard/1 9:a 1 0"));
  EXPECT_FALSE(parse_shard_key("sketchd-shard/1 1:a 1:b -1 0"));
  EXPECT_FALSE(parse_shard_key("sketchd-shard/2 1:a 1:b 1 0"));
  EXPECT_FALSE(parse_shard_key(""));
  EXPECT_EQ(state_partition(tricky, 3), 1);
}

TEST(InputOffsetCheck, OffsetsWithinTheLogArePlausible) {
  const shard_id shard{"clicks", "events", 1};
  EXPECT_EQ(check_input_offset(shard, 0, 0, 0).result, offset_plausibility::verdict::plausible);
  EXPECT_EQ(check_input_offset(shard, 50, 10, 50).result, offset_plausibility::verdict::plausible);
  EXPECT_TRUE(check_input_offset(shard, 10, 10, 50).message.empty());

  const auto ahead = check_input_offset(shard, 51, 0, 50);
  EXPECT_EQ(ahead.result, offset_plausibility::verdict::beyond_log_end);
  EXPECT_FALSE(ahead.usable());
  EXPECT_NE(ahead.message.find("shard clicks/events/1: the snapshot reflects the input up to "
                               "offset 51, but the partition's log ends at 50: the topic was "
                               "deleted and created again"),
            std::string::npos)
      << ahead.message;

  const auto behind = check_input_offset(shard, 5, 8, 50);
  EXPECT_EQ(behind.result, offset_plausibility::verdict::before_log_start);
  EXPECT_TRUE(behind.usable());
  EXPECT_NE(behind.message.find("the 3 messages in between were deleted by retention"),
            std::string::npos)
      << behind.message;
}

}  // namespace
}  // namespace sketchd::state
