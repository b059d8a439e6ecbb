// `sketchd run`: the daemon's main loop.
//
//   config ─► [embedded broker] ─► pipelines [◄─ snapshot restored from state.dir]
//          ─► metrics + HTTP ─► source (+ rebalance hooks) ─► processor (+ sink) ─► loop:
//     poll a batch → processor: pipelines, forwarding, alert events
//     → serve delivery reports → store the offsets that became storable
//     → (every snapshot_interval) deliver everything, snapshot the state with its positions
//     → (every summary_interval) one log line per pipeline
//
// One processing thread (this one) owns the pipelines' state and serves the producer's
// delivery reports; the source reads the next batch on a poller thread of its own while
// this one processes (and runs the rebalance hooks here, between batches); librdkafka
// and the HTTP server run their own threads. Signals only set
// a flag that the loop reads; on SIGINT, SIGTERM or SIGHUP the loop finishes its batch, waits for
// the outputs to be delivered, writes a snapshot, commits the offsets, and returns 0 (129
// after SIGHUP: see run()).
//
// Order at shutdown matters for what a restart sees (docs/SEMANTICS.md): the snapshot is
// written before the final commit, so a crash between the two resumes from the snapshot.
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <system_error>
#include <thread>

#include "sketch/memory.h"
#include "sketchd/commands.h"
#include "sketchd/config/config.h"
#include "sketchd/generator/generator.h"
#include "sketchd/http/server.h"
#include "sketchd/kafka/mock_cluster.h"
#include "sketchd/kafka/property_policy.h"
#include "sketchd/kafka/source.h"
#include "sketchd/metrics/metrics.h"
#include "sketchd/pipeline/pipeline.h"
#include "sketchd/processor.h"
#include "sketchd/state/snapshot.h"
#include "sketchd/util/build_info.h"
#include "sketchd/util/json.h"
#include "sketchd/util/logging.h"

namespace sketchd {

namespace {

std::atomic<bool> stop_requested{false};
std::atomic<int> stop_signal{0};
std::atomic<bool> stop_signal_logged{false};  // by the signal thread, as it came

// The first stop signal's line: a SIGHUP is no reload.
void log_stop_signal(spdlog::logger& log, int signal) {
  if (signal == SIGHUP) {
    log.warn(
        "received signal {} (SIGHUP): sketchd does not reload its configuration; shutting down "
        "cleanly, with exit status 129, so that a supervisor that restarts it on failure starts "
        "it again with the configuration as it is now",
        signal);
  } else {
    log.info("received signal {} (SIG{}), shutting down", signal, sigabbrev_np(signal));
  }
}
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

// SIGINT, SIGTERM and SIGHUP are blocked in every thread (the mask is set before any
// thread starts, and threads inherit it) and taken by a thread of their own with
// sigwait(), which may log. The first asks for a clean stop. A second, while the stop runs,
// is answered with what a third would do; the third exits at once with status 1, without
// finishing the stop: a final snapshot and commit not written by then are not written
// (nothing is lost: what was not committed is read again after the restart, and the
// snapshot file is either the previous one or the new one).
void start_signal_thread() {
  static sigset_t signals;  // read by the thread for the whole life of the process
  sigemptyset(&signals);
  for (const int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals, s);
  if (const int rc = pthread_sigmask(SIG_BLOCK, &signals, nullptr); rc != 0) {
    throw std::system_error(rc, std::generic_category(), "block SIGINT, SIGTERM and SIGHUP");
  }
  std::thread([] {
    for (int count = 1;; ++count) {
      int signal = 0;
      if (sigwait(&signals, &signal) != 0) {
        --count;
        continue;
      }
      // The logger through the registry's lock, which orders this thread after
      // setup_logging() (spdlog's default-logger shortcut reads a pointer unsynchronized);
      // before it, stderr.
      const std::shared_ptr<spdlog::logger> log = spdlog::get("sketchd");
      if (count == 1) {
        stop_signal.store(signal);
        stop_requested.store(true);
        // Logged as it comes, so that a second one is logged after it; before the logging
        // is set up, the run's stop logs it (whichever comes first, once).
        if (log && !stop_signal_logged.exchange(true)) log_stop_signal(*log, signal);
        continue;
      }
      if (!log) {
        print_stderr(count == 2 ? "sketchd: received a second signal while stopping\n"
                                : "sketchd: received a third signal: exiting now\n");
        if (count > 2) std::_Exit(1);
        continue;
      }
      if (count == 2) {
        log->warn(
            "received a second stop signal, {} (SIG{}), while stopping: the stop goes on "
            "(within about 25 s even with the brokers away); a third exits at once with status "
            "1, without finishing it",
            signal, sigabbrev_np(signal));
      } else {
        log->critical(
            "received a third stop signal, {} (SIG{}): exiting now, without finishing the stop "
            "(a final snapshot or commit not written yet is not written: what was not committed "
            "is read again after a restart; exit status 1)",
            signal, sigabbrev_np(signal));
        log->flush();
        std::_Exit(1);
      }
    }
  }).detach();
}

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Every topic the daemon reads or writes, for the embedded broker to create.
std::set<std::string> topics_of(const config& c) {
  std::set<std::string> topics;
  for (const auto& p : c.pipelines) {
    topics.insert(p.topics.begin(), p.topics.end());
    if (p.heavy_hitters && p.heavy_hitters->alerts_topic)
      topics.insert(*p.heavy_hitters->alerts_topic);
    if (p.dedup && p.dedup->output_topic) topics.insert(*p.dedup->output_topic);
    if (p.dedup && p.dedup->duplicates_topic) topics.insert(*p.dedup->duplicates_topic);
  }
  if (c.generator) topics.insert(c.generator->topic);
  return topics;
}

std::string summary_line(const pipeline_summary& s, double items_per_second) {
  std::string line = fmt::format("{}: {:.0f} items/s", s.name, items_per_second);
  if (s.has_heavy_hitters) {
    line += fmt::format(", window {} items, top:", s.window_items);
    if (s.top.empty()) line += " -";
    for (const auto& e : s.top) {
      line += fmt::format(" {} ({}, {:.1f}%)", loggable_item(e.item), e.estimate,
                          s.window_items ? 100.0 * static_cast<double>(e.estimate) /
                                               static_cast<double>(s.window_items)
                                         : 0.0);
    }
  }
  if (s.has_dedup) {
    // The fill of the newest generation, the one items go into: it restarts near 0 at
    // each rotation, while the estimated FPR covers every generation. std::max: an empty
    // filter's estimate is -0, printed "0".
    line += fmt::format(
        "; bloom fill {:.3f} (newest of {} generations), estimated FPR {:.2g} (target {:.2g})",
        s.fill, s.generations, std::max(0.0, s.estimated_fpr), s.target_fpr);
  }
  return line;
}

// A dedup window that rotates by capacity holds more distinct items than dedup.capacity:
// to keep the target FPR it shrinks (sketchd_bloom_effective_window_seconds), and items
// older than the shrunk window are forwarded again. The summary line's fill and FPR look
// healthy meanwhile, so a warning says it, at most once a minute while it goes on.
struct capacity_rotations_seen {
  std::uint64_t at_last_summary = 0;
  std::uint64_t at_last_warning = 0;
  std::optional<std::chrono::steady_clock::time_point> warned;
};

void warn_of_capacity_rotations(spdlog::logger& log, const pipeline_config& p,
                                const pipeline_summary& s, capacity_rotations_seen& seen,
                                std::chrono::steady_clock::time_point now) {
  if (!s.has_dedup || !p.dedup) return;
  const bool rotated = s.rotations_by_capacity != seen.at_last_summary;  // in this interval
  seen.at_last_summary = s.rotations_by_capacity;
  if (!rotated || (seen.warned && now - *seen.warned < std::chrono::minutes(1))) return;
  const std::uint64_t since = s.rotations_by_capacity - seen.at_last_warning;
  const bool first = !seen.warned.has_value();
  seen.at_last_warning = s.rotations_by_capacity;
  seen.warned = now;
  log.warn(
      "{}: the dedup window holds more distinct items than dedup.capacity ({}): {} rotation(s) "
      "by capacity since {}, and it reaches back {} instead of {} (an item "
      "repeated after that is forwarded again); raise dedup.capacity",
      p.name, p.dedup->capacity, since, first ? "sketchd started" : "the last such line",
      format_duration(std::chrono::milliseconds(s.effective_window_ms)),
      format_duration(p.dedup->window));
}

// The summary line's figures as JSON members (log_fields): items as their metric labels
// show them (valid UTF-8, at most 128 bytes), so that a log search and a query of
// sketchd_heavy_hitter_ratio{item=…} name an item alike.
std::string summary_fields(const pipeline_summary& s, double items_per_second) {
  std::string f = "\"pipeline\":";
  json::append_string(f, s.name);
  f += ",\"items_per_second\":";
  json::append_number(f, items_per_second);
  if (s.has_heavy_hitters) {
    f += fmt::format(",\"window_items\":{},\"top\":[", s.window_items);
    for (std::size_t i = 0; i < s.top.size(); ++i) {
      const auto& e = s.top[i];
      f += i ? ",{\"item\":" : "{\"item\":";
      json::append_string(f, metrics::clean_label_value(e.item));
      f += fmt::format(",\"estimate\":{},\"ratio\":", e.estimate);
      json::append_number(
          f, s.window_items ? static_cast<double>(e.estimate) / static_cast<double>(s.window_items)
                            : 0.0);
      f += '}';
    }
    f += ']';
  }
  if (s.has_dedup) {
    f += ",\"bloom_fill\":";
    json::append_number(f, s.fill);
    f += fmt::format(",\"bloom_generations\":{},\"estimated_fpr\":", s.generations);
    json::append_number(f, std::max(0.0, s.estimated_fpr));
    f += ",\"target_fpr\":";
    json::append_number(f, s.target_fpr);
  }
  return f;
}

// Counters of the processing loop, published once per batch for the scrape.
struct loop_counters {
  std::mutex mutex;
  std::vector<std::uint64_t> consumed_by_topic;
};

// The snapshot metrics, published after each attempt.
struct snapshot_stats {
  std::mutex mutex;
  double last_success_seconds = 0;  // unix time; 0 before the first
  std::uint64_t failures = 0;
  double duration_seconds = 0;
  double size_bytes = 0;
};

std::vector<std::unique_ptr<pipeline>> make_pipelines(const config& cfg) {
  std::vector<std::unique_ptr<pipeline>> pipelines;
  for (const auto& p : cfg.pipelines) pipelines.push_back(std::make_unique<pipeline>(p));
  return pipelines;
}

// Restores the pipelines and their input positions from the snapshot of state.dir, if
// there is one. A corrupt snapshot, or one made under another configuration, stops the
// start (returns false) unless state.discard_incompatible_snapshot sets it aside: the whole
// snapshot when it cannot be read as one, else only the pipelines that do not fit it (each
// starts with empty windows; the others, and the input positions, are restored).
[[nodiscard]] bool restore(const config& cfg, state::store& store,
                           std::vector<std::unique_ptr<pipeline>>& pipelines,
                           std::vector<state::partition_offset>& positions,
                           std::int64_t& snapshot_ms) {
  const auto log = module_logger("state");
  std::optional<state::snapshot> snap;
  // A snapshot that cannot be read at all, or restored for want of memory, is not bad:
  // it is kept whatever discard_incompatible_snapshot says.
  const auto refuse = [&](const std::string& problem) {
    log->critical("{}; not starting (the snapshot is kept: fix the cause, then start again)",
                  problem);
    return false;
  };
  try {
    snap = store.read();
  } catch (const state::unreadable_error& e) {
    return refuse(e.what());
  } catch (const std::bad_alloc&) {
    return refuse(fmt::format("not enough memory to read the snapshot {}", store.path()));
  } catch (const state::snapshot_error& e) {
    const std::string problem = fmt::format("cannot use the snapshot: {}", e.what());
    if (!cfg.state.discard_incompatible_snapshot) {
      log->critical(
          "{}; not starting. To set this snapshot aside and start with empty windows, set "
          "state.discard_incompatible_snapshot: true",
          problem);
      return false;
    }
    log->warn(
        "{}; setting it aside (state.discard_incompatible_snapshot) and starting with empty "
        "windows",
        problem);
    store.set_aside(problem);
    return true;
  }
  if (!snap) {
    log->info("no snapshot in {}: the windows start empty", cfg.state.dir.value_or(""));
    return true;
  }
  std::set<std::string> restored;  // named in the log already
  std::set<std::string> kept;      // with the snapshot's windows
  std::vector<std::string> unfit;  // "pipeline NAME: what does not fit", one per pipeline
  for (const auto& entry : snap->pipelines) {
    const std::string& name = entry.first;
    const std::string& blob = entry.second;
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
      (*it)->restore_state(blob);
      // Written while this machine's clock was ahead (it has been set back since): the
      // windows would not move until the clock caught up, keeping items past their window.
      const std::int64_t ahead = (*it)->clock_ms() - wall_ms();
      if (ahead > pipeline::kMaxClockSkewMs) {
        log->warn(
            "snapshot {}: the windows of pipeline {} end {} s ahead of this machine's clock (the "
            "snapshot was written while the clock was ahead); they would not move until it "
            "catches up: the pipeline starts with empty windows",
            store.path(), name, ahead / 1000);
        const pipeline_config config = (*it)->config();
        it->reset();  // before its empty successor is made: never both in memory
        *it = std::make_unique<pipeline>(config);
        restored.insert(name);  // what there was to say is said
        continue;
      }
    } catch (const std::bad_alloc&) {
      return refuse(fmt::format("not enough memory to restore pipeline {} from the snapshot {}",
                                name, store.path()));
    } catch (const std::exception& e) {
      // The pipeline is left with empty windows (restore_state() leaves it so).
      unfit.push_back(fmt::format("pipeline {}: {}", name, e.what()));
      restored.insert(name);  // what there is to say is said below
      continue;
    }
    restored.insert(name);
    if (const auto& why = (*it)->heavy_window_dropped()) {
      // Its other window and the input positions are restored: restoring nothing would
      // forward again, for a whole dedup window, the items its dedup had seen.
      log->warn(
          "snapshot {}: the heavy-hitter window of pipeline {} is of an older format ({}); it "
          "starts empty, its dedup window and the input positions are restored",
          store.path(), name, *why);
      continue;  // not kept: its windows miss the items before the input positions
    }
    kept.insert(name);
  }
  if (!unfit.empty()) {
    const std::string problem = fmt::format("snapshot {} does not fit the configuration: {}",
                                            store.path(), fmt::join(unfit, "; "));
    if (!cfg.state.discard_incompatible_snapshot) {
      log->critical(
          "{}; not starting. To start {} with empty windows (the other pipelines keep their "
          "state), set state.discard_incompatible_snapshot: true",
          problem, unfit.size() == 1 ? "this pipeline" : "these pipelines");
      return false;
    }
    log->warn(
        "{}; {} with empty windows (state.discard_incompatible_snapshot), the other pipelines "
        "and the input positions are restored",
        problem, unfit.size() == 1 ? "this pipeline starts" : "these pipelines start");
    store.keep_aside(problem);
  }
  for (const auto& p : pipelines) {
    if (!restored.count(p->name()))
      log->info("pipeline {} is not in the snapshot: its windows start empty", p->name());
    // Empty windows where the input positions go on from the snapshot's: they miss the
    // items before those positions (sketchd_cms_window_incomplete_seconds).
    if (!kept.count(p->name())) p->partitions_taken_over();
  }
  positions = snap->offsets;
  snapshot_ms = snap->created_ms;
  const std::int64_t created_ms = std::max<std::int64_t>(snap->created_ms, 0);
  log->info(
      "restored snapshot {} of {} ({} pipeline(s), {} partition position(s))", store.path(),
      // In UTC, as the log's own times.
      fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z",
                  fmt::gmtime(static_cast<std::time_t>(created_ms / 1000)), created_ms % 1000),
      kept.size(), positions.size());
  return true;
}

// False, with a critical line, when the pipelines' sketches alone cannot fit in the memory
// this process may use: the start would otherwise end in the OOM killer, silently, after
// zeroing gigabytes.
[[nodiscard]] bool sketches_fit_in_memory(const config& cfg) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::uint64_t need = 0;
  std::string parts;
  for (const pipeline_config& p : cfg.pipelines) {
    const std::uint64_t bytes = sketch_bytes_at_least(p);
    need += bytes;
    parts += fmt::format("{}{} {:.3g} GiB", parts.empty() ? "" : ", ", p.name,
                         static_cast<double>(bytes) / kGiB);
  }
  // The generator's Zipf table is not part of a snapshot.
  const std::uint64_t table = cfg.generator ? generator::memory_bytes(*cfg.generator) : 0;
  if (table > 0) {
    parts += fmt::format(", generator {:.3g} GiB", static_cast<double>(table) / kGiB);
  }
  // With state.dir, a snapshot holds the state's encoding beside the structures while it
  // is written, and a restore the snapshot's while it builds them: twice the sketches.
  const std::uint64_t peak = (cfg.state.dir ? 2 * need : need) + table;
  const std::uint64_t limit = sketch::usable_memory_bytes();
  if (peak <= limit) return true;
  spdlog::critical(
      "the pipelines' sketches{} need at least {:.3g} GiB ({}){}, more than the {:.3g} GiB of "
      "memory this process may use (the machine's, or its cgroup's or ulimit's limit): lower "
      "dedup.capacity{} or heavy_hitters.buckets, or raise dedup.fpr, heavy_hitters.epsilon or "
      "heavy_hitters.delta (sketch size prints a filter's size; docs/OPERATIONS.md, sizing)",
      table > 0 ? " and the generator's table" : "", static_cast<double>(need + table) / kGiB,
      parts,
      cfg.state.dir
          ? fmt::format(", {:.3g} GiB while a snapshot is written or restored (state.dir)",
                        static_cast<double>(peak) / kGiB)
          : std::string(),
      static_cast<double>(limit) / kGiB, table > 0 ? ", generator.distinct" : "");
  return false;
}

int run(const config& cfg) {
  auto log = spdlog::default_logger();
  const auto pipeline_log = module_logger("pipeline");
  const auto kafka_log = module_logger("kafka");
  const auto state_log = module_logger("state");
  if (!sketches_fit_in_memory(cfg)) return 1;
  // The listener's address before anything is started (the broker, the clients, a state
  // lock): a port in use is the commonest reason a start fails.
  if (auto why = cannot_listen(cfg.http)) {
    log->critical("cannot run: {}", *why);
    return 1;
  }

  // State first: a snapshot that cannot be used stops the start before anything else.
  std::optional<state::store> store;
  std::vector<state::partition_offset> restored_positions;
  std::int64_t snapshot_ms = 0;
  std::vector<std::unique_ptr<pipeline>> pipelines = make_pipelines(cfg);
  if (cfg.state.dir) {
    store.emplace(*cfg.state.dir);
    if (!restore(cfg, *store, pipelines, restored_positions, snapshot_ms)) return 1;
  }
  std::vector<const pipeline*> readers;
  std::vector<pipeline*> writers;
  for (const auto& p : pipelines) {
    readers.push_back(p.get());
    writers.push_back(p.get());
  }

  std::optional<kafka::mock_cluster> embedded;
  std::string bootstrap = cfg.kafka.brokers;
  if (cfg.kafka.embedded) {
    embedded.emplace(cfg.kafka.embedded->brokers);
    for (const auto& t : topics_of(cfg)) embedded->create_topic(t, cfg.kafka.embedded->partitions);
    bootstrap = embedded->bootstrap_servers();
    kafka_log->info("embedded Kafka cluster (librdkafka mock) at {}", bootstrap);
  }

  // The topics of all pipelines.
  kafka::source_options so;
  so.bootstrap_servers = bootstrap;
  so.group_id = cfg.kafka.group_id;
  so.properties = cfg.kafka.properties;
  so.batch_size = cfg.kafka.batch_size;
  so.poll_timeout_ms = static_cast<std::int32_t>(cfg.kafka.poll_timeout.count());
  for (const auto& p : pipelines) {
    for (const auto& t : p->config().topics) {
      if (std::find(so.topics.begin(), so.topics.end(), t) == so.topics.end())
        so.topics.push_back(t);
    }
  }

  // /readyz and /healthz. The processor calls its stop check every 10 ms while it waits on a
  // full producer queue: waiting on the output cluster is not a stall. The start (the
  // clients, the generator's tables) and the stop are long steps.
  //
  // A stop request does not give up on a full queue at once: the batch in hand goes on
  // being queued for kQueueGrace, so that a stop while the output is merely slow (the queue
  // full, the brokers answering) still delivers the batch and writes the final snapshot,
  // within the stop's 10 s (kFinalWait, counted from when the processing thread sees the
  // request, within a batch of the signal); only outputs that cannot
  // be queued by then are left to the restart.
  static constexpr std::chrono::seconds kQueueGrace{5};
  static constexpr std::chrono::seconds kFinalWait{10};
  std::optional<std::chrono::steady_clock::time_point> stop_seen;  // processing thread's
  // Backpressure: once the processing thread has waited kHoldAfter without a break on the
  // full output queue (or on the outputs, for a snapshot), the input is held
  // (kafka::source::hold) until the batch (or the snapshot) is done, so that the consumer
  // stays in its group and its statistics current however long the outputs take. Waits
  // shorter than that, as under an output merely slower than the input, hold nothing: a
  // hold drops librdkafka's read-ahead, fetched again after.
  static constexpr std::chrono::seconds kHoldAfter{1};
  // The queue-full wait calls its give-up test every 10 ms: a longer gap ends a wait.
  static constexpr std::chrono::milliseconds kWaitGap{100};
  std::optional<std::chrono::steady_clock::time_point> waiting_since;
  std::chrono::steady_clock::time_point last_waited;
  kafka::source* input = nullptr;  // once it exists
  readiness ready;
  std::optional<readiness::long_step> starting(std::in_place, ready);
  processor proc(
      cfg, writers, so.topics, bootstrap,
      [&ready, &stop_seen, &waiting_since, &last_waited, &input, &kafka_log] {
        ready.beat();
        const auto waited = std::chrono::steady_clock::now();
        if (!waiting_since || waited - last_waited > kWaitGap) waiting_since = waited;
        last_waited = waited;
        if (input != nullptr && !input->held() && waited - *waiting_since >= kHoldAfter) {
          input->hold();
          kafka_log->debug("input held while the output queue is full");
        }
        if (!stop_requested.load()) return false;
        const auto now = std::chrono::steady_clock::now();
        if (!stop_seen) stop_seen = now;
        return now - *stop_seen >= kQueueGrace;
      });
  // A restored event clock holds still from the group's first assignment on, not from start.
  for (pipeline* p : writers) p->hold_until_assigned();
  {
    std::vector<kafka::partition_offset> positions;
    for (const auto& o : restored_positions) {
      const auto it = std::find(so.topics.begin(), so.topics.end(), o.topic);
      if (it != so.topics.end()) {
        positions.push_back(
            {static_cast<std::size_t>(it - so.topics.begin()), o.partition, o.next_offset});
      }
    }
    proc.restore_positions(positions, snapshot_ms);
  }

  metrics::registry registry;
  loop_counters counters;
  snapshot_stats snapshots;
  counters.consumed_by_topic.assign(so.topics.size(), 0);
  registry.add([](std::vector<metrics::metric_family>& out) {
    out.push_back({"sketchd_build_info",
                   "sketchd's version and source revision; always 1.",
                   metrics::metric_type::gauge,
                   {{{{"version", SKETCHD_VERSION}, {"revision", build_revision()}}, 1}}});
  });
  registry.add([&counters, &so](std::vector<metrics::metric_family>& out) {
    metrics::metric_family f{"sketchd_messages_consumed_total",
                             "Messages consumed from Kafka, by topic.",
                             metrics::metric_type::counter,
                             {}};
    std::lock_guard lock(counters.mutex);
    for (std::size_t i = 0; i < so.topics.size(); ++i) {
      f.samples.push_back(
          {{{"topic", so.topics[i]}}, static_cast<double>(counters.consumed_by_topic[i])});
    }
    out.push_back(std::move(f));
  });
  for (const auto* p : readers) {
    registry.add([p](std::vector<metrics::metric_family>& out) { p->collect(out); });
  }
  registry.add([&proc](std::vector<metrics::metric_family>& out) { proc.collect(out); });
  registry.add([&ready](std::vector<metrics::metric_family>& out) {
    const auto stalled = ready.stalled();
    out.push_back({"sketchd_processing_stalled_seconds",
                   "How long the processing thread has not come round its loop, once that is "
                   "past its limit (60 s; 10 minutes in a snapshot, a rebalance, the start or "
                   "the stop): /healthz then answers 503. 0 while it is alive.",
                   metrics::metric_type::gauge,
                   {{{}, stalled ? std::chrono::duration<double>(*stalled).count() : 0.0}}});
  });
  if (store) {
    const double interval = std::chrono::duration<double>(cfg.state.snapshot_interval).count();
    registry.add([&snapshots, interval](std::vector<metrics::metric_family>& out) {
      using metrics::metric_type;
      std::lock_guard lock(snapshots.mutex);
      out.push_back({"sketchd_snapshot_last_success_timestamp_seconds",
                     "Unix time of the last snapshot written successfully (0 before the first).",
                     metric_type::gauge,
                     {{{}, snapshots.last_success_seconds}}});
      out.push_back({"sketchd_snapshot_failures_total",
                     "Snapshots that could not be taken or written.",
                     metric_type::counter,
                     {{{}, static_cast<double>(snapshots.failures)}}});
      out.push_back({"sketchd_snapshot_duration_seconds",
                     "Time the last snapshot took, delivery wait included.",
                     metric_type::gauge,
                     {{{}, snapshots.duration_seconds}}});
      out.push_back({"sketchd_snapshot_size_bytes",
                     "Size of the last snapshot file.",
                     metric_type::gauge,
                     {{{}, snapshots.size_bytes}}});
      out.push_back({"sketchd_snapshot_interval_seconds",
                     "state.snapshot_interval: how often a snapshot is taken.",
                     metric_type::gauge,
                     {{{}, interval}}});
    });
  }
  registry.add(metrics::collect_process_metrics);

  http_server http(cfg.http, registry, readers, ready);
  const int port = http.start();
  module_logger("http")->info(
      "serving /metrics, /healthz, /readyz and /api/v1 on http://{}:{}",
      cfg.http.host.find(':') != std::string::npos ? "[" + cfg.http.host + "]" : cfg.http.host,
      port);

  kafka::source source(so);
  input = &source;
  // The server stops before `source`, which its lag collector reads, is destroyed: on an
  // exception as on the normal return.
  struct stop_http_first {
    http_server& server;
    ~stop_http_first() { server.stop(); }
  } const stop_http{http};
  std::vector<kafka::partition_offset> to_store;
  source.on_assign([&proc](const kafka::topic_partition& tp) {
    const std::optional<std::int64_t> start = proc.take_restored_position(tp);
    proc.assigned(tp, start);
    return start;
  });
  source.on_assignment([&proc] { proc.assignment_begins(); });
  // Only with snapshots: it asks the group's committed offsets at each assignment.
  if (store) {
    source.on_start_known([&proc](const kafka::topic_partition& tp, std::int64_t start) {
      proc.start_known(tp, start);
    });
  }
  source.on_start_behind_commit(
      [&proc](const kafka::topic_partition& tp, std::int64_t start, std::int64_t committed) {
        return proc.start_behind_commit(tp, start, committed);
      });
  source.on_revoke([&](std::span<const kafka::topic_partition> revoked) {
    const readiness::long_step step(ready);
    // Deliver what is in flight, so that the offsets of the revoked partitions can be
    // stored and committed before another member takes them over.
    // When stopping, the final snapshot has already waited for them (10 s): a short
    // last try, so that a stop with the output brokers down stays bounded.
    const std::chrono::seconds wait(stop_requested.load() ? 2 : 10);
    std::vector<kafka::partition_offset> offsets;
    if (!proc.flush(wait, offsets)) {
      kafka_log->warn(
          "rebalance: outputs still undelivered after {} s; the revoked partitions are "
          "committed up to their first unacknowledged message, which their new owner reads "
          "again (this instance, should they come back, commits past it only once its "
          "outputs are delivered)",
          wait.count());
    }
    source.store_offsets(offsets);
    proc.revoked(revoked);
  });
  registry.add([&source](std::vector<metrics::metric_family>& out) {
    metrics::metric_family f{
        "sketchd_kafka_consumer_lag_messages",
        "Messages between the group's committed offset and the end of each assigned partition.",
        metrics::metric_type::gauge,
        {}};
    for (const auto& l : source.lag()) {
      f.samples.push_back({{{"topic", l.topic}, {"partition", std::to_string(l.partition)}},
                           static_cast<double>(l.lag)});
    }
    out.push_back(std::move(f));
    metrics::metric_family up{"sketchd_kafka_brokers_up",
                              "Brokers of the input cluster the consumer has an open connection to "
                              "(0: Kafka unreachable).",
                              metrics::metric_type::gauge,
                              {}};
    if (const std::optional<int> n = source.brokers_up())
      up.samples.push_back({{}, static_cast<double>(*n)});
    out.push_back(std::move(up));
    out.push_back({"sketchd_kafka_assigned_partitions",
                   "Input partitions the consumer group has assigned to this instance (0 before "
                   "its first assignment, or when the other members hold them all).",
                   metrics::metric_type::gauge,
                   {{{}, static_cast<double>(source.assigned_partitions())}}});
    out.push_back(
        {"sketchd_kafka_commit_failures_total",
         "Commits of the stored input offsets that failed (retried at the next commit interval).",
         metrics::metric_type::counter,
         {{{}, static_cast<double>(source.commit_failures())}}});
    metrics::metric_family uncommitted{
        "sketchd_kafka_uncommitted_messages",
        "Input messages read and not yet committed: what a crash would read again (and "
        "forward again, those whose outputs were delivered).",
        metrics::metric_type::gauge,
        {}};
    if (const std::optional<std::int64_t> n = source.uncommitted_messages())
      uncommitted.samples.push_back({{}, static_cast<double>(*n)});
    out.push_back(std::move(uncommitted));
    out.push_back({"sketchd_kafka_consume_errors_total",
                   "Errors the Kafka client reported in place of a message (a missing topic, a "
                   "partition that cannot be fetched), each skipped.",
                   metrics::metric_type::counter,
                   {{{}, static_cast<double>(source.consume_errors())}}});
  });
  kafka_log->info("consuming topic(s) {} as group {} from {}", fmt::join(so.topics, ", "),
                  so.group_id, bootstrap);
  for (const auto& [k, v] : cfg.kafka.properties)
    kafka_log->debug("kafka property {} = {}", k, kafka::redact_property(k, v));

  // Delivers everything in flight, then writes the pipelines' state with the positions it
  // reflects. Skipped (and counted as a failure) when some output is not delivered. A
  // periodic snapshot (`stoppable`) stops waiting as soon as a stop is requested: the
  // final one follows. True when the snapshot is written.
  const auto take_snapshot = [&](std::chrono::milliseconds wait, bool stoppable) -> bool {
    // Up to `wait` for the outputs, then the state written whatever its size.
    const readiness::long_step step(ready);
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + wait;
    // Held once the outputs have been waited for kHoldAfter, released whatever the outcome.
    struct release_input {
      kafka::source& input;
      ~release_input() { input.release(); }
    } release{source};
    bool delivered = false;
    for (;;) {
      if (!source.held() && std::chrono::steady_clock::now() - start >= kHoldAfter) source.hold();
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      std::vector<kafka::partition_offset> offsets;
      delivered = proc.flush(
          std::clamp(left, std::chrono::milliseconds(0), std::chrono::milliseconds(200)), offsets);
      source.store_offsets(offsets);
      if (delivered || std::chrono::steady_clock::now() >= deadline) break;
      if (stoppable && stop_requested.load()) {
        state_log->info("periodic snapshot abandoned: stopping (the final snapshot follows)");
        return false;
      }
    }
    const auto fail = [&](const std::string& why) {
      state_log->error("snapshot not written: {}", why);
      std::lock_guard lock(snapshots.mutex);
      ++snapshots.failures;
    };
    if (!delivered || !proc.quiescent()) {
      fail(proc.failed() ? "forwarding failed" : "outputs still undelivered");
      return false;
    }
    try {
      // Inside: encoding the state allocates as much as the state, which can fail too.
      state::snapshot snap;
      snap.created_ms = wall_ms();
      for (const auto& o : proc.positions())
        snap.offsets.push_back({so.topics[o.topic_index], o.partition, o.next_offset});
      for (const auto& p : pipelines) snap.pipelines.emplace_back(p->name(), p->save_state());
      const auto written = store->write(snap);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      state_log->debug("snapshot written: {} bytes in {:.3f} s", written.bytes, seconds);
      std::lock_guard lock(snapshots.mutex);
      snapshots.last_success_seconds = static_cast<double>(snap.created_ms) / 1000.0;
      snapshots.duration_seconds = seconds;
      snapshots.size_bytes = static_cast<double>(written.bytes);
      return true;
    } catch (const std::exception& e) {
      fail(e.what());
      return false;
    }
  };

  // The generator starts once the consumer is in its group: events produced before, while
  // the group forms (seconds), would be read back one partition's backlog at a time, and
  // since the generator keys events by item, the first windows would hold a few
  // partitions' items only and report false heavy hitters.
  std::unique_ptr<generator> gen;
  bool generator_started = false;
  if (cfg.generator) {
    gen = std::make_unique<generator>(*cfg.generator, bootstrap, cfg.kafka.properties);
  }
  ready.set(true);
  starting.reset();

  std::vector<std::uint64_t> consumed(so.topics.size(), 0);
  auto last_summary = std::chrono::steady_clock::now();
  auto stopped_at = last_summary;  // when consumption stopped after a forwarding failure
  auto last_snapshot = std::chrono::steady_clock::now();
  std::vector<std::uint64_t> items_at_summary(pipelines.size(), 0);
  std::vector<capacity_rotations_seen> capacity_rotations(pipelines.size());
  int status = 0;

  while (!stop_requested.load()) {
    ready.beat();
    std::optional<std::string> fatal = source.fatal_error();
    if (!fatal) fatal = proc.fatal_error();
    if (fatal) {
      kafka_log->critical("fatal Kafka error, stopping: {}", *fatal);
      ready.set(false, "fatal Kafka error: " + *fatal);
      status = 1;
      break;
    }
    if (gen) {
      if (!generator_started && source.assigned_once()) {
        gen->start();
        generator_started = true;
      }
      if (const std::optional<std::string> failure = gen->fatal_error()) {
        log->critical("the generator stopped, stopping too: {}", *failure);
        ready.set(false, "the generator stopped: " + *failure);
        status = 1;
        break;
      }
    }
    const auto batch = source.poll_batch();
    const std::int64_t now = wall_ms();
    if (!proc.failed()) {
      for (const kafka::record& r : batch) ++consumed[r.topic_index];
      proc.process(batch, now);
    } else {
      // Stopped: what the paused consumer still hands over is not processed (its offsets
      // are never stored); the windows keep sliding and the counters keep being published.
      proc.process({}, now);
    }
    source.release();
    to_store.clear();
    proc.poll(to_store);
    source.store_offsets(to_store);
    if (proc.failed() && !source.paused()) {
      // Never skip ahead: stop reading, keep serving metrics and /readyz with the reason.
      source.pause();
      ready.set(false, proc.failure_reason());
      proc.consumption_stopped();
      stopped_at = std::chrono::steady_clock::now();
    }
    {
      std::lock_guard lock(counters.mutex);
      counters.consumed_by_topic = consumed;
    }

    const auto t = std::chrono::steady_clock::now();
    if (store && !proc.failed() && t - last_snapshot >= cfg.state.snapshot_interval) {
      take_snapshot(std::chrono::seconds(30), /*stoppable=*/true);
      last_snapshot = std::chrono::steady_clock::now();
    }
    if (cfg.log.summary_interval.count() > 0 && t - last_summary >= cfg.log.summary_interval) {
      const double seconds = std::chrono::duration<double>(t - last_summary).count();
      for (std::size_t i = 0; i < pipelines.size(); ++i) {
        const pipeline_summary s = pipelines[i]->summary();
        const double rate = static_cast<double>(s.items - items_at_summary[i]) / seconds;
        const log_fields fields(summary_fields(s, rate));
        pipeline_log->info("{}", summary_line(s, rate));
        items_at_summary[i] = s.items;
        warn_of_capacity_rotations(*pipeline_log, pipelines[i]->config(), s, capacity_rotations[i],
                                   t);
      }
      // The summaries of a stopped sketchd would read as a quiet input: say it again.
      if (proc.failed() && source.paused()) {
        log->warn(
            "consumption has been stopped for {} s, until a restart once the cause is fixed: {}",
            std::chrono::duration_cast<std::chrono::seconds>(t - stopped_at).count(),
            proc.failure_reason());
      }
      last_summary = t;
    }
  }

  ready.set(false, "shutting down");
  const readiness::long_step stopping(ready);
  if (stop_signal.load() != 0 && !stop_signal_logged.exchange(true))
    log_stop_signal(*log, stop_signal.load());
  if (gen) gen->stop();
  if (!stop_seen) stop_seen = std::chrono::steady_clock::now();
  // What is left of the stop's kFinalWait after the batch (at least a second).
  const auto final_wait = std::max<std::chrono::milliseconds>(
      std::chrono::seconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                   *stop_seen + kFinalWait - std::chrono::steady_clock::now()));
  if (status == 0) {
    if (store && !proc.failed()) {
      if (!take_snapshot(final_wait, /*stoppable=*/false)) {
        // Nothing is lost (the offsets of what was delivered are committed below), but the
        // next start restores an older snapshot: say so in the exit status.
        state_log->error(
            "the final snapshot was not written: the next start restores the previous one, whose "
            "windows miss the items since (exit status 1)");
        status = 1;
      } else {
        state_log->info("final snapshot written to {}", cfg.state.dir.value_or(""));
      }
    } else {
      to_store.clear();
      // quiescent(): also outputs never queued, given up on a full queue at the stop.
      if (!proc.flush(final_wait, to_store) || !proc.quiescent()) {
        log->warn(
            "outputs still undelivered at shutdown: their input messages will be read again after "
            "a restart");
      }
      source.store_offsets(to_store);
    }
    if (proc.failed()) {
      // The events from the failed one on were not delivered: a supervisor must know.
      log->error(
          "consumption had stopped after a final forwarding failure; the events from there "
          "on are forwarded after a restart, once the cause is fixed (exit status 1)");
      status = 1;
    }
  }
  source.close();
  http.stop();
  proc.log_held_back_warnings();
  // A clean stop on SIGHUP says so in its status, 128 + SIGHUP as for a process the signal
  // ended, so that systemd's Restart=on-failure (or Docker's restart policies) starts
  // sketchd again: the reload an operator sending SIGHUP expects.
  const bool hangup = status == 0 && stop_signal.load() == SIGHUP;
  if (hangup) status = 128 + SIGHUP;
  std::uint64_t total = 0;
  for (std::uint64_t n : consumed) total += n;
  log->log(status == 0 || hangup ? spdlog::level::info : spdlog::level::err,
           "stopped after consuming {} message(s), exit status {}", total, status);
  return status;
}

}  // namespace

int run_command(const std::string& config_path) {
  // First, so that a stop requested while the configuration loads is a clean stop too. A
  // hang-up (the terminal closed, or an operator expecting a reload) stops cleanly as well,
  // instead of killing the process between two commits.
  start_signal_thread();
  std::signal(SIGPIPE, SIG_IGN);
  const load_result loaded = load_config_file(config_path);
  for (const config_error& e : loaded.errors) print_stderr(e.to_string() + "\n");
  if (!loaded.value) return 1;
  setup_logging(loaded.value->log);
  {
    std::string names;
    for (const auto& p : loaded.value->pipelines) names += (names.empty() ? "" : ", ") + p.name;
    spdlog::info("sketchd {} (revision {}) starting: configuration {}, pipeline(s) {}",
                 SKETCHD_VERSION, build_revision(), config_path, names);
  }
  try {
    return run(*loaded.value);
  } catch (const std::exception& e) {
    spdlog::critical("cannot run: {}", e.what());
    return 1;
  }
}

}  // namespace sketchd
