// The processor's rate-limited log lines: skipped messages, heavy-set changes, heavy-hitter
// events lost or not sent. Each goes through a log_rate_limit, so that a flood neither fills
// the log nor goes unsaid.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "sketchd/processor/event_json.h"
#include "sketchd/processor/processor.h"
#include "sketchd/util/json.h"
#include "sketchd/util/logging.h"

namespace sketchd {

void processor::log_heavy_events(std::size_t p, bool now) {
  heavy_log& l = heavy_log_[p];
  const auto& name = pipelines_[p]->name();
  const auto t = log_rate_limit::clock::now();
  if (const auto held = l.limit.take_held(t, now)) {
    module_logger("pipeline")
        ->info(
            "{}: {} more heavy-set change(s) in the last {} s not logged ({} entered, {} left; "
            "at most {} lines every {} s): sketchd_heavy_hitter_events_total counts every "
            "one{}, and GET /api/v1/pipelines/{}/topk gives the current heavy set",
            name, held->count, std::chrono::duration_cast<std::chrono::seconds>(held->over).count(),
            l.held_entered, l.held_left, kHeavyLinesPerInterval, kWarningInterval.count(),
            outputs_[p].alert ? ", heavy_hitters.alerts_topic has each" : "", name);
    l.held_entered = 0;
    l.held_left = 0;
  }
  if (heavy_events_[p].empty()) return;
  const auto& hh = *pipelines_[p]->config().heavy_hitters;
  for (const sketch::heavy_event& e : heavy_events_[p]) {
    const bool entered = e.kind == sketch::heavy_event::kind::enter;
    if (!l.limit.admit(t)) {
      ++(entered ? l.held_entered : l.held_left);
      continue;
    }
    const double ratio = heavy_ratio(e);
    // An item leaves above the threshold (from 0.9·φ on, the heavy set's hysteresis) when
    // its estimate fell under the tracker's minimum (on a quiet window every item would
    // pass the threshold otherwise).
    const std::string why = !entered && e.estimate < sketch::top_k_tracker::kMinHeavyEstimate &&
                                    ratio >= 0.9 * hh.threshold
                                ? fmt::format(", under the minimum estimate of {}",
                                              sketch::top_k_tracker::kMinHeavyEstimate)
                                : std::string();
    const log_fields in_json(json::members(heavy_change_fields(name, e, hh.threshold)));
    module_logger("pipeline")
        ->info("{}: {} {} the heavy set: estimate {} of {} items ({:.2f}%, threshold {:.2f}%{})",
               name, loggable_item(e.item), entered ? "entered" : "left", e.estimate,
               e.window_items, 100.0 * ratio, 100.0 * hh.threshold, why);
  }
}

void processor::warn_heavy_events_dropped(std::size_t p) {
  if (!pipelines_[p]->config().heavy_hitters) return;
  const std::uint64_t dropped = pipelines_[p]->counters().heavy_events_dropped;
  if (dropped > heavy_events_dropped_[p]) {
    module_logger("pipeline")
        ->warn(
            "{}: {} heavy-hitter enter/leave events were lost, more in one batch than the "
            "top-k tracker's event buffer holds: this log and heavy_hitters.alerts_topic miss "
            "them; GET /api/v1/pipelines/{}/topk gives the current heavy set",
            pipelines_[p]->name(), dropped - heavy_events_dropped_[p], pipelines_[p]->name());
  }
  heavy_events_dropped_[p] = dropped;
}

void processor::warn_extract_failures(bool now) {
  const auto t = log_rate_limit::clock::now();
  for (std::size_t i = 0; i < pipelines_.size(); ++i) {
    if (!failure_example_[i].set) continue;
    log_rate_limit& limit = failure_warnings_[i];
    if (now) {
      (void)limit.take_held(t, /*now_anyway=*/true);
    } else if (limit.take_held(t)) {
      // The interval has passed with this warning held back: it is written now, and the
      // next interval begins with it.
      (void)limit.admit(t);
    } else if (!limit.admit(t)) {
      continue;
    }
    const pipeline_counters c = pipelines_[i]->counters();
    std::string reasons;
    std::vector<std::pair<std::string_view, std::uint64_t>> by_reason;  // for the JSON log
    std::uint64_t total = 0;
    for (std::size_t r = 1; r < kExtractFailureCount; ++r) {
      const std::uint64_t n = c.failures[r] - failures_warned_[i][r];
      if (n == 0) continue;
      total += n;
      const std::string_view reason = to_string(static_cast<extract_failure>(r));
      reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", n, reason);
      by_reason.emplace_back(reason, n);
    }
    const failure_example& ex = failure_example_[i];
    if (total > 0) {
      const log_fields in_json(
          json::members(skipped_fields(pipelines_[i]->name(), total, by_reason,
                                       {topics_[ex.topic_index], ex.partition, ex.offset})));
      module_logger("pipeline")
          ->warn(
              "{}: skipped {} message(s) without a usable item ({}); one is at topic {} partition "
              "{} offset {}",
              pipelines_[i]->name(), total, reasons, topics_[ex.topic_index], ex.partition,
              ex.offset);
    }
    failures_warned_[i] = c.failures;
    failure_example_[i] = {};
  }
}

void processor::warn_alert_failure(const route& r, std::string_view reason) {
  const auto t = log_rate_limit::clock::now();
  std::uint64_t held = 0;
  if (const auto h = alert_warnings_.take_held(t)) held = h->count;
  if (!alert_warnings_.admit(t)) return;
  module_logger("pipeline")
      ->warn(
          "{}: a heavy-hitter event could not be sent to topic {}: {} ({} event(s) of all "
          "pipelines not sent since the last such line)",
          pipelines_[r.pipeline]->name(), r.topic_name, reason, held + 1);
}

void processor::log_held_back_warnings() {
  warn_extract_failures(/*now=*/true);
  for (std::size_t i = 0; i < pipelines_.size(); ++i) {
    heavy_events_[i].clear();
    log_heavy_events(i, /*now=*/true);
  }
  if (const auto held = alert_warnings_.take_held(log_rate_limit::clock::now(), true)) {
    module_logger("pipeline")
        ->warn("{} more heavy-hitter event(s) of all pipelines could not be sent", held->count);
  }
}

}  // namespace sketchd
