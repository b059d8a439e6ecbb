// The Kafka sink of the daemon: one idempotent producer for every output topic
// (dedup.output_topic, dedup.duplicates_topic, heavy_hitters.alerts_topic).
//
// Forwarded events keep their key, value, headers and timestamp, gain the provenance
// headers below (where the input message was read), and are partitioned by key with the
// murmur2 partitioner of the Java client (so that a key lands where the Java client, and
// the clients that follow it, would put it; librdkafka's own default, consistent_random,
// puts it elsewhere), unless the user's properties choose another. The producer is
// idempotent (`enable.idempotence`, which implies `acks=all`): librdkafka retries
// transient errors without duplicating or reordering; a delivery report with an error is
// a final failure (after `message.timeout.ms`, 5 minutes by default).
//
// Provenance: a forwarded copy carries `sketchd-source-topic` (the input topic's name),
// `sketchd-source-partition` and `sketchd-source-offset` (the input message's partition and
// offset), after the input's own headers. Values are decimal text without sign or padding
// ("0", "12345"), as kcat's `%h` and every Kafka tool show them, and as a restore reads them
// back (kafka/output_replay.h). A header of one of these names already on the input (sketchd
// reading another sketchd's output) is replaced, not repeated: it describes this hop.
//
// Delivery reports are served by poll() and flush(), on the caller's thread: the owner
// (the processing thread) sees them in its own loop, without locks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sketchd/kafka/error.h"

struct rd_kafka_s;
struct rd_kafka_topic_s;
struct rd_kafka_message_s;

namespace sketchd::kafka {

// The provenance headers forward() adds (NUL-terminated, for librdkafka).
inline constexpr const char* kSourceTopicHeader = "sketchd-source-topic";
inline constexpr const char* kSourcePartitionHeader = "sketchd-source-partition";
inline constexpr const char* kSourceOffsetHeader = "sketchd-source-offset";
// The headers a dead letter gains besides them (docs/SEMANTICS.md, "Dead letters").
inline constexpr const char* kErrorReasonHeader = "sketchd-error-reason";
inline constexpr const char* kPipelineHeader = "sketchd-pipeline";

// A header forward() adds after the provenance headers: its name NUL-terminated, for
// librdkafka; the value is copied.
struct header {
  const char* name = nullptr;
  std::string_view value;
};

struct sink_options {
  std::string bootstrap_servers;
  std::map<std::string, std::string> properties;  // the user's; consumer-only ones are left out
  std::vector<std::string> topics;                // every output topic
};

// Not thread-safe: one owner, except in_flight() and fatal_error(), which any thread may call.
class sink {
 public:
  // Called once per produced message, from poll() or flush(): its opaque, and no_error or
  // the final error with librdkafka's reason.
  using delivery_function =
      std::function<void(std::uint64_t opaque, error_code err, std::string_view reason)>;

  // Creates the producer. Throws kafka_error for a bad property (named, its value never shown).
  sink(const sink_options& options, delivery_function on_delivery);
  ~sink();
  sink(const sink&) = delete;
  sink& operator=(const sink&) = delete;

  // The index of an output topic of the options, for forward() and produce().
  [[nodiscard]] std::size_t topic_index(std::string_view topic) const;
  [[nodiscard]] const std::string& topic_name(std::size_t index) const {
    return options_.topics[index];
  }

  // Produces a copy of a consumed message (key, value, headers, timestamp) to an output
  // topic, with the provenance headers of `message` (its topic, partition and offset; see
  // the file comment) and then the `extra` headers, in place of any of those names it had
  // (a dead letter's reason and pipeline). Allocates only the copy of
  // the headers librdkafka takes over; the numbers are formatted on the stack. While the
  // producer's local queue is full it serves delivery reports and tries again, until
  // `give_up()` says to stop waiting. Returns no_error when the message was queued (its
  // delivery report will follow), or the error that prevented it (no report follows):
  // queue_full after give_up(), msg_size_too_large, unknown_topic…
  [[nodiscard]] error_code forward(std::size_t topic, const rd_kafka_message_s* message,
                                   std::span<const header> extra, std::uint64_t opaque,
                                   const std::function<bool()>& give_up);
  // The same for a message built by the daemon (alert events).
  [[nodiscard]] error_code produce(std::size_t topic, std::string_view key, std::string_view value,
                                   std::int64_t timestamp_ms, std::uint64_t opaque,
                                   const std::function<bool()>& give_up);

  // Serves the delivery reports that have arrived, without waiting.
  void poll();
  // Serves delivery reports until every queued message is acknowledged or `timeout`
  // elapses; true when nothing is left in flight.
  [[nodiscard]] bool flush(std::chrono::milliseconds timeout);

  // Output positions, for a snapshot (docs/SEMANTICS.md, "Crashes"). learn_ends() starts a
  // thread of the sink that asks the cluster where every partition of every output topic
  // ends (its high watermark), trying again every 5 s until it knows them all (a warning
  // says so once). ends() is, per partition, the later of the end learnt and the offset
  // after the last message this sink delivered there (from the delivery reports): once
  // nothing is in flight, every message produced from then on lands at or after it.
  // Partitions with no end known yet are left out. Both are the owner's; the thread stops
  // with the sink (within a second).
  void learn_ends();
  struct output_end {
    std::size_t topic = 0;  // index, as topic_index()
    std::int32_t partition = 0;
    std::int64_t next_offset = 0;
  };
  [[nodiscard]] std::vector<output_end> ends() const;

  // Messages queued or in flight, not yet reported.
  [[nodiscard]] std::size_t in_flight() const;
  // Set when librdkafka reported a fatal error (an idempotent producer can hit one, e.g.
  // on a broker that lost acknowledged messages): the daemon must stop.
  [[nodiscard]] std::optional<std::string> fatal_error() const;

 private:
  struct callbacks;
  // A delivery report's message landed at `offset` (ends()).
  void delivered_at(rd_kafka_topic_s* topic, std::int32_t partition, std::int64_t offset);
  [[nodiscard]] error_code produce_with_headers(std::size_t topic, const void* key,
                                                std::size_t key_size, const void* value,
                                                std::size_t value_size, std::int64_t timestamp_ms,
                                                void* headers, std::uint64_t opaque,
                                                const std::function<bool()>& give_up);

  sink_options options_;
  delivery_function on_delivery_;
  std::unique_ptr<rd_kafka_s, void (*)(rd_kafka_s*)> producer_;
  std::vector<rd_kafka_topic_s*> topics_;
  // learn_ends()' thread: one round over every output partition not learnt yet; true when
  // every one is known (or a stop is asked).
  void learn_loop();
  [[nodiscard]] bool learn_round(rd_kafka_s* client);
  // Per topic index, per partition: after the last delivery there, or -1 (ends()).
  std::vector<std::vector<std::int64_t>> delivered_;
  mutable std::mutex learn_mutex_;  // guards learnt_ and learn_stop_
  std::condition_variable learn_wake_;
  std::vector<std::vector<std::int64_t>> learnt_;  // the ends learnt, or -1
  bool learn_stop_ = false;
  std::thread learner_;
  mutable std::mutex mutex_;  // guards fatal_
  std::optional<std::string> fatal_;
};

// Why librdkafka would refuse to create sketchd's producer with the user's `properties`
// (kafka.properties) as a whole, on top of sketchd's own settings: its checks across
// properties, such as `acks` against the idempotence sketchd needs. Nothing when it would
// accept them. The security settings are left out (see without_security() in
// kafka/client.h): they are checked when the producer starts. Connects nowhere; property
// values are removed from the reason.
[[nodiscard]] std::optional<std::string> producer_refusal(
    const std::map<std::string, std::string>& properties);

// The user's properties minus those only a consumer understands (librdkafka warns about
// each on a producer); security and connection settings stay.
[[nodiscard]] std::map<std::string, std::string> producer_properties(
    const std::map<std::string, std::string>& all);
// The user's properties minus those only a producer understands.
[[nodiscard]] std::map<std::string, std::string> consumer_properties(
    const std::map<std::string, std::string>& all);

}  // namespace sketchd::kafka
