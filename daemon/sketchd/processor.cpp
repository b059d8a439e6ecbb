#include "sketchd/processor.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "sketchd/metrics/metrics.h"
#include "sketchd/util/json.h"
#include "sketchd/util/logging.h"

namespace sketchd {

namespace {

constexpr int kRouteShift = kafka::offset_tracker::kTicketBits;
constexpr std::uint64_t kTicketMask = (std::uint64_t{1} << kRouteShift) - 1;
constexpr std::size_t kMaxRoutes = std::size_t{1} << (64 - kRouteShift);
static_assert(kMaxOutputs <= kMaxRoutes, "a route's index must fit above the ticket");

std::string utc_time(std::int64_t ms) {
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000);
}

}  // namespace

processor::processor(const config& cfg, std::vector<pipeline*> pipelines,
                     std::vector<std::string> topics, const std::string& bootstrap_servers,
                     std::function<bool()> stop)
    : pipelines_(std::move(pipelines)), topics_(std::move(topics)), stop_(std::move(stop)) {
  topic_routes_.resize(topics_.size());
  outputs_.resize(pipelines_.size());
  inputs_.resize(pipelines_.size());
  verdicts_.resize(pipelines_.size());
  cursors_.assign(pipelines_.size(), 0);
  heavy_events_.resize(pipelines_.size());
  heavy_events_dropped_.resize(pipelines_.size());
  heavy_log_.resize(pipelines_.size());
  for (std::size_t i = 0; i < pipelines_.size(); ++i) {
    inputs_[i].reserve(cfg.kafka.batch_size);
    verdicts_[i].reserve(cfg.kafka.batch_size);
  }
  std::vector<std::string> sink_topics;
  const auto sink_topic = [&](const std::string& t) {
    auto it = std::find(sink_topics.begin(), sink_topics.end(), t);
    if (it == sink_topics.end()) it = sink_topics.insert(sink_topics.end(), t);
    return static_cast<std::size_t>(it - sink_topics.begin());
  };
  const auto add_route = [&](std::size_t p, output_kind kind, const std::string& topic) {
    routes_.push_back({p, kind, sink_topic(topic)});
    return routes_.size() - 1;
  };
  for (std::size_t i = 0; i < pipelines_.size(); ++i) {
    const pipeline_config& pc = pipelines_[i]->config();
    for (const auto& t : pc.topics) {
      const auto it = std::find(topics_.begin(), topics_.end(), t);
      if (it != topics_.end())
        topic_routes_[static_cast<std::size_t>(it - topics_.begin())].push_back(i);
    }
    if (pc.dedup && pc.dedup->output_topic)
      outputs_[i].first_seen = add_route(i, output_kind::first_seen, *pc.dedup->output_topic);
    if (pc.dedup && pc.dedup->duplicates_topic)
      outputs_[i].duplicate = add_route(i, output_kind::duplicate, *pc.dedup->duplicates_topic);
    if (pc.heavy_hitters && pc.heavy_hitters->alerts_topic)
      outputs_[i].alert = add_route(i, output_kind::alert, *pc.heavy_hitters->alerts_topic);
  }
  if (routes_.size() > kMaxOutputs) {
    throw std::invalid_argument(
        fmt::format("at most {} output topics over all pipelines", kMaxOutputs));
  }
  give_up_ = [this] { return stop_ && stop_(); };
  if (!routes_.empty()) {
    kafka::sink_options o;
    o.bootstrap_servers = bootstrap_servers;
    o.properties = cfg.kafka.properties;
    o.topics = sink_topics;
    sink_ = std::make_unique<kafka::sink>(
        o, [this](std::uint64_t opaque, kafka::error_code err, std::string_view reason) {
          on_delivery(opaque, err, reason);
        });
    module_logger("kafka")->info("forwarding to {} output topic(s) with an idempotent producer",
                                 sink_topics.size());
  }
  const std::size_t n = pipelines_.size();
  local_.duplicates_forwarded.assign(n, 0);
  local_.alerts_sent.assign(n, 0);
  local_.alert_failures.assign(n, 0);
  published_ = local_;
  failures_warned_.assign(n, {});
  failure_example_.assign(n, {});
  last_failure_warning_ms_.assign(n, 0);
}

void processor::process(std::span<const kafka::record> batch, std::int64_t wall_ms) {
  // Each pipeline gets the messages of its topics as one batch, in order; its verdicts
  // come back in the same order, read below with one cursor per pipeline.
  for (std::size_t i = 0; i < pipelines_.size(); ++i) inputs_[i].clear();
  for (const kafka::record& r : batch) {
    for (std::size_t i : topic_routes_[r.topic_index]) {
      inputs_[i].push_back({&r.view, r.timestamp_ms});
    }
  }
  try {
    for (std::size_t i = 0; i < pipelines_.size(); ++i) {
      pipelines_[i]->begin_batch();
      verdicts_[i].resize(inputs_[i].size());
      pipelines_[i]->process(inputs_[i], wall_ms, verdicts_[i]);
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
  for (const kafka::record& r : batch) {
    const auto& targets = topic_routes_[r.topic_index];
    std::uint32_t outputs = 0;
    const bool replayed = !replay_until_.empty() && replaying(r);
    for (std::size_t i : targets) {
      if (replayed) break;
      const verdict v = verdicts_[i][cursors_[i]];
      if ((v == verdict::first_seen && outputs_[i].first_seen) ||
          (v == verdict::duplicate && outputs_[i].duplicate)) {
        ++outputs;
      } else if (v == verdict::skipped && !failure_example_[i].set) {
        failure_example_[i] = {true, r.topic_index, r.partition, r.offset};
      }
    }
    const kafka::offset_tracker::ticket ticket =
        tracker_.add(tracker_.slot(r.topic_index, r.partition), r.offset, outputs);
    for (std::size_t i : targets) {
      const verdict v = verdicts_[i][cursors_[i]++];
      // After a failure (or a forward abandoned at a stop) nothing more is forwarded:
      // consumption stops, and the messages after the failed one are read again after a
      // restart, so forwarding them now would deliver them twice and put them before it.
      // Their tickets stay unreported, so their offsets are never stored.
      if (outputs == 0 || failed() || abandoned_) continue;
      std::optional<std::size_t> route_index;
      if (v == verdict::first_seen) route_index = outputs_[i].first_seen;
      if (v == verdict::duplicate) route_index = outputs_[i].duplicate;
      if (!route_index) continue;
      const route& rt = routes_[*route_index];
      const kafka::error_code err = sink_->forward(
          rt.topic, r.native, (static_cast<std::uint64_t>(*route_index) << kRouteShift) | ticket,
          give_up_);
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
  // Delivery reports that have arrived are counted before the pipelines publish.
  if (sink_) sink_->poll();
  for (std::size_t i = 0; i < pipelines_.size(); ++i) {
    log_heavy_events(i);
    for (const sketch::heavy_event& e : heavy_events_[i]) {
      if (outputs_[i].alert) send_alert(i, e, wall_ms);
    }
    if (pipelines_[i]->config().heavy_hitters) {
      const std::uint64_t dropped = pipelines_[i]->counters().heavy_events_dropped;
      if (dropped > heavy_events_dropped_[i]) {
        module_logger("pipeline")
            ->warn(
                "{}: {} heavy-hitter enter/leave events were lost, more in one batch than the "
                "top-k tracker's event buffer holds: this log and heavy_hitters.alerts_topic miss "
                "them; GET /api/v1/pipelines/{}/topk gives the current heavy set",
                pipelines_[i]->name(), dropped - heavy_events_dropped_[i], pipelines_[i]->name());
      }
      heavy_events_dropped_[i] = dropped;
    }
  }
  warn_extract_failures(wall_ms);
  for (const auto& p : pipelines_) p->publish_counters();
  publish();
}

void processor::log_heavy_events(std::size_t p, bool now) {
  heavy_log& l = heavy_log_[p];
  const auto& name = pipelines_[p]->name();
  const auto t = std::chrono::steady_clock::now();
  if (now || t - l.since >= std::chrono::milliseconds(kWarningIntervalMs)) {
    if (l.held_entered + l.held_left > 0) {
      module_logger("pipeline")
          ->info(
              "{}: {} more heavy-set change(s) in the last {} s not logged ({} entered, {} left; "
              "at most {} lines every {} s): sketchd_heavy_hitter_events_total counts every "
              "one{}, and GET /api/v1/pipelines/{}/topk gives the current heavy set",
              name, l.held_entered + l.held_left,
              std::chrono::duration_cast<std::chrono::seconds>(t - l.since).count(), l.held_entered,
              l.held_left, kHeavyLinesPerInterval, kWarningIntervalMs / 1000,
              outputs_[p].alert ? ", heavy_hitters.alerts_topic has each" : "", name);
    }
    l = heavy_log{t, 0, 0, 0};
  }
  if (heavy_events_[p].empty()) return;
  const auto& hh = *pipelines_[p]->config().heavy_hitters;
  for (const sketch::heavy_event& e : heavy_events_[p]) {
    const bool entered = e.kind == sketch::heavy_event::kind::enter;
    if (l.shown >= kHeavyLinesPerInterval) {
      ++(entered ? l.held_entered : l.held_left);
      continue;
    }
    ++l.shown;
    const double ratio = e.window_items
                             ? static_cast<double>(e.estimate) / static_cast<double>(e.window_items)
                             : 0.0;
    std::string fields = "\"pipeline\":";
    json::append_string(fields, name);
    fields += entered ? ",\"event\":\"enter\",\"item\":" : ",\"event\":\"leave\",\"item\":";
    json::append_string(fields, metrics::clean_label_value(e.item));
    fields +=
        fmt::format(",\"estimate\":{},\"window_items\":{},\"ratio\":", e.estimate, e.window_items);
    json::append_number(fields, ratio);
    fields += ",\"threshold\":";
    json::append_number(fields, hh.threshold);
    // An item leaves above the threshold (from 0.9·φ on, the heavy set's hysteresis) when
    // its estimate fell under the tracker's minimum (on a quiet window every item would
    // pass the threshold otherwise).
    const std::string why = !entered && e.estimate < sketch::top_k_tracker::kMinHeavyEstimate &&
                                    ratio >= 0.9 * hh.threshold
                                ? fmt::format(", under the minimum estimate of {}",
                                              sketch::top_k_tracker::kMinHeavyEstimate)
                                : std::string();
    const log_fields in_json(std::move(fields));
    module_logger("pipeline")
        ->info("{}: {} {} the heavy set: estimate {} of {} items ({:.2f}%, threshold {:.2f}%{})",
               name, loggable_item(e.item), entered ? "entered" : "left", e.estimate,
               e.window_items, 100.0 * ratio, 100.0 * hh.threshold, why);
  }
}

void processor::send_alert(std::size_t p, const sketch::heavy_event& e, std::int64_t wall_ms) {
  const auto& hh = *pipelines_[p]->config().heavy_hitters;
  // The sketch's ε is e/w with w = ⌈e/ε⌉ (seed 005): the bound it reports, ε·N.
  const double width = std::ceil(std::numbers::e / hh.epsilon);
  const double error_bound = std::numbers::e / width * static_cast<double>(e.window_items);
  std::string v = "{\"pipeline\":";
  json::append_string(v, pipelines_[p]->name());
  v += ",\"event\":";
  v += e.kind == sketch::heavy_event::kind::enter ? "\"enter\"" : "\"leave\"";
  v += ",\"item\":";
  json::append_string(v, e.item);
  v += fmt::format(",\"estimate\":{},\"ratio\":", e.estimate);
  json::append_number(v, e.window_items
                             ? static_cast<double>(e.estimate) / static_cast<double>(e.window_items)
                             : 0.0);
  v += fmt::format(",\"window_items\":{},\"error_bound\":", e.window_items);
  json::append_number(v, error_bound);
  v += ",\"threshold\":";
  json::append_number(v, hh.threshold);
  v += fmt::format(",\"time\":\"{}\",\"timestamp_ms\":{}}}", utc_time(wall_ms), wall_ms);
  const std::size_t route_index = *outputs_[p].alert;
  const kafka::error_code err =
      sink_->produce(routes_[route_index].topic, e.item, v, wall_ms,
                     static_cast<std::uint64_t>(route_index) << kRouteShift, give_up_);
  if (err != kafka::error_code::no_error)
    on_delivery(static_cast<std::uint64_t>(route_index) << kRouteShift, err, kafka::to_string(err));
}

void processor::on_delivery(std::uint64_t opaque, kafka::error_code err, std::string_view reason) {
  const std::size_t route_index = static_cast<std::size_t>(opaque >> kRouteShift);
  if (route_index >= routes_.size()) return;
  const route& r = routes_[route_index];
  if (r.kind == output_kind::alert) {
    if (err == kafka::error_code::no_error) {
      ++local_.alerts_sent[r.pipeline];
      return;
    }
    ++local_.alert_failures[r.pipeline];
    ++alert_failures_unreported_;
    const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
    if (now - last_alert_warning_ms_ >= kWarningIntervalMs) {
      last_alert_warning_ms_ = now;
      module_logger("pipeline")
          ->warn(
              "{}: a heavy-hitter event could not be sent to topic {}: {} ({} event(s) of all "
              "pipelines not sent since the last such line)",
              pipelines_[r.pipeline]->name(), sink_->topic_name(r.topic), reason,
              alert_failures_unreported_);
      alert_failures_unreported_ = 0;
    }
    return;
  }
  const kafka::offset_tracker::ticket ticket = opaque & kTicketMask;
  if (err != kafka::error_code::no_error) {
    forward_failed(r, err, reason, ticket);
    return;
  }
  tracker_.report(ticket, true);
  if (r.kind == output_kind::first_seen) {
    pipelines_[r.pipeline]->add_forwarded(1);
  } else {
    ++local_.duplicates_forwarded[r.pipeline];
  }
}

void processor::forward_failed(const route& r, kafka::error_code err, std::string_view reason,
                               std::optional<kafka::offset_tracker::ticket> ticket) {
  pipelines_[r.pipeline]->add_forward_failures(1);
  if (ticket) tracker_.report(*ticket, false);
  // Dropped by the producer's close at the stop, whose own lines say why (a fatal error,
  // outputs still undelivered at shutdown): not a failure to report as one.
  if (err == kafka::error_code::purge_queue || err == kafka::error_code::purge_inflight) return;
  if (!failure_.empty()) return;
  const auto& at = tracker_.first_failure();
  const std::string what = fmt::format(
      "forwarding to topic {} failed ({}: {}); consumption stopped{}", sink_->topic_name(r.topic),
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

bool processor::replaying(const kafka::record& r) const {
  const auto it = replay_until_.find(std::make_pair(r.topic_index, r.partition));
  return it != replay_until_.end() && r.offset < it->second;
}

void processor::drain(std::vector<kafka::partition_offset>& out) {
  tracker_.drain_committable(
      [&](std::size_t topic_index, std::int32_t partition, std::int64_t next) {
        if (next < 0) return;
        const auto key = std::make_pair(topic_index, partition);
        const auto it = positions_.find(key);
        if (it == positions_.end()) return;  // revoked meanwhile
        it->second = next;
        if (const auto replay = replay_until_.find(key); replay != replay_until_.end()) {
          // Storing an offset before the group's would move its commit back.
          if (next < replay->second) return;
          module_logger("kafka")->info(
              "partition {} [{}]: read again up to offset {}; forwarding from there on",
              topics_[topic_index], partition, replay->second);
          replay_until_.erase(replay);
        }
        out.push_back({topic_index, partition, next});
      });
}

void processor::poll(std::vector<kafka::partition_offset>& out) {
  if (sink_) sink_->poll();
  drain(out);
  publish();
}

bool processor::flush(std::chrono::milliseconds timeout,
                      std::vector<kafka::partition_offset>& out) {
  const bool done = !sink_ || sink_->flush(timeout);
  drain(out);
  publish();
  return done;
}

void processor::assigned(const kafka::topic_partition& tp, std::optional<std::int64_t> start) {
  assigned_any_ = true;  // also told by assignment_begins(), for an assignment of none
  // A new assignment of a partition starts with a clean slate of deliveries; its position
  // is known from its first message on, or from the snapshot it starts at.
  positions_[std::make_pair(tp.topic_index, tp.partition)] = start.value_or(-1);
  // Without a snapshot's position, the windows have not counted this partition's recent
  // items (unless it was revoked from this instance in the same rebalance): the group's
  // heavy-hitter figures miss them for a window.
  if (!start && returning_.count(std::make_pair(tp.topic_index, tp.partition)) == 0) {
    for (std::size_t i : topic_routes_[tp.topic_index]) pipelines_[i]->partitions_taken_over();
  }
  replay_until_.erase(std::make_pair(tp.topic_index, tp.partition));
  tracker_.reset(tp.topic_index, tp.partition);
}

void processor::revoked(std::span<const kafka::topic_partition> partitions) {
  for (const auto& tp : partitions) {
    revoked_.insert(std::make_pair(tp.topic_index, tp.partition));
    positions_.erase(std::make_pair(tp.topic_index, tp.partition));
    replay_until_.erase(std::make_pair(tp.topic_index, tp.partition));
    tracker_.reset(tp.topic_index, tp.partition);
  }
}

void processor::restore_positions(const std::vector<kafka::partition_offset>& positions,
                                  std::int64_t snapshot_ms) {
  for (const auto& p : positions)
    restored_[std::make_pair(p.topic_index, p.partition)] = p.next_offset;
  restored_ms_ = snapshot_ms;
}

bool processor::start_behind_commit(const kafka::topic_partition& tp, std::int64_t start,
                                    std::int64_t committed) {
  using std::chrono::milliseconds;
  milliseconds longest{0};
  for (std::size_t i : topic_routes_[tp.topic_index]) {
    const pipeline_config& pc = pipelines_[i]->config();
    if (pc.heavy_hitters) longest = std::max(longest, pc.heavy_hitters->window);
    if (pc.dedup) longest = std::max(longest, pc.dedup->window);
  }
  const std::int64_t now =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  // A snapshot's time comes from a file: a negative one (before 1970, never written by
  // sketchd) counts as older than any window, without overflowing.
  const milliseconds age(restored_ms_ < 0 ? std::numeric_limits<std::int64_t>::max()
                                          : now - restored_ms_);
  const std::string& topic = topics_[tp.topic_index];
  if (age >= longest) {
    module_logger("kafka")->warn(
        "partition {} [{}] starts at the group's committed offset {}, past the snapshot's {}: the "
        "snapshot is older ({} s) than the windows of the pipelines reading it, so the messages "
        "between are not read again (their items are not in this instance's windows)",
        topic, tp.partition, committed, start, age.count() / 1000);
    positions_[std::make_pair(tp.topic_index, tp.partition)] = committed;
    // The windows have expired since: they miss this partition's recent items.
    for (std::size_t i : topic_routes_[tp.topic_index]) pipelines_[i]->partitions_taken_over();
    return false;
  }
  module_logger("kafka")->info(
      "partition {} [{}] starts at offset {} (restored state); the {} message(s) before offset "
      "{}, which the group has committed, go into the windows again without being forwarded "
      "(their outputs were delivered, by this instance before it stopped or by another member)",
      topic, tp.partition, start, committed - start, committed);
  replay_until_[std::make_pair(tp.topic_index, tp.partition)] = committed;
  return true;
}

void processor::start_known(const kafka::topic_partition& tp, std::int64_t start) {
  const auto it = positions_.find(std::make_pair(tp.topic_index, tp.partition));
  if (it != positions_.end() && it->second < 0) it->second = start;
}

std::optional<std::int64_t> processor::take_restored_position(const kafka::topic_partition& tp) {
  const auto it = restored_.find(std::make_pair(tp.topic_index, tp.partition));
  if (it == restored_.end()) return std::nullopt;
  const std::int64_t start = it->second;
  restored_.erase(it);
  return start;
}

bool processor::quiescent() const {
  return !failed() && tracker_.pending_messages() == 0 && (!sink_ || sink_->in_flight() == 0);
}

std::vector<kafka::partition_offset> processor::positions() const {
  std::vector<kafka::partition_offset> out;
  for (const auto& [key, next] : positions_) {
    if (next >= 0) out.push_back({key.first, key.second, next});
  }
  // Before the first assignment (the group is still joining, as after a crash, until the
  // dead member's session expires), the restored positions: the state holds those
  // partitions' messages up to there, and a snapshot written now must say so. Not later:
  // a partition the group gives to another member is no longer this instance's.
  if (!assigned_any_) {
    for (const auto& [key, next] : restored_) out.push_back({key.first, key.second, next});
  }
  return out;
}

std::optional<std::string> processor::fatal_error() const {
  return sink_ ? sink_->fatal_error() : std::nullopt;
}

void processor::log_held_back_warnings() {
  const std::int64_t wall_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
  warn_extract_failures(wall_ms, /*now=*/true);
  for (std::size_t i = 0; i < pipelines_.size(); ++i) {
    heavy_events_[i].clear();
    log_heavy_events(i, /*now=*/true);
  }
  if (alert_failures_unreported_ > 0) {
    module_logger("pipeline")
        ->warn("{} more heavy-hitter event(s) of all pipelines could not be sent",
               alert_failures_unreported_);
    alert_failures_unreported_ = 0;
  }
}

void processor::warn_extract_failures(std::int64_t wall_ms, bool now) {
  for (std::size_t i = 0; i < pipelines_.size(); ++i) {
    if (!failure_example_[i].set ||
        (!now && wall_ms - last_failure_warning_ms_[i] < kWarningIntervalMs))
      continue;
    const pipeline_counters c = pipelines_[i]->counters();
    std::string reasons;
    std::string reason_fields;  // "reason":count,… for the JSON log
    std::uint64_t total = 0;
    for (std::size_t r = 1; r < kExtractFailureCount; ++r) {
      const std::uint64_t n = c.failures[r] - failures_warned_[i][r];
      if (n == 0) continue;
      total += n;
      const std::string_view reason = to_string(static_cast<extract_failure>(r));
      reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", n, reason);
      reason_fields += fmt::format("{}\"{}\":{}", reason_fields.empty() ? "" : ",", reason, n);
    }
    const failure_example& ex = failure_example_[i];
    if (total > 0) {
      std::string fields = "\"pipeline\":";
      json::append_string(fields, pipelines_[i]->name());
      fields += fmt::format(",\"skipped\":{},\"reasons\":{{{}}},\"example\":{{\"topic\":", total,
                            reason_fields);
      json::append_string(fields, topics_[ex.topic_index]);
      fields += fmt::format(",\"partition\":{},\"offset\":{}}}", ex.partition, ex.offset);
      const log_fields in_json(std::move(fields));
      module_logger("pipeline")
          ->warn(
              "{}: skipped {} message(s) without a usable item ({}); one is at topic {} partition "
              "{} offset {}",
              pipelines_[i]->name(), total, reasons, topics_[ex.topic_index], ex.partition,
              ex.offset);
    }
    failures_warned_[i] = c.failures;
    failure_example_[i] = {};
    last_failure_warning_ms_[i] = wall_ms;
  }
}

void processor::publish() {
  std::lock_guard lock(mutex_);
  published_ = local_;
}

void processor::consumption_stopped() {
  // The pipelines' forwarding failures first: a scrape never shows consumption stopped
  // without the failures that stopped it.
  for (const auto& p : pipelines_) p->publish_counters();
  std::lock_guard lock(mutex_);
  published_ = local_;
  stopped_ = true;
}

void processor::collect(std::vector<metrics::metric_family>& out) const {
  using metrics::metric_family;
  using metrics::metric_type;
  metric_family dups{"sketchd_dedup_duplicates_forwarded_total",
                     "Duplicate events delivered to the pipeline's dedup.duplicates_topic.",
                     metric_type::counter,
                     {}};
  metric_family sent{"sketchd_heavy_hitter_alerts_sent_total",
                     "Heavy-hitter events (an item entering or leaving the heavy set) delivered to "
                     "heavy_hitters.alerts_topic.",
                     metric_type::counter,
                     {}};
  metric_family failed_alerts{
      "sketchd_heavy_hitter_alert_failures_total",
      "Heavy-hitter events that could not be delivered to heavy_hitters.alerts_topic.",
      metric_type::counter,
      {}};
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < pipelines_.size(); ++i) {
    const std::vector<metrics::label> p{{"pipeline", pipelines_[i]->name()}};
    if (outputs_[i].duplicate)
      dups.samples.push_back({p, static_cast<double>(published_.duplicates_forwarded[i])});
    if (outputs_[i].alert) {
      sent.samples.push_back({p, static_cast<double>(published_.alerts_sent[i])});
      failed_alerts.samples.push_back({p, static_cast<double>(published_.alert_failures[i])});
    }
  }
  if (!dups.samples.empty()) out.push_back(std::move(dups));
  if (!sent.samples.empty()) {
    out.push_back(std::move(sent));
    out.push_back(std::move(failed_alerts));
  }
  // Read now, not at the end of a batch: a batch waiting on the producer's full queue
  // (the output brokers down) is exactly when this figure matters.
  out.push_back({"sketchd_producer_queue_messages",
                 "Events produced to output topics and not yet acknowledged by the brokers.",
                 metric_type::gauge,
                 {{{}, static_cast<double>(sink_ ? sink_->in_flight() : 0)}}});
  out.push_back({"sketchd_consumption_stopped",
                 "1 when consumption stopped after a final forwarding failure (see /readyz and the "
                 "log); 0 otherwise.",
                 metric_type::gauge,
                 {{{}, stopped_ ? 1.0 : 0.0}}});
}

}  // namespace sketchd
