// The daemon's Kafka sink against the in-process mock cluster: a forwarded message keeps
// its key, value, headers and timestamp byte for byte, gains the provenance headers (input
// topic, partition and offset, in decimal text; one of those names on the input is
// replaced) and lands where Java's partitioner puts its key, every message gets one delivery report
// with its opaque, an event built by the daemon is produced as given, a message over
// message.max.bytes is refused at once (no report follows), and a full queue with the brokers down
// gives up when told to. The processor's forwarder is this sink: what the processor forwards is the
// consumed message.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "sketchd/kafka/client.h"
#include "sketchd/kafka/mock_cluster.h"
#include "sketchd/kafka/sink.h"
#include "sketchd/pipeline/pipeline.h"
#include "sketchd/processor/kafka_forwarder.h"
#include "sketchd/processor/processor.h"

namespace sketchd::kafka {
namespace {

using namespace std::chrono_literals;

// What a test compares of a message.
struct seen_message {
  std::int32_t partition = -1;
  std::string key;
  std::string value;
  bool key_null = false;
  std::int64_t timestamp_ms = -1;
  std::vector<std::pair<std::string, std::string>> headers;  // name, value ("<null>" if none)

  friend bool operator==(const seen_message&, const seen_message&) = default;
};

seen_message describe(const rd_kafka_message_t* m) {
  seen_message s;
  s.partition = m->partition;
  s.key_null = m->key == nullptr;
  if (m->key) s.key.assign(static_cast<const char*>(m->key), m->key_len);
  if (m->payload) s.value.assign(static_cast<const char*>(m->payload), m->len);
  rd_kafka_timestamp_type_t type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
  s.timestamp_ms = rd_kafka_message_timestamp(m, &type);
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* name = nullptr;
    const void* value = nullptr;
    std::size_t size = 0;
    for (std::size_t i = 0;
         rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
         ++i) {
      s.headers.emplace_back(name,
                             value ? std::string(static_cast<const char*>(value), size) : "<null>");
    }
  }
  return s;
}

// A consumer of `topic` (its `partitions` partitions from the start).
class topic_reader {
 public:
  topic_reader(const mock_cluster& cluster, const std::string& topic, int partitions) {
    client_config config(property_map{{"bootstrap.servers", cluster.bootstrap_servers()},
                                      {"group.id", "sink-test-reader"},
                                      {"enable.auto.commit", "false"}});
    consumer_ = std::move(config).create(RD_KAFKA_CONSUMER);
    topic_partition_list_ptr list(rd_kafka_topic_partition_list_new(partitions));
    for (int p = 0; p < partitions; ++p) {
      rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), p)->offset =
          RD_KAFKA_OFFSET_BEGINNING;
    }
    EXPECT_EQ(rd_kafka_assign(consumer_.get(), list.get()), RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  // The messages still held go first: the handle waits for them when it is destroyed.
  ~topic_reader() {
    for (rd_kafka_message_t* m : kept_) rd_kafka_message_destroy(m);
    rd_kafka_consumer_close(consumer_.get());
  }
  topic_reader(const topic_reader&) = delete;
  topic_reader& operator=(const topic_reader&) = delete;

  // Messages until `count` arrived or 15 s passed; kept() holds them natively.
  std::vector<seen_message> read(std::size_t count) {
    std::vector<seen_message> out;
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer_.get(), 100);
      if (m == nullptr) continue;
      if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_message_destroy(m);
        continue;
      }
      out.push_back(describe(m));
      kept_.push_back(m);
    }
    return out;
  }
  [[nodiscard]] const std::vector<rd_kafka_message_t*>& kept() const { return kept_; }

 private:
  handle_ptr consumer_;
  std::vector<rd_kafka_message_t*> kept_;
};

std::vector<seen_message> read_topic(const mock_cluster& cluster, const std::string& topic,
                                     int partitions, std::size_t count) {
  topic_reader reader(cluster, topic, partitions);
  return reader.read(count);
}

// `in` as forwarded from topic `topic` [partition] at `offset`: its headers, then this hop's
// provenance in decimal text.
seen_message with_provenance(seen_message in, std::string_view topic, std::int32_t partition,
                             std::int64_t offset) {
  in.headers.emplace_back(kSourceTopicHeader, topic);
  in.headers.emplace_back(kSourcePartitionHeader, std::to_string(partition));
  in.headers.emplace_back(kSourceOffsetHeader, std::to_string(offset));
  return in;
}

// What each input message of `reader` becomes when forwarded.
std::vector<seen_message> forwarded(const std::vector<seen_message>& in,
                                    const std::vector<rd_kafka_message_t*>& natives) {
  std::vector<seen_message> out;
  for (std::size_t i = 0; i < in.size(); ++i)
    out.push_back(with_provenance(in[i], rd_kafka_topic_name(natives[i]->rkt),
                                  natives[i]->partition, natives[i]->offset));
  return out;
}

// Input messages with everything a message can carry: a key or none, headers (repeated,
// without a value), an explicit timestamp, an empty value.
void produce_inputs(const mock_cluster& cluster) {
  client_config config(property_map{{"bootstrap.servers", cluster.bootstrap_servers()}});
  handle_ptr producer = std::move(config).create(RD_KAFKA_PRODUCER);
  for (int i = 0; i < 20; ++i) {
    const std::string key = fmt::format("user-{}", i);
    const std::string value = i == 3 ? std::string() : fmt::format("{{\"n\":{}}}", i);
    rd_kafka_headers_t* headers = rd_kafka_headers_new(3);
    rd_kafka_header_add(headers, "trace", -1, "t1", -1);
    rd_kafka_header_add(headers, "trace", -1, "t2", -1);
    rd_kafka_header_add(headers, "empty", -1, nullptr, 0);
    const bool keyless = i == 5;
    throw_if_error(
        rd_kafka_producev(producer.get(), RD_KAFKA_V_TOPIC("in"), RD_KAFKA_V_PARTITION(0),
                          RD_KAFKA_V_KEY(keyless ? nullptr : key.data(), keyless ? 0 : key.size()),
                          RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                          RD_KAFKA_V_TIMESTAMP(1700000000000 + i), RD_KAFKA_V_HEADERS(headers),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
        "produce");
  }
  ASSERT_EQ(rd_kafka_flush(producer.get(), 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
}

struct reports {
  std::map<std::uint64_t, error_code> by_opaque;
  int count = 0;
};

sink::delivery_function recorder(reports& r) {
  return [&r](std::uint64_t opaque, error_code err, std::string_view) {
    r.by_opaque[opaque] = err;
    ++r.count;
  };
}

const auto kNeverGiveUp = [] { return false; };

TEST(KafkaSink, ForwardKeepsKeyValueHeadersAndTimestampAndPartitionsByKey) {
  mock_cluster cluster;
  cluster.create_topic("in", 1);
  cluster.create_topic("out", 3);
  produce_inputs(cluster);
  topic_reader reader(cluster, "in", 1);
  const std::vector<seen_message> in = reader.read(20);
  ASSERT_EQ(in.size(), 20U);
  const std::vector<rd_kafka_message_t*>& inputs = reader.kept();

  reports r;
  sink s(sink_options{cluster.bootstrap_servers(), {}, {"out"}}, recorder(r));
  const std::size_t out_topic = s.topic_index("out");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(s.forward(out_topic, inputs[i], {}, 100 + i, kNeverGiveUp), error_code::no_error);
  }
  ASSERT_TRUE(s.flush(10s));
  EXPECT_EQ(s.in_flight(), 0U);
  ASSERT_EQ(r.count, 20);
  for (std::uint64_t i = 0; i < 20; ++i) EXPECT_EQ(r.by_opaque.at(100 + i), error_code::no_error);

  std::vector<seen_message> out = read_topic(cluster, "out", 3, 20);
  ASSERT_EQ(out.size(), 20U);
  // Same content; partitions are the murmur2 partitioner's, the same for equal keys, and
  // the order within a partition is kept.
  std::map<std::string, std::int32_t> partition_of;
  for (seen_message& o : out) {
    if (!o.key_null) partition_of[o.key] = o.partition;
  }
  const auto strip = [](std::vector<seen_message> v) {
    for (seen_message& m : v) m.partition = -1;
    std::sort(v.begin(), v.end(), [](const seen_message& a, const seen_message& b) {
      return a.timestamp_ms < b.timestamp_ms;
    });
    return v;
  };
  EXPECT_EQ(strip(out), strip(forwarded(in, inputs)));
  EXPECT_EQ(in[3].value, "");
  EXPECT_TRUE(in[5].key_null);
  EXPECT_EQ(in[0].headers, (std::vector<std::pair<std::string, std::string>>{
                               {"trace", "t1"}, {"trace", "t2"}, {"empty", "<null>"}}));
  // The partition of each key is the Java client's (murmur2, which librdkafka exports).
  ASSERT_EQ(partition_of.size(), 19U);
  std::set<std::int32_t> used;
  for (const auto& [key, partition] : partition_of) {
    EXPECT_EQ(partition, rd_kafka_msg_partitioner_murmur2(nullptr, key.data(), key.size(), 3,
                                                          nullptr, nullptr))
        << key;
    used.insert(partition);
  }
  EXPECT_EQ(used.size(), 3U);
}

// The provenance a restore reads back: decimal text, as kcat's %h shows it; an input that
// already carries one of those headers (the output of another sketchd) has it replaced, its
// other headers kept in their order. A dead letter's headers (extra) come after them, in
// place of earlier ones of their names too.
TEST(KafkaSink, ForwardAddsThisHopsProvenanceAndReplacesAnEarlierOne) {
  mock_cluster cluster;
  cluster.create_topic("in", 2);
  cluster.create_topic("out", 1);
  {
    client_config config(property_map{{"bootstrap.servers", cluster.bootstrap_servers()}});
    handle_ptr producer = std::move(config).create(RD_KAFKA_PRODUCER);
    for (int i = 0; i < 3; ++i) {
      rd_kafka_headers_t* headers = rd_kafka_headers_new(4);
      rd_kafka_header_add(headers, kSourceOffsetHeader, -1, "999", -1);
      rd_kafka_header_add(headers, "trace", -1, "t1", -1);
      rd_kafka_header_add(headers, kPipelineHeader, -1, "upstream", -1);
      rd_kafka_header_add(headers, kSourceTopicHeader, -1, "upstream", -1);
      rd_kafka_header_add(headers, kSourceOffsetHeader, -1, "1000", -1);
      throw_if_error(
          rd_kafka_producev(producer.get(), RD_KAFKA_V_TOPIC("in"), RD_KAFKA_V_PARTITION(1),
                            RD_KAFKA_V_KEY("k", 1), RD_KAFKA_V_VALUE(const_cast<char*>("v"), 1),
                            RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                            RD_KAFKA_V_END),
          "produce");
    }
    ASSERT_EQ(rd_kafka_flush(producer.get(), 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  topic_reader reader(cluster, "in", 2);
  ASSERT_EQ(reader.read(3).size(), 3U);
  reports r;
  sink s(sink_options{cluster.bootstrap_servers(), {}, {"out"}}, recorder(r));
  const std::array<header, 2> dead_letter{
      {{kErrorReasonHeader, "invalid_json"}, {kPipelineHeader, "orders"}}};
  for (const rd_kafka_message_t* m : reader.kept()) {
    const bool last = m == reader.kept().back();
    EXPECT_EQ(
        s.forward(0, m, last ? std::span<const header>(dead_letter) : std::span<const header>(), 1,
                  kNeverGiveUp),
        error_code::no_error);
  }
  ASSERT_TRUE(s.flush(10s));
  const std::vector<seen_message> out = read_topic(cluster, "out", 1, 3);
  ASSERT_EQ(out.size(), 3U);
  using headers = std::vector<std::pair<std::string, std::string>>;
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(out[i].headers, (headers{{"trace", "t1"},
                                       {"sketchd-pipeline", "upstream"},
                                       {"sketchd-source-topic", "in"},
                                       {"sketchd-source-partition", "1"},
                                       {"sketchd-source-offset", std::to_string(i)}}));
  }
  EXPECT_EQ(out[2].headers, (headers{{"trace", "t1"},
                                     {"sketchd-source-topic", "in"},
                                     {"sketchd-source-partition", "1"},
                                     {"sketchd-source-offset", "2"},
                                     {"sketchd-error-reason", "invalid_json"},
                                     {"sketchd-pipeline", "orders"}}));
}

TEST(KafkaSink, ProducedEventIsWrittenAsGiven) {
  mock_cluster cluster;
  cluster.create_topic("alerts", 1);
  reports r;
  sink s(sink_options{cluster.bootstrap_servers(), {}, {"alerts"}}, recorder(r));
  EXPECT_EQ(s.produce(s.topic_index("alerts"), "u1", R"({"event":"enter"})", 1700000000123, 7,
                      kNeverGiveUp),
            error_code::no_error);
  ASSERT_TRUE(s.flush(10s));
  EXPECT_EQ(r.by_opaque.at(7), error_code::no_error);
  const std::vector<seen_message> out = read_topic(cluster, "alerts", 1, 1);
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].key, "u1");
  EXPECT_EQ(out[0].value, R"({"event":"enter"})");
  EXPECT_EQ(out[0].timestamp_ms, 1700000000123);
}

// The output positions a snapshot records: where each partition ended when learn_ends()
// asked (another producer's messages included), then past this sink's own deliveries.
TEST(KafkaSink, EndsAreTheLearntEndsThenPastEachDelivery) {
  mock_cluster cluster;
  cluster.create_topic("out", 2);
  cluster.create_topic("alerts", 1);
  reports r;
  sink other(sink_options{cluster.bootstrap_servers(), {}, {"out"}}, recorder(r));
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(other.produce(0, "a", "v", 1, 1, kNeverGiveUp), error_code::no_error);
  ASSERT_TRUE(other.flush(10s));
  sink s(sink_options{cluster.bootstrap_servers(), {}, {"out", "alerts"}}, recorder(r));
  EXPECT_TRUE(s.ends().empty());  // nothing learnt, nothing delivered
  s.learn_ends();
  for (int i = 0; i < 100 && s.ends().size() < 3; ++i) std::this_thread::sleep_for(100ms);
  using ends = std::vector<std::tuple<std::size_t, std::int32_t, std::int64_t>>;
  const auto as_tuples = [](const std::vector<sink::output_end>& e) {
    ends out;
    for (const auto& x : e) out.emplace_back(x.topic, x.partition, x.next_offset);
    std::sort(out.begin(), out.end());
    return out;
  };
  const ends learnt = as_tuples(s.ends());
  ASSERT_EQ(learnt.size(), 3u);
  std::int64_t before = 0;
  for (const auto& [topic, partition, next] : learnt) {
    if (topic == 0)
      before += next;
    else
      EXPECT_EQ(next, 0);
  }
  EXPECT_EQ(before, 3);  // the other producer's 3 messages, on one partition
  for (int i = 0; i < 2; ++i)
    ASSERT_EQ(s.produce(0, "a", "v", 1, 2, kNeverGiveUp), error_code::no_error);
  ASSERT_EQ(s.produce(1, "x", "v", 1, 3, kNeverGiveUp), error_code::no_error);
  ASSERT_TRUE(s.flush(10s));
  std::int64_t after = 0;
  for (const auto& [topic, partition, next] : as_tuples(s.ends())) {
    if (topic == 0)
      after += next;
    else
      EXPECT_EQ(next, 1);
  }
  EXPECT_EQ(after, 5);
}

// A cluster that cannot be reached: nothing learnt (a warning says so), and the sink still
// goes away at once.
TEST(KafkaSink, EndsOfABrokerThatIsDownAreNotLearnt) {
  reports r;
  auto start = std::chrono::steady_clock::now();
  {
    sink s(sink_options{"127.0.0.1:1", {}, {"out"}}, recorder(r));
    s.learn_ends();
    std::this_thread::sleep_for(1500ms);
    EXPECT_TRUE(s.ends().empty());
    start = std::chrono::steady_clock::now();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
}

// Offsets are stored on success reports: a property asking for error reports only would
// stall consumption for good. It is overridden, like enable.idempotence.
TEST(KafkaSink, EveryDeliveryIsReportedWhateverTheProperties) {
  mock_cluster cluster;
  cluster.create_topic("out", 1);
  reports r;
  sink s(sink_options{cluster.bootstrap_servers(),
                      {{"delivery.report.only.error", "true"}, {"enable.idempotence", "false"}},
                      {"out"}},
         recorder(r));
  for (std::uint64_t i = 1; i <= 3; ++i)
    EXPECT_EQ(s.produce(0, "k", "v", 1, i, kNeverGiveUp), error_code::no_error);
  ASSERT_TRUE(s.flush(10s));
  EXPECT_EQ(r.count, 3);
  for (std::uint64_t i = 1; i <= 3; ++i) EXPECT_EQ(r.by_opaque.at(i), error_code::no_error);
}

// librdkafka checks message.max.bytes before compressing; a broker limits batches as they
// arrive, compressed. By default the producer leaves the judgment to the output broker, so
// that a large message the input topic held compressed is not refused here. (The mock
// broker has no size limit.)
TEST(KafkaSink, TheOutputBrokerJudgesAMessagesSizeNotTheProducer) {
  mock_cluster cluster;
  cluster.create_topic("out", 1);
  reports r;
  sink s(sink_options{cluster.bootstrap_servers(), {}, {"out"}}, recorder(r));
  const std::string large(2'000'000, 'a');  // over a default broker's 1,048,588 bytes
  EXPECT_EQ(s.produce(0, "k", large, 1, 1, kNeverGiveUp), error_code::no_error);
  ASSERT_TRUE(s.flush(10s));
  EXPECT_EQ(r.count, 1);
  EXPECT_EQ(r.by_opaque.at(1), error_code::no_error);
}

TEST(KafkaSink, AMessageOverMessageMaxBytesIsRefusedAtOnceWithoutAReport) {
  mock_cluster cluster;
  cluster.create_topic("out", 1);
  reports r;
  sink s(sink_options{cluster.bootstrap_servers(), {{"message.max.bytes", "1048588"}}, {"out"}},
         recorder(r));
  const std::string fits(1'040'000, 'a');
  const std::string too_large(1'100'000, 'b');
  EXPECT_EQ(s.produce(0, "k", fits, 1, 1, kNeverGiveUp), error_code::no_error);
  EXPECT_EQ(s.produce(0, "k", too_large, 1, 2, kNeverGiveUp), error_code::msg_size_too_large);
  ASSERT_TRUE(s.flush(10s));
  EXPECT_EQ(r.count, 1);
  EXPECT_EQ(r.by_opaque.at(1), error_code::no_error);
  EXPECT_FALSE(r.by_opaque.contains(2));
}

sketchd::config forwarding_config() {
  sketchd::pipeline_config p;
  p.name = "orders";
  p.topics = {"in"};
  p.item.from = sketchd::item_source::value;
  p.clock = sketchd::clock_kind::wall;
  p.dedup = sketchd::dedup_config{.window = std::chrono::minutes(60),
                                  .capacity = 1000,
                                  .fpr = 0.001,
                                  .output_topic = "out",
                                  .duplicates_topic = "dups"};
  sketchd::config c;
  c.pipelines.push_back(p);
  sketchd::pipeline_config other = p;
  other.name = "copy";
  other.dedup->duplicates_topic.reset();  // "out" again: one topic of the forwarder
  c.pipelines.push_back(other);
  return c;
}

TEST(KafkaForwarder, TakesEachOutputTopicOnceAndIsNotNeededWithoutOne) {
  const sketchd::config c = forwarding_config();
  EXPECT_EQ(sketchd::output_topics(c), (std::vector<std::string>{"out", "dups"}));
  sketchd::config none = c;
  for (auto& p : none.pipelines) {
    p.dedup->output_topic.reset();
    p.dedup->duplicates_topic.reset();
  }
  EXPECT_TRUE(sketchd::output_topics(none).empty());
  EXPECT_EQ(sketchd::make_kafka_forwarder(none, "127.0.0.1:9"), nullptr);
}

// Consumed messages through the processor and its Kafka forwarder: each first-seen one
// reaches the output topic as it was read (key, value, every header, timestamp) with its
// provenance, each duplicate the duplicates topic; message 3, with an empty value, has no
// item.
TEST(KafkaForwarder, TheProcessorForwardsTheConsumedMessageWithItsHeadersAndTimestamp) {
  mock_cluster cluster;
  cluster.create_topic("in", 1);
  cluster.create_topic("out", 3);
  cluster.create_topic("dups", 1);
  produce_inputs(cluster);
  topic_reader reader(cluster, "in", 1);
  const std::vector<seen_message> in = reader.read(20);
  ASSERT_EQ(in.size(), 20U);

  sketchd::config c = forwarding_config();
  c.pipelines.pop_back();
  sketchd::pipeline p(c.pipelines[0]);
  sketchd::processor proc(c, {&p}, {"in"},
                          sketchd::make_kafka_forwarder(c, cluster.bootstrap_servers()), {});
  proc.assigned({0, 0}, std::nullopt);
  std::vector<record> batch;
  for (const rd_kafka_message_t* m : reader.kept()) {
    record r;
    r.offset = m->offset;
    r.view.value = std::string_view(static_cast<const char*>(m->payload), m->len);
    r.native = m;
    batch.push_back(r);
  }
  // The value of message 7 again: a duplicate.
  batch.push_back(batch[7]);
  batch.back().offset = 20;
  proc.process(batch, 1700000000000);
  std::vector<partition_offset> offsets;
  ASSERT_TRUE(proc.flush(10s, offsets));
  ASSERT_FALSE(offsets.empty());
  EXPECT_EQ(offsets.back().next_offset, 21);
  EXPECT_TRUE(proc.quiescent());

  const auto by_time = [](std::vector<seen_message> v) {
    for (seen_message& m : v) m.partition = -1;
    std::sort(v.begin(), v.end(), [](const seen_message& a, const seen_message& b) {
      return a.timestamp_ms < b.timestamp_ms;
    });
    return v;
  };
  std::vector<seen_message> first_seen = forwarded(in, reader.kept());
  first_seen.erase(first_seen.begin() + 3);
  EXPECT_EQ(by_time(read_topic(cluster, "out", 3, 19)), by_time(first_seen));
  // The duplicate is the native message of offset 7 handed over again: its provenance says 7.
  EXPECT_EQ(by_time(read_topic(cluster, "dups", 1, 1)),
            by_time({with_provenance(in[7], "in", 0, 7)}));
}

TEST(KafkaSink, AFullQueueWithTheBrokersDownGivesUpWhenTold) {
  mock_cluster cluster;
  cluster.create_topic("out", 1);
  cluster.set_broker_down(1);
  reports r;
  sink s(sink_options{cluster.bootstrap_servers(),
                      {{"queue.buffering.max.messages", "10"}, {"message.timeout.ms", "60000"}},
                      {"out"}},
         recorder(r));
  int give_up_calls = 0;
  const auto give_up = [&give_up_calls] { return ++give_up_calls > 3; };
  error_code last = error_code::no_error;
  int queued = 0;
  for (int i = 0; i < 20 && last == error_code::no_error; ++i) {
    last = s.produce(0, "k", "v", 1, static_cast<std::uint64_t>(i), give_up);
    if (last == error_code::no_error) ++queued;
  }
  EXPECT_EQ(last, error_code::queue_full);
  EXPECT_EQ(queued, 10);
  EXPECT_EQ(s.in_flight(), 10U);
  EXPECT_EQ(r.count, 0);
  // Back up: everything queued is delivered, nothing twice.
  cluster.set_broker_up(1);
  ASSERT_TRUE(s.flush(30s));
  EXPECT_EQ(r.count, 10);
  EXPECT_EQ(read_topic(cluster, "out", 1, 10).size(), 10U);
}

}  // namespace
}  // namespace sketchd::kafka
