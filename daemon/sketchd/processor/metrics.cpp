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
                 {{{}, static_cast<double>(out_ ? out_->in_flight() : 0)}}});
  out.push_back({"sketchd_consumption_stopped",
                 "1 when consumption stopped after a final forwarding failure (see /readyz and the "
                 "log); 0 otherwise.",
                 metric_type::gauge,
                 {{{}, stopped_ ? 1.0 : 0.0}}});
}

}  // namespace sketchd
