// The Kafka source of the daemon: one consumer in the group `group_id`, subscribed to
// the topics of every pipeline, read in batches.
//
// Delivery is at-least-once: `enable.auto.offset.store` is off, so an offset is stored
// only by store_offsets(), which the daemon calls once the messages before it are
// processed and their outputs acknowledged; stored offsets are committed in the
// background (`enable.auto.commit`), before partitions are revoked, and synchronously by
// close(). Rebalancing is cooperative-sticky unless the user's properties choose
// otherwise; both protocols are handled.
//
// Hooks let the daemon act inside a rebalance: before partitions are revoked (to deliver
// and store what it can for them), and when partitions are assigned (to start them at
// the offsets of a restored snapshot instead of the committed ones).
#pragma once

#include <atomic>
#include <functional>
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

// A partition of one of the source's topics.
struct topic_partition {
  std::size_t topic_index = 0;  // into source_options::topics
  std::int32_t partition = 0;
  friend bool operator==(const topic_partition&, const topic_partition&) = default;
};

// An offset to store: the next message to read in a partition.
struct partition_offset {
  std::size_t topic_index = 0;
  std::int32_t partition = 0;
  std::int64_t next_offset = 0;
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

  // Stores offsets to be committed. Offsets of partitions revoked meanwhile are dropped:
  // the partition's new owner reads those messages again.
  void store_offsets(std::span<const partition_offset> offsets);

  // Called inside poll_batch() before partitions are revoked, after the messages of the
  // batch being collected that belong to them are dropped; the stored offsets are
  // committed right after the hook returns.
  void on_revoke(std::function<void(std::span<const topic_partition>)> hook) { on_revoke_ = std::move(hook); }
  // Called inside poll_batch() when a partition is assigned: the offset to start at, or
  // nullopt for the committed offset (or auto.offset.reset).
  void on_assign(std::function<std::optional<std::int64_t>(const topic_partition&)> hook) {
    on_assign_ = std::move(hook);
  }

  // Stops fetching from every assigned partition, and from partitions assigned later.
  // poll_batch() then returns nothing while the consumer stays in its group.
  void pause();
  [[nodiscard]] bool paused() const noexcept { return paused_; }

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
  void drop_from_batch(std::span<const topic_partition> revoked);

  source_options options_;
  std::unique_ptr<rd_kafka_s, void (*)(rd_kafka_s*)> consumer_;
  std::vector<rd_kafka_message_s*> messages_;  // owned between poll_batch() calls
  std::vector<record> records_;
  std::function<void(std::span<const topic_partition>)> on_revoke_;
  std::function<std::optional<std::int64_t>(const topic_partition&)> on_assign_;
  bool paused_ = false;
  std::vector<std::pair<const void*, std::size_t>> topic_cache_;  // rkt → topic index
  std::atomic<std::size_t> assigned_{0};
  mutable std::mutex mutex_;  // guards lag_ and fatal_
  std::vector<partition_lag> lag_;
  std::optional<std::string> fatal_;
  bool closed_ = false;
  std::uint64_t message_errors_ = 0;
};

}  // namespace sketchd::kafka
