// `sketchd run` as an object with a lifecycle: build() constructs and wires every
// component, run() loops, shutdown() stops them in the stated order.
//
//   config ─► [embedded broker] ─► pipelines [◄─ snapshot restored from state.dir]
//          ─► processor ─► metrics + HTTP ─► source (+ rebalance hooks) ─► loop:
//     poll a batch → processor: pipelines, forwarding, alert events
//     → serve delivery reports → store the offsets that became storable
//     → (every snapshot_interval) deliver everything, snapshot the state with its positions
//     → (every summary_interval) one log line per pipeline
//
// One processing thread (the caller's) owns the pipelines' state and serves the producer's
// delivery reports; the source reads the next batch on a poller thread of its own while
// this one processes (and runs the rebalance hooks here, between batches); librdkafka and
// the HTTP server run their own threads. Signals only set a flag that the loop reads.
//
// The stop, in this order (docs/SEMANTICS.md): the batch in hand is finished; the
// generator stops; the outputs are delivered (within backpressure::kFinalWait) and the
// final snapshot written with the positions it reflects — before the final commit, so that
// a crash between the two resumes from the snapshot; the consumer commits and closes; the
// HTTP server stops; the rate-limited lines still held back are logged.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sketchd/app/backpressure.h"
#include "sketchd/app/metrics.h"
#include "sketchd/app/snapshotter.h"
#include "sketchd/app/state_topic.h"
#include "sketchd/app/summary.h"
#include "sketchd/config/config.h"
#include "sketchd/generator/generator.h"
#include "sketchd/http/server.h"
#include "sketchd/kafka/mock_cluster.h"
#include "sketchd/kafka/source.h"
#include "sketchd/metrics/metrics.h"
#include "sketchd/pipeline/pipeline.h"
#include "sketchd/processor/processor.h"
#include "sketchd/state/snapshot.h"

namespace sketchd::app {

// Not thread-safe: one owner, the processing thread, calls build(), run() and shutdown()
// in that order, once each.
class app {
 public:
  // Constructs and wires every component, restores the state and starts serving HTTP and
  // consuming. nullptr, with a critical line, when the start is refused (the sketches do
  // not fit in memory, the HTTP address cannot be listened on, the snapshot cannot be
  // used). Throws std::exception on a failure to set up a component (the Kafka clients,
  // the embedded broker). `cfg` must outlive the app.
  [[nodiscard]] static std::unique_ptr<app> build(const config& cfg);

  // Processes batches until `stop` is set or a fatal error (of Kafka, of the generator)
  // stops it. Returns the status so far: 0, or 1 after a fatal error. `stop` must outlive
  // the app (the rebalance during the consumer's close reads it).
  [[nodiscard]] int run(const std::atomic<bool>& stop);

  // Stops in the order above after run() returned `status`. Returns the exit status: 0
  // after a clean stop, 129 after a clean stop on SIGHUP (`hangup`), 1 after a failure
  // (`status` 1, a final snapshot not written, consumption stopped on a forwarding failure).
  [[nodiscard]] int shutdown(int status, bool hangup);

  ~app();
  app(const app&) = delete;
  app& operator=(const app&) = delete;

 private:
  explicit app(const config& cfg);
  [[nodiscard]] bool prepare();  // the state, before anything is started
  void start_kafka();
  [[nodiscard]] bool open_state_topic();  // state.topic: made sure of, or the start stops
  // At an assignment: the partitions whose shards the state topic holds start from them.
  void restore_from_state_topic();
  void start_processor();
  void register_metrics();
  void start_http();
  void start_source();
  void on_revoke(std::span<const kafka::topic_partition> revoked);
  // One turn of the loop; false once a fatal error sets status_.
  [[nodiscard]] bool turn();
  [[nodiscard]] std::optional<std::string> fatal_error();
  void final_delivery(std::chrono::milliseconds wait);
  [[nodiscard]] bool stopping() const noexcept { return stop_ != nullptr && stop_->load(); }

  // At the start, with a snapshot: how long reading back each output topic may take
  // (crash_replay.h).
  static constexpr std::chrono::seconds kReplayTimeout{60};
  // The same for the partitions taken over in a rebalance, which the group waits for.
  static constexpr std::chrono::seconds kTakeoverReplayTimeout{10};

  const config& cfg_;
  std::optional<state::store> store_;
  std::vector<std::unique_ptr<pipeline>> pipelines_;
  restored_state restored_;
  std::optional<kafka::mock_cluster> embedded_;
  std::string bootstrap_;
  std::vector<std::string> topics_;  // the source's
  readiness ready_;
  std::optional<readiness::long_step> starting_;
  backpressure backpressure_;
  const std::atomic<bool>* stop_ = nullptr;  // run()'s
  std::unique_ptr<processor> proc_;
  metrics::registry registry_;
  std::unique_ptr<consumed_counters> consumed_counters_;
  std::unique_ptr<http_server> http_;
  std::unique_ptr<kafka::source> source_;
  std::unique_ptr<state_topic> state_topic_;
  std::unique_ptr<snapshotter> snapshots_;
  std::unique_ptr<generator> generator_;
  std::unique_ptr<summary_reporter> summary_;

  // The loop's.
  std::vector<std::uint64_t> consumed_;  // by topic index
  std::vector<kafka::partition_offset> to_store_;
  bool generator_started_ = false;
  std::chrono::steady_clock::time_point stopped_at_;  // consumption stopped on a failure
  int status_ = 0;
};

}  // namespace sketchd::app
