// Kafka errors as the rest of the daemon sees them: a `kafka_error` exception carrying the
// error code and the topic, partition and offset it concerns.
//
// This header does not include librdkafka. librdkafka's `rd_kafka_resp_err_t` is turned
// into `error_code` at the boundary (sketchd/kafka/client.h, for code inside kafka/), so
// nothing outside kafka/ sees it.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace sketchd::kafka {

// A Kafka error code. The values are those of the Kafka protocol (0 and above) and of
// librdkafka's local errors (below -100); every value librdkafka reports fits, named
// here or not. The names below are the ones the daemon and its tests refer to.
enum class error_code : int {
  // librdkafka's local errors.
  destroy = -197,            // the client is shutting down
  fail = -196,               // generic failure
  transport = -195,          // broker connection failed (a mock broker disconnects on it)
  msg_timed_out = -192,      // message.timeout.ms elapsed before delivery
  partition_eof = -191,      // end of partition reached (not an error)
  unknown_partition = -190,  // the partition does not exist
  unknown_topic = -188,      // the topic does not exist
  all_brokers_down = -187,   // every broker connection is down
  invalid_arg = -186,        // invalid argument or configuration
  timed_out = -185,          // operation timed out
  queue_full = -184,         // producer queue is full
  state = -172,              // wrong state for the operation
  purge_queue = -152,        // dropped from the producer's queue when it is closed
  purge_inflight = -151,     // dropped in flight when the producer is closed
  fatal = -150,              // fatal error: the client must be recreated
  unknown_broker = -146,     // no broker with that id
  // Kafka protocol errors.
  unknown = -1,
  no_error = 0,
  offset_out_of_range = 1,
  unknown_topic_or_partition = 3,
  leader_not_available = 5,
  not_leader_for_partition = 6,
  request_timed_out = 7,
  broker_not_available = 8,
  msg_size_too_large = 10,
  network_exception = 13,
  coordinator_load_in_progress = 14,
  coordinator_not_available = 15,
  not_coordinator = 16,
  not_enough_replicas = 19,
  not_enough_replicas_after_append = 20,
  illegal_generation = 22,
  unknown_member_id = 25,
  rebalance_in_progress = 27,
  topic_authorization_failed = 29,
  group_authorization_failed = 30,
  topic_already_exists = 36,
  invalid_partitions = 37,
  invalid_replication_factor = 38,
  out_of_order_sequence_number = 45,
  duplicate_sequence_number = 46,
  invalid_producer_epoch = 47,
};

// librdkafka's name of the code without its prefix, e.g. "TOPIC_ALREADY_EXISTS" or
// "_TRANSPORT" (local errors start with an underscore). Thread-safe.
[[nodiscard]] std::string_view to_string(error_code code) noexcept;

// librdkafka's human description, e.g. "Broker: Topic already exists". Thread-safe.
[[nodiscard]] std::string_view describe(error_code code) noexcept;

// Kafka protocol request types (ApiKey), for fault injection on the mock cluster.
enum class api_key : std::int16_t {
  produce = 0,
  fetch = 1,
  list_offsets = 2,
  metadata = 3,
  offset_commit = 8,
  offset_fetch = 9,
  find_coordinator = 10,
  join_group = 11,
  heartbeat = 12,
  leave_group = 13,
  sync_group = 14,
  api_versions = 18,
  init_producer_id = 22,
  add_partitions_to_txn = 24,
  add_offsets_to_txn = 25,
  end_txn = 26,
  txn_offset_commit = 28,
};

// What an error concerns; each part is absent (empty) when it does not apply.
struct error_context {
  error_context() = default;
  explicit error_context(std::string topic_name, std::optional<std::int32_t> partition_id = {},
                         std::optional<std::int64_t> message_offset = {})
      : topic(std::move(topic_name)), partition(partition_id), offset(message_offset) {}

  std::string topic;
  std::optional<std::int32_t> partition;
  std::optional<std::int64_t> offset;
};

// A failed Kafka operation. what() reads
//   "OPERATION [topic T, partition P, offset O]: DESCRIPTION (NAME)"
// with the bracket only listing the parts of the context that are present, e.g.
//   "create topic [topic events]: Broker: Topic already exists (TOPIC_ALREADY_EXISTS)".
// Immutable after construction; safe to read from any thread.
class kafka_error : public std::runtime_error {
 public:
  // `description` replaces librdkafka's description of `code` when it says more (for
  // example librdkafka's own error string); it must not hold secrets.
  kafka_error(std::string_view operation, error_code code, error_context context = {},
              std::string_view description = {});

  [[nodiscard]] error_code code() const noexcept { return code_; }
  [[nodiscard]] const error_context& context() const noexcept { return context_; }

 private:
  error_code code_;
  error_context context_;
};

}  // namespace sketchd::kafka

template <>
struct fmt::formatter<sketchd::kafka::error_code> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(sketchd::kafka::error_code code, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(sketchd::kafka::to_string(code), ctx);
  }
};

// Prints "topic T, partition P, offset O" with the parts that are present ("" if none).
template <>
struct fmt::formatter<sketchd::kafka::error_context> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(const sketchd::kafka::error_context& c, FormatContext& ctx) const {
    std::string out;
    const auto add = [&out](std::string_view part) {
      if (!out.empty()) out += ", ";
      out += part;
    };
    if (!c.topic.empty()) add(fmt::format("topic {}", c.topic));
    if (c.partition) add(fmt::format("partition {}", *c.partition));
    if (c.offset) add(fmt::format("offset {}", *c.offset));
    return fmt::formatter<std::string_view>::format(out, ctx);
  }
};
