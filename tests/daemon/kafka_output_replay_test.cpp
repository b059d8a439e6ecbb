// Reading an output topic back by provenance, against the in-process mock cluster:
// forwarded-like messages of several source partitions interleaved in several output
// partitions are handed over only for the source asked, in offset order per output
// partition; start offsets are respected; an empty partition is complete at once; messages
// without usable provenance headers are counted by reason and skipped; a partition that
// cannot reach its end (unknown, a broker slower than the deadline, fetches that keep
// failing) ends with a typed error within the deadline while the others are read whole; and
// what kafka::sink forwarded reads back with the input's topic, partition and offsets.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sketchd/kafka/client.h"
#include "sketchd/kafka/mock_cluster.h"
#include "sketchd/kafka/output_replay.h"
#include "sketchd/kafka/sink.h"

namespace sketchd::kafka {
namespace {

using namespace std::chrono_literals;

using header_list = std::vector<std::pair<std::string, std::optional<std::string>>>;

header_list provenance_of(std::string_view topic, std::int32_t partition, std::int64_t offset) {
  return {{kSourceTopicHeader, std::string(topic)},
          {kSourcePartitionHeader, std::to_string(partition)},
          {kSourceOffsetHeader, std::to_string(offset)}};
}

// A producer that writes each message to the partition asked, with the headers given.
class writer {
 public:
  explicit writer(const mock_cluster& cluster) {
    client_config config(property_map{{"bootstrap.servers", cluster.bootstrap_servers()}});
    producer_ = std::move(config).create(RD_KAFKA_PRODUCER);
  }
  void write(const std::string& topic, std::int32_t partition, const std::string& key,
             const std::string& value, std::int64_t timestamp_ms, const header_list& headers) {
    rd_kafka_headers_t* h = rd_kafka_headers_new(headers.size());
    for (const auto& [name, v] : headers)
      rd_kafka_header_add(h, name.c_str(), -1, v ? v->data() : nullptr, v ? v->size() : 0);
    throw_if_error(
        rd_kafka_producev(producer_.get(), RD_KAFKA_V_TOPIC(topic.c_str()),
                          RD_KAFKA_V_PARTITION(partition), RD_KAFKA_V_KEY(key.data(), key.size()),
                          RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                          RD_KAFKA_V_TIMESTAMP(timestamp_ms), RD_KAFKA_V_HEADERS(h),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
        "produce");
  }
  void flush() { ASSERT_EQ(rd_kafka_flush(producer_.get(), 10000), RD_KAFKA_RESP_ERR_NO_ERROR); }

 private:
  handle_ptr producer_;
};

// What a test compares of a message handed over.
struct got {
  std::int32_t output_partition = 0;
  std::int64_t output_offset = 0;
  std::string source_topic;
  std::int32_t source_partition = 0;
  std::int64_t source_offset = 0;
  std::string key;
  std::string value;
  std::int64_t timestamp_ms = 0;
  std::optional<std::string> trace;  // the message's own header "trace"

  friend bool operator==(const got&, const got&) = default;
  friend void PrintTo(const got& g, std::ostream* os) {
    *os << fmt::format("out [{}] @{} from {} [{}] @{}: key {} value {} ts {} trace {}",
                       g.output_partition, g.output_offset, g.source_topic, g.source_partition,
                       g.source_offset, g.key, g.value, g.timestamp_ms, g.trace.value_or("-"));
  }
};

got describe(const replayed_message& m) {
  got g{m.output_partition,        m.output_offset, std::string(m.source.topic),
        m.source.partition,        m.source.offset, std::string(m.view.key),
        std::string(m.view.value), m.timestamp_ms,  std::nullopt};
  std::string_view trace;
  if (m.view.find_header(m.view.header_context, "trace", &trace)) g.trace = std::string(trace);
  return g;
}

replay_options options_for(const mock_cluster& cluster, std::vector<output_position> from) {
  replay_options o;
  o.bootstrap_servers = cluster.bootstrap_servers();
  o.topic = "out";
  o.from = std::move(from);
  o.timeout = 20s;
  return o;
}

// The messages of source `topic` [partition] handed over, in the order of the calls.
std::vector<got> replay(const replay_options& o, std::string_view topic, std::int32_t partition,
                        replay_result& result) {
  std::vector<got> out;
  result = replay_output(
      o, [&](std::string_view t, std::int32_t p) { return t == topic && p == partition; },
      [&](const replayed_message& m) { out.push_back(describe(m)); });
  return out;
}

// 36 forwarded-like events: event i was read at source partition i % 3, offset i / 3, and
// forwarded to output partition (i / 2) % 3, so every output partition holds events of every
// source partition, interleaved. Every fourth event comes from another topic, "other". The
// expected replay of `source_partition` of "events" from output offset 0.
std::vector<got> write_interleaved(const mock_cluster& cluster, std::int32_t source_partition) {
  writer w(cluster);
  std::map<std::int32_t, std::int64_t> next_offset;  // per output partition
  std::vector<got> expected;
  for (int i = 0; i < 36; ++i) {
    const std::string topic = i % 4 == 3 ? "other" : "events";
    const std::int32_t sp = i % 3;
    const std::int64_t so = i / 3;
    const std::int32_t op = (i / 2) % 3;
    header_list headers = {{"trace", fmt::format("t{}", i)}};
    const header_list p = provenance_of(topic, sp, so);
    headers.insert(headers.end(), p.begin(), p.end());
    const std::string key = fmt::format("user-{}", i % 7);
    const std::string value = fmt::format("{{\"n\":{}}}", i);
    w.write("out", op, key, value, 1700000000000 + i, headers);
    const std::int64_t oo = next_offset[op]++;
    if (topic == "events" && sp == source_partition)
      expected.push_back(
          got{op, oo, topic, sp, so, key, value, 1700000000000 + i, fmt::format("t{}", i)});
  }
  w.flush();
  return expected;
}

// Sorted by output partition, stably: the order within each partition is kept.
std::vector<got> by_partition(std::vector<got> v) {
  std::stable_sort(v.begin(), v.end(), [](const got& a, const got& b) {
    return a.output_partition < b.output_partition;
  });
  return v;
}

TEST(OutputReplay, OnlyTheAskedSourcePartitionIsHandedOverInOffsetOrderPerOutputPartition) {
  mock_cluster cluster;
  cluster.create_topic("out", 3);
  const std::vector<got> expected = write_interleaved(cluster, 1);
  ASSERT_FALSE(expected.empty());
  replay_result result;
  const std::vector<got> handed =
      replay(options_for(cluster, {{0, 0}, {1, 0}, {2, 0}}), "events", 1, result);
  // Partitions interleave between themselves; within each, offsets ascend.
  EXPECT_EQ(by_partition(handed), by_partition(expected));
  std::map<std::int32_t, std::int64_t> last;
  for (const got& g : handed) {
    const auto [it, fresh] = last.emplace(g.output_partition, g.output_offset);
    if (!fresh) {
      EXPECT_GT(g.output_offset, it->second);
      it->second = g.output_offset;
    }
  }
  EXPECT_EQ(result.read, 36u);
  EXPECT_EQ(result.matched, expected.size());
  for (std::size_t r = 0; r < kReplaySkipCount; ++r) EXPECT_EQ(result.skipped[r], 0u);
  EXPECT_TRUE(result.complete());
  ASSERT_EQ(result.partitions.size(), 3u);
  for (const partition_replay& p : result.partitions) {
    EXPECT_EQ(p.end_offset, 12) << p.partition;
    EXPECT_EQ(p.next_offset, 12) << p.partition;
    EXPECT_EQ(p.log_start, 0) << p.partition;
    EXPECT_EQ(p.error, error_code::no_error) << p.reason;
  }
}

TEST(OutputReplay, StartOffsetsAreRespectedAndAnEmptyPartitionIsCompleteAtOnce) {
  mock_cluster cluster;
  cluster.create_topic("out", 4);  // partition 3 stays empty
  const std::vector<got> all = write_interleaved(cluster, 0);
  replay_result result;
  const std::vector<got> handed =
      replay(options_for(cluster, {{0, 5}, {2, 0}, {3, 0}, {1, 12}}), "events", 0, result);
  std::vector<got> expected;
  for (const got& g : all) {
    if ((g.output_partition == 0 && g.output_offset >= 5) || g.output_partition == 2)
      expected.push_back(g);
  }
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(by_partition(handed), by_partition(expected));
  EXPECT_EQ(result.read, 7u + 12u);  // 0: offsets 5..11; 2: 0..11; 1 from its end: none
  EXPECT_TRUE(result.complete());
  ASSERT_EQ(result.partitions.size(), 4u);
  EXPECT_EQ(result.partitions[0].partition, 0);
  EXPECT_EQ(result.partitions[0].start_offset, 5);
  EXPECT_EQ(result.partitions[2].partition, 3);
  EXPECT_EQ(result.partitions[2].end_offset, 0);
  EXPECT_EQ(result.partitions[2].next_offset, 0);
  EXPECT_TRUE(result.partitions[2].complete);
  EXPECT_EQ(result.partitions[3].next_offset, 12);
}

TEST(OutputReplay, MessagesWithoutUsableProvenanceAreCountedByReasonAndSkipped) {
  mock_cluster cluster;
  cluster.create_topic("out", 1);
  writer w(cluster);
  const auto write = [&w](const header_list& h) { w.write("out", 0, "k", "v", 1700000000000, h); };
  write({});                                                            // no headers at all
  write({{"trace", "t"}});                                              // none of the three
  write({{kSourceTopicHeader, "events"}, {kSourceOffsetHeader, "1"}});  // no partition
  write({{kSourceTopicHeader, ""}, {kSourcePartitionHeader, "0"}, {kSourceOffsetHeader, "1"}});
  write({{kSourceTopicHeader, std::nullopt},
         {kSourcePartitionHeader, "0"},
         {kSourceOffsetHeader, "1"}});
  write(
      {{kSourceTopicHeader, "events"}, {kSourcePartitionHeader, "x"}, {kSourceOffsetHeader, "1"}});
  write({{kSourceTopicHeader, "events"},
         {kSourcePartitionHeader, "4294967296"},  // beyond int32
         {kSourceOffsetHeader, "1"}});
  write(
      {{kSourceTopicHeader, "events"}, {kSourcePartitionHeader, "0"}, {kSourceOffsetHeader, "-1"}});
  write(
      {{kSourceTopicHeader, "events"}, {kSourcePartitionHeader, "0"}, {kSourceOffsetHeader, "1 "}});
  write(
      {{kSourceTopicHeader, "events"}, {kSourcePartitionHeader, "0"}, {kSourceOffsetHeader, "+2"}});
  write(provenance_of("events", 0, 42));
  w.flush();

  replay_result result;
  const std::vector<got> handed = replay(options_for(cluster, {{0, 0}}), "events", 0, result);
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_EQ(handed[0].source_offset, 42);
  EXPECT_EQ(handed[0].output_offset, 10);
  EXPECT_EQ(result.read, 11u);
  EXPECT_EQ(result.matched, 1u);
  EXPECT_EQ(result.skipped_of(replay_skip::missing_provenance), 3u);
  EXPECT_EQ(result.skipped_of(replay_skip::invalid_topic), 2u);
  EXPECT_EQ(result.skipped_of(replay_skip::invalid_partition), 2u);
  EXPECT_EQ(result.skipped_of(replay_skip::invalid_offset), 3u);
  EXPECT_TRUE(result.complete());
  EXPECT_EQ(to_string(replay_skip::invalid_offset), "invalid_offset");
}

// A partition the topic does not have never reaches an end: it ends with a typed error
// within the deadline, and the partition that exists is read whole all the same.
TEST(OutputReplay, APartitionThatCannotReachItsEndEndsWithATypedErrorWithinTheDeadline) {
  mock_cluster cluster;
  cluster.create_topic("out", 1);
  writer w(cluster);
  w.write("out", 0, "k", "v", 1700000000000, provenance_of("events", 0, 7));
  w.flush();
  replay_options o = options_for(cluster, {{5, 0}, {0, 0}});
  o.timeout = 3s;
  replay_result result;
  const auto started = std::chrono::steady_clock::now();
  const std::vector<got> handed = replay(o, "events", 0, result);
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_LT(took, o.timeout + 5s);  // bounded by the deadline (with room for the close)
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_EQ(handed[0].source_offset, 7);
  EXPECT_FALSE(result.complete());
  ASSERT_EQ(result.partitions.size(), 2u);
  EXPECT_FALSE(result.partitions[0].complete);
  EXPECT_EQ(result.partitions[0].error, error_code::unknown_partition)
      << to_string(result.partitions[0].error) << ": " << result.partitions[0].reason;
  EXPECT_TRUE(result.partitions[1].complete);
  EXPECT_EQ(result.partitions[1].error, error_code::no_error);
}

// A broker that answers after the deadline: the call ends at the deadline all the same,
// every partition with a typed error.
TEST(OutputReplay, TheDeadlineBoundsAReadThatCannotReachTheEnd) {
  mock_cluster cluster;
  cluster.create_topic("out", 2);
  writer w(cluster);
  w.write("out", 1, "k", "v", 1700000000000, provenance_of("events", 0, 7));
  w.flush();
  cluster.set_broker_rtt(-1, 20s);
  replay_options o = options_for(cluster, {{0, 0}, {1, 0}});
  o.timeout = 2s;
  replay_result result;
  const auto started = std::chrono::steady_clock::now();
  const std::vector<got> handed = replay(o, "events", 0, result);
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_LT(took, o.timeout + 5s);
  EXPECT_TRUE(handed.empty());
  EXPECT_FALSE(result.complete());
  for (const partition_replay& p : result.partitions) {
    EXPECT_FALSE(p.complete);
    EXPECT_EQ(p.error, error_code::timed_out) << to_string(p.error) << ": " << p.reason;
  }
  cluster.set_broker_rtt(-1, 0ms);
}

// The end is known but every fetch fails (a leader that keeps moving): the read stops at the
// deadline where it got to, with a typed error.
TEST(OutputReplay, TheDeadlineEndsAReadWhoseFetchesKeepFailing) {
  mock_cluster cluster;
  cluster.create_topic("out", 1);
  writer w(cluster);
  w.write("out", 0, "k", "v", 1700000000000, provenance_of("events", 0, 7));
  w.flush();
  const std::vector<error_code> errors(1000, error_code::not_leader_for_partition);
  cluster.push_request_errors(api_key::fetch, errors);
  replay_options o = options_for(cluster, {{0, 0}});
  o.timeout = 2s;
  replay_result result;
  const auto started = std::chrono::steady_clock::now();
  const std::vector<got> handed = replay(o, "events", 0, result);
  EXPECT_LT(std::chrono::steady_clock::now() - started, o.timeout + 5s);
  EXPECT_TRUE(handed.empty());
  ASSERT_EQ(result.partitions.size(), 1u);
  const partition_replay& p = result.partitions[0];
  EXPECT_FALSE(p.complete);
  EXPECT_EQ(p.end_offset, 1);
  EXPECT_EQ(p.next_offset, 0);
  EXPECT_EQ(p.error, error_code::timed_out) << to_string(p.error) << ": " << p.reason;
  EXPECT_EQ(p.reason, "out [0]: its end, offset 1, not reached within 2000 ms");
  cluster.clear_request_errors(api_key::fetch);
}

// The log no longer holds the start (the mock keeps 5 MiB per partition, as retention
// would): the read begins at the log start, which the result tells.
TEST(OutputReplay, AStartBelowTheLogStartReadsFromTheLogStartAndSaysSo) {
  mock_cluster cluster;
  cluster.create_topic("out", 1);
  writer w(cluster);
  const std::string large(256 * 1024, 'x');
  for (int i = 0; i < 30; ++i) {  // 7.5 MiB, one batch each (flushed one by one)
    w.write("out", 0, "k", large, 1700000000000 + i, provenance_of("events", 0, i));
    w.flush();
  }
  replay_result result;
  const std::vector<got> handed = replay(options_for(cluster, {{0, 0}}), "events", 0, result);
  ASSERT_EQ(result.partitions.size(), 1u);
  const partition_replay& p = result.partitions[0];
  EXPECT_TRUE(p.complete) << p.reason;
  EXPECT_EQ(p.end_offset, 30);
  EXPECT_GT(p.log_start, 0);
  EXPECT_EQ(result.read, static_cast<std::uint64_t>(30 - p.log_start));
  ASSERT_FALSE(handed.empty());
  EXPECT_EQ(handed.front().source_offset, p.log_start);
  EXPECT_EQ(handed.back().source_offset, 29);
}

TEST(OutputReplay, APartitionAskedTwiceOrANegativeOffsetIsRefused) {
  mock_cluster cluster;
  const auto never = [](std::string_view, std::int32_t) { return false; };
  const auto ignore = [](const replayed_message&) {};
  EXPECT_THROW((void)replay_output(options_for(cluster, {{0, 0}, {0, 3}}), never, ignore),
               std::invalid_argument);
  EXPECT_THROW((void)replay_output(options_for(cluster, {{0, -1}}), never, ignore),
               std::invalid_argument);
}

// What kafka::sink forwards reads back with the place each input message was read: the
// round trip a restore relies on.
TEST(OutputReplay, WhatTheSinkForwardedReadsBackWithTheInputsTopicPartitionAndOffset) {
  mock_cluster cluster;
  cluster.create_topic("events", 2);
  cluster.create_topic("out", 3);
  writer w(cluster);
  for (int i = 0; i < 20; ++i)
    w.write("events", i % 2, fmt::format("user-{}", i), fmt::format("{{\"n\":{}}}", i),
            1700000000000 + i, {{"trace", fmt::format("t{}", i)}});
  w.flush();

  client_config config(property_map{{"bootstrap.servers", cluster.bootstrap_servers()},
                                    {"group.id", "replay-test-reader"},
                                    {"enable.auto.commit", "false"}});
  handle_ptr consumer = std::move(config).create(RD_KAFKA_CONSUMER);
  topic_partition_list_ptr list(rd_kafka_topic_partition_list_new(2));
  for (int p = 0; p < 2; ++p)
    rd_kafka_topic_partition_list_add(list.get(), "events", p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  ASSERT_EQ(rd_kafka_assign(consumer.get(), list.get()), RD_KAFKA_RESP_ERR_NO_ERROR);
  int delivered = 0;
  sink s(sink_options{cluster.bootstrap_servers(), {}, {"out"}},
         [&delivered](std::uint64_t, error_code err, std::string_view) {
           if (err == error_code::no_error) ++delivered;
         });
  std::vector<std::pair<std::int64_t, std::string>> expected;  // of partition 1: offset, value
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  int consumed = 0;
  while (consumed < 20 && std::chrono::steady_clock::now() < deadline) {
    message_ptr m(rd_kafka_consumer_poll(consumer.get(), 100));
    if (!m || m->err != RD_KAFKA_RESP_ERR_NO_ERROR) continue;
    ++consumed;
    ASSERT_EQ(s.forward(0, m.get(), {}, 0, [] { return false; }), error_code::no_error);
    if (m->partition == 1)
      expected.emplace_back(m->offset, std::string(static_cast<const char*>(m->payload), m->len));
  }
  ASSERT_TRUE(s.flush(10s));
  rd_kafka_consumer_close(consumer.get());
  ASSERT_EQ(delivered, 20);

  std::vector<std::pair<std::int64_t, std::string>> read_back;
  std::vector<std::string> traces;
  const replay_result result = replay_output(
      options_for(cluster, {{0, 0}, {1, 0}, {2, 0}}),
      [](std::string_view t, std::int32_t p) { return t == "events" && p == 1; },
      [&](const replayed_message& m) {
        read_back.emplace_back(m.source.offset, std::string(m.view.value));
        traces.push_back(describe(m).trace.value_or("none"));
      });
  EXPECT_TRUE(result.complete());
  EXPECT_EQ(result.read, 20u);
  EXPECT_EQ(result.matched, 10u);
  std::sort(read_back.begin(), read_back.end());
  EXPECT_EQ(read_back, expected);
  for (const std::string& t : traces) EXPECT_NE(t, "none");
}

}  // namespace
}  // namespace sketchd::kafka
