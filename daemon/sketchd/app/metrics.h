// The metrics of the daemon's top floor: its build, the messages consumed by topic, the
// processing thread's stall, the input's Kafka figures and the process's own. The
// pipelines, the processor and the snapshotter register theirs themselves.
#pragma once

#include <cstdint>
#include <mutex>
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

// The messages consumed, by topic: counted by the processing thread, published once per
// batch for the scrape. Thread-safe.
class consumed_counters {
 public:
  explicit consumed_counters(std::vector<std::string> topics);

  // By the processing thread, after each batch: its totals so far, by topic index.
  void publish(const std::vector<std::uint64_t>& by_topic);

  // sketchd_messages_consumed_total{topic}.
  void collect(std::vector<metrics::metric_family>& out) const;

 private:
  const std::vector<std::string> topics_;
  mutable std::mutex mutex_;
  std::vector<std::uint64_t> by_topic_;
};

// sketchd_build_info{version, revision} = 1.
void collect_build_info(std::vector<metrics::metric_family>& out);

// sketchd_processing_stalled_seconds.
void collect_stall(const readiness& ready, std::vector<metrics::metric_family>& out);

// sketchd_kafka_consumer_lag_messages{topic, partition}, sketchd_kafka_brokers_up,
// sketchd_kafka_assigned_partitions, sketchd_kafka_commit_failures_total,
// sketchd_kafka_uncommitted_messages and sketchd_kafka_consume_errors_total.
void collect_input(const kafka::source& input, std::vector<metrics::metric_family>& out);

}  // namespace sketchd::app
