// Reading an output topic back by provenance: what a restore replays into a partition's
// shard so that nothing forwarded before a crash is forwarded again (docs/SEMANTICS.md).
//
// kafka::sink gives every forwarded event the headers `sketchd-source-topic`,
// `sketchd-source-partition` and `sketchd-source-offset` (decimal text). replay_output()
// reads each asked partition of an output topic from a start offset (the output position
// recorded with the shard's snapshot) up to its high watermark at the time of the call, and
// hands over the messages whose provenance the caller's predicate accepts: their key, value
// and header lookup (the same message_view the input's extractor reads, so the same item
// comes out), their source offset and their timestamp.
//
// Guarantees:
//   - per output partition, messages are handed over in offset order, each at most once;
//     partitions are read together, so their messages interleave;
//   - the end is the high watermark when the call starts: what is produced meanwhile is
//     not read (it cannot be the restored partition's, whose owner is the caller);
//   - a message without the three headers, or with one that does not parse (an empty topic,
//     a partition that is not a decimal int32 ≥ 0, an offset that is not a decimal int64
//     ≥ 0), is counted by reason and skipped, never a failure;
//   - the whole call is bounded by `timeout`: a partition that does not reach its end by then
//     (its leader unreachable, the partition unknown) has `complete` false and a typed
//     error; the others are unaffected;
//   - a start offset below the partition's log start (retention deleted the messages)
//     reads from the log start, and says so in `log_start` (the caller decides whether a
//     restore is still exact); one beyond the end reads nothing (start_offset > end_offset:
//     the topic may have been recreated since the position was recorded).
//
// The consumer has no group: rd_kafka_assign() needs a group.id, which would look up a
// coordinator (and need a group ACL on a secured cluster) for nothing, so partitions are read
// with librdkafka's partition consumer (rd_kafka_consume_start_queue) at explicit offsets;
// nothing is committed. The caller's properties (kafka.properties) are used, those only a
// producer understands left out; `isolation.level` is read_uncommitted, so that the end is
// the high watermark (sketchd's producer is idempotent, not transactional).
//
// Thread safety: replay_output() is a free function with no shared state; the callbacks run
// on the caller's thread, one at a time.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sketchd/kafka/error.h"
#include "sketchd/pipeline/extractor.h"

namespace sketchd::kafka {

// Where a forwarded message was read, as its headers say.
struct provenance {
  std::string_view topic;  // valid during the callback
  std::int32_t partition = 0;
  std::int64_t offset = 0;
};

// Why a message of the output was skipped.
enum class replay_skip : std::uint8_t {
  missing_provenance,  // one of the three headers is absent
  invalid_topic,       // sketchd-source-topic is empty (or null)
  invalid_partition,   // sketchd-source-partition is not a decimal int32 ≥ 0
  invalid_offset,      // sketchd-source-offset is not a decimal int64 ≥ 0
};
inline constexpr std::size_t kReplaySkipCount = 4;
[[nodiscard]] std::string_view to_string(replay_skip reason) noexcept;

// One message handed to the caller. Its views are valid during the callback only.
struct replayed_message {
  std::int32_t output_partition = 0;
  std::int64_t output_offset = 0;
  provenance source;
  std::int64_t timestamp_ms = -1;  // -1 when the message has none
  message_view view;               // key, value and header lookup, as the input's extractor reads
};

struct output_position {
  std::int32_t partition = 0;
  std::int64_t offset = 0;  // the first offset to read
};

struct replay_options {
  std::string bootstrap_servers;
  std::map<std::string, std::string> properties;  // the user's; producer-only ones are left out
  std::string topic;                              // the output topic
  std::vector<output_position> from;              // the partitions to read, each from its offset
  // Read every partition of the topic from its log start instead (`from` must be empty):
  // the partitions are found in the cluster's metadata (unknown in time: std::runtime_error).
  bool every_partition = false;
  std::chrono::milliseconds timeout{30'000};  // for the whole call
};

// What became of one output partition.
struct partition_replay {
  std::int32_t partition = 0;
  std::int64_t start_offset = 0;  // as asked
  std::int64_t log_start = -1;    // the partition's first offset at the call (-1: unknown)
  std::int64_t end_offset = -1;   // its high watermark at the call (-1: unknown)
  std::int64_t next_offset = 0;   // where the read stopped: end_offset once complete
  bool complete = false;          // every message up to end_offset was read
  error_code error = error_code::no_error;  // why not complete
  std::string reason;                       // librdkafka's words for it, or ""
};

struct replay_result {
  std::uint64_t read = 0;                                 // messages read, in every partition
  std::uint64_t matched = 0;                              // handed to the caller
  std::array<std::uint64_t, kReplaySkipCount> skipped{};  // by replay_skip
  std::vector<partition_replay> partitions;               // in the order of replay_options::from

  [[nodiscard]] std::uint64_t skipped_of(replay_skip r) const noexcept {
    return skipped[static_cast<std::size_t>(r)];
  }
  // True when every partition reached its end.
  [[nodiscard]] bool complete() const noexcept;
};

// Accepts the provenance a caller restores (e.g. its input topic and partition).
using provenance_filter = std::function<bool(std::string_view topic, std::int32_t partition)>;
using replay_function = std::function<void(const replayed_message&)>;

// Reads options.from's partitions of options.topic as the file comment says, calling
// `on_message` for each message whose provenance `accept` accepts. Throws kafka_error only
// when the consumer cannot be created (a bad property, named, its value never shown) and
// std::invalid_argument for a partition asked twice or a negative start offset; everything
// that happens while reading is in the result. Exceptions of the callbacks pass through.
[[nodiscard]] replay_result replay_output(const replay_options& options,
                                          const provenance_filter& accept,
                                          const replay_function& on_message);

// The provenance header values parsed, or the reason they are not usable. Exposed for tests
// and for readers of other tools' messages.
struct provenance_parse {
  provenance value;
  bool ok = false;
  replay_skip reason = replay_skip::missing_provenance;  // when !ok
};
[[nodiscard]] provenance_parse parse_provenance(const message_view& view) noexcept;

}  // namespace sketchd::kafka
