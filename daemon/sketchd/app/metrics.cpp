#include "sketchd/app/metrics.h"

#include <chrono>
#include <optional>
#include <utility>

#include "sketchd/http/server.h"
#include "sketchd/kafka/source.h"
#include "sketchd/util/build_info.h"

namespace sketchd::app {

using metrics::metric_family;
using metrics::metric_type;

consumed_counters::consumed_counters(std::vector<std::string> topics)
    : topics_(std::move(topics)), by_topic_(topics_.size(), 0) {}

void consumed_counters::publish(const std::vector<std::uint64_t>& by_topic) {
  std::lock_guard lock(mutex_);
  by_topic_ = by_topic;
}

void consumed_counters::collect(std::vector<metric_family>& out) const {
  metric_family f{"sketchd_messages_consumed_total",
                  "Messages consumed from Kafka, by topic.",
                  metric_type::counter,
                  {}};
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < topics_.size(); ++i) {
    f.samples.push_back({{{"topic", topics_[i]}}, static_cast<double>(by_topic_[i])});
  }
  out.push_back(std::move(f));
}

void collect_build_info(std::vector<metric_family>& out) {
  out.push_back({"sketchd_build_info",
                 "sketchd's version and source revision; always 1.",
                 metric_type::gauge,
                 {{{{"version", SKETCHD_VERSION}, {"revision", build_revision()}}, 1}}});
}

void collect_stall(const readiness& ready, std::vector<metric_family>& out) {
  const auto stalled = ready.stalled();
  out.push_back({"sketchd_processing_stalled_seconds",
                 "How long the processing thread has not come round its loop, once that is "
                 "past its limit (60 s; 10 minutes in a snapshot, a rebalance, the start or "
                 "the stop): /healthz then answers 503. 0 while it is alive.",
                 metric_type::gauge,
                 {{{}, stalled ? std::chrono::duration<double>(*stalled).count() : 0.0}}});
}

void collect_input(const kafka::source& input, std::vector<metric_family>& out) {
  metric_family lag{
      "sketchd_kafka_consumer_lag_messages",
      "Messages between the group's committed offset and the end of each assigned partition.",
      metric_type::gauge,
      {}};
  for (const auto& l : input.lag()) {
    lag.samples.push_back({{{"topic", l.topic}, {"partition", std::to_string(l.partition)}},
                           static_cast<double>(l.lag)});
  }
  out.push_back(std::move(lag));
  metric_family up{"sketchd_kafka_brokers_up",
                   "Brokers of the input cluster the consumer has an open connection to "
                   "(0: Kafka unreachable).",
                   metric_type::gauge,
                   {}};
  if (const std::optional<int> n = input.brokers_up())
    up.samples.push_back({{}, static_cast<double>(*n)});
  out.push_back(std::move(up));
  out.push_back({"sketchd_kafka_assigned_partitions",
                 "Input partitions the consumer group has assigned to this instance (0 before "
                 "its first assignment, or when the other members hold them all).",
                 metric_type::gauge,
                 {{{}, static_cast<double>(input.assigned_partitions())}}});
  out.push_back(
      {"sketchd_kafka_commit_failures_total",
       "Commits of the stored input offsets that failed (retried at the next commit interval).",
       metric_type::counter,
       {{{}, static_cast<double>(input.commit_failures())}}});
  metric_family uncommitted{
      "sketchd_kafka_uncommitted_messages",
      "Input messages read and not yet committed: what a crash would read again (and "
      "forward again, those whose outputs were delivered).",
      metric_type::gauge,
      {}};
  if (const std::optional<std::int64_t> n = input.uncommitted_messages())
    uncommitted.samples.push_back({{}, static_cast<double>(*n)});
  out.push_back(std::move(uncommitted));
  out.push_back({"sketchd_kafka_consume_errors_total",
                 "Errors the Kafka client reported in place of a message (a missing topic, a "
                 "partition that cannot be fetched), each skipped.",
                 metric_type::counter,
                 {{{}, static_cast<double>(input.consume_errors())}}});
}

}  // namespace sketchd::app
