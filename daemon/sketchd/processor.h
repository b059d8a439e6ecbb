// The processing step of the daemon, between the Kafka source and the pipelines'
// outputs: routes each consumed message to the pipelines of its topic, forwards what they
// decide to forward (first-seen events, duplicates, heavy-hitter alert events) through
// one idempotent producer, and says which input offsets may be stored.
//
//   batch ─► pipelines (process) ─► verdicts ─► sink.forward(…, ticket) ┐
//                                                                        ▼ delivery reports
//   offsets to store ◄── offset_tracker (in order per partition) ◄── ack / final failure
//
// An input offset becomes storable only when every output of its message, and of every
// earlier message of its partition, is acknowledged (offset_tracker). A final delivery
// failure stops consumption: the processor reports failed(), the run loop pauses the
// source and marks the daemon not ready; the offset never moves past the failed message.
//
// The state position: for every assigned partition, the next offset whose message the
// pipelines have not seen, once everything before it is delivered. A snapshot taken when
// quiescent() holds these positions, and a restart resumes from them.
//
// Not thread-safe: one owner, the processing thread. The counters read by the metrics
// collector are published once per batch under a lock (collect() is thread-safe).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sketchd/config/config.h"
#include "sketchd/kafka/offset_tracker.h"
#include "sketchd/kafka/sink.h"
#include "sketchd/kafka/source.h"
#include "sketchd/metrics/metrics.h"
#include "sketchd/pipeline/pipeline.h"

namespace sketchd {

class processor {
 public:
  // `topics` are the source's topics (record::topic_index indexes them). Creates the
  // producer when some pipeline has an output topic. `stop` is consulted while the
  // producer's queue is full, so that a stop request is not held up by a broker that is down.
  processor(const config& cfg, std::vector<pipeline*> pipelines, std::vector<std::string> topics,
            const std::string& bootstrap_servers, std::function<bool()> stop);

  // Runs one batch through the pipelines (begin_batch … end_batch) and forwards its
  // outputs; logs heavy-hitter events and sends them to the alerts topics.
  void process(std::span<const kafka::record> batch, std::int64_t wall_ms);

  // Serves the delivery reports that have arrived and appends the offsets that became
  // storable to `out`.
  void poll(std::vector<kafka::partition_offset>& out);
  // Waits (at most `timeout`) until every output is acknowledged, then appends the
  // storable offsets. True when nothing is left in flight.
  [[nodiscard]] bool flush(std::chrono::milliseconds timeout,
                           std::vector<kafka::partition_offset>& out);

  // Rebalance: an assignment (of none or more partitions) begins; partitions assigned (with
  // their start offset when known) and revoked.
  void assignment_begins() {
    assigned_any_ = true;
    for (pipeline* p : pipelines_) p->input_assigned();
    returning_ = std::move(revoked_);
    revoked_.clear();
  }
  void assigned(const kafka::topic_partition& tp, std::optional<std::int64_t> start);
  void revoked(std::span<const kafka::topic_partition> partitions);

  // Positions restored from a snapshot written at `snapshot_ms` (wall clock): the start
  // offsets of their partitions.
  void restore_positions(const std::vector<kafka::partition_offset>& positions,
                         std::int64_t snapshot_ms);
  // The start offset of a partition restored from a snapshot, once: later assignments of
  // it start at the committed offset.
  [[nodiscard]] std::optional<std::int64_t> take_restored_position(
      const kafka::topic_partition& tp);
  // A partition just assigned at its restored position `start`, behind the group's
  // committed offset: this instance committed past its snapshot before it stopped (a
  // crash), or another member processed the partition since. True, when the snapshot is
  // younger than the longest window of the pipelines reading the partition: it starts at
  // `start`, and its messages before `committed` go into the windows again without being
  // forwarded (their outputs were delivered) or having their offsets stored (the group's
  // offset stays at `committed`). False, for an older snapshot, whose state has expired
  // anyway (reading those messages at the current time would only put older events into
  // the windows): it starts at `committed`. Either way it is logged.
  [[nodiscard]] bool start_behind_commit(const kafka::topic_partition& tp, std::int64_t start,
                                         std::int64_t committed);
  // A partition assigned without a snapshot's position starts reading at `start` (see
  // kafka::source::on_start_known): its state position until its first message is
  // processed, so that a snapshot written before then holds it.
  void start_known(const kafka::topic_partition& tp, std::int64_t start);

  // Every output acknowledged and no failure: the pipelines' state reflects exactly the
  // messages before positions(), and all of their outputs are delivered.
  [[nodiscard]] bool quiescent() const;
  // The state position of every assigned partition with a known position; before the
  // first assignment (even of no partition), the positions restored from the snapshot.
  [[nodiscard]] std::vector<kafka::partition_offset> positions() const;

  // At the stop: logs what the rate-limited warnings still hold back (skipped messages,
  // heavy-hitter events not sent), which would otherwise only show in the metrics.
  void log_held_back_warnings();

  // A final delivery failure happened: consumption must stop. The reason names the
  // pipeline, topic, error and the input message where consumption stopped.
  [[nodiscard]] bool failed() const noexcept { return tracker_.failed() || !failure_.empty(); }
  [[nodiscard]] const std::string& failure_reason() const noexcept { return failure_; }
  // Consumption has stopped after failed(): sketchd_consumption_stopped reads 1 from now on,
  // with the counters of the failures that stopped it published first. Called by the run
  // loop once it has paused the consumer and /readyz says why, so that a scrape never shows
  // consumption stopped while /readyz still answers 200.
  void consumption_stopped();
  // A fatal producer error (the daemon must exit).
  [[nodiscard]] std::optional<std::string> fatal_error() const;

  // sketchd_dedup_duplicates_forwarded_total, sketchd_heavy_hitter_alerts_sent_total,
  // sketchd_producer_queue_messages, sketchd_consumption_stopped. Thread-safe.
  void collect(std::vector<metrics::metric_family>& out) const;

 private:
  enum class output_kind : std::uint8_t { first_seen, duplicate, alert };
  struct route {  // one (pipeline, kind) with an output topic; its index tops the opaque
    std::size_t pipeline = 0;
    output_kind kind = output_kind::first_seen;
    std::size_t topic = 0;  // sink topic index
  };
  struct pipeline_outputs {
    std::optional<std::size_t> first_seen;  // route indices
    std::optional<std::size_t> duplicate;
    std::optional<std::size_t> alert;
  };
  struct loop_counters {
    std::vector<std::uint64_t> duplicates_forwarded;
    std::vector<std::uint64_t> alerts_sent;
    std::vector<std::uint64_t> alert_failures;
  };
  void on_delivery(std::uint64_t opaque, kafka::error_code err, std::string_view reason);
  void forward_failed(const route& r, kafka::error_code err, std::string_view reason,
                      std::optional<kafka::offset_tracker::ticket> ticket);
  void send_alert(std::size_t pipeline, const sketch::heavy_event& e, std::int64_t wall_ms);
  void drain(std::vector<kafka::partition_offset>& out);
  // The record is one of a partition read again up to the group's committed offset.
  [[nodiscard]] bool replaying(const kafka::record& r) const;
  // Every kWarningIntervalMs at most, or now with `now`.
  void warn_extract_failures(std::int64_t wall_ms, bool now = false);
  void publish();

  std::vector<pipeline*> pipelines_;
  std::vector<std::string> topics_;
  std::vector<std::vector<std::size_t>> topic_routes_;  // topic index → pipeline indices
  std::vector<route> routes_;
  std::vector<pipeline_outputs> outputs_;
  std::function<bool()> stop_;
  std::function<bool()> give_up_;
  // A forward was abandoned because of a stop request, its queue full: nothing after it is
  // forwarded (it would be delivered again after the restart, and ahead of it).
  bool abandoned_ = false;
  std::unique_ptr<kafka::sink> sink_;
  kafka::offset_tracker tracker_;
  // Per pipeline, reused for every batch (sized for kafka.batch_size at construction): the
  // messages routed to it, its verdicts, and the next verdict to read.
  std::vector<std::vector<pipeline_input>> inputs_;
  std::vector<std::vector<verdict>> verdicts_;
  std::vector<std::size_t> cursors_;
  std::vector<std::vector<sketch::heavy_event>> heavy_events_;  // of the batch, by pipeline
  std::vector<std::uint64_t> heavy_events_dropped_;             // as last seen, by pipeline

  std::map<std::pair<std::size_t, std::int32_t>, std::int64_t> positions_;  // assigned partitions
  std::map<std::pair<std::size_t, std::int32_t>, std::int64_t> restored_;
  // Partitions revoked since the last assignment, and, during an assignment, those revoked
  // before it: one assigned again in the same rebalance (an eager rebalance revokes every
  // partition and assigns them again; a lost assignment comes back) was counted here all
  // along, and is not taken over.
  std::set<std::pair<std::size_t, std::int32_t>> revoked_;
  std::set<std::pair<std::size_t, std::int32_t>> returning_;
  std::int64_t restored_ms_ = 0;  // when the snapshot of restored_ was written
  bool assigned_any_ = false;     // an assignment has come (even of no partition)
  // Partitions read again up to the group's committed offset (start_behind_commit): the
  // messages before it are not forwarded, and their offsets not stored.
  std::map<std::pair<std::size_t, std::int32_t>, std::int64_t> replay_until_;
  std::string failure_;

  loop_counters local_;
  mutable std::mutex mutex_;  // guards published_ and stopped_
  loop_counters published_;
  bool stopped_ = false;

  // Extract failures: warned at most once per kWarningIntervalMs per pipeline, with the
  // count by reason and the place of one such message.
  static constexpr std::int64_t kWarningIntervalMs = 10'000;
  struct failure_example {
    bool set = false;
    std::size_t topic_index = 0;
    std::int32_t partition = 0;
    std::int64_t offset = 0;
  };
  std::vector<std::array<std::uint64_t, kExtractFailureCount>> failures_warned_;
  std::vector<failure_example> failure_example_;
  std::vector<std::int64_t> last_failure_warning_ms_;
  std::int64_t last_alert_warning_ms_ = 0;
  std::uint64_t alert_failures_unreported_ = 0;

  // Heavy-set changes: a line each, at most kHeavyLinesPerInterval per pipeline in each
  // kWarningIntervalMs; the others are counted, and told in one line when it has passed (a
  // low threshold over an even stream changes hundreds of items at each slide).
  static constexpr unsigned kHeavyLinesPerInterval = 20;
  struct heavy_log {
    std::chrono::steady_clock::time_point since{};  // the interval's start
    unsigned shown = 0;
    std::uint64_t held_entered = 0;
    std::uint64_t held_left = 0;
  };
  std::vector<heavy_log> heavy_log_;
  // Logs heavy_events_ of pipeline p, and what was held back once its interval has passed
  // (or now with `now`).
  void log_heavy_events(std::size_t p, bool now = false);
};

}  // namespace sketchd
