// Where the processor's outputs go: first-seen events (dedup.output_topic), duplicates
// (dedup.duplicates_topic), heavy-hitter alert events (heavy_hitters.alerts_topic) and dead
// letters (dead_letter_topic). The
// daemon's is Kafka's idempotent producer (processor/kafka_forwarder.h); unit tests fake it.
//
// The contract the processor relies on, as kafka::sink keeps it:
//   - every message queued (forward() or produce() answered no_error) gets exactly one
//     delivery report with its opaque, no_error or its final error, and only from poll(),
//     flush() or a forward()/produce() waiting on a full queue, on the caller's thread;
//   - a message not queued (any other answer) gets no report;
//   - while the queue is full, forward() and produce() serve delivery reports and try
//     again, asking `give_up()` between tries; queue_full is answered only once it says so.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sketchd/kafka/error.h"
#include "sketchd/kafka/sink.h"
#include "sketchd/kafka/source.h"

namespace sketchd {

// Not thread-safe: one owner (the processing thread), except in_flight() and fatal_error(),
// which any thread may call.
class forwarder {
 public:
  // One delivery report: the message's opaque, and no_error or the final error with its
  // reason.
  using delivery_function =
      std::function<void(std::uint64_t opaque, kafka::error_code err, std::string_view reason)>;

  virtual ~forwarder() = default;

  // Where delivery reports go from now on (set once, before anything is produced).
  virtual void on_delivery(delivery_function f) = 0;

  // The index of an output topic, for forward() and produce(). Throws std::invalid_argument
  // for a topic the forwarder was not made for.
  [[nodiscard]] virtual std::size_t topic_index(std::string_view topic) const = 0;

  // Queues a copy of the consumed message `r` (key, value, headers, timestamp: the message
  // as it was read) for output topic `topic`, with the provenance headers of `r`
  // (`sketchd-source-topic`, `-partition`, `-offset`, decimal text; see kafka/sink.h) and
  // then the `extra` headers (a dead letter's) in place of any of those names it had.
  // no_error when queued; otherwise the error that prevented it: queue_full after
  // give_up(), msg_size_too_large, unknown_topic…
  [[nodiscard]] virtual kafka::error_code forward(std::size_t topic, const kafka::record& r,
                                                  std::span<const kafka::header> extra,
                                                  std::uint64_t opaque,
                                                  const std::function<bool()>& give_up) = 0;
  // The same for a message built by the daemon (alert events), without headers.
  [[nodiscard]] virtual kafka::error_code produce(std::size_t topic, std::string_view key,
                                                  std::string_view value, std::int64_t timestamp_ms,
                                                  std::uint64_t opaque,
                                                  const std::function<bool()>& give_up) = 0;

  // Serves the delivery reports that have arrived, without waiting.
  virtual void poll() = 0;
  // Serves delivery reports until nothing is in flight or `timeout` elapses; true when
  // nothing is left in flight.
  [[nodiscard]] virtual bool flush(std::chrono::milliseconds timeout) = 0;

  // Where the output topics end, for a snapshot (see kafka::sink::ends()): per output
  // partition, an offset at or before which whatever is produced from now on lands, once
  // nothing is in flight. learn_ends() has the cluster asked, in the background, for the
  // partitions this forwarder has not produced to yet. A forwarder that cannot tell
  // answers none (a restart after a crash then forwards again what was forwarded since the
  // snapshot, as without them).
  struct output_end {
    std::size_t topic = 0;  // as topic_index()
    std::int32_t partition = 0;
    std::int64_t next_offset = 0;
  };
  virtual void learn_ends() {}
  [[nodiscard]] virtual std::vector<output_end> ends() const { return {}; }

  // Messages queued and not yet reported.
  [[nodiscard]] virtual std::size_t in_flight() const = 0;
  // Set once the forwarder cannot go on (the daemon must stop), with the reason.
  [[nodiscard]] virtual std::optional<std::string> fatal_error() const = 0;
};

}  // namespace sketchd
