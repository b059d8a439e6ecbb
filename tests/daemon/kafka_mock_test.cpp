// The embedded broker: librdkafka's mock cluster behind sketchd::kafka::mock_cluster,
// reached by plain librdkafka clients over loopback.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sketchd/kafka/client.h"
#include "sketchd/kafka/mock_cluster.h"

namespace sketchd::kafka {
namespace {

using namespace std::chrono_literals;

constexpr int kFlushTimeoutMs = 10000;

// Delivery reports of one producer, appended by its callback from rd_kafka_poll/flush on
// the test's thread.
struct delivery_log {
  std::vector<error_code> results;
};

void record_delivery(rd_kafka_t* /*producer*/, const rd_kafka_message_t* message, void* opaque) {
  static_cast<delivery_log*>(opaque)->results.push_back(to_error_code(message->err));
}

handle_ptr make_producer(const mock_cluster& cluster, delivery_log& log,
                         const property_map& overrides = {}) {
  property_map properties{{"bootstrap.servers", cluster.bootstrap_servers()},
                          {"enable.idempotence", "true"},
                          {"linger.ms", "5"}};
  for (const auto& [name, value] : overrides) properties[name] = value;
  client_config config(properties);
  rd_kafka_conf_set_dr_msg_cb(config.get(), &record_delivery);
  rd_kafka_conf_set_opaque(config.get(), &log);
  return std::move(config).create(RD_KAFKA_PRODUCER);
}

void produce(rd_kafka_t* producer, const std::string& topic, std::string_view key,
             std::string_view value) {
  throw_if_error(rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(topic.c_str()),
                                   RD_KAFKA_V_KEY(key.data(), key.size()),
                                   RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                                   RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
                 "produce", error_context(topic));
}

handle_ptr make_consumer(const mock_cluster& cluster, const std::string& group) {
  client_config config(
      property_map{{"bootstrap.servers", cluster.bootstrap_servers()},
                   {"group.id", group},
                   {"auto.offset.reset", "earliest"},
                   {"enable.auto.commit", "false"},
                   {"partition.assignment.strategy", "cooperative-sticky"},
                   // The mock waits session.timeout.ms − 1 s for members to rejoin.
                   {"session.timeout.ms", "6000"}});
  handle_ptr consumer = std::move(config).create(RD_KAFKA_CONSUMER);
  throw_if_error(rd_kafka_poll_set_consumer(consumer.get()), "redirect the main queue");
  return consumer;
}

TEST(MockCluster, BootstrapServersListOneLoopbackAddressPerBroker) {
  const mock_cluster cluster(3);
  EXPECT_EQ(cluster.broker_count(), 3);

  std::set<std::string> ports;
  std::string_view rest = cluster.bootstrap_servers();
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view address = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    ASSERT_TRUE(address.starts_with("127.0.0.1:")) << address;
    const std::string port(address.substr(std::string_view("127.0.0.1:").size()));
    EXPECT_GT(std::stoi(port), 0);
    EXPECT_LE(std::stoi(port), 65535);
    ports.insert(port);
  }
  EXPECT_EQ(ports.size(), 3u) << cluster.bootstrap_servers();
}

TEST(MockCluster, RejectsBrokerCountsOutOfRange) {
  EXPECT_THROW(mock_cluster(0), std::invalid_argument);
  EXPECT_THROW(mock_cluster(mock_cluster::kMaxBrokers + 1), std::invalid_argument);
}

TEST(MockCluster, CreateTopicRejectsIllegalArgumentsAndExistingTopics) {
  mock_cluster cluster(1);
  EXPECT_THROW(cluster.create_topic("", 1), std::invalid_argument);
  EXPECT_THROW(cluster.create_topic("has space", 1), std::invalid_argument);
  EXPECT_THROW(cluster.create_topic("..", 1), std::invalid_argument);
  EXPECT_THROW(cluster.create_topic("events", 0), std::invalid_argument);
  EXPECT_THROW(cluster.create_topic("events", mock_cluster::kMaxPartitions + 1),
               std::invalid_argument);
  EXPECT_THROW(cluster.create_topic("events", 1, 2), std::invalid_argument);  // one broker

  cluster.create_topic("events", 3);
  try {
    cluster.create_topic("events", 3);
    FAIL() << "a second create_topic(\"events\") succeeded";
  } catch (const kafka_error& e) {
    EXPECT_EQ(e.code(), error_code::topic_already_exists);
    EXPECT_EQ(e.context().topic, "events");
    EXPECT_NE(std::string_view(e.what()).find("events"), std::string_view::npos) << e.what();
  }
}

// Produce, consume in a group with the cooperative-sticky assignor, commit, and read the
// committed offsets back from the group coordinator. About 3 s: the mock elects the
// group's leader 3 s after the first member joins.
TEST(MockCluster, MessagesRoundTripThroughAConsumerGroupThatCommits) {
  mock_cluster cluster(1);
  const std::string topic = "events";
  constexpr int kPartitions = 3;
  constexpr int kMessages = 30;
  cluster.create_topic(topic, kPartitions);

  std::map<std::string, std::string> sent;
  for (int i = 0; i < kMessages; ++i) {
    sent["user-" + std::to_string(i)] = "event " + std::to_string(i);
  }
  delivery_log deliveries;
  {
    const handle_ptr producer = make_producer(cluster, deliveries);
    for (const auto& [key, value] : sent) produce(producer.get(), topic, key, value);
    ASSERT_EQ(rd_kafka_flush(producer.get(), kFlushTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  ASSERT_EQ(deliveries.results.size(), sent.size());
  for (const error_code result : deliveries.results) EXPECT_EQ(result, error_code::no_error);

  const std::string group = "round-trip";
  const handle_ptr consumer = make_consumer(cluster, group);
  {
    const topic_partition_list_ptr subscription(rd_kafka_topic_partition_list_new(1));
    rd_kafka_topic_partition_list_add(subscription.get(), topic.c_str(), RD_KAFKA_PARTITION_UA);
    throw_if_error(rd_kafka_subscribe(consumer.get(), subscription.get()), "subscribe");
  }
  std::map<std::string, std::string> received;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (received.size() < sent.size() && std::chrono::steady_clock::now() < deadline) {
    const message_ptr message(rd_kafka_consumer_poll(consumer.get(), 100));
    if (!message) continue;
    ASSERT_EQ(message->err, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_message_errstr(message.get());
    received.emplace(std::string(static_cast<const char*>(message->key), message->key_len),
                     std::string(static_cast<const char*>(message->payload), message->len));
  }
  EXPECT_EQ(received, sent);
  EXPECT_STREQ(rd_kafka_rebalance_protocol(consumer.get()), "COOPERATIVE");

  // Synchronous commit of the consumed positions.
  throw_if_error(rd_kafka_commit(consumer.get(), nullptr, 0), "commit");
  throw_if_error(rd_kafka_consumer_close(consumer.get()), "close consumer");

  // Another client of the group, not subscribed, reads the committed offsets: each is the
  // partition's end offset, and they add up to the messages produced.
  const handle_ptr reader = make_consumer(cluster, group);
  const topic_partition_list_ptr partitions(rd_kafka_topic_partition_list_new(kPartitions));
  for (int p = 0; p < kPartitions; ++p) {
    rd_kafka_topic_partition_list_add(partitions.get(), topic.c_str(), p);
  }
  throw_if_error(rd_kafka_committed(reader.get(), partitions.get(), 5000),
                 "read committed offsets");
  std::int64_t committed_total = 0;
  for (int p = 0; p < kPartitions; ++p) {
    const rd_kafka_topic_partition_t& tp = partitions->elems[p];
    ASSERT_EQ(tp.err, RD_KAFKA_RESP_ERR_NO_ERROR) << "partition " << p;
    std::int64_t low = 0;
    std::int64_t high = 0;
    throw_if_error(
        rd_kafka_query_watermark_offsets(reader.get(), topic.c_str(), p, &low, &high, 5000),
        "query watermarks", error_context(topic, p));
    EXPECT_EQ(tp.offset, high) << "partition " << p;
    committed_total += tp.offset;
  }
  EXPECT_EQ(committed_total, kMessages);
  throw_if_error(rd_kafka_consumer_close(reader.get()), "close reader");
}

TEST(MockCluster, UnknownTopicIsAutoCreatedOnFirstMetadataRequest) {
  const mock_cluster cluster(1);
  delivery_log deliveries;
  const handle_ptr producer = make_producer(cluster, deliveries);
  const std::unique_ptr<rd_kafka_topic_t, decltype(&rd_kafka_topic_destroy)> topic(
      rd_kafka_topic_new(producer.get(), "never-created", nullptr), &rd_kafka_topic_destroy);
  const rd_kafka_metadata_t* metadata = nullptr;
  throw_if_error(rd_kafka_metadata(producer.get(), 0, topic.get(), &metadata, 5000), "metadata");
  const std::unique_ptr<const rd_kafka_metadata_t, decltype(&rd_kafka_metadata_destroy)> owned(
      metadata, &rd_kafka_metadata_destroy);
  ASSERT_EQ(metadata->topic_cnt, 1);
  EXPECT_EQ(metadata->topics[0].err, RD_KAFKA_RESP_ERR_NO_ERROR);
  EXPECT_EQ(metadata->topics[0].partition_cnt, mock_cluster::kAutoCreatePartitions);
}

TEST(MockCluster, PushedRequestErrorsFailTheNextRequestsInOrder) {
  mock_cluster cluster(1);
  cluster.create_topic("events", 1);
  delivery_log deliveries;
  // Not idempotent: there a permanent produce error would be fatal to the producer.
  const handle_ptr producer = make_producer(cluster, deliveries, {{"enable.idempotence", "false"}});

  const std::array errors{error_code::msg_size_too_large};
  cluster.push_request_errors(api_key::produce, errors);
  produce(producer.get(), "events", "k", "first");
  ASSERT_EQ(rd_kafka_flush(producer.get(), kFlushTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);
  produce(producer.get(), "events", "k", "second");
  ASSERT_EQ(rd_kafka_flush(producer.get(), kFlushTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);

  EXPECT_EQ(deliveries.results,
            (std::vector<error_code>{error_code::msg_size_too_large, error_code::no_error}));
}

TEST(MockCluster, DownBrokerTimesDeliveriesOutUntilItIsUpAgain) {
  mock_cluster cluster(1);
  cluster.create_topic("events", 1);
  EXPECT_THROW(cluster.set_broker_down(7), kafka_error);  // no broker 7

  delivery_log deliveries;
  const handle_ptr producer = make_producer(cluster, deliveries,
                                            {{"enable.idempotence", "false"},
                                             {"message.timeout.ms", "1000"},
                                             {"reconnect.backoff.max.ms", "100"}});
  cluster.set_broker_down(1);
  produce(producer.get(), "events", "k", "lost");
  EXPECT_EQ(rd_kafka_flush(producer.get(), kFlushTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);

  cluster.set_broker_up(1);
  // Wait until the producer is connected again (a metadata request answered), so that the
  // second message's 1 s timeout does not race the reconnection on a loaded machine.
  const rd_kafka_metadata_t* metadata = nullptr;
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (rd_kafka_metadata(producer.get(), 0, nullptr, &metadata, 1000) ==
        RD_KAFKA_RESP_ERR_NO_ERROR)
      break;
    metadata = nullptr;
  }
  ASSERT_NE(metadata, nullptr) << "the producer did not reconnect within 20 s";
  rd_kafka_metadata_destroy(metadata);
  produce(producer.get(), "events", "k", "delivered");
  EXPECT_EQ(rd_kafka_flush(producer.get(), kFlushTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);

  EXPECT_EQ(deliveries.results,
            (std::vector<error_code>{error_code::msg_timed_out, error_code::no_error}));
}

}  // namespace
}  // namespace sketchd::kafka
