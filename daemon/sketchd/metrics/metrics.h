// Prometheus metrics of the daemon, built at scrape time.
//
// Debian 12 ships no prometheus-cpp, so this is the part of it sketchd needs: collectors
// that produce metric families when /metrics is scraped (prometheus-cpp's Collectable)
// and the text exposition format 0.0.4 (its TextSerializer). Nothing here is touched on
// the per-message path: pipelines publish plain counters once per batch and a collector
// reads them under the pipeline's lock at scrape time, so series of items that leave the
// top-k simply stop being produced.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sketchd::metrics {

enum class metric_type { counter, gauge, untyped };

struct label {
  std::string name;
  std::string value;
};

struct sample {
  std::vector<label> labels;
  double value = 0;
};

struct metric_family {
  std::string name;
  std::string help;
  metric_type type = metric_type::gauge;
  std::vector<sample> samples;
};

// Appends the families it knows to `out`. Called at scrape time, from the HTTP thread.
using collector = std::function<void(std::vector<metric_family>& out)>;

// The set of collectors behind /metrics. Thread-safe: collectors may be added while
// scrapes run.
class registry {
 public:
  void add(collector c);
  // Runs every collector, merges families of the same name (samples appended in
  // collector order) and serializes them in the text format.
  [[nodiscard]] std::string scrape() const;
  [[nodiscard]] std::vector<metric_family> collect() const;

 private:
  mutable std::mutex mutex_;
  std::vector<collector> collectors_;
};

// The text exposition format 0.0.4: "# HELP", "# TYPE", then one line per sample with
// label values escaped (\\, \", \n) and values printed exactly (+Inf, -Inf, NaN).
[[nodiscard]] std::string serialize_text(const std::vector<metric_family>& families);

// A label value fit for a series: valid UTF-8 (each invalid byte becomes U+FFFD) and at
// most `max_bytes` bytes, cut at a character boundary (utf8::clean, with the label's limit).
[[nodiscard]] std::string clean_label_value(std::string_view raw, std::size_t max_bytes = 128);

// process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds and process_start_time_seconds, read from /proc as
// the Prometheus client libraries do.
void collect_process_metrics(std::vector<metric_family>& out);

}  // namespace sketchd::metrics
