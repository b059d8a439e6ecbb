// The processing step of the daemon, between the Kafka source and the pipelines'
// outputs: routes each consumed message to the pipelines of its topic, hands what they
// decide to forward (first-seen events, duplicates, heavy-hitter alert events, and the
// dead letters of messages they skipped) to the forwarder, and says which input offsets may
// be stored.
//
//   batch ─► pipelines (process) ─► verdicts ─► forwarder.forward(…, ticket) ┐
//                                                                             ▼ delivery reports
//   offsets to store ◄── offset_tracker (in order per partition) ◄── ack / final failure
//
// An input offset becomes storable only when every output of its message, and of every
// earlier message of its partition, is acknowledged (offset_tracker). A dead letter (a copy
// of a message a pipeline skipped for an extract failure other than a tombstone, sent to its
// dead_letter_topic with the reason and pipeline headers) is such an output: it holds the
// offset back until it is acknowledged, and its final failure stops consumption as a failed
// forward does. Dead letters are not replayable outputs (see replayable_outputs()): after a
// crash, those sent after the last commit are sent again. A final delivery
// failure stops consumption: the processor reports failed(), the run loop pauses the
// source and marks the daemon not ready; the offset never moves past the failed message.
//
// The state position of each assigned partition is partition_positions' (see there): a
// snapshot taken when quiescent() holds them, and a restart resumes from them.
//
// Not thread-safe: one owner, the processing thread. The counters read by the metrics
// collector are published once per batch under a lock (collect() is thread-safe).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "sketchd/config/config.h"
#include "sketchd/kafka/offset_tracker.h"
#include "sketchd/kafka/source.h"
#include "sketchd/metrics/metrics.h"
#include "sketchd/pipeline/pipeline.h"
#include "sketchd/processor/forwarded_outputs.h"
#include "sketchd/processor/forwarder.h"
#include "sketchd/processor/output_checkpoints.h"
#include "sketchd/processor/partition_positions.h"
#include "sketchd/util/rate_limit.h"

namespace sketchd {

class processor {
 public:
  // `topics` are the source's topics (record::topic_index indexes them). `out` takes every
  // output topic of the pipelines (see kafka_forwarder.h); it may be null when none has
  // one (std::invalid_argument otherwise). `stop` is consulted while the forwarder's queue
  // is full, so that a stop request is not held up by a broker that is down.
  processor(const config& cfg, std::vector<pipeline*> pipelines, std::vector<std::string> topics,
            std::unique_ptr<forwarder> out, std::function<bool()> stop);

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
  void assignment_begins();
  void assigned(const kafka::topic_partition& tp, std::optional<std::int64_t> start);
  void revoked(std::span<const kafka::topic_partition> partitions);
  // The partition counts of the input topics (counts[i] of topics[i]; 0 unknown), which size
  // the shards of the pipelines with scope: partition. Whether any pipeline needs them.
  void partition_counts(std::span<const std::uint32_t> counts);
  [[nodiscard]] bool needs_partition_counts() const;
  // Filling the windows from the log (state.fill_from_log; kafka::source::on_fill_since()).
  // The time since which a partition just assigned wants its messages: now less the
  // longest window of the pipelines reading it, for a partition assigned without a
  // snapshot's position and not revoked from this instance in the same rebalance; nullopt
  // otherwise, or without fill_from_log.
  [[nodiscard]] std::optional<std::int64_t> fill_since(const kafka::topic_partition& tp) const;
  // What the fill found: its messages are read again (replaying(): into the windows, not
  // forwarded, their offsets not stored), and the heavy-hitter windows are incomplete
  // (pipeline::partitions_taken_over()) unless the log held every message of the window.
  void filled(const kafka::topic_partition& tp, const kafka::fill_outcome& outcome);

  // Positions restored from a snapshot written at `snapshot_ms` (wall clock): the start
  // offsets of their partitions.
  void restore_positions(const std::vector<kafka::partition_offset>& positions,
                         std::int64_t snapshot_ms) {
    positions_.restore(positions, snapshot_ms);
  }
  // A partition's position restored from its shards' snapshot on the state topic, written at
  // `snapshot_ms`; whether it has a restored position not taken yet.
  void restore_position(const kafka::topic_partition& tp, std::int64_t next_offset,
                        std::int64_t snapshot_ms) {
    positions_.restore_one(tp, next_offset, snapshot_ms);
  }
  [[nodiscard]] bool has_restored_position(const kafka::topic_partition& tp) const {
    return positions_.has_restored(tp);
  }
  // The longest heavy_hitters or dedup window of the pipelines reading source topic
  // `topic_index`.
  [[nodiscard]] std::chrono::milliseconds longest_window(std::size_t topic_index) const;
  // During an assignment: whether `tp` was revoked from this instance in the same rebalance
  // (its shards are still resident).
  [[nodiscard]] bool returning(const kafka::topic_partition& tp) const {
    return positions_.returning(tp);
  }
  // The start offset of a partition restored from a snapshot, once: later assignments of
  // it start at the committed offset.
  [[nodiscard]] std::optional<std::int64_t> take_restored_position(
      const kafka::topic_partition& tp) {
    return positions_.take_restored(tp);
  }
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
  // The partitions assigned at a restored position since the last call, with it, for the
  // input to store (see partition_positions::take_started): called once they are the
  // consumer's (kafka::source::on_assigned), before their first message.
  void take_started(std::vector<kafka::partition_offset>& out) { positions_.take_started(out); }
  // A partition assigned without a snapshot's position starts reading at `start` (see
  // kafka::source::on_start_known): its state position until its first message is
  // processed, so that a snapshot written before then holds it.
  void start_known(const kafka::topic_partition& tp, std::int64_t start) {
    positions_.start_known(tp, start);
    // Nothing before it is forwarded here (read again, if at all, into the windows only).
    forwarded_before_.forget_before(tp.topic_index, tp.partition, start);
  }

  // Crashes (docs/SEMANTICS.md): the output positions a snapshot records, and what a
  // restart finds forwarded after them.
  //   - learn_output_ends(): the forwarder learns where the output topics end (in the
  //     background, from the start on);
  //   - output_ends(): per output partition, where whatever is forwarded from now on lands
  //     at the earliest, once quiescent(): (topic, partition, offset);
  //   - replayable_outputs(): the output topics whose copies can be told apart: a dedup
  //     output (first-seen events or duplicates) of one pipeline only (a topic two routes
  //     write cannot say whose copy it holds, and alert events carry no provenance);
  //   - forwarded_before(): a copy of input message (tp, offset) was found in output topic
  //     `output` (one of replayable_outputs()): when the message is read, that output is not
  //     forwarded again, whoever reads the message next. What is left of a partition is
  //     dropped when it is revoked, and below the offset its reading starts at.
  void learn_output_ends() {
    if (out_) out_->learn_ends();
  }
  [[nodiscard]] std::vector<std::tuple<std::string, std::int32_t, std::int64_t>> output_ends()
      const;
  [[nodiscard]] const std::vector<std::string>& replayable_outputs() const noexcept {
    return replayable_;
  }
  void forwarded_before(std::string_view output, const kafka::topic_partition& tp,
                        std::int64_t offset);
  [[nodiscard]] std::uint64_t forwarded_before_left() const noexcept {
    return forwarded_before_.size();
  }
  // The metadata of each offset about to be committed (kafka::source::on_commit()): where the
  // replayable outputs stood when the messages from that offset on were forwarded, for the
  // member that takes the partition over after a crash (output_checkpoints.h). Takes a
  // checkpoint first. Empty without a replayable output.
  void commit_metadata(std::span<kafka::commit_offset> offsets);

  // Every output acknowledged and no failure: the pipelines' state reflects exactly the
  // messages before positions(), and all of their outputs are delivered.
  [[nodiscard]] bool quiescent() const;
  // The state position of every assigned partition with a known position; before the
  // first assignment (even of no partition), the positions restored from the snapshot.
  [[nodiscard]] std::vector<kafka::partition_offset> positions() const {
    return positions_.positions();
  }

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
  // A fatal forwarder error (the daemon must exit).
  [[nodiscard]] std::optional<std::string> fatal_error() const;

  // Adds collect() to `registry`'s collectables: the processor must outlive its scrapes.
  void register_metrics(metrics::registry& registry) const;
  // sketchd_dedup_duplicates_forwarded_total, sketchd_heavy_hitter_alerts_sent_total,
  // sketchd_dead_letters_total, sketchd_dead_letter_failures_total,
  // sketchd_producer_queue_messages, sketchd_consumption_stopped. Thread-safe.
  void collect(std::vector<prometheus::MetricFamily>& out) const;

 private:
  enum class output_kind : std::uint8_t { first_seen, duplicate, alert, dead_letter };
  struct route {  // one (pipeline, kind) with an output topic; its index tops the opaque
    std::size_t pipeline = 0;
    output_kind kind = output_kind::first_seen;
    std::size_t topic = 0;  // the forwarder's topic index
    std::string topic_name;
  };
  struct pipeline_outputs {
    std::optional<std::size_t> first_seen;  // route indices
    std::optional<std::size_t> duplicate;
    std::optional<std::size_t> alert;
    std::optional<std::size_t> dead_letter;
  };
  struct loop_counters {
    std::vector<std::uint64_t> duplicates_forwarded;
    std::vector<std::uint64_t> alerts_sent;
    std::vector<std::uint64_t> alert_failures;
    // Per pipeline: dead letters delivered, by extract_failure; and those finally failed.
    std::vector<std::array<std::uint64_t, kExtractFailureCount>> dead_letters;
    std::vector<std::uint64_t> dead_letter_failures;
  };
  // Where a pipeline's skipped message is, for the warning about them.
  struct failure_example {
    bool set = false;
    std::size_t topic_index = 0;
    std::int32_t partition = 0;
    std::int64_t offset = 0;
  };

  void add_routes();
  // The route of pipeline i's verdict v on the at-th message of its batch (a first-seen
  // event or a duplicate with an output topic, a message skipped for a reason other than a
  // tombstone with a dead-letter topic), if any.
  [[nodiscard]] std::optional<std::size_t> route_of(std::size_t i, verdict v,
                                                    std::size_t at) const noexcept;
  // The pipelines reading tp's topic have not counted its recent items.
  void taken_over(const kafka::topic_partition& tp);
  // scope: partition: drops the pipelines' shards of partitions no longer assigned, or of
  // one partition.
  void drop_unassigned_shards();
  void drop_shard(const kafka::topic_partition& tp);
  // process(): the pipelines' verdicts on the batch (their state published and released
  // before return); then each message's outputs forwarded; then what follows a batch.
  void run_pipelines(std::span<const kafka::record> batch, std::int64_t wall_ms);
  void forward_message(const kafka::record& r);
  void after_batch(std::int64_t wall_ms);
  void on_delivery(std::uint64_t opaque, kafka::error_code err, std::string_view reason);
  void forward_failed(const route& r, kafka::error_code err, std::string_view reason,
                      std::optional<kafka::offset_tracker::ticket> ticket);
  void send_alert(std::size_t pipeline, const sketch::heavy_event& e, std::int64_t wall_ms);
  void drain(std::vector<kafka::partition_offset>& out);
  // A checkpoint of the replayable outputs' ends and the partitions' next offsets.
  void take_checkpoint();
  void publish();

  // The log lines of warnings.cpp. Skipped messages of each pipeline, at most once per
  // kWarningInterval, or now with `now`.
  void warn_extract_failures(bool now = false);
  // Logs heavy_events_ of pipeline p, and what was held back once its interval has passed
  // (or now with `now`).
  void log_heavy_events(std::size_t p, bool now = false);
  // Heavy-hitter events the pipeline's tracker lost since the last batch.
  void warn_heavy_events_dropped(std::size_t p);
  // An alert event not sent, at most once per kWarningInterval for all pipelines.
  void warn_alert_failure(const route& r, std::string_view reason);

  std::vector<pipeline*> pipelines_;
  std::vector<std::string> topics_;
  bool fill_from_log_ = true;
  // Partitions assigned without a snapshot's position, until filled() tells their fill.
  std::set<std::pair<std::size_t, std::int32_t>> to_fill_;
  std::vector<std::vector<std::size_t>> topic_routes_;  // topic index → pipeline indices
  // [pipeline][topic index]: the index of the topic in the pipeline's config().topics.
  std::vector<std::vector<std::uint32_t>> pipeline_topic_;
  // The shards of partitions no longer assigned are dropped before the next batch (scope:
  // partition): set by assignments and revocations.
  bool drop_unassigned_shards_ = false;
  std::vector<route> routes_;
  std::vector<pipeline_outputs> outputs_;
  std::function<bool()> stop_;
  std::function<bool()> give_up_;
  // A forward was abandoned because of a stop request, its queue full: nothing after it is
  // forwarded (it would be delivered again after the restart, and ahead of it).
  bool abandoned_ = false;
  std::unique_ptr<forwarder> out_;
  kafka::offset_tracker tracker_;
  partition_positions positions_;
  forwarded_outputs forwarded_before_;
  output_checkpoints checkpoints_;
  std::vector<std::string> replayable_;  // replayable_outputs(), found once by add_routes()
  bool warned_checkpoint_too_long_ = false;
  // forward_message(): per pipeline, its output of the message was forwarded before a crash.
  std::vector<char> done_before_;
  // Per pipeline, reused for every batch (sized for kafka.batch_size at construction): the
  // messages routed to it, its verdicts, and the next verdict to read.
  std::vector<std::vector<pipeline_input>> inputs_;
  std::vector<std::vector<verdict>> verdicts_;
  // Of the pipelines with a dead_letter_topic (empty for the others): why each message of
  // the batch was skipped, as verdicts_.
  std::vector<std::vector<extract_failure>> failures_;
  // The reason of each dead letter in flight, by its opaque, for the counter of its delivery.
  // Allocates a node per dead letter: bad input only, never a valid message.
  std::unordered_map<std::uint64_t, extract_failure> dead_letter_reasons_;
  std::vector<std::size_t> cursors_;
  std::vector<std::vector<sketch::heavy_event>> heavy_events_;  // of the batch, by pipeline
  std::vector<std::uint64_t> heavy_events_dropped_;             // as last seen, by pipeline
  std::string failure_;

  loop_counters local_;
  mutable std::mutex mutex_;  // guards published_ and stopped_
  loop_counters published_;
  bool stopped_ = false;

  static constexpr std::chrono::seconds kWarningInterval{10};
  // Extract failures: warned at most once per kWarningInterval per pipeline, with the
  // count by reason since the last warning and the place of one such message.
  std::vector<log_rate_limit> failure_warnings_;
  std::vector<std::array<std::uint64_t, kExtractFailureCount>> failures_warned_;
  std::vector<failure_example> failure_example_;
  // Alert failures of all pipelines: a line at most once per kWarningInterval, which
  // counts those held back since the last one.
  log_rate_limit alert_warnings_{kWarningInterval};
  // Heavy-set changes: a line each, at most kHeavyLinesPerInterval per pipeline in each
  // kWarningInterval; the others are counted, and told in one line when it has passed (a
  // low threshold over an even stream changes hundreds of items at each slide).
  static constexpr unsigned kHeavyLinesPerInterval = 20;
  struct heavy_log {
    log_rate_limit limit{kWarningInterval, kHeavyLinesPerInterval};
    std::uint64_t held_entered = 0;
    std::uint64_t held_left = 0;
  };
  std::vector<heavy_log> heavy_log_;
};

}  // namespace sketchd
