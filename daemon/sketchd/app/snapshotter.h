// The local snapshot of state.dir: restored at the start, taken every snapshot_interval
// and at the stop, and its metrics (sketchd_snapshot_*). The same snapshots write the shards
// of the state topic (state.topic, app/state_topic.h), with or without a state.dir.
//
// A snapshot is taken only when every output is delivered: it then holds the pipelines'
// state and the input positions it reflects exactly, and a restart resumes from them. It is
// written before the final commit, so a crash between the two resumes from the snapshot
// (docs/SEMANTICS.md).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sketchd/config/config.h"
#include "sketchd/metrics/metrics.h"
#include "sketchd/pipeline/pipeline.h"
#include "sketchd/state/snapshot.h"

namespace sketchd {
class processor;
class readiness;
namespace kafka {
class source;
}
}  // namespace sketchd

namespace sketchd::app {

class state_topic;

// What a restore found: the input positions and when the snapshot was written.
struct restored_state {
  std::vector<state::partition_offset> positions;
  std::int64_t snapshot_ms = 0;
  std::vector<state::partition_offset> outputs;  // the output positions (state::snapshot)
};

// Restores `pipelines` and the input positions from the snapshot of `store`, if there is
// one. A corrupt snapshot, or one made under another configuration, stops the start
// (returns nullopt, with a critical line) unless state.discard_incompatible_snapshot sets
// it aside: the whole snapshot when it cannot be read as one, else only the pipelines that
// do not fit it (each starts with empty windows; the others, and the input positions, are
// restored). A snapshot that cannot be read at all, or restored for want of memory, is
// kept whatever that option says.
[[nodiscard]] std::optional<restored_state> restore(
    const config& cfg, state::store& store, std::vector<std::unique_ptr<pipeline>>& pipelines);

// Takes the snapshots of a running daemon. Not thread-safe; the processing thread's (its
// metrics are prometheus-cpp's, which the scrape reads).
class snapshotter {
 public:
  // Registers sketchd_snapshot_last_success_timestamp_seconds, _failures_total,
  // _duration_seconds, _size_bytes and _interval_seconds in `registry`. Everything is
  // borrowed and must outlive the snapshotter. `topics` are the source's
  // (kafka::record::topic_index indexes them). `stop_requested` tells a periodic snapshot
  // to stop waiting.
  // `store` (state.dir) or `shards` (state.topic) may be null, not both.
  snapshotter(metrics::registry& registry, const state_config& cfg, state::store* store,
              state_topic* shards, const std::vector<std::unique_ptr<pipeline>>& pipelines,
              const std::vector<std::string>& topics, processor& proc, kafka::source& input,
              readiness& ready, std::function<bool()> stop_requested);

  // Delivers everything in flight (up to `wait`, holding the input once it has waited
  // backpressure::kHoldAfter), then writes the pipelines' state with the positions it
  // reflects. Skipped (and counted as a failure) when some output is not delivered. A
  // periodic snapshot (`stoppable`) stops waiting as soon as a stop is requested: the final
  // one follows. True when the snapshot is written.
  [[nodiscard]] bool take(std::chrono::milliseconds wait, bool stoppable);

  // The periodic snapshot, when snapshot_interval has passed since the last at `now`.
  void take_when_due(std::chrono::steady_clock::time_point now);

 private:
  // Waits up to `wait` for the outputs; false when they are not all delivered by then, or a
  // stop came during a `stoppable` wait (`abandoned` set).
  [[nodiscard]] bool deliver(std::chrono::milliseconds wait, bool stoppable, bool& abandoned);
  void failed(const std::string& why);

  const state_config& cfg_;
  state::store* store_;
  state_topic* shards_;
  const std::vector<std::unique_ptr<pipeline>>& pipelines_;
  const std::vector<std::string>& topics_;
  processor& proc_;
  kafka::source& input_;
  readiness& ready_;
  std::function<bool()> stop_requested_;
  std::chrono::steady_clock::time_point last_;

  prometheus::Gauge& last_success_seconds_;  // unix time; 0 before the first
  prometheus::Counter& failures_;
  prometheus::Gauge& duration_seconds_;
  prometheus::Gauge& size_bytes_;
};

}  // namespace sketchd::app
