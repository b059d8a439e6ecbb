#include "sketchd/app/app.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>

#include "sketchd/app/crash_replay.h"
#include "sketchd/app/preflight.h"
#include "sketchd/app/wall_clock.h"
#include "sketchd/kafka/property_policy.h"
#include "sketchd/processor/kafka_forwarder.h"
#include "sketchd/util/logging.h"

namespace sketchd::app {

app::app(const config& cfg) : cfg_(cfg), topics_(input_topics(cfg)), consumed_(topics_.size(), 0) {
  for (const auto& p : cfg.pipelines) pipelines_.push_back(std::make_unique<pipeline>(p));
}

app::~app() {
  // The server stops before the components its collectors and routes read are destroyed:
  // on a failed build as after shutdown().
  if (http_) http_->stop();
}

std::unique_ptr<app> app::build(const config& cfg) {
  if (!sketches_fit_in_memory(cfg)) return nullptr;
  // The listener's address before anything is started (the broker, the clients, a state
  // lock): a port in use is the commonest reason a start fails.
  if (auto why = cannot_listen(cfg.http)) {
    spdlog::critical("cannot run: {}", *why);
    return nullptr;
  }
  std::unique_ptr<app> a(new app(cfg));
  if (!a->prepare()) return nullptr;
  a->start_kafka();
  if (!a->open_state_topic()) return nullptr;
  a->start_processor();
  a->register_metrics();
  a->start_http();
  a->start_source();
  // The generator starts once the consumer is in its group (turn()): events produced
  // before, while the group forms (seconds), would be read back one partition's backlog at
  // a time, and since the generator keys events by item, the first windows would hold a
  // few partitions' items only and report false heavy hitters.
  if (cfg.generator) {
    a->generator_ =
        std::make_unique<generator>(*cfg.generator, a->bootstrap_, cfg.kafka.properties);
  }
  a->summary_ = std::make_unique<summary_reporter>(cfg.log.summary_interval, a->pipelines_);
  a->ready_.set(true);
  a->starting_.reset();
  return a;
}

// State first: a snapshot that cannot be used stops the start before anything else.
bool app::prepare() {
  starting_.emplace(ready_);
  if (!cfg_.state.dir) return true;
  store_.emplace(*cfg_.state.dir);
  std::optional<restored_state> restored = restore(cfg_, *store_, pipelines_);
  if (!restored) return false;
  restored_ = std::move(*restored);
  return true;
}

void app::start_kafka() {
  bootstrap_ = cfg_.kafka.brokers;
  if (!cfg_.kafka.embedded) return;
  embedded_.emplace(cfg_.kafka.embedded->brokers);
  for (const auto& t : topics_of(cfg_)) embedded_->create_topic(t, cfg_.kafka.embedded->partitions);
  bootstrap_ = embedded_->bootstrap_servers();
  module_logger("kafka")->info("embedded Kafka cluster (librdkafka mock) at {}", bootstrap_);
}

bool app::open_state_topic() {
  if (!cfg_.state.topic) return true;
  try {
    state_topic_ = std::make_unique<state_topic>(cfg_, bootstrap_, topics_, pipelines_,
                                                 std::chrono::seconds(30));
    return true;
  } catch (const std::exception& e) {
    spdlog::critical("cannot use the state topic {}: {}", *cfg_.state.topic, e.what());
    return false;
  }
}

void app::restore_from_state_topic() {
  std::vector<kafka::committed_metadata> taken;
  for (const kafka::topic_partition& tp : state_topic_->assigned()) {
    // A local snapshot's position serves first; a partition coming back in the same
    // rebalance still has its shards.
    if (proc_->has_restored_position(tp) || proc_->returning(tp)) continue;
    std::optional<state_topic::restored> r =
        state_topic_->restore(tp, proc_->longest_window(tp.topic_index));
    if (!r) continue;
    proc_->restore_position(tp, r->input_offset, r->created_ms);
    if (!r->outputs.empty()) taken.push_back({tp, r->input_offset, std::move(r->outputs)});
  }
  // What the previous owner forwarded after its shards' snapshot is not forwarded again.
  if (!taken.empty())
    replay_after_takeover(cfg_, bootstrap_, taken, topics_, *proc_, kTakeoverReplayTimeout);
}

void app::start_processor() {
  std::vector<pipeline*> writers;
  for (const auto& p : pipelines_) writers.push_back(p.get());
  // /readyz and /healthz: the processor calls its give-up check every 10 ms while it waits
  // on a full producer queue, and waiting on the output cluster is not a stall.
  proc_ = std::make_unique<processor>(
      cfg_, writers, topics_, make_kafka_forwarder(cfg_, bootstrap_), [this] {
        ready_.beat();
        const auto now = std::chrono::steady_clock::now();
        if (backpressure_.queue_full_wait(now) && source_ && !source_->held()) {
          source_->hold();
          module_logger("kafka")->debug("input held while the output queue is full");
        }
        return backpressure_.give_up(std::chrono::steady_clock::now(), stopping());
      });
  // A restored event clock holds still from the group's first assignment on, not from start.
  for (pipeline* p : writers) p->hold_until_assigned();
  std::vector<kafka::partition_offset> positions;
  for (const auto& o : restored_.positions) {
    const auto it = std::find(topics_.begin(), topics_.end(), o.topic);
    if (it != topics_.end()) {
      positions.push_back(
          {static_cast<std::size_t>(it - topics_.begin()), o.partition, o.next_offset});
    }
  }
  proc_->restore_positions(positions, restored_.snapshot_ms);
  // Crashes: the snapshots and the offset commits record where the outputs end
  // (docs/SEMANTICS.md).
  proc_->learn_output_ends();
}

void app::register_metrics() {
  register_build_info(registry_);
  consumed_counters_ = std::make_unique<consumed_counters>(registry_, topics_);
  for (const auto& p : pipelines_) p->register_metrics(registry_);
  proc_->register_metrics(registry_);
  if (state_topic_) state_topic_->register_metrics(registry_);
  registry_.add([this](std::vector<prometheus::MetricFamily>& out) { collect_stall(ready_, out); });
  registry_.add(metrics::collect_process_metrics);
}

void app::start_http() {
  std::vector<const pipeline*> readers;
  for (const auto& p : pipelines_) readers.push_back(p.get());
  http_ = std::make_unique<http_server>(cfg_.http, registry_, readers, ready_);
  const int port = http_->start();
  const auto& h = cfg_.http;
  module_logger("http")->info(
      "serving /metrics, /healthz, /readyz and /api/v1 on {}://{}:{}{}{}", h.tls ? "https" : "http",
      h.host.find(':') != std::string::npos ? "[" + h.host + "]" : h.host, port,
      h.tls && !h.tls->client_ca_file.empty() ? ", client certificates required" : "",
      h.basic_auth_users.empty()
          ? ""
          : fmt::format(", basic authentication ({} user{})", h.basic_auth_users.size(),
                        h.basic_auth_users.size() == 1 ? "" : "s"));
}

void app::start_source() {
  // Crashes: what was forwarded after the restored snapshot is read back before any input
  // (docs/SEMANTICS.md). HTTP answers meanwhile; /readyz says "starting".
  if (store_) replay_outputs(cfg_, bootstrap_, restored_, topics_, *proc_, kReplayTimeout);
  kafka::source_options so;
  so.bootstrap_servers = bootstrap_;
  so.group_id = cfg_.kafka.group_id;
  so.properties = cfg_.kafka.properties;
  so.batch_size = cfg_.kafka.batch_size;
  so.poll_timeout_ms = static_cast<std::int32_t>(cfg_.kafka.poll_timeout.count());
  so.topics = topics_;
  source_ = std::make_unique<kafka::source>(so);
  source_->on_assign([this](const kafka::topic_partition& tp) {
    const std::optional<std::int64_t> start = proc_->take_restored_position(tp);
    proc_->assigned(tp, start);
    return start;
  });
  source_->on_assigned([this] {
    std::vector<kafka::partition_offset> started;
    proc_->take_started(started);
    source_->store_offsets(started);
  });
  source_->on_assignment([this] {
    proc_->assignment_begins();
    if (state_topic_) restore_from_state_topic();
  });
  if (state_topic_) {
    source_->on_assignment_prepare(
        [this](std::span<const kafka::topic_partition> assigned) { state_topic_->read(assigned); });
  }
  // scope: partition sizes each partition's shard from the topics' partition counts.
  if (proc_->needs_partition_counts()) {
    source_->on_partition_counts(
        [this](std::span<const std::uint32_t> counts) { proc_->partition_counts(counts); });
  }
  // Crashes: each commit says where the outputs stood, and whoever takes a partition over
  // reads back what was forwarded after its commit (docs/SEMANTICS.md).
  source_->on_commit(
      [this](std::span<kafka::commit_offset> offsets) { proc_->commit_metadata(offsets); });
  source_->on_taken_over([this](std::span<const kafka::committed_metadata> taken) {
    const readiness::long_step step(ready_);
    replay_after_takeover(cfg_, bootstrap_, taken, topics_, *proc_, kTakeoverReplayTimeout);
  });
  // Only with snapshots: it asks the group's committed offsets at each assignment.
  if (store_) {
    source_->on_start_known([this](const kafka::topic_partition& tp, std::int64_t start) {
      proc_->start_known(tp, start);
    });
  }
  source_->on_fill_since(
      [this](const kafka::topic_partition& tp) { return proc_->fill_since(tp); });
  source_->on_filled([this](const kafka::topic_partition& tp, const kafka::fill_outcome& outcome) {
    proc_->filled(tp, outcome);
  });
  source_->on_start_behind_commit(
      [this](const kafka::topic_partition& tp, std::int64_t start, std::int64_t committed) {
        return proc_->start_behind_commit(tp, start, committed);
      });
  source_->on_revoke(
      [this](std::span<const kafka::topic_partition> revoked) { on_revoke(revoked); });
  registry_.add(
      [this](std::vector<prometheus::MetricFamily>& out) { collect_input(*source_, out); });
  if (store_ || state_topic_) {
    snapshots_ = std::make_unique<snapshotter>(registry_, cfg_.state, store_ ? &*store_ : nullptr,
                                               state_topic_.get(), pipelines_, topics_, *proc_,
                                               *source_, ready_, [this] { return stopping(); });
  }
  const auto log = module_logger("kafka");
  log->info("consuming topic(s) {} as group {} from {}", fmt::join(topics_, ", "),
            cfg_.kafka.group_id, bootstrap_);
  for (const auto& [k, v] : cfg_.kafka.properties)
    log->debug("kafka property {} = {}", k, kafka::redact_property(k, v));
}

void app::on_revoke(std::span<const kafka::topic_partition> revoked) {
  const readiness::long_step step(ready_);
  // Deliver what is in flight, so that the offsets of the revoked partitions can be
  // stored and committed before another member takes them over.
  // When stopping, the final snapshot has already waited for them (10 s): a short
  // last try, so that a stop with the output brokers down stays bounded.
  const std::chrono::seconds wait(stopping() ? 2 : 10);
  std::vector<kafka::partition_offset> offsets;
  const bool delivered = proc_->flush(wait, offsets);
  if (!delivered) {
    module_logger("kafka")->warn(
        "rebalance: outputs still undelivered after {} s; the revoked partitions are "
        "committed up to their first unacknowledged message, which their new owner reads "
        "again (this instance, should they come back, commits past it only once its "
        "outputs are delivered)",
        wait.count());
  }
  source_->store_offsets(offsets);
  // The shards of the revoked partitions go to the state topic for their next owner: only
  // once everything is delivered, so that their positions say exactly what they hold. At
  // the stop, the final snapshot has written them (nothing was processed since).
  if (state_topic_ && delivered && proc_->quiescent() && !stopping()) {
    std::vector<kafka::partition_offset> positions;
    for (const auto& o : proc_->positions()) {
      const bool is_revoked = std::any_of(revoked.begin(), revoked.end(), [&](const auto& tp) {
        return tp.topic_index == o.topic_index && tp.partition == o.partition;
      });
      if (is_revoked) positions.push_back(o);
    }
    std::vector<state::partition_offset> outputs;
    for (const auto& [topic, partition, next] : proc_->output_ends())
      outputs.push_back({topic, partition, next});
    static_cast<void>(state_topic_->write(positions, outputs, wait));
  }
  proc_->revoked(revoked);
}

std::optional<std::string> app::fatal_error() {
  std::optional<std::string> fatal = source_->fatal_error();
  if (!fatal) fatal = proc_->fatal_error();
  if (fatal) {
    module_logger("kafka")->critical("fatal Kafka error, stopping: {}", *fatal);
    ready_.set(false, "fatal Kafka error: " + *fatal);
    return fatal;
  }
  if (!generator_) return std::nullopt;
  if (!generator_started_ && source_->assigned_once()) {
    generator_->start();
    generator_started_ = true;
  }
  if (std::optional<std::string> failure = generator_->fatal_error()) {
    spdlog::critical("the generator stopped, stopping too: {}", *failure);
    ready_.set(false, "the generator stopped: " + *failure);
    return failure;
  }
  return std::nullopt;
}

bool app::turn() {
  ready_.beat();
  if (fatal_error()) {
    status_ = 1;
    return false;
  }
  const auto batch = source_->poll_batch();
  const std::int64_t now = wall_ms();
  if (!proc_->failed()) {
    for (const kafka::record& r : batch) ++consumed_[r.topic_index];
    proc_->process(batch, now);
  } else {
    // Stopped: what the paused consumer still hands over is not processed (its offsets
    // are never stored); the windows keep sliding and the counters keep being published.
    proc_->process({}, now);
  }
  source_->release();
  to_store_.clear();
  proc_->poll(to_store_);
  source_->store_offsets(to_store_);
  if (proc_->failed() && !source_->paused()) {
    // Never skip ahead: stop reading, keep serving metrics and /readyz with the reason.
    source_->pause();
    ready_.set(false, proc_->failure_reason());
    proc_->consumption_stopped();
    stopped_at_ = std::chrono::steady_clock::now();
  }
  consumed_counters_->publish(consumed_);

  const auto t = std::chrono::steady_clock::now();
  if (snapshots_) snapshots_->take_when_due(t);
  if (summary_->due(t)) {
    summary_->report(t);
    // The summaries of a stopped sketchd would read as a quiet input: say it again.
    if (proc_->failed() && source_->paused()) {
      spdlog::warn(
          "consumption has been stopped for {} s, until a restart once the cause is fixed: {}",
          std::chrono::duration_cast<std::chrono::seconds>(t - stopped_at_).count(),
          proc_->failure_reason());
    }
  }
  return true;
}

int app::run(const std::atomic<bool>& stop) {
  stop_ = &stop;
  while (!stop.load()) {
    if (!turn()) break;
  }
  return status_;
}

// Without snapshots, or with consumption stopped: what is in flight is delivered (within
// `wait`) and its offsets stored for the final commit.
void app::final_delivery(std::chrono::milliseconds wait) {
  to_store_.clear();
  // quiescent(): also outputs never queued, given up on a full queue at the stop.
  if (!proc_->flush(wait, to_store_) || !proc_->quiescent()) {
    spdlog::warn(
        "outputs still undelivered at shutdown: their input messages will be read again after "
        "a restart");
  }
  source_->store_offsets(to_store_);
}

int app::shutdown(int status, bool hangup) {
  ready_.set(false, "shutting down");
  const readiness::long_step stopping_step(ready_);
  if (generator_) generator_->stop();
  const auto now = std::chrono::steady_clock::now();
  backpressure_.stop_seen(now);
  // What is left of the stop's kFinalWait after the batch (at least a second).
  const std::chrono::milliseconds final_wait = backpressure_.final_wait(now);
  const auto state_log = module_logger("state");
  if (status == 0) {
    if (snapshots_ && !proc_->failed()) {
      if (!snapshots_->take(final_wait, /*stoppable=*/false)) {
        // Nothing is lost (the offsets of what was delivered are committed below), but the
        // next start restores an older snapshot: say so in the exit status.
        state_log->error(
            "the final snapshot was not written: the next start restores the previous one, whose "
            "windows miss the items since (exit status 1)");
        status = 1;
      } else {
        state_log->info("final snapshot written{}{}{}",
                        cfg_.state.dir ? " to " + *cfg_.state.dir : "",
                        cfg_.state.dir && cfg_.state.topic ? " and" : "",
                        cfg_.state.topic ? " to the state topic " + *cfg_.state.topic : "");
      }
    } else {
      final_delivery(final_wait);
    }
    if (proc_->failed()) {
      // The events from the failed one on were not delivered: a supervisor must know.
      spdlog::error(
          "consumption had stopped after a final forwarding failure; the events from there "
          "on are forwarded after a restart, once the cause is fixed (exit status 1)");
      status = 1;
    }
  }
  source_->close();
  http_->stop();
  proc_->log_held_back_warnings();
  // A clean stop on SIGHUP says so in its status, 128 + SIGHUP as for a process the signal
  // ended, so that systemd's Restart=on-failure (or Docker's restart policies) starts
  // sketchd again: the reload an operator sending SIGHUP expects.
  const bool clean_hangup = status == 0 && hangup;
  if (clean_hangup) status = 128 + SIGHUP;
  std::uint64_t total = 0;
  for (std::uint64_t n : consumed_) total += n;
  spdlog::log(status == 0 || clean_hangup ? spdlog::level::info : spdlog::level::err,
              "stopped after consuming {} message(s), exit status {}", total, status);
  return status;
}

}  // namespace sketchd::app
