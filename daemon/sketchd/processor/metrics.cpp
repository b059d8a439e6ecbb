// The processor's figures for /metrics: counted by the processing thread, published once
// per batch under the lock that collect() takes.
#include "sketchd/processor/processor.h"

namespace sketchd {

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

void processor::register_metrics(metrics::registry& registry) const {
  registry.add([this](std::vector<prometheus::MetricFamily>& out) { collect(out); });
}

void processor::collect(std::vector<prometheus::MetricFamily>& out) const {
  using prometheus::MetricType;
  auto dups = metrics::family(
      "sketchd_dedup_duplicates_forwarded_total",
      "Duplicate events delivered to the pipeline's dedup.duplicates_topic.", MetricType::Counter);
  auto sent = metrics::family(
      "sketchd_heavy_hitter_alerts_sent_total",
      "Heavy-hitter events (an item entering or leaving the heavy set) delivered to "
      "heavy_hitters.alerts_topic.",
      MetricType::Counter);
  auto failed_alerts = metrics::family(
      "sketchd_heavy_hitter_alert_failures_total",
      "Heavy-hitter events that could not be delivered to heavy_hitters.alerts_topic.",
      MetricType::Counter);
  auto dead_letters = metrics::family(
      "sketchd_dead_letters_total",
      "Messages skipped for an extract failure (by reason; tombstones are not sent) delivered to "
      "the pipeline's dead_letter_topic.",
      MetricType::Counter);
  auto failed_dead_letters = metrics::family(
      "sketchd_dead_letter_failures_total",
      "Dead letters whose delivery to dead_letter_topic finally failed (consumption stops).",
      MetricType::Counter);
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < pipelines_.size(); ++i) {
    const metrics::labels p{{"pipeline", pipelines_[i]->name()}};
    if (outputs_[i].dead_letter) {
      // Every reason a dead letter can have, from the start (at 0).
      for (std::size_t r = 1; r < kExtractFailureCount; ++r) {
        const auto why = static_cast<extract_failure>(r);
        if (why == extract_failure::tombstone) continue;
        metrics::add(dead_letters,
                     {{"pipeline", pipelines_[i]->name()}, {"reason", std::string(to_string(why))}},
                     static_cast<double>(published_.dead_letters[i][r]));
      }
      metrics::add(failed_dead_letters, p, static_cast<double>(published_.dead_letter_failures[i]));
    }
    if (outputs_[i].duplicate)
      metrics::add(dups, p, static_cast<double>(published_.duplicates_forwarded[i]));
    if (outputs_[i].alert) {
      metrics::add(sent, p, static_cast<double>(published_.alerts_sent[i]));
      metrics::add(failed_alerts, p, static_cast<double>(published_.alert_failures[i]));
    }
  }
  if (!dups.metric.empty()) out.push_back(std::move(dups));
  if (!sent.metric.empty()) {
    out.push_back(std::move(sent));
    out.push_back(std::move(failed_alerts));
  }
  if (!dead_letters.metric.empty()) {
    out.push_back(std::move(dead_letters));
    out.push_back(std::move(failed_dead_letters));
  }
  // Read now, not at the end of a batch: a batch waiting on the producer's full queue
  // (the output brokers down) is exactly when this figure matters.
  out.push_back(
      metrics::single("sketchd_producer_queue_messages",
                      "Events produced to output topics and not yet acknowledged by the brokers.",
                      MetricType::Gauge, static_cast<double>(out_ ? out_->in_flight() : 0)));
  out.push_back(metrics::single(
      "sketchd_consumption_stopped",
      "1 when consumption stopped after a final forwarding failure (see /readyz and the log); 0 "
      "otherwise.",
      MetricType::Gauge, stopped_ ? 1.0 : 0.0));
}

}  // namespace sketchd
