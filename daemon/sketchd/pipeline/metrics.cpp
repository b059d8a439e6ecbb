// The pipeline's metric families, built at scrape time from the counters published at the
// last batch and the structures, under the pipeline's lock, by a prometheus::Collectable
// of the pipeline's own: the top-k series are those of the items in the top-k at that
// scrape, so that the series of an item that left it disappear.
#include "sketchd/metrics/metrics.h"

#include <set>
#include <string>
#include <vector>

#include "sketchd/pipeline/pipeline.h"

namespace sketchd {

namespace {

using prometheus::MetricFamily;
using metric_type = prometheus::MetricType;

// A family of one series, labelled with the pipeline.
MetricFamily one(const std::string& pipeline, const char* name, const char* help, metric_type type,
                 double v) {
  MetricFamily f = metrics::family(name, help, type);
  metrics::add(f, {{"pipeline", pipeline}}, v);
  return f;
}

// The pipeline's families at each scrape. Thread-safe: collect() takes the pipeline's lock.
class pipeline_collectable final : public prometheus::Collectable {
 public:
  explicit pipeline_collectable(const pipeline& p) : p_(p) {}
  [[nodiscard]] std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> out;
    p_.collect(out);
    return out;
  }

 private:
  const pipeline& p_;
};

}  // namespace

void pipeline::register_metrics(metrics::registry& registry) const {
  registry.add(std::make_shared<const pipeline_collectable>(*this));
}

void pipeline::collect(std::vector<prometheus::MetricFamily>& out) const {
  std::lock_guard lock(mutex_);
  out.push_back(one(config_.name, "sketchd_pipeline_items_total",
                    "Items extracted from messages and fed to the pipeline.", metric_type::Counter,
                    static_cast<double>(published_.items)));
  MetricFamily failures = metrics::family(
      "sketchd_pipeline_extract_failures_total",
      "Messages skipped because no item could be extracted, by reason.", metric_type::Counter);
  for (std::size_t i = 1; i < kExtractFailureCount; ++i) {
    metrics::add(failures,
                 {{"pipeline", config_.name},
                  {"reason", std::string(to_string(static_cast<extract_failure>(i)))}},
                 static_cast<double>(published_.failures[i]));
  }
  out.push_back(std::move(failures));
  out.push_back(one(config_.name, "sketchd_pipeline_shards",
                    "Shards of windows this instance holds: 1 with scope: instance (one for "
                    "every partition), else one per owned input partition.",
                    metric_type::Gauge, static_cast<double>(shards_.size())));
  if (config_.heavy_hitters) collect_heavy_hitters(out);
  if (config_.dedup) collect_dedup(out);
}

void pipeline::collect_heavy_hitters(std::vector<prometheus::MetricFamily>& out) const {
  const auto& h = *config_.heavy_hitters;
  const std::string& p = config_.name;
  const double n = static_cast<double>(window_items());
  out.push_back(one(p, "sketchd_cms_window_items", "Items in the current heavy-hitter window (N).",
                    metric_type::Gauge, n));
  out.push_back(one(p, "sketchd_cms_error_bound_items",
                    "Count-Min error bound epsilon*N: estimates exceed true counts by at most "
                    "this, with probability 1-delta.",
                    metric_type::Gauge, error_bound()));
  out.push_back(one(p, "sketchd_heavy_hitter_threshold_ratio",
                    "Heavy-hitter threshold phi: share of the window's items.", metric_type::Gauge,
                    h.threshold));
  out.push_back(one(p, "sketchd_cms_window_incomplete_seconds",
                    "Time on the pipeline's clock until the heavy-hitter window again holds every "
                    "item of the partitions this instance took over from another member (or "
                    "started without); 0 when whole.",
                    metric_type::Gauge, static_cast<double>(clock_.incomplete_ms()) / 1000.0));
  std::size_t heavy_bytes = 0;
  for (const auto& s : shards_) heavy_bytes += s->heavy->size_bytes();
  out.push_back(one(p, "sketchd_cms_size_bytes",
                    "Memory of the rolling Count-Min sketches and their top-k trackers (one per "
                    "resident input partition with scope: partition).",
                    metric_type::Gauge, static_cast<double>(heavy_bytes)));
  // A gauge by nature, exposed as untyped: the contract's name ends in "_count", which
  // `promtool check metrics` reserves for histograms and summaries unless the family is
  // untyped (Prometheus stores untyped samples exactly like gauges).
  MetricFamily counts = metrics::family(
      "sketchd_heavy_hitter_estimated_count",
      "Estimated count in the window of each of the current top-k items.", metric_type::Untyped);
  MetricFamily ratios =
      metrics::family("sketchd_heavy_hitter_ratio",
                      "Estimated share of the window of each top-k item.", metric_type::Gauge);
  // Two items may clean to the same label (invalid bytes, truncation): keep the first,
  // which has the higher estimate, so that no series is duplicated.
  std::set<std::string, std::less<>> labels;
  for (const auto& e : top_of_shards(h.top_k)) {
    std::string label = metrics::clean_label_value(e.item);
    if (!labels.insert(label).second) continue;
    metrics::add(counts, {{"pipeline", p}, {"item", label}}, static_cast<double>(e.estimate));
    metrics::add(ratios, {{"pipeline", p}, {"item", label}},
                 n > 0 ? static_cast<double>(e.estimate) / n : 0.0);
  }
  out.push_back(std::move(counts));
  out.push_back(std::move(ratios));
  MetricFamily events = metrics::family(
      "sketchd_heavy_hitter_events_total",
      "Items entering or leaving the heavy set (estimate >= phi*N).", metric_type::Counter);
  metrics::add(events, {{"pipeline", p}, {"event", "enter"}},
               static_cast<double>(published_.heavy_enter));
  metrics::add(events, {{"pipeline", p}, {"event", "leave"}},
               static_cast<double>(published_.heavy_leave));
  out.push_back(std::move(events));
}

void pipeline::collect_dedup(std::vector<prometheus::MetricFamily>& out) const {
  const std::string& p = config_.name;
  out.push_back(one(p, "sketchd_dedup_first_seen_total",
                    "Items not seen before in the dedup window.", metric_type::Counter,
                    static_cast<double>(published_.first_seen)));
  out.push_back(one(p, "sketchd_dedup_duplicates_total",
                    "Items already seen in the dedup window (or false positives).",
                    metric_type::Counter, static_cast<double>(published_.duplicates)));
  out.push_back(one(p, "sketchd_dedup_forwarded_total",
                    "First-seen events delivered to the output topic.", metric_type::Counter,
                    static_cast<double>(published_.forwarded)));
  out.push_back(one(p, "sketchd_dedup_forward_failures_total",
                    "Outputs (first-seen events and duplicates) whose delivery failed for good.",
                    metric_type::Counter, static_cast<double>(published_.forward_failures)));
  const sketch::shards::bloom_figures f = bloom_figures();
  MetricFamily fill = metrics::family(
      "sketchd_bloom_fill_ratio",
      "Share of bits set in each Bloom generation (0 = newest); the mean over the resident "
      "input partitions with scope: partition.",
      metric_type::Gauge);
  for (std::size_t g = 0; g < f.fill_ratio.size(); ++g) {
    metrics::add(fill, {{"pipeline", p}, {"generation", std::to_string(g)}}, f.fill_ratio[g]);
  }
  out.push_back(std::move(fill));
  out.push_back(one(
      p, "sketchd_bloom_estimated_false_positive_ratio",
      "False-positive probability of a new item over all generations, estimated from their fill.",
      metric_type::Gauge, f.estimated_fpr));
  out.push_back(one(p, "sketchd_bloom_target_false_positive_ratio",
                    "Configured target false-positive rate of the dedup window.",
                    metric_type::Gauge, config_.dedup->fpr));
  out.push_back(one(p, "sketchd_bloom_estimated_items",
                    "Distinct items in the dedup window, estimated from the fill.",
                    metric_type::Gauge, f.estimated_items));
  std::size_t dedup_bytes = 0;
  for (const auto& s : shards_) dedup_bytes += s->dedup->size_bytes();
  out.push_back(one(p, "sketchd_bloom_size_bytes",
                    "Memory of the rolling Bloom filters (one per resident input partition with "
                    "scope: partition).",
                    metric_type::Gauge, static_cast<double>(dedup_bytes)));
  out.push_back(
      one(p, "sketchd_bloom_effective_window_seconds",
          "Time span the dedup generations cover now; below the configured window after bursts.",
          metric_type::Gauge, static_cast<double>(f.effective_window_ms) / 1000.0));
  out.push_back(one(p, "sketchd_bloom_window_seconds", "Configured dedup window (dedup.window).",
                    metric_type::Gauge,
                    static_cast<double>(config_.dedup->window.count()) / 1000.0));
  MetricFamily rotations = metrics::family(
      "sketchd_bloom_rotations_total",
      "Bloom generation rotations since sketchd started: at the end of a time slice (time) "
      "or when the newest generation reached its share of dedup.capacity first (capacity).",
      metric_type::Counter);
  const auto [by_time, by_capacity] = this->rotations();
  metrics::add(rotations, {{"pipeline", p}, {"reason", "time"}}, static_cast<double>(by_time));
  metrics::add(rotations, {{"pipeline", p}, {"reason", "capacity"}},
               static_cast<double>(by_capacity));
  out.push_back(std::move(rotations));
}

}  // namespace sketchd
