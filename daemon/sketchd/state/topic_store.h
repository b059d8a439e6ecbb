// The state topic (state.topic): each shard's latest snapshot on a compacted Kafka topic,
// so that a shard's state moves with its input partition. docs/STATE-TOPIC.md has the
// layout, the topic's configuration and what a real broker's compaction does with it.
//
// A shard is (pipeline, input topic, input partition). Its snapshot is one record:
//
//   offset  size  field
//   ------  ----  --------------------------------------------------------------------
//        0     8  magic "SKDSHARD"
//        8     4  format version (kShardFormatVersion)
//       12     8  payload length L
//       20     L  payload:
//                   u64 n, n bytes pipeline; u64 n, n bytes input topic; i32 input partition
//                   i64 input_offset (the next input offset: the state reflects those before)
//                   i64 created_ms
//                   u64 n, n bytes Kafka cluster id; u64 n, n bytes parameters text
//                   u32 P, then P × { u64 n, n bytes topic; i32 partition; i64 next_offset }
//                   u64 n, n bytes state (opaque: the caller's versioned, checksummed state)
//   20 + L     8  XXH3-64 of bytes [0, 20 + L)
//
// (integers little-endian, as in snapshot.h's file.) The record is cut into chunks of at
// most chunk_size bytes, one Kafka message each, on state partition
// `input partition mod state partitions`, with
//   key      "sketchd-shard/1 <len>:<pipeline> <len>:<topic> <partition> <chunk>"
//   headers  sketchd-snapshot (a 16-hex-digit id unique per write), sketchd-chunk (index),
//            sketchd-chunks (count)
// Compaction keeps the latest value per key; a newer snapshot with fewer chunks is
// followed by tombstones of the stale chunk keys.
//
// Guarantees: write() returns success only when every chunk is acknowledged by the
// broker (idempotent producer, acks=all). read() returns, per shard, the newest snapshot
// (in log order) whose chunks are all present and whose checksum holds; other records are
// skipped with a reason, and a whole record of another cluster or other parameters is
// refused with a message, not returned.
//
// Thread safety: a topic_store is not thread-safe (one owner); distinct stores may be used
// from distinct threads. The free functions are pure and thread-safe.
#pragma once

#include <chrono>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sketchd/state/snapshot.h"

struct rd_kafka_s;

namespace sketchd::state {

inline constexpr std::uint32_t kShardFormatVersion = 1;

// librdkafka refuses a message above message.max.bytes (1,000,000 by default) and a broker
// a batch above its message.max.bytes (1,048,588): a chunk leaves room for key, headers
// and the batch's framing.
inline constexpr std::size_t kDefaultChunkSize = 900 * 1000;

struct shard_id {
  std::string pipeline;
  std::string topic;  // the input topic
  std::int32_t partition = 0;
  friend auto operator<=>(const shard_id&, const shard_id&) = default;
};

struct shard_snapshot {
  shard_id shard;
  std::string state;  // opaque to the store
  std::int64_t input_offset = 0;
  std::vector<partition_offset> outputs;  // the output topics' positions at that time
  std::int64_t created_ms = 0;
  std::string cluster_id;  // set by write(): the store's cluster
  std::string parameters;  // the configuration's parameters text
};

// The record's bytes (see the file comment); decode checks magic, version, length, every
// field and the checksum, and throws snapshot_error naming `what` and the fault.
[[nodiscard]] std::string encode_shard(const shard_snapshot& s);
[[nodiscard]] shard_snapshot decode_shard(std::string_view record, const std::string& what);

// The message key of a shard's chunk, and the inverse: nullopt for a key that is not one.
[[nodiscard]] std::string shard_key(const shard_id& shard, std::uint32_t chunk);
struct parsed_key {
  shard_id shard;
  std::uint32_t chunk = 0;
};
[[nodiscard]] std::optional<parsed_key> parse_shard_key(std::string_view key);

// The state partition of a shard: input partition mod state partitions (> 0).
[[nodiscard]] std::int32_t state_partition(const shard_id& shard, std::int32_t state_partitions);

// The topic configs a state topic is created with (cleanup.policy=compact, and the lag
// and segment times docs/STATE-TOPIC.md explains).
[[nodiscard]] std::map<std::string, std::string> state_topic_configs();

// Whether a snapshot's input offset can belong to the input partition as it is now, its
// log spanning [low, high): an offset past the end means the topic was recreated (or
// truncated) since — the check that stands in for topic ids, which the mock cluster (and
// brokers before 2.8) lack. An offset before the start is usable: the messages in between
// were deleted by retention and cannot be replayed.
struct offset_plausibility {
  enum class verdict { plausible, before_log_start, beyond_log_end };
  verdict result = verdict::plausible;
  std::string message;  // empty when plausible
  [[nodiscard]] bool usable() const noexcept { return result != verdict::beyond_log_end; }
};
[[nodiscard]] offset_plausibility check_input_offset(const shard_id& shard,
                                                     std::int64_t input_offset, std::int64_t low,
                                                     std::int64_t high);

struct topic_store_options {
  std::string bootstrap_servers;
  std::map<std::string, std::string> properties;  // the user's librdkafka properties
  std::string topic;                              // the state topic
  std::int32_t partitions = 0;                    // its partition count (ensure_result)
  std::size_t chunk_size = kDefaultChunkSize;
  // The cluster id written into records and expected in them; empty: the broker's
  // (rd_kafka_clusterid), asked for at construction.
  std::string cluster_id;
};

struct read_result {
  std::map<shard_id, shard_snapshot> restored;  // the newest usable snapshot of each shard
  std::map<shard_id, std::string> refused;      // newest record of another cluster/parameters
  std::vector<std::string> skipped;             // corrupt, incomplete or foreign records, with why
};

class topic_store {
 public:
  // Creates the idempotent producer and learns the cluster id. Throws kafka_error for a bad
  // property or when the cluster id cannot be read before `timeout`;
  // std::invalid_argument for partitions < 1 or a chunk_size under 1 KiB.
  topic_store(topic_store_options options, std::chrono::milliseconds timeout);
  ~topic_store();
  topic_store(const topic_store&) = delete;
  topic_store& operator=(const topic_store&) = delete;

  struct write_result {
    std::uint32_t chunks = 0;
    std::uint32_t tombstones = 0;  // stale chunk keys deleted
    std::uint64_t bytes = 0;       // the record's size
  };
  // Writes `s` (its cluster_id replaced by the store's) and waits up to `timeout` for every
  // chunk's acknowledgement, then for the tombstones of stale chunks. Throws kafka_error
  // naming the state partition when a chunk fails or is not acknowledged in time: the
  // previous snapshot then stays the newest complete one, unless the chunks still queued
  // are delivered later (the producer keeps their order), which completes this one.
  write_result write(const shard_snapshot& s, std::chrono::milliseconds timeout);

  // Reads the state partitions of `shards` from their start to their high watermark (as
  // of the call) and returns what the file comment says. `parameters` maps each shard's
  // pipeline to the parameters text its records must carry. Throws kafka_error when the
  // partitions cannot be read to their end before `timeout`, std::invalid_argument for a
  // pipeline missing from `parameters`.
  [[nodiscard]] read_result read(std::span<const shard_id> shards,
                                 const std::map<std::string, std::string>& parameters,
                                 std::chrono::milliseconds timeout);

  [[nodiscard]] const std::string& cluster_id() const noexcept { return options_.cluster_id; }

 private:
  struct producer_deleter {
    void operator()(rd_kafka_s* rk) const noexcept;
  };
  struct delivery_count;

  // Produces one message to the state partition and counts its acknowledgement.
  void produce(std::int32_t partition, const std::string& key,
               std::optional<std::string_view> value,
               const std::vector<std::pair<std::string, std::string>>& headers);
  // Waits for every message produced to be acknowledged; throws on a failure or the deadline.
  void await_acks(std::int32_t partition, std::chrono::steady_clock::time_point deadline);

  topic_store_options options_;
  std::unique_ptr<delivery_count> deliveries_;
  std::unique_ptr<rd_kafka_s, producer_deleter> producer_;
  // The chunk count on the topic of each shard, as far as this store knows (its writes and
  // reads): the keys at and beyond a newer, shorter snapshot's count get tombstones.
  std::map<shard_id, std::uint32_t> known_chunks_;
};

}  // namespace sketchd::state
