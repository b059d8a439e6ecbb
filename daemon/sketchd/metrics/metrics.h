// Prometheus metrics of the daemon, on prometheus-cpp's core (Debian's prometheus-cpp-dev).
//
// One registry behind /metrics. A component registers its own families in the
// prometheus::Registry (registry::families(): counters and gauges it updates once per
// batch, never per message), and adds a collectable for the figures it reads at scrape
// time (under a pipeline's lock, or from librdkafka's statistics): the top-k series go
// through one, so that series of items that leave the top-k simply stop being produced.
// The scrape merges the families of the same name and serializes them with prometheus-cpp's
// TextSerializer (the text exposition format 0.0.4). sketchd's own HTTP server serves them,
// not prometheus-cpp's pull Exposer: one listener for /metrics, the API and the probes, with
// one set of connection limits (and, later, one TLS and auth set-up), where the Exposer
// would open a second port on a server of its own (civetweb).
#pragma once

#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sketchd::metrics {

// The labels of one series, in the order they are written.
using labels = std::vector<prometheus::ClientMetric::Label>;

// An empty family of `type` to fill at scrape time.
[[nodiscard]] prometheus::MetricFamily family(std::string name, std::string help,
                                              prometheus::MetricType type);

// Appends a series of `labels` with `value` to `f`: a counter's or a gauge's value, by
// the family's type (an untyped one otherwise).
void add(prometheus::MetricFamily& f, labels series_labels, double value);

// The value of series `m` of a family of `type`: its counter's, gauge's or untyped value.
[[nodiscard]] double value_of(const prometheus::ClientMetric& m, prometheus::MetricType type);

// A family of one series without labels.
[[nodiscard]] prometheus::MetricFamily single(std::string name, std::string help,
                                              prometheus::MetricType type, double value);

// A collectable made of a function that appends families at scrape time, from the HTTP
// thread. Thread-safe as the function is.
class collector final : public prometheus::Collectable {
 public:
  using function = std::function<void(std::vector<prometheus::MetricFamily>& out)>;
  explicit collector(function f) : f_(std::move(f)) {}
  [[nodiscard]] std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  function f_;
};

// The set of families behind /metrics. Thread-safe: families and collectables may be
// added while scrapes run.
class registry {
 public:
  // Where components register the counters and gauges they update:
  // prometheus::BuildCounter().Name(…).Help(…).Register(families()). A family of the same
  // name and help registered again is the same family (prometheus-cpp's Merge).
  [[nodiscard]] prometheus::Registry& families() noexcept { return *families_; }

  // A collectable read at each scrape, after the registered families.
  void add(std::shared_ptr<const prometheus::Collectable> c);
  void add(collector::function f) { add(std::make_shared<const collector>(std::move(f))); }

  // Every family, one per name (the series of families of the same name appended in the
  // order they came), in first-seen order.
  [[nodiscard]] std::vector<prometheus::MetricFamily> collect() const;
  // collect() in the text format, by prometheus::TextSerializer.
  [[nodiscard]] std::string scrape() const;

 private:
  std::shared_ptr<prometheus::Registry> families_ = std::make_shared<prometheus::Registry>();
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<const prometheus::Collectable>> collectables_;
};

// A label value fit for a series: valid UTF-8 (each invalid byte becomes U+FFFD) and at
// most `max_bytes` bytes, cut at a character boundary (utf8::clean, with the label's limit).
[[nodiscard]] std::string clean_label_value(std::string_view raw, std::size_t max_bytes = 128);

// process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds and process_start_time_seconds, read from /proc as
// the Prometheus client libraries do (prometheus-cpp has none).
void collect_process_metrics(std::vector<prometheus::MetricFamily>& out);

}  // namespace sketchd::metrics
