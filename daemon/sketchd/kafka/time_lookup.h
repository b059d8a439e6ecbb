// The offset where a partition's log reaches a point in time: for each (topic, partition,
// timestamp), the earliest offset whose message has a timestamp at or after it (Kafka's
// ListOffsets by timestamp), or the high watermark when no message is that recent. sketchd
// reads a partition without state from there to fill its windows (DESIGN.md, "Beyond one
// machine").
//
// How it is found:
//   1. the broker is asked (rd_kafka_offsets_for_times, one ListOffsets per leader);
//   2. its answer is confirmed by reading at most two messages (confirm_broker_answer):
//      an offset A is right when the message at A is at or after the timestamp and the
//      message at A − 1 (when there is one) is before it; "none" (-1) is right when the
//      log is empty or its last message is before the timestamp. A real broker's correct
//      answer is then used as it is;
//   3. when the answer cannot be right, or the lookup failed for the partition as a whole
//      (UNSUPPORTED_VERSION, UNSUPPORTED_FOR_MESSAGE_FORMAT, or any other error that is
//      not the partition's own), the log is searched by reading timestamps
//      (search_first_at_or_after): its watermarks, then a binary search that reads one
//      message per probe.
// librdkafka 2.0.2's mock cluster answers every timestamp with offset -1 and no error
// (rdkafka_mock_handlers.c, ListOffsets: "FIXME: by timestamp"): its "none" is confirmed
// when the last message is older than the timestamp, and searched for otherwise.
//
// What the search guarantees. Kafka's time index keeps the largest timestamp seen so far,
// and producers set CreateTime, so a log's timestamps need not grow with its offsets. The
// search returns an offset R such that
//   - R is the high watermark, or the message at R was read and is at or after the
//     timestamp (the offsets between the probe and R hold no message: compaction,
//     transaction markers);
//   - R is the first message of the log, or the last message before R was read and is
//     before the timestamp.
// On a log whose timestamps do not decrease this is exactly ListOffsets' answer. On any
// other log it is one place where the timestamps cross the target along the search path:
// messages before R that the search did not read may be at or after the timestamp, and
// messages after R may be before it. It reads at most ⌈log2(high − low + 1)⌉ messages.
//
// Cost: partitions are settled one after the other; a read is one assignment of the
// partition at the probe and one fetch (up to 64 KiB). A partition whose broker answer
// holds costs its watermarks and at most 2 reads; a searched one at most
// 1 + ⌈log2(n + 1)⌉ reads for a log of n offsets (about 40 for a trillion).
//
// Thread safety: the free functions are pure and thread-safe (each calls its reader on the
// caller's thread only). A time_lookup is not thread-safe; one owner.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sketchd/kafka/error.h"

struct rd_kafka_s;

namespace sketchd::kafka {

// A message's place and time.
struct message_time {
  std::int64_t offset = 0;
  std::int64_t timestamp_ms = -1;  // -1: the message has none (older than any timestamp)
};

// What a read at a probe offset found: the first message at or after it, nothing (the log
// ends first), or an error.
struct probe_read {
  std::optional<message_time> message;
  std::optional<kafka_error> error;
};

// Reads the first message at or after an offset of one partition.
using probe_reader = std::function<probe_read(std::int64_t offset)>;

// The outcome of a search or of a confirmation: an offset (or whether the broker's answer
// holds), how many messages were read, or the first read's error.
struct search_outcome {
  std::int64_t offset = -1;
  int reads = 0;
  std::optional<kafka_error> error;
};
struct confirmation {
  bool confirmed = false;
  int reads = 0;
  std::optional<kafka_error> error;
};

// The binary search of the file comment over the log [low, high) for the first message at
// or after `timestamp_ms`, with its guarantee; at most ⌈log2(high − low + 1)⌉ reads. A
// read's error ends the search and is returned. Requires low <= high.
[[nodiscard]] search_outcome search_first_at_or_after(std::int64_t low, std::int64_t high,
                                                      std::int64_t timestamp_ms,
                                                      const probe_reader& read);

// Whether the broker's answer `answer` (an offset, or -1 for "no message that recent") can
// be right for the log [low, high) and `timestamp_ms`, by the checks of the file comment:
// at most 2 reads. An answer outside [low, high] is refused without a read; the high
// watermark counts as "none". A refused answer is not proven wrong on a non-monotonic log,
// only not confirmed: the caller searches.
[[nodiscard]] confirmation confirm_broker_answer(std::int64_t low, std::int64_t high,
                                                 std::int64_t timestamp_ms, std::int64_t answer,
                                                 const probe_reader& read);

// One question: where `topic`/`partition` reaches `timestamp_ms` (milliseconds since the
// epoch, as Kafka's message timestamps).
struct time_query {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t timestamp_ms = 0;
};

enum class found_by {
  broker,  // the broker's answer, confirmed
  search,  // the search by reading timestamps
};

// Its answer: the offset to read from, or the partition's own error.
struct time_answer {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t timestamp_ms = 0;
  std::int64_t offset = -1;  // the first message at or after the timestamp, or the high watermark
  found_by how = found_by::broker;
  int reads = 0;  // messages read to confirm or search
  // invalid_arg (a negative timestamp or partition, an empty topic, a partition asked
  // twice), unknown_partition or unknown_topic, timed_out (the deadline passed first), or
  // what the broker answered.
  std::optional<kafka_error> error;

  [[nodiscard]] bool ok() const noexcept { return !error.has_value(); }
};

// A consumer of its own that answers time_query's. It never joins a group: it assigns the
// partition it reads and commits nothing. librdkafka 2.0 refuses rd_kafka_assign() to a
// consumer without group.id, so it has one (the caller's, when the properties hold one:
// a secured cluster authorizes the lookup of that group's coordinator), whose membership
// it never asks for. Not thread-safe; one owner.
class time_lookup {
 public:
  // `properties`: librdkafka consumer properties (security.protocol, sasl.*, ssl.*, …), as
  // the caller's consumer has them. group.id is kept (see above); enable.auto.commit,
  // enable.auto.offset.store, enable.partition.eof and auto.offset.reset are this class's.
  // Throws kafka_error (invalid_arg) naming a property librdkafka refuses (never its value).
  time_lookup(const std::string& bootstrap_servers,
              const std::map<std::string, std::string>& properties);
  ~time_lookup();
  time_lookup(const time_lookup&) = delete;
  time_lookup& operator=(const time_lookup&) = delete;

  // One answer per query, in their order, by `deadline`: a partition that the deadline
  // interrupts gets timed_out. One partition's error does not touch the others'. Never
  // throws but std::bad_alloc.
  [[nodiscard]] std::vector<time_answer> find(std::span<const time_query> queries,
                                              std::chrono::steady_clock::time_point deadline);

 private:
  struct handle_deleter {
    void operator()(rd_kafka_s* handle) const noexcept;
  };
  struct broker_answer;

  // The broker's answer (or error) for each of `answers` still without an error.
  std::vector<broker_answer> ask_broker(std::span<const time_answer> answers,
                                        std::chrono::steady_clock::time_point deadline);
  // Confirms the broker's answer for `answer`, or searches; sets offset, how, reads, error.
  void settle(time_answer& answer, const broker_answer& broker,
              std::chrono::steady_clock::time_point deadline);
  probe_read read_at(const std::string& topic, std::int32_t partition, std::int64_t offset,
                     std::int64_t high, std::chrono::steady_clock::time_point deadline);
  void unassign() noexcept;

  std::unique_ptr<rd_kafka_s, handle_deleter> consumer_;
};

}  // namespace sketchd::kafka
