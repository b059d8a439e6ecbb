#include "sketchd/app/snapshotter.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "sketchd/app/backpressure.h"
#include "sketchd/app/state_topic.h"
#include "sketchd/app/wall_clock.h"
#include "sketchd/http/server.h"
#include "sketchd/kafka/source.h"
#include "sketchd/processor/processor.h"
#include "sketchd/util/logging.h"

namespace sketchd::app {

namespace {

// A critical line for a snapshot that stops the start: it is kept.
std::nullopt_t refuse(spdlog::logger& log, const std::string& problem) {
  log.critical("{}; not starting (the snapshot is kept: fix the cause, then start again)", problem);
  return std::nullopt;
}

// A snapshot that cannot be used (`what`): set aside when discard_incompatible_snapshot
// says so (true), else it stops the start (false).
bool set_aside(const config& cfg, state::store& store, const char* what, spdlog::logger& log) {
  const std::string problem = fmt::format("cannot use the snapshot: {}", what);
  if (!cfg.state.discard_incompatible_snapshot) {
    log.critical(
        "{}; not starting. To set this snapshot aside and start with empty windows, set "
        "state.discard_incompatible_snapshot: true",
        problem);
    return false;
  }
  log.warn(
      "{}; setting it aside (state.discard_incompatible_snapshot) and starting with empty "
      "windows",
      problem);
  store.set_aside(problem);
  return true;
}

// How the pipelines took the snapshot's state: the names logged already, those that keep
// the snapshot's windows, and one "pipeline NAME: what does not fit" per pipeline.
struct restore_outcome {
  std::set<std::string> restored;
  std::set<std::string> kept;
  std::vector<std::string> unfit;
};

// Restores one pipeline's state from `blob`; throws std::bad_alloc through.
void restore_pipeline(state::store& store, std::unique_ptr<pipeline>& p, const std::string& blob,
                      spdlog::logger& log, restore_outcome& out) {
  const std::string& name = p->name();
  try {
    p->restore_state(blob);
    // Written while this machine's clock was ahead (it has been set back since): the
    // windows would not move until the clock caught up, keeping items past their window.
    const std::int64_t ahead = p->clock_ms() - wall_ms();
    if (ahead > pipeline::kMaxClockSkewMs) {
      log.warn(
          "snapshot {}: the windows of pipeline {} end {} s ahead of this machine's clock (the "
          "snapshot was written while the clock was ahead); they would not move until it "
          "catches up: the pipeline starts with empty windows",
          store.path(), name, ahead / 1000);
      out.restored.insert(name);  // what there was to say is said
      const pipeline_config config = p->config();
      p.reset();  // before its empty successor is made: never both in memory
      p = std::make_unique<pipeline>(config);
      return;
    }
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    // The pipeline is left with empty windows (restore_state() leaves it so).
    out.unfit.push_back(fmt::format("pipeline {}: {}", name, e.what()));
    out.restored.insert(name);  // what there is to say is said after
    return;
  }
  out.restored.insert(name);
  if (const auto& why = p->heavy_window_dropped()) {
    // Its other window and the input positions are restored: restoring nothing would
    // forward again, for a whole dedup window, the items its dedup had seen.
    log.warn(
        "snapshot {}: the heavy-hitter window of pipeline {} is of an older format ({}); it "
        "starts empty, its dedup window and the input positions are restored",
        store.path(), name, *why);
    return;  // not kept: its windows miss the items before the input positions
  }
  out.kept.insert(name);
}

// False when the pipelines that do not fit the snapshot stop the start.
bool accept_unfit(const config& cfg, state::store& store, const std::vector<std::string>& unfit,
                  spdlog::logger& log) {
  if (unfit.empty()) return true;
  const std::string problem = fmt::format("snapshot {} does not fit the configuration: {}",
                                          store.path(), fmt::join(unfit, "; "));
  if (!cfg.state.discard_incompatible_snapshot) {
    log.critical(
        "{}; not starting. To start {} with empty windows (the other pipelines keep their "
        "state), set state.discard_incompatible_snapshot: true",
        problem, unfit.size() == 1 ? "this pipeline" : "these pipelines");
    return false;
  }
  log.warn(
      "{}; {} with empty windows (state.discard_incompatible_snapshot), the other pipelines "
      "and the input positions are restored",
      problem, unfit.size() == 1 ? "this pipeline starts" : "these pipelines start");
  store.keep_aside(problem);
  return true;
}

}  // namespace

std::optional<restored_state> restore(const config& cfg, state::store& store,
                                      std::vector<std::unique_ptr<pipeline>>& pipelines) {
  const auto log = module_logger("state");
  std::optional<state::snapshot> snap;
  // A snapshot that cannot be read at all, or restored for want of memory, is not bad:
  // it is kept whatever discard_incompatible_snapshot says.
  try {
    snap = store.read();
  } catch (const state::unreadable_error& e) {
    return refuse(*log, e.what());
  } catch (const std::bad_alloc&) {
    return refuse(*log, fmt::format("not enough memory to read the snapshot {}", store.path()));
  } catch (const state::snapshot_error& e) {
    if (!set_aside(cfg, store, e.what(), *log)) return std::nullopt;
    return restored_state{};
  }
  if (!snap) {
    log->info("no snapshot in {}: the windows start empty", cfg.state.dir.value_or(""));
    return restored_state{};
  }
  restore_outcome outcome;
  for (const auto& [name, blob] : snap->pipelines) {
    auto it = std::find_if(pipelines.begin(), pipelines.end(),
                           [&](const auto& p) { return p->name() == name; });
    if (it == pipelines.end()) {
      log->warn(
          "snapshot {}: pipeline {} is no longer configured; its state is dropped (a renamed "
          "pipeline starts with empty windows: its dedup forwards again the items it had seen)",
          store.path(), name);
      continue;
    }
    try {
      restore_pipeline(store, *it, blob, *log, outcome);
    } catch (const std::bad_alloc&) {
      return refuse(
          *log, fmt::format("not enough memory to restore pipeline {} from the snapshot {}", name,
                            store.path()));
    }
  }
  if (!accept_unfit(cfg, store, outcome.unfit, *log)) return std::nullopt;
  for (const auto& p : pipelines) {
    if (!outcome.restored.count(p->name()))
      log->info("pipeline {} is not in the snapshot: its windows start empty", p->name());
    // Empty windows where the input positions go on from the snapshot's: they miss the
    // items before those positions (sketchd_cms_window_incomplete_seconds).
    if (!outcome.kept.count(p->name())) p->partitions_taken_over();
  }
  restored_state out{snap->offsets, snap->created_ms, snap->outputs};
  const std::int64_t created_ms = std::max<std::int64_t>(snap->created_ms, 0);
  log->info(
      "restored snapshot {} of {} ({} pipeline(s), {} partition position(s))", store.path(),
      // In UTC, as the log's own times.
      fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z",
                  fmt::gmtime(static_cast<std::time_t>(created_ms / 1000)), created_ms % 1000),
      outcome.kept.size(), out.positions.size());
  return out;
}

namespace {

prometheus::Gauge& gauge(metrics::registry& registry, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry.families()).Add({});
}

}  // namespace

snapshotter::snapshotter(metrics::registry& registry, const state_config& cfg, state::store* store,
                         state_topic* shards,
                         const std::vector<std::unique_ptr<pipeline>>& pipelines,
                         const std::vector<std::string>& topics, processor& proc,
                         kafka::source& input, readiness& ready,
                         std::function<bool()> stop_requested)
    : cfg_(cfg),
      store_(store),
      shards_(shards),
      pipelines_(pipelines),
      topics_(topics),
      proc_(proc),
      input_(input),
      ready_(ready),
      stop_requested_(std::move(stop_requested)),
      last_(std::chrono::steady_clock::now()),
      last_success_seconds_(
          gauge(registry, "sketchd_snapshot_last_success_timestamp_seconds",
                "Unix time of the last snapshot written successfully (0 before the first).")),
      failures_(prometheus::BuildCounter()
                    .Name("sketchd_snapshot_failures_total")
                    .Help("Snapshots that could not be taken or written.")
                    .Register(registry.families())
                    .Add({})),
      duration_seconds_(gauge(registry, "sketchd_snapshot_duration_seconds",
                              "Time the last snapshot took, delivery wait included.")),
      size_bytes_(gauge(registry, "sketchd_snapshot_size_bytes",
                        "Size of the last snapshot file (0 without state.dir).")) {
  gauge(registry, "sketchd_snapshot_interval_seconds",
        "state.snapshot_interval: how often a snapshot is taken.")
      .Set(std::chrono::duration<double>(cfg.snapshot_interval).count());
}

bool snapshotter::deliver(std::chrono::milliseconds wait, bool stoppable, bool& abandoned) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + wait;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (!input_.held() && backpressure::snapshot_holds(start, now)) input_.hold();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    std::vector<kafka::partition_offset> offsets;
    const bool delivered = proc_.flush(
        std::clamp(left, std::chrono::milliseconds(0), std::chrono::milliseconds(200)), offsets);
    input_.store_offsets(offsets);
    if (delivered || std::chrono::steady_clock::now() >= deadline) return delivered;
    if (stoppable && stop_requested_()) {
      abandoned = true;
      return false;
    }
  }
}

void snapshotter::failed(const std::string& why) {
  module_logger("state")->error("snapshot not written: {}", why);
  failures_.Increment();
}

bool snapshotter::take(std::chrono::milliseconds wait, bool stoppable) {
  // Up to `wait` for the outputs, then the state written whatever its size.
  const readiness::long_step step(ready_);
  const auto start = std::chrono::steady_clock::now();
  // Held once the outputs have been waited for kHoldAfter, released whatever the outcome.
  struct release_input {
    kafka::source& input;
    ~release_input() { input.release(); }
  } release{input_};
  bool abandoned = false;
  const bool delivered = deliver(wait, stoppable, abandoned);
  if (abandoned) {
    module_logger("state")->info(
        "periodic snapshot abandoned: stopping (the final snapshot follows)");
    return false;
  }
  if (!delivered || !proc_.quiescent()) {
    failed(proc_.failed() ? "forwarding failed" : "outputs still undelivered");
    return false;
  }
  try {
    // Inside: encoding the state allocates as much as the state, which can fail too.
    state::snapshot snap;
    snap.created_ms = wall_ms();
    const std::vector<kafka::partition_offset> positions = proc_.positions();
    for (const auto& o : positions)
      snap.offsets.push_back({topics_[o.topic_index], o.partition, o.next_offset});
    for (const auto& [topic, partition, next] : proc_.output_ends())
      snap.outputs.push_back({topic, partition, next});
    if (store_ != nullptr) {
      const sketch::bit_coding coding = bit_coding_of(cfg_.compression);
      for (const auto& p : pipelines_)
        snap.pipelines.emplace_back(p->name(), p->save_state(coding));
      const auto written = store_->write(snap);
      snap.pipelines.clear();
      size_bytes_.Set(static_cast<double>(written.bytes));
      module_logger("state")->debug("snapshot written: {} bytes", written.bytes);
    }
    // Each shard by itself: its partition's position and the outputs' positions.
    bool complete = true;
    if (shards_ != nullptr) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          start + wait + std::chrono::seconds(30) - std::chrono::steady_clock::now());
      complete = shards_->write(positions, snap.outputs,
                                std::max<std::chrono::milliseconds>(left, std::chrono::seconds(5)));
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    duration_seconds_.Set(seconds);
    if (!complete) {
      failed("some shards were not written to the state topic");
      return false;
    }
    last_success_seconds_.Set(static_cast<double>(snap.created_ms) / 1000.0);
    return true;
  } catch (const std::exception& e) {
    failed(e.what());
    return false;
  }
}

void snapshotter::take_when_due(std::chrono::steady_clock::time_point now) {
  if (proc_.failed() || now - last_ < cfg_.snapshot_interval) return;
  static_cast<void>(take(std::chrono::seconds(30), /*stoppable=*/true));
  last_ = std::chrono::steady_clock::now();
}

}  // namespace sketchd::app
