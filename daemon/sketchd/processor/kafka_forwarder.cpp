#include "sketchd/processor/kafka_forwarder.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "sketchd/util/logging.h"

namespace sketchd {

kafka_forwarder::kafka_forwarder(const kafka::sink_options& options)
    : sink_(options, [this](std::uint64_t opaque, kafka::error_code err, std::string_view reason) {
        if (on_delivery_) on_delivery_(opaque, err, reason);
      }) {}

std::vector<std::string> output_topics(const config& cfg) {
  std::vector<std::string> topics;
  for (const pipeline_config& pc : cfg.pipelines) {
    for (const std::string_view t : output_topics_of(pc)) {
      if (std::find(topics.begin(), topics.end(), t) == topics.end()) topics.emplace_back(t);
    }
  }
  return topics;
}

std::unique_ptr<forwarder> make_kafka_forwarder(const config& cfg,
                                                const std::string& bootstrap_servers) {
  kafka::sink_options o;
  o.topics = output_topics(cfg);
  if (o.topics.empty()) return nullptr;
  o.bootstrap_servers = bootstrap_servers;
  o.properties = cfg.kafka.properties;
  auto out = std::make_unique<kafka_forwarder>(o);
  module_logger("kafka")->info("forwarding to {} output topic(s) with an idempotent producer",
                               o.topics.size());
  return out;
}

}  // namespace sketchd
