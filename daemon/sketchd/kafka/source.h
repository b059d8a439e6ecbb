// The Kafka source of the daemon: one consumer in the group `group_id`, subscribed to
// the topics of every pipeline, read in batches.
//
// Delivery is at-least-once: `enable.auto.offset.store` is off, so an offset is stored
// only by store_offsets(), which the daemon calls after the batch is processed; stored
// offsets are committed in the background (`enable.auto.commit`) and synchronously by
// close(). Rebalancing is cooperative-sticky unless the user's properties choose
// otherwise; both protocols are handled.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sketchd/kafka/error.h"
#include "sketchd/pipeline/extractor.h"

struct rd_kafka_s;
struct rd_kafka_message_s;

namespace sketchd::kafka {

struct source_options {
  std::string bootstrap_servers;
  std::string group_id;
  std::map<std::string, std::string> properties;  // the user's, passed as they are
  std::vector<std::string> topics;
  std::uint32_t batch_size = 1000;
  std::int32_t poll_timeout_ms = 100;
};

// One consumed message, valid until the next poll_batch() or close().
struct record {
  std::size_t topic_index = 0;  // into source_options::topics
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::int64_t timestamp_ms = -1;  // -1 when the message has none
  message_view view;               // key, value and header lookup for the extractor
  const rd_kafka_message_s* native = nullptr;  // for the sink (forwarding keeps headers)
};

struct partition_lag {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t lag = 0;  // messages between the committed offset and the high watermark
};

// Not thread-safe, one owner (the processing thread), except lag(), assigned_partitions()
// and fatal_error(), which any thread may call.
class source {
 public:
  // Creates the consumer and subscribes. Throws kafka_error for a bad property (named,
  // its value never shown) or a client that cannot be created.
  explicit source(const source_options& options);
  ~source();
  source(const source&) = delete;
  source& operator=(const source&) = delete;

  // Waits up to poll_timeout for a first message, then takes what is already there, up
  // to batch_size. Serves the client's callbacks (rebalance, statistics, errors). Message
  // errors are logged (rate-limited) and skipped. Never throws on input.
  [[nodiscard]] std::span<const record> poll_batch();

  // Stores the offsets of the batch returned last (offset + 1 of the last message of each
  // partition), to be committed. Offsets of partitions revoked meanwhile are dropped: the
  // partition's new owner reads those messages again.
  void store_offsets();

  // Commits the stored offsets synchronously and leaves the group. Idempotent.
  void close();

  // Consumer lag per assigned partition, from the statistics callback.
  [[nodiscard]] std::vector<partition_lag> lag() const;
  [[nodiscard]] std::size_t assigned_partitions() const noexcept { return assigned_.load(); }
  // Set when librdkafka reported a fatal error: the daemon must stop.
  [[nodiscard]] std::optional<std::string> fatal_error() const;

  [[nodiscard]] const std::vector<std::string>& topics() const noexcept { return options_.topics; }

 private:
  struct callbacks;
  std::size_t topic_index(const rd_kafka_message_s* m);
  void release_batch();

  source_options options_;
  std::unique_ptr<rd_kafka_s, void (*)(rd_kafka_s*)> consumer_;
  std::vector<rd_kafka_message_s*> messages_;  // owned between poll_batch() calls
  std::vector<record> records_;
  std::vector<std::pair<const void*, std::size_t>> topic_cache_;  // rkt → topic index
  std::atomic<std::size_t> assigned_{0};
  mutable std::mutex mutex_;  // guards lag_ and fatal_
  std::vector<partition_lag> lag_;
  std::optional<std::string> fatal_;
  bool closed_ = false;
  std::uint64_t message_errors_ = 0;
};

}  // namespace sketchd::kafka
