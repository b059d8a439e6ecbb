// The metrics of the daemon's top floor: its build, the messages consumed by topic, the
// processing thread's stall, the input's Kafka figures and the process's own. The
// pipelines, the processor and the snapshotter register theirs themselves.
#pragma once

#include <prometheus/counter.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sketchd/metrics/metrics.h"

namespace sketchd {
class readiness;
namespace kafka {
class source;
}
}  // namespace sketchd

namespace sketchd::app {

// sketchd_messages_consumed_total{topic}: counted by the processing thread, added to the
// registry's counters once per batch. Not thread-safe but for the counters themselves
// (prometheus-cpp's, read by the scrape).
class consumed_counters {
 public:
  // Registers the family in `registry`, a counter per topic (kafka::record::topic_index
  // indexes `topics`).
  consumed_counters(metrics::registry& registry, const std::vector<std::string>& topics);

  // By the processing thread, after each batch: its totals so far, by topic index.
  void publish(const std::vector<std::uint64_t>& by_topic);

 private:
  std::vector<prometheus::Counter*> counters_;
  std::vector<std::uint64_t> published_;
};

// Registers sketchd_build_info{version, revision} = 1 in `registry`.
void register_build_info(metrics::registry& registry);

// sketchd_processing_stalled_seconds.
void collect_stall(const readiness& ready, std::vector<prometheus::MetricFamily>& out);

// sketchd_kafka_consumer_lag_messages{topic, partition}, sketchd_kafka_brokers_up,
// sketchd_kafka_assigned_partitions, sketchd_kafka_commit_failures_total,
// sketchd_kafka_uncommitted_messages and sketchd_kafka_consume_errors_total.
void collect_input(const kafka::source& input, std::vector<prometheus::MetricFamily>& out);

}  // namespace sketchd::app
