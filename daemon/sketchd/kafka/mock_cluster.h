// An in-process Kafka cluster for demos and tests: librdkafka's mock cluster, a real
// Kafka-protocol server that any client (librdkafka, kcat, the Java client…) reaches
// through bootstrap_servers().
//
// What librdkafka 2.0 mocks, and how it differs from a real cluster:
//   - producer (also idempotent and transactional), fetch, consumer groups (any
//     client-side assignor, cooperative-sticky included) with offset commits, metadata;
//   - every broker listens on 127.0.0.1 on an ephemeral port, plaintext only;
//   - a topic that a client names but nobody created springs into existence with
//     kAutoCreatePartitions partitions on the first metadata request, whatever the
//     client's allow.auto.create.topics says (the mock's Metadata API is too old for the
//     flag): create topics before clients use them;
//   - each partition keeps at most kMaxPartitionBytes of record batches (as the producer
//     sent them, so compressed batches hold more messages) and at most
//     kMaxPartitionMessageSets batches, and drops the oldest beyond that, as retention
//     would. The byte limit binds first (a batch takes at least 61 bytes), so size topics
//     (partitions) for 5 MiB each, or consume while producing;
//   - every partition gets min(3, brokers) replicas, whatever replication factor is asked;
//   - a consumer group elects its leader 3 s after the group forms, and waits
//     session.timeout.ms − 1 s for the members to rejoin on every later rebalance
//     (cooperative-sticky needs two): tests should lower session.timeout.ms;
//   - all members of a group must list the same assignor first in
//     partition.assignment.strategy, or the mock aborts the whole process;
//   - no CreateTopics admin API: topics come from create_topic() or auto-creation;
//   - destroying the cluster may take up to 1 s (librdkafka's internal broker thread
//     finishes on a 1 s timer).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sketchd/kafka/error.h"

struct rd_kafka_s;
struct rd_kafka_mock_cluster_s;

namespace sketchd::kafka {

// Not thread-safe to construct, move or destroy (one owner); the other member functions
// may be called from any thread, as librdkafka serializes them on the cluster's thread.
// Clients connected to the cluster see their connections closed when it is destroyed. A
// moved-from mock_cluster may only be destroyed.
class mock_cluster {
 public:
  static constexpr int kMaxBrokers = 64;
  static constexpr int kMaxPartitions = 1000;
  static constexpr int kAutoCreatePartitions = 4;
  static constexpr std::size_t kMaxPartitionBytes = 5 * 1024 * 1024;
  static constexpr std::size_t kMaxPartitionMessageSets = 100000;

  // Starts `brokers` brokers with ids 1..brokers. Throws std::invalid_argument when
  // brokers is outside 1..kMaxBrokers, kafka_error when librdkafka cannot start them.
  explicit mock_cluster(int brokers = 1);
  ~mock_cluster();
  mock_cluster(mock_cluster&&) noexcept;
  mock_cluster& operator=(mock_cluster&&) = delete;
  mock_cluster(const mock_cluster&) = delete;
  mock_cluster& operator=(const mock_cluster&) = delete;

  // "127.0.0.1:PORT[,127.0.0.1:PORT…]", one address per broker.
  [[nodiscard]] const std::string& bootstrap_servers() const noexcept { return bootstrap_servers_; }
  [[nodiscard]] int broker_count() const noexcept { return broker_count_; }

  // Creates a topic with partitions spread over the brokers. Throws std::invalid_argument
  // for an illegal Kafka topic name, partitions outside 1..kMaxPartitions or a
  // replication factor outside 1..broker_count(); kafka_error (topic_already_exists)
  // when the topic exists, auto-created ones included.
  void create_topic(std::string_view name, int partitions, int replication_factor = 1);

  // Fault injection. A broker id is 1..broker_count(), or -1 for every broker; an unknown
  // id is a kafka_error.

  // Closes the broker's connections and refuses new ones; leadership does not move.
  void set_broker_down(std::int32_t broker_id);
  // Accepts connections again.
  void set_broker_up(std::int32_t broker_id);
  // Delays every response of the broker by `rtt`.
  void set_broker_rtt(std::int32_t broker_id, std::chrono::milliseconds rtt);
  // Moves the leadership of a partition (creating the topic if it does not exist);
  // -1 leaves the partition without a leader.
  void set_partition_leader(std::string_view topic, std::int32_t partition, std::int32_t broker_id);
  // Makes a broker the coordinator of a consumer group (kind "group") or of a
  // transactional id (kind "transaction").
  void set_coordinator(std::string_view kind, std::string_view key, std::int32_t broker_id);
  // The next errors.size() requests of type `key`, on any broker, fail with these errors
  // in order. error_code::transport makes the broker close the connection instead.
  void push_request_errors(api_key key, std::span<const error_code> errors);
  // Forgets the errors still pushed for `key`.
  void clear_request_errors(api_key key);

 private:
  struct handle_deleter {
    void operator()(rd_kafka_s* handle) const noexcept;
  };
  struct cluster_deleter {
    void operator()(rd_kafka_mock_cluster_s* cluster) const noexcept;
  };

  // Runs `call` (a control request to the cluster's thread) while waking that thread up;
  // see the implementation for why librdkafka 2.0 needs it.
  template <typename Call>
  void with_wakeups(Call&& call);

  // Declared first so that it is destroyed last: librdkafka requires every mock cluster
  // of a handle to be destroyed before the handle.
  std::unique_ptr<rd_kafka_s, handle_deleter> handle_;
  std::unique_ptr<rd_kafka_mock_cluster_s, cluster_deleter> cluster_;
  std::string bootstrap_servers_;
  std::vector<std::uint16_t> ports_;  // of the brokers, in id order
  int broker_count_ = 0;
};

}  // namespace sketchd::kafka
