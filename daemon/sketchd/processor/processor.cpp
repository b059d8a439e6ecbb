#include "sketchd/processor/processor.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <stdexcept>

#include "sketchd/processor/event_json.h"
#include "sketchd/util/logging.h"

namespace sketchd {

namespace {

constexpr int kRouteShift = kafka::offset_tracker::kTicketBits;
constexpr std::uint64_t kTicketMask = (std::uint64_t{1} << kRouteShift) - 1;
constexpr std::size_t kMaxRoutes = std::size_t{1} << (64 - kRouteShift);
static_assert(kMaxOutputs <= kMaxRoutes, "a route's index must fit above the ticket");

// A delivery's opaque: the route's index above the message's ticket.
std::uint64_t opaque_of(std::size_t route_index, kafka::offset_tracker::ticket ticket = 0) {
  return (static_cast<std::uint64_t>(route_index) << kRouteShift) | ticket;
}

std::int64_t wall_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

processor::processor(const config& cfg, std::vector<pipeline*> pipelines,
                     std::vector<std::string> topics, std::unique_ptr<forwarder> out,
                     std::function<bool()> stop)
    : pipelines_(std::move(pipelines)),
      topics_(std::move(topics)),
      fill_from_log_(cfg.state.fill_from_log),
      stop_(std::move(stop)),
      out_(std::move(out)) {
  const std::size_t n = pipelines_.size();
  topic_routes_.resize(topics_.size());
  outputs_.resize(n);
  inputs_.resize(n);
  verdicts_.resize(n);
  failures_.resize(n);
  cursors_.assign(n, 0);
  done_before_.assign(n, 0);
  heavy_events_.resize(n);
  heavy_events_dropped_.resize(n);
  heavy_log_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    inputs_[i].reserve(cfg.kafka.batch_size);
    verdicts_[i].reserve(cfg.kafka.batch_size);
  }
  add_routes();
  for (std::size_t i = 0; i < n; ++i) {
    if (outputs_[i].dead_letter) failures_[i].reserve(cfg.kafka.batch_size);
  }
  give_up_ = [this] { return stop_ && stop_(); };
  if (out_) {
    out_->on_delivery([this](std::uint64_t opaque, kafka::error_code err, std::string_view reason) {
      on_delivery(opaque, err, reason);
    });
  }
  local_.duplicates_forwarded.assign(n, 0);
  local_.alerts_sent.assign(n, 0);
  local_.alert_failures.assign(n, 0);
  local_.dead_letters.assign(n, {});
  local_.dead_letter_failures.assign(n, 0);
  published_ = local_;
  failure_warnings_.assign(n, log_rate_limit(kWarningInterval));
  failures_warned_.assign(n, {});
  failure_example_.assign(n, {});
}

void processor::add_routes() {
  const auto add_route = [&](std::size_t p, output_kind kind, const std::string& topic) {
    if (!out_)
      throw std::invalid_argument(fmt::format("output topic {} without a forwarder", topic));
    routes_.push_back({p, kind, out_->topic_index(topic), topic});
    return routes_.size() - 1;
  };
  pipeline_topic_.assign(pipelines_.size(), std::vector<std::uint32_t>(topics_.size(), 0));
  for (std::size_t i = 0; i < pipelines_.size(); ++i) {
    const pipeline_config& pc = pipelines_[i]->config();
    for (std::size_t local = 0; local < pc.topics.size(); ++local) {
      const auto it = std::find(topics_.begin(), topics_.end(), pc.topics[local]);
      if (it == topics_.end()) continue;
      const auto topic_index = static_cast<std::size_t>(it - topics_.begin());
      topic_routes_[topic_index].push_back(i);
      pipeline_topic_[i][topic_index] = static_cast<std::uint32_t>(local);
    }
    if (pc.dedup && pc.dedup->output_topic)
      outputs_[i].first_seen = add_route(i, output_kind::first_seen, *pc.dedup->output_topic);
    if (pc.dedup && pc.dedup->duplicates_topic)
      outputs_[i].duplicate = add_route(i, output_kind::duplicate, *pc.dedup->duplicates_topic);
    if (pc.heavy_hitters && pc.heavy_hitters->alerts_topic)
      outputs_[i].alert = add_route(i, output_kind::alert, *pc.heavy_hitters->alerts_topic);
    if (pc.dead_letter_topic)
      outputs_[i].dead_letter = add_route(i, output_kind::dead_letter, *pc.dead_letter_topic);
  }
  if (routes_.size() > kMaxOutputs) {
    throw std::invalid_argument(
        fmt::format("at most {} output topics over all pipelines", kMaxOutputs));
  }
  // The dedup outputs whose copies can be told apart: a topic one route writes. Not the dead
  // letters: one sent again after a crash is a duplicate at-least-once allows, and reading a
  // dead-letter topic back at each restart would cost more than it saves.
  for (const route& r : routes_) {
    if (r.kind == output_kind::alert || r.kind == output_kind::dead_letter) continue;
    const auto writers = std::count_if(routes_.begin(), routes_.end(),
                                       [&](const route& o) { return o.topic == r.topic; });
    if (writers == 1) replayable_.push_back(r.topic_name);
  }
}

void processor::process(std::span<const kafka::record> batch, std::int64_t wall_ms) {
  run_pipelines(batch, wall_ms);
  for (const kafka::record& r : batch) forward_message(r);
  // Delivery reports that have arrived are counted before the pipelines publish.
  if (out_) out_->poll();
  after_batch(wall_ms);
}

void processor::run_pipelines(std::span<const kafka::record> batch, std::int64_t wall_ms) {
  // Each pipeline gets the messages of its topics as one batch, in order; its verdicts
  // come back in the same order, read by forward_message() with one cursor per pipeline.
  for (std::size_t i = 0; i < pipelines_.size(); ++i) inputs_[i].clear();
  for (const kafka::record& r : batch) {
    for (std::size_t i : topic_routes_[r.topic_index]) {
      inputs_[i].push_back(
          {&r.view, r.timestamp_ms, pipeline_topic_[i][r.topic_index], r.partition});
    }
  }
  if (drop_unassigned_shards_) drop_unassigned_shards();
  try {
    for (std::size_t i = 0; i < pipelines_.size(); ++i) {
      pipelines_[i]->begin_batch();
      verdicts_[i].resize(inputs_[i].size());
      if (outputs_[i].dead_letter) failures_[i].resize(inputs_[i].size());
      pipelines_[i]->process(inputs_[i], wall_ms, verdicts_[i], failures_[i]);
      cursors_[i] = 0;
    }
    // The pipelines publish and release their state before anything is forwarded:
    // forwarding can wait on the producer's full queue for as long as the output brokers
    // are down, and /metrics and the API must not wait with it.
    for (std::size_t i = 0; i < pipelines_.size(); ++i)
      heavy_events_[i] = pipelines_[i]->end_batch(wall_ms);
  } catch (...) {
    // Out of memory: no pipeline stays locked while the run unwinds (the HTTP server's
    // handlers would wait on it, and its stop with them).
    for (pipeline* p : pipelines_) p->abandon_batch();
    throw;
  }
}

void processor::forward_message(const kafka::record& r) {
  const auto& targets = topic_routes_[r.topic_index];
  std::uint32_t outputs = 0;
  const bool replayed = positions_.replaying(r.topic_index, r.partition, r.offset);
  const bool restoring = !forwarded_before_.empty();
  for (std::size_t i : targets) {
    if (replayed && !restoring) break;
    const verdict v = verdicts_[i][cursors_[i]];
    if (!replayed && v == verdict::skipped && !failure_example_[i].set)
      failure_example_[i] = {true, r.topic_index, r.partition, r.offset};
    if (const std::optional<std::size_t> route_index = route_of(i, v, cursors_[i])) {
      // Forwarded before a crash (found at the restore): not again.
      done_before_[i] = restoring && forwarded_before_.take(routes_[*route_index].topic,
                                                            r.topic_index, r.partition, r.offset);
      if (!replayed && !done_before_[i]) ++outputs;
    }
  }
  const kafka::offset_tracker::ticket ticket =
      tracker_.add(tracker_.slot(r.topic_index, r.partition), r.offset, outputs);
  for (std::size_t i : targets) {
    const std::size_t at = cursors_[i]++;
    const verdict v = verdicts_[i][at];
    // After a failure (or a forward abandoned at a stop) nothing more is forwarded:
    // consumption stops, and the messages after the failed one are read again after a
    // restart, so forwarding them now would deliver them twice and put them before it.
    // Their tickets stay unreported, so their offsets are never stored.
    if (outputs == 0 || failed() || abandoned_ || done_before_[i]) continue;
    const std::optional<std::size_t> route_index = route_of(i, v, at);
    if (!route_index) continue;
    const route& rt = routes_[*route_index];
    const std::uint64_t opaque = opaque_of(*route_index, ticket);
    kafka::error_code err = kafka::error_code::no_error;
    if (rt.kind == output_kind::dead_letter) {
      const extract_failure why = failures_[i][at];
      const std::array<kafka::header, 2> extra{{{kafka::kErrorReasonHeader, to_string(why)},
                                                {kafka::kPipelineHeader, pipelines_[i]->name()}}};
      // Before forward(), which may serve delivery reports while the queue is full.
      dead_letter_reasons_[opaque] = why;
      err = out_->forward(rt.topic, r, extra, opaque, give_up_);
      if (err != kafka::error_code::no_error) dead_letter_reasons_.erase(opaque);
    } else {
      err = out_->forward(rt.topic, r, {}, opaque, give_up_);
    }
    if (err == kafka::error_code::no_error) continue;
    // queue_full after a stop request: not a failure, the message simply stays
    // undelivered, so its offset is never stored and it is read again after a restart.
    // Nothing after it is forwarded either, for the same reason as after a failure.
    if (err == kafka::error_code::queue_full) {
      abandoned_ = true;
      continue;
    }
    forward_failed(rt, err, kafka::describe(err), ticket);
  }
}

std::optional<std::size_t> processor::route_of(std::size_t i, verdict v,
                                               std::size_t at) const noexcept {
  if (v == verdict::first_seen) return outputs_[i].first_seen;
  if (v == verdict::duplicate) return outputs_[i].duplicate;
  // A tombstone is a deletion its producer meant, not an error: counted and skipped only.
  if (v == verdict::skipped && outputs_[i].dead_letter &&
      failures_[i][at] != extract_failure::tombstone)
    return outputs_[i].dead_letter;
  return std::nullopt;
}

void processor::after_batch(std::int64_t wall_ms) {
  for (std::size_t i = 0; i < pipelines_.size(); ++i) {
    log_heavy_events(i);
    if (outputs_[i].alert) {
      for (const sketch::heavy_event& e : heavy_events_[i]) send_alert(i, e, wall_ms);
    }
    warn_heavy_events_dropped(i);
  }
  warn_extract_failures();
  for (const auto& p : pipelines_) p->publish_counters();
  publish();
}

void processor::send_alert(std::size_t p, const sketch::heavy_event& e, std::int64_t wall_ms) {
  const std::string event =
      alert_event(pipelines_[p]->name(), *pipelines_[p]->config().heavy_hitters, e, wall_ms);
  const std::size_t route_index = *outputs_[p].alert;
  const kafka::error_code err = out_->produce(routes_[route_index].topic, e.item, event, wall_ms,
                                              opaque_of(route_index), give_up_);
  if (err != kafka::error_code::no_error)
    on_delivery(opaque_of(route_index), err, kafka::to_string(err));
}

void processor::on_delivery(std::uint64_t opaque, kafka::error_code err, std::string_view reason) {
  const std::size_t route_index = static_cast<std::size_t>(opaque >> kRouteShift);
  if (route_index >= routes_.size()) return;
  const route& r = routes_[route_index];
  if (r.kind == output_kind::alert) {
    if (err == kafka::error_code::no_error) {
      ++local_.alerts_sent[r.pipeline];
    } else {
      ++local_.alert_failures[r.pipeline];
      warn_alert_failure(r, reason);
    }
    return;
  }
  const kafka::offset_tracker::ticket ticket = opaque & kTicketMask;
  extract_failure why = extract_failure::none;
  if (r.kind == output_kind::dead_letter) {
    if (const auto it = dead_letter_reasons_.find(opaque); it != dead_letter_reasons_.end()) {
      why = it->second;
      dead_letter_reasons_.erase(it);
    }
  }
  if (err != kafka::error_code::no_error) {
    forward_failed(r, err, reason, ticket);
    return;
  }
  tracker_.report(ticket, true);
  if (r.kind == output_kind::dead_letter) {
    ++local_.dead_letters[r.pipeline][static_cast<std::size_t>(why)];
  } else if (r.kind == output_kind::first_seen) {
    pipelines_[r.pipeline]->add_forwarded(1);
  } else {
    ++local_.duplicates_forwarded[r.pipeline];
  }
}

void processor::forward_failed(const route& r, kafka::error_code err, std::string_view reason,
                               std::optional<kafka::offset_tracker::ticket> ticket) {
  const bool dead_letter = r.kind == output_kind::dead_letter;
  if (dead_letter) {
    ++local_.dead_letter_failures[r.pipeline];
  } else {
    pipelines_[r.pipeline]->add_forward_failures(1);
  }
  if (ticket) tracker_.report(*ticket, false);
  // Dropped by the producer's close at the stop, whose own lines say why (a fatal error,
  // outputs still undelivered at shutdown): not a failure to report as one.
  if (err == kafka::error_code::purge_queue || err == kafka::error_code::purge_inflight) return;
  if (!failure_.empty()) return;
  const auto& at = tracker_.first_failure();
  const std::string what = fmt::format(
      "{} topic {} failed ({}: {}); consumption stopped{}",
      dead_letter ? "sending a dead letter to" : "forwarding to", r.topic_name,
      kafka::to_string(err), reason,
      tracker_.failed()
          ? fmt::format(" at topic {} partition {} offset {}, which will be read again after a "
                        "restart",
                        topics_[at.topic_index], at.partition, at.offset)
          : std::string());
  const std::string& name = pipelines_[r.pipeline]->name();
  failure_ = fmt::format("pipeline {}: {}", name, what);  // for /readyz, which has no logger
  module_logger("pipeline")
      ->error("{}: {}", name, what);  // "[pipeline] NAME: …", as its other lines
}

void processor::drain(std::vector<kafka::partition_offset>& out) {
  tracker_.drain_committable(
      [&](std::size_t topic_index, std::int32_t partition, std::int64_t next) {
        const partition_positions::delivery_step step =
            positions_.delivered(topic_index, partition, next);
        if (step.read_again_ended_at) {
          module_logger("kafka")->info(
              "partition {} [{}]: read again up to offset {}; forwarding from there on",
              topics_[topic_index], partition, *step.read_again_ended_at);
        }
        if (step.store) out.push_back({topic_index, partition, next});
      });
}

void processor::poll(std::vector<kafka::partition_offset>& out) {
  if (out_) out_->poll();
  drain(out);
  publish();
}

bool processor::flush(std::chrono::milliseconds timeout,
                      std::vector<kafka::partition_offset>& out) {
  const bool done = !out_ || out_->flush(timeout);
  drain(out);
  publish();
  return done;
}

void processor::assignment_begins() {
  positions_.assignment_begins();
  // Where the outputs end before any message of the partitions assigned now is read: the
  // commits of those partitions can carry it from their first on (assigned()).
  take_checkpoint();
  for (pipeline* p : pipelines_) p->input_assigned();
  drop_unassigned_shards_ = true;
}

void processor::partition_counts(std::span<const std::uint32_t> counts) {
  for (std::size_t i = 0; i < pipelines_.size(); ++i) {
    const pipeline_config& pc = pipelines_[i]->config();
    if (pc.scope != state_scope::partition) continue;
    std::vector<std::uint32_t> local(pc.topics.size(), 0);
    for (std::size_t t = 0; t < topics_.size() && t < counts.size(); ++t) {
      const auto it = std::find(pc.topics.begin(), pc.topics.end(), topics_[t]);
      if (it != pc.topics.end())
        local[static_cast<std::size_t>(it - pc.topics.begin())] = counts[t];
    }
    pipelines_[i]->set_partition_counts(local);
  }
}

bool processor::needs_partition_counts() const {
  return std::any_of(pipelines_.begin(), pipelines_.end(),
                     [](const pipeline* p) { return p->config().scope == state_scope::partition; });
}

void processor::drop_unassigned_shards() {
  drop_unassigned_shards_ = false;
  std::vector<kafka::topic_partition> dropped;
  for (std::size_t i = 0; i < pipelines_.size(); ++i) {
    if (pipelines_[i]->config().scope != state_scope::partition) continue;
    const std::vector<std::string>& local = pipelines_[i]->config().topics;
    pipelines_[i]->keep_partitions([&](std::uint32_t topic, std::int32_t partition) {
      const auto it = std::find(topics_.begin(), topics_.end(), local[topic]);
      if (it == topics_.end()) return false;
      const kafka::topic_partition tp{static_cast<std::size_t>(it - topics_.begin()), partition};
      if (positions_.is_assigned(tp)) return true;
      dropped.push_back(tp);
      return false;
    });
  }
  // A partition whose shard is gone is no longer one that comes back with its state: when it
  // is assigned again (a lost assignment that returns, a revocation and an assignment in two
  // rebalances), it is taken over, restored or filled like any other.
  for (const kafka::topic_partition& tp : dropped) positions_.forget_revoked(tp);
}

void processor::drop_shard(const kafka::topic_partition& tp) {
  for (std::size_t i : topic_routes_[tp.topic_index]) {
    if (pipelines_[i]->config().scope != state_scope::partition) continue;
    const std::uint32_t local = pipeline_topic_[i][tp.topic_index];
    pipelines_[i]->keep_partitions([&](std::uint32_t topic, std::int32_t partition) {
      return topic != local || partition != tp.partition;
    });
  }
}

void processor::assigned(const kafka::topic_partition& tp, std::optional<std::int64_t> start) {
  // A partition new here (not revoked in the same rebalance, whose messages up to now were
  // forwarded before that checkpoint's ends or not) is forwarded from after them.
  if (!positions_.returning(tp)) checkpoints_.started(tp.topic_index, tp.partition);
  // Without a snapshot's position, the windows have not counted this partition's recent
  // items (unless it was revoked from this instance in the same rebalance): the group's
  // heavy-hitter figures miss them for a window, unless they are filled from the log
  // (filled() decides).
  if (positions_.assigned(tp, start)) {
    // A shard restored from a snapshot without the partition's position is of no use: its
    // items would be counted twice by the fill.
    drop_shard(tp);
    if (fill_from_log_) {
      to_fill_.insert({tp.topic_index, tp.partition});
    } else {
      taken_over(tp);
    }
  }
  tracker_.reset(tp.topic_index, tp.partition);
}

void processor::taken_over(const kafka::topic_partition& tp) {
  for (std::size_t i : topic_routes_[tp.topic_index]) pipelines_[i]->partitions_taken_over();
}

std::optional<std::int64_t> processor::fill_since(const kafka::topic_partition& tp) const {
  if (!to_fill_.contains({tp.topic_index, tp.partition})) return std::nullopt;
  return wall_now_ms() - longest_window(tp.topic_index).count();
}

void processor::filled(const kafka::topic_partition& tp, const kafka::fill_outcome& outcome) {
  if (to_fill_.erase({tp.topic_index, tp.partition}) == 0) return;
  if (outcome.filled) positions_.fill(tp, outcome.from, outcome.until);
  if (!outcome.complete) taken_over(tp);
}

std::chrono::milliseconds processor::longest_window(std::size_t topic_index) const {
  std::chrono::milliseconds longest{0};
  for (std::size_t i : topic_routes_[topic_index]) {
    const pipeline_config& pc = pipelines_[i]->config();
    if (pc.heavy_hitters) longest = std::max(longest, pc.heavy_hitters->window);
    if (pc.dedup) longest = std::max(longest, pc.dedup->window);
  }
  return longest;
}

void processor::take_checkpoint() {
  if (!out_ || replayable_.empty()) return;
  std::vector<std::tuple<std::size_t, std::int32_t, std::int64_t>> next;
  tracker_.for_each_registered(
      [&](std::size_t topic_index, std::int32_t partition, std::int64_t offset) {
        next.emplace_back(topic_index, partition, offset);
      });
  std::vector<output_end> ends;
  for (auto& [topic, partition, offset] : output_ends()) {
    if (std::find(replayable_.begin(), replayable_.end(), topic) != replayable_.end())
      ends.push_back({std::move(topic), partition, offset});
  }
  const std::uint64_t too_long = checkpoints_.too_long();
  checkpoints_.take(next, ends);
  if (checkpoints_.too_long() > too_long && !warned_checkpoint_too_long_) {
    warned_checkpoint_too_long_ = true;
    module_logger("kafka")->warn(
        "the output topics have too many partitions for their positions to fit in the metadata "
        "of an offset commit ({} bytes at most): a member that takes over a partition after "
        "this one crashes forwards again what was forwarded after the last commit",
        output_checkpoints::kMaxMetadataBytes);
  }
}

void processor::commit_metadata(std::span<kafka::commit_offset> offsets) {
  if (!out_ || replayable_.empty() || offsets.empty()) return;
  take_checkpoint();
  for (kafka::commit_offset& o : offsets)
    o.metadata = checkpoints_.metadata(o.topic_index, o.partition, o.next_offset);
}

void processor::revoked(std::span<const kafka::topic_partition> partitions) {
  // The commit of the revoked partitions, after this, finds where they stood.
  take_checkpoint();
  for (const auto& tp : partitions) {
    to_fill_.erase({tp.topic_index, tp.partition});
    forwarded_before_.forget(tp.topic_index, tp.partition);
    positions_.revoked(tp);
    tracker_.reset(tp.topic_index, tp.partition);
  }
  // Not dropped at once: a partition revoked and assigned again in one rebalance keeps its
  // shard.
  drop_unassigned_shards_ = true;
}

bool processor::start_behind_commit(const kafka::topic_partition& tp, std::int64_t start,
                                    std::int64_t committed) {
  const std::chrono::milliseconds longest = longest_window(tp.topic_index);
  const std::int64_t now = wall_now_ms();
  const std::string& topic = topics_[tp.topic_index];
  if (!positions_.start_behind_commit(tp, committed, longest, now)) {
    module_logger("kafka")->warn(
        "partition {} [{}] starts at the group's committed offset {}, past the snapshot's {}: the "
        "snapshot is older ({} s) than the windows of the pipelines reading it, so the messages "
        "between are not read again (their items are not in this instance's windows)",
        topic, tp.partition, committed, start, positions_.snapshot_age(tp, now).count() / 1000);
    // The windows have expired since: they miss this partition's recent items.
    taken_over(tp);
    forwarded_before_.forget_before(tp.topic_index, tp.partition, committed);
    return false;
  }
  module_logger("kafka")->info(
      "partition {} [{}] starts at offset {} (restored state); the {} message(s) before offset "
      "{}, which the group has committed, go into the windows again without being forwarded "
      "(their outputs were delivered, by this instance before it stopped or by another member)",
      topic, tp.partition, start, committed - start, committed);
  return true;
}

std::vector<std::tuple<std::string, std::int32_t, std::int64_t>> processor::output_ends() const {
  std::vector<std::tuple<std::string, std::int32_t, std::int64_t>> out;
  if (!out_) return out;
  for (const auto& e : out_->ends()) {
    const auto it = std::find_if(routes_.begin(), routes_.end(),
                                 [&](const route& r) { return r.topic == e.topic; });
    if (it != routes_.end()) out.emplace_back(it->topic_name, e.partition, e.next_offset);
  }
  return out;
}

void processor::forwarded_before(std::string_view output, const kafka::topic_partition& tp,
                                 std::int64_t offset) {
  const auto it = std::find_if(routes_.begin(), routes_.end(),
                               [&](const route& r) { return r.topic_name == output; });
  if (it != routes_.end()) forwarded_before_.add(it->topic, tp.topic_index, tp.partition, offset);
}

bool processor::quiescent() const {
  return !failed() && tracker_.pending_messages() == 0 && (!out_ || out_->in_flight() == 0);
}

std::optional<std::string> processor::fatal_error() const {
  return out_ ? out_->fatal_error() : std::nullopt;
}

}  // namespace sketchd
