#include "sketchd/app/metrics.h"

#include <prometheus/gauge.h>

#include <chrono>
#include <optional>
#include <utility>

#include "sketchd/http/server.h"
#include "sketchd/kafka/source.h"
#include "sketchd/util/build_info.h"

namespace sketchd::app {

using prometheus::MetricType;

consumed_counters::consumed_counters(metrics::registry& registry,
                                     const std::vector<std::string>& topics)
    : published_(topics.size(), 0) {
  auto& family = prometheus::BuildCounter()
                     .Name("sketchd_messages_consumed_total")
                     .Help("Messages consumed from Kafka, by topic.")
                     .Register(registry.families());
  for (const auto& t : topics) counters_.push_back(&family.Add({{"topic", t}}));
}

void consumed_counters::publish(const std::vector<std::uint64_t>& by_topic) {
  for (std::size_t i = 0; i < counters_.size(); ++i) {
    if (by_topic[i] == published_[i]) continue;
    counters_[i]->Increment(static_cast<double>(by_topic[i] - published_[i]));
    published_[i] = by_topic[i];
  }
}

void register_build_info(metrics::registry& registry) {
  // A family of its own, not a prometheus::Family: prometheus-cpp sorts a series' labels by
  // name, and the contract writes this one's version first (as Prometheus' own build_info).
  registry.add([](std::vector<prometheus::MetricFamily>& out) {
    auto f = metrics::family("sketchd_build_info",
                             "sketchd's version and source revision; always 1.", MetricType::Gauge);
    metrics::add(f, {{"version", SKETCHD_VERSION}, {"revision", build_revision()}}, 1);
    out.push_back(std::move(f));
  });
}

void collect_stall(const readiness& ready, std::vector<prometheus::MetricFamily>& out) {
  const auto stalled = ready.stalled();
  out.push_back(metrics::single(
      "sketchd_processing_stalled_seconds",
      "How long the processing thread has not come round its loop, once that is past its limit "
      "(60 s; 10 minutes in a snapshot, a rebalance, the start or the stop): /healthz then "
      "answers 503. 0 while it is alive.",
      MetricType::Gauge, stalled ? std::chrono::duration<double>(*stalled).count() : 0.0));
}

void collect_input(const kafka::source& input, std::vector<prometheus::MetricFamily>& out) {
  auto lag = metrics::family(
      "sketchd_kafka_consumer_lag_messages",
      "Messages between the group's committed offset and the end of each assigned partition.",
      MetricType::Gauge);
  for (const auto& l : input.lag()) {
    metrics::add(lag, {{"topic", l.topic}, {"partition", std::to_string(l.partition)}},
                 static_cast<double>(l.lag));
  }
  out.push_back(std::move(lag));
  auto up = metrics::family("sketchd_kafka_brokers_up",
                            "Brokers of the input cluster the consumer has an open connection to "
                            "(0: Kafka unreachable).",
                            MetricType::Gauge);
  if (const std::optional<int> n = input.brokers_up()) metrics::add(up, {}, *n);
  out.push_back(std::move(up));
  out.push_back(metrics::single(
      "sketchd_kafka_assigned_partitions",
      "Input partitions the consumer group has assigned to this instance (0 before its first "
      "assignment, or when the other members hold them all).",
      MetricType::Gauge, static_cast<double>(input.assigned_partitions())));
  out.push_back(metrics::single(
      "sketchd_kafka_commit_failures_total",
      "Commits of the stored input offsets that failed (retried at the next commit interval).",
      MetricType::Counter, static_cast<double>(input.commit_failures())));
  auto uncommitted = metrics::family(
      "sketchd_kafka_uncommitted_messages",
      "Input messages read and not yet committed: what a crash would read again (and forward "
      "again, those whose outputs were delivered).",
      MetricType::Gauge);
  if (const std::optional<std::int64_t> n = input.uncommitted_messages())
    metrics::add(uncommitted, {}, static_cast<double>(*n));
  out.push_back(std::move(uncommitted));
  out.push_back(metrics::single(
      "sketchd_kafka_consume_errors_total",
      "Errors the Kafka client reported in place of a message (a missing topic, a partition that "
      "cannot be fetched), each skipped.",
      MetricType::Counter, static_cast<double>(input.consume_errors())));
}

}  // namespace sketchd::app
